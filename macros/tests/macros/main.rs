//! The derives' integration tests, one binary: one module per derive, and
//! `common` for what both share.

mod common;
mod deserialize_row;
mod serialize_values;
