//! CQL transcripts in ScyllaDB's `test/cql` format: a `.cql` script is run
//! through the front statement by statement and its output compared with a
//! checked-in `.result` file.
//!
//! ScyllaDB keeps its CDC behaviour in such transcripts, so writing ours the
//! same way lets a reader put the two side by side: the expected output of
//! a transcript is what Scylla prints, derived from Scylla's documentation
//! and tests, and the front must reproduce it.
//!
//! The format, as ScyllaDB's runner writes it:
//!
//! - every input line is echoed with `> ` in front; blank lines and comment
//!   lines (`--`, `//`) are only echoed;
//! - a statement is the group of lines up to one that ends with `;` (a
//!   comment line never ends one), sent as one QUERY at consistency ONE;
//! - a result without columns prints `OK`; rows print as a `psql`-style
//!   table (Python's `tabulate`): columns whose values are all integers are
//!   right-aligned, the others left-aligned, each column at least two wider
//!   than its header, `null` for nulls, booleans as `True`/`False`,
//!   collections, tuples and UDT values as Python lists (a map shows its
//!   keys only, as Scylla's runner turns every iterable into a list), blobs
//!   as lists of byte values;
//! - an error prints as the Python driver words it:
//!   `Error from server: code=2200 [Invalid query] message="..."` (angle
//!   brackets around the kinds the driver does not turn into exceptions).
//!
//! Our runner differs in two documented ways, to keep the output stable:
//! every script runs in a fresh keyspace (created, `USE`d without echo, and
//! dropped), whose name is printed as `ks`; and IPv4 addresses are printed
//! as `127.0.0.1`, as ScyllaDB's runner does. Values that change from run
//! to run (`cdc$time`, `cdc$stream_id`, write times) must not be selected:
//! transcripts select the deterministic columns (operation, batch sequence
//! number, TTL, values), as ScyllaDB's own CDC transcripts do. A text
//! cell holding several lines (a DESCRIBE statement) prints on one line
//! with its whitespace collapsed, the form ScyllaDB's test_describe.py
//! compares statements in (the exact layout is checked by the Rust tests).

use std::net::SocketAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use shardwise_protocol::consistency::Consistency;
use shardwise_protocol::request::{Query, QueryParameters};
use shardwise_protocol::response::{ResponseMessage, ResultMessage};
use shardwise_protocol::types::de::Row;
use shardwise_protocol::types::CqlValue;

use crate::admin::Conn;
use crate::EmuError;

/// One piece of a script: an echoed line, or a statement (its lines).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// A blank or comment line, echoed as is.
    Comment(String),
    /// A statement: its lines, each with its line break.
    Statement(Vec<String>),
}

fn is_comment(line: &str) -> bool {
    let t = line.trim();
    t.is_empty() || t.starts_with("--") || t.starts_with("//")
}

/// Splits a script into echoed lines and statements.
pub fn split(script: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut lines = script.split_inclusive('\n');
    while let Some(line) = lines.next() {
        if is_comment(line) {
            out.push(Piece::Comment(line.to_string()));
            continue;
        }
        let mut group = vec![line.to_string()];
        let mut last = line;
        while is_comment(last) || !last.trim_end().ends_with(';') {
            match lines.next() {
                Some(l) => {
                    group.push(l.to_string());
                    last = l;
                }
                None => break,
            }
        }
        out.push(Piece::Statement(group));
    }
    out
}

/// Runs `script` through the front at `front` in a fresh keyspace and
/// returns the transcript.
pub async fn run(front: SocketAddr, script: &str) -> Result<String, EmuError> {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let keyspace = format!("transcript_{}_{nanos}", std::process::id());
    let mut conn = Conn::connect(front, None).await?;
    let create =
        format!("CREATE KEYSPACE {keyspace} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 1}}");
    for setup in [create, format!("USE {keyspace}")] {
        if let ResponseMessage::Error(e) = execute(&mut conn, &setup).await?.message {
            return Err(EmuError::Server { code: e.code, message: e.message });
        }
    }
    let mut out = String::new();
    for piece in split(script) {
        out.push_str("> ");
        match piece {
            Piece::Comment(line) => out.push_str(&line),
            Piece::Statement(lines) => {
                out.push_str(&lines.join("> "));
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                let answer = execute(&mut conn, &lines.concat()).await?;
                out.push_str(&render_answer(answer.message, &keyspace));
                out.push('\n');
            }
        }
    }
    let _ = execute(&mut conn, &format!("DROP KEYSPACE IF EXISTS {keyspace}")).await;
    Ok(normalize(&out, &keyspace))
}

