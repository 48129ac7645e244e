//! The `ctx` object of scripts: one session of either driver, its prepared
//! statements by key, and the request and row counters of a phase.
//!
//! latte's context API, on both drivers: `ctx.execute(cql)`,
//! `ctx.prepare(key, cql)`, `ctx.execute_prepared(key, values)` (all
//! async: scripts `.await` them) and `ctx.elapsed_secs()`. One
//! [`Context`] is shared by every request loop of a thread (the statements
//! and the session by all threads), so `prepare` takes `&self` and keeps the
//! statements behind a lock that requests only read.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rune::alloc::fmt::TryWrite;
use rune::runtime::{Formatter, Ref, Value, VmResult};
use rune::Any;
use shardwise_benches::consistency::parse_consistency;

use crate::error::LatteError;
use crate::values::{self, Column, ConvertError};

/// Which driver runs the script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DriverKind {
    /// This project's driver.
    Shardwise,
    /// The official ScyllaDB driver, `scylla` 1.9.
    Scylla,
}

impl DriverKind {
    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            DriverKind::Shardwise => "shardwise",
            DriverKind::Scylla => "scylla",
        }
    }
}

/// How to connect.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Contact points, `host:port`.
    pub nodes: Vec<String>,
    /// Consistency level name.
    pub consistency: String,
    /// Highest protocol version (4 or 5; the official driver speaks 4 only).
    pub protocol: u8,
    /// Per-request timeout (`None`: none).
    pub request_timeout: Option<Duration>,
    /// Connections per shard (per node on Cassandra).
    pub connections: usize,
}

enum Session {
    Shardwise(shardwise::Session),
    // Boxed: the official session is many times the size of ours.
    Scylla(Box<scylla::client::session::Session>),
}

enum Statement {
    Shardwise(shardwise::PreparedStatement),
    Scylla(scylla::statement::prepared::PreparedStatement),
}

struct Prepared {
    statement: Statement,
    columns: Vec<Column>,
}

struct Shared {
    session: Session,
    prepared: RwLock<HashMap<String, Arc<Prepared>>>,
    start: Instant,
    /// `ctx.load_cycle_count`, as a script's `prepare` may set it (latte's
    /// rows for `load` when `-d` does not say); [`UNSET`] until then.
    load_cycle_count: AtomicU64,
}

/// The value of [`Shared::load_cycle_count`] no script set.
const UNSET: u64 = u64::MAX;

/// Requests and rows of a phase, counted by the context's calls.
#[derive(Debug, Default)]
pub struct Counters {
    /// Requests sent (each `execute` or `execute_prepared`).
    pub requests: AtomicU64,
    /// Rows returned.
    pub rows: AtomicU64,
}

/// The `ctx` of scripts.
#[derive(Any, Clone)]
#[rune(item = ::latte)]
pub struct Context {
    shared: Arc<Shared>,
    counters: Arc<Counters>,
}

/// What a context call failed on.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CtxError {
    /// `execute_prepared` with a key no `prepare` registered.
    #[error("no statement prepared under key {key:?} (call ctx.prepare(key, cql) in `prepare` first)")]
    UnknownKey {
        /// The key.
        key: String,
    },
    /// The server or driver refused to prepare.
    #[error("preparing {key:?}: {message}")]
    Prepare {
        /// The key.
        key: String,
        /// The driver's error.
        message: String,
    },
    /// The values do not fit the statement's markers.
    #[error("statement {key:?}: {source}")]
    Bind {
        /// The key.
        key: String,
        /// What did not fit.
        #[source]
        source: ConvertError,
    },
    /// The server refused the request (a bad statement, a missing table).
    #[error("statement {key:?}: {message}")]
    Execute {
        /// The key, or the start of the CQL text of an unprepared statement.
        key: String,
        /// The driver's error.
        message: String,
    },
    /// The request timed out or found the server overloaded or unavailable.
    #[error("statement {key:?}: {message}")]
    Overload {
        /// The key, or the start of the CQL text of an unprepared statement.
        key: String,
        /// The driver's error.
        message: String,
    },
}

impl CtxError {
    /// As latte does: a request that times out or finds the server
    /// overloaded is counted in the report (a loaded server does that; it is
    /// a result); every other error ends the benchmark.
    pub fn is_counted(&self) -> bool {
        matches!(self, CtxError::Overload { .. })
    }

