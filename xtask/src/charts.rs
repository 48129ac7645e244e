//! `cargo xtask charts`: the committed benchmark results drawn as SVG.
//!
//! `benches/RESULTS.md` opens with today's figures; this module turns the
//! machine-readable copies of them (`benches/results/*.json`) into the charts
//! it embeds (`benches/charts/*.svg`). The charts are generated, never edited,
//! and the same JSON always gives the same bytes, so a test can regenerate
//! them in memory and fail when the committed pictures no longer show the
//! committed numbers.
//!
//! A results file is one JSON object with a `kind` and where its figures come
//! from (`title`, `date`, `machine`, `command`, `source`; `tree` and `settings`
//! optional), then `cells`:
//!
//! * `driver`: one cell per comparison as `workload compare --json` writes it
//!   (`workload`, `threads`, `concurrency`, `median` ratios shardwise /
//!   official, `median_cpu_us_per_op` of both drivers, `runs`), plus `server`.
//!   Charts: CPU per request of both drivers, and the p99 ratio with a line
//!   at 1.0.
//! * `open_loop`: the same cells with the fixed `rate` and the rounds' p99 of
//!   both drivers in `runs`. Chart: p99 per rate and round.
//! * `cdc`: one cell per (cores, window) with `rows` and each library's
//!   `elapsed_s` and CPU (`cpu_us_per_row`, or `cpu_s`, or `user_s` +
//!   `sys_s`). Charts: CPU per row and elapsed time of both libraries.
//!
//! Each file `NAME.json` gives `NAME-<chart>.svg`. The drawing uses
//! `plotters`' SVG backend only: bars and lines are rectangles and paths, the
//! text is SVG `<text>`, so no font is read and nothing depends on the host.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Deserialize;

/// Why the charts could not be made, naming the file at fault.
#[derive(Debug, thiserror::Error)]
pub enum ChartError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: not a results file: {source}")]
    Parse { path: PathBuf, source: serde_json::Error },
    #[error("{path}: {what}")]
    Invalid { path: PathBuf, what: String },
    #[error("drawing {chart}: {what}")]
    Draw { chart: String, what: String },
    #[error("writing {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// Where a file's figures come from; every results file names these.
#[derive(Debug, Deserialize)]
struct Meta {
    kind: String,
    title: String,
    date: String,
    #[allow(dead_code)] // Read so that a file without it is refused.
    machine: String,
    #[allow(dead_code)]
    command: String,
    #[allow(dead_code)]
    source: String,
}

/// Shardwise beside the official driver, as `workload compare --json`
/// writes one figure (absent or `null` when it was not measured or stated).
#[derive(Debug, Deserialize, Clone, Copy, Default)]
struct Ratios {
    p99: Option<f64>,
}

#[derive(Debug, Deserialize, Clone, Copy)]
struct Both {
    shardwise: f64,
    official: f64,
}

