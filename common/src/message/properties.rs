//! Message properties: the `key U+0001 value U+0002 ...` string of a record and of SEND headers.
//!
//! Wire form (`MessageDecoder.messageProperties2String` / `string2messageProperties`, 4.9.8): UTF-8,
//! every pair written as `key U+0001 value U+0002` — Java appends the U+0002 after each pair, the
//! last included, and so do we, so PROPLEN and the stored bytes match a Java producer's and broker's.
//! The parser accepts the string with or without the trailing separator.
//!
//! Invariants and decisions:
//! - [`Properties`] keeps **insertion order** (a `Vec` of pairs), so encoding is deterministic and a
//!   parsed string re-encodes to the same bytes when it held no malformed or duplicate pairs. Java uses
//!   a `HashMap`, whose order nobody can rely on, so any order is compatible; insertion order is the one
//!   that keeps a client's string intact through the broker.
//! - `insert` replaces a present key in place (Java `Map.put`); a parse that meets a key twice keeps
//!   the position of the first and the value of the last, as Java's parser would.
//! - The parser follows Java exactly: a pair needs a non-empty key and a non-empty value; the key ends
//!   at the first U+0001, so a value may contain U+0001 but never U+0002; malformed pairs are skipped.
//!   Pairs that would not survive that parser are reported by [`Properties::check_wire_safe`].

use std::collections::HashMap;
use std::fmt;

use compact_str::CompactString;
use thiserror::Error;

use crate::limits::PROPERTIES_SIZE_MAX_BYTES;

/// Separates a key from its value (`MessageDecoder.NAME_VALUE_SEPARATOR`).
pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
/// Separates pairs (`MessageDecoder.PROPERTY_SEPARATOR`).
pub const PROPERTY_SEPARATOR: char = '\u{2}';
/// Separators (about one per pair) below which [`Properties::from_wire_str`] finds duplicate keys
/// by a scan instead of a hash table (a record carries 3–10 pairs).
const PROPERTIES_LINEAR_PARSE_MAX_COUNT: usize = 16;

/// Separates business keys inside the `KEYS` value (`MessageConst.KEY_SEPARATOR`).
pub const KEY_SEPARATOR: char = ' ';

