//! The cells a write puts into a column: collection overwrites (tombstone
//! at `T − 1` plus elements), element cells, synthesized list keys, and
//! putting a change on the static row or the selected rows.

use super::*;

impl Builder<'_, '_> {
    /// `X = v` (INSERT or UPDATE): a cell, or a collection tombstone just
    /// before `ts` plus the new elements.
    pub(super) fn overwrite(
        &mut self,
        schema: &TableSchema,
        idx: usize,
        v: Val,
        ts: i64,
        ttl: i32,
    ) -> Result<Option<ColumnChange>> {
        let col = &schema.columns[idx];
        if v == Val::Unset {
            return Ok(None);
        }
        let Some(kind) = col.collection() else {
            return Ok(Some(ColumnChange::Atomic(match v {
                Val::Bytes(b) => Cell { ts, ttl, value: Some(b) },
                _ => Cell { ts, ttl: 0, value: None },
            })));
        };
        let mut change = CollectionChange { tombstone: Some(ts - 1), cells: Vec::new() };
        if let Val::Bytes(b) = v {
            change.cells = self.elements(schema, idx, kind, &b, ts, ttl, false)?;
        }
        Ok(Some(ColumnChange::Collection(change)))
    }

    /// The cells a serialized collection value adds.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn elements(
        &mut self,
        schema: &TableSchema,
        idx: usize,
        kind: CollectionKind,
        bytes: &[u8],
        ts: i64,
        ttl: i32,
        prepend: bool,
    ) -> Result<Vec<ElementCell>> {
        let col = &schema.columns[idx];
        let bad = |e: values::ValueError| MutationError::BadValue { column: col.name.clone(), reason: e.to_string() };
        let cell = |key: &[u8], value: Option<&[u8]>| ElementCell {
            key: Bytes::copy_from_slice(key),
            ts,
            ttl,
            value: Some(Bytes::copy_from_slice(value.unwrap_or(&[]))),
        };
        Ok(match kind {
            CollectionKind::Map => {
                values::collection_entries(bytes).map_err(bad)?.into_iter().map(|(k, v)| cell(k, v)).collect()
            }
            CollectionKind::Set => {
                values::collection_elements(bytes).map_err(bad)?.into_iter().flatten().map(|e| cell(e, None)).collect()
            }
            CollectionKind::List => {
                let elements = values::collection_elements(bytes).map_err(bad)?;
                let mut out = Vec::with_capacity(elements.len());
                for e in elements {
                    let key = self.list_key(ts, prepend);
                    out.push(cell(&key, e));
                }
                out
            }
            CollectionKind::Udt => {
                let ColumnType::Udt { fields, .. } = &col.typ else { return Ok(Vec::new()) };
                values::udt_fields(bytes, fields.len())
                    .map_err(bad)?
                    .into_iter()
                    .enumerate()
                    .filter_map(|(i, f)| f.map(|f| cell(&(i as i16).to_be_bytes(), Some(f))))
                    .collect()
            }
        })
    }

    /// A list key in Scylla's scheme: a timeuuid of the write time plus a
    /// per-statement sequence, mirrored around 2010-01-01 for prepends so
    /// that they sort before appended keys.
    pub(super) fn list_key(&mut self, ts: i64, prepend: bool) -> [u8; 16] {
        let seq = self.list_seq;
        self.list_seq += 1;
        let micros = if prepend { PREPEND_EPOCH_MICROS - (ts - PREPEND_EPOCH_MICROS) } else { ts };
        let mut key = values::timeuuid_from_micros(micros, self.cx.list_node);
        // The sub-microsecond digit and the clock sequence carry `seq`, so
        // keys grow in element order.
        let time = (u64::from_be_bytes([0, 0, 0, 0, key[0], key[1], key[2], key[3]]) + u64::from(seq % 10)) as u32;
        key[0..4].copy_from_slice(&time.to_be_bytes());
        let clock = ((seq / 10) & 0x3fff) as u16 | 0x8000;
        key[8..10].copy_from_slice(&clock.to_be_bytes());
        key
    }

    pub(super) fn element(&self, key: Bytes, v: Val, ts: i64, ttl: i32) -> Option<ColumnChange> {
        let cell = match v {
            Val::Unset => return None,
            Val::Null => ElementCell { key, ts, ttl: 0, value: None },
            Val::Bytes(b) => ElementCell { key, ts, ttl, value: Some(b) },
        };
        Some(ColumnChange::Collection(CollectionChange { tombstone: None, cells: vec![cell] }))
    }

    /// Puts a column change on the static row or on every selected row.
    pub(super) fn apply(
        &self,
        m: &mut PartitionMutation,
        rows: &Option<Vec<Vec<Bytes>>>,
        idx: usize,
        change: ColumnChange,
    ) -> Result<()> {
        let schema = m.schema.clone();
        let one = || RowChange { columns: BTreeMap::from([(idx, change.clone())]), ..RowChange::default() };
        if schema.columns[idx].kind == ColumnKind::Static {
            m.static_row.merge(one());
            return Ok(());
        }
        let rows = rows.as_ref().ok_or_else(|| {
            MutationError::Where(format!("a write to {} needs the full clustering key", schema.columns[idx].name))
        })?;
        for ck in rows {
            m.row_mut(ck.clone()).merge(one());
        }
        Ok(())
    }
}

/// A list key standing for position `i` (inexact, see the module docs).
pub(super) fn positional_key(i: &[u8]) -> Bytes {
    let mut key = [0u8; 16];
    key[6] = 0x10;
    key[8] = 0x80;
    let n = i.len().min(4);
    key[16 - n..].copy_from_slice(&i[i.len() - n..]);
    Bytes::copy_from_slice(&key)
}
