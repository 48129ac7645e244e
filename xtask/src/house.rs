//! The house checks: the repository stands on its own, the driver's and the
//! front's files stand in layers, and fmt, clippy, rustdoc and `cargo
//! package` are clean.
//!
//! They come in two parts. The quick ones (outside paths, import circles,
//! fmt) take seconds and run first, so a slip fails fast. The builds (clippy
//! twice, rustdoc, package) take minutes of a 2-core machine; in `cargo
//! xtask test` they run while the tests do, at the lowest CPU priority, in
//! the test build's target folder: its build scripts' outputs (librdkafka,
//! built from source: 100 CPU-seconds) and proc macros serve them too, and
//! the tests run their binaries without cargo, so no build lock is waited
//! for. `cargo xtask house` runs them in the foreground in `target/house`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use crate::interrupted;
use crate::steps::{banner, cargo, output_to, run_status, Run, Status, Step};

/// The outside-path check and the import circles of `driver` and `emu`, and
/// `cargo fmt --check` (workspace and fuzz crate).
pub fn checks(root: &Path, run: &mut Run) {
    banner("the repository stands on its own (no path outside it)");
    let t = Instant::now();
    match crate::paths::check(root) {
        Ok(found) if found.is_empty() => run.record("outside paths", t, Status::Passed, ""),
        Ok(found) => {
            for f in &found {
                eprintln!("  {f}");
            }
            run.record(
                "outside paths",
                t,
                Status::Failed,
                format!("{} references outside the repository", found.len()),
            );
        }
        Err(e) => run.record("outside paths", t, Status::Failed, e),
    }
    // Every guarantee the README marks has a row in the claims ledger, and
    // every test the ledger names exists (issue 54).
    banner("the claims ledger (docs/claims.md) names tests that exist and every marked guarantee");
    let t = Instant::now();
    match crate::claims::check(root) {
        Ok(found) if found.is_empty() => run.record("claims ledger", t, Status::Passed, ""),
        Ok(found) => {
            for f in &found {
                eprintln!("  {f}");
            }
            run.record("claims ledger", t, Status::Failed, found.join("\n"));
        }
        Err(e) => run.record("claims ledger", t, Status::Failed, e),
    }
    // Every crate's files stand in layers (issues 41 and 54).
    for crate_dir in crate::imports::workspace_crates(root) {
        banner(&format!("no import circle in {crate_dir} (cargo xtask imports {crate_dir})"));
        let t = Instant::now();
        let step = format!("import circles ({crate_dir})");
        match crate::imports::check(root, &crate_dir) {
            Ok(report) => {
                let (status, note) = judge_circles(&crate_dir, &report);
                if status == Status::Failed {
                    eprint!("{}", report.render(&crate_dir));
                }
                run.record(&step, t, status, note);
            }
            Err(e) => run.record(&step, t, Status::Failed, e),
        }
    }
    banner("the test build reuses what building xtask compiled (cargo xtask features)");
    let t = Instant::now();
    let step = "feature alignment";
    let nightly = crate::fuzz::cargo_nightly().arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
    if !nightly.is_ok_and(|s| s.success()) {
        run.record(step, t, Status::Skipped, "no nightly toolchain for cargo's unit graph");
    } else {
        match crate::features::check(root) {
            Ok(missing) if missing.is_empty() => run.record(step, t, Status::Passed, ""),
            Ok(missing) => {
                for m in &missing {
                    eprintln!("  compiled again: {m}");
                }
                let note = format!("{} crates compiled twice; see xtask/Cargo.toml", missing.len());
                run.record(step, t, Status::Failed, note);
            }
            Err(e) => run.record(step, t, Status::Failed, e),
        }
    }
    let fuzz_manifest = root.join("fuzz").join("Cargo.toml");
    let fuzz_manifest = fuzz_manifest.to_str().unwrap_or("fuzz/Cargo.toml");
    for (name, args) in [
        ("cargo fmt --check", vec!["fmt", "--all", "--check"]),
        ("cargo fmt --check (fuzz)", vec!["fmt", "--check", "--manifest-path", fuzz_manifest]),
    ] {
        if interrupted() {
            run.skip_rest(&[name]);
            continue;
        }
        banner(name);
        let t = Instant::now();
        match run_status(cargo().current_dir(root).args(args)) {
            Ok(()) => run.record(name, t, Status::Passed, ""),
            Err(e) => run.record(name, t, Status::Failed, e),
        }
    }
}

/// The crates whose import circles were found when the check came to cover
/// every crate (issue 54, part 6), with the files in them: in other
/// engineers' code at the time, left to them. A crate not named here may
/// have none; one named may not get more files in circles (a new circle
/// fails), and one with fewer passes with a note to lower its entry.
pub(crate) const KNOWN_CIRCLES: &[(&str, usize)] = &[("cdc", 3), ("cdc-kafka", 3), ("cdc-tools", 2), ("protocol", 5)];

/// The verdict on one crate's import circles (see [`KNOWN_CIRCLES`]).
pub(crate) fn judge_circles(crate_dir: &str, report: &crate::imports::Report) -> (Status, String) {
    let in_circles: usize = report.circles.iter().map(|c| c.files.len()).sum();
    let allowed = KNOWN_CIRCLES.iter().find(|(c, _)| *c == crate_dir).map_or(0, |(_, n)| *n);
    if in_circles == 0 && allowed == 0 {
        (Status::Passed, String::new())
    } else if in_circles > allowed {
        let note =
            format!("{} circles, {in_circles} files in them, in {crate_dir} (known: {allowed})", report.circles.len());
        (Status::Failed, note)
    } else if in_circles < allowed {
        (Status::Passed, format!("{in_circles} files in circles, fewer than the {allowed} known: lower KNOWN_CIRCLES"))
    } else {
        (Status::Passed, format!("{in_circles} files in known circles (KNOWN_CIRCLES, house.rs)"))
    }
}

