//! Fuzzing harness for the bytes this crate parses: a ROWS body read as a
//! page of a CDC log (the `log_page` target in `fuzz/`). Public only for the
//! fuzz crate; any panic is a bug, errors are expected.

use shardwise::protocol::bytes::Bytes;
use shardwise::protocol::rows::Rows;

use crate::consumer::Change;
use crate::row::{LogPage, LogSchema, RowIndex};

/// Decodes `data` as a ROWS result body (metadata with column specs, then
/// rows), builds the log schema, and reads every row through every getter.
pub fn log_page(data: &[u8]) {
    let Ok(rows) = Rows::decode(Bytes::copy_from_slice(data), 0) else { return };
    let Some(specs) = rows.metadata.specs.clone() else { return };
    let Ok(schema) = LogSchema::new(specs) else { return };
    let mut index = RowIndex::default();
    let Ok(page) = LogPage::new(&schema, &rows, &mut index) else { return };
    for row in page.iter() {
        let Ok(row) = row else { continue };
        let _ = (row.stream_id(), row.time(), row.time_micros(), row.batch_seq_no(), row.ttl(), row.end_of_batch());
        let _ = row.operation();
        for c in schema.columns() {
            let _ = (row.raw_value(c.name()), row.is_deleted(c.name()));
        }
        let _ = Change::from_row(&row);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn garbage_is_not_a_panic() {
        for data in [&b""[..], &[0, 0, 0, 1, 0, 0, 0, 2][..], &[0xff; 64][..]] {
            super::log_page(data);
        }
    }
}
