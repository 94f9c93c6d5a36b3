//! fastjson's non-standard map keys, in both directions.
//!
//! fastjson (RocketMQ's JSON library) writes a `Map` whose keys are not strings with the keys
//! unquoted: integer keys as bare numbers (`{0:"127.0.0.1:10911"}`) and bean keys as whole objects, e.g.
//! `ConsumeStats.offsetTable`, a `HashMap<MessageQueue, OffsetWrapper>`:
//!
//! ```text
//! {"consumeTps":0.0,"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"brokerOffset":9,...}}}
//! ```
//!
//! Neither is JSON, so serde_json cannot read them. Decoding: [`normalize`] rewrites every object key
//! that is not a string into a string holding the key's JSON text (`"0"`,
//! `"{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"t\"}"`); integer keys then parse with serde_json's
//! usual integer-key support and object keys with [`object_keys`]. Encoding: bodies whose Java readers
//! expect object keys are written in fastjson's own form with [`write_object_keyed_map`], because only
//! that form is certain to parse in every fastjson version a 4.x client may carry. Integer keys are
//! written quoted (fastjson reads `"0"` for an `Integer` key).
//!
//! Invariants: [`normalize`] is a single pass with an explicit stack bounded by
//! [`JSON_BODY_NESTING_MAX_LEVELS`], so no input can overflow the call stack; it never panics; standard
//! JSON passes through unchanged except for insignificant whitespace.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::Deserializer;
use serde::Serialize;
use serde::Serializer;
use serde::de::DeserializeOwned;
use serde::de::MapAccess;
use serde::de::Visitor;
use serde::ser::SerializeMap;
use thiserror::Error;

use crate::limits::JSON_BODY_NESTING_MAX_LEVELS;

/// Why [`normalize`] refused its input.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FastjsonError {
    /// Brackets do not match, a string is unterminated, or the input ends inside a container.
    #[error("malformed JSON at byte {at}")]
    Malformed {
        /// Byte offset of the problem.
        at: usize,
    },
    /// Containers nest deeper than [`JSON_BODY_NESTING_MAX_LEVELS`].
    #[error("JSON nests deeper than {JSON_BODY_NESTING_MAX_LEVELS} levels at byte {at}")]
    TooDeep {
        /// Byte offset of the container that went too deep.
        at: usize,
    },
}

/// One open container.
struct Frame {
    is_object: bool,
    /// Inside an object: the next token is a key.
    expect_key: bool,
    /// This container is itself a key: where its normalized text starts in the output.
    key_start: Option<usize>,
}

/// Rewrites fastjson's non-string object keys into JSON strings (see the module docs).
pub fn normalize(input: &[u8]) -> Result<Vec<u8>, FastjsonError> {
    let mut out = Vec::with_capacity(input.len() + 16);
    let mut stack: Vec<Frame> = Vec::new();
    let mut i = 0;
    while i < input.len() {
        let b = input[i];
        let at_key = stack.last().is_some_and(|f| f.is_object && f.expect_key);
        match b {
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            b'{' | b'[' => {
                if stack.len() >= JSON_BODY_NESTING_MAX_LEVELS {
                    return Err(FastjsonError::TooDeep { at: i });
                }
                if let Some(parent) = stack.last_mut() {
                    parent.expect_key = false;
                }
                let key_start = at_key.then_some(out.len());
                stack.push(Frame { is_object: b == b'{', expect_key: b == b'{', key_start });
                out.push(b);
                i += 1;
            }
            b'}' | b']' => {
                let frame = stack.pop().ok_or(FastjsonError::Malformed { at: i })?;
                if frame.is_object != (b == b'}') {
                    return Err(FastjsonError::Malformed { at: i });
                }
                out.push(b);
                if let Some(start) = frame.key_start {
                    let key = out.split_off(start);
                    let key = String::from_utf8(key).map_err(|_| FastjsonError::Malformed { at: i })?;
                    push_json_string(&mut out, &key);
                }
                i += 1;
            }
            b',' => {
                if let Some(frame) = stack.last_mut() {
                    frame.expect_key = frame.is_object;
                }
                out.push(b);
                i += 1;
            }
            b':' => {
                out.push(b);
                i += 1;
            }
            b'"' => {
                let end = string_end(input, i)?;
                if let Some(frame) = stack.last_mut() {
                    frame.expect_key = false;
                }
                out.extend_from_slice(&input[i..end]);
                i = end;
            }
            _ => {
                // A bare token: number, literal, or an unquoted identifier key.
                let end = input[i..]
                    .iter()
                    .position(|c| {
                        matches!(c, b' ' | b'\t' | b'\r' | b'\n' | b'{' | b'}' | b'[' | b']' | b',' | b':' | b'"')
                    })
                    .map_or(input.len(), |n| i + n);
                let token = &input[i..end];
                if at_key {
                    let token = std::str::from_utf8(token).map_err(|_| FastjsonError::Malformed { at: i })?;
                    push_json_string(&mut out, token);
                    if let Some(frame) = stack.last_mut() {
                        frame.expect_key = false;
                    }
                } else {
                    out.extend_from_slice(token);
                }
                i = end;
            }
        }
    }
    if stack.is_empty() { Ok(out) } else { Err(FastjsonError::Malformed { at: input.len() }) }
}

/// The index just past the string starting at `start` (which holds `"`).
fn string_end(input: &[u8], start: usize) -> Result<usize, FastjsonError> {
    let mut escaped = false;
    for (n, &c) in input.iter().enumerate().skip(start + 1) {
        if escaped {
            escaped = false;
        } else if c == b'\\' {
            escaped = true;
        } else if c == b'"' {
            return Ok(n + 1);
        }
    }
    Err(FastjsonError::Malformed { at: start })
}