/// Business keys, space-separated; indexed as `topic#key`.
pub const KEYS: &str = "KEYS";
/// The tag; hashed into the ConsumeQueue unit.
pub const TAGS: &str = "TAGS";
/// The client message id (`MessageClientIDSetter`); indexed as `topic#uniq`.
pub const UNIQ_KEY: &str = "UNIQ_KEY";
/// waitStoreMsgOK: `"true"`/`"false"`; absent means true.
pub const WAIT: &str = "WAIT";
/// Delay level 1..=18 (`PROPERTY_DELAY_TIME_LEVEL`).
pub const DELAY: &str = "DELAY";
/// `"true"` on a transactional half message (`PROPERTY_TRANSACTION_PREPARED`).
pub const TRAN_MSG: &str = "TRAN_MSG";
/// Producer group of a transactional message.
pub const PGROUP: &str = "PGROUP";
/// Original topic of a delayed or half message.
pub const REAL_TOPIC: &str = "REAL_TOPIC";
/// Original queue id of a delayed or half message.
pub const REAL_QID: &str = "REAL_QID";
/// Original topic of a retry message.
pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
/// msgId of the message being retried.
pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
/// Retry bookkeeping (`PROPERTY_RECONSUME_TIME`).
pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
/// Per-message override of the group's retry limit.
pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
/// Set by the client on pulled messages (queue min offset); never stored.
pub const MIN_OFFSET: &str = "MIN_OFFSET";
/// Set by the client on pulled messages (queue max offset); never stored.
pub const MAX_OFFSET: &str = "MAX_OFFSET";
/// Broker cluster name, added by the broker to every stored message.
pub const CLUSTER: &str = "CLUSTER";
/// Queue offset of a half message, carried by its commit/rollback.
pub const TRAN_PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
/// How often the broker has checked a half message back with its producer.
pub const TRANSACTION_CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
/// Seconds before the first transaction check-back.
pub const CHECK_IMMUNITY_TIME_IN_SECONDS: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
/// Request/reply correlation id.
pub const CORRELATION_ID: &str = "CORRELATION_ID";
/// Request/reply: the client id a reply goes to (`PROPERTY_MESSAGE_REPLY_TO_CLIENT`).
pub const REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";
/// Request/reply time to live (`PROPERTY_MESSAGE_TTL`).
pub const TTL: &str = "TTL";
/// Request/reply: when the reply arrived (`PROPERTY_REPLY_MESSAGE_ARRIVE_TIME`).
pub const ARRIVE_TIME: &str = "ARRIVE_TIME";
/// Request/reply: when the broker pushed the reply.
pub const PUSH_REPLY_TIME: &str = "PUSH_REPLY_TIME";
/// Message type (`"reply"` for replies; `PROPERTY_MESSAGE_TYPE`).
pub const MSG_TYPE: &str = "MSG_TYPE";
/// Broker region, echoed in send responses.
pub const MSG_REGION: &str = "MSG_REGION";
/// Message trace switch (`PROPERTY_TRACE_SWITCH`).
pub const TRACE_ON: &str = "TRACE_ON";
/// Namespace instance id.
pub const INSTANCE_ID: &str = "INSTANCE_ID";
/// When a consumer started consuming the message (`PROPERTY_CONSUME_START_TIMESTAMP`).
pub const CONSUME_START_TIME: &str = "CONSUME_START_TIME";
/// Legacy business property.
pub const BUYER_ID: &str = "BUYER_ID";
/// Legacy MQ bridging flags.
pub const TRANSFER_FLAG: &str = "TRANSFER_FLAG";
/// Legacy MQ bridging flags.
pub const CORRECTION_FLAG: &str = "CORRECTION_FLAG";
/// Legacy MQ bridging flags.
pub const MQ2_FLAG: &str = "MQ2_FLAG";
/// Light message queue dispatch targets (4.9.3+).
pub const INNER_MULTI_DISPATCH: &str = "INNER_MULTI_DISPATCH";
/// Light message queue offsets (4.9.3+).
pub const INNER_MULTI_QUEUE_OFFSET: &str = "INNER_MULTI_QUEUE_OFFSET";
/// Ordering key of a FIFO message (5.x `PROPERTY_SHARDING_KEY`; not in 4.9.8).
pub const SHARDING_KEY: &str = "__SHARDINGKEY";

/// Timer message (5.x): deliver this many seconds after it is stored.
pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
/// Timer message (5.x): deliver this many milliseconds after it is stored.
pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
/// Timer message (5.x): deliver at this time, ms since the epoch.
pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
/// The delivery time the broker settled on for a timer message, ms since the epoch.
pub const TIMER_OUT_MS: &str = "TIMER_OUT_MS";
/// Timer message (5.x): cancel the timer message with this unique key (not supported here).
pub const TIMER_DEL_UNIQKEY: &str = "TIMER_DEL_UNIQKEY";

/// raftmq: on a message the POP revive re-put into a POP retry topic or a DLQ, the in-flight
/// message it replaces: `group topic queueId queueOffset epochMs` (space separated). Applying the
/// record removes exactly that delivery from the replicated POP table.
pub const POP_REVIVE_OF: &str = "__RAFTMQ_POP_REVIVE_OF";

/// One property of a record's raw (wire form) properties string, without parsing the rest.
pub fn property_of<'a>(raw: &'a str, key: &str) -> Option<&'a str> {
    raw.split(PROPERTY_SEPARATOR)
        .filter_map(|pair| pair.split_once(NAME_VALUE_SEPARATOR))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// Keys a user may not set through `putUserProperty` (`MessageConst.STRING_HASH_SET`, 4.9.8).
pub const RESERVED_KEYS: &[&str] = &[
    TRACE_ON,
    MSG_REGION,
    KEYS,
    TAGS,
    WAIT,
    DELAY,
    RETRY_TOPIC,
    REAL_TOPIC,
    REAL_QID,
    TRAN_MSG,
    PGROUP,
    MIN_OFFSET,
    MAX_OFFSET,
    BUYER_ID,
    ORIGIN_MESSAGE_ID,
    TRANSFER_FLAG,
    CORRECTION_FLAG,
    MQ2_FLAG,
    RECONSUME_TIME,
    UNIQ_KEY,
    MAX_RECONSUME_TIMES,
    CONSUME_START_TIME,
    INSTANCE_ID,
    CORRELATION_ID,
    REPLY_TO_CLIENT,
    TTL,
    ARRIVE_TIME,
    PUSH_REPLY_TIME,
    // 5.x reserves its timer keys too: they are set through their own setters.
    TIMER_DELAY_SEC,
    TIMER_DELAY_MS,
    TIMER_DELIVER_MS,
    TIMER_OUT_MS,
    TIMER_DEL_UNIQKEY,
    CLUSTER,
    MSG_TYPE,
    INNER_MULTI_QUEUE_OFFSET,
];

