//! The repository stands on its own: a check that no tracked file reaches outside it.
//!
//! A user clones the repository alone, so a test that reads `../../somewhere`, an
//! `include_str!` of a file beside the checkout, or a comment citing a document the
//! repository does not hold all break for them while passing for us. The check reads every
//! file git knows (tracked, or untracked and not ignored) as text and reports:
//!
//! - a relative path (`../x`, `../../x/y`) that, resolved against the file's folder (what
//!   `include_str!`, `#[path]` and Markdown links start from) or, on a line that names
//!   `CARGO_MANIFEST_DIR`, against its crate's folder, lands outside the repository root;
//! - an absolute path of a machine-local work area (`/work/`, `/home/`);
//! - a citation of a project document (`docs/NAME.md`, `specs/NAME.md`) that does not exist
//!   in the repository.

use std::path::{Component, Path, PathBuf};
use std::process::Command;

/// One reference that leaves the repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The file, relative to the repository root.
    pub file: String,
    /// 1-based line number.
    pub line: usize,
    /// What was referenced and why it is a problem.
    pub what: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.what)
    }
}

/// This file, relative to the repository root.
const SELF: &str = "xtask/src/paths.rs";

/// Absolute path prefixes that only exist on a developer's machine.
const LOCAL_PREFIXES: [&str; 2] = ["/work/", "/home/"];

