//! Fuzzing harnesses for the bytes this crate parses: a ROWS body read as a
//! page of a CDC log (`log_page`), the rows of a generation's streams
//! (`generation_rows`), the rows of a saved checkpoint
//! (`checkpoint_rows`) and a checkpoint as a key/value record
//! (`checkpoint_record`), each a target in `fuzz/` with seeds in
//! `fuzz/seeds/<target>/`. Public only for the fuzz crate; any panic is a
//! bug, errors are expected.

use std::collections::HashMap;
use std::time::Duration;

use shardwise::protocol::bytes::Bytes;
use shardwise::protocol::fuzzing::rows;
use shardwise::protocol::rows::Rows;
use shardwise::protocol::types::CqlTimestamp;

use crate::checkpoint::{push_groups, Checkpoint, GENERATION_MARKER};
use crate::consumer::Change;
use crate::generation::groups_of_rows;
use crate::plan::{Action, GroupId, Planner, PlannerConfig};
use crate::row::{operation_code, LogPage, LogSchema, RowIndex};
use crate::stream::{StreamGroup, StreamId};
use crate::time::Millis;

/// Decodes `data` as a ROWS result body (metadata with column specs, then
/// rows), builds the log schema, and reads every row through every getter.
pub fn log_page(data: &[u8]) {
    let Ok(rows) = Rows::decode(Bytes::copy_from_slice(data), 0) else { return };
    let Some(specs) = rows.metadata.specs.clone() else { return };
    let Ok(schema) = LogSchema::new(specs) else { return };
    let mut index = RowIndex::default();
    let Ok(page) = LogPage::new(&schema, &rows, &mut index) else { return };
    let position = |name: &str| schema.specs().iter().position(|s| s.name == name);
    let (Some(stream_id), Some(operation)) = (position("cdc$stream_id"), position("cdc$operation")) else { return };
    for row in page.iter() {
        // The metadata was checked with the page: the getters read what is
        // there, never their fallbacks.
        assert_eq!(row.raw_column(stream_id), Some(&row.stream_id().as_bytes()[..]));
        let code = row.raw_column(operation).and_then(operation_code);
        assert_eq!(code.map(i32::abs), Some(i32::from(row.operation().code())));
        assert_eq!(code.is_some_and(|c| c < 0), row.is_expiration());
        let _ = (row.stream_id(), row.time(), row.time_micros(), row.batch_seq_no(), row.ttl(), row.end_of_batch());
        let _ = row.operation();
        for c in schema.columns() {
            let _ = (row.raw_value(c.name()), row.is_deleted(c.name()));
        }
        let _ = Change::from_row(&row);
    }
}

/// The rows of `SELECT streams FROM cdc_streams_descriptions_v2` (and of
/// the generation timestamps): `data` is a `rows` input of the protocol's
/// fuzzing module. Every group read holds sorted, distinct, well-formed
/// ids, one group per row at most; the timestamps read as times. Returns the
/// number of groups (`None` on a typed error).
pub fn generation_rows(data: &[u8]) -> Option<usize> {
    let page = rows(data, &[])?;
    if let Ok(iter) = page.rows::<(CqlTimestamp,)>() {
        for row in iter.flatten() {
            let _ = Millis::from(row.0);
        }
    }
    let mut groups = Vec::new();
    groups_of_rows(&page, Millis(1), &mut groups).ok()?;
    assert!(groups.len() <= page.rows_count(), "{} groups of {} rows", groups.len(), page.rows_count());
    for g in &groups {
        let streams = g.streams();
        assert!(!streams.is_empty(), "an empty group");
        assert!(streams.windows(2).all(|w| w[0] < w[1]), "streams unsorted or repeated");
        assert_eq!(g.key(), streams[0], "a group is known by its first stream");
    }
    Some(groups.len())
}

