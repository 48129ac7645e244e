//! Where the deriving crate reaches the protocol crate, read from its
//! `Cargo.toml`: directly (`shardwise-protocol`), through the driver
//! (`shardwise::protocol`) or through the CDC engine
//! (`shardwise_cdc::shardwise::protocol`), under whatever name the manifest
//! gives the dependency (`sw = { package = "shardwise" }`).
//!
//! The manifest is read with a small TOML reader of its own (no
//! dependency for a proc-macro crate): it flattens every key to its full
//! path, `[target.'cfg(unix)'.dependencies] sw = { package = "shardwise" }`
//! to `target.cfg(unix).dependencies.sw.package = "shardwise"`, and the
//! dependency tables are found among those paths. What the reader does not
//! need (numbers, dates, arrays' contents) it skips without interpreting.

use std::path::{Path, PathBuf};

/// A TOML value, as far as dependency tables need one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// A string.
    Str(String),
    /// `true` or `false`.
    Bool(bool),
    /// Anything else (numbers, dates, arrays).
    Other,
}

/// A TOML document as `(full key path, value)` pairs, inline tables
/// flattened, in document order.
pub(crate) type Entries = Vec<(Vec<String>, Value)>;

/// A manifest that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// What was wrong.
    pub reason: &'static str,
}

