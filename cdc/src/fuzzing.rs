//! Fuzzing harnesses for the bytes this crate parses: a ROWS body read as a
//! page of a CDC log (`log_page`), the rows of a generation's streams
//! (`generation_rows`), the rows of a saved checkpoint
//! (`checkpoint_rows`), a checkpoint as a key/value record
//! (`checkpoint_record`), the stream sets of a tablets table
//! (`tablet_streams`: `system.cdc_timestamps` and `system.cdc_streams`
//! answers) and the lease table's rows (`lease_rows`), each a target in
//! `fuzz/` with seeds in `fuzz/seeds/<target>/`. The last two read the
//! pages as the engine gets them from the driver (a `QueryResult`), through
//! the same functions the engine calls. Public only for the fuzz crate; any
//! panic is a bug, errors are expected.

use std::collections::HashMap;
use std::time::Duration;

use shardwise::fuzzing::query_result;
use shardwise::protocol::bytes::Bytes;
use shardwise::protocol::fuzzing::rows;
use shardwise::protocol::rows::Rows;
use shardwise::protocol::types::CqlTimestamp;

use crate::checkpoint::{push_groups, Checkpoint, GENERATION_MARKER};
use crate::consumer::Change;
use crate::generation::groups_of_rows;
use crate::lease::{batch_owners, leases_of_page, members_of_page, was_applied};
use crate::plan::{Action, GroupId, Planner, PlannerConfig};
use crate::row::{operation_code, LogPage, LogSchema, RowIndex};
use crate::stream::{StreamGroup, StreamId};
use crate::tablets::{groups_of_stream_page, has_initial_tablets, set_timestamp};
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

/// Column names of the `tablet_streams` and `lease_rows` inputs (by index).
pub const RESULT_NAMES: [&str; 6] = ["stream_id", "timestamp", "initial_tablets", "item", "owner", "[applied]"];

/// What [`tablet_streams`] read of a page (`None`: a typed error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TabletStreams {
    /// The set's timestamp (`system.cdc_timestamps`), outer `None` on an error.
    pub timestamp: Option<Option<Millis>>,
    /// The groups of the set's streams (`system.cdc_streams`).
    pub groups: Option<usize>,
    /// Whether the keyspace has `initial_tablets` (`scylla_keyspaces`).
    pub tablets: bool,
}

/// A page of the tablets tables (`data` is a `rows` input of the protocol's
/// fuzzing module, columns named from [`RESULT_NAMES`]) read as a set's
/// timestamp, as its streams and as a keyspace's `initial_tablets`: every
/// stream makes one group of one stream, never more groups than rows.
pub fn tablet_streams(data: &[u8]) -> Option<TabletStreams> {
    let page = query_result(rows(data, &RESULT_NAMES)?);
    let timestamp = set_timestamp(&page).ok();
    let mut groups = Vec::new();
    let read = groups_of_stream_page(&page, Millis(1), &mut groups).ok();
    if read.is_some() {
        assert_eq!(groups.len(), page.rows_count(), "one group per stream");
        assert!(groups.iter().all(|g| g.streams().len() == 1), "a group of several streams");
    }
    let tablets = has_initial_tablets(&page);
    Some(TabletStreams { timestamp, groups: read.map(|()| groups.len()), tablets })
}

/// What [`lease_rows`] read of a page (`None`: a typed error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseRows {
    /// Members (`SELECT item` of the member partition).
    pub members: Option<usize>,
    /// Leases (`SELECT item, owner` of the lease partition).
    pub leases: Option<usize>,
    /// A conditional write's `[applied]`.
    pub applied: Option<bool>,
    /// The owners a refused conditional batch names.
    pub owners: Option<usize>,
}

