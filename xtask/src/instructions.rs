//! `cargo xtask bench --instructions` and `cargo xtask bench --check`:
//! user-space instructions and heap allocations per request, both drivers,
//! tracked against the committed figures in `benches/instructions.tsv`.
//!
//! Why instructions: on a shared 2-core machine CPU time per request moves
//! by tens of percent from run to run, while the instructions a request
//! executes hardly move, so they are the figure a regression check can
//! hold to a few percent (the official driver's CI tracks them the same
//! way). Each figure is marginal: `workload run` under callgrind with 2,000
//! and with 6,000 measured requests (the same 500-request warm-up, the
//! same connect and prepare), and the difference of the two totals divided
//! by 4,000, so start-up, connecting and preparing cancel out. The server is
//! `responder` (a release build outside valgrind), so the figures are the
//! driver's and the runner's alone. Current-thread runtime, 32 requests in
//! flight, protocol v4 for both drivers. Each figure is the median of
//! `ROUNDS` measurements.
//!
//! `--instructions` writes the figures to `benches/instructions.tsv` (and
//! prints them as a markdown table for `benches/RESULTS.md`); `--check`
//! measures again and fails when a shardwise figure is more than
//! [`TOLERANCE`] above the committed one, or makes more allocations per
//! request (the official driver's figures are shown beside, not checked:
//! they are the peer's).

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The workloads measured (`workload run <name>`).
const WORKLOADS: [&str; 4] = ["write", "read", "batch", "paged"];
const DRIVERS: [&str; 2] = ["shardwise", "official"];
/// The two measured request counts of the marginal figure.
const FEW: u64 = 2_000;
const MANY: u64 = 6_000;
/// Measurements per figure (their median is the figure).
const ROUNDS: usize = 3;
/// How much a shardwise figure may grow before `--check` fails.
const TOLERANCE: f64 = 0.03;
/// Where the committed figures are, from the workspace root.
const FIGURES: &str = "benches/instructions.tsv";

/// One measured figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    pub workload: String,
    pub driver: String,
    pub instructions: f64,
    pub allocations: f64,
}

/// Measures every figure; writes them (`check` false) or compares them
/// with the committed ones (`check` true).
/// `stamp` (the date and tree) heads the written file.
pub fn run(root: &Path, release: &Path, check: bool, stamp: &str) -> Result<(), String> {
    let valgrind = Command::new("valgrind").arg("--version").output();
    if !valgrind.is_ok_and(|o| o.status.success()) {
        return Err("valgrind is not installed (apt-get install valgrind): callgrind counts the instructions".into());
    }
    let responder = Responder::start(&release.join("responder"))?;
    let workload = release.join("workload");
    let mut figures = Vec::new();
    for w in WORKLOADS {
        for d in DRIVERS {
            let figure = measure(&workload, responder.port, w, d)?;
            eprintln!(
                "xtask bench: {w:>6} {d:>9}: {:>8.0} instructions, {:.2} allocations per request",
                figure.instructions, figure.allocations
            );
            figures.push(figure);
        }
    }
    drop(responder);
    println!("{}", markdown(&figures));
    let path = root.join(FIGURES);
    if check {
        let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let committed = parse(&text)?;
        let failures = regressions(&committed, &figures);
        if !failures.is_empty() {
            return Err(format!("figures grew past the committed ones:\n  {}", failures.join("\n  ")));
        }
        eprintln!("xtask bench: every shardwise figure within {:.0}% of {FIGURES}", TOLERANCE * 100.0);
    } else {
        let header = format!("# cargo xtask bench --instructions, {stamp}\n");
        std::fs::write(&path, header + &render(&figures)).map_err(|e| format!("{}: {e}", path.display()))?;
        eprintln!("xtask bench: wrote {}", path.display());
    }
    Ok(())
}

/// The responder, a child process, killed when dropped.
struct Responder {
    child: Child,
    port: u16,
}