    fn request(key: String, overload: bool, e: &dyn std::fmt::Display) -> CtxError {
        let message = one_line(e);
        if overload {
            CtxError::Overload { key, message }
        } else {
            CtxError::Execute { key, message }
        }
    }
}

/// Whether a shardwise error is the server's or the network's load (a
/// timeout, overload, unavailability, a lost connection).
fn shardwise_overload(e: &shardwise::ExecutionError) -> bool {
    use shardwise::protocol::response::ErrorKind as K;
    use shardwise::ExecutionError as E;
    match e {
        E::Timeout(_) | E::AttemptTimeout { .. } | E::Connection(_) | E::NoConnection | E::PlanUnavailable { .. } => {
            true
        }
        E::Db(s) => matches!(
            s.error.kind,
            K::Overloaded | K::IsBootstrapping | K::Unavailable { .. } | K::ReadTimeout { .. } | K::WriteTimeout { .. }
        ),
        _ => false,
    }
}

/// [`shardwise_overload`] for the official driver.
fn scylla_overload(e: &scylla::errors::ExecutionError) -> bool {
    use scylla::errors::{DbError as D, ExecutionError as E, RequestAttemptError as A};
    match e {
        E::RequestTimeout(_) | E::ConnectionPoolError(_) => true,
        E::LastAttemptError(A::DbError(d, _)) => matches!(
            d,
            D::Overloaded | D::IsBootstrapping | D::Unavailable { .. } | D::ReadTimeout { .. } | D::WriteTimeout { .. }
        ),
        E::LastAttemptError(A::BrokenConnectionError(_) | A::UnableToAllocStreamId) => true,
        _ => false,
    }
}

/// The error value scripts get from context calls (and pass on with `?`).
#[derive(Debug, Any)]
#[rune(item = ::latte)]
pub struct CqlError(pub CtxError);

#[rune::function(instance, protocol = DISPLAY_FMT)]
pub fn cql_error_display(this: &CqlError, f: &mut Formatter) -> VmResult<()> {
    rune::vm_write!(f, "{}", this.0)
}

/// The first line of `cql`, shortened, as the "key" of an unprepared statement.
fn cql_label(cql: &str) -> String {
    let one_line = cql.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(60) {
        Some((at, _)) => format!("{}…", &one_line[..at]),
        None => one_line,
    }
}

fn one_line(e: impl std::fmt::Display) -> String {
    e.to_string().split_whitespace().collect::<Vec<_>>().join(" ")
}

impl Context {
    /// Connects with `driver`.
    pub async fn connect(driver: DriverKind, o: &ConnectOptions) -> Result<Context, LatteError> {
        let fail = |message: String| LatteError::Connect { driver: driver.name(), nodes: o.nodes.join(", "), message };
        let (sw_consistency, off_consistency) = parse_consistency(&o.consistency).map_err(|e| fail(one_line(e)))?;
        let session = match driver {
            DriverKind::Shardwise => {
                use shardwise::protocol::frame::ProtocolVersion;
                let max = match o.protocol {
                    4 => ProtocolVersion::V4,
                    5 => ProtocolVersion::V5,
                    v => return Err(fail(format!("protocol {v}: 4 or 5"))),
                };
                let mut b = shardwise::SessionBuilder::new()
                    .default_consistency(sw_consistency)
                    .connections_per_node(o.connections)
                    .request_timeout(o.request_timeout)
                    .protocol_versions(ProtocolVersion::V4, max);
                for n in &o.nodes {
                    b = b.known_node(n.clone());
                }
                Session::Shardwise(b.build().await.map_err(|e| fail(one_line(e)))?)
            }
            DriverKind::Scylla => {
                use scylla::client::execution_profile::ExecutionProfile;
                use scylla::client::PoolSize;
                if o.protocol != 4 {
                    return Err(fail(format!("protocol {}: the official driver speaks 4 only", o.protocol)));
                }
                let connections =
                    std::num::NonZeroUsize::new(o.connections.max(1)).ok_or_else(|| fail("no connections".into()))?;
                let profile =
                    ExecutionProfile::builder().consistency(off_consistency).request_timeout(o.request_timeout).build();
                let session = scylla::client::session_builder::SessionBuilder::new()
                    .known_nodes(&o.nodes)
                    .pool_size(PoolSize::PerShard(connections))
                    .default_execution_profile_handle(profile.into_handle())
                    .build()
                    .await
                    .map_err(|e| fail(one_line(e)))?;
                Session::Scylla(Box::new(session))
            }
        };
        Ok(Context {
            shared: Arc::new(Shared {
                session,
                prepared: RwLock::new(HashMap::new()),
                start: Instant::now(),
                load_cycle_count: AtomicU64::new(UNSET),
            }),
            counters: Arc::new(Counters::default()),
        })
    }