async fn execute(conn: &mut Conn, cql: &str) -> Result<shardwise_protocol::response::Response, EmuError> {
    conn.roundtrip(&Query { query: cql, params: QueryParameters::new(Consistency::One, ()) }).await
}

/// The keyspace's name as `ks`, IPv4 addresses as `127.0.0.1`.
fn normalize(text: &str, keyspace: &str) -> String {
    let text = text.replace(keyspace, "ks");
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_alphanumeric() && b[i - 1] != b'.') {
            let mut j = i;
            let mut dots = 0;
            let mut digits = true;
            while j < b.len() && (b[j].is_ascii_digit() || b[j] == b'.') {
                if b[j] == b'.' {
                    dots += 1;
                    digits = j + 1 < b.len() && b[j + 1].is_ascii_digit();
                }
                j += 1;
            }
            if dots == 3 && digits && !text[i..j].contains("..") {
                out.push_str("127.0.0.1");
                i = j;
                continue;
            }
            out.push_str(&text[i..j]);
            i = j;
            continue;
        }
        let c = text[i..].chars().next().unwrap_or(' ');
        out.push(c);
        i += c.len_utf8();
    }
    out
}

/// The driver's wording of an error.
pub fn render_error(code: i32, message: &str) -> String {
    let (kind, bracketed) = match code {
        0x0000 => ("Server error", true),
        0x000A => ("Protocol error", true),
        0x1000 => ("Unavailable exception", false),
        0x1001 => ("Coordinator node overloaded", true),
        0x1100 => ("Operation timed out", false),
        0x1200 => ("Operation timed out", false),
        0x2000 => ("Syntax error in CQL query", true),
        0x2100 => ("Unauthorized", false),
        0x2200 => ("Invalid query", false),
        0x2300 => ("Query invalid because of configuration issue", true),
        _ => ("Error", true),
    };
    let summary = format!("Error from server: code={code:04x} [{kind}] message=\"{message}\"");
    if bracketed {
        format!("<{summary}>")
    } else {
        summary
    }
}

fn render_answer(message: ResponseMessage, keyspace: &str) -> String {
    match message {
        ResponseMessage::Error(e) => match e.code {
            // The driver's AlreadyExists wording.
            0x2400 => already_exists(&e.message),
            code => render_error(code, &e.message),
        },
        ResponseMessage::Result(ResultMessage::Rows(rows)) => {
            let Some(specs) = rows.metadata.specs.clone().filter(|s| !s.is_empty()) else {
                return "OK".into();
            };
            let headers: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
            let mut cells: Vec<Vec<Cell>> = Vec::new();
            match rows.rows::<Row>() {
                Ok(typed) => {
                    for row in typed {
                        match row {
                            Ok(r) => {
                                cells.push(r.into_columns().iter().map(|v| Cell::of(v.as_ref(), keyspace)).collect())
                            }
                            Err(e) => return format!("<cannot decode a row: {e}>"),
                        }
                    }
                }
                Err(e) => return format!("<cannot decode the rows: {e}>"),
            }
            table(&headers, &cells)
        }
        ResponseMessage::Result(_) => "OK".into(),
        other => format!("<unexpected answer {other:?}>"),
    }
}

/// Cassandra's already-exists messages, in the driver's words.
fn already_exists(message: &str) -> String {
    // "Cannot add already existing table \"t\" to keyspace \"ks\"" /
    // "Cannot add existing keyspace \"ks\"".
    let quoted: Vec<&str> = message.split('"').skip(1).step_by(2).collect();
    match quoted.as_slice() {
        [table, keyspace] => format!("Table '{keyspace}.{table}' already exists"),
        [keyspace] => format!("Keyspace '{keyspace}' already exists"),
        _ => render_error(0x2400, message),
    }
}

