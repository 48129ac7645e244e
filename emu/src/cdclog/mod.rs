//! Synthesis of Scylla-shaped CDC log rows for base writes
//! (`docs/cdc-log.md` §3): what a DML statement says ([`dml`]), the
//! serialized values that go into the log ([`values`]), what the statement
//! does to each partition ([`mutation`]), how Scylla turns that into log
//! rows ([`split`]), and the front's side of it: schemas, timestamp checks,
//! image reads (`synth`) and the log writes (`writer`).

pub mod dml;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
pub mod mutation;
pub mod schema;
pub mod split;
pub(crate) mod synth;
pub mod values;
pub(crate) mod writer;
