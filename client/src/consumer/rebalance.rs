//! Queue allocation (`AllocateMessageQueueStrategy`): which of a topic's queues this consumer of a
//! clustering group reads, computed exactly as RocketMQ 4.9.8 computes it so a raftmq consumer and
//! Java consumers of one group split the queues without overlap or gaps. Every strategy of
//! RocketMQ's `client.consumer.rebalance` package, by its Java name: `AllocateMessageQueueAveragely`,
//! `AllocateMessageQueueAveragelyByCircle`, `AllocateMessageQueueConsistentHash`,
//! `AllocateMessageQueueByConfig`, `AllocateMessageQueueByMachineRoom` and the
//! `AllocateMachineRoomNearby` wrapper around any of them.
//!
//! Pure functions, no I/O. Every member computes the allocation independently from the same inputs,
//! so the inputs are put in one canonical order first ([`allocate`]): queues by
//! `MessageQueue.compareTo` (topic, brokerName, queueId) and client ids by `String.compareTo`, both
//! comparing strings by UTF-16 code units as Java does (`RebalanceImpl.rebalanceByTopic` sorts both).
//!
//! Invariants:
//! - For one set of members, the allocations of all members partition the queues (averagely, by
//!   circle, consistent hash, machine-room nearby around any of them); by machine room they
//!   partition the queues of the listed rooms; by config each member reads what it was given.
//! - A client id not in the member list gets nothing (Java logs `[BUG]` and returns empty); so does
//!   an empty client id or queue list, where Java throws.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::sync::Arc;

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

/// Where brokers' queues and consumers are deployed (`AllocateMachineRoomNearby.MachineRoomResolver`).
#[derive(Clone)]
pub struct MachineRoomResolver {
    broker_deploy_in: Arc<dyn Fn(&MessageQueue) -> String + Send + Sync>,
    consumer_deploy_in: Arc<dyn Fn(&str) -> String + Send + Sync>,
}

impl std::fmt::Debug for MachineRoomResolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MachineRoomResolver").finish_non_exhaustive()
    }
}

impl MachineRoomResolver {
    /// `brokerDeployIn(mq)` and `consumerDeployIn(clientId)`: the machine room of a queue's broker
    /// and of a consumer.
    pub fn new(
        broker_deploy_in: impl Fn(&MessageQueue) -> String + Send + Sync + 'static,
        consumer_deploy_in: impl Fn(&str) -> String + Send + Sync + 'static,
    ) -> Self {
        MachineRoomResolver {
            broker_deploy_in: Arc::new(broker_deploy_in),
            consumer_deploy_in: Arc::new(consumer_deploy_in),
        }
    }

    /// The resolver of the common naming where a broker is `<room>@<name>` and a client id
    /// `<room>@<ip>@<instance>` (the room is what precedes the first `@`).
    pub fn by_name_prefix() -> Self {
        fn room(name: &str) -> String {
            name.split('@').next().unwrap_or_default().to_owned()
        }
        MachineRoomResolver::new(|mq| room(&mq.broker_name), room)
    }
}

/// How a clustering group splits a topic's queues among its members.
#[derive(Debug, Clone, Default)]
pub enum AllocateStrategy {
    /// `AllocateMessageQueueAveragely` ("AVG", the default): contiguous ranges, the first
    /// `queues % members` members get one more.
    #[default]
    Averagely,
    /// `AllocateMessageQueueAveragelyByCircle` ("AVG_BY_CIRCLE"): queue `i` goes to member
    /// `i % members`, dealt round like cards.
    AveragelyByCircle,
    /// `AllocateMessageQueueConsistentHash` ("CONSISTENT_HASH") with this many virtual nodes per
    /// member (Java's default is 10); MD5 ring, so few queues move when members change.
    ConsistentHash {
        /// Virtual nodes per member.
        virtual_node_count: u32,
    },
    /// `AllocateMessageQueueByConfig` ("CONFIG"): this member reads exactly these queues, whoever
    /// else is in the group (of a topic's queues, those listed here; Java hands its whole list to
    /// every topic's rebalance, the retry topic's too).
    ByConfig {
        /// The queues this consumer reads.
        queues: Vec<MessageQueue>,
    },
    /// `AllocateMessageQueueByMachineRoom` ("MACHINE_ROOM"): only queues of brokers named
    /// `<room>@<name>` with `<room>` listed are read, split averagely over all members.
    ByMachineRoom {
        /// The machine rooms (Java's `consumeridcs`) whose brokers' queues are consumed.
        consumer_idcs: BTreeSet<String>,
    },
    /// `AllocateMachineRoomNearby` ("MACHINE_ROOM_NEARBY-<inner>"): a broker's queues go to the
    /// consumers in its machine room, by the inner strategy; the queues of a room without a
    /// consumer are shared by all members, by the inner strategy.
    MachineRoomNearby {
        /// The actual strategy.
        inner: Box<AllocateStrategy>,
        /// Where queues and consumers are.
        resolver: MachineRoomResolver,
    },
}

