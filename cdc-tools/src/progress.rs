//! The progress line a tool prints on stderr while it reads: what it
//! delivered, how fast, and how far behind it is. On a terminal one line
//! every two seconds; in a log (stderr not a terminal), one every ten, so
//! a service's log is not one line a second. `--progress SECONDS` sets it
//! (0: none).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use shardwise_cdc::CdcReaderHandle;

/// How often the line is printed: `flag` (seconds; 0 for never), else two
/// seconds on a terminal and ten otherwise.
pub fn interval(flag: Option<f64>) -> Result<Option<Duration>, String> {
    match flag {
        Some(s) => crate::reading::seconds("progress", s).map(|d| (!d.is_zero()).then_some(d)),
        None if std::io::stderr().is_terminal() => Ok(Some(Duration::from_secs(2))),
        None => Ok(Some(Duration::from_secs(10))),
    }
}

/// One progress line: `[tool] N what (R/s), lag L s over G groups, W windows retried, T s`.
pub fn line(tool: &str, what: &str, delivered: u64, rate: f64, handle: &CdcReaderHandle, running: Duration) -> String {
    let p = handle.progress();
    let retried = match p.windows_retried {
        0 => String::new(),
        n => format!(", {n} windows retried"),
    };
    format!(
        "[{tool}] {delivered} {what} ({rate:.0}/s), lag {:.1} s over {} groups{retried}, {:.0} s",
        p.max_lag().as_secs_f64(),
        p.groups.len(),
        running.as_secs_f64()
    )
}

/// Prints [`line()`] every `every` until the reader finishes; `delivered`
/// counts what the tool handed on (rows printed, messages written).
pub fn spawn(
    tool: &'static str,
    what: &'static str,
    every: Duration,
    handle: CdcReaderHandle,
    delivered: impl Fn() -> u64 + Send + 'static,
) {
    tokio::spawn(async move {
        let (begin, mut last, mut at) = (Instant::now(), 0, Instant::now());
        while !handle.is_finished() {
            tokio::time::sleep(every).await;
            let n = delivered();
            let rate = n.saturating_sub(last) as f64 / at.elapsed().as_secs_f64().max(1e-3);
            eprintln!("{}", line(tool, what, n, rate, &handle, begin.elapsed()));
            (last, at) = (n, Instant::now());
        }
    });
}
