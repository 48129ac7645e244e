//! The errors of the `latte` binary: each one line that says where (the
//! script, its function, the statement key) and why.

use std::path::PathBuf;

/// Why a `latte` command failed.
#[derive(Debug, thiserror::Error)]
pub enum LatteError {
    /// The script file cannot be read.
    #[error("cannot read script {path}: {source}")]
    ReadScript {
        /// The script.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The script does not compile.
    #[error("script {path}:{line}:{column}: {message}")]
    Compile {
        /// The script.
        path: PathBuf,
        /// Line, from 1.
        line: usize,
        /// Column, from 1.
        column: usize,
        /// Rune's diagnostic.
        message: String,
    },
    /// The `latte` module could not be set up (a bug, not the script's).
    #[error("setting up the script runtime: {0}")]
    Runtime(String),
    /// A function the command needs is missing from the script.
    #[error("script {path} has no function `{function}` (latte {command} calls `pub async fn {function}(ctx{args})`)")]
    MissingFunction {
        /// The script.
        path: PathBuf,
        /// The function.
        function: &'static str,
        /// The command that needs it.
        command: &'static str,
        /// `, i` for the per-cycle functions.
        args: &'static str,
    },
    /// A script function failed (a Rune error, or an error value it returned).
    #[error("script function `{function}`{}: {message}", cycle.map(|c| format!(" (cycle {c})")).unwrap_or_default())]
    Script {
        /// The function.
        function: &'static str,
        /// The cycle number, for per-cycle functions.
        cycle: Option<u64>,
        /// The diagnostic.
        message: String,
    },
    /// `load` needs a count.
    #[error(
        "latte load: give the number of rows with -d N, set `ctx.load_cycle_count` in `prepare`, or define \
         `pub const LOAD_COUNT` in the script"
    )]
    NoLoadCount,
    /// Connecting failed.
    #[error("cannot connect to {nodes} with {driver}: {message}")]
    Connect {
        /// The driver.
        driver: &'static str,
        /// The contact points.
        nodes: String,
        /// The driver's error.
        message: String,
    },
    /// Threads or runtimes could not be started.
    #[error("starting the runner: {0}")]
    Start(#[source] std::io::Error),
    /// The report could not be written.
    #[error("writing {path}: {source}")]
    Output {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}