    /// The same session and statements with counters of their own (one
    /// context per thread, so that counting is never contended).
    pub fn with_fresh_counters(&self) -> Context {
        Context { shared: self.shared.clone(), counters: Arc::new(Counters::default()) }
    }

    /// This context's counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The protocol version in use, for the report.
    pub fn protocol(&self) -> String {
        match &self.shared.session {
            Session::Shardwise(s) => match s.connections().first() {
                Some(c) => format!("{:?}", c.version()),
                None => "?".into(),
            },
            Session::Scylla(_) => "V4".into(),
        }
    }

    async fn execute_unprepared(&self, cql: &str) -> Result<(), CtxError> {
        let failed = |overload, e: &dyn std::fmt::Display| CtxError::request(cql_label(cql), overload, e);
        let rows = match &self.shared.session {
            Session::Shardwise(s) => {
                let statement = shardwise::Statement::new(cql.to_string());
                s.execute_unpaged(&statement, ()).await.map_err(|e| failed(shardwise_overload(&e), &e))?.rows_count()
            }
            Session::Scylla(s) => {
                let r = s.query_unpaged(cql.to_string(), ()).await.map_err(|e| failed(scylla_overload(&e), &e))?;
                if r.is_rows() {
                    r.into_rows_result().map_err(|e| failed(false, &e))?.rows_num()
                } else {
                    0
                }
            }
        };
        self.count(rows);
        Ok(())
    }

    async fn prepare_key(&self, key: &str, cql: &str) -> Result<(), CtxError> {
        let failed = |e: &dyn std::fmt::Display| CtxError::Prepare { key: key.to_string(), message: one_line(e) };
        let prepared = match &self.shared.session {
            Session::Shardwise(s) => {
                let p = s.prepare(cql.to_string()).await.map_err(|e| failed(&e))?;
                let columns = p
                    .bind_specs()
                    .iter()
                    .map(|c| Column { name: c.name.clone(), kind: values::kind_of_shardwise(&c.typ) })
                    .collect();
                Prepared { statement: Statement::Shardwise(p), columns }
            }
            Session::Scylla(s) => {
                let p = s.prepare(cql.to_string()).await.map_err(|e| failed(&e))?;
                let columns = p
                    .get_variable_col_specs()
                    .iter()
                    .map(|c| Column { name: c.name().to_string(), kind: values::kind_of_scylla(c.typ()) })
                    .collect();
                Prepared { statement: Statement::Scylla(p), columns }
            }
        };
        self.shared.prepared.write().unwrap_or_else(|e| e.into_inner()).insert(key.to_string(), Arc::new(prepared));
        Ok(())
    }

    async fn execute_key(&self, key: &str, params: &Value) -> Result<(), CtxError> {
        let prepared = self
            .shared
            .prepared
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(key)
            .cloned()
            .ok_or_else(|| CtxError::UnknownKey { key: key.to_string() })?;
        let bound = values::bind(&prepared.columns, params)
            .map_err(|source| CtxError::Bind { key: key.to_string(), source })?;
        let failed = |overload, e: &dyn std::fmt::Display| CtxError::request(key.to_string(), overload, e);
        let rows = match (&self.shared.session, &prepared.statement) {
            (Session::Shardwise(s), Statement::Shardwise(p)) => {
                let row: Vec<_> = bound.into_iter().map(values::to_shardwise).collect();
                s.execute_unpaged(p, row).await.map_err(|e| failed(shardwise_overload(&e), &e))?.rows_count()
            }
            (Session::Scylla(s), Statement::Scylla(p)) => {
                let row: Vec<_> = bound.into_iter().map(values::to_scylla).collect();
                let r = s.execute_unpaged(p, row).await.map_err(|e| failed(scylla_overload(&e), &e))?;
                if r.is_rows() {
                    r.into_rows_result().map_err(|e| failed(false, &e))?.rows_num()
                } else {
                    0
                }
            }
            // A context holds one session, and prepares with it.
            _ => return Err(failed(false, &"prepared by another driver")),
        };
        self.count(rows);
        Ok(())
    }

