//! What every step of the runner is made of, below all of them: a step's
//! status and timing ([`Run`], [`Step`]), the failed tests named in a
//! libtest output ([`Failures`]), and running a command (`cargo`, its
//! output into a log). Here so that the runner's files (test, house, lanes,
//! fuzz, features) stand in layers above it (issue 54, part 6).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Status {
    Passed,
    Failed,
    Skipped,
}

/// A step of the run. The house's builds make theirs on their own thread
/// (see `house.rs`); they are recorded when it is joined.
#[derive(Debug)]
pub(crate) struct Step {
    pub(crate) name: String,
    pub(crate) status: Status,
    pub(crate) note: String,
    pub(crate) took: Duration,
    /// Where its output went; printed whole when it failed.
    pub(crate) log: Option<PathBuf>,
}

impl Step {
    pub(crate) fn new(name: &str, started: Instant, status: Status, note: impl Into<String>) -> Step {
        Step { name: name.to_string(), status, note: note.into(), took: started.elapsed(), log: None }
    }
}

pub(crate) struct Run {
    pub(crate) steps: Vec<Step>,
}

impl Run {
    pub(crate) fn record(&mut self, name: &str, started: Instant, status: Status, note: impl Into<String>) {
        self.add(Step::new(name, started, status, note));
    }

    /// Records a step, first printing its log if it failed.
    pub(crate) fn add(&mut self, step: Step) {
        if let (Status::Failed, Some(log)) = (&step.status, &step.log) {
            match std::fs::read_to_string(log) {
                Ok(text) => eprintln!("\n==== xtask test: {} ({})\n{text}", step.name, log.display()),
                Err(e) => eprintln!("\nxtask test: cannot read {}: {e}", log.display()),
            }
        }
        let tag = match step.status {
            Status::Passed => "PASS",
            Status::Failed => "FAIL",
            Status::Skipped => "SKIP",
        };
        eprintln!("\nxtask test: {tag} {} ({:.1} s){}", step.name, step.took.as_secs_f64(), suffix(&step.note));
        self.steps.push(step);
    }

    pub(crate) fn skip_rest(&mut self, names: &[&str]) {
        for n in names {
            self.record(n, Instant::now(), Status::Skipped, "interrupted");
        }
    }
}

pub(crate) fn suffix(note: &str) -> String {
    if note.is_empty() {
        String::new()
    } else {
        format!(": {note}")
    }
}

pub(crate) fn banner(text: &str) {
    eprintln!("\n==== xtask test: {text}");
}

pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// The `cargo` that runs this xtask (same toolchain), else `cargo` on PATH.
pub(crate) fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

pub(crate) fn run_status(cmd: &mut Command) -> Result<(), String> {
    match cmd.status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(format!("exited with {s}")),
        Err(e) => Err(format!("could not run: {e}")),
    }
}

/// Points `cmd`'s output (stdout and stderr, in order) at a new file `log`,
/// and its input at nothing: for a command that runs beside others.
pub(crate) fn output_to<'a>(cmd: &'a mut Command, log: &Path) -> Result<&'a mut Command, String> {
    let out = std::fs::File::create(log).map_err(|e| format!("creating {}: {e}", log.display()))?;
    let err = out.try_clone().map_err(|e| format!("creating {}: {e}", log.display()))?;
    Ok(cmd.stdin(Stdio::null()).stdout(out).stderr(err))
}

/// What a `cargo test` output says of its failures: each failed test, and
/// each panic with the line after it (the message).
#[derive(Default)]
pub(crate) struct Failures {
    pub(crate) lines: Vec<String>,
    after_panic: bool,
}

impl Failures {
    pub(crate) fn see(&mut self, line: &str) {
        if std::mem::take(&mut self.after_panic) {
            if let Some(last) = self.lines.last_mut() {
                last.push(' ');
                last.push_str(line.trim());
            }
        } else if let Some(name) = line.strip_prefix("test ").and_then(|l| l.strip_suffix(" ... FAILED")) {
            self.lines.push(format!("failed: {name}"));
        } else if line.contains("panicked at") {
            self.lines.push(format!("  {}", line.trim()));
            self.after_panic = true;
        }
    }
}
