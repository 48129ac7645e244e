//! `SCYLLA_USE_METADATA_ID` on v4 (docs/protocol.md §1.8), byte for byte:
//! PREPARED carries a result metadata id after the statement id, EXECUTE
//! sends it before the parameters, a Rows answer with `Metadata_changed`
//! carries the new id; without the extension none of it is on the wire.

use bytes::Bytes;
use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::frame::{EnvelopeHeader, Opcode, ProtocolVersion, HEADER_LEN};
use shardwise_protocol::request::{encode_request, AnyRequest, Execute, Negotiated, QueryParameters};
use shardwise_protocol::response::{Response, ResponseMessage, ResultMessage};
use shardwise_protocol::types::ser::RawValues;
use shardwise_protocol::types::ColumnType;

const V4: ProtocolVersion = ProtocolVersion::V4;

/// A v4 PREPARED of `SELECT v FROM ks.t WHERE k = ?` with the result
/// metadata id `MD`, as ScyllaDB sends it when the extension is negotiated.
fn prepared_with_id() -> Vec<u8> {
    let mut b = vec![0, 0, 0, 4]; // Prepared
    b.extend([0, 2, 0xAA, 0xBB]); // statement id
    b.extend([0, 2, b'M', b'D']); // result metadata id
                                  // bind metadata: flags = global spec, 1 column, 1 pk index (0), ks.t, k int
    b.extend([0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0]);
    b.extend([0, 2, b'k', b's', 0, 1, b't', 0, 1, b'k', 0, 0x09]);
    // result metadata: flags = global spec, 1 column, ks.t, v text
    b.extend([0, 0, 0, 1, 0, 0, 0, 1]);
    b.extend([0, 2, b'k', b's', 0, 1, b't', 0, 1, b'v', 0, 0x0D]);
    b
}

fn header(opcode: Opcode, body: &[u8]) -> EnvelopeHeader {
    EnvelopeHeader {
        version: V4,
        is_response: true,
        flags: Default::default(),
        stream: 1,
        opcode,
        length: body.len() as u32,
    }
}

#[test]
fn a_v4_prepared_carries_the_id_only_with_the_extension() {
    let body = prepared_with_id();
    let h = header(Opcode::Result, &body);
    let with = Response::decode_ext(&h, Bytes::from(body.clone()), None, true).expect("decodes with the extension");
    let ResponseMessage::Result(ResultMessage::Prepared(p)) = &with.message else { panic!("{with:?}") };
    assert_eq!(p.id.as_ref(), [0xAA, 0xBB]);
    assert_eq!(p.result_metadata_id.as_deref(), Some(&b"MD"[..]));
    assert_eq!(p.metadata.pk_indexes, [0]);
    let specs = p.result_metadata.specs.as_deref().expect("result columns");
    assert_eq!((specs[0].name.as_str(), &specs[0].typ), ("v", &ColumnType::Text));
    // Re-encoded on v4 the id is written back: the same bytes.
    let mut again = Vec::new();
    with.encode(V4, 1, &mut again).expect("encodes");
    assert_eq!(&again[HEADER_LEN..], body.as_slice());
    // Without the extension the id is read as bind metadata: garbage.
    assert!(Response::decode(&h, Bytes::from(body)).is_err(), "decoded without the extension");
}

#[test]
fn a_v4_execute_sends_the_id_before_its_parameters() {
    let params = QueryParameters {
        skip_metadata: true,
        ..QueryParameters::new(Consistency::One, RawValues { names: None, values: vec![] })
    };
    let execute = Execute { id: &[0xAA, 0xBB], result_metadata_id: Some(b"MD"), params };
    let mut wire = Vec::new();
    encode_request(
        &Negotiated { request: &execute, metadata_id: true, tablet_version_block: None },
        V4,
        3,
        0,
        &mut wire,
    )
    .expect("encodes");
    // <id><result metadata id><consistency ONE><flags: skip metadata>
    assert_eq!(&wire[HEADER_LEN..], [0, 2, 0xAA, 0xBB, 0, 2, b'M', b'D', 0, 1, 0x02]);
    let back = AnyRequest::decode_ext(Opcode::Execute, V4, true, &wire[HEADER_LEN..]).expect("decodes");
    assert_eq!(back, AnyRequest::Execute(execute.clone()));
    // A server without the extension reads the id as the parameters.
    assert!(AnyRequest::decode(Opcode::Execute, V4, &wire[HEADER_LEN..]).is_err());
    // Not negotiated: v4's EXECUTE as it was, even for a statement that
    // has an id (prepared on another node that offered the extension).
    for request in [&execute, &Execute { result_metadata_id: None, ..execute.clone() }] {
        for metadata_id in [None, Some(false)] {
            let mut wire = Vec::new();
            match metadata_id {
                None => encode_request(request, V4, 3, 0, &mut wire),
                Some(metadata_id) => encode_request(
                    &Negotiated { request, metadata_id, tablet_version_block: None },
                    V4,
                    3,
                    0,
                    &mut wire,
                ),
            }
            .expect("encodes");
            assert_eq!(&wire[HEADER_LEN..], [0, 2, 0xAA, 0xBB, 0, 1, 0x02]);
        }
    }
    // Negotiated, but a statement without an id (prepared where the
    // extension was not offered): an empty id, which the server finds stale.
    let without = Execute { result_metadata_id: None, ..execute };
    let mut wire = Vec::new();
    encode_request(
        &Negotiated { request: &without, metadata_id: true, tablet_version_block: None },
        V4,
        3,
        0,
        &mut wire,
    )
    .expect("encodes");
    assert_eq!(&wire[HEADER_LEN..], [0, 2, 0xAA, 0xBB, 0, 0, 0, 1, 0x02]);
}

#[test]
fn v4_rows_with_metadata_changed_carry_the_new_id_and_columns() {
    // Rows: flags Metadata_changed | global spec, 1 column, new id "N2", ks.t v text, 1 row "x".
    let mut body = vec![0, 0, 0, 2, 0, 0, 0, 0x09, 0, 0, 0, 1, 0, 2, b'N', b'2'];
    body.extend([0, 2, b'k', b's', 0, 1, b't', 0, 1, b'v', 0, 0x0D]);
    body.extend([0, 0, 0, 1, 0, 0, 0, 1, b'x']);
    let h = header(Opcode::Result, &body);
    let known = [shardwise_protocol::types::ColumnSpec {
        keyspace: "ks".into(),
        table: "t".into(),
        name: "old".into(),
        typ: ColumnType::Int,
    }];
    let r = Response::decode_ext(&h, Bytes::from(body), Some(&known), true).expect("decodes");
    let ResponseMessage::Result(ResultMessage::Rows(rows)) = r.message else { panic!() };
    assert_eq!(rows.metadata.new_metadata_id.as_deref(), Some(&b"N2"[..]));
    let specs = rows.metadata.specs.as_deref().expect("the new columns, not the known ones");
    assert_eq!(specs[0].name, "v");
    assert_eq!(rows.rows_count(), 1);
}
