//! The derives' integration tests, one binary: one module per derive (`udt`
//! for the two UDT derives), and `common` for what they share.

mod attributes;
mod common;
mod deserialize_row;
mod serialize_values;
mod udt;
