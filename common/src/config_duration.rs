//! Durations in config files: integer milliseconds, as RocketMQ's `*Mills` keys are, or strings with
//! a unit (`"500ms"`, `"30s"`, `"2m"`, `"1h"`). Use with `#[serde(with = "raftmq_common::config_duration")]`;
//! serialization writes `"30s"` when the value is whole seconds, else `"500ms"`.

use std::time::Duration;

use serde::Deserialize;
use serde::Deserializer;
use serde::Serializer;
use serde::de::Error;

/// Writes `"<n>s"` or `"<n>ms"`.
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        s.serialize_str(&format!("{}s", ms / 1000))
    } else {
        s.serialize_str(&format!("{ms}ms"))
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Raw {
    Millis(u64),
    Text(String),
}

/// Reads milliseconds or a string with a unit.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    match Raw::deserialize(d)? {
        Raw::Millis(ms) => Ok(Duration::from_millis(ms)),
        Raw::Text(text) => parse(&text).ok_or_else(|| {
            D::Error::custom(format!(
                "invalid duration {text:?}: expected e.g. 10000, \"500ms\", \"10s\", \"2m\", \"1h\""
            ))
        }),
    }
}

/// Parses `<n>[ms|s|m|h]`; `None` on anything else or on overflow.
pub fn parse(text: &str) -> Option<Duration> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().ok()?;
    let ms_per_unit: u64 = match unit.trim() {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return None,
    };
    n.checked_mul(ms_per_unit).map(Duration::from_millis)
}