/// The house's builds, in order.
const BUILDS: [(&str, &[&str]); 4] = [
    ("cargo clippy", &["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]),
    // The driver builds without its default features (no TLS, no rustls).
    (
        "cargo clippy (driver, no default features)",
        &["clippy", "-p", "shardwise", "--no-default-features", "--", "-D", "warnings"],
    ),
    ("cargo doc", &["doc", "--no-deps", "--workspace"]),
    // The publishable crates package, with their metadata, licence files and
    // versioned dependencies on each other. Not verified (each built again
    // from its package, against the others' packages): that takes three
    // minutes of a 2-core machine, and `cargo package` without `--no-verify`
    // does it by hand.
    (
        "cargo package",
        &[
            "package",
            "--allow-dirty",
            "--no-verify",
            "-p",
            "shardwise-protocol",
            "-p",
            "shardwise-macros",
            "-p",
            "shardwise",
            "-p",
            "shardwise-cdc",
            "-p",
            "shardwise-cdc-tools",
            "-p",
            "shardwise-cdc-kafka",
            "--quiet",
        ],
    ),
];

/// Where `cargo xtask house` builds: its own target folder, so that it never
/// waits for (or holds) the lock of the one the tests are built in.
pub fn target_dir(root: &Path) -> PathBuf {
    root.join("target").join("house")
}

/// How the house's builds run.
#[derive(Debug, Clone, Copy)]
pub enum Mode<'a> {
    /// One after another in the foreground, output shown, in [`target_dir`].
    Foreground,
    /// Beside the tests: at the lowest CPU priority, each one's output in a
    /// log file in `logs` (printed when its step is recorded, if it failed),
    /// in the test build's target folder.
    Beside { logs: &'a Path },
}

/// Runs the house's builds one after another (see [`Mode`]).
pub fn builds(root: &Path, mode: Mode) -> Vec<Step> {
    let mut done = Vec::new();
    for (name, args) in BUILDS {
        if interrupted() {
            done.push(Step::new(name, Instant::now(), Status::Skipped, "interrupted"));
            continue;
        }
        let t = Instant::now();
        let mut cmd = cargo();
        // Broken intra-doc links and other rustdoc warnings fail the doc step.
        cmd.current_dir(root).args(args).env("RUSTDOCFLAGS", "-D warnings");
        let (result, log) = match mode {
            Mode::Foreground => {
                banner(name);
                cmd.env("CARGO_TARGET_DIR", target_dir(root));
                (run_status(&mut cmd), None)
            }
            Mode::Beside { logs } => {
                let log = logs.join(format!("house-{}.log", done.len() + 1));
                let mut cmd = crate::fuzz::nice(cmd);
                (output_to(&mut cmd, &log).and_then(run_status), Some(log))
            }
        };
        let mut step = match result {
            Ok(()) => Step::new(name, t, Status::Passed, ""),
            Err(e) => Step::new(name, t, Status::Failed, e),
        };
        step.log = log;
        done.push(step);
    }
    done
}

/// `cargo xtask house`: every check, in the foreground.
pub fn run_all(root: &Path, run: &mut Run) {
    checks(root, run);
    for step in builds(root, Mode::Foreground) {
        run.add(step);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate of `files` (name, text) read by the import check.
    fn report(files: &[(&str, &str)]) -> crate::imports::Report {
        let read = |p: &Path| files.iter().find(|(n, _)| Path::new(n) == p).map(|(_, t)| t.to_string());
        crate::imports::analyse(Path::new("lib.rs"), &read)
    }

    #[test]
    fn a_circle_in_any_crate_fails_the_house_and_a_known_one_may_not_grow() {
        let layered =
            report(&[("lib.rs", "mod a;\nmod b;\n"), ("a.rs", "pub fn f() {}\n"), ("b.rs", "use crate::a::f;\n")]);
        assert_eq!(judge_circles("somecrate", &layered).0, Status::Passed);
        let circle = report(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "use crate::b::g;\npub fn f() {}\n"),
            ("b.rs", "use crate::a::f;\npub fn g() {}\n"),
        ]);
        assert_eq!(circle.circles.len(), 1);
        let (status, note) = judge_circles("somecrate", &circle);
        assert_eq!(status, Status::Failed, "{note}");
        // A known crate passes with its circles, not with more files in them.
        assert_eq!(judge_circles("cdc-tools", &circle).0, Status::Passed);
        assert_eq!(judge_circles("cdc-tools", &layered).0, Status::Passed);
        let (status, note) = judge_circles("cdc-tools", &layered);
        assert!(status == Status::Passed && note.contains("lower KNOWN_CIRCLES"), "{note}");
        let three = report(&[
            ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
            ("a.rs", "use crate::b::g;\npub fn f() {}\n"),
            ("b.rs", "use crate::c::h;\npub fn g() {}\n"),
            ("c.rs", "use crate::a::f;\npub fn h() {}\n"),
        ]);
        assert_eq!(judge_circles("cdc-tools", &three).0, Status::Failed);
    }
}
