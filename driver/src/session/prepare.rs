//! Preparing statements: once per text and keyspace in effect (the session
//! caches them), on every node so that EXECUTE works wherever it goes, with
//! the partitioner of the statement's table attached for routing.

use std::sync::Arc;

use super::plan::Ask;
use super::Session;
use crate::connection::Connection;
use crate::error::ExecutionError;
use crate::statement::{Batch, BatchStatement, PreparedStatement, Statement};

impl Session {
    /// Prepares a statement (once per text and keyspace set by `USE`:
    /// prepared statements are cached, see
    /// [`SessionConfig::prepared_cache_capacity`](crate::SessionConfig::prepared_cache_capacity)).
    pub async fn prepare(&self, statement: impl Into<Statement>) -> Result<PreparedStatement, ExecutionError> {
        let statement = statement.into();
        // Unqualified names resolve in the keyspace of the connection, so the
        // same text prepared after `USE` is another statement.
        let key = (self.keyspace(), statement.text().to_owned());
        let cached = self.inner.prepared.get(&key);
        if let Some(p) = cached {
            return Ok(with_options(p, &statement));
        }
        let seed = super::plan::next_seed();
        let state = self.state();
        let (_, node, conn) = self.pick(
            &state,
            seed,
            0,
            None,
            None,
            Ask {
                consistency: self.inner.config.consistency,
                idempotent: true,
                policy: self.inner.config.load_balancing.as_deref(),
            },
        )?;
        self.inner.metrics.prepare();
        let tracing = statement.options().tracing;
        let (p, traced) = conn.prepare_traced(statement.text(), tracing).await?;
        let mut tracing_ids: Vec<uuid::Uuid> = traced.into_iter().collect();
        // Prepare on the other nodes too, so EXECUTE works wherever it goes.
        let others: Vec<Connection> = state
            .nodes
            .iter()
            .filter(|other| !Arc::ptr_eq(other, &node))
            .filter_map(|other| other.connection(seed))
            .collect();
        drop(state);
        for c in others {
            if let Ok((_, Some(id))) = c.prepare_traced(statement.text(), tracing).await {
                tracing_ids.push(id);
            }
        }
        if tracing {
            let _ = p.inner.prepare_tracing_ids.set(tracing_ids);
        }
        let table = p.bind_specs().first().map(|spec| (spec.keyspace.clone(), spec.table.clone()));
        if let Some((keyspace, table)) = table {
            let partitioner = self.table_partitioner(&conn, keyspace, table).await;
            p.set_partitioner(partitioner);
        }
        self.inner.prepared.insert(key, p.clone());
        Ok(with_options(p, &statement))
    }

    /// The batch with each of its unprepared statements prepared (each text
    /// once, through the session's cache), so that its values are checked
    /// against the bind markers, bound by name where they are named, and
    /// the batch routed to its first statement's replicas. The batch's kind
    /// and options are kept.
    pub async fn prepare_batch(&self, batch: &Batch) -> Result<Batch, ExecutionError> {
        let mut prepared = batch.clone();
        for statement in prepared.statements_mut() {
            if let BatchStatement::Query(s) = statement {
                *statement = BatchStatement::PreparedStatement(self.prepare(s.clone()).await?);
            }
        }
        Ok(prepared)
    }
}

fn with_options(mut p: PreparedStatement, statement: &Statement) -> PreparedStatement {
    *p.options_mut() = statement.options().clone();
    p
}
