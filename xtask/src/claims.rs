//! The claims ledger's check (`docs/claims.md`, issue 54): every test the ledger names exists (a
//! `fn` of that name in that file), every benchmark section it names is a heading of
//! `benches/RESULTS.md`, every row has one of the known statuses, no id is used twice, and every
//! README sentence marked as a guarantee (`<!-- claim: ID -->` after it) has a row.

use std::collections::BTreeSet;
use std::path::Path;

/// The ledger, relative to the repository root.
pub const LEDGER: &str = "docs/claims.md";
/// The files whose marked sentences must have a row.
pub const MARKED: &[&str] = &["README.md"];
/// The statuses a row may have.
const STATUSES: &[&str] = &["backed", "weaker", "open", "bench"];

/// One row of the ledger.
#[derive(Debug, PartialEq, Eq)]
pub struct Row {
    pub id: String,
    /// Its line in the ledger (from 1).
    pub line: usize,
    /// `path::function` and `benches/RESULTS.md#heading` references, as written.
    pub refs: Vec<String>,
    pub status: String,
}

/// The rows of a ledger: the table lines whose first cell is a backquoted id.
pub fn rows(ledger: &str) -> Vec<Row> {
    let mut out = Vec::new();
    for (i, line) in ledger.lines().enumerate() {
        let Some(rest) = line.trim().strip_prefix('|') else { continue };
        let cells: Vec<&str> = rest.split(" | ").map(|c| c.trim().trim_end_matches('|').trim()).collect();
        let Some(id) = cells.first().and_then(|c| c.strip_prefix('`')).and_then(|c| c.strip_suffix('`')) else {
            continue;
        };
        let refs = cells.get(2).map(|c| quoted(c)).unwrap_or_default();
        let refs = refs.into_iter().filter(|r| r.contains(".rs::") || r.starts_with("benches/RESULTS.md#")).collect();
        let status = cells.last().map(|c| c.to_string()).unwrap_or_default();
        out.push(Row { id: id.to_string(), line: i + 1, refs, status });
    }
    out
}

/// The backquoted pieces of `text`.
fn quoted(text: &str) -> Vec<String> {
    text.split('`').skip(1).step_by(2).map(str::to_string).collect()
}

/// The ids marked in `text` (`<!-- claim: ID -->`), each with its line.
pub fn markers(text: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("<!-- claim:") {
            rest = &rest[at + "<!-- claim:".len()..];
            let Some(end) = rest.find("-->") else { break };
            out.push((rest[..end].trim().to_string(), i + 1));
            rest = &rest[end..];
        }
    }
    out
}

/// Whether `source` defines a function `name` (`fn name(` or `fn name<`).
fn defines(source: &str, name: &str) -> bool {
    let needle = format!("fn {name}");
    source.match_indices(&needle).any(|(at, _)| {
        let before_ok = at == 0 || !source.as_bytes()[at - 1].is_ascii_alphanumeric();
        let after = source[at + needle.len()..].chars().next();
        before_ok && matches!(after, Some('(' | '<'))
    })
}

/// What is wrong with the ledger `ledger` against the files `read` gives
/// (relative to the repository root; `None`: no such file).
pub fn problems(ledger: &str, read: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let mut out = Vec::new();
    let rows = rows(ledger);
    if rows.is_empty() {
        out.push(format!("{LEDGER}: no rows"));
    }
    let mut ids = BTreeSet::new();
    for row in &rows {
        let at = format!("{LEDGER}:{} ({})", row.line, row.id);
        if !ids.insert(row.id.clone()) {
            out.push(format!("{at}: the id is used twice"));
        }
        if !STATUSES.contains(&row.status.as_str()) {
            out.push(format!("{at}: status {:?} is none of {STATUSES:?}", row.status));
        }
        if row.status != "open" && row.refs.is_empty() {
            out.push(format!("{at}: {} but names no test or benchmark section", row.status));
        }
        for r in &row.refs {
            if let Some(heading) = r.strip_prefix("benches/RESULTS.md#") {
                let results = read("benches/RESULTS.md").unwrap_or_default();
                if !results.lines().any(|l| l.starts_with('#') && l.contains(heading)) {
                    out.push(format!("{at}: benches/RESULTS.md has no heading with {heading:?}"));
                }
            } else if let Some((path, name)) = r.rsplit_once("::") {
                match read(path) {
                    None => out.push(format!("{at}: no file {path}")),
                    Some(source) if !defines(&source, name) => out.push(format!("{at}: {path} has no fn {name}")),
                    Some(_) => {}
                }
            }
        }
    }
    for file in MARKED {
        let text = read(file).unwrap_or_default();
        for (id, line) in markers(&text) {
            if !ids.contains(&id) {
                out.push(format!("{file}:{line}: the guarantee marked {id:?} has no row in {LEDGER}"));
            }
        }
    }
    out
}