/// Flattens a TOML document into its key paths and values.
pub(crate) fn parse(text: &str) -> Result<Entries, ParseError> {
    let mut p = Parser { s: text.as_bytes(), i: 0, text };
    let mut out = Vec::new();
    let mut table: Vec<String> = Vec::new();
    loop {
        p.skip_blank_lines()?;
        let Some(c) = p.peek() else { return Ok(out) };
        if c == b'[' {
            p.i += 1;
            let array = p.eat(b'[');
            p.skip_ws();
            table = p.key()?;
            p.skip_ws();
            if !p.eat(b']') || (array && !p.eat(b']')) {
                return Err(p.error("expected `]` after a table name"));
            }
        } else {
            let mut path = table.clone();
            path.extend(p.key()?);
            p.skip_ws();
            if !p.eat(b'=') {
                return Err(p.error("expected `=` after a key"));
            }
            p.skip_ws();
            p.value(path, &mut out)?;
        }
        p.end_of_line()?;
    }
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
    text: &'a str,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn starts_with(&self, prefix: &str) -> bool {
        self.s.get(self.i..).is_some_and(|rest| rest.starts_with(prefix.as_bytes()))
    }

    fn error(&self, reason: &'static str) -> ParseError {
        let line = 1 + self.s[..self.i.min(self.s.len())].iter().filter(|&&c| c == b'\n').count();
        ParseError { line, reason }
    }

    /// Spaces and tabs.
    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    /// A comment up to the end of the line, if any.
    fn skip_comment(&mut self) {
        if self.peek() == Some(b'#') {
            while !matches!(self.peek(), None | Some(b'\n')) {
                self.i += 1;
            }
        }
    }

    /// Whitespace, comments and newlines.
    fn skip_blank_lines(&mut self) -> Result<(), ParseError> {
        loop {
            self.skip_ws();
            self.skip_comment();
            match self.peek() {
                Some(b'\n') => self.i += 1,
                Some(b'\r') if self.s.get(self.i + 1) == Some(&b'\n') => self.i += 2,
                _ => return Ok(()),
            }
        }
    }

    /// The rest of a line after a key/value pair or a table header.
    fn end_of_line(&mut self) -> Result<(), ParseError> {
        self.skip_ws();
        self.skip_comment();
        match self.peek() {
            None | Some(b'\n') => Ok(()),
            Some(b'\r') if self.s.get(self.i + 1) == Some(&b'\n') => Ok(()),
            _ => Err(self.error("expected the end of the line")),
        }
    }

    /// A dotted key: bare, "basic" or 'literal' parts.
    fn key(&mut self) -> Result<Vec<String>, ParseError> {
        let mut parts = Vec::new();
        loop {
            self.skip_ws();
            let part = match self.peek() {
                Some(b'"') => self.basic_string()?,
                Some(b'\'') => self.literal_string()?,
                _ => {
                    let start = self.i;
                    while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == b'-' || c == b'_') {
                        self.i += 1;
                    }
                    if start == self.i {
                        return Err(self.error("expected a key"));
                    }
                    self.text[start..self.i].to_owned()
                }
            };
            parts.push(part);
            self.skip_ws();
            if !self.eat(b'.') {
                return Ok(parts);
            }
        }
    }

    /// A value at `path`, pushed to `out` (inline tables flattened).
    fn value(&mut self, path: Vec<String>, out: &mut Entries) -> Result<(), ParseError> {
        match self.peek() {
            Some(b'"') | Some(b'\'') => {
                let s = if self.starts_with("\"\"\"") {
                    self.multiline_string(b'"')?
                } else if self.starts_with("'''") {
                    self.multiline_string(b'\'')?
                } else if self.peek() == Some(b'"') {
                    self.basic_string()?
                } else {
                    self.literal_string()?
                };
                out.push((path, Value::Str(s)));
            }
            Some(b'{') => {
                self.i += 1;
                self.skip_ws();
                if !self.eat(b'}') {
                    loop {
                        let mut inner = path.clone();
                        inner.extend(self.key()?);
                        self.skip_ws();
                        if !self.eat(b'=') {
                            return Err(self.error("expected `=` in an inline table"));
                        }
                        self.skip_ws();
                        self.value(inner, out)?;
                        self.skip_ws();
                        if self.eat(b'}') {
                            break;
                        }
                        if !self.eat(b',') {
                            return Err(self.error("expected `,` or `}` in an inline table"));
                        }
                        self.skip_ws();
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                loop {
                    self.skip_blank_lines()?;
                    if self.eat(b']') {
                        break;
                    }
                    // Array elements are not needed: parse them into a scratch list.
                    let mut scratch = Vec::new();
                    self.value(Vec::new(), &mut scratch)?;
                    self.skip_blank_lines()?;
                    if self.eat(b']') {
                        break;
                    }
                    if !self.eat(b',') {
                        return Err(self.error("expected `,` or `]` in an array"));
                    }
                }
                out.push((path, Value::Other));
            }
            _ if self.starts_with("true") => {
                self.i += 4;
                out.push((path, Value::Bool(true)));
            }
            _ if self.starts_with("false") => {
                self.i += 5;
                out.push((path, Value::Bool(false)));
            }
            Some(c) if c.is_ascii_alphanumeric() || matches!(c, b'+' | b'-') => {
                // Numbers and dates: up to a delimiter (a date-time may hold one space).
                while matches!(self.peek(), Some(c) if !matches!(c, b',' | b']' | b'}' | b'\n' | b'\r' | b'#' | b' ' | b'\t'))
                {
                    self.i += 1;
                }
                out.push((path, Value::Other));
            }
            _ => return Err(self.error("expected a value")),
        }
        Ok(())
    }

    fn basic_string(&mut self) -> Result<String, ParseError> {
        self.i += 1;
        let mut s = String::new();
        loop {
            match self.peek() {
                None | Some(b'\n') => return Err(self.error("unterminated string")),
                Some(b'"') => {
                    self.i += 1;
                    return Ok(s);
                }
                Some(b'\\') => {
                    self.i += 1;
                    self.escape(&mut s)?;
                }
                Some(_) => self.push_char(&mut s),
            }
        }
    }

    fn literal_string(&mut self) -> Result<String, ParseError> {
        self.i += 1;
        let start = self.i;
        loop {
            match self.peek() {
                None | Some(b'\n') => return Err(self.error("unterminated string")),
                Some(b'\'') => {
                    let s = self.text[start..self.i].to_owned();
                    self.i += 1;
                    return Ok(s);
                }
                Some(_) => self.i += 1,
            }
        }
    }

    /// `"""..."""` or `'''...'''`.
    fn multiline_string(&mut self, quote: u8) -> Result<String, ParseError> {
        self.i += 3;
        let close = if quote == b'"' { "\"\"\"" } else { "'''" };
        // A newline right after the opening quotes is not part of the string.
        if self.starts_with("\r\n") {
            self.i += 2;
        } else if self.peek() == Some(b'\n') {
            self.i += 1;
        }
        let mut s = String::new();
        loop {
            if self.starts_with(close) {
                self.i += 3;
                // Up to two more quotes belong to the string.
                for _ in 0..2 {
                    if self.eat(quote) {
                        s.push(quote as char);
                    }
                }
                return Ok(s);
            }
            match self.peek() {
                None => return Err(self.error("unterminated multi-line string")),
                Some(b'\\') if quote == b'"' => {
                    self.i += 1;
                    if matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                        // A line-ending backslash trims the whitespace that follows.
                        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
                            self.i += 1;
                        }
                    } else {
                        self.escape(&mut s)?;
                    }
                }
                Some(_) => self.push_char(&mut s),
            }
        }
    }

    /// The escape after a backslash.
    fn escape(&mut self, s: &mut String) -> Result<(), ParseError> {
        let c = self.peek().ok_or_else(|| self.error("unterminated escape"))?;
        self.i += 1;
        let simple = match c {
            b'"' => Some('"'),
            b'\\' => Some('\\'),
            b'b' => Some('\u{8}'),
            b'f' => Some('\u{c}'),
            b'n' => Some('\n'),
            b'r' => Some('\r'),
            b't' => Some('\t'),
            b'e' => Some('\u{1b}'),
            _ => None,
        };
        if let Some(ch) = simple {
            s.push(ch);
            return Ok(());
        }
        let digits = match c {
            b'x' => 2,
            b'u' => 4,
            b'U' => 8,
            _ => return Err(self.error("unknown escape in a string")),
        };
        let hex = self.text.get(self.i..self.i + digits).ok_or_else(|| self.error("short unicode escape"))?;
        let ch = u32::from_str_radix(hex, 16)
            .ok()
            .and_then(char::from_u32)
            .ok_or_else(|| self.error("invalid unicode escape"))?;
        self.i += digits;
        s.push(ch);
        Ok(())
    }

    /// One UTF-8 character of the input.
    fn push_char(&mut self, s: &mut String) {
        if let Some(ch) = self.text.get(self.i..).and_then(|rest| rest.chars().next()) {
            s.push(ch);
            self.i += ch.len_utf8();
        } else {
            self.i += 1;
        }
    }
}

