//! `cargo xtask imports [CRATE_DIR...]`: the import circles among a crate's files.
//!
//! A crate reads well when its files stand in layers: each one uses only files below it, so a
//! reader can start at the bottom and never meet a name that is explained further up. An import
//! circle (file A uses B, B uses ... A) breaks that: none of the files in it can be read, tested
//! or moved alone. This check finds them with nothing but the sources, so anyone can run it.
//!
//! How it reads a crate:
//!
//! - the module tree from `src/lib.rs` (or `src/main.rs`): `mod x;` is `x.rs` or `x/mod.rs`
//!   beside the declaring file (in its folder for `lib.rs`/`main.rs`/`mod.rs`, in the folder
//!   named after it otherwise), `#[path = "..."]` honoured; an inline `mod x { ... }` is part of
//!   its file;
//! - the uses: every `use` tree, and every path written in code that starts with `crate::`,
//!   `super::`, `self::`, `$crate::`, a child module's name or a name a `use` brought in.
//!   Comments, strings and character literals are skipped, so doc links do not count;
//! - each path is followed to the module that defines its item: through the modules it names,
//!   then through `use` and `pub use` bindings and glob imports, so `crate::Session` counts as
//!   a use of the file that defines `Session`, not of `lib.rs` that re-exports it. Paths to
//!   other crates are not followed.
//!
//! One rule decides what is an import: a file and the files of its own submodules (at any
//! depth) are one subtree, and a use between them (a child naming `super::Thing`, a parent
//! calling into its child) follows the tree; it is not counted. Everything else is an edge of
//! the file graph, whose strongly connected components of more than one file are the circles;
//! each is printed with one cycle through it and, per step, the first line that makes it.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `cargo xtask imports [--all] [CRATE_DIR...]`: prints each named crate's import circles
/// (every crate of the workspace when none is named), with `--all` every import too; fails
/// when any has a circle.
pub fn run(args: &[String]) -> ExitCode {
    let root = workspace_root();
    let all = args.iter().any(|a| a == "--all");
    let args: Vec<String> = args.iter().filter(|a| *a != "--all").cloned().collect();
    if args.iter().any(|a| a.starts_with('-')) {
        eprintln!("xtask imports: usage: cargo xtask imports [--all] [CRATE_DIR...] (e.g. driver emu)");
        return ExitCode::from(2);
    }
    let crates = if args.is_empty() { workspace_crates(&root) } else { args };
    let mut failed = false;
    for name in &crates {
        match check(&root, name) {
            Ok(report) => {
                print!("{}", report.render(name));
                if all {
                    for s in &report.imports {
                        println!("  {}:{} uses {} ({})", s.file, s.line, s.next, s.path);
                    }
                }
                failed |= !report.circles.is_empty();
            }
            Err(e) => {
                eprintln!("xtask imports: {name}: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The repository root: this crate's parent folder.
fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

/// The folders under `root` that hold a crate with a `src/lib.rs` or `src/main.rs`.
pub(crate) fn workspace_crates(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(root) {
        for e in entries.flatten() {
            let dir = e.path();
            let has_src = dir.join("src/lib.rs").is_file() || dir.join("src/main.rs").is_file();
            if dir.join("Cargo.toml").is_file() && has_src {
                out.push(e.file_name().to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

/// Reads the crate in `root/crate_dir` from disk and finds its circles.
pub fn check(root: &Path, crate_dir: &str) -> Result<Report, String> {
    let src = root.join(crate_dir).join("src");
    let top = if src.join("lib.rs").is_file() {
        "lib.rs"
    } else if src.join("main.rs").is_file() {
        "main.rs"
    } else {
        return Err(format!("no src/lib.rs or src/main.rs under {}", root.join(crate_dir).display()));
    };
    let read = |rel: &Path| std::fs::read_to_string(src.join(rel)).ok();
    Ok(analyse(Path::new(top), &read))
}

/// What the check found in one crate.
#[derive(Debug)]
pub struct Report {
    /// Files read, relative to `src/`.
    pub files: usize,
    /// The edges of the file graph (tree edges left out), each at its first use.
    pub imports: Vec<Step>,
    /// The circles, each with its files and one cycle through them.
    pub circles: Vec<Circle>,
    /// Modules declared whose file was not found.
    pub missing: Vec<String>,
}

/// One strongly connected component of more than one file.
#[derive(Debug)]
pub struct Circle {
    /// Its files, relative to `src/`, sorted.
    pub files: Vec<String>,
    /// One cycle: each step's file, the line of its first use of the next, and the path used.
    pub cycle: Vec<Step>,
}

/// One step of a cycle: `file` uses `next` at `line`, by writing `path`.
#[derive(Debug)]
pub struct Step {
    /// The using file.
    pub file: String,
    /// The first line of `file` that uses `next`.
    pub line: usize,
    /// The path written there.
    pub path: String,
    /// The used file.
    pub next: String,
}

impl Report {
    /// The report as printed, files named from the workspace root (`crate_dir/src/...`).
    pub fn render(&self, crate_dir: &str) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let at = |f: &str| format!("{crate_dir}/src/{f}");
        for m in &self.missing {
            let _ = writeln!(out, "imports: {crate_dir}: warning: {m}");
        }
        match self.circles.len() {
            0 => {
                let _ = writeln!(
                    out,
                    "imports: {crate_dir}: no import circle ({} files, {} imports between them)",
                    self.files,
                    self.imports.len()
                );
            }
            n => {
                let _ = writeln!(
                    out,
                    "imports: {crate_dir}: {n} import circle{} ({} files, {} imports between them)",
                    if n == 1 { "" } else { "s" },
                    self.files,
                    self.imports.len()
                );
                for (i, c) in self.circles.iter().enumerate() {
                    let _ = writeln!(out, "  circle {} of {} files: {}", i + 1, c.files.len(), c.files.join(", "));
                    for s in &c.cycle {
                        let _ = writeln!(out, "    {}:{} uses {} ({})", at(&s.file), s.line, s.next, s.path);
                    }
                }
            }
        }
        out
    }
}

/// Reads the module tree from `top` (relative to `src/`) through `read` and finds the circles.
pub fn analyse(top: &Path, read: &dyn Fn(&Path) -> Option<String>) -> Report {
    let tree = Tree::load(top, read);
    let edges = tree.edges();
    let n = tree.files.len();
    let mut adjacency = vec![Vec::new(); n];
    for &(from, to) in edges.keys() {
        adjacency[from].push(to);
    }
    let mut circles = Vec::new();
    for component in strongly_connected(&adjacency) {
        if component.len() < 2 {
            continue;
        }
        let members: BTreeSet<usize> = component.iter().copied().collect();
        let cycle = one_cycle(&adjacency, &members)
            .windows(2)
            .map(|w| {
                let site = &edges[&(w[0], w[1])];
                Step {
                    file: tree.files[w[0]].rel.clone(),
                    line: site.line,
                    path: site.path.clone(),
                    next: tree.files[w[1]].rel.clone(),
                }
            })
            .collect();
        let mut files: Vec<String> = members.iter().map(|&f| tree.files[f].rel.clone()).collect();
        files.sort();
        circles.push(Circle { files, cycle });
    }
    circles.sort_by(|a, b| a.files.cmp(&b.files));
    let imports = edges
        .iter()
        .map(|(&(from, to), site)| Step {
            file: tree.files[from].rel.clone(),
            line: site.line,
            path: site.path.clone(),
            next: tree.files[to].rel.clone(),
        })
        .collect();
    Report { files: n, imports, circles, missing: tree.missing }
}

// ---------------------------------------------------------------------------------------------
// Tokens: identifiers, string literals (kept for `#[path]`), `::` and single punctuation.

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    PathSep,
    Punct(char),
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Splits Rust source into the tokens the check needs; comments, lifetimes, numbers and
/// character literals are dropped. Unterminated literals and comments end at the end of input.
fn tokenize(src: &str) -> Vec<Token> {
    let s: Vec<char> = src.chars().collect();
    let at = |i: usize| s.get(i).copied().unwrap_or('\0');
    let (mut i, mut line, mut out) = (0, 1, Vec::new());
    while i < s.len() {
        let c = s[i];
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            c if c.is_whitespace() => i += 1,
            '/' if at(i + 1) == '/' => {
                while i < s.len() && s[i] != '\n' {
                    i += 1;
                }
            }
            '/' if at(i + 1) == '*' => {
                let mut depth = 0usize;
                while i < s.len() {
                    if s[i] == '/' && at(i + 1) == '*' {
                        depth += 1;
                        i += 2;
                    } else if s[i] == '*' && at(i + 1) == '/' {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        line += usize::from(s[i] == '\n');
                        i += 1;
                    }
                }
            }
            '"' => {
                let start_line = line;
                let (text, next) = quoted(&s, i + 1, &mut line);
                out.push(Token { tok: Tok::Str(text), line: start_line });
                i = next;
            }
            '\'' => i = char_or_lifetime(&s, i, &mut line),
            '$' if s[i + 1..].starts_with(&['c', 'r', 'a', 't', 'e']) && !is_ident_char(at(i + 6)) => {
                out.push(Token { tok: Tok::Ident("crate".into()), line });
                i += 6;
            }
            c if c.is_ascii_digit() => {
                i += 1;
                while i < s.len() && (is_ident_char(s[i]) || (s[i] == '.' && at(i + 1).is_ascii_digit())) {
                    i += 1;
                }
            }
            c if is_ident_start(c) => {
                let start = i;
                while i < s.len() && is_ident_char(s[i]) {
                    i += 1;
                }
                let word: String = s[start..i].iter().collect();
                let raw_prefix = matches!(word.as_str(), "r" | "br" | "cr");
                if raw_prefix && (at(i) == '"' || (at(i) == '#' && matches!(at(i + 1), '#' | '"'))) {
                    let start_line = line;
                    let (text, next) = raw_quoted(&s, i, &mut line);
                    out.push(Token { tok: Tok::Str(text), line: start_line });
                    i = next;
                } else if word == "r" && at(i) == '#' && is_ident_start(at(i + 1)) {
                    // A raw identifier, `r#type`.
                    let start = i + 1;
                    i = start;
                    while i < s.len() && is_ident_char(s[i]) {
                        i += 1;
                    }
                    out.push(Token { tok: Tok::Ident(s[start..i].iter().collect()), line });
                } else if matches!(word.as_str(), "b" | "c") && at(i) == '"' {
                    let start_line = line;
                    let (text, next) = quoted(&s, i + 1, &mut line);
                    out.push(Token { tok: Tok::Str(text), line: start_line });
                    i = next;
                } else if word == "b" && at(i) == '\'' {
                    i = char_or_lifetime(&s, i, &mut line);
                } else {
                    out.push(Token { tok: Tok::Ident(word), line });
                }
            }
            ':' if at(i + 1) == ':' => {
                out.push(Token { tok: Tok::PathSep, line });
                i += 2;
            }
            c => {
                out.push(Token { tok: Tok::Punct(c), line });
                i += 1;
            }
        }
    }
    out
}

/// A `"`-quoted literal's text from just after its opening quote; returns it and the index
/// after the closing quote.
fn quoted(s: &[char], mut i: usize, line: &mut usize) -> (String, usize) {
    let mut text = String::new();
    while i < s.len() {
        match s[i] {
            '"' => return (text, i + 1),
            '\\' => {
                if let Some(&e) = s.get(i + 1) {
                    *line += usize::from(e == '\n');
                    text.push(e);
                }
                i += 2;
            }
            c => {
                *line += usize::from(c == '\n');
                text.push(c);
                i += 1;
            }
        }
    }
    (text, i)
}

/// A raw string from its `#`s (or quote) just after the `r`; returns its text and the index
/// after it.
fn raw_quoted(s: &[char], mut i: usize, line: &mut usize) -> (String, usize) {
    let mut hashes = 0;
    while s.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    i += 1; // the opening quote
    let start = i;
    while i < s.len() {
        if s[i] == '"' && (1..=hashes).all(|k| s.get(i + k) == Some(&'#')) {
            return (s[start..i].iter().collect(), i + 1 + hashes);
        }
        *line += usize::from(s[i] == '\n');
        i += 1;
    }
    (s[start..].iter().collect(), i)
}

/// Skips a character literal (`'a'`, `'\n'`, `'\u{1F600}'`) or a lifetime/label (`'a`)
/// starting at the quote at `i`; returns the index after it.
fn char_or_lifetime(s: &[char], i: usize, line: &mut usize) -> usize {
    let at = |k: usize| s.get(k).copied().unwrap_or('\0');
    if at(i + 1) == '\\' {
        let mut k = i + 3;
        while k < s.len() && s[k] != '\'' && s[k] != '\n' {
            k += 1;
        }
        return (k + 1).min(s.len());
    }
    if at(i + 2) == '\'' {
        *line += usize::from(at(i + 1) == '\n');
        return i + 3;
    }
    let mut k = i + 1;
    while k < s.len() && is_ident_char(s[k]) {
        k += 1;
    }
    k.max(i + 1)
}

// ---------------------------------------------------------------------------------------------
// The module tree, its `use` bindings and the paths written in it.

#[derive(Debug)]
struct Module {
    parent: Option<usize>,
    file: usize,
    children: BTreeMap<String, usize>,
    /// Names a `use` brought in, and the path each stands for.
    bindings: BTreeMap<String, Vec<String>>,
    /// The paths of glob imports (`use x::*`).
    globs: Vec<Vec<String>>,
}

#[derive(Debug)]
struct FileInfo {
    /// Relative to `src/`, with `/`.
    rel: String,
    /// The module path of the file's own module (empty for the crate root).
    path: Vec<String>,
}

#[derive(Debug)]
struct Mention {
    module: usize,
    segs: Vec<String>,
    line: usize,
}

#[derive(Debug)]
struct Site {
    line: usize,
    path: String,
}

/// A path's first segment for paths into another crate (`::std::...`): never resolved.
const EXTERN: &str = "::";

/// How deep following bindings and globs may go (a guard against `use` loops).
const MAX_DEPTH: usize = 24;

#[derive(Debug, Default)]
struct Tree {
    modules: Vec<Module>,
    files: Vec<FileInfo>,
    mentions: Vec<Mention>,
    missing: Vec<String>,
    /// Lookups left for the path being resolved (a guard against glob loops that fan out).
    budget: std::cell::Cell<usize>,
}

/// Lookups one path may take.
const BUDGET: usize = 10_000;

enum Found {
    Module(usize),
    /// A `use` binding of module `ctx` standing for `path`.
    Binding {
        ctx: usize,
        path: Vec<String>,
    },
}

/// What a `use` tree brings in: a path, and the name it binds (`None` for `as _`) or a glob.
#[derive(Debug, PartialEq)]
struct UseLeaf {
    segs: Vec<String>,
    binding: Option<String>,
    glob: bool,
}

impl Tree {
    fn load(top: &Path, read: &dyn Fn(&Path) -> Option<String>) -> Tree {
        let mut tree = Tree::default();
        let Some(text) = read(top) else {
            tree.missing.push(format!("cannot read {}", top.display()));
            return tree;
        };
        tree.files.push(FileInfo { rel: slashed(top), path: Vec::new() });
        tree.modules.push(Module {
            parent: None,
            file: 0,
            children: BTreeMap::new(),
            bindings: BTreeMap::new(),
            globs: Vec::new(),
        });
        let dir = top.parent().unwrap_or(Path::new("")).to_path_buf();
        let mut queue = VecDeque::from([(text, 0usize, dir.clone(), dir)]);
        while let Some((text, module, file_dir, children_dir)) = queue.pop_front() {
            tree.parse_file(&text, module, &file_dir, &children_dir, read, &mut queue);
        }
        tree
    }

    fn new_module(&mut self, parent: usize, name: &str, file: usize) -> usize {
        let id = self.modules.len();
        self.modules.push(Module {
            parent: Some(parent),
            file,
            children: BTreeMap::new(),
            bindings: BTreeMap::new(),
            globs: Vec::new(),
        });
        self.modules[parent].children.insert(name.to_string(), id);
        id
    }

    fn module_path(&self, mut m: usize) -> Vec<String> {
        let mut names = Vec::new();
        while let Some(p) = self.modules[m].parent {
            if let Some((name, _)) = self.modules[p].children.iter().find(|(_, &c)| c == m) {
                names.push(name.clone());
            }
            m = p;
        }
        names.reverse();
        names
    }

    /// Walks one file's tokens: module declarations, `use` trees and paths in code.
    fn parse_file(
        &mut self,
        text: &str,
        file_module: usize,
        file_dir: &Path,
        children_dir: &Path,
        read: &dyn Fn(&Path) -> Option<String>,
        queue: &mut VecDeque<(String, usize, PathBuf, PathBuf)>,
    ) {
        let toks = tokenize(text);
        let ident = |k: usize| match toks.get(k).map(|t| &t.tok) {
            Some(Tok::Ident(s)) => Some(s.as_str()),
            _ => None,
        };
        let is = |k: usize, want: &Tok| toks.get(k).map(|t| &t.tok) == Some(want);
        // (module, brace depth inside it, folder of its `mod x;` files)
        let mut stack = vec![(file_module, 0usize, children_dir.to_path_buf())];
        let (mut depth, mut i, mut path_attr) = (0usize, 0usize, None::<String>);
        while i < toks.len() {
            let (module, _, dir) = stack.last().cloned().unwrap_or((file_module, 0, children_dir.to_path_buf()));
            let after_sep = i > 0 && is(i - 1, &Tok::PathSep);
            match &toks[i].tok {
                Tok::Punct('{') => {
                    depth += 1;
                    i += 1;
                }
                Tok::Punct('}') => {
                    if stack.len() > 1 && stack.last().is_some_and(|f| f.1 == depth) {
                        stack.pop();
                    }
                    depth = depth.saturating_sub(1);
                    path_attr = None;
                    i += 1;
                }
                Tok::Punct(';') => {
                    path_attr = None;
                    i += 1;
                }
                Tok::Punct('#') => {
                    // `#[path = "file.rs"]`
                    if is(i + 1, &Tok::Punct('[')) && ident(i + 2) == Some("path") && is(i + 3, &Tok::Punct('=')) {
                        if let Some(Tok::Str(p)) = toks.get(i + 4).map(|t| &t.tok) {
                            path_attr = Some(p.clone());
                        }
                    }
                    i += 1;
                }
                Tok::Ident(w) if w == "mod" && !after_sep && ident(i + 1).is_some() => {
                    let name = ident(i + 1).unwrap_or_default().to_string();
                    if is(i + 2, &Tok::Punct(';')) {
                        let inline = stack.len() > 1;
                        let base = if inline { dir.clone() } else { file_dir.to_path_buf() };
                        self.declare_file_module(module, &name, path_attr.take(), &base, &dir, read, queue);
                        i += 3;
                    } else if is(i + 2, &Tok::Punct('{')) {
                        let file = self.modules[module].file;
                        let id = self.new_module(module, &name, file);
                        depth += 1;
                        stack.push((id, depth, dir.join(&name)));
                        path_attr = None;
                        i += 3;
                    } else {
                        i += 1;
                    }
                }
                Tok::Ident(w) if w == "use" && !after_sep => {
                    let line = toks[i].line;
                    let mut leaves = Vec::new();
                    let mut j = parse_use_tree(&toks, i + 1, Vec::new(), &mut leaves, 0);
                    while j < toks.len() && !is(j, &Tok::Punct(';')) {
                        j += 1;
                    }
                    for leaf in leaves {
                        if leaf.glob {
                            self.modules[module].globs.push(leaf.segs.clone());
                        } else if let Some(name) = leaf.binding {
                            self.modules[module].bindings.insert(name, leaf.segs.clone());
                        }
                        self.mentions.push(Mention { module, segs: leaf.segs, line });
                    }
                    i = j + 1;
                }
                Tok::Ident(first) if !after_sep && is(i + 1, &Tok::PathSep) => {
                    let line = toks[i].line;
                    let mut segs = vec![first.clone()];
                    let mut j = i + 1;
                    while is(j, &Tok::PathSep) {
                        match ident(j + 1) {
                            Some(s) => segs.push(s.to_string()),
                            None => break,
                        }
                        j += 2;
                    }
                    self.mentions.push(Mention { module, segs, line });
                    i = j;
                }
                Tok::PathSep if !after_sep && i > 0 && !matches!(toks[i - 1].tok, Tok::Ident(_)) => {
                    // `::std::...`: another crate's path; skip it whole.
                    let mut j = i;
                    while is(j, &Tok::PathSep) && ident(j + 1).is_some() {
                        j += 2;
                    }
                    i = j.max(i + 1);
                }
                _ => i += 1,
            }
        }
    }

    /// `mod name;` in `parent`: finds its file, adds it to the tree and queues it.
    #[allow(clippy::too_many_arguments)]
    fn declare_file_module(
        &mut self,
        parent: usize,
        name: &str,
        path_attr: Option<String>,
        attr_base: &Path,
        dir: &Path,
        read: &dyn Fn(&Path) -> Option<String>,
        queue: &mut VecDeque<(String, usize, PathBuf, PathBuf)>,
    ) {
        let candidates: Vec<(PathBuf, PathBuf)> = match path_attr {
            // A `#[path]` file's own `mod x;` files sit beside it, as `mod.rs` files do.
            Some(p) => {
                let file = normalise(&attr_base.join(p));
                let children = file.parent().unwrap_or(Path::new("")).to_path_buf();
                vec![(file, children)]
            }
            None => {
                vec![(dir.join(format!("{name}.rs")), dir.join(name)), (dir.join(name).join("mod.rs"), dir.join(name))]
            }
        };
        for (file, children_dir) in candidates {
            if let Some(text) = read(&file) {
                if self.files.iter().any(|f| f.rel == slashed(&file)) {
                    return; // the same file declared twice (e.g. under two `cfg`s)
                }
                let file_id = self.files.len();
                let module = self.new_module(parent, name, file_id);
                let path = self.module_path(module);
                self.files.push(FileInfo { rel: slashed(&file), path });
                let file_dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
                queue.push_back((text, module, file_dir, children_dir));
                return;
            }
        }
        let parent_path = self.module_path(parent).join("::");
        self.missing.push(format!("module `{name}` declared in `crate::{parent_path}` has no file"));
    }

    /// A name as seen from inside module `m`: a child module, a `use` binding, or a name
    /// one of its glob imports brings in.
    fn lookup(&self, m: usize, name: &str, depth: usize) -> Option<Found> {
        if depth > MAX_DEPTH || self.budget.get() == 0 {
            return None;
        }
        self.budget.set(self.budget.get() - 1);
        let module = &self.modules[m];
        if let Some(&c) = module.children.get(name) {
            return Some(Found::Module(c));
        }
        if let Some(path) = module.bindings.get(name) {
            return Some(Found::Binding { ctx: m, path: path.clone() });
        }
        for glob in &module.globs {
            // A glob of another crate's module (`use std::io::*`) cannot bring in one of ours.
            let first = glob.first().map(String::as_str).unwrap_or(EXTERN);
            let ours = matches!(first, "crate" | "self" | "super")
                || module.children.contains_key(first)
                || module.bindings.contains_key(first);
            if !ours {
                continue;
            }
            if let Some((target, true)) = self.resolve(m, glob, depth + 1) {
                if target != m {
                    if let Some(found) = self.lookup(target, name, depth + 1) {
                        return Some(found);
                    }
                }
            }
        }
        None
    }

    /// The module a path written in module `ctx` leads to, and whether the path names that
    /// module itself (rather than an item in it). `None` for paths into other crates.
    fn resolve(&self, ctx: usize, segs: &[String], depth: usize) -> Option<(usize, bool)> {
        if depth > MAX_DEPTH {
            return None;
        }
        let (first, rest) = segs.split_first()?;
        let mut cur = match first.as_str() {
            "crate" => 0,
            "self" => ctx,
            "super" => self.modules[ctx].parent?,
            EXTERN => return None,
            name => match self.lookup(ctx, name, depth + 1)? {
                Found::Module(m) => m,
                Found::Binding { ctx: at, path } => match self.resolve(at, &path, depth + 1)? {
                    (m, true) => m,
                    item => return Some(item),
                },
            },
        };
        let mut rest = rest;
        while rest.first().is_some_and(|s| s == "super") {
            cur = self.modules[cur].parent?;
            rest = &rest[1..];
        }
        for (k, seg) in rest.iter().enumerate() {
            match self.lookup(cur, seg, depth + 1) {
                Some(Found::Module(m)) => cur = m,
                Some(Found::Binding { ctx: at, path }) => match self.resolve(at, &path, depth + 1) {
                    Some((m, true)) => cur = m,
                    Some(item) => return Some(item),
                    // An item re-exported from another crate: it lives there, not here.
                    None => return if k == 0 && rest.len() == 1 { None } else { Some((cur, false)) },
                },
                None => return Some((cur, false)),
            }
        }
        Some((cur, true))
    }

    /// The file graph: for each pair of files (user, used) outside each other's subtree, the
    /// first place the user names the used file.
    fn edges(&self) -> BTreeMap<(usize, usize), Site> {
        let mut edges = BTreeMap::new();
        for mention in &self.mentions {
            self.budget.set(BUDGET);
            let Some((target, _)) = self.resolve(mention.module, &mention.segs, 0) else { continue };
            let from = self.modules[mention.module].file;
            let to = self.modules[target].file;
            if from == to || self.same_subtree(from, to) {
                continue;
            }
            let site = Site { line: mention.line, path: mention.segs.join("::") };
            edges
                .entry((from, to))
                .and_modify(|s: &mut Site| {
                    if site.line < s.line {
                        *s = Site { line: site.line, path: site.path.clone() };
                    }
                })
                .or_insert(site);
        }
        edges
    }

    /// Whether one file's module is inside the other's (a parent and its submodules).
    fn same_subtree(&self, a: usize, b: usize) -> bool {
        let (pa, pb) = (&self.files[a].path, &self.files[b].path);
        pa.starts_with(pb) || pb.starts_with(pa)
    }
}

/// Parses one `use` tree from `toks[j]` under `prefix`, pushing its leaves; returns the index
/// after it.
fn parse_use_tree(toks: &[Token], mut j: usize, prefix: Vec<String>, out: &mut Vec<UseLeaf>, depth: usize) -> usize {
    let tok = |k: usize| toks.get(k).map(|t| &t.tok);
    let mut segs = prefix;
    if depth > MAX_DEPTH {
        return j;
    }
    if tok(j) == Some(&Tok::PathSep) {
        if segs.is_empty() {
            segs.push(EXTERN.to_string());
        }
        j += 1;
    }
    loop {
        match tok(j) {
            Some(Tok::Ident(s)) => {
                segs.push(s.clone());
                j += 1;
                match tok(j) {
                    Some(Tok::PathSep) => j += 1,
                    Some(Tok::Ident(w)) if w == "as" => {
                        let binding = match tok(j + 1) {
                            Some(Tok::Ident(b)) if b != "_" => Some(b.clone()),
                            _ => None,
                        };
                        if segs.last().is_some_and(|s| s == "self") {
                            segs.pop();
                        }
                        out.push(UseLeaf { segs, binding, glob: false });
                        return j + 2;
                    }
                    _ => {
                        if segs.last().is_some_and(|s| s == "self") && segs.len() > 1 {
                            segs.pop();
                        }
                        let binding = segs.last().cloned();
                        out.push(UseLeaf { segs, binding, glob: false });
                        return j;
                    }
                }
            }
            Some(Tok::Punct('*')) => {
                out.push(UseLeaf { segs, binding: None, glob: true });
                return j + 1;
            }
            Some(Tok::Punct('{')) => {
                j += 1;
                loop {
                    match tok(j) {
                        Some(Tok::Punct('}')) => return j + 1,
                        Some(Tok::Punct(',')) => j += 1,
                        None => return j,
                        _ => {
                            let next = parse_use_tree(toks, j, segs.clone(), out, depth + 1);
                            if next == j {
                                return j; // not a use tree; give up on this one
                            }
                            j = next;
                        }
                    }
                }
            }
            _ => return j,
        }
    }
}

fn slashed(p: &Path) -> String {
    p.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect::<Vec<_>>().join("/")
}

/// Folds `..` and `.` out of a relative path.
fn normalise(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                // Past the start, `..` stays (a `#[path]` to another crate's file).
                let at_start = matches!(out.components().next_back(), None | Some(std::path::Component::ParentDir));
                if at_start {
                    out.push("..");
                } else {
                    out.pop();
                }
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Graph: strongly connected components (Tarjan) and one cycle through a component.

fn strongly_connected(adjacency: &[Vec<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        adjacency: &'a [Vec<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in s.adjacency[v].iter() {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let n = adjacency.len();
    let mut s = State {
        adjacency,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

/// A shortest cycle through the component's first file, as the list of its files with the
/// first one again at the end.
fn one_cycle(adjacency: &[Vec<usize>], members: &BTreeSet<usize>) -> Vec<usize> {
    let Some(&start) = members.iter().next() else { return Vec::new() };
    let mut came_from: BTreeMap<usize, usize> = BTreeMap::new();
    let mut queue = VecDeque::from([start]);
    while let Some(v) = queue.pop_front() {
        for &w in &adjacency[v] {
            if !members.contains(&w) {
                continue;
            }
            if w == start {
                let mut path = vec![v];
                let mut at = v;
                while at != start {
                    match came_from.get(&at) {
                        Some(&p) => at = p,
                        None => break,
                    }
                    path.push(at);
                }
                path.reverse();
                path.push(start);
                return path;
            }
            if w != start && !came_from.contains_key(&w) {
                came_from.insert(w, v);
                queue.push_back(w);
            }
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(files: &[(&str, &str)]) -> Report {
        let map: BTreeMap<PathBuf, String> = files.iter().map(|(p, t)| (PathBuf::from(p), t.to_string())).collect();
        analyse(Path::new("lib.rs"), &|p: &Path| map.get(p).cloned())
    }

    #[test]
    fn finds_a_circle_and_one_cycle_through_it() {
        let r = report(&[
            ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;"),
            ("a.rs", "use crate::b::B;\npub struct A;"),
            ("b.rs", "pub struct B;\nfn f() { crate::c::g(); }"),
            ("c.rs", "// use crate::d::D; (a comment)\npub fn g() { let _ = super::a::A; }"),
            ("d.rs", "use crate::a::A;"),
        ]);
        assert_eq!(r.circles.len(), 1, "{}", r.render("x"));
        assert_eq!(r.circles[0].files, ["a.rs", "b.rs", "c.rs"]);
        let steps: Vec<(&str, usize, &str)> =
            r.circles[0].cycle.iter().map(|s| (s.file.as_str(), s.line, s.next.as_str())).collect();
        assert_eq!(steps, [("a.rs", 1, "b.rs"), ("b.rs", 2, "c.rs"), ("c.rs", 2, "a.rs")]);
        assert!(r.render("x").contains("x/src/a.rs:1 uses b.rs (crate::b::B)"), "{}", r.render("x"));
    }

    #[test]
    fn a_layered_tree_has_none() {
        let r = report(&[
            ("lib.rs", "pub mod top;\npub mod low;\npub use top::Top;"),
            ("top.rs", "use crate::low::{self, Low};\npub struct Top(Low);\nfn f() { low::g() }"),
            ("low.rs", "pub struct Low;\npub fn g() { let _ = \"crate::top::Top\"; let _ = r#\"super::top\"#; }"),
        ]);
        assert!(r.circles.is_empty(), "{}", r.render("x"));
        assert_eq!(r.files, 3);
        assert_eq!(r.imports.len(), 1);
    }

    #[test]
    fn parent_and_child_are_the_tree_not_an_import() {
        let r = report(&[
            ("lib.rs", "mod session;\nuse session::Session;"),
            ("session.rs", "mod plan;\npub struct Session;\nfn f() { plan::make(); }"),
            ("session/plan.rs", "use super::Session;\nuse crate::session::Session as S;\npub fn make() {}"),
        ]);
        assert!(r.circles.is_empty(), "{}", r.render("x"));
        assert_eq!(r.imports.len(), 0);
    }

    #[test]
    fn follows_re_exports_to_the_defining_file() {
        // `crate::Profile` is defined in config/profile.rs, re-exported twice; `pool.rs` using
        // it through the root closes a circle with config/profile.rs, not with lib.rs.
        let r = report(&[
            ("lib.rs", "pub mod config;\nmod pool;\npub use config::*;"),
            ("config/mod.rs", "mod profile;\npub use profile::Profile;"),
            ("config/profile.rs", "pub struct Profile(crate::pool::Pool);"),
            ("pool.rs", "pub struct Pool;\nimpl Pool { fn p(_: &crate::Profile) {} }"),
        ]);
        assert_eq!(r.circles.len(), 1, "{}", r.render("x"));
        assert_eq!(r.circles[0].files, ["config/profile.rs", "pool.rs"]);
    }

    #[test]
    fn inline_modules_and_globs_count_as_their_file() {
        let r = report(&[
            ("lib.rs", "mod a;\nmod b;"),
            ("a.rs", "pub struct A;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    fn t() { crate::b::B; }\n}"),
            ("b.rs", "pub mod inner { pub use crate::a::A; }\npub struct B;"),
        ]);
        assert_eq!(r.circles.len(), 1, "{}", r.render("x"));
        assert_eq!(r.circles[0].files, ["a.rs", "b.rs"]);
        assert_eq!(r.circles[0].cycle[0].line, 5);
    }

    #[test]
    fn paths_into_other_crates_and_unknown_names_are_not_imports() {
        let r = report(&[
            ("lib.rs", "mod a;\nmod b;"),
            ("a.rs", "use std::sync::Arc;\nuse ::b::X;\nfn f() { tokio::spawn(b_thing::x()); let _ = 'a'; }"),
            ("b.rs", "use crate::a as _;\nfn g<'a>(x: &'a str) -> char { '\\'' }"),
        ]);
        assert!(r.circles.is_empty(), "{}", r.render("x"));
        assert_eq!(r.imports.len(), 1); // b -> a
    }

    #[test]
    fn mod_rs_folders_and_path_attributes() {
        let r = report(&[
            ("lib.rs", "mod net;\n#[path = \"extra/helpers.rs\"]\nmod helpers;"),
            ("net/mod.rs", "mod io;\npub use io::Io;"),
            ("net/io.rs", "pub struct Io;\nfn f() { crate::helpers::h() }"),
            ("extra/helpers.rs", "pub fn h() { let _ = crate::net::Io; }"),
        ]);
        assert_eq!(r.files, 4, "{r:?}");
        assert!(r.missing.is_empty(), "{:?}", r.missing);
        assert_eq!(r.circles.len(), 1, "{}", r.render("x"));
        assert_eq!(r.circles[0].files, ["extra/helpers.rs", "net/io.rs"]);
        assert_eq!(normalise(Path::new("a/../../../x/./y.rs")), Path::new("../../x/y.rs"));
    }

    #[test]
    fn a_missing_module_file_is_reported_not_fatal() {
        let r = report(&[("lib.rs", "mod gone;\nmod here;"), ("here.rs", "")]);
        assert_eq!(r.files, 2);
        assert_eq!(r.missing.len(), 1, "{:?}", r.missing);
    }

    #[test]
    fn use_trees_parse_into_leaves() {
        let toks = tokenize("crate::a::{self, b::C as D, e::*, f::{g, _h as _}};");
        let mut leaves = Vec::new();
        parse_use_tree(&toks, 0, Vec::new(), &mut leaves, 0);
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            leaves,
            [
                UseLeaf { segs: s(&["crate", "a"]), binding: Some("a".into()), glob: false },
                UseLeaf { segs: s(&["crate", "a", "b", "C"]), binding: Some("D".into()), glob: false },
                UseLeaf { segs: s(&["crate", "a", "e"]), binding: None, glob: true },
                UseLeaf { segs: s(&["crate", "a", "f", "g"]), binding: Some("g".into()), glob: false },
                UseLeaf { segs: s(&["crate", "a", "f", "_h"]), binding: None, glob: false },
            ]
        );
    }

    #[test]
    fn bad_input_does_not_hang_or_panic() {
        for text in ["use crate::{a::{", "mod", "mod x {", "'", "r#\"", "/* /* */", "use ;;", "\"\\", "b'", "$"] {
            let r = report(&[("lib.rs", text)]);
            assert!(r.circles.is_empty());
        }
    }

    #[test]
    fn the_workspace_driver_reads() {
        // The real driver: every declared module is found.
        let r = check(&workspace_root(), "driver").expect("driver/src/lib.rs");
        assert!(r.missing.is_empty(), "{:?}", r.missing);
        assert!(r.files > 30, "{r:?}");
    }
}
