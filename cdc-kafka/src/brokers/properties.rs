//! The text of a Kafka properties file read as Kafka's tools read it
//! ([`parse_properties`]).
//!
//! A module of its own, on nothing but `std` and `thiserror`: the
//! `kafka_properties` fuzz target compiles this very file (the fuzz crate
//! cannot depend on the sink, whose librdkafka would build from its C
//! sources under the fuzzer's sanitizer), so what is fuzzed is what ships.

/// A line of a properties file that is not a setting, a comment or blank
/// (its text is not repeated: it may hold a password).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct BadLine {
    /// The line's number, from 1 (the first of a line continued with `\`).
    pub line: usize,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// The settings of a properties file's text, in order, as Kafka's tools
/// (Java's `Properties`) read them, except that a key and its value must
/// be separated by `=` or `:`:
///
/// * one `key=value` (or `key: value`) a line; whitespace around the key
///   and before the value is dropped;
/// * lines whose first character other than whitespace is `#` or `!` are
///   comments, and blank lines are skipped;
/// * a line that ends with an odd number of `\` goes on on the next one
///   (whose leading whitespace is dropped);
/// * `\t`, `\n`, `\r`, `\f` and `\uXXXX` are escapes, and `\` before any
///   other character stands for that character (`\=`, `\:`, `\#`, `\\`).
///
/// A line with no separator, an empty key or a malformed `\u` escape is
/// an error naming the line.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, BadLine> {
    let is_blank = |c: char| matches!(c, ' ' | '\t' | '\x0c');
    let mut settings = Vec::new();
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l.strip_suffix('\r').unwrap_or(l)));
    while let Some((number, first)) = lines.next() {
        let first = first.trim_start_matches(is_blank);
        if first.is_empty() || first.starts_with(['#', '!']) {
            continue;
        }
        let mut logical = String::from(first);
        while ends_continued(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start_matches(is_blank)),
                None => break,
            }
        }
        let bad = |reason| BadLine { line: number, reason };
        settings.push(parse_line(&logical).map_err(bad)?);
    }
    Ok(settings)
}

/// Whether `line` ends with an odd number of backslashes.
fn ends_continued(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

/// One logical line: the key (up to the first unescaped `=` or `:`, trimmed)
/// and the value (its leading whitespace dropped), escapes resolved.
fn parse_line(line: &str) -> Result<(String, String), &'static str> {
    let is_blank = |c: char| matches!(c, ' ' | '\t' | '\x0c');
    let mut chars = line.chars();
    let mut key = String::new();
    let mut separated = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => key.push(unescape(&mut chars)?),
            '=' | ':' => {
                separated = true;
                break;
            }
            c if is_blank(c) => {
                // Whitespace ends the key; `=` or `:` must come next.
                let rest = chars.as_str().trim_start_matches(is_blank);
                chars = rest.chars();
                match chars.next() {
                    Some('=' | ':') => separated = true,
                    _ => return Err("no `=` (or `:`) between a key and its value"),
                }
                break;
            }
            c => key.push(c),
        }
    }
    if !separated {
        return Err("no `=` (or `:`) between a key and its value");
    }
    if key.is_empty() {
        return Err("no key before the `=`");
    }
    let mut chars = chars.as_str().trim_start_matches(is_blank).chars();
    let mut value = String::new();
    while let Some(c) = chars.next() {
        value.push(if c == '\\' { unescape(&mut chars)? } else { c });
    }
    Ok((key, value))
}

