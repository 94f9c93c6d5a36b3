//! Tag hash codes: what the ConsumeQueue stores per message and what IndexFile slots are keyed by.
//!
//! Both are Java's `String.hashCode()` (`h = 31*h + c` over the **UTF-16 code units**, wrapping `i32`),
//! computed by [`crate::java::string_hash_code`], so non-ASCII tags and characters outside the BMP
//! (surrogate pairs) hash exactly as a 4.x client computes them for its subscription `codeSet`
//! (docs/store-format.md#tag-hash-code). The table test below pins those values for this module.

use crate::java::string_hash_code;
use crate::java::string_hash_code_after;

/// The ConsumeQueue tags code (`MessageExtBrokerInner.tagsString2tagsCode`): the tag's hash code
/// sign-extended to `i64`; no tag or an empty tag is 0.
pub fn tags_code(tags: Option<&str>) -> i64 {
    match tags {
        Some(t) if !t.is_empty() => i64::from(string_hash_code(t)),
        _ => 0,
    }
}

/// The IndexFile key hash (`IndexFile.indexKeyHashMethod`): `abs(hashCode)`, where `abs(i32::MIN)`,
/// still negative in Java, becomes 0. Never negative, so `hash % slot_count` is a valid slot.
pub fn index_key_hash(key: &str) -> i32 {
    string_hash_code(key).checked_abs().unwrap_or(0)
}

/// [`index_key_hash`] of the key `topic#key` RocketMQ's `IndexService` builds, without building it.
pub fn topic_key_hash(topic: &str, key: &str) -> i32 {
    let h = string_hash_code_after(string_hash_code_after(string_hash_code(topic), "#"), key);
    h.checked_abs().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Expected values computed independently in Python:
    /// `h = (31*h + c) & 0xffffffff` over `s.encode('utf-16-be')` units, then to signed.
    const TABLE: &[(&str, i32)] = &[
        ("", 0),
        ("a", 97),
        ("*", 42),
        ("TagA", 2_598_919),
        ("TagB", 2_598_920),
        ("Aa", 2112),
        ("BB", 2112),
        ("hello world", 1_794_106_052),
        ("zzzzzzzzzzzz", 1_097_476_992),
        ("TopicTest#OrderID188", -1_231_271_670),
        ("polygenelubricants", i32::MIN),
        // Non-ASCII in the BMP: one UTF-16 unit each.
        ("ü", 252),
        ("中文标签", 622_041_809),
        ("\u{ffff}\u{ffff}", 2_097_120),
        // Outside the BMP: two units (a surrogate pair) each.
        ("😀", 1_772_899),
        ("𝄞", 1_772_394),
        ("a😀b", 57_849_694),
    ];

    #[test]
    fn java_hash_table() {
        for &(s, expected) in TABLE {
            assert_eq!(string_hash_code(s), expected, "{s:?}");
        }
    }

    #[test]
    fn tags_code_sign_extends_and_maps_empty_to_zero() {
        assert_eq!(tags_code(None), 0);
        assert_eq!(tags_code(Some("")), 0);
        assert_eq!(tags_code(Some("TagA")), 2_598_919);
        assert_eq!(tags_code(Some("TopicTest#OrderID188")), -1_231_271_670i64);
        assert_eq!(tags_code(Some("polygenelubricants")), i64::from(i32::MIN));
    }

    #[test]
    fn index_key_hash_is_abs_with_min_to_zero() {
        assert_eq!(index_key_hash("TopicTest#OrderID188"), 1_231_271_670);
        assert_eq!(topic_key_hash("TopicTest", "OrderID188"), 1_231_271_670);
        for (topic, key) in [("T", ""), ("", "k"), ("主题", "键😀"), ("polygenelubricant", "s")] {
            assert_eq!(topic_key_hash(topic, key), index_key_hash(&format!("{topic}#{key}")), "{topic}#{key}");
        }
        assert_eq!(index_key_hash("polygenelubricants"), 0);
        assert_eq!(index_key_hash("TagA"), 2_598_919);
        assert_eq!(index_key_hash(""), 0);
    }
}