    fn count(&self, rows: usize) {
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        self.counters.rows.fetch_add(rows as u64, Ordering::Relaxed);
    }
}

/// `ctx.execute(cql)`: an unprepared statement.
#[rune::function(instance)]
pub async fn execute(ctx: Ref<Context>, cql: Ref<str>) -> Result<(), CqlError> {
    ctx.execute_unprepared(&cql).await.map_err(CqlError)
}

/// `ctx.prepare(key, cql)`: prepares `cql` and keeps it under `key`.
#[rune::function(instance)]
pub async fn prepare(ctx: Ref<Context>, key: Ref<str>, cql: Ref<str>) -> Result<(), CqlError> {
    ctx.prepare_key(&key, &cql).await.map_err(CqlError)
}

/// `ctx.execute_prepared(key, values)`: runs the statement under `key` with
/// `values` (a list in marker order, or an object by marker name).
#[rune::function(instance)]
pub async fn execute_prepared(ctx: Ref<Context>, key: Ref<str>, params: Value) -> Result<(), CqlError> {
    ctx.execute_key(&key, &params).await.map_err(CqlError)
}

impl Context {
    /// The `ctx.load_cycle_count` a script set, if one did.
    pub fn load_cycle_count(&self) -> Option<u64> {
        Some(self.shared.load_cycle_count.load(Ordering::Relaxed)).filter(|&n| n != UNSET)
    }
}

/// `ctx.load_cycle_count = n` (in `prepare`, as latte's scripts set it):
/// the cycles `latte load` runs when `-d` does not say. Shared by every
/// clone of the context.
pub fn set_load_cycle_count(ctx: &mut Context, n: i64) -> VmResult<()> {
    match u64::try_from(n) {
        Ok(n) if n != UNSET => {
            ctx.shared.load_cycle_count.store(n, Ordering::Relaxed);
            VmResult::Ok(())
        }
        _ => VmResult::panic(format!("ctx.load_cycle_count = {n}: a count of cycles is not negative")),
    }
}

/// `ctx.load_cycle_count`: what a script set, else 0.
pub fn get_load_cycle_count(ctx: &Context) -> i64 {
    ctx.load_cycle_count().map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX))
}

/// `ctx.elapsed_secs()`: seconds since the context connected.
#[rune::function(instance)]
pub fn elapsed_secs(ctx: &Context) -> f64 {
    ctx.shared.start.elapsed().as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_one_short_line() {
        assert_eq!(cql_label("SELECT *\n   FROM t"), "SELECT * FROM t");
        let long = "x".repeat(100);
        assert_eq!(cql_label(&long).chars().count(), 61);
    }

    #[test]
    fn only_overloaded_requests_are_counted() {
        assert!(CtxError::Overload { key: "k".into(), message: "timeout".into() }.is_counted());
        assert!(!CtxError::Execute { key: "k".into(), message: "syntax error".into() }.is_counted());
        assert!(!CtxError::UnknownKey { key: "k".into() }.is_counted());
        assert!(!CtxError::Prepare { key: "k".into(), message: "syntax".into() }.is_counted());
    }

    #[test]
    fn timeouts_and_overload_are_load_on_both_drivers() {
        use shardwise::protocol::consistency::Consistency;
        use shardwise::protocol::response::{ErrorKind, ErrorResponse};
        let db = |kind| shardwise::ExecutionError::from(ErrorResponse { code: 0, message: "m".into(), kind });
        assert!(shardwise_overload(&shardwise::ExecutionError::Timeout(Duration::from_secs(5))));
        assert!(shardwise_overload(&db(ErrorKind::Overloaded)));
        assert!(shardwise_overload(&db(ErrorKind::Unavailable {
            consistency: Consistency::One,
            required: 1,
            alive: 0
        })));
        assert!(!shardwise_overload(&db(ErrorKind::Invalid)));
        use scylla::errors::{DbError, ExecutionError as E, RequestAttemptError as A};
        assert!(scylla_overload(&E::RequestTimeout(Duration::from_secs(5))));
        assert!(scylla_overload(&E::LastAttemptError(A::DbError(DbError::Overloaded, "m".into()))));
        assert!(!scylla_overload(&E::LastAttemptError(A::DbError(DbError::SyntaxError, "m".into()))));
    }
}
