//! Counts heap allocations: serializing a prepared EXECUTE with primitive
//! values into a reused buffer must not allocate, and decoding a Void
//! result or a page of rows whose metadata was skipped must not either.

use bytes::Bytes;
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::frame::{EnvelopeHeader, ProtocolVersion, HEADER_LEN};
use shardwise_protocol::request::{encode_request, Execute, QueryParameters};
use shardwise_protocol::response::{Response, ResponseMessage, ResultMessage};
use shardwise_protocol::rows::{ResultMetadata, Rows};
use shardwise_protocol::types::{ColumnSpec, ColumnType};

#[global_allocator]
static GLOBAL: testkit::alloc::CountingAllocator = testkit::alloc::CountingAllocator;

/// Allocations made by `f` on this thread.
fn allocations(f: impl FnOnce()) -> u64 {
    testkit::alloc::on_this_thread(f).1
}

#[test]
fn serializing_a_prepared_execute_does_not_allocate() {
    let id = [0xab; 16];
    let metadata_id = [0xcd; 16];
    let text = String::from("a text value");
    let blob = [1u8, 2, 3, 4];
    for version in [ProtocolVersion::V4, ProtocolVersion::V5] {
        let mut buf = Vec::with_capacity(4096);
        let n = allocations(|| {
            for i in 0..1000i64 {
                buf.clear();
                let execute = Execute {
                    id: &id,
                    result_metadata_id: (version == ProtocolVersion::V5).then_some(&metadata_id[..]),
                    params: QueryParameters {
                        consistency: Consistency::LocalQuorum,
                        values: (i, text.as_str(), &blob[..], 3.5f64, Some(7i32), None::<i16>, true),
                        skip_metadata: true,
                        timestamp: Some(1_700_000_000_000_000 + i),
                        ..Default::default()
                    },
                };
                encode_request(&execute, version, (i % 100) as i16, 0, &mut buf).expect("encodes");
            }
        });
        assert_eq!(n, 0, "{version:?}: allocations while serializing 1000 EXECUTEs");
        assert!(buf.len() > HEADER_LEN);
    }
}

#[test]
fn decoding_void_and_skipped_metadata_rows_does_not_allocate() {
    let specs = vec![
        ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: "pk".into(), typ: ColumnType::BigInt },
        ColumnSpec { keyspace: "ks".into(), table: "t".into(), name: "v".into(), typ: ColumnType::Text },
    ];
    let rows = Rows::from_raw(
        ResultMetadata { columns_count: 2, ..Default::default() },
        &[vec![Some(&5i64.to_be_bytes()[..]), Some(b"five")]],
    )
    .expect("rows");
    let mut wire = Vec::new();
    Response::new(ResponseMessage::Result(ResultMessage::Rows(rows)))
        .encode(ProtocolVersion::V4, 1, &mut wire)
        .expect("encodes");
    let header = EnvelopeHeader::decode(wire.first_chunk().expect("header"), usize::MAX).expect("header");
    let mut void = Vec::new();
    Response::new(ResponseMessage::Result(ResultMessage::Void))
        .encode(ProtocolVersion::V4, 1, &mut void)
        .expect("encodes");
    let void_header = EnvelopeHeader::decode(void.first_chunk().expect("header"), usize::MAX).expect("header");
    let bodies: Vec<Bytes> = (0..100).map(|_| Bytes::copy_from_slice(&wire[HEADER_LEN..])).collect();
    let voids: Vec<Bytes> = (0..100).map(|_| Bytes::copy_from_slice(&void[HEADER_LEN..])).collect();
    let mut sum = 0i64;
    let n = allocations(|| {
        for (body, void) in bodies.into_iter().zip(voids) {
            let resp = Response::decode(&header, body).expect("decodes");
            let ResponseMessage::Result(ResultMessage::Rows(rows)) = resp.message else { panic!("rows") };
            for row in rows.rows_with::<(i64, &str)>(&specs).expect("types") {
                let (pk, v) = row.expect("row");
                sum += pk + v.len() as i64;
            }
            let resp = Response::decode(&void_header, void).expect("decodes");
            assert!(matches!(resp.message, ResponseMessage::Result(ResultMessage::Void)));
        }
    });
    assert_eq!(sum, 900);
    assert_eq!(n, 0, "allocations while decoding 100 pages and 100 Void results");
}
