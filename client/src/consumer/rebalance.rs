//! Queue allocation (`AllocateMessageQueueStrategy`): which of a topic's queues this consumer of a
//! clustering group reads, computed exactly as RocketMQ 4.9.8 computes it so a raftmq consumer and
//! Java consumers of one group split the queues without overlap or gaps.
//!
//! Pure functions, no I/O. Every member computes the allocation independently from the same inputs,
//! so the inputs are put in one canonical order first ([`allocate`]): queues by
//! `MessageQueue.compareTo` (topic, brokerName, queueId) and client ids by `String.compareTo`, both
//! comparing strings by UTF-16 code units as Java does (`RebalanceImpl.rebalanceByTopic` sorts both).
//!
//! Invariants:
//! - For one set of members, the allocations of all members partition the queues (averagely) or
//!   cover each queue exactly once (consistent hash).
//! - A client id not in the member list gets nothing (Java logs `[BUG]` and returns empty).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use md5::Digest;
use md5::Md5;
use raftmq_common::message::MessageQueue;

/// Java `String.compareTo`: lexicographic over UTF-16 code units.
pub fn java_string_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Java `MessageQueue.compareTo`: topic, then brokerName, then queueId.
pub fn java_mq_cmp(a: &MessageQueue, b: &MessageQueue) -> Ordering {
    java_string_cmp(&a.topic, &b.topic)
        .then_with(|| java_string_cmp(&a.broker_name, &b.broker_name))
        .then_with(|| a.queue_id.cmp(&b.queue_id))
}

/// Java `MessageQueue.toString`, the key the consistent-hash strategy hashes.
pub fn mq_to_java_string(mq: &MessageQueue) -> String {
    format!("MessageQueue [topic={}, brokerName={}, queueId={}]", mq.topic, mq.broker_name, mq.queue_id)
}

/// How a clustering group splits a topic's queues among its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AllocateStrategy {
    /// `AllocateMessageQueueAveragely` ("AVG", the default): contiguous ranges, the first
    /// `queues % members` members get one more.
    #[default]
    Averagely,
    /// `AllocateMessageQueueConsistentHash` ("CONSISTENT_HASH") with this many virtual nodes per
    /// member (Java's default is 10); MD5 ring, so few queues move when members change.
    ConsistentHash {
        /// Virtual nodes per member.
        virtual_node_count: u32,
    },
}

impl AllocateStrategy {
    /// Consistent hashing with Java's default of 10 virtual nodes.
    pub fn consistent_hash() -> Self {
        AllocateStrategy::ConsistentHash { virtual_node_count: 10 }
    }

    /// Java's `getName()`.
    pub fn name(&self) -> &'static str {
        match self {
            AllocateStrategy::Averagely => "AVG",
            AllocateStrategy::ConsistentHash { .. } => "CONSISTENT_HASH",
        }
    }
}

/// The queues of `mq_all` that `current_cid` reads when the group's members are `cid_all`. Both
/// lists are sorted into Java's order first, so callers may pass them in any order; duplicates in
/// `mq_all` are kept as Java keeps them (a route never has any).
pub fn allocate(
    strategy: AllocateStrategy,
    current_cid: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
) -> Vec<MessageQueue> {
    let mut mqs = mq_all.to_vec();
    mqs.sort_by(java_mq_cmp);
    let mut cids = cid_all.to_vec();
    cids.sort_by(|a, b| java_string_cmp(a, b));
    match strategy {
        AllocateStrategy::Averagely => allocate_averagely(current_cid, &mqs, &cids),
        AllocateStrategy::ConsistentHash { virtual_node_count } => {
            allocate_consistent_hash(current_cid, &mqs, &cids, virtual_node_count)
        }
    }
}

/// `AllocateMessageQueueAveragely.allocate` on already sorted inputs.
pub fn allocate_averagely(current_cid: &str, mq_all: &[MessageQueue], cid_all: &[String]) -> Vec<MessageQueue> {
    if current_cid.is_empty() || mq_all.is_empty() || cid_all.is_empty() {
        return Vec::new();
    }
    let Some(index) = cid_all.iter().position(|c| c == current_cid) else {
        return Vec::new();
    };
    let (n_mq, n_cid) = (mq_all.len(), cid_all.len());
    let modulo = n_mq % n_cid;
    let average = if n_mq <= n_cid {
        1
    } else if modulo > 0 && index < modulo {
        n_mq / n_cid + 1
    } else {
        n_mq / n_cid
    };
    let start = if modulo > 0 && index < modulo { index * average } else { index * average + modulo };
    // With more members than queues, start passes the end for the surplus members: range is 0.
    let range = average.min(n_mq.saturating_sub(start));
    (0..range).filter_map(|i| mq_all.get((start + i) % n_mq).cloned()).collect()
}

/// `ConsistentHashRouter`'s default hash (`MD5Hash`): the first 4 digest bytes, big-endian, unsigned.
pub fn md5_hash(key: &str) -> u64 {
    let digest = Md5::digest(key.as_bytes());
    digest.iter().take(4).fold(0u64, |h, b| (h << 8) | u64::from(*b))
}

