//! `cargo xtask <task>`: the project's own commands, in Rust so they run the
//! same everywhere `cargo` does.
//!
//! * `cargo xtask demo` — start a local Cassandra 5.0 (via `testkit`), ask it
//!   OPTIONS over a plain `TcpStream`, print what it serves, stop it.
//! * `cargo xtask test` — the whole test suite against a server it starts
//!   itself: workspace tests, loom models, fuzz smoke runs. CI runs exactly
//!   this (`.ci/run`).
//!
//! Arguments are parsed by hand; tasks use `std::process::Command`.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

mod demo;
mod test;

/// Set by the first Ctrl-C (or SIGTERM): finish the current step, skip the
/// rest, stop the server. A second one exits at once; the server still dies
/// because its lifeline pipe closes with this process (see `testkit::node`).
pub(crate) static INTERRUPTED: AtomicBool = AtomicBool::new(false);

pub(crate) fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

pub(crate) fn install_interrupt_handler() {
    static PRESSES: AtomicU32 = AtomicU32::new(0);
    let result = ctrlc::set_handler(|| {
        INTERRUPTED.store(true, Ordering::SeqCst);
        if PRESSES.fetch_add(1, Ordering::SeqCst) == 0 {
            eprintln!("\nxtask: interrupted; stopping after the current step (again to quit now)");
        } else {
            eprintln!("\nxtask: quitting now");
            std::process::exit(130);
        }
    });
    if let Err(e) = result {
        eprintln!("xtask: warning: cannot install the Ctrl-C handler: {e}");
    }
}

const HELP: &str = "\
usage: cargo xtask <task> [options]

tasks:
  demo                 start a local Cassandra 5.0, show what it serves (OPTIONS), stop it
                       (uses $SHARDWISE_CASSANDRA instead when that is set)
  test [options]       the whole suite against a Cassandra it starts itself:
                       1. start a node, export SHARDWISE_CASSANDRA=<addr> to the steps
                       2. cargo test --workspace
                       3. loom models: RUSTFLAGS=\"--cfg loom\" cargo test -p shardwise-loom-tests --release
                       4. fuzz smoke: cargo +nightly fuzz run <target> for every target
                       5. stop the node (also on failure and Ctrl-C)
    --no-fuzz            skip step 4
    --no-loom            skip step 3
    --fuzz-seconds N     seconds per fuzz target (default $SHARDWISE_FUZZ_SECONDS or 30)
    --only ARGS...       run only step 2, passing ARGS to cargo test
                         (e.g. --only -p testkit start_stop)
  help                 this text
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("demo") => demo::run(&args[1..]),
        Some("test") => test::run(&args[1..]),
        Some("help" | "-h" | "--help") => {
            print!("{HELP}");
            ExitCode::SUCCESS
        }
        Some(other) => {
            eprintln!("xtask: unknown task {other:?}\n\n{HELP}");
            ExitCode::from(2)
        }
        None => {
            eprint!("{HELP}");
            ExitCode::from(2)
        }
    }
}