fn push_json_string(out: &mut Vec<u8>, s: &str) {
    // Serializing a str cannot fail; the fallback keeps this total without a panic path.
    match serde_json::to_vec(s) {
        Ok(quoted) => out.extend_from_slice(&quoted),
        Err(_) => out.extend_from_slice(b"\"\""),
    }
}

/// Writes `map` as fastjson does for bean keys: `{<key JSON>:<value JSON>,...}`.
pub fn write_object_keyed_map<K: Serialize, V: Serialize>(
    out: &mut Vec<u8>,
    map: &BTreeMap<K, V>,
) -> Result<(), serde_json::Error> {
    out.push(b'{');
    for (n, (key, value)) in map.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut *out, key)?;
        out.push(b':');
        serde_json::to_writer(&mut *out, value)?;
    }
    out.push(b'}');
    Ok(())
}

/// serde `with` module for a `BTreeMap<K, V>` whose keys are JSON objects: reads string keys holding
/// the key's JSON text (what [`normalize`] produces, and what some non-Java clients send); writes
/// the same string form, the only one serde_json can emit. Bodies that must reach Java readers
/// override `encode` with [`write_object_keyed_map`].
pub mod object_keys {
    use super::*;

    /// Writes each key as a string holding its JSON text.
    pub fn serialize<S, K, V>(map: &BTreeMap<K, V>, serializer: S) -> Result<S::Ok, S::Error>
    where
        S: Serializer,
        K: Serialize,
        V: Serialize,
    {
        let mut out = serializer.serialize_map(Some(map.len()))?;
        for (key, value) in map {
            let key = serde_json::to_string(key).map_err(serde::ser::Error::custom)?;
            out.serialize_entry(&key, value)?;
        }
        out.end()
    }

    /// Reads string keys holding JSON objects; `null` is an empty map, as fastjson reads it.
    pub fn deserialize<'de, D, K, V>(deserializer: D) -> Result<BTreeMap<K, V>, D::Error>
    where
        D: Deserializer<'de>,
        K: DeserializeOwned + Ord,
        V: Deserialize<'de>,
    {
        deserializer.deserialize_option(OptionalMap(PhantomData))
    }

    struct OptionalMap<K, V>(PhantomData<(K, V)>);

    impl<'de, K: DeserializeOwned + Ord, V: Deserialize<'de>> Visitor<'de> for OptionalMap<K, V> {
        type Value = BTreeMap<K, V>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a map keyed by JSON objects")
        }

        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }

        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(BTreeMap::new())
        }

        fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
            deserializer.deserialize_map(self)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Self::Value, A::Error> {
            let mut map = BTreeMap::new();
            while let Some(key) = access.next_key::<String>()? {
                let key: serde_json::Value = serde_json::from_str(&key).map_err(serde::de::Error::custom)?;
                let key: K = crate::protocol::body::lenient::from_value(key).map_err(serde::de::Error::custom)?;
                let value = access.next_value::<V>()?;
                map.insert(key, value);
            }
            Ok(map)
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn norm(s: &str) -> String {
        String::from_utf8(normalize(s.as_bytes()).expect("normalizes")).expect("utf-8")
    }

    #[test]
    fn quotes_integer_and_identifier_keys() {
        assert_eq!(norm(r#"{0:"a", -1 : "b"}"#), r#"{"0":"a","-1":"b"}"#);
        assert_eq!(norm(r#"{"x":{7:1}}"#), r#"{"x":{"7":1}}"#);
        assert_eq!(norm(r#"{abc:[1,2,{3:true}]}"#), r#"{"abc":[1,2,{"3":true}]}"#);
    }

    #[test]
    fn stringifies_object_keys() {
        let s = norm(r#"{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"t"}:{"brokerOffset":9}}}"#);
        assert_eq!(s, r#"{"offsetTable":{"{\"brokerName\":\"b\",\"queueId\":0,\"topic\":\"t\"}":{"brokerOffset":9}}}"#);
        // A key object with its own non-standard key, and an array key.
        assert_eq!(norm(r#"{{1:"x"}:1,[2]:2}"#), r#"{"{\"1\":\"x\"}":1,"[2]":2}"#);
    }

    #[test]
    fn leaves_strings_alone() {
        assert_eq!(norm(r#"{"k":"{0:\"x\"}, [1]"}"#), r#"{"k":"{0:\"x\"}, [1]"}"#);
        assert_eq!(norm(r#"["a\\",0]"#), r#"["a\\",0]"#);
    }

    #[test]
    fn rejects_malformed_and_deep_input() {
        assert!(normalize(b"{").is_err());
        assert!(normalize(b"{]").is_err());
        assert!(normalize(b"}").is_err());
        assert!(normalize(br#"{"a"#).is_err());
        let deep = "[".repeat(JSON_BODY_NESTING_MAX_LEVELS + 1);
        assert!(matches!(normalize(deep.as_bytes()), Err(FastjsonError::TooDeep { .. })));
        // Deep but within the limit is fine for the scanner; serde_json has its own limit.
        let ok = format!("{}{}", "[".repeat(100), "]".repeat(100));
        assert_eq!(norm(&ok), ok);
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 2_000,
            failure_persistence: None,
            rng_seed: proptest::test_runner::RngSeed::Fixed(0x0046_4153_544a_534f),
            ..ProptestConfig::default()
        })]

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            // Ok or Err are both fine; the property is the absence of a panic.
            let _ = normalize(&bytes);
        }

        #[test]
        fn never_panics_on_json_like_text(s in r#"[{}\[\]:,"\\ 0-9a-z-]{0,64}"#) {
            // As above.
            let _ = normalize(s.as_bytes());
        }
    }
}