impl Responder {
    fn start(bin: &Path) -> Result<Responder, String> {
        let mut child = Command::new(bin)
            .args(["--port", "0", "--shard-aware-port", "0", "--shards", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            let _ = BufReader::new(out).read_line(&mut line);
        }
        let port = line.split_whitespace().nth(1).and_then(|p| p.parse().ok());
        match port {
            Some(port) => Ok(Responder { child, port }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("the responder did not say where it listens (it printed {line:?})"))
            }
        }
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The median over [`ROUNDS`] of the marginal instructions per request,
/// and the allocations per request of the larger run.
fn measure(workload: &Path, port: u16, name: &str, driver: &str) -> Result<Figure, String> {
    let mut instructions = Vec::new();
    let mut allocations = Vec::new();
    for _ in 0..ROUNDS {
        let (few, _) = callgrind(workload, port, name, driver, FEW)?;
        let (many, allocs) = callgrind(workload, port, name, driver, MANY)?;
        instructions.push((many as f64 - few as f64) / (MANY - FEW) as f64);
        allocations.push(allocs);
    }
    Ok(Figure {
        workload: name.into(),
        driver: driver.into(),
        instructions: median(instructions),
        allocations: median(allocations),
    })
}

/// One `workload run` under callgrind: the instructions it executed (all
/// threads, user space) and its allocations per measured request.
fn callgrind(workload: &Path, port: u16, name: &str, driver: &str, requests: u64) -> Result<(u64, f64), String> {
    let out_file = std::env::temp_dir().join(format!("shardwise-callgrind-{}.out", std::process::id()));
    let output = Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(workload)
        .args(["run", name, "--driver", driver, "--report-line", "--protocol", "4"])
        .args(["-d", &requests.to_string(), "-w", "500", "-t", "1", "-p", "32"])
        .args(["--consistency", "ONE", "--request-timeout", "0", "--node", &format!("127.0.0.1:{port}")])
        .output()
        .map_err(|e| format!("cannot run valgrind: {e}"))?;
    let _ = std::fs::remove_file(&out_file);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!("{name} with {driver} under callgrind failed ({}):\n{stderr}", output.status));
    }
    let collected = collected(&stderr)
        .ok_or_else(|| format!("callgrind printed no instruction count for {name} with {driver}:\n{stderr}"))?;
    let report = stdout
        .lines()
        .find_map(|l| l.strip_prefix("REPORT\t"))
        .ok_or_else(|| format!("{name} with {driver} printed no report line"))?;
    let fields: Vec<&str> = report.split('\t').collect();
    let field = |i: usize| fields.get(i).copied().unwrap_or("");
    if field(7) != "0" || field(8) != "0" {
        return Err(format!("{name} with {driver}: {} errors, {} missing rows: {}", field(7), field(8), field(28)));
    }
    let allocations = field(23).parse().map_err(|_| format!("{name} with {driver}: no allocations in {report:?}"))?;
    Ok((collected, allocations))
}

/// The total of callgrind's `==pid== Collected : N` line.
fn collected(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|l| l.split_once("Collected :").and_then(|(_, n)| n.trim().parse().ok()))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The figures as the committed file has them: one tab-separated line per
/// figure after the `#` comment lines.
fn render(figures: &[Figure]) -> String {
    let mut s = String::from("# workload\tdriver\tinstructions per request\tallocations per request\n");
    for f in figures {
        let _ = writeln!(s, "{}\t{}\t{:.0}\t{:.2}", f.workload, f.driver, f.instructions, f.allocations);
    }
    s
}

/// The inverse of [`render`].
fn parse(text: &str) -> Result<Vec<Figure>, String> {
    let mut figures = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        let bad = || format!("{FIGURES}:{}: not `workload, driver, instructions, allocations`: {line:?}", n + 1);
        let [workload, driver, instructions, allocations] = f[..] else { return Err(bad()) };
        figures.push(Figure {
            workload: workload.into(),
            driver: driver.into(),
            instructions: instructions.parse().map_err(|_| bad())?,
            allocations: allocations.parse().map_err(|_| bad())?,
        });
    }
    Ok(figures)
}