/// The rows of a saved checkpoint (`SELECT group_id, progress`), then a
/// planner resumed from it. `data` is `[long generation][long now]` then a
/// `rows` input. The checkpoint's groups never include the generation
/// marker; resumed on a generation of its groups, the planner starts each
/// group at its saved progress (never before the generation), and the
/// windows it hands out stay inside the generation and move forward.
/// Returns the number of groups (`None` on a typed error).
pub fn checkpoint_rows(data: &[u8]) -> Option<usize> {
    let (head, rest) = data.split_first_chunk::<16>()?;
    let generation = Millis(i64::from_be_bytes(head[..8].try_into().ok()?));
    let now = Millis(i64::from_be_bytes(head[8..].try_into().ok()?));
    let page = rows(rest, &[])?;
    let mut checkpoint = Checkpoint { generation, groups: Vec::new() };
    let rows = page.rows::<(StreamId, Option<CqlTimestamp>)>().ok()?;
    push_groups(rows.map(|r| r.map(|(group, progress)| (group, progress, None::<i64>))), &mut checkpoint.groups)
        .ok()?;
    assert!(checkpoint.groups.len() <= page.rows_count());
    assert!(checkpoint.groups.iter().all(|g| g.group != GENERATION_MARKER), "the marker read as a group");

    let mut config = PlannerConfig::new(generation);
    config.window = Duration::from_secs(10);
    config.checkpoint_interval = Some(Duration::from_secs(5));
    let mut planner = Planner::new(config).ok()?;
    planner.restore(&checkpoint).ok()?;
    // The last saved progress of a group wins.
    let saved: HashMap<StreamId, Millis> = checkpoint.groups.iter().map(|g| (g.group, g.progress)).collect();
    let mut groups: Vec<StreamGroup> = saved.keys().filter_map(|id| StreamGroup::new([*id])).collect();
    groups.sort_by_key(StreamGroup::key);
    match planner.poll(0, now) {
        Action::FetchFirstGeneration { at } => assert_eq!(at, generation, "resumes at the saved generation"),
        other => panic!("a resumed planner starts with {other:?}"),
    }
    planner.next_generation_found(generation, groups).ok()?;
    assert_eq!(planner.group_count(), saved.len(), "one group per saved group");
    for i in 0..planner.group_count() {
        let id = GroupId(u32::try_from(i).expect("few groups"));
        let info = planner.group(id).expect("a group below the count");
        let progress = planner.progress(id).expect("a known group has progress");
        let expected = saved.get(&info.streams.key()).copied().map(|p| p.max(generation));
        assert_eq!(Some(progress), expected, "group {i} resumed elsewhere");
    }
    for step in 0..16 {
        match planner.poll(0, now) {
            Action::Read(w) => {
                assert!(w.from < w.to, "an empty window {w:?}");
                assert!(w.from >= generation, "a window before its generation {w:?}");
                assert_eq!(w.generation, generation);
                let before = planner.progress(w.group);
                planner.window_done(w.group, w.to).ok()?;
                assert!(planner.progress(w.group) > before, "step {step}: no progress after {w:?}");
            }
            Action::SaveCheckpoint => {
                let saved_now = planner.take_checkpoint().expect("a checkpoint once the generation is known");
                assert_eq!(saved_now.generation, generation);
                assert!(planner.restore(&saved_now).is_err(), "restored a running planner");
                break;
            }
            _ => break,
        }
    }
    Some(checkpoint.groups.len())
}

