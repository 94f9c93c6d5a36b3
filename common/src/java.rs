//! Java behaviours RocketMQ's bytes depend on, reproduced exactly.
//!
//! - [`string_hash_code`]: `java.lang.String.hashCode()` — RocketMQ stores it as the tag code in
//!   ConsumeQueue units and hashes IndexFile keys with it.
//! - [`hash_map_order`]: the iteration order of a `java.util.HashMap<String, _>` built by inserting
//!   keys into a fresh map. A Java broker writes `extFields` in that order, so emitting ours in the
//!   same order makes our frames byte-identical to a Java peer's (golden tests rely on it).

/// `String.hashCode()`: `h = 31 * h + c` over UTF-16 code units, wrapping at 32 bits.
pub fn string_hash_code(s: &str) -> i32 {
    string_hash_code_after(0, s)
}

/// `String.hashCode()` of `prefix + s`, where `h` is the hash code of `prefix`: the hash of a
/// concatenation without building it (the apply path hashes an IndexFile key `topic#key` per
/// message and allocated each one before).
pub fn string_hash_code_after(h: i32, s: &str) -> i32 {
    if s.is_ascii() {
        // One UTF-16 unit per byte: the common case (header keys, most tags) without the decoder.
        return s.bytes().fold(h, |h, b| h.wrapping_mul(31).wrapping_add(b as i32));
    }
    s.encode_utf16().fold(h, |h, unit| h.wrapping_mul(31).wrapping_add(unit as i32))
}

/// Orders `keys` as a `java.util.HashMap` with default capacity and load factor iterates them
/// after they were inserted in the given order.
///
/// Java spreads the hash (`h ^ (h >>> 16)`), picks bucket `hash & (capacity - 1)`, doubles the
/// capacity from 16 whenever size exceeds 3/4 of it, and iterates buckets in index order, each
/// bucket in insertion order (resizes keep the relative order). Trees (8+ keys in one bucket)
/// are not modelled: headers never have that many collisions.
pub fn hash_map_order<'a, I>(keys: I) -> Vec<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let keys: Vec<&str> = keys.into_iter().collect();
    let mut ordered = Vec::with_capacity(keys.len());
    let visited: Result<(), std::convert::Infallible> = hash_map_order_visit(keys.iter().copied(), |i| {
        ordered.push(keys[i]);
        Ok(())
    });
    let Ok(()) = visited;
    ordered
}

/// [`hash_map_order`] without allocating for up to 32 keys (`ORDER_ON_STACK_MAX_COUNT`): calls `visit`
/// with each key's index in Java's iteration order, stopping at its first error. Every encoded
/// header is ordered like this.
pub fn hash_map_order_visit<'a, I, E>(keys: I, mut visit: impl FnMut(usize) -> Result<(), E>) -> Result<(), E>
where
    I: ExactSizeIterator<Item = &'a str>,
{
    let len = keys.len();
    let mut capacity: usize = 16;
    while len * 4 > capacity * 3 {
        capacity *= 2;
    }
    let mut on_heap: Vec<(u32, u32)>;
    let mut on_stack = [(0u32, 0u32); ORDER_ON_STACK_MAX_COUNT];
    let pairs: &mut [(u32, u32)] = if len <= ORDER_ON_STACK_MAX_COUNT {
        &mut on_stack[..len]
    } else {
        on_heap = vec![(0, 0); len];
        &mut on_heap
    };
    for (i, key) in keys.enumerate() {
        let h = string_hash_code(key) as u32;
        pairs[i] = ((((h ^ (h >> 16)) as usize) & (capacity - 1)) as u32, i as u32);
    }
    // (bucket, insertion index) pairs are distinct, so an unstable sort keeps insertion order
    // within a bucket.
    pairs.sort_unstable();
    pairs.iter().try_for_each(|&(_, i)| visit(i as usize))
}

/// Keys [`hash_map_order_visit`] orders without a heap allocation (a send header has 14).
const ORDER_ON_STACK_MAX_COUNT: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_codes_match_java() {
        // Values computed with java.lang.String.hashCode().
        assert_eq!(string_hash_code(""), 0);
        assert_eq!(string_hash_code("a"), 97);
        assert_eq!(string_hash_code("TagA"), 2_598_919);
        assert_eq!(string_hash_code("hello"), 99_162_322);
        // Overflow wraps like Java's int arithmetic.
        assert_eq!(string_hash_code("polygenelubricants"), i32::MIN);
        // UTF-16 code units, including a surrogate pair.
        assert_eq!(string_hash_code("中文标签"), 622_041_809);
        assert_eq!(string_hash_code("😀tag"), 1_276_941_143);
    }

    #[test]
    fn hash_map_order_matches_java_for_rocketmq_headers() {
        // Orders printed by OpenJDK 17's HashMap filled in the header class's field order.
        assert_eq!(
            hash_map_order(["suggestWhichBrokerId", "nextBeginOffset", "minOffset", "maxOffset"]),
            ["suggestWhichBrokerId", "nextBeginOffset", "maxOffset", "minOffset"]
        );
        assert_eq!(
            hash_map_order([
                "brokerName",
                "brokerAddr",
                "clusterName",
                "haServerAddr",
                "brokerId",
                "compressed",
                "bodyCrc32"
            ]),
            ["brokerId", "bodyCrc32", "clusterName", "brokerAddr", "haServerAddr", "compressed", "brokerName"]
        );
        let v2: Vec<&str> = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "m"].to_vec();
        assert_eq!(hash_map_order(v2.clone()), v2);
    }

    #[test]
    fn visit_order_matches_a_stable_sort_by_bucket_on_stack_and_heap() {
        for count in [0, 1, 13, ORDER_ON_STACK_MAX_COUNT, ORDER_ON_STACK_MAX_COUNT + 1, 100] {
            let keys: Vec<String> = (0..count).map(|i| format!("key{}", i * 7919)).collect();
            let mut capacity = 16;
            while count * 4 > capacity * 3 {
                capacity *= 2;
            }
            let mut expected: Vec<usize> = (0..count).collect();
            expected.sort_by_key(|&i| {
                let h = string_hash_code(&keys[i]) as u32;
                ((h ^ (h >> 16)) as usize) & (capacity - 1)
            });
            let mut order = Vec::new();
            let visited: Result<(), ()> = hash_map_order_visit(keys.iter().map(String::as_str), |i| {
                order.push(i);
                Ok(())
            });
            assert!(visited.is_ok());
            assert_eq!(order, expected, "{count} keys");
        }
    }
}
