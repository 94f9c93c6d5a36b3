//! Config files as the broker and the NameServer read them: a file becomes one TOML table of typed
//! values, whatever its syntax, and `key=value` overrides are laid over it; each server then turns
//! the table into its own config struct (serde, `deny_unknown_fields`) and validates it.
//!
//! - A file named `*.toml` (any case) is TOML; any other is Java properties text
//!   (RocketMQ's `broker.conf`, `namesrv.properties`), read by [`properties_text::decode`].
//! - A properties value or an override is typed by its key: a text key takes the text as it is
//!   (`deleteWhen=04`); any other value is read as TOML when it parses, else as a string, so
//!   `9876`, `true`, `30s` and `[{id=0, ...}]` all work ([`value_of`], [`typed_value`]).
//! - Back to text (GET_*_CONFIG): [`property_text`] writes a value as Java's
//!   `properties2String` would, durations in milliseconds.
//!
//! - RocketMQ's dotted TLS keys (`tls.server.mode`) are flat keys of the table. A TOML file may
//!   write them as tables (`[tls.server]` with `mode = ...`, or `tls.server.mode = ...`, which TOML
//!   reads as nested tables): [`read_table`] flattens everything under `tls` back into dotted keys.
//!
//! Pure but for [`read_table`]'s one `std::fs::read_to_string`; no tokio. Errors carry the file's
//! `origin` (` in <path>`) so each server words them in its own error type.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::Path;
use std::path::PathBuf;

use crate::protocol::body::properties_text;

/// Why a config file could not become a table.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A `*.toml` file is not TOML.
    #[error("invalid TOML{origin}: {source}")]
    Toml {
        /// ` in <file>`.
        origin: String,
        /// What toml reported.
        #[source]
        source: toml::de::Error,
    },
    /// The caller's properties reader refused the file.
    #[error("{message}{origin}")]
    Properties {
        /// ` in <file>`.
        origin: String,
        /// The reader's reason.
        message: String,
    },
}

/// The table of the file at `path` (an empty table and origin when `None`) and its origin
/// (` in <path>`): TOML when named `*.toml`, else `properties(text)`.
pub fn read_table(
    path: Option<&Path>,
    properties: impl FnOnce(&str) -> Result<toml::Table, String>,
) -> Result<(toml::Table, String), FileError> {
    let Some(path) = path else { return Ok((toml::Table::new(), String::new())) };
    let text = std::fs::read_to_string(path).map_err(|source| FileError::Read { path: path.to_owned(), source })?;
    let origin = format!(" in {}", path.display());
    let table = if properties_text::is_toml_file(path) {
        let mut table =
            text.parse::<toml::Table>().map_err(|source| FileError::Toml { origin: origin.clone(), source })?;
        flatten_dotted(&mut table, "tls");
        table
    } else {
        properties(&text).map_err(|message| FileError::Properties { origin: origin.clone(), message })?
    };
    Ok((table, origin))
}

/// Replaces a table under `prefix` by its leaves as dotted keys (`tls = {server = {mode = "x"}}`
/// becomes `"tls.server.mode" = "x"`), so a TOML file can write RocketMQ's dotted keys as tables.
pub fn flatten_dotted(table: &mut toml::Table, prefix: &str) {
    fn leaves(prefix: String, value: toml::Value, out: &mut Vec<(String, toml::Value)>) {
        match value {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    leaves(format!("{prefix}.{k}"), v, out);
                }
            }
            leaf => out.push((prefix, leaf)),
        }
    }
    if let Some(nested @ toml::Value::Table(_)) = table.remove(prefix) {
        let mut out = Vec::new();
        leaves(prefix.to_owned(), nested, &mut out);
        table.extend(out);
    }
}

/// Java properties text as a table, each value typed by `value(key, raw)` (trailing blanks of a
/// value dropped, as a hand-written file often carries them).
pub fn properties_table(text: &str, value: impl Fn(&str, &str) -> toml::Value) -> toml::Table {
    properties_text::decode(text)
        .into_iter()
        .map(|(key, raw)| {
            let value = value(&key, raw.trim_end());
            (key, value)
        })
        .collect()
}

/// `raw` as TOML when `v = <raw>` parses (integers, booleans, arrays and inline tables keep their
/// type), else as a string.
pub fn value_of(raw: &str) -> toml::Value {
    match format!("v = {raw}").parse::<toml::Table>() {
        Ok(mut t) => t.remove("v").unwrap_or_else(|| toml::Value::String(raw.to_owned())),
        Err(_) => toml::Value::String(raw.to_owned()),
    }
}

/// `raw` for `key`: the text as it is for a key in `text_keys`, else [`value_of`].
pub fn typed_value(key: &str, raw: &str, text_keys: &BTreeSet<String>) -> toml::Value {
    if text_keys.contains(key) { toml::Value::String(raw.to_owned()) } else { value_of(raw) }
}

/// Lays `pairs` over `table`, each value typed by `value(key, raw)`; a later pair wins.
pub fn apply<'a>(
    table: &mut toml::Table,
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    value: impl Fn(&str, &str) -> toml::Value,
) {
    for (key, raw) in pairs {
        table.insert(key.to_owned(), value(key, raw));
    }
}

/// Splits `key=value` flag arguments into trimmed pairs; `Err` names the first argument that is
/// not `key=value` with a non-blank key.
pub fn split_overrides<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<Vec<(String, String)>, String> {
    args.into_iter()
        .map(|arg| match arg.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
            _ => Err(arg.to_owned()),
        })
        .collect()
}

