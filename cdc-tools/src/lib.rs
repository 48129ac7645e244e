//! What the command-line applications of `shardwise-cdc` share.
//!
//! Modules:
//! * [`connect`]: the connection flags (credentials, TLS) and the session they make;
//! * [`reading`]: the reading flags (range, window, groups, workers, consistency) and the reader builder they make;
//! * [`checkpointing`]: the checkpoint flags (a table of the cluster) and the builder they set up;
//! * [`leasing`]: the lease flags of readers that share a table, and the lease configuration they make;
//! * [`progress`]: the progress line on stderr (delivered, rate, lag);
//! * [`metrics`]: the reader's progress and lag served as Prometheus text (`--metrics-addr`).

pub mod checkpointing;
pub mod connect;
pub mod leasing;
pub mod metrics;
pub mod progress;
pub mod reading;

/// Writes the library's warnings (a lease lost, a group taken over, a node
/// that cannot be reached) to stderr, one line each; `verbose` adds its
/// informational and debug lines. A tool calls it once it runs: what stops
/// it before then is its one error line.
pub fn log_warnings(verbose: bool) {
    let level = if verbose {
        tracing_subscriber::filter::LevelFilter::DEBUG
    } else {
        tracing_subscriber::filter::LevelFilter::WARN
    };
    let _ = tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(false)
        .try_init();
}

/// How a tool ends: success, or one line on stderr that says what went
/// wrong (which node, which table, why) and a failure status.
pub fn exit(tool: &str, result: Result<(), Box<dyn std::error::Error>>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{tool}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