/// One table cell: its text and whether it reads as an integer.
#[derive(Debug, Clone)]
struct Cell {
    text: String,
    int: bool,
    /// An empty string (tabulate ignores it when typing a column).
    empty: bool,
}

impl Cell {
    /// The cell of `v`, the script's keyspace named `ks` before the
    /// column widths are taken.
    fn of(v: Option<&CqlValue>, keyspace: &str) -> Cell {
        let text = match v {
            None => "null".to_string(),
            Some(v) => python_str(v),
        };
        // A multi-line text (a DESCRIBE statement) on one line, whitespace
        // collapsed, as test_describe.py compares statements.
        let text = if text.contains('\n') { text.split_whitespace().collect::<Vec<_>>().join(" ") } else { text };
        let text = if keyspace.is_empty() { text } else { text.replace(keyspace, "ks") };
        let int = v.is_some() && looks_int(&text);
        Cell { empty: text.is_empty(), text, int }
    }
}

fn looks_int(s: &str) -> bool {
    let t = s.trim();
    let t = t.strip_prefix(['-', '+']).unwrap_or(t);
    !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())
}

/// `str()` of the value the Python driver returns, after the runner's
/// `prettify` (iterables become lists, nulls inside them `'null'`).
fn python_str(v: &CqlValue) -> String {
    match v {
        CqlValue::Ascii(s) | CqlValue::Text(s) => s.clone(),
        other => python_repr(other),
    }
}

fn python_repr(v: &CqlValue) -> String {
    let list = |items: Vec<String>| format!("[{}]", items.join(", "));
    let opt = |v: &Option<CqlValue>| v.as_ref().map_or_else(|| "'null'".to_string(), python_repr);
    match v {
        CqlValue::Ascii(s) | CqlValue::Text(s) => py_quote(s),
        CqlValue::BigInt(x) | CqlValue::Counter(x) => x.to_string(),
        CqlValue::Int(x) => x.to_string(),
        CqlValue::SmallInt(x) => x.to_string(),
        CqlValue::TinyInt(x) => x.to_string(),
        CqlValue::Boolean(b) => if *b { "True" } else { "False" }.into(),
        CqlValue::Blob(b) | CqlValue::Custom(b) => list(b.iter().map(|x| x.to_string()).collect()),
        CqlValue::Double(x) => py_float(*x),
        CqlValue::Float(x) => py_float(f64::from(*x)),
        CqlValue::Uuid(u) | CqlValue::Timeuuid(u) => u.hyphenated().to_string(),
        CqlValue::List(items) | CqlValue::Set(items) | CqlValue::Vector(items) => {
            list(items.iter().map(python_repr).collect())
        }
        CqlValue::Map(entries) => list(entries.iter().map(|(k, _)| python_repr(k)).collect()),
        CqlValue::Tuple(items) => list(items.iter().map(opt).collect()),
        CqlValue::Udt { fields, .. } => list(fields.iter().map(|(_, v)| opt(v)).collect()),
        CqlValue::Empty => String::new(),
        CqlValue::Inet(ip) => ip.to_string(),
        other => other.to_string(),
    }
}

fn py_quote(s: &str) -> String {
    if s.contains('\'') && !s.contains('"') {
        format!("\"{s}\"")
    } else {
        format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
    }
}

fn py_float(x: f64) -> String {
    let s = x.to_string();
    if x.is_finite() && !s.contains(['.', 'e', 'E']) {
        format!("{s}.0")
    } else {
        s
    }
}