/// A value as `properties2String` shows it: text as it is (a duration string, `duration`, in
/// milliseconds, as RocketMQ's interval keys are), scalars as TOML writes them, anything nested as
/// JSON.
pub fn property_text(value: toml::Value, duration: bool) -> String {
    match value {
        toml::Value::String(s) if duration => {
            crate::config_duration::parse(&s).map_or(s, |d| d.as_millis().to_string())
        }
        toml::Value::String(s) => s,
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(d) => d.to_string(),
        nested => serde_json::to_string(&nested).unwrap_or_else(|_| nested.to_string()),
    }
}

/// A config struct as a table of its keys (serde names), `None` when it is not a table.
pub fn table_of<T: serde::Serialize>(config: &T) -> Result<Option<toml::Table>, toml::ser::Error> {
    Ok(match toml::Value::try_from(config)? {
        toml::Value::Table(t) => Some(t),
        _ => None,
    })
}

/// Every key with its [`property_text`], durations named by `duration_keys`.
pub fn properties_of(table: toml::Table, duration_keys: &[&str]) -> BTreeMap<String, String> {
    table
        .into_iter()
        .map(|(key, value)| {
            let text = property_text(value, duration_keys.contains(&key.as_str()));
            (key, text)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotted_tls_tables_become_rocketmqs_flat_keys() {
        let mut t: toml::Table =
            "listenPort = 1\n[tls.server]\nmode = \"enforcing\"\n[tls]\nenable = true\n".parse().expect("toml");
        flatten_dotted(&mut t, "tls");
        assert_eq!(t.get("tls.server.mode").and_then(|v| v.as_str()), Some("enforcing"));
        assert_eq!(t.get("tls.enable").and_then(toml::Value::as_bool), Some(true));
        assert!(!t.contains_key("tls") && t.contains_key("listenPort"));
    }

    #[test]
    fn values_are_typed_by_key_then_by_toml() {
        assert_eq!(value_of("9876"), toml::Value::Integer(9876));
        assert_eq!(value_of("true"), toml::Value::Boolean(true));
        assert_eq!(value_of("30s"), toml::Value::String("30s".into()));
        assert!(value_of("[{id=0, a=\"x\"}]").is_array());
        let text_keys: BTreeSet<String> = ["deleteWhen".to_owned()].into();
        assert_eq!(typed_value("deleteWhen", "04", &text_keys), toml::Value::String("04".into()));
        assert_eq!(typed_value("other", "04", &text_keys), value_of("04"));
    }

    #[test]
    fn a_properties_file_and_a_toml_file_read_to_the_same_table() {
        let dir = std::env::temp_dir().join(format!("raftmq-config-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let props = dir.join("namesrv.properties");
        std::fs::write(&props, "# comment\nlistenPort=9000\nscan : 5000 \nexpired 30s\n").unwrap();
        let toml_path = dir.join("namesrv.TOML");
        std::fs::write(&toml_path, "listenPort = 9000\nscan = 5000\nexpired = \"30s\"\n").unwrap();
        let (from_props, origin) =
            read_table(Some(&props), |t| Ok(properties_table(t, |_, raw| value_of(raw)))).unwrap();
        assert_eq!(origin, format!(" in {}", props.display()));
        let (from_toml, _) = read_table(Some(&toml_path), |_| Err("not called".into())).unwrap();
        assert_eq!(from_props, from_toml);
        let refused = read_table(Some(&props), |_| Err("no".into())).unwrap_err();
        assert_eq!(refused.to_string(), format!("no in {}", props.display()));
        assert!(matches!(read_table(Some(&dir.join("missing.toml")), |_| unreachable!()), Err(FileError::Read { .. })));
        std::fs::write(&toml_path, "listenPort = [").unwrap();
        assert!(matches!(read_table(Some(&toml_path), |_| unreachable!()), Err(FileError::Toml { .. })));
        assert_eq!(read_table(None, |_| unreachable!()).unwrap(), (toml::Table::new(), String::new()));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn overrides_split_and_apply() {
        let pairs = split_overrides([" listenPort = 9001", "a=b=c"]).unwrap();
        assert_eq!(pairs, [("listenPort".to_owned(), "9001".to_owned()), ("a".to_owned(), "b=c".to_owned())]);
        assert_eq!(split_overrides(["novalue"]), Err("novalue".to_owned()));
        assert_eq!(split_overrides([" =1"]), Err(" =1".to_owned()));
        let mut table = toml::Table::new();
        apply(&mut table, pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())), |_, raw| value_of(raw));
        assert_eq!(table["listenPort"], toml::Value::Integer(9001));
    }

    #[test]
    fn properties_show_durations_in_ms_and_nested_values_as_json() {
        let mut table = toml::Table::new();
        table.insert("interval".into(), toml::Value::String("10s".into()));
        table.insert("name".into(), toml::Value::String("10s".into()));
        table.insert("on".into(), toml::Value::Boolean(true));
        table.insert("peers".into(), value_of("[{id=0}]"));
        let props = properties_of(table, &["interval"]);
        assert_eq!(props["interval"], "10000");
        assert_eq!(props["name"], "10s");
        assert_eq!(props["on"], "true");
        assert_eq!(props["peers"], r#"[{"id":0}]"#);
    }
}