// ---------------------------------------------------------------- dependencies

/// One dependency of a manifest: the name code uses for it and the package
/// it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Dependency {
    /// The key in the dependency table: the crate's name in code, with `-`
    /// read as `_`.
    pub key: String,
    /// The package (`package = "..."`), or the key.
    pub package: String,
}

/// The dependency tables' names: normal and dev dependencies (derives in
/// tests, examples and doc tests use dev-dependencies), with their old
/// underscore spellings. Build dependencies are not visible to the crate's
/// code.
const TABLES: [&str; 3] = ["dependencies", "dev-dependencies", "dev_dependencies"];

/// The dependencies of a manifest, from `[dependencies]`,
/// `[dev-dependencies]` and their `[target.'...'.*]` forms, written as
/// `name = ...`, `name = { package = ... }`, `name.package = ...` or
/// `[dependencies.name]` tables. `workspace = true` entries take their
/// `package` from `workspace_deps` (the workspace root's
/// `[workspace.dependencies]`).
pub(crate) fn dependencies(entries: &Entries, workspace: Option<&Entries>) -> Vec<Dependency> {
    let mut out: Vec<Dependency> = Vec::new();
    let mut inherits: Vec<String> = Vec::new();
    for (path, value) in entries {
        let rest = match path.as_slice() {
            [table, rest @ ..] if TABLES.contains(&table.as_str()) => rest,
            [target, _, table, rest @ ..] if target == "target" && TABLES.contains(&table.as_str()) => rest,
            _ => continue,
        };
        let Some((key, field)) = rest.split_first() else { continue };
        let index = match out.iter().position(|d| d.key == *key) {
            Some(i) => i,
            None => {
                out.push(Dependency { key: key.clone(), package: key.clone() });
                out.len() - 1
            }
        };
        match (field, value) {
            ([f], Value::Str(package)) if f == "package" => out[index].package = package.clone(),
            ([f], Value::Bool(true)) if f == "workspace" => inherits.push(key.clone()),
            _ => {}
        }
    }
    if let Some(ws) = workspace {
        for key in inherits {
            let package = ws.iter().find_map(|(path, value)| match (path.as_slice(), value) {
                ([w, d, k, p], Value::Str(package))
                    if w == "workspace" && d == "dependencies" && *k == key && p == "package" =>
                {
                    Some(package.clone())
                }
                _ => None,
            });
            if let (Some(package), Some(dep)) = (package, out.iter_mut().find(|d| d.key == key)) {
                dep.package = package;
            }
        }
    }
    out
}