/// `AllocateMessageQueueConsistentHash.allocate` on already sorted inputs.
pub fn allocate_consistent_hash(
    current_cid: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
    virtual_node_count: u32,
) -> Vec<MessageQueue> {
    if current_cid.is_empty() || mq_all.is_empty() || cid_all.is_empty() || !cid_all.iter().any(|c| c == current_cid) {
        return Vec::new();
    }
    // The ring is Java's TreeMap<Long, VirtualNode>: a later vnode with the same hash replaces the
    // earlier one, and a member listed twice continues its replica numbering (`getExistingReplicas`).
    let mut ring: BTreeMap<u64, &str> = BTreeMap::new();
    for cid in cid_all {
        let existing = ring.values().filter(|c| **c == cid.as_str()).count();
        for i in 0..virtual_node_count as usize {
            ring.insert(md5_hash(&format!("{cid}-{}", i + existing)), cid.as_str());
        }
    }
    mq_all
        .iter()
        .filter(|mq| {
            let hash = md5_hash(&mq_to_java_string(mq));
            let node = ring.range(hash..).next().or_else(|| ring.iter().next()).map(|(_, c)| *c);
            node == Some(current_cid)
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn mqs(brokers: &[(&str, i32)]) -> Vec<MessageQueue> {
        brokers.iter().flat_map(|(b, n)| (0..*n).map(move |q| MessageQueue::new("T", *b, q))).collect()
    }

    fn cids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("10.0.0.{i}@{i}")).collect()
    }

    fn label(v: &[MessageQueue]) -> Vec<String> {
        v.iter().map(|q| format!("{}:{}", q.broker_name, q.queue_id)).collect()
    }

    /// Values worked through Java's arithmetic by hand: 8 queues / 3 members → 3, 3, 2;
    /// 3 queues / 5 members → one each for the first three, nothing for the rest.
    #[test]
    fn averagely_table() {
        let all = mqs(&[("a", 4), ("b", 4)]);
        let cases: &[(usize, usize, &[&str])] = &[
            (3, 0, &["a:0", "a:1", "a:2"]),
            (3, 1, &["a:3", "b:0", "b:1"]),
            (3, 2, &["b:2", "b:3"]),
            (1, 0, &["a:0", "a:1", "a:2", "a:3", "b:0", "b:1", "b:2", "b:3"]),
            (2, 1, &["b:0", "b:1", "b:2", "b:3"]),
            (8, 7, &["b:3"]),
        ];
        for (members, index, want) in cases {
            let c = cids(*members);
            assert_eq!(label(&allocate(AllocateStrategy::Averagely, &c[*index], &all, &c)), *want, "{members}/{index}");
        }
        let few = mqs(&[("a", 3)]);
        let c = cids(5);
        let got: Vec<Vec<String>> =
            c.iter().map(|cid| label(&allocate(AllocateStrategy::Averagely, cid, &few, &c))).collect();
        assert_eq!(got, vec![vec!["a:0"], vec!["a:1"], vec!["a:2"], vec![], vec![]]);
        assert!(allocate(AllocateStrategy::Averagely, "stranger", &few, &c).is_empty());
        assert!(allocate(AllocateStrategy::Averagely, "", &few, &c).is_empty());
        assert!(allocate(AllocateStrategy::Averagely, &c[0], &[], &c).is_empty());
    }

    #[test]
    fn inputs_are_sorted_the_java_way() {
        let mut shuffled = mqs(&[("b", 2), ("a", 2)]);
        shuffled.reverse();
        let c = vec!["z@1".to_owned(), "a@1".to_owned()];
        assert_eq!(label(&allocate(AllocateStrategy::Averagely, "a@1", &shuffled, &c)), vec!["a:0", "a:1"]);
        // UTF-16: U+10000 is the pair D800 DC00, below U+FF61; UTF-8 bytes order them the other way.
        assert_eq!(java_string_cmp("\u{10000}", "\u{FF61}"), Ordering::Less);
        assert_eq!("\u{10000}".cmp("\u{FF61}"), Ordering::Greater);
    }

    #[test]
    fn every_strategy_partitions_the_queues() {
        for strategy in [AllocateStrategy::Averagely, AllocateStrategy::consistent_hash()] {
            for members in 1..=9 {
                let all = mqs(&[("a", 4), ("b", 3), ("c", 1)]);
                let c = cids(members);
                let mut seen = BTreeSet::new();
                let mut total = 0;
                for cid in &c {
                    let got = allocate(strategy, cid, &all, &c);
                    total += got.len();
                    seen.extend(got);
                }
                assert_eq!(total, all.len(), "{strategy:?} {members}");
                assert_eq!(seen.len(), all.len(), "{strategy:?} {members}");
            }
        }
    }

    /// MD5 test vectors (RFC 1321 §A.5), first four bytes: "" → d41d8cd9, "abc" → 900150983.
    #[test]
    fn md5_hash_is_the_first_four_digest_bytes() {
        assert_eq!(md5_hash(""), 0xd41d_8cd9);
        assert_eq!(md5_hash("abc"), 0x9001_5098);
        assert_eq!(md5_hash("message digest"), 0xf96b_697d);
        assert_eq!(
            mq_to_java_string(&MessageQueue::new("T", "b", 3)),
            "MessageQueue [topic=T, brokerName=b, queueId=3]"
        );
    }

    #[test]
    fn consistent_hash_moves_few_queues_when_a_member_joins() {
        let all = mqs(&[("a", 16), ("b", 16)]);
        let before = cids(4);
        let mut after = before.clone();
        after.push("10.0.0.99@99".to_owned());
        let strategy = AllocateStrategy::consistent_hash();
        let owner = |members: &[String], mq: &MessageQueue| {
            members.iter().find(|c| allocate(strategy, c, &all, members).contains(mq)).cloned()
        };
        let moved = all.iter().filter(|mq| owner(&before, mq) != owner(&after, mq)).count();
        // Only queues taken by the newcomer move; the others keep their owner.
        let taken = allocate(strategy, "10.0.0.99@99", &all, &after).len();
        assert_eq!(moved, taken);
        assert!(
            allocate(AllocateStrategy::ConsistentHash { virtual_node_count: 0 }, &before[0], &all, &before).is_empty()
        );
    }
}
