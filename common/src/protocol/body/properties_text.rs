//! Config bodies as Java properties text: GET_BROKER_CONFIG's answer and UPDATE_BROKER_CONFIG's
//! request (`MixAll.properties2String` on the writing side, `MixAll.string2Properties`, that is
//! `java.util.Properties.load`, on the reading side).
//!
//! The writer emits one `key=value` line per entry, unescaped, as `properties2String` does (config
//! keys and values never hold a line break). The reader follows `Properties.load` for what such
//! text can contain: comment lines (`#`, `!`), blank lines, `=` or `:` or white space between key
//! and value, backslash escapes (`\t`, `\n`, `\r`, `\f`, `\uXXXX` with surrogate pairs combined,
//! any other character as itself), a trailing backslash continuing a line, and lines ending at
//! CR, LF or CRLF. Only space, tab and form feed are blanks. It never fails: a malformed escape is
//! kept literally.

use std::collections::BTreeMap;
use std::path::Path;

/// Whether a config file is TOML (named `*.toml`, any case) rather than Java properties text, as
/// RocketMQ's `broker.conf` and `namesrv.properties` are.
pub fn is_toml_file(path: &Path) -> bool {
    path.extension().is_some_and(|e| e.eq_ignore_ascii_case("toml"))
}

/// `MixAll.properties2String`: `key=value\n` for every entry, in key order.
pub fn encode(entries: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(entries.iter().map(|(k, v)| k.len() + v.len() + 2).sum());
    for (key, value) in entries {
        out.push_str(key);
        out.push('=');
        out.push_str(value);
        out.push('\n');
    }
    out
}

/// White space as `Properties.load` knows it (not Unicode's wider set).
const BLANKS: [char; 3] = [' ', '\t', '\x0c'];

/// `Properties.load` of `text`; a later duplicate key replaces an earlier one, as in Java.
pub fn decode(text: &str) -> BTreeMap<String, String> {
    let mut entries = BTreeMap::new();
    // Java ends a line at `\n`, `\r` or `\r\n`.
    let mut lines = text.split('\n').flat_map(|l| l.strip_suffix('\r').unwrap_or(l).split('\r'));
    while let Some(first) = lines.next() {
        let mut logical = first.trim_start_matches(BLANKS).to_owned();
        if logical.is_empty() || logical.starts_with('#') || logical.starts_with('!') {
            continue;
        }
        // An odd number of trailing backslashes continues the line on the next one.
        while ends_with_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some(next) => logical.push_str(next.trim_start_matches(BLANKS)),
                None => break,
            }
        }
        let (key, value) = split_key_value(&logical);
        entries.insert(unescape(key), unescape(value));
    }
    entries
}

fn ends_with_continuation(line: &str) -> bool {
    line.bytes().rev().take_while(|b| *b == b'\\').count() % 2 == 1
}

/// The key ends at the first unescaped `=`, `:` or white space; the separator and the white space
/// around it are not part of either side.
fn split_key_value(line: &str) -> (&str, &str) {
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' | ' ' | '\t' | '\x0c' => {
                let key = &line[..i];
                let mut rest = line[i..].trim_start_matches(BLANKS);
                if !matches!(c, '=' | ':') {
                    rest = rest.strip_prefix(['=', ':']).unwrap_or(rest);
                } else {
                    rest = &rest[1..];
                }
                return (key, rest.trim_start_matches(BLANKS));
            }
            _ => {}
        }
    }
    (line, "")
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\x0c'),
            Some('u') => match hex4(chars.as_str()) {
                Some(unit) => {
                    chars.nth(3);
                    // A high surrogate followed by `\u` and a low one is one character.
                    let low =
                        chars.as_str().strip_prefix("\\u").and_then(hex4).filter(|l| (0xDC00..0xE000).contains(l));
                    let decoded = match low {
                        Some(low) if (0xD800..0xDC00).contains(&unit) => {
                            chars.nth(5);
                            char::from_u32(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))
                        }
                        _ => char::from_u32(unit),
                    };
                    out.push(decoded.unwrap_or(char::REPLACEMENT_CHARACTER));
                }
                None => out.push_str("\\u"),
            },
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// Four ASCII hex digits at the start of `s`, as a UTF-16 unit.
fn hex4(s: &str) -> Option<u32> {
    let digits = s.get(..4).filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))?;
    u32::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn written_text_reads_back_and_looks_like_javas() {
        let entries = map(&[
            ("brokerName", "broker-a"),
            ("listenPort", "10911"),
            ("namesrvAddr", "10.0.0.1:9876;10.0.0.2:9876"),
            ("raftPeers", r#"[{"id":1,"raftAddr":"127.0.0.1:20911"}]"#),
            ("emptyValue", ""),
        ]);
        let text = encode(&entries);
        assert!(text.starts_with("brokerName=broker-a\nemptyValue=\nlistenPort=10911\n"), "{text}");
        assert_eq!(decode(&text), entries);
    }

    #[test]
    fn java_properties_syntax_is_read_as_java_reads_it() {
        let text = "# comment\n! also a comment\n\n  a = 1\nb:2\nc 3\nd\\=e=4\nf=x\\\n    y\ng=\\u0041\\t\\z\nh\n";
        let got = decode(text);
        let want = map(&[("a", "1"), ("b", "2"), ("c", "3"), ("d=e", "4"), ("f", "xy"), ("g", "A\tz"), ("h", "")]);
        assert_eq!(got, want);
        assert_eq!(decode("k=\\u00zz")["k"], "\\u00zz", "a malformed escape stays as written");
        assert_eq!(decode("k=\\u+041")["k"], "\\u+041", "four hex digits, no sign");
        assert_eq!(decode("k=\\uD83D\\uDE00!")["k"], "\u{1F600}!", "a surrogate pair is one character");
        assert_eq!(decode("k=\\uD83Dx")["k"], "\u{FFFD}x", "a lone surrogate");
        assert_eq!(decode("a=1\rb=2\r\nc=3")["b"], "2", "lines end at CR, LF or CRLF");
        assert_eq!(
            decode("\u{a0}k=v").keys().next().map(String::as_str),
            Some("\u{a0}k"),
            "only Java's blanks are trimmed"
        );
        assert_eq!(decode("k=v\nk=w")["k"], "w");
        assert_eq!(decode("k=end\\\\")["k"], "end\\", "an even run of backslashes is no continuation");
    }
}