/// Whether a manifest has a `[workspace]` table.
pub(crate) fn is_workspace_root(entries: &Entries) -> bool {
    entries.iter().any(|(path, _)| path.first().is_some_and(|t| t == "workspace"))
}

/// How generated code names the protocol crate, given the dependencies of
/// the deriving crate (`::`-less, e.g. `sw::protocol`): the protocol crate
/// itself, else the driver's re-export, else the CDC engine's re-export of
/// the driver. `None` when the crate depends on none of them.
pub(crate) fn protocol_path(deps: &[Dependency]) -> Option<String> {
    let find =
        |package: &str| deps.iter().find(|d| d.package.replace('_', "-") == package).map(|d| d.key.replace('-', "_"));
    if let Some(name) = find("shardwise-protocol") {
        return Some(name);
    }
    if let Some(name) = find("shardwise") {
        return Some(format!("{name}::protocol"));
    }
    find("shardwise-cdc").map(|name| format!("{name}::shardwise::protocol"))
}

/// The protocol crate's path for the crate whose manifest is in
/// `manifest_dir` (`CARGO_MANIFEST_DIR`), or why it cannot be found.
pub(crate) fn find_protocol_path(manifest_dir: &Path) -> Result<String, String> {
    let manifest = manifest_dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).map_err(|e| format!("cannot read {}: {e}", manifest.display()))?;
    let entries = parse(&text).map_err(|e| {
        format!("cannot read the dependencies of {} (line {}: {})", manifest.display(), e.line, e.reason)
    })?;
    let workspace = workspace_root(manifest_dir, &entries).and_then(|root| {
        let text = std::fs::read_to_string(root.join("Cargo.toml")).ok()?;
        parse(&text).ok()
    });
    let deps = dependencies(&entries, workspace.as_ref());
    protocol_path(&deps).ok_or_else(|| {
        format!("{} depends on none of `shardwise`, `shardwise-protocol` and `shardwise-cdc`", manifest.display())
    })
}