impl AllocateStrategy {
    /// Consistent hashing with Java's default of 10 virtual nodes.
    pub fn consistent_hash() -> Self {
        AllocateStrategy::ConsistentHash { virtual_node_count: 10 }
    }

    /// [`AllocateStrategy::MachineRoomNearby`] around `inner`.
    pub fn machine_room_nearby(inner: AllocateStrategy, resolver: MachineRoomResolver) -> Self {
        AllocateStrategy::MachineRoomNearby { inner: Box::new(inner), resolver }
    }

    /// Java's `getName()`.
    pub fn name(&self) -> String {
        match self {
            AllocateStrategy::Averagely => "AVG".into(),
            AllocateStrategy::AveragelyByCircle => "AVG_BY_CIRCLE".into(),
            AllocateStrategy::ConsistentHash { .. } => "CONSISTENT_HASH".into(),
            AllocateStrategy::ByConfig { .. } => "CONFIG".into(),
            AllocateStrategy::ByMachineRoom { .. } => "MACHINE_ROOM".into(),
            AllocateStrategy::MachineRoomNearby { inner, .. } => format!("MACHINE_ROOM_NEARBY-{}", inner.name()),
        }
    }
}

/// The queues of `mq_all` that `current_cid` reads when the group's members are `cid_all`. Both
/// lists are sorted into Java's order first, so callers may pass them in any order; duplicates in
/// `mq_all` are kept as Java keeps them (a route never has any).
pub fn allocate(
    strategy: &AllocateStrategy,
    current_cid: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
) -> Vec<MessageQueue> {
    let mut mqs = mq_all.to_vec();
    mqs.sort_by(java_mq_cmp);
    let mut cids = cid_all.to_vec();
    cids.sort_by(|a, b| java_string_cmp(a, b));
    allocate_sorted(strategy, current_cid, &mqs, &cids)
}

/// [`allocate`] on inputs already in Java's order (what `RebalanceImpl` hands a strategy).
pub fn allocate_sorted(
    strategy: &AllocateStrategy,
    current_cid: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
) -> Vec<MessageQueue> {
    match strategy {
        AllocateStrategy::Averagely => allocate_averagely(current_cid, mq_all, cid_all),
        AllocateStrategy::AveragelyByCircle => allocate_averagely_by_circle(current_cid, mq_all, cid_all),
        AllocateStrategy::ConsistentHash { virtual_node_count } => {
            allocate_consistent_hash(current_cid, mq_all, cid_all, *virtual_node_count)
        }
        AllocateStrategy::ByConfig { queues } => queues.iter().filter(|q| mq_all.contains(q)).cloned().collect(),
        AllocateStrategy::ByMachineRoom { consumer_idcs } => {
            allocate_by_machine_room(current_cid, mq_all, cid_all, consumer_idcs)
        }
        AllocateStrategy::MachineRoomNearby { inner, resolver } => {
            allocate_machine_room_nearby(inner, resolver, current_cid, mq_all, cid_all)
        }
    }
}

/// `AllocateMessageQueueAveragelyByCircle.allocate` on already sorted inputs.
pub fn allocate_averagely_by_circle(
    current_cid: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
) -> Vec<MessageQueue> {
    if current_cid.is_empty() || mq_all.is_empty() {
        return Vec::new();
    }
    let Some(index) = cid_all.iter().position(|c| c == current_cid) else {
        return Vec::new();
    };
    mq_all.iter().skip(index).step_by(cid_all.len()).cloned().collect()
}

/// Java's `String.split("@")`: trailing empty parts are dropped.
fn java_split_at(name: &str) -> Vec<&str> {
    let mut parts: Vec<&str> = name.split('@').collect();
    while parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    parts
}

