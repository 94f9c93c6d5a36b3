//! Config bodies as Java properties text: GET_BROKER_CONFIG's answer (`MixAll.properties2String`
//! on the broker, `MixAll.string2Properties`, that is `java.util.Properties.load`, on the client).
//!
//! The writer emits one `key=value` line per entry, unescaped, as `properties2String` does (config
//! keys and values never hold a line break). The reader follows `Properties.load` for what such
//! text can contain: comment lines (`#`, `!`), blank lines, `=` or `:` or white space between key
//! and value, backslash escapes (`\t`, `\n`, `\r`, `\f`, `\uXXXX`, any other character as itself)
//! and a trailing backslash continuing a line. It never fails: a malformed escape is kept literally.

use std::collections::BTreeMap;

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

/// `Properties.load` of `text`; a later duplicate key replaces an earlier one, as in Java.
pub fn decode(text: &str) -> BTreeMap<String, String> {
    let mut entries = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(first) = lines.next() {
        let mut logical = first.trim_start().to_owned();
        if logical.is_empty() || logical.starts_with('#') || logical.starts_with('!') {
            continue;
        }
        // An odd number of trailing backslashes continues the line on the next one.
        while ends_with_continuation(&logical) {
            logical.pop();
            match lines.next() {
                Some(next) => logical.push_str(next.trim_start()),
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
                let mut rest = line[i..].trim_start_matches([' ', '\t', '\x0c']);
                if !matches!(c, '=' | ':') {
                    rest = rest.strip_prefix(['=', ':']).unwrap_or(rest);
                } else {
                    rest = &rest[1..];
                }
                return (key, rest.trim_start_matches([' ', '\t', '\x0c']));
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
            Some('u') => {
                let hex: String = chars.clone().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().filter(|_| hex.len() == 4).and_then(char::from_u32) {
                    Some(decoded) => {
                        out.push(decoded);
                        chars.nth(3);
                    }
                    None => out.push_str("\\u"),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
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
        assert_eq!(decode("k=v\nk=w")["k"], "w");
        assert_eq!(decode("k=end\\\\")["k"], "end\\", "an even run of backslashes is no continuation");
    }
}
