//! The parameters of one attempt (consistency, paging, timestamp), resolved
//! from the statement and the session's defaults. Their own module: the
//! topology queries run statements with them too, and would otherwise pull
//! in everything that builds requests ([`crate::execute`]).

use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::request::QueryParameters;

/// Per-attempt parameters resolved from the statement and session defaults.
#[derive(Debug, Clone, Copy)]
pub struct Params<'a> {
    /// Consistency level.
    pub consistency: Consistency,
    /// Serial consistency.
    pub serial_consistency: Option<Consistency>,
    /// Page size.
    pub page_size: Option<i32>,
    /// Paging state of the page to fetch.
    pub paging_state: Option<&'a [u8]>,
    /// Client timestamp.
    pub timestamp: Option<i64>,
}

impl<'a> Params<'a> {
    /// Parameters at `consistency`, with nothing else set.
    pub fn new(consistency: Consistency) -> Self {
        Params { consistency, serial_consistency: None, page_size: None, paging_state: None, timestamp: None }
    }

    pub(crate) fn query<V>(&self, values: V) -> QueryParameters<'a, V> {
        QueryParameters {
            page_size: self.page_size,
            paging_state: self.paging_state,
            serial_consistency: self.serial_consistency,
            timestamp: self.timestamp,
            ..QueryParameters::new(self.consistency, values)
        }
    }
}