/// Whether `key` is reserved for the system (see [`RESERVED_KEYS`]).
pub fn is_reserved_key(key: &str) -> bool {
    RESERVED_KEYS.contains(&key)
}

/// A pair that Java's parser would drop or split differently, or a string too long for `PROPLEN`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PropertiesError {
    /// Empty keys are dropped by the parser.
    #[error("a message property has an empty name")]
    EmptyKey,
    /// Empty values are dropped by the parser.
    #[error("the message property {key:?} has an empty value")]
    EmptyValue {
        /// The key.
        key: String,
    },
    /// A key holding U+0001 or U+0002 would be split by the parser.
    #[error("the message property name {key:?} contains a U+0001/U+0002 separator")]
    SeparatorInKey {
        /// The key.
        key: String,
    },
    /// A value holding U+0002 would be split by the parser.
    #[error("the value of message property {key:?} contains the U+0002 separator")]
    SeparatorInValue {
        /// The key.
        key: String,
    },
    /// The encoded string does not fit the `i16` length of a record.
    #[error("message properties are {len} bytes, more than the maximum {max}")]
    TooLong {
        /// Encoded length in bytes.
        len: usize,
        /// [`PROPERTIES_SIZE_MAX_BYTES`].
        max: usize,
    },
}

/// Ordered message properties (see the module docs for the order and duplicate rules).
///
/// Keys and values are [`CompactString`]s: almost every system key and most values (tags, flags,
/// offsets, cluster names) fit in one inline (24 bytes), so parsing a record's properties, which a
/// consumer does for every message it receives, allocates for long ones only (a UNIQ_KEY is 32).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Properties {
    pairs: Vec<(CompactString, CompactString)>,
}