/// `tabulate(rows, headers, tablefmt="psql")`.
fn table(headers: &[String], rows: &[Vec<Cell>]) -> String {
    let n = headers.len();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count() + 2).collect();
    let mut right = vec![false; n];
    for c in 0..n {
        let column: Vec<&Cell> = rows.iter().filter_map(|r| r.get(c)).filter(|x| !x.empty).collect();
        right[c] = !column.is_empty() && column.iter().all(|x| x.int);
        for x in rows.iter().filter_map(|r| r.get(c)) {
            widths[c] = widths[c].max(x.text.chars().count());
        }
    }
    let pad = |s: &str, c: usize| {
        let fill = " ".repeat(widths[c].saturating_sub(s.chars().count()));
        if right[c] {
            format!("{fill}{s}")
        } else {
            format!("{s}{fill}")
        }
    };
    let line = |l: char, m: char, r: char| {
        let parts: Vec<String> = widths.iter().map(|w| "-".repeat(w + 2)).collect();
        format!("{l}{}{r}", parts.join(&m.to_string()))
    };
    let row = |cells: Vec<String>| format!("| {} |", cells.join(" | "));
    let mut out = vec![line('+', '+', '+')];
    out.push(row(headers.iter().enumerate().map(|(c, h)| pad(h, c)).collect()));
    out.push(line('|', '+', '|'));
    for r in rows {
        out.push(row((0..n).map(|c| pad(r.get(c).map_or("", |x| x.text.as_str()), c)).collect()));
    }
    out.push(line('+', '+', '+'));
    out.join("\n")
}

/// Compares a transcript with the expected one: `Ok` when equal, else a
/// line diff (expected `-`, actual `+`, with line numbers).
pub fn compare(expected: &str, actual: &str) -> Result<(), String> {
    if expected == actual {
        return Ok(());
    }
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let mut diff = String::new();
    for i in 0..e.len().max(a.len()) {
        let (x, y) = (e.get(i), a.get(i));
        if x != y {
            if let Some(x) = x {
                diff.push_str(&format!("-{:4}: {x}\n", i + 1));
            }
            if let Some(y) = y {
                diff.push_str(&format!("+{:4}: {y}\n", i + 1));
            }
        }
    }
    if diff.is_empty() {
        diff.push_str("(the texts differ in line endings only)\n");
    }
    Err(diff)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn statements_end_at_a_semicolon_line() {
        let pieces = split("-- a\n\nCREATE TABLE t\n  (pk int PRIMARY KEY);\nSELECT * FROM t;\n");
        assert_eq!(
            pieces,
            vec![
                Piece::Comment("-- a\n".into()),
                Piece::Comment("\n".into()),
                Piece::Statement(vec!["CREATE TABLE t\n".into(), "  (pk int PRIMARY KEY);\n".into()]),
                Piece::Statement(vec!["SELECT * FROM t;\n".into()]),
            ]
        );
    }

    fn cell(s: &str) -> Cell {
        Cell { text: s.into(), int: looks_int(s), empty: s.is_empty() }
    }

    #[test]
    fn tables_look_like_tabulate_psql() {
        // The layout of ScyllaDB's cdc_compact_storage_test.result.
        let headers: Vec<String> = ["cdc$batch_seq_no", "cdc$ttl", "v"].iter().map(|s| s.to_string()).collect();
        let rows = vec![vec![cell("0"), cell("2222"), cell("111")], vec![cell("1"), cell("null"), cell("111")]];
        assert_eq!(
            table(&headers, &rows),
            "+--------------------+-----------+-----+\n\
             |   cdc$batch_seq_no | cdc$ttl   |   v |\n\
             |--------------------+-----------+-----|\n\
             |                  0 | 2222      | 111 |\n\
             |                  1 | null      | 111 |\n\
             +--------------------+-----------+-----+"
        );
        assert_eq!(table(&["pk".to_string()], &[]), "+------+\n| pk   |\n|------|\n+------+");
    }

    #[test]
    fn errors_read_like_the_python_driver() {
        assert_eq!(render_error(0x2200, "x"), "Error from server: code=2200 [Invalid query] message=\"x\"");
        assert_eq!(
            render_error(0x2300, "y"),
            "<Error from server: code=2300 [Query invalid because of configuration issue] message=\"y\">"
        );
        assert_eq!(normalize("at 10.0.0.7:9042 in ks_1", "ks_1"), "at 127.0.0.1:9042 in ks");
    }
}