#[derive(Debug, Deserialize, Default)]
struct Run {
    p99_ms: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct RunPair {
    #[serde(default)]
    shardwise: Run,
    #[serde(default)]
    official: Run,
}

#[derive(Debug, Deserialize)]
struct DriverCell {
    server: Option<String>,
    label: Option<String>,
    workload: String,
    threads: u32,
    concurrency: u32,
    affinity: Option<String>,
    rate: Option<f64>,
    #[serde(default)]
    runs: Vec<RunPair>,
    #[serde(default)]
    median: Ratios,
    median_cpu_us_per_op: Option<Both>,
}

#[derive(Debug, Deserialize)]
struct DriverBody {
    cells: Vec<DriverCell>,
}

#[derive(Debug, Deserialize)]
struct CdcRun {
    elapsed_s: f64,
    cpu_us_per_row: Option<f64>,
    cpu_s: Option<f64>,
    user_s: Option<f64>,
    sys_s: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct CdcCell {
    label: Option<String>,
    cores: Option<u32>,
    window_s: u32,
    rows: u64,
    shardwise: CdcRun,
    scylla_cdc: CdcRun,
}

#[derive(Debug, Deserialize)]
struct CdcBody {
    cells: Vec<CdcCell>,
}

/// One chart: horizontal bars, a group per category, a bar per series.
struct Bars {
    /// What the chart shows.
    title: String,
    /// Where the figures come from: the results file's title and date.
    subtitle: String,
    unit: String,
    categories: Vec<String>,
    /// Label, colour and one value per category.
    series: Vec<(String, RGBColor, Vec<f64>)>,
    /// A vertical line, e.g. at 1.0 on a ratio chart, with its legend label.
    reference: Option<(f64, String)>,
}

const SHARDWISE: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const PEER: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
const RATIO: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
const FONT: &str = "sans-serif";

/// `cargo xtask charts [--check]`: writes `benches/charts/*.svg` from
/// `benches/results/*.json` (and removes charts no results file gives), or
/// with `--check` only says whether they are up to date.
pub fn run(args: &[String]) -> ExitCode {
    let check = match args {
        [] => false,
        [a] if a == "--check" => true,
        _ => {
            eprintln!("xtask charts: usage: cargo xtask charts [--check]");
            return ExitCode::from(2);
        }
    };
    let root = crate::steps::workspace_root();
    let (results, charts) = (root.join("benches").join("results"), root.join("benches").join("charts"));
    let outcome = if check { stale(&results, &charts) } else { write_all(&results, &charts).map(|()| Vec::new()) };
    match outcome {
        Ok(stale) if stale.is_empty() => {
            eprintln!("xtask charts: {} match {}", charts.display(), results.display());
            ExitCode::SUCCESS
        }
        Ok(stale) => {
            eprintln!("xtask charts: out of date (run `cargo xtask charts`): {}", stale.join(", "));
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("xtask charts: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Every chart of every results file in `dir`, by file name, in name order.
pub(crate) fn render_dir(dir: &Path) -> Result<BTreeMap<String, String>, ChartError> {
    let read = |e: std::io::Error| ChartError::Read { path: dir.to_path_buf(), source: e };
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(dir).map_err(read)?.map(|e| e.map(|e| e.path()).map_err(read)).collect::<Result<_, _>>()?;
    files.retain(|p| p.extension().is_some_and(|e| e == "json"));
    files.sort();
    let mut charts = BTreeMap::new();
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(|e| ChartError::Read { path: path.clone(), source: e })?;
        for (name, svg) in render_file(&path, &text)? {
            charts.insert(name, svg);
        }
    }
    Ok(charts)
}

/// Writes the charts of `results` into `charts` and removes the SVG files
/// there that no results file gives any more.
fn write_all(results: &Path, charts: &Path) -> Result<(), ChartError> {
    let rendered = render_dir(results)?;
    std::fs::create_dir_all(charts).map_err(|e| ChartError::Write { path: charts.to_path_buf(), source: e })?;
    for (name, old) in existing(charts)? {
        if !rendered.contains_key(&name) {
            std::fs::remove_file(&old).map_err(|e| ChartError::Write { path: old, source: e })?;
        }
    }
    for (name, svg) in &rendered {
        let path = charts.join(name);
        std::fs::write(&path, svg).map_err(|e| ChartError::Write { path: path.clone(), source: e })?;
        eprintln!("xtask charts: wrote {}", path.display());
    }
    Ok(())
}

/// The SVG files in `dir` (none if it does not exist), by file name.
fn existing(dir: &Path) -> Result<BTreeMap<String, PathBuf>, ChartError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(ChartError::Read { path: dir.to_path_buf(), source: e }),
    };
    let mut out = BTreeMap::new();
    for entry in entries {
        let path = entry.map_err(|e| ChartError::Read { path: dir.to_path_buf(), source: e })?.path();
        if let Some(name) = path.file_name().and_then(|n| n.to_str()).filter(|n| n.ends_with(".svg")) {
            out.insert(name.to_string(), path.clone());
        }
    }
    Ok(out)
}

/// The charts in `charts` that differ from what `results` gives: missing,
/// changed, or left over. Empty when they are up to date.
pub(crate) fn stale(results: &Path, charts: &Path) -> Result<Vec<String>, ChartError> {
    let rendered = render_dir(results)?;
    let on_disk = existing(charts)?;
    let mut out = Vec::new();
    for (name, svg) in &rendered {
        match on_disk.get(name) {
            None => out.push(format!("{name} (missing)")),
            Some(path) => {
                let committed =
                    std::fs::read_to_string(path).map_err(|e| ChartError::Read { path: path.clone(), source: e })?;
                if committed != *svg {
                    out.push(format!("{name} (differs)"));
                }
            }
        }
    }
    out.extend(on_disk.keys().filter(|n| !rendered.contains_key(*n)).map(|n| format!("{n} (no results file)")));
    Ok(out)
}

/// The charts of one results file (`path` names it in errors and gives the
/// charts' names).
pub(crate) fn render_file(path: &Path, text: &str) -> Result<Vec<(String, String)>, ChartError> {
    let parse = |e| ChartError::Parse { path: path.to_path_buf(), source: e };
    let invalid = |what: String| ChartError::Invalid { path: path.to_path_buf(), what };
    let meta: Meta = serde_json::from_str(text).map_err(parse)?;
    let stem = path.file_stem().and_then(|s| s.to_str()).ok_or_else(|| invalid("no file name".into()))?;
    let subtitle = format!("{}, {} ({stem}.json)", meta.title, meta.date);
    let charts = match meta.kind.as_str() {
        "driver" => {
            let body: DriverBody = serde_json::from_str(text).map_err(parse)?;
            driver_charts(&body.cells, &subtitle).map_err(invalid)?
        }
        "open_loop" => {
            let body: DriverBody = serde_json::from_str(text).map_err(parse)?;
            vec![("p99", open_loop_chart(&body.cells, &subtitle).map_err(invalid)?)]
        }
        "cdc" => {
            let body: CdcBody = serde_json::from_str(text).map_err(parse)?;
            cdc_charts(&body.cells, &subtitle).map_err(invalid)?
        }
        other => return Err(invalid(format!("unknown kind {other:?} (driver, open_loop or cdc)"))),
    };
    charts
        .into_iter()
        .map(|(suffix, bars)| {
            let name = format!("{stem}-{suffix}.svg");
            draw(&bars).map(|svg| (name.clone(), svg)).map_err(|what| ChartError::Draw { chart: name, what })
        })
        .collect()
}

/// A figure read from a file: present and finite, or an error naming it.
fn figure(value: Option<f64>, what: impl FnOnce() -> String) -> Result<f64, String> {
    value.filter(|v| v.is_finite() && *v >= 0.0).ok_or_else(|| format!("{}: missing or not a number", what()))
}

fn not_empty<T>(cells: &[T]) -> Result<(), String> {
    if cells.is_empty() {
        Err("no cells".into())
    } else {
        Ok(())
    }
}

/// "Cassandra, write, 2 × 2048, thread": where, what and how a cell ran.
fn driver_category(c: &DriverCell) -> String {
    let server = match c.server.as_deref().or(c.label.as_deref()) {
        Some(s) if s.to_ascii_lowercase().contains("front") => "front",
        Some(s) if s.to_ascii_lowercase().contains("cassandra") => "Cassandra",
        Some(s) => s,
        None => "?",
    };
    let shape = if c.threads == 1 {
        format!("current-thread × {}", c.concurrency)
    } else {
        format!("{} × {}", c.threads, c.concurrency)
    };
    let affinity = match c.affinity.as_deref() {
        Some("thread") => ", thread",
        _ => "",
    };
    format!("{server}, {}, {shape}{affinity}", c.workload)
}

fn driver_charts(cells: &[DriverCell], subtitle: &str) -> Result<Vec<(&'static str, Bars)>, String> {
    not_empty(cells)?;
    let categories: Vec<String> = cells.iter().map(driver_category).collect();
    let mut cpu = (Vec::new(), Vec::new());
    let mut p99 = Vec::new();
    for (c, name) in cells.iter().zip(&categories) {
        let both = c.median_cpu_us_per_op.ok_or_else(|| format!("{name}: no median_cpu_us_per_op"))?;
        cpu.0.push(figure(Some(both.shardwise), || format!("{name}: CPU per request of shardwise"))?);
        cpu.1.push(figure(Some(both.official), || format!("{name}: CPU per request of the official driver"))?);
        p99.push(figure(c.median.p99, || format!("{name}: median p99 ratio"))?);
    }
    Ok(vec![
        (
            "cpu",
            Bars {
                title: "Client CPU per request (median)".into(),
                subtitle: subtitle.into(),
                unit: "CPU µs per request (user + system), lower is better".into(),
                categories: categories.clone(),
                series: vec![("shardwise".into(), SHARDWISE, cpu.0), ("official (scylla 1.9)".into(), PEER, cpu.1)],
                reference: None,
            },
        ),
        (
            "p99",
            Bars {
                title: "p99 latency, shardwise / official (median of the rounds' ratios)".into(),
                subtitle: subtitle.into(),
                unit: "p99 ratio, shardwise / official: under 1.0 shardwise is faster".into(),
                categories,
                series: vec![("p99, shardwise / official".into(), RATIO, p99)],
                reference: Some((1.0, "1.0: equal".into())),
            },
        ),
    ])
}

fn open_loop_chart(cells: &[DriverCell], subtitle: &str) -> Result<Bars, String> {
    not_empty(cells)?;
    let (mut categories, mut shardwise, mut official) = (Vec::new(), Vec::new(), Vec::new());
    for c in cells {
        let rate = figure(c.rate, || format!("{}: rate", driver_category(c)))?;
        if c.runs.is_empty() {
            return Err(format!("rate {rate}: no runs"));
        }
        for (i, r) in c.runs.iter().enumerate() {
            let name = format!("{} writes/s, round {}", thousands(rate), i + 1);
            shardwise.push(figure(r.shardwise.p99_ms, || format!("{name}: p99_ms of shardwise"))?);
            official.push(figure(r.official.p99_ms, || format!("{name}: p99_ms of the official driver"))?);
            categories.push(name);
        }
    }
    Ok(Bars {
        title: "p99 at a fixed rate, measured from when each request was due".into(),
        subtitle: subtitle.into(),
        unit: "p99 latency (ms), lower is better".into(),
        categories,
        series: vec![("shardwise".into(), SHARDWISE, shardwise), ("official (scylla 1.9)".into(), PEER, official)],
        reference: None,
    })
}

/// CPU per row in µs: as stated, or from the CPU time and the rows.
fn cpu_per_row(r: &CdcRun, rows: u64) -> Option<f64> {
    let per_row = |s: f64| s * 1e6 / rows as f64;
    r.cpu_us_per_row
        .or_else(|| r.cpu_s.map(per_row))
        .or_else(|| Some(per_row(r.user_s? + r.sys_s?)))
        .filter(|_| rows > 0)
}

fn cdc_charts(cells: &[CdcCell], subtitle: &str) -> Result<Vec<(&'static str, Bars)>, String> {
    not_empty(cells)?;
    let mut categories = Vec::new();
    let (mut cpu, mut elapsed) = ((Vec::new(), Vec::new()), (Vec::new(), Vec::new()));
    for c in cells {
        let mut name = match c.cores {
            Some(1) => format!("1 core, window {} s", c.window_s),
            Some(n) => format!("{n} cores, window {} s", c.window_s),
            None => format!("window {} s", c.window_s),
        };
        if let Some(label) = &c.label {
            name = format!("{name}, {label}");
        }
        cpu.0.push(figure(cpu_per_row(&c.shardwise, c.rows), || format!("{name}: CPU per row of shardwise-cdc"))?);
        cpu.1.push(figure(cpu_per_row(&c.scylla_cdc, c.rows), || format!("{name}: CPU per row of scylla-cdc"))?);
        elapsed.0.push(figure(Some(c.shardwise.elapsed_s), || format!("{name}: elapsed of shardwise-cdc"))?);
        elapsed.1.push(figure(Some(c.scylla_cdc.elapsed_s), || format!("{name}: elapsed of scylla-cdc"))?);
        categories.push(name);
    }
    let series = |(s, p): (Vec<f64>, Vec<f64>)| {
        vec![("shardwise-cdc".to_string(), SHARDWISE, s), ("scylla-cdc 0.7".to_string(), PEER, p)]
    };
    Ok(vec![
        (
            "cpu",
            Bars {
                title: "Reader CPU per row".into(),
                subtitle: subtitle.into(),
                unit: "CPU µs per row (user + system), lower is better".into(),
                categories: categories.clone(),
                series: series(cpu),
                reference: None,
            },
        ),
        (
            "elapsed",
            Bars {
                title: "Time to read the whole log".into(),
                subtitle: subtitle.into(),
                unit: "elapsed (s), lower is better".into(),
                categories,
                series: series(elapsed),
                reference: None,
            },
        ),
    ])
}

/// 12000 → "12,000".
fn thousands(v: f64) -> String {
    let digits = format!("{:.0}", v);
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Decimals enough to write every value of a chart as its file states it
/// (2.66 and 4.00, 0.567), at most three.
fn decimals(values: impl Iterator<Item = f64>) -> usize {
    values.map(|v| format!("{v}").split_once('.').map_or(0, |(_, frac)| frac.len()).min(3)).max().unwrap_or(0)
}

const WIDTH: u32 = 980;
const HEADER_PX: u32 = 66;
const BAR_PX: u32 = 13;
const GROUP_GAP_PX: u32 = 9;
const LABEL_PX_PER_CHAR: u32 = 7;

/// Draws `b` as an SVG document. Errors are plotters' own, as text.
fn draw(b: &Bars) -> Result<String, String> {
    let n = b.categories.len();
    if n == 0 || b.series.is_empty() || b.series.iter().any(|(_, _, v)| v.len() != n) {
        return Err("a series without a value per category".into());
    }
    let series_count = b.series.len() as u32;
    let height = HEADER_PX + 60 + n as u32 * (series_count * BAR_PX + GROUP_GAP_PX);
    let longest = b.categories.iter().map(|c| c.chars().count()).max().unwrap_or(0) as u32;
    let label_area = 16 + longest * LABEL_PX_PER_CHAR;
    let max = b.series.iter().flat_map(|(_, _, v)| v.iter().copied()).chain(b.reference.as_ref().map(|r| r.0));
    let x_max = max.fold(0.0_f64, f64::max).max(f64::MIN_POSITIVE) * 1.15;

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        plot(&root, b, label_area, x_max).map_err(|e| e.to_string())?;
        root.present().map_err(|e| e.to_string())?;
    }
    Ok(svg)
}

type DrawResult = Result<(), DrawingAreaErrorKind<<SVGBackend<'static> as DrawingBackend>::ErrorType>>;

/// The header: title, where the figures come from, and the legend.
fn header(area: &DrawingArea<SVGBackend<'_>, Shift>, b: &Bars, legend_x: i32) -> DrawResult {
    let centre = TextStyle::from((FONT, 17)).pos(Pos::new(HPos::Center, VPos::Top));
    area.draw(&Text::new(b.title.as_str(), (WIDTH as i32 / 2, 6), centre))?;
    let small = TextStyle::from((FONT, 12)).pos(Pos::new(HPos::Center, VPos::Top)).color(&RGBColor(0x55, 0x55, 0x55));
    area.draw(&Text::new(b.subtitle.as_str(), (WIDTH as i32 / 2, 28), small))?;
    let entry = TextStyle::from((FONT, 13)).pos(Pos::new(HPos::Left, VPos::Center));
    let (mut x, y) = (legend_x, 54);
    let mut advance = |label: &str| {
        let at = x;
        x += 28 + 8 * label.chars().count() as i32;
        at
    };
    for (label, colour, _) in &b.series {
        let at = advance(label);
        area.draw(&Rectangle::new([(at, y - 6), (at + 16, y + 6)], colour.filled()))?;
        area.draw(&Text::new(label.as_str(), (at + 22, y), entry.clone()))?;
    }
    if let Some((_, label)) = &b.reference {
        let at = advance(label);
        area.draw(&PathElement::new(vec![(at, y), (at + 16, y)], ShapeStyle::from(&RED).stroke_width(2)))?;
        area.draw(&Text::new(label.as_str(), (at + 22, y), entry))?;
    }
    Ok(())
}

fn plot(root: &DrawingArea<SVGBackend<'_>, Shift>, b: &Bars, label_area: u32, x_max: f64) -> DrawResult {
    let groups = b.categories.len() as f64;
    root.fill(&WHITE)?;
    let (top, body) = root.split_vertically(HEADER_PX);
    let margin = 12;
    header(&top, b, margin + label_area as i32)?;
    let mut chart = ChartBuilder::on(&body)
        .margin(margin)
        .x_label_area_size(40)
        .y_label_area_size(label_area)
        .build_cartesian_2d(0.0..x_max, 0.0..groups)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_labels(10)
        .x_desc(b.unit.as_str())
        .label_style((FONT, 12))
        .axis_desc_style((FONT, 13))
        .draw()?;

    // Category i (0 at the top) holds the band [n-1-i, n-i]; its bars share
    // the band's middle 80%, in series order from the top.
    let pad = 0.1;
    let bar = (1.0 - 2.0 * pad) / b.series.len() as f64;
    let places = decimals(b.series.iter().flat_map(|(_, _, v)| v.iter().copied()));
    let value_style = TextStyle::from((FONT, 11)).pos(Pos::new(HPos::Left, VPos::Center));
    for (k, (_, colour, values)) in b.series.iter().enumerate() {
        let span = |i: usize| {
            let top = groups - i as f64 - pad - k as f64 * bar;
            (top - bar, top)
        };
        chart.draw_series(values.iter().enumerate().map(|(i, &v)| {
            let (low, high) = span(i);
            Rectangle::new([(0.0, low), (v, high)], colour.filled())
        }))?;
        chart.draw_series(values.iter().enumerate().map(|(i, &v)| {
            let (low, high) = span(i);
            EmptyElement::at((v, (low + high) / 2.0)) + Text::new(format!("{v:.places$}"), (4, 0), value_style.clone())
        }))?;
    }
    if let Some((at, _)) = &b.reference {
        let line = ShapeStyle::from(&RED).stroke_width(2);
        chart.draw_series(std::iter::once(PathElement::new(vec![(*at, 0.0), (*at, groups)], line)))?;
    }
    // The category names, right-aligned against the plotting area.
    let name_style = TextStyle::from((FONT, 12)).pos(Pos::new(HPos::Right, VPos::Center));
    for (i, name) in b.categories.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(0.0, groups - i as f64 - 0.5));
        root.draw(&Text::new(name.as_str(), (x - 8, y), name_style.clone()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DRIVER: &str = r#"{
        "kind": "driver", "title": "T", "date": "2026-01-01", "machine": "m", "command": "c", "source": "s",
        "cells": [
            {"server": "cassandra", "workload": "write", "threads": 1, "concurrency": 128,
             "median": {"cpu_per_op": 0.5, "throughput": 1.1, "p50": 0.9, "p99": 1.04},
             "median_cpu_us_per_op": {"shardwise": 2.66, "official": 4.69}},
            {"server": "front", "workload": "read", "threads": 4, "concurrency": 2048, "affinity": "thread",
             "median": {"cpu_per_op": null, "throughput": null, "p50": null, "p99": 0.76},
             "median_cpu_us_per_op": {"shardwise": 3.03, "official": 7.63}}
        ]}"#;

    fn render(name: &str, text: &str) -> Result<BTreeMap<String, String>, ChartError> {
        render_file(Path::new(name), text).map(|v| v.into_iter().collect())
    }

    #[test]
    fn bad_json_is_refused_naming_the_file() {
        let e = render("benches/results/broken.json", "{\"kind\": \"driver\", ").expect_err("bad JSON");
        assert!(matches!(e, ChartError::Parse { .. }), "{e}");
        assert!(e.to_string().contains("benches/results/broken.json"), "{e}");
    }

    #[test]
    fn a_file_without_its_provenance_is_refused() {
        let text = DRIVER.replace("\"machine\": \"m\",", "");
        let e = render("x/no-machine.json", &text).expect_err("no machine");
        assert!(e.to_string().contains("no-machine.json") && e.to_string().contains("machine"), "{e}");
    }

    #[test]
    fn missing_figures_and_unknown_kinds_name_the_cell() {
        let text = DRIVER.replace("\"p99\": 0.76", "\"p99\": null");
        let e = render("r/d.json", &text).expect_err("no p99");
        assert!(e.to_string().contains("r/d.json") && e.to_string().contains("front, read, 4 × 2048, thread"), "{e}");
        let e = render("r/k.json", &DRIVER.replace("\"driver\"", "\"drivers\"")).expect_err("kind");
        assert!(e.to_string().contains("unknown kind \"drivers\""), "{e}");
        let e = render("r/e.json", &DRIVER.replace("\"cells\": [", "\"cells\": [], \"x\": [")).expect_err("empty");
        assert!(e.to_string().contains("no cells"), "{e}");
    }

    #[test]
    fn driver_charts_show_both_drivers_and_the_parity_line() {
        let charts = render("r/suite.json", DRIVER).expect("charts");
        assert_eq!(charts.keys().collect::<Vec<_>>(), ["suite-cpu.svg", "suite-p99.svg"]);
        let cpu = &charts["suite-cpu.svg"];
        assert!(cpu.starts_with("<svg"), "{cpu}");
        for text in ["shardwise", "official (scylla 1.9)", "Cassandra, write, current-thread × 128", "2.66", "7.63"] {
            assert!(cpu.contains(text), "{text} missing from the CPU chart");
        }
        let p99 = &charts["suite-p99.svg"];
        for text in ["p99, shardwise / official", "1.0: equal", "front, read, 4 × 2048, thread", "1.04", "0.76"] {
            assert!(p99.contains(text), "{text} missing from the p99 chart");
        }
    }

    #[test]
    fn open_loop_and_cdc_charts_label_their_series() {
        let open = r#"{"kind": "open_loop", "title": "T", "date": "d", "machine": "m", "command": "c", "source": "s",
            "cells": [{"workload": "write", "threads": 2, "concurrency": 128, "rate": 12000,
                       "runs": [{"shardwise": {"p99_ms": 13.8}, "official": {"p99_ms": 19.8}}]}]}"#;
        let charts = render("r/open.json", open).expect("open loop");
        let svg = &charts["open-p99.svg"];
        for text in ["shardwise", "official (scylla 1.9)", "12,000 writes/s, round 1", "13.8", "19.8"] {
            assert!(svg.contains(text), "{text} missing from the open-loop chart");
        }
        let cdc = r#"{"kind": "cdc", "title": "T", "date": "d", "machine": "m", "command": "c", "source": "s",
            "cells": [{"cores": 2, "window_s": 30, "rows": 500000,
                       "shardwise": {"elapsed_s": 1.67, "cpu_s": 0.058},
                       "scylla_cdc": {"elapsed_s": 1.73, "user_s": 0.3, "sys_s": 0.026, "cpu_us_per_row": 0.65}}]}"#;
        let charts = render("r/cdc.json", cdc).expect("cdc");
        let (cpu, elapsed) = (&charts["cdc-cpu.svg"], &charts["cdc-elapsed.svg"]);
        for svg in [cpu, elapsed] {
            assert!(
                svg.contains("shardwise-cdc") && svg.contains("scylla-cdc 0.7") && svg.contains("2 cores, window 30 s")
            );
        }
        // 0.058 s over 500,000 rows; the stated figure wins over user + sys.
        assert!(cpu.contains("\n0.116\n") && cpu.contains("\n0.650\n"), "{cpu}");
        assert!(elapsed.contains("\n1.67\n") && elapsed.contains("\n1.73\n"), "{elapsed}");
    }

    #[test]
    fn same_results_same_bytes() {
        assert_eq!(render("r/a.json", DRIVER).expect("a"), render("r/a.json", DRIVER).expect("b"));
    }

    #[test]
    fn values_keep_their_stated_decimals() {
        assert_eq!(decimals([4.0, 2.66, 7.3].into_iter()), 2);
        assert_eq!(decimals([0.567, 1.1].into_iter()), 3);
        assert_eq!(decimals([0.058 * 1e6 / 500_000.0].into_iter()), 3);
        assert_eq!(decimals([6000.0].into_iter()), 0);
        assert_eq!(thousands(6000.0), "6,000");
        assert_eq!(thousands(18000.0), "18,000");
        assert_eq!(thousands(600.0), "600");
    }

    /// The committed charts show the committed results: regenerated in
    /// memory, byte for byte, with no chart left over.
    #[test]
    fn committed_charts_are_up_to_date() {
        let root = crate::steps::workspace_root();
        let stale = stale(&root.join("benches/results"), &root.join("benches/charts")).expect("the committed results");
        assert!(stale.is_empty(), "run `cargo xtask charts`; out of date: {stale:?}");
    }
}