/// What grew: every shardwise figure more than [`TOLERANCE`] above the
/// committed one, any growth of its allocations, and a figure measured
/// but never committed.
fn regressions(committed: &[Figure], measured: &[Figure]) -> Vec<String> {
    let mut out = Vec::new();
    for m in measured.iter().filter(|m| m.driver == "shardwise") {
        let Some(c) = committed.iter().find(|c| c.workload == m.workload && c.driver == m.driver) else {
            out.push(format!("{}: no committed figure (run `cargo xtask bench --instructions`)", m.workload));
            continue;
        };
        if m.instructions > c.instructions * (1.0 + TOLERANCE) {
            out.push(format!(
                "{}: {:.0} instructions per request, committed {:.0} (+{:.1}%)",
                m.workload,
                m.instructions,
                c.instructions,
                100.0 * (m.instructions / c.instructions - 1.0)
            ));
        }
        // Allocations are counted exactly; a hundredth is rounding.
        if m.allocations > c.allocations + 0.01 {
            out.push(format!(
                "{}: {:.2} allocations per request, committed {:.2}",
                m.workload, m.allocations, c.allocations
            ));
        }
    }
    out
}

/// A markdown table of the figures, shardwise beside the official driver.
fn markdown(figures: &[Figure]) -> String {
    let mut s = String::from(
        "| workload | shardwise instructions | official instructions | ratio | shardwise allocations | official allocations |\n|---|---:|---:|---:|---:|---:|\n",
    );
    for w in WORKLOADS {
        let get = |d: &str| figures.iter().find(|f| f.workload == w && f.driver == d);
        if let (Some(s_), Some(o)) = (get("shardwise"), get("official")) {
            let _ = writeln!(
                s,
                "| {w} | {:.0} | {:.0} | {:.2}× | {:.2} | {:.2} |",
                s_.instructions,
                o.instructions,
                s_.instructions / o.instructions,
                s_.allocations,
                o.allocations
            );
        }
    }
    s
}

/// The release binaries this needs, for `bench.rs` to build.
pub fn binaries() -> [&'static str; 2] {
    ["workload", "responder"]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(workload: &str, driver: &str, instructions: f64, allocations: f64) -> Figure {
        Figure { workload: workload.into(), driver: driver.into(), instructions, allocations }
    }

    #[test]
    fn the_committed_file_reads_back_what_was_written() {
        let figures = vec![figure("write", "shardwise", 6512.0, 0.0), figure("write", "official", 16500.0, 11.0)];
        let text = format!("# a header\n{}", render(&figures));
        assert_eq!(parse(&text).expect("parses"), figures);
        assert!(parse("write\tshardwise\tmany\t0\n").is_err(), "a figure that is not a number is refused");
        assert!(parse("write\tshardwise\t1\n").is_err(), "a line of three fields is refused");
    }

    #[test]
    fn a_shardwise_figure_past_the_tolerance_or_allocating_more_fails_the_check() {
        let committed = vec![figure("write", "shardwise", 1000.0, 0.0), figure("read", "shardwise", 2000.0, 1.0)];
        let within = vec![figure("write", "shardwise", 1029.0, 0.0), figure("read", "shardwise", 1500.0, 1.0)];
        assert!(regressions(&committed, &within).is_empty());
        let grown = vec![figure("write", "shardwise", 1031.0, 0.0), figure("read", "shardwise", 2000.0, 1.5)];
        let failures = regressions(&committed, &grown);
        assert_eq!(failures.len(), 2, "{failures:?}");
        assert!(failures[0].starts_with("write: 1031 instructions"), "{failures:?}");
        assert!(failures[1].starts_with("read: 1.50 allocations"), "{failures:?}");
        // The peer's figures are never checked; a figure never committed is.
        let peer = vec![figure("write", "official", 99999.0, 50.0), figure("paged", "shardwise", 1.0, 0.0)];
        assert_eq!(
            regressions(&committed, &peer),
            ["paged: no committed figure (run `cargo xtask bench --instructions`)"]
        );
    }

    #[test]
    fn callgrind_s_total_is_read_from_its_summary_line() {
        let stderr = "==42== Callgrind, a call-graph generating cache profiler\n==42== Events    : Ir\n==42== Collected : 123456789\n==42==\n==42== I   refs:      123,456,789\n";
        assert_eq!(collected(stderr), Some(123_456_789));
        assert_eq!(collected("==42== no summary\n"), None);
    }
}