/// The folder of the workspace root's manifest: this one if it is the
/// root, else the nearest folder above with a `[workspace]` table.
fn workspace_root(dir: &Path, entries: &Entries) -> Option<PathBuf> {
    if is_workspace_root(entries) {
        return Some(dir.to_owned());
    }
    dir.ancestors().skip(1).find_map(|up| {
        let text = std::fs::read_to_string(up.join("Cargo.toml")).ok()?;
        is_workspace_root(&parse(&text).ok()?).then(|| up.to_owned())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // A test may panic on a broken fixture.

    use super::*;

    fn path_of(manifest: &str) -> Option<String> {
        protocol_path(&dependencies(&parse(manifest).unwrap(), None))
    }

    #[test]
    fn plain_dependencies() {
        assert_eq!(path_of("[dependencies]\nshardwise = \"0.1\"\n").as_deref(), Some("shardwise::protocol"));
        assert_eq!(
            path_of("[dependencies]\nshardwise = \"0.1\"\nshardwise-protocol = { version = \"0.1\" }\n").as_deref(),
            Some("shardwise_protocol")
        );
        assert_eq!(
            path_of("[dev-dependencies]\nshardwise-cdc = \"0.1\"").as_deref(),
            Some("shardwise_cdc::shardwise::protocol")
        );
        // Build dependencies are not visible to the crate's code.
        assert_eq!(path_of("[build-dependencies]\nshardwise = \"0.1\"\n"), None);
        // Neither are keys that only look alike, outside dependency tables.
        assert_eq!(path_of("[package]\nname = \"shardwise-app\"\n[features]\nshardwise = []\n"), None);
        assert_eq!(path_of("[dependencies]\nshardwise-extra = \"1\"\n"), None);
    }

    #[test]
    fn renamed_dependencies() {
        let manifest = r#"
            [package]
            name = "app" # the crate

            [dependencies]
            tokio = { version = "1", features = ["rt", "macros"] }
            sw = { package = "shardwise", version = "0.1", default-features = false }
        "#;
        assert_eq!(path_of(manifest).as_deref(), Some("sw::protocol"));
        assert_eq!(
            path_of("[dependencies]\nsw.package = 'shardwise'\nsw.version = '0.1'\n").as_deref(),
            Some("sw::protocol")
        );
        assert_eq!(
            path_of("[dependencies]\nmy-proto = { package = \"shardwise-protocol\", path = \"../p\" }\n").as_deref(),
            Some("my_proto")
        );
        // A dependency named `shardwise` that is another package is not the driver.
        assert_eq!(path_of("[dependencies]\nshardwise = { package = \"something-else\", version = \"1\" }\n"), None);
    }

    #[test]
    fn dependency_tables_and_targets() {
        let manifest = "
            [dependencies.driver]
            package = \"shardwise\"
            version = \"0.1\"
            features = [
                \"a\", # comment
                \"b\",
            ]

            [dependencies.'other']
            version = \"2\"
        ";
        assert_eq!(path_of(manifest).as_deref(), Some("driver::protocol"));
        let target =
            "[target.'cfg(target_os = \"linux\")'.dependencies]\nsw = { package = \"shardwise\", version = \"0.1\" }\n";
        assert_eq!(path_of(target).as_deref(), Some("sw::protocol"));
        let table = "[target.\"cfg(unix)\".dev-dependencies.cdc]\npackage = \"shardwise-cdc\"\n";
        assert_eq!(path_of(table).as_deref(), Some("cdc::shardwise::protocol"));
    }

    #[test]
    fn workspace_inherited_renames() {
        let member = parse("[dependencies]\nsw.workspace = true\nserde = { workspace = true }\n").unwrap();
        let root = parse(
            "[workspace]\nmembers = [\"app\"]\n\n[workspace.dependencies]\nsw = { package = \"shardwise\", version = \"0.1\" }\n",
        )
        .unwrap();
        assert!(is_workspace_root(&root));
        assert!(!is_workspace_root(&member));
        assert_eq!(protocol_path(&dependencies(&member, Some(&root))).as_deref(), Some("sw::protocol"));
        // Without the root, the key is taken as the package.
        assert_eq!(protocol_path(&dependencies(&member, None)), None);
    }

    #[test]
    fn toml_syntax() {
        let doc = r#"
            "quoted key" = 'literal \n'
            a.b = """
multi "line" \
   trimmed"""
            c = '''raw ''' # comment
            d = 1979-05-27T07:32:00Z
            e = [[1, 2], [3]]
            f = { g = { h = true }, i = -1.5e3 }
            [[bin]]
            name = "x\u00e9\t"
        "#;
        let entries = parse(doc).unwrap();
        let get = |path: &[&str]| entries.iter().find(|(p, _)| p == path).map(|(_, v)| v.clone());
        assert_eq!(get(&["quoted key"]), Some(Value::Str("literal \\n".into())));
        assert_eq!(get(&["a", "b"]), Some(Value::Str("multi \"line\" trimmed".into())));
        assert_eq!(get(&["c"]), Some(Value::Str("raw ".into())));
        assert_eq!(get(&["d"]), Some(Value::Other));
        assert_eq!(get(&["e"]), Some(Value::Other));
        assert_eq!(get(&["f", "g", "h"]), Some(Value::Bool(true)));
        assert_eq!(get(&["f", "i"]), Some(Value::Other));
        assert_eq!(get(&["bin", "name"]), Some(Value::Str("xé\t".into())));
        for bad in ["a = \"open", "[table", "a = { b = 1", "= 1", "a = 1 b", "a = \"\\q\""] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse("a = 1\nb = \"x").unwrap_err().line, 2);
    }

    #[test]
    fn reads_this_crates_manifest() {
        // The macros crate reaches the protocol crate as a dev-dependency.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        assert_eq!(find_protocol_path(dir).as_deref(), Ok("shardwise_protocol"));
        let missing = find_protocol_path(&dir.join("no-such-folder")).unwrap_err();
        assert!(missing.contains("cannot read"), "{missing}");
    }
}