/// `AllocateMessageQueueByMachineRoom.allocate` on already sorted inputs: the queues of brokers
/// `<room>@<name>` whose room is listed, `n / members` each by index, and the `n % members` left
/// over one each to the first members.
pub fn allocate_by_machine_room(
    current_cid: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
    consumer_idcs: &BTreeSet<String>,
) -> Vec<MessageQueue> {
    let Some(index) = cid_all.iter().position(|c| c == current_cid) else {
        return Vec::new();
    };
    let pre: Vec<&MessageQueue> = mq_all
        .iter()
        .filter(|mq| {
            let parts = java_split_at(&mq.broker_name);
            parts.len() == 2 && parts.first().is_some_and(|room| consumer_idcs.contains(*room))
        })
        .collect();
    let members = cid_all.len();
    let (per, rem) = (pre.len() / members, pre.len() % members);
    let start = per * index;
    let mut out: Vec<MessageQueue> = pre.iter().skip(start).take(per).map(|q| (*q).clone()).collect();
    if rem > index
        && let Some(q) = pre.get(index + per * members)
    {
        out.push((*q).clone());
    }
    out
}

/// `AllocateMachineRoomNearby.allocate` on already sorted inputs.
fn allocate_machine_room_nearby(
    inner: &AllocateStrategy,
    resolver: &MachineRoomResolver,
    current_cid: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
) -> Vec<MessageQueue> {
    if current_cid.is_empty() || mq_all.is_empty() || !cid_all.iter().any(|c| c == current_cid) {
        return Vec::new();
    }
    // Java's TreeMaps: rooms in order, each list keeping the sorted order of its input.
    let mut room_mqs: BTreeMap<String, Vec<MessageQueue>> = BTreeMap::new();
    for mq in mq_all {
        room_mqs.entry((resolver.broker_deploy_in)(mq)).or_default().push(mq.clone());
    }
    let mut room_cids: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for cid in cid_all {
        room_cids.entry((resolver.consumer_deploy_in)(cid)).or_default().push(cid.clone());
    }
    let mut out = Vec::new();
    let current_room = (resolver.consumer_deploy_in)(current_cid);
    if let Some(mqs) = room_mqs.remove(&current_room)
        && let Some(cids) = room_cids.get(&current_room)
    {
        out.extend(allocate_sorted(inner, current_cid, &mqs, cids));
    }
    for (room, mqs) in &room_mqs {
        if !room_cids.contains_key(room) {
            out.extend(allocate_sorted(inner, current_cid, mqs, cid_all));
        }
    }
    out
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
            assert_eq!(
                label(&allocate(&AllocateStrategy::Averagely, &c[*index], &all, &c)),
                *want,
                "{members}/{index}"
            );
        }
        let few = mqs(&[("a", 3)]);
        let c = cids(5);
        let got: Vec<Vec<String>> =
            c.iter().map(|cid| label(&allocate(&AllocateStrategy::Averagely, cid, &few, &c))).collect();
        assert_eq!(got, vec![vec!["a:0"], vec!["a:1"], vec!["a:2"], vec![], vec![]]);
        assert!(allocate(&AllocateStrategy::Averagely, "stranger", &few, &c).is_empty());
        assert!(allocate(&AllocateStrategy::Averagely, "", &few, &c).is_empty());
        assert!(allocate(&AllocateStrategy::Averagely, &c[0], &[], &c).is_empty());
    }

    #[test]
    fn inputs_are_sorted_the_java_way() {
        let mut shuffled = mqs(&[("b", 2), ("a", 2)]);
        shuffled.reverse();
        let c = vec!["z@1".to_owned(), "a@1".to_owned()];
        assert_eq!(label(&allocate(&AllocateStrategy::Averagely, "a@1", &shuffled, &c)), vec!["a:0", "a:1"]);
        // UTF-16: U+10000 is the pair D800 DC00, below U+FF61; UTF-8 bytes order them the other way.
        assert_eq!(java_string_cmp("\u{10000}", "\u{FF61}"), Ordering::Less);
        assert_eq!("\u{10000}".cmp("\u{FF61}"), Ordering::Greater);
    }

    #[test]
    fn every_strategy_partitions_the_queues() {
        let nearby = AllocateStrategy::machine_room_nearby(
            AllocateStrategy::AveragelyByCircle,
            MachineRoomResolver::new(
                |mq| if mq.broker_name == "a" { "r1".into() } else { "r2".into() },
                |cid| {
                    if cid.ends_with('1') { "r1".into() } else { "r3".into() }
                },
            ),
        );
        for strategy in [
            AllocateStrategy::Averagely,
            AllocateStrategy::consistent_hash(),
            AllocateStrategy::AveragelyByCircle,
            nearby,
        ] {
            for members in 1..=9 {
                let all = mqs(&[("a", 4), ("b", 3), ("c", 1)]);
                let c = cids(members);
                let mut seen = BTreeSet::new();
                let mut total = 0;
                for cid in &c {
                    let got = allocate(&strategy, cid, &all, &c);
                    total += got.len();
                    seen.extend(got);
                }
                assert_eq!(total, all.len(), "{strategy:?} {members}");
                assert_eq!(seen.len(), all.len(), "{strategy:?} {members}");
            }
        }
    }

    /// Java's arithmetic by hand: 8 queues dealt round 3 members.
    #[test]
    fn averagely_by_circle_deals_queues_round() {
        let all = mqs(&[("a", 4), ("b", 4)]);
        let c = cids(3);
        let got: Vec<Vec<String>> =
            c.iter().map(|cid| label(&allocate(&AllocateStrategy::AveragelyByCircle, cid, &all, &c))).collect();
        assert_eq!(got, vec![vec!["a:0", "a:3", "b:2"], vec!["a:1", "b:0", "b:3"], vec!["a:2", "b:1"]]);
        assert!(allocate(&AllocateStrategy::AveragelyByCircle, "stranger", &all, &c).is_empty());
        assert_eq!(AllocateStrategy::AveragelyByCircle.name(), "AVG_BY_CIRCLE");
    }

    #[test]
    fn by_config_reads_the_configured_queues_of_the_topic() {
        let configured =
            vec![MessageQueue::new("T", "a", 1), MessageQueue::new("T", "b", 0), MessageQueue::new("U", "a", 0)];
        let strategy = AllocateStrategy::ByConfig { queues: configured };
        let all = mqs(&[("a", 4), ("b", 4)]);
        for cid in cids(3) {
            assert_eq!(label(&allocate(&strategy, &cid, &all, &cids(3))), vec!["a:1", "b:0"]);
        }
        assert_eq!(strategy.name(), "CONFIG");
    }

    /// `<room>@<name>` brokers of the listed rooms only, `n / members` each and the remainder one
    /// each to the first members (Java's `mod`/`rem` arithmetic).
    #[test]
    fn by_machine_room_splits_the_listed_rooms_queues() {
        let all = mqs(&[("r1@a", 4), ("r2@b", 3), ("x", 2), ("r3@c", 2), ("r1@", 1), ("r1@a@b", 1)]);
        let strategy =
            AllocateStrategy::ByMachineRoom { consumer_idcs: ["r1", "r2"].into_iter().map(str::to_owned).collect() };
        let c = cids(3);
        let got: Vec<Vec<String>> = c.iter().map(|cid| label(&allocate(&strategy, cid, &all, &c))).collect();
        assert_eq!(got, vec![vec!["r1@a:0", "r1@a:1", "r2@b:2"], vec!["r1@a:2", "r1@a:3"], vec!["r2@b:0", "r2@b:1"]]);
        assert!(allocate(&strategy, "stranger", &all, &c).is_empty());
        assert_eq!(strategy.name(), "MACHINE_ROOM");
    }

    /// A room's queues go to its own consumers; a room without consumers is shared by everyone.
    #[test]
    fn machine_room_nearby_keeps_queues_in_their_room() {
        let all = mqs(&[("hz@a", 4), ("sh@b", 2), ("bj@c", 2)]);
        let c: Vec<String> = ["hz@c1", "hz@c2", "sh@c3"].into_iter().map(str::to_owned).collect();
        let strategy =
            AllocateStrategy::machine_room_nearby(AllocateStrategy::Averagely, MachineRoomResolver::by_name_prefix());
        let got: Vec<Vec<String>> = c.iter().map(|cid| label(&allocate(&strategy, cid, &all, &c))).collect();
        assert_eq!(
            got,
            vec![vec!["hz@a:0", "hz@a:1", "bj@c:0"], vec!["hz@a:2", "hz@a:3", "bj@c:1"], vec!["sh@b:0", "sh@b:1"],]
        );
        assert_eq!(strategy.name(), "MACHINE_ROOM_NEARBY-AVG");
        assert!(allocate(&strategy, "bj@stranger", &all, &c).is_empty());
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
            members.iter().find(|c| allocate(&strategy, c, &all, members).contains(mq)).cloned()
        };
        let moved = all.iter().filter(|mq| owner(&before, mq) != owner(&after, mq)).count();
        // Only queues taken by the newcomer move; the others keep their owner.
        let taken = allocate(&strategy, "10.0.0.99@99", &all, &after).len();
        assert_eq!(moved, taken);
        assert!(
            allocate(&AllocateStrategy::ConsistentHash { virtual_node_count: 0 }, &before[0], &all, &before).is_empty()
        );
    }
}