impl Properties {
    /// No properties.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of pairs.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether there are no pairs.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Whether `key` is present.
    pub fn contains_key(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` to `value`, replacing in place if present; returns the previous value.
    pub fn insert(&mut self, key: impl Into<CompactString>, value: impl Into<CompactString>) -> Option<CompactString> {
        let key = key.into();
        let value = value.into();
        match self.pairs.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => Some(std::mem::replace(v, value)),
            None => {
                self.pairs.push((key, value));
                None
            }
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: &str) -> Option<CompactString> {
        let i = self.pairs.iter().position(|(k, _)| k == key)?;
        Some(self.pairs.remove(i).1)
    }

    /// Pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Parses the wire string; malformed pairs are skipped, never an error.
    pub fn from_wire_str(s: &str) -> Self {
        if s.is_empty() {
            return Properties::new();
        }
        let pairs = s.split(PROPERTY_SEPARATOR).filter_map(|pair| {
            let (key, value) = pair.split_once(NAME_VALUE_SEPARATOR)?;
            (!key.is_empty() && !value.is_empty()).then_some((key, value))
        });
        // A record has a handful of pairs: a duplicate key is found by scanning those already
        // parsed, with no table to allocate and hash. A string with more pairs indexes its keys, so
        // a hostile one of ~8k pairs parses in expected O(n), not O(n²).
        let separators = s.bytes().filter(|&b| b == PROPERTY_SEPARATOR as u8).count();
        let mut index: Option<HashMap<&str, usize>> =
            (separators >= PROPERTIES_LINEAR_PARSE_MAX_COUNT).then(HashMap::new);
        // Room for the pairs, and for the two (MIN_OFFSET, MAX_OFFSET) a consumer adds to each message.
        let mut props =
            Properties { pairs: Vec::with_capacity((separators + 2).min(PROPERTIES_LINEAR_PARSE_MAX_COUNT)) };
        for (key, value) in pairs {
            let found = match &index {
                Some(index) => index.get(key).copied(),
                None => props.pairs.iter().position(|(k, _)| k == key),
            };
            match found {
                Some(i) => props.pairs[i].1 = CompactString::from(value),
                None => {
                    if let Some(index) = &mut index {
                        index.insert(key, props.pairs.len());
                    }
                    props.pairs.push((CompactString::from(key), CompactString::from(value)));
                }
            }
        }
        props
    }

    /// Parses wire bytes; invalid UTF-8 is an error (Java never writes it).
    pub fn from_wire_bytes(bytes: &[u8]) -> Result<Self, std::str::Utf8Error> {
        Ok(Self::from_wire_str(std::str::from_utf8(bytes)?))
    }

    /// The wire string: `k\u1v\u2k\u1v`, no trailing separator.
    pub fn to_wire_string(&self) -> String {
        let mut out = String::with_capacity(self.wire_len());
        for (k, v) in &self.pairs {
            out.push_str(k);
            out.push(NAME_VALUE_SEPARATOR);
            out.push_str(v);
            out.push(PROPERTY_SEPARATOR);
        }
        out
    }

    /// Appends [`Self::to_wire_string`]'s bytes to `out` (a record's PROPERTIES, with no string
    /// in between).
    pub fn write_wire(&self, out: &mut impl bytes::BufMut) {
        for (k, v) in &self.pairs {
            out.put_slice(k.as_bytes());
            out.put_u8(NAME_VALUE_SEPARATOR as u8);
            out.put_slice(v.as_bytes());
            out.put_u8(PROPERTY_SEPARATOR as u8);
        }
    }

    /// Length in bytes of [`Self::to_wire_string`].
    pub fn wire_len(&self) -> usize {
        self.pairs.iter().map(|(k, v)| k.len() + 1 + v.len() + 1).sum()
    }

    /// Checks that every pair survives Java's parser unchanged and that the string fits `PROPLEN`.
    pub fn check_wire_safe(&self) -> Result<(), PropertiesError> {
        for (k, v) in &self.pairs {
            if k.is_empty() {
                return Err(PropertiesError::EmptyKey);
            }
            if k.contains([NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR]) {
                return Err(PropertiesError::SeparatorInKey { key: k.to_string() });
            }
            if v.is_empty() {
                return Err(PropertiesError::EmptyValue { key: k.to_string() });
            }
            if v.contains(PROPERTY_SEPARATOR) {
                return Err(PropertiesError::SeparatorInValue { key: k.to_string() });
            }
        }
        let len = self.wire_len();
        if len > PROPERTIES_SIZE_MAX_BYTES {
            return Err(PropertiesError::TooLong { len, max: PROPERTIES_SIZE_MAX_BYTES });
        }
        Ok(())
    }
}

impl fmt::Display for Properties {
    /// Human form `{k=v, ...}`; the wire form is [`Properties::to_wire_string`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (k, v)) in self.pairs.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{k}={v}")?;
        }
        f.write_str("}")
    }
}

impl<K: Into<CompactString>, V: Into<CompactString>> FromIterator<(K, V)> for Properties {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut props = Properties::new();
        props.extend(iter);
        props
    }
}

impl<K: Into<CompactString>, V: Into<CompactString>> Extend<(K, V)> for Properties {
    fn extend<I: IntoIterator<Item = (K, V)>>(&mut self, iter: I) {
        for (k, v) in iter {
            self.insert(k, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::message::testing::wire_safe_properties;

    #[test]
    fn wire_string_ends_every_pair_with_a_separator_like_java() {
        let props: Properties = [(TAGS, "a"), (KEYS, "k1 k2"), (WAIT, "true")].into_iter().collect();
        assert_eq!(props.to_wire_string(), "TAGS\u{1}a\u{2}KEYS\u{1}k1 k2\u{2}WAIT\u{1}true\u{2}");
        assert_eq!(props.wire_len(), props.to_wire_string().len());
        assert_eq!(Properties::new().to_wire_string(), "");
        assert_eq!(Properties::new().wire_len(), 0);
    }

    #[test]
    fn parser_skips_malformed_pairs_like_java() {
        // Each case: input, expected pairs in order. Derived from 4.9.8 `string2messageProperties`.
        let cases: &[(&str, &[(&str, &str)])] = &[
            ("", &[]),
            ("\u{2}\u{2}", &[]),
            ("a", &[]),
            ("a\u{1}", &[]),
            ("\u{1}b", &[]),
            ("a\u{1}b", &[("a", "b")]),
            ("a\u{1}b\u{2}", &[("a", "b")]),
            ("a\u{1}b\u{1}c", &[("a", "b\u{1}c")]),
            ("a\u{1}1\u{2}x\u{2}b\u{1}2", &[("a", "1"), ("b", "2")]),
            ("a\u{1}1\u{2}b\u{1}2\u{2}a\u{1}3", &[("a", "3"), ("b", "2")]),
            ("k\u{1}ü€😀", &[("k", "ü€😀")]),
        ];
        for (input, expected) in cases {
            let got = Properties::from_wire_str(input);
            let got: Vec<(&str, &str)> = got.iter().collect();
            assert_eq!(&got, expected, "input {input:?}");
        }
    }

    #[test]
    fn insert_replaces_in_place_and_remove_works() {
        let mut p = Properties::new();
        assert_eq!(p.insert("a", "1"), None);
        assert_eq!(p.insert("b", "2"), None);
        assert_eq!(p.insert("a", "3"), Some("1".into()));
        assert_eq!(p.iter().collect::<Vec<_>>(), vec![("a", "3"), ("b", "2")]);
        assert_eq!(p.remove("a"), Some("3".into()));
        assert_eq!(p.remove("a"), None);
        assert!(p.contains_key("b"));
        assert_eq!(p.to_string(), "{b=2}");
    }

    #[test]
    fn wire_safety_table() {
        let ok: Properties = [("a", "b\u{1}c")].into_iter().collect();
        assert_eq!(ok.check_wire_safe(), Ok(()));
        let bad = |k: &str, v: &str| [(k.to_owned(), v.to_owned())].into_iter().collect::<Properties>();
        assert_eq!(bad("", "v").check_wire_safe(), Err(PropertiesError::EmptyKey));
        assert!(matches!(bad("k", "").check_wire_safe(), Err(PropertiesError::EmptyValue { .. })));
        assert!(matches!(bad("k\u{1}", "v").check_wire_safe(), Err(PropertiesError::SeparatorInKey { .. })));
        assert!(matches!(bad("k", "v\u{2}").check_wire_safe(), Err(PropertiesError::SeparatorInValue { .. })));
        let long = bad("k", &"v".repeat(PROPERTIES_SIZE_MAX_BYTES));
        assert!(matches!(long.check_wire_safe(), Err(PropertiesError::TooLong { .. })));
        assert!(is_reserved_key(UNIQ_KEY));
        assert!(!is_reserved_key("myKey"));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(10_000))]

        #[test]
        fn wire_round_trip(props in wire_safe_properties()) {
            prop_assert_eq!(props.check_wire_safe(), Ok(()));
            let s = props.to_wire_string();
            prop_assert_eq!(s.len(), props.wire_len());
            prop_assert_eq!(Properties::from_wire_str(&s), props);
        }

        /// Short strings take the scan for duplicates, long ones the index (past
        /// PROPERTIES_LINEAR_PARSE_MAX_COUNT pairs); both must keep the first position and the last
        /// value of a key, as Java's `HashMap.put` does.
        #[test]
        fn both_duplicate_lookups_agree_with_java(s in "([a-e]{1,2}\u{1}[0-9]{0,2}\u{2}){0,40}") {
            let mut expected: Vec<(String, String)> = Vec::new();
            for pair in s.split(PROPERTY_SEPARATOR) {
                let Some((k, v)) = pair.split_once(NAME_VALUE_SEPARATOR) else { continue };
                if k.is_empty() || v.is_empty() {
                    continue;
                }
                match expected.iter_mut().find(|(ek, _)| ek == k) {
                    Some(slot) => slot.1 = v.to_owned(),
                    None => expected.push((k.to_owned(), v.to_owned())),
                }
            }
            let got = Properties::from_wire_str(&s);
            let got: Vec<(String, String)> = got.iter().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
            prop_assert_eq!(got, expected);
        }

        #[test]
        fn parser_accepts_any_string(s in "[a-c\u{1}\u{2}]{0,40}") {
            // Whatever it keeps must re-encode and re-parse to itself.
            let props = Properties::from_wire_str(&s);
            prop_assert_eq!(props.check_wire_safe(), Ok(()));
            prop_assert_eq!(Properties::from_wire_str(&props.to_wire_string()), props);
        }
    }
}