/// The character an escape stands for, the backslash just read.
fn unescape(chars: &mut std::str::Chars<'_>) -> Result<char, &'static str> {
    Ok(match chars.next() {
        Some('t') => '\t',
        Some('n') => '\n',
        Some('r') => '\r',
        Some('f') => '\x0c',
        Some('u') => {
            let hex: String = chars.by_ref().take(4).collect();
            let code = (hex.len() == 4 && hex.chars().all(|c| c.is_ascii_hexdigit()))
                .then(|| u32::from_str_radix(&hex, 16).ok())
                .flatten()
                .and_then(char::from_u32);
            code.ok_or("a `\\u` escape that is not four hexadecimal digits of a character")?
        }
        Some(c) => c,
        None => return Err("a line that ends in a lone `\\`"),
    })
}

/// The `kafka_properties` fuzz target's harness: `data` (as UTF-8) read as
/// a properties file. A key is never empty, an error names a line of the
/// text, and the settings read, written back escaped one a line, read as
/// the same settings. Any panic is a bug.
#[cfg(any(test, fuzzing))]
pub fn fuzz_properties(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let lines = text.lines().count();
    let settings = match parse_properties(text) {
        Ok(settings) => settings,
        Err(e) => {
            assert!((1..=lines).contains(&e.line), "line {} of {lines}", e.line);
            return;
        }
    };
    assert!(settings.len() <= lines, "{} settings of {lines} lines", settings.len());
    assert!(settings.iter().all(|(k, _)| !k.is_empty()), "an empty key");
    let escape = |s: &str, key: bool| {
        let mut out = String::new();
        for c in s.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\x0c' => out.push_str("\\f"),
                ' ' | '=' | ':' | '#' | '!' if key => {
                    out.push('\\');
                    out.push(c);
                }
                ' ' => out.push_str("\\ "),
                c => out.push(c),
            }
        }
        out
    };
    let written: String = settings.iter().map(|(k, v)| format!("{}={}\n", escape(k, true), escape(v, false))).collect();
    assert_eq!(parse_properties(&written).as_ref(), Ok(&settings), "written back as {written:?}");
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(super) mod tests {
    use super::*;

    /// Owned settings of `settings` (also for the tests of `brokers`).
    pub(crate) fn pairs(settings: &[(&str, &str)]) -> Vec<(String, String)> {
        settings.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn a_properties_file_is_read_as_kafkas_tools_read_it() {
        let text = "# a secured cluster\n\
                    ! another comment\n\
                    \n\
                    \t  \n\
                    security.protocol=SASL_SSL\n\
                    \x20 sasl.mechanism = SCRAM-SHA-512\r\n\
                    sasl.username: alice\n\
                    sasl.password=p=a:ss word \n\
                    ssl.ca.location=/etc/kafka/ca.pem\n\
                    client.id=a\\\n\
                    \x20   b\n\
                    escaped\\=key=\\u0041\\t\\\\\\#\n\
                    empty.value=\n\
                    linger.ms=5\n\
                    linger.ms=20";
        assert_eq!(
            parse_properties(text).unwrap(),
            pairs(&[
                ("security.protocol", "SASL_SSL"),
                ("sasl.mechanism", "SCRAM-SHA-512"),
                ("sasl.username", "alice"),
                ("sasl.password", "p=a:ss word "),
                ("ssl.ca.location", "/etc/kafka/ca.pem"),
                ("client.id", "ab"),
                ("escaped=key", "A\t\\#"),
                ("empty.value", ""),
                ("linger.ms", "5"),
                ("linger.ms", "20"),
            ])
        );
        assert_eq!(parse_properties("").unwrap(), []);
        // An even number of backslashes ends the line; a last line may end continued.
        assert_eq!(parse_properties("a=x\\\\\nb=y\\").unwrap(), pairs(&[("a", "x\\"), ("b", "y")]));
    }

    #[test]
    fn a_bad_line_is_named_and_its_text_not_repeated() {
        for (text, line, reason) in [
            ("a=1\nsecurity.protocol SASL_SSL\n", 2, "no `=`"),
            ("# c\n\nsasl.password\n", 3, "no `=`"),
            ("a=1\n=secret\n", 2, "no key"),
            ("a=1\\\n  b\nc=\\u00g1\n", 3, "`\\u` escape"),
            ("x=\\u12", 1, "`\\u` escape"),
            ("x=\\uD800", 1, "`\\u` escape"),
        ] {
            let e = parse_properties(text).expect_err(text);
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.reason.contains(reason), "{text:?}: {e}");
            assert!(e.to_string().starts_with(&format!("line {line}: ")), "{e}");
        }
        assert!(!parse_properties("sasl.password\n").unwrap_err().to_string().contains("password"));
    }

    /// Every committed seed of the `kafka_properties` target.
    #[test]
    fn the_fuzz_harness_runs_on_every_seed_file() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds/kafka_properties");
        let mut seeds = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let data = std::fs::read(entry.unwrap().path()).unwrap();
            fuzz_properties(&data);
            seeds += 1;
        }
        assert!(seeds >= 24, "{seeds} seeds in {}", dir.display());
        for garbage in ["\\", "a\\\n\\", "=", "\\u", "k=\\uFFFF\r\n", "\u{85}k=v", "k\u{2028}=v"] {
            fuzz_properties(garbage.as_bytes());
        }
    }
}