/// Splits `data` at its first zero byte into a checkpoint record's key and
/// value and parses them; a record that parses encodes back to the same
/// record, and folds into a checkpoint of its log. Whether it parsed.
pub fn checkpoint_record(data: &[u8]) -> bool {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let (key, value) = (&data[..split], data.get(split + 1..).unwrap_or(&[]));
    let Ok(record) = crate::checkpoint::record::parse_record(key, value) else { return false };
    let key = crate::checkpoint::record::record_key(&record.log, record.progress.group);
    let value = crate::checkpoint::record::record_value(record.generation, record.progress.progress);
    let again = crate::checkpoint::record::parse_record(key.as_bytes(), value.as_bytes());
    assert_eq!(again.as_ref(), Ok(&record), "a record does not round-trip");
    let mut fold = crate::checkpoint::record::RecordFold::new();
    fold.add(record.clone());
    let checkpoint = fold.checkpoint(&record.log).expect("the folded log");
    assert_eq!(checkpoint.groups, vec![record.progress]);
    true
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use shardwise::protocol::fuzzing::{rows_input, seed_files, write_seed_files};
    use shardwise::protocol::types::ColumnType;

    use super::*;
    use crate::row::tests::{sample_page, ser};

    fn seed_dir(target: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds").join(target)
    }

    fn id(token: u8, index: u8) -> StreamId {
        let mut b = [0u8; 16];
        b[0] = token;
        b[15] = (index << 4) | 1;
        StreamId::from_bytes(b)
    }

    fn input(columns: &[ColumnType], rows: &[Vec<Option<Vec<u8>>>]) -> Vec<u8> {
        let columns: Vec<(u8, ColumnType)> = columns.iter().map(|t| (0, t.clone())).collect();
        let rows: Vec<Vec<Option<&[u8]>>> = rows.iter().map(|r| r.iter().map(|v| v.as_deref()).collect()).collect();
        rows_input(&columns, &rows)
    }

    fn log_page_seeds() -> Vec<(&'static str, Vec<u8>)> {
        let mut body = Vec::new();
        sample_page(true).encode(&mut body).expect("encodes");
        vec![("three_changes", body.split_off(4))]
    }

    fn generation_seeds() -> Vec<(&'static str, Vec<u8>, Option<usize>)> {
        let set = ColumnType::Set(Box::new(ColumnType::Blob));
        let streams = |ids: &[StreamId]| Some(ser(ids.to_vec()));
        vec![
            (
                "two_vnodes",
                input(
                    std::slice::from_ref(&set),
                    &[vec![streams(&[id(9, 1), id(3, 1)])], vec![None], vec![streams(&[id(4, 2), id(4, 2)])]],
                ),
                Some(2),
            ),
            ("short_id", input(&[set], &[vec![Some(vec![0, 0, 0, 1, 0, 0, 0, 3, 1, 2, 3])]]), None),
            ("timestamps", input(&[ColumnType::Timestamp], &[vec![Some(ser(CqlTimestamp(1_700_000_000_000)))]]), None),
        ]
    }

    fn checkpoint_seeds() -> Vec<(&'static str, Vec<u8>, Option<usize>)> {
        let (generation, now) = (1_700_000_000_000i64, 1_700_000_100_000i64);
        let head = [generation.to_be_bytes(), now.to_be_bytes()].concat();
        let row =
            |group: StreamId, progress: i64| vec![Some(group.as_bytes().to_vec()), Some(ser(CqlTimestamp(progress)))];
        let marker = StreamId::from_bytes([0; 16]);
        let columns = [ColumnType::Blob, ColumnType::Timestamp];
        vec![
            (
                "marker_and_groups",
                [
                    head.clone(),
                    input(
                        &columns,
                        &[row(marker, generation), row(id(1, 1), generation + 30_000), row(id(7, 2), generation - 5)],
                    ),
                ]
                .concat(),
                Some(2),
            ),
            ("marker_only", [head.clone(), input(&columns, &[row(marker, generation)])].concat(), Some(0)),
            (
                "repeated_group",
                [head, input(&columns, &[row(id(1, 1), generation + 10), row(id(1, 1), generation + 20_000)])].concat(),
                Some(2),
            ),
        ]
    }

    fn record_seeds() -> Vec<(&'static str, Vec<u8>, bool)> {
        let record = |key: String, value: &str| [key.as_bytes(), &[0], value.as_bytes()].concat();
        let key = crate::checkpoint::record::record_key("ks.t_scylla_cdc_log", id(3, 1));
        vec![
            ("record", record(key.clone(), "1700000000000 1700000060000"), true),
            ("extremes", record(format!("k/0x{}", "00".repeat(16)), &format!("-1 {}", i64::MAX)), true),
            ("no_value", key.into_bytes(), false),
        ]
    }

    /// Regenerates the seed files of this crate's targets:
    /// `cargo test -p shardwise-cdc --lib write_seeds -- --ignored`.
    #[test]
    #[ignore = "writes fuzz/seeds"]
    fn write_seeds() {
        write_seed_files(&seed_dir("log_page"), &log_page_seeds());
        let g: Vec<_> = generation_seeds().into_iter().map(|(n, d, _)| (n, d)).collect();
        write_seed_files(&seed_dir("generation_rows"), &g);
        let c: Vec<_> = checkpoint_seeds().into_iter().map(|(n, d, _)| (n, d)).collect();
        write_seed_files(&seed_dir("checkpoint_rows"), &c);
        let r: Vec<_> = record_seeds().into_iter().map(|(n, d, _)| (n, d)).collect();
        write_seed_files(&seed_dir("checkpoint_record"), &r);
    }

    /// Each seed reaches what it was written for, and the committed files
    /// are the current seeds.
    #[test]
    fn seeds_reach_their_paths() {
        for (name, data) in log_page_seeds() {
            assert_eq!(std::fs::read(seed_dir("log_page").join(name)).ok(), Some(data), "stale seed {name}");
        }
        for (name, data, expected) in generation_seeds() {
            assert_eq!(generation_rows(&data), expected, "generation_rows/{name}");
            assert_eq!(std::fs::read(seed_dir("generation_rows").join(name)).ok(), Some(data), "stale seed {name}");
        }
        for (name, data, expected) in checkpoint_seeds() {
            assert_eq!(checkpoint_rows(&data), expected, "checkpoint_rows/{name}");
            assert_eq!(std::fs::read(seed_dir("checkpoint_rows").join(name)).ok(), Some(data), "stale seed {name}");
        }
        for (name, data, parses) in record_seeds() {
            assert_eq!(checkpoint_record(&data), parses, "checkpoint_record/{name}");
            assert_eq!(std::fs::read(seed_dir("checkpoint_record").join(name)).ok(), Some(data), "stale seed {name}");
        }
    }

    /// Every committed seed, including any kept from a fuzzer's finding.
    #[test]
    fn harnesses_run_on_every_seed_file() {
        for (name, data) in seed_files(&seed_dir("log_page")) {
            eprintln!("log_page/{name}");
            log_page(&data);
        }
        for (name, data) in seed_files(&seed_dir("generation_rows")) {
            eprintln!("generation_rows/{name}");
            generation_rows(&data);
        }
        for (name, data) in seed_files(&seed_dir("checkpoint_rows")) {
            eprintln!("checkpoint_rows/{name}");
            checkpoint_rows(&data);
        }
        for (name, data) in seed_files(&seed_dir("checkpoint_record")) {
            eprintln!("checkpoint_record/{name}");
            checkpoint_record(&data);
        }
    }

    #[test]
    fn garbage_is_not_a_panic() {
        for data in [&b""[..], &[0, 0, 0, 1, 0, 0, 0, 2][..], &[0xff; 64][..]] {
            log_page(data);
            generation_rows(data);
            checkpoint_rows(data);
            checkpoint_record(data);
        }
    }
}