/// The check against the repository at `root`.
pub fn check(root: &Path) -> Result<Vec<String>, String> {
    let ledger = std::fs::read_to_string(root.join(LEDGER)).map_err(|e| format!("reading {LEDGER}: {e}"))?;
    let read = |rel: &str| std::fs::read_to_string(root.join(rel)).ok();
    Ok(problems(&ledger, &read))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEDGER_TEXT: &str = "\
| id | claim | backed by | bound | status |
|---|---|---|---|---|
| `once` | \"exactly once\" | `a/tests/t.rs::every_change_once`, `benches/RESULTS.md#CDC: beside` | equal | backed |
| `ttl` | \"7-day TTL\" | — | nothing | open |
";

    fn files<'a>(readme: &'a str, test: &'a str) -> impl Fn(&str) -> Option<String> + 'a {
        move |path: &str| match path {
            "README.md" => Some(readme.to_string()),
            "a/tests/t.rs" => Some(test.to_string()),
            "benches/RESULTS.md" => Some("# Results\n## CDC: beside scylla-cdc\n".to_string()),
            _ => None,
        }
    }

    const TEST_FILE: &str = "#[test]\nasync fn every_change_once() {}\nfn every_change_once_more() {}\n";
    const README: &str = "Exactly once. <!-- claim: once --> A TTL. <!-- claim: ttl -->\n";

    #[test]
    fn rows_and_markers_are_read() {
        let rows = rows(LEDGER_TEXT);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].id, "once");
        assert_eq!(rows[0].refs, ["a/tests/t.rs::every_change_once", "benches/RESULTS.md#CDC: beside"]);
        assert_eq!(rows[0].status, "backed");
        assert_eq!((rows[1].id.as_str(), rows[1].status.as_str(), rows[1].line), ("ttl", "open", 4));
        assert_eq!(markers(README), [("once".to_string(), 1), ("ttl".to_string(), 1)]);
    }

    #[test]
    fn a_consistent_ledger_passes() {
        assert_eq!(problems(LEDGER_TEXT, &files(README, TEST_FILE)), Vec::<String>::new());
    }

    #[test]
    fn a_missing_test_fails() {
        // Only a longer name is there: a prefix does not count.
        let test = "fn every_change_once_more() {}\n";
        let found = problems(LEDGER_TEXT, &files(README, test));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("a/tests/t.rs has no fn every_change_once"), "{found:?}");
        let moved = LEDGER_TEXT.replace("a/tests/t.rs", "a/tests/gone.rs");
        assert!(problems(&moved, &files(README, TEST_FILE))[0].contains("no file a/tests/gone.rs"));
    }

    #[test]
    fn a_guarantee_without_a_row_fails() {
        let readme = format!("{README}No loss. <!-- claim: no-loss -->\n");
        let found = problems(LEDGER_TEXT, &files(&readme, TEST_FILE));
        assert_eq!(found, ["README.md:2: the guarantee marked \"no-loss\" has no row in docs/claims.md"]);
    }

    #[test]
    fn a_missing_benchmark_section_a_bad_status_and_a_twice_used_id_fail() {
        let ledger = LEDGER_TEXT.replace("#CDC: beside", "#Nowhere").replace("| open |", "| fine |");
        let ledger = format!("{ledger}| `once` | again | `a/tests/t.rs::every_change_once` | x | backed |\n");
        let found = problems(&ledger, &files(README, TEST_FILE)).join("\n");
        assert!(found.contains("no heading with \"Nowhere\""), "{found}");
        assert!(found.contains("status \"fine\""), "{found}");
        assert!(found.contains("the id is used twice"), "{found}");
    }

    /// The repository's own ledger holds (the house step, as a unit test).
    #[test]
    fn the_repository_ledger_holds() {
        let root = crate::steps::workspace_root();
        assert_eq!(check(&root), Ok(Vec::new()));
    }
}