/// A page of the lease table (`data` is a `rows` input, columns named from
/// [`RESULT_NAMES`]) read as members, as leases, and as a conditional
/// write's answer: one member per row, a lease only for a row whose item is
/// a stream id (printed back as that item), `[applied]` only with its
/// column.
pub fn lease_rows(data: &[u8]) -> Option<LeaseRows> {
    let page = query_result(rows(data, &RESULT_NAMES)?);
    let mut members = Vec::new();
    let members = members_of_page(&page, &mut members).ok().map(|()| members.len());
    if let Some(n) = members {
        assert_eq!(n, page.rows_count(), "one member per row");
    }
    let mut leases = HashMap::new();
    let leases = leases_of_page(&page, &mut leases).ok().map(|()| {
        for group in leases.keys() {
            assert_eq!(group.to_string().parse::<StreamId>().ok(), Some(*group), "a lease's group does not print back");
        }
        leases.len()
    });
    assert!(leases.unwrap_or(0) <= page.rows_count());
    let applied = was_applied(&page).ok();
    let specs = page.column_specs().unwrap_or(&[]);
    assert!(applied.is_none() || specs.iter().any(|s| s.name == "[applied]"), "applied without its column");
    let owners = batch_owners(&page).ok().map(|o| o.len());
    assert!(owners.unwrap_or(0) <= page.rows_count());
    Some(LeaseRows { members, leases, applied, owners })
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

    /// The pages a reader of a tablets table gets from the front: the
    /// front's own stream sets (`shardwise_emu::tablet_streams`) of tables
    /// of 1 to 16 tablets, split and merged, as `system.cdc_streams`
    /// (`stream_id`; `stream_state, stream_id`), `system.cdc_timestamps`
    /// and `scylla_keyspaces` answers. Expected: (groups, tablets).
    fn tablet_stream_seeds() -> Vec<(String, Vec<u8>, Option<usize>, bool)> {
        use shardwise_emu::tablet_streams::TabletStreams;
        use shardwise_emu::tablets::TabletMap;
        let mut rng = shardwise_emu::rng::SplitMix64(54);
        let mut out = Vec::new();
        let (blob, ts) = ((0, ColumnType::Blob), (1, ColumnType::Timestamp));
        let encode = |c: &[(u8, ColumnType)], rows: &[Vec<Option<Vec<u8>>>]| {
            let rows: Vec<Vec<Option<&[u8]>>> = rows.iter().map(|r| r.iter().map(|v| v.as_deref()).collect()).collect();
            rows_input(c, &rows)
        };
        for count in [1, 2, 4, 8, 16] {
            let map = TabletMap::new(count, 3, 2, 3);
            let mut sets = TabletStreams::new(&map, 1_700_000_000_000, &mut || rng.next_u64());
            if let Some(split) = map.split() {
                sets.resized(&split, 1_700_000_060_000, &mut || rng.next_u64());
            }
            if let Some(merged) = map.merge() {
                sets.resized(&merged, 1_700_000_120_000, &mut || rng.next_u64());
            }
            for (i, set) in sets.sets().iter().enumerate() {
                let ids: Vec<Vec<Option<Vec<u8>>>> =
                    set.streams.iter().map(|s| vec![Some(s.as_bytes().to_vec())]).collect();
                let n = ids.len();
                out.push((
                    format!("streams_{count}_set{i}"),
                    encode(std::slice::from_ref(&blob), &ids),
                    Some(n),
                    false,
                ));
                let stated: Vec<Vec<Option<Vec<u8>>>> = sets
                    .rows(i)
                    .iter()
                    .map(|(state, s)| vec![Some(state.to_be_bytes().to_vec()), Some(s.as_bytes().to_vec())])
                    .collect();
                out.push((
                    format!("states_{count}_set{i}"),
                    encode(&[(6, ColumnType::TinyInt), blob.clone()], &stated),
                    None,
                    false,
                ));
                let at = vec![vec![Some(ser(CqlTimestamp(set.timestamp_ms)))]];
                out.push((format!("timestamp_{count}_set{i}"), encode(std::slice::from_ref(&ts), &at), None, false));
            }
        }
        let int = (2, ColumnType::Int);
        out.push((
            "initial_tablets_8".into(),
            encode(std::slice::from_ref(&int), &[vec![Some(8i32.to_be_bytes().to_vec())]]),
            None,
            true,
        ));
        out.push(("initial_tablets_null".into(), encode(std::slice::from_ref(&int), &[vec![None]]), None, false));
        out.push(("no_keyspace_row".into(), encode(&[int], &[]), None, false));
        out.push(("no_set".into(), encode(&[ts], &[]), None, false));
        out.push((
            "short_stream".into(),
            encode(std::slice::from_ref(&blob), &[vec![Some(vec![1, 2, 3])]]),
            None,
            false,
        ));
        out.push(("null_stream".into(), encode(&[blob], &[vec![None]]), None, false));
        out
    }

    /// A `lease_rows` seed: name, input, expected members, leases, applied.
    type LeaseSeed = (String, Vec<u8>, Option<usize>, Option<usize>, Option<bool>);

    /// The lease table's pages as the readers of the tests see them:
    /// members, leases of the front's vnode streams with the grouping row,
    /// and the answers to conditional batches (applied; refused, in
    /// Cassandra's shape: the rows that exist; in ScyllaDB's: one row per
    /// statement, nulls where no row exists). Expected: (members, leases, applied).
    fn lease_seeds() -> Vec<LeaseSeed> {
        let text = |s: &str| Some(s.as_bytes().to_vec());
        let encode = |c: &[(u8, ColumnType)], rows: &[Vec<Option<Vec<u8>>>]| {
            let rows: Vec<Vec<Option<&[u8]>>> = rows.iter().map(|r| r.iter().map(|v| v.as_deref()).collect()).collect();
            rows_input(c, &rows)
        };
        let two = std::num::NonZeroU16::new(2).expect("two shards");
        let sharder = shardwise::protocol::sharding::Sharder::new(two, 12).expect("a sharder");
        let mut rng = shardwise_emu::rng::SplitMix64(54);
        let ring = [-3_000_000_000_000_000_000, 0, 4_000_000_000_000_000_000];
        let generation = shardwise_emu::Generation::build(1_700_000_000_000, &ring, sharder, &mut || rng.next_u64())
            .expect("a generation of a ring");
        let groups: Vec<String> =
            generation.streams().map(|s| StreamId::from_bytes(*s.as_bytes()).to_string()).collect();
        let (item, owner, applied) = ((3, ColumnType::Text), (4, ColumnType::Text), (5, ColumnType::Boolean));
        let grouping = "streams_per_query=1 shards=2 ignore_msb=12";
        let mut out = Vec::new();
        for n in [1usize, 2, 3, 5] {
            let members: Vec<_> = (0..n).map(|i| vec![text(&format!("printer-{i}"))]).collect();
            out.push((format!("members_{n}"), encode(std::slice::from_ref(&item), &members), Some(n), None, None));
        }
        for readers in [1usize, 2, 3] {
            let mut rows = vec![vec![text("grouping"), text(grouping)]];
            rows.extend(
                groups.iter().enumerate().map(|(i, g)| vec![text(g), text(&format!("printer-{}", i % readers))]),
            );
            let n = rows.len();
            out.push((
                format!("leases_{readers}_readers"),
                encode(&[item.clone(), owner.clone()], &rows),
                None,
                Some(n - 1),
                None,
            ));
        }
        let half: Vec<_> = groups.iter().take(3).map(|g| vec![text(g), None]).collect();
        out.push(("leases_expired_owners".into(), encode(&[item.clone(), owner.clone()], &half), None, Some(0), None));
        let bool_of = |b: bool| Some(vec![u8::from(b)]);
        out.push((
            "applied".into(),
            encode(std::slice::from_ref(&applied), &[vec![bool_of(true)]]),
            None,
            None,
            Some(true),
        ));
        let refused_cassandra: Vec<_> = groups
            .iter()
            .take(4)
            .map(|g| vec![bool_of(false), text("ks.t_scylla_cdc_log"), text("lease"), text(g), text("printer-1")])
            .collect();
        let cassandra_columns =
            [applied.clone(), (6, ColumnType::Text), (6, ColumnType::Text), item.clone(), owner.clone()];
        out.push(("refused_cassandra".into(), encode(&cassandra_columns, &refused_cassandra), None, None, Some(false)));
        let refused_scylla: Vec<_> = groups
            .iter()
            .take(4)
            .enumerate()
            .map(|(i, g)| {
                let held = i % 2 == 0;
                vec![bool_of(false), held.then(|| text(g)).flatten(), held.then(|| text("printer-0")).flatten()]
            })
            .collect();
        out.push((
            "refused_scylla".into(),
            encode(&[applied.clone(), item.clone(), owner.clone()], &refused_scylla),
            None,
            None,
            Some(false),
        ));
        out.push((
            "grouping_recorded".into(),
            encode(
                &[applied.clone(), item.clone(), owner.clone()],
                &[vec![bool_of(false), text("grouping"), text(grouping)]],
            ),
            None,
            None,
            Some(false),
        ));
        out.push(("no_members".into(), encode(std::slice::from_ref(&item), &[]), Some(0), None, None));
        out.push(("applied_null".into(), encode(&[applied], &[vec![None]]), None, None, None));
        out.push((
            "bad_item".into(),
            encode(&[item, owner], &[vec![text("0xzz"), text("p")], vec![None, None]]),
            None,
            None,
            None,
        ));
        out
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
        let t = tablet_stream_seeds();
        let t: Vec<_> = t.iter().map(|(n, d, ..)| (n.as_str(), d.clone())).collect();
        write_seed_files(&seed_dir("tablet_streams"), &t);
        let l = lease_seeds();
        let l: Vec<_> = l.iter().map(|(n, d, ..)| (n.as_str(), d.clone())).collect();
        write_seed_files(&seed_dir("lease_rows"), &l);
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
        for (name, data, groups, tablets) in tablet_stream_seeds() {
            let read = tablet_streams(&data).unwrap_or_else(|| panic!("tablet_streams/{name}: not a page"));
            assert_eq!((read.groups, read.tablets), (groups, tablets), "tablet_streams/{name}: {read:?}");
            assert_eq!(std::fs::read(seed_dir("tablet_streams").join(&name)).ok(), Some(data), "stale seed {name}");
        }
        for (name, data, members, leases, applied) in lease_seeds() {
            let read = lease_rows(&data).unwrap_or_else(|| panic!("lease_rows/{name}: not a page"));
            assert_eq!(
                (read.members, read.leases, read.applied),
                (members, leases, applied),
                "lease_rows/{name}: {read:?}"
            );
            assert_eq!(std::fs::read(seed_dir("lease_rows").join(&name)).ok(), Some(data), "stale seed {name}");
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
        for (name, data) in seed_files(&seed_dir("tablet_streams")) {
            eprintln!("tablet_streams/{name}");
            tablet_streams(&data);
        }
        for (name, data) in seed_files(&seed_dir("lease_rows")) {
            eprintln!("lease_rows/{name}");
            lease_rows(&data);
        }
    }

    #[test]
    fn garbage_is_not_a_panic() {
        for data in [&b""[..], &[0, 0, 0, 1, 0, 0, 0, 2][..], &[0xff; 64][..]] {
            log_page(data);
            generation_rows(data);
            checkpoint_rows(data);
            checkpoint_record(data);
            tablet_streams(data);
            lease_rows(data);
        }
    }
}