/// Checks every file git lists under `root`.
pub fn check(root: &Path) -> Result<Vec<Finding>, String> {
    let out = Command::new("git")
        .current_dir(root)
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .output()
        .map_err(|e| format!("could not run git ls-files: {e}"))?;
    if !out.status.success() {
        return Err(format!("git ls-files failed: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    let mut findings = Vec::new();
    for rel in out.stdout.split(|b| *b == 0).filter(|s| !s.is_empty()) {
        let rel = String::from_utf8_lossy(rel).into_owned();
        // The lock file names no paths; this file's own examples are what it looks for.
        if rel.ends_with(".lock") || rel == SELF {
            continue;
        }
        let Ok(bytes) = std::fs::read(root.join(&rel)) else { continue }; // deleted in the work tree
        if bytes.contains(&0) {
            continue; // binary
        }
        let text = String::from_utf8_lossy(&bytes);
        let crate_dir = crate_dir_of(root, Path::new(&rel));
        findings.extend(check_text(root, &rel, &crate_dir, &text));
    }
    Ok(findings)
}

/// The folder of the nearest `Cargo.toml` above `rel` (relative to `root`), or the root.
fn crate_dir_of(root: &Path, rel: &Path) -> PathBuf {
    let mut dir = rel.parent();
    while let Some(d) = dir {
        if root.join(d).join("Cargo.toml").is_file() {
            return d.to_path_buf();
        }
        dir = d.parent();
    }
    PathBuf::new()
}

/// Checks one file's text; `rel` and `crate_dir` are relative to `root`.
pub fn check_text(root: &Path, rel: &str, crate_dir: &Path, text: &str) -> Vec<Finding> {
    let file_dir = Path::new(rel).parent().unwrap_or(Path::new("")).to_path_buf();
    let mut findings = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let mut report = |what: String| findings.push(Finding { file: rel.to_string(), line: i + 1, what });
        let bases: &[&Path] = if line.contains("CARGO_MANIFEST_DIR") { &[&file_dir, crate_dir] } else { &[&file_dir] };
        for path in relative_paths(line) {
            if bases.iter().any(|b| escapes(b, path)) {
                report(format!("`{path}` points outside the repository"));
            }
        }
        for prefix in LOCAL_PREFIXES {
            if let Some(at) = line.find(prefix) {
                let path: String = line[at..].chars().take_while(|c| !c.is_whitespace() && *c != '`').collect();
                report(format!("`{path}` is a path on one machine, not in the repository"));
            }
        }
        for doc in cited_docs(line) {
            if !root.join(doc).is_file() {
                report(format!("cites `{doc}`, which the repository does not have"));
            }
        }
    }
    findings
}

/// Every `../`-led path in `line`: a run of path characters starting with `../`.
fn relative_paths(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = line;
    let mut offset = 0;
    while let Some(at) = rest.find("../") {
        let start = offset + at;
        // Extend backwards over further `../` and a leading `/` or `./` that belongs to the path.
        let begin =
            line[..start].char_indices().rev().find(|(_, c)| !is_path_char(*c)).map_or(0, |(i, c)| i + c.len_utf8());
        let end = line[start..].find(|c: char| !is_path_char(c)).map_or(line.len(), |p| start + p);
        let path = line[begin..end].trim_start_matches('/');
        if path.starts_with("../") && !out.contains(&path) {
            out.push(path);
        }
        offset = end;
        rest = &line[end..];
    }
    out
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '-')
}

/// Whether `base/path` (both relative to the repository root) lands outside the root.
fn escapes(base: &Path, path: &str) -> bool {
    let mut depth: isize = 0;
    for c in base.join(path).components() {
        match c {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

/// `docs/NAME.md` and `specs/NAME.md` citations in `line` (not preceded by a path character,
/// so `cdc/docs/x.md` or a URL's `/docs/` is not one).
fn cited_docs(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    for dir in ["docs/", "specs/"] {
        let mut from = 0;
        while let Some(at) = line[from..].find(dir) {
            let start = from + at;
            from = start + dir.len();
            if line[..start].chars().next_back().is_some_and(|c| is_path_char(c) || c == ':') {
                continue;
            }
            let end = line[start..].find(|c: char| !is_path_char(c)).map_or(line.len(), |p| start + p);
            let cited = line[start..end].trim_end_matches('.');
            // Our documents sit directly in `docs/`; `docs/dev/x.md` is another project's path.
            if cited.ends_with(".md") && cited.matches('/').count() == 1 {
                out.push(cited);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> PathBuf {
        crate::steps::workspace_root()
    }

    fn whats(rel: &str, crate_dir: &str, text: &str) -> Vec<String> {
        check_text(&root(), rel, Path::new(crate_dir), text).into_iter().map(|f| f.what).collect()
    }

    #[test]
    fn relative_paths_leaving_the_repository() {
        // What the emulation test once did: inside the repository from the test's folder,
        // outside from the crate's.
        let include = r#"include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../elsewhere/vectors/x.csv"))"#;
        assert_eq!(whats("testkit/tests/emu.rs", "testkit", include).len(), 1);
        assert_eq!(
            whats(
                "protocol/tests/v.rs",
                "protocol",
                r#"PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../elsewhere/vectors")"#
            )
            .len(),
            1
        );
        // Inside the repository: fine.
        let sibling = r#"concat!(env!("CARGO_MANIFEST_DIR"), "/../protocol/tests/data/x.csv")"#;
        assert!(whats("emu/tests/front/shards.rs", "emu", sibling).is_empty());
        assert!(whats("protocol/tests/data/README.md", "protocol", "[d](../../../docs/protocol.md)").is_empty());
        assert_eq!(whats("README.md", "", "see ../elsewhere/specs").len(), 1);
    }

    #[test]
    fn machine_paths_and_missing_documents() {
        assert_eq!(whats("a.rs", "", "//! (`/work/elsewhere/notes.md` §3)").len(), 1);
        assert_eq!(whats("a.rs", "", "// specs/cdc-log.md §3.8").len(), 1);
        assert_eq!(whats("a.rs", "", "// docs/no-such-document.md").len(), 1);
        assert!(whats("a.rs", "", "// https://docs.scylladb.com/docs/x.md").is_empty());
        assert!(whats("a.rs", "", "// see docs/cdc-log.md §3.8").is_empty());
        assert!(whats("docs/x.md", "", "ScyllaDB's `docs/dev/cdc.md`").is_empty());
        // `#[path]` resolves against the file's folder.
        assert!(whats("loom-tests/src/lib.rs", "loom-tests", r#"#[path = "../../driver/src/sync.rs"]"#).is_empty());
    }

    #[test]
    fn path_extraction() {
        assert_eq!(relative_paths(r#"a "../../x/y.csv" b ../z"#), vec!["../../x/y.csv", "../z"]);
        assert_eq!(relative_paths(r#""/../../x""#), vec!["../../x"]);
        assert!(relative_paths("a/b/c ./d").is_empty());
        // Characters of several bytes right before a path.
        assert_eq!(relative_paths("“../x” → ../y"), vec!["../x", "../y"]);
        assert!(escapes(Path::new("a"), "../../x"));
        assert!(!escapes(Path::new("a/b"), "../../x"));
    }
}
