//! Tests of the MessageStore: apply, recovery, retention manifests, checkpoints.

use std::net::SocketAddr;

use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_raft::type_config::log_id;

use super::*;
use crate::config::broker_config::BrokerConfig;
use crate::state::entry::DelayProgress;
use crate::state::entry::OffsetCommit;
use crate::state::entry::encode_messages;

fn settings(root: &Path) -> StoreSettings {
    StoreSettings {
        store_root: root.to_path_buf(),
        cq_units_per_file: 8,
        segment_size: 1 << 20,
        delay_levels_ms: vec![1000],
        system_topics: SystemTopicOptions::from(&BrokerConfig::default()),
        index_sizes: IndexFileSizes { slot_count: 16, entry_count: 8 },
    }
}

fn record(queue_offset: i64) -> MessageExt {
    let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
    MessageExt {
        message: Message::new("T", &b"body"[..]).with_tags("a"),
        queue_offset,
        born_host: host,
        store_host: host,
        ..MessageExt::default()
    }
}

fn entry(index: u64, payload_pos: u64, tag: u8, body: Bytes) -> CommittedEntry {
    let mut body = body.to_vec();
    BrokerPatcher.patch(tag, payload_pos, &mut body);
    CommittedEntry { log_id: log_id(1, index), payload_pos, tag, body: Bytes::from(body) }
}

#[test]
fn acl_edits_apply_only_on_the_edit_they_were_built_on_and_group_offsets_go() {
    use crate::acl::AclDocument;
    use crate::acl::AclVersion;
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(settings(dir.path()), 0).unwrap();
    let mut documents = store.acl_documents();
    let doc =
        |counter: i64| AclDocument { version: AclVersion { counter, timestamp: counter }, yaml: "accounts: []".into() };
    let apply = |index: u64, command: BrokerCommand| {
        let (t, b) = command.encode().unwrap();
        ApplyOutcome::decode(&store.apply(entry(index, 0, t, b)))
    };
    assert_eq!(apply(1, BrokerCommand::AclDocument { based_on: None, document: doc(1) }), ApplyOutcome::Done);
    assert_eq!(documents.borrow_and_update().as_ref().map(|d| d.version.counter), Some(1));
    // Built on no edit, or on one that is not the last: rejected, nothing changes.
    let stale = apply(2, BrokerCommand::AclDocument { based_on: None, document: doc(2) });
    assert!(matches!(&stale, ApplyOutcome::Rejected(why) if why.contains("changed meanwhile")), "{stale:?}");
    let based_on = Some(AclVersion { counter: 1, timestamp: 1 });
    assert_eq!(apply(3, BrokerCommand::AclDocument { based_on, document: doc(2) }), ApplyOutcome::Done);
    let again = apply(4, BrokerCommand::AclDocument { based_on, document: doc(3) });
    assert!(matches!(again, ApplyOutcome::Rejected(_)));
    assert_eq!(store.metadata().acl.as_ref().map(|d| d.version.counter), Some(2));
    assert!(documents.has_changed().unwrap());
    // removeOffset: the group's offsets go, the others stay.
    let commits =
        ["g", "h"].map(|group| OffsetCommit { topic: "T".into(), group: group.into(), queue_id: 0, offset: 3 });
    assert_eq!(apply(5, BrokerCommand::ConsumerOffsets(commits.to_vec())), ApplyOutcome::Done);
    assert_eq!(
        apply(6, BrokerCommand::GroupOffsetsDelete { proposed_at_ms: 1, group: "g".into() }),
        ApplyOutcome::Done
    );
    assert_eq!(store.metadata().offsets.query("T", "g", 0), None);
    assert_eq!(store.metadata().offsets.query("T", "h", 0), Some(3));
}

/// POP: a pop answers its epoch and moves the group's committed offset to the lowest message
/// in flight; an ack takes once; a record re-put by the revive with its mark removes exactly
/// that delivery; a snapshot manifest (and so a checkpoint) carries the table.
#[test]
fn pop_entries_and_revive_records_keep_the_table_and_the_group_offset_in_step() {
    use crate::state::pop::PopPlan;
    use crate::state::pop::PopQueue;
    use crate::state::pop::PopReviveMark;
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(settings(dir.path()), 0).unwrap();
    let apply = |store: &MessageStore, index: u64, command: BrokerCommand| {
        let (t, b) = command.encode().unwrap();
        ApplyOutcome::decode(&store.apply(entry(index, 0, t, b)))
    };
    let queue = PopQueue { group: "g".into(), topic: "T".into(), queue_id: 0 };
    let plan = PopPlan {
        queue: queue.clone(),
        from: 0,
        to: 3,
        offsets: vec![0, 1, 2],
        again: vec![],
        invisible_ms: 1_000,
        fifo: false,
    };
    let epoch = match apply(&store, 1, BrokerCommand::Pop { stamp_ms: 5_000, op: PopOp::Pop(vec![plan]) }) {
        ApplyOutcome::Issued(epoch) => epoch,
        other => panic!("{other:?}"),
    };
    assert_eq!(store.metadata().offsets.query("T", "g", 0), Some(0));
    let receipt = |offset| Receipt { queue: queue.clone(), offset, epoch_ms: epoch };
    let ack = BrokerCommand::Pop { stamp_ms: 5_100, op: PopOp::Ack(vec![receipt(0), receipt(0), receipt(7)]) };
    assert_eq!(apply(&store, 2, ack), ApplyOutcome::Granted(vec![true, false, false]));
    assert_eq!(store.metadata().offsets.query("T", "g", 0), Some(1));
    // Offset 1 expired and was re-put into the group's POP retry topic.
    let mark = PopReviveMark {
        group: "g".into(),
        origin_topic: "T".into(),
        read_topic: "T".into(),
        queue_id: 0,
        offset: 1,
        epoch_ms: epoch,
    };
    let mut revived = record(0);
    revived.message.topic = pop_retry_topic("g", "T").as_str().into();
    revived.message.properties.insert(properties::POP_REVIVE_OF, mark.value());
    let payload = encode_messages(&[revived]).unwrap();
    assert!(
        matches!(store.apply(entry(3, 4096, tag::MESSAGES, payload)), r if matches!(ApplyOutcome::decode(&r), ApplyOutcome::Stored { .. }))
    );
    assert_eq!(store.metadata().offsets.query("T", "g", 0), Some(2));
    assert_eq!(store.metadata().pop.in_flight_count(), 1);
    let bytes = store.tables_now(3).encode().unwrap();
    let other = tempfile::tempdir().unwrap();
    let installed = MessageStore::open(settings(other.path()), 0).unwrap();
    installed.load_tables(Manifest::decode(&bytes).unwrap());
    assert_eq!(installed.metadata().pop, store.metadata().pop);
}

/// QUEUE_LOCKS: grants come back per queue, a bad name refuses the batch on every replica,
/// and a checkpoint and a snapshot manifest carry the table (a restarted or new replica has it).
#[test]
fn queue_locks_apply_answer_per_queue_and_survive_checkpoint_and_manifest() {
    use crate::state::rebalance_lock::LockedQueue;
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(settings(dir.path()), 0).unwrap();
    let q = |queue_id| LockedQueue { topic: "T".into(), broker_name: "b".into(), queue_id };
    let locks = |op, client: &str, stamp_ms, queues: Vec<LockedQueue>| BrokerCommand::QueueLocks {
        op,
        stamp_ms,
        group: "g".into(),
        client_id: client.into(),
        queues,
    };
    let apply = |store: &MessageStore, index: u64, command: BrokerCommand| {
        let (t, b) = command.encode().unwrap();
        ApplyOutcome::decode(&store.apply(entry(index, 0, t, b)))
    };
    assert_eq!(
        apply(&store, 1, locks(LockOp::Lock, "c1", 1_000, vec![q(0), q(1)])),
        ApplyOutcome::Granted(vec![true, true])
    );
    assert_eq!(
        apply(&store, 2, locks(LockOp::Lock, "c2", 2_000, vec![q(1), q(2)])),
        ApplyOutcome::Granted(vec![false, true])
    );
    assert_eq!(apply(&store, 3, locks(LockOp::Unlock, "c2", 2_500, vec![q(2)])), ApplyOutcome::Done);
    let bad = BrokerCommand::QueueLocks {
        op: LockOp::Lock,
        stamp_ms: 3_000,
        group: "g/../x".into(),
        client_id: "c3".into(),
        queues: vec![q(3)],
    };
    assert!(matches!(apply(&store, 4, bad), ApplyOutcome::Rejected(_)));
    let bad_topic = locks(LockOp::Lock, "c3", 3_000, vec![LockedQueue { topic: String::new(), ..q(3) }]);
    assert!(matches!(apply(&store, 5, bad_topic), ApplyOutcome::Rejected(_)));
    let no_client = locks(LockOp::Lock, "", 3_000, vec![q(3)]);
    assert!(matches!(apply(&store, 6, no_client), ApplyOutcome::Rejected(_)));
    assert_eq!(store.metadata().locks.len(), 2);

    let at = log_id(1, 6);
    let data = store.checkpoint(at).unwrap().expect("the store keeps checkpoints");
    let restarted = MessageStore::open(settings(dir.path()), 0).unwrap();
    restarted.restore_checkpoint(data, at).unwrap();
    assert_eq!(restarted.metadata().locks, store.metadata().locks);
    assert_eq!(restarted.metadata().locks.clock_ms(), 2_500);
    // The restarted replica answers from the table: c1 still holds queue 1.
    assert_eq!(apply(&restarted, 7, locks(LockOp::Lock, "c2", 3_000, vec![q(1)])), ApplyOutcome::Granted(vec![false]));

    let manifest = store.tables_now(6);
    assert_eq!(manifest.locks.len(), 2);
    let bytes = manifest.encode().unwrap();
    let other = tempfile::tempdir().unwrap();
    let installed = MessageStore::open(settings(other.path()), 0).unwrap();
    installed.load_tables(Manifest::decode(&bytes).unwrap());
    assert_eq!(installed.metadata().locks, store.metadata().locks);
}

/// A checkpoint restores the tables as of its applied index and is refused when a queue's
/// files end short of what it counted (here: the topic deleted after it), leaving the
/// state as it was so the replica re-applies from further back instead.
#[test]
fn checkpoint_restores_tables_and_is_refused_for_a_queue_that_ends_short() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(settings(dir.path()), 0).unwrap();
    let payload = encode_messages(&[record(0), record(1)]).unwrap();
    store.apply(entry(1, 48, tag::MESSAGES, payload));
    let commit = |offset| {
        BrokerCommand::ConsumerOffsets(vec![OffsetCommit { topic: "T".into(), group: "g".into(), queue_id: 0, offset }])
            .encode()
            .unwrap()
    };
    let (t, b) = commit(1);
    store.apply(entry(2, 4096, t, b));
    let at = log_id(1, 2);
    let data = store.checkpoint(at).unwrap().expect("the store keeps checkpoints");
    store.sync().unwrap();
    drop(store);

    let restarted = MessageStore::open(settings(dir.path()), 8192).unwrap();
    restarted.restore_checkpoint(data.clone(), at).unwrap();
    assert_eq!(restarted.metadata().offsets.query("T", "g", 0), Some(1));
    assert_eq!(*restarted.applied().borrow(), AppliedPosition { term: 1, index: 2 });
    // Metadata entries the checkpoint covers change nothing again; later ones apply.
    let (t, b) = commit(2);
    restarted.apply(entry(3, 8192, t, b));
    assert_eq!(restarted.metadata().offsets.query("T", "g", 0), Some(2));
    let (t, b) = BrokerCommand::TopicDelete { proposed_at_ms: 1, topic: "T".into() }.encode().unwrap();
    restarted.apply(entry(4, 8300, t, b));
    drop(restarted);

    let after_delete = MessageStore::open(settings(dir.path()), 8400).unwrap();
    let refused = after_delete.restore_checkpoint(data, at).unwrap_err();
    assert!(refused.to_string().contains("ends at 0"), "{refused}");
    assert_eq!(after_delete.metadata().offsets.query("T", "g", 0), None, "a refused checkpoint changed the tables");
    assert_eq!(*after_delete.applied().borrow(), AppliedPosition::default());
}

#[test]
fn apply_builds_queues_wakes_pulls_and_replays_idempotently() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(settings(dir.path()), 0).unwrap();
    let waiter = store.suspend_pull("T", 0, 0, MessageFilter::all(), u64::MAX).unwrap();
    let (_, mut rx) = waiter.expect("nothing arrived yet");
    let payload = encode_messages(&[record(0), record(1)]).unwrap();
    let e = entry(1, 48, tag::MESSAGES, payload.clone());
    assert_eq!(ApplyOutcome::decode(&store.apply(e.clone())), ApplyOutcome::Stored { payload_pos: 48 });
    assert!(rx.try_recv().is_ok(), "the suspended pull was woken");
    assert_eq!(store.queue_offsets("T", 0), (0, 2));
    assert_eq!(*store.applied().borrow(), AppliedPosition { term: 1, index: 1 });
    // Re-apply (restart) is accepted and changes nothing; a wrong offset is rejected.
    assert_eq!(ApplyOutcome::decode(&store.apply(e)), ApplyOutcome::Stored { payload_pos: 48 });
    let bad = entry(2, 4096, tag::MESSAGES, encode_messages(&[record(5)]).unwrap());
    assert!(matches!(ApplyOutcome::decode(&store.apply(bad)), ApplyOutcome::Rejected(_)));
    assert_eq!(store.queue_offsets("T", 0), (0, 2));
    // Already arrived: no suspension.
    assert!(store.suspend_pull("T", 0, 1, MessageFilter::all(), u64::MAX).unwrap().is_none());
    // Metadata commands.
    let (t, b) = BrokerCommand::ConsumerOffsets(vec![OffsetCommit {
        topic: "T".into(),
        group: "g".into(),
        queue_id: 0,
        offset: 2,
    }])
    .encode()
    .unwrap();
    assert_eq!(ApplyOutcome::decode(&store.apply(entry(3, 8192, t, b))), ApplyOutcome::Done);
    assert_eq!(store.metadata().offsets.query("T", "g", 0), Some(2));
    let progress = |offset| BrokerCommand::DelayProgress(vec![DelayProgress { queue_id: 1, offset }]);
    let (t, b) = progress(4).encode().unwrap();
    assert_eq!(ApplyOutcome::decode(&store.apply(entry(5, 8300, t, b))), ApplyOutcome::Done);
    let (t, b) = progress(3).encode().unwrap();
    store.apply(entry(6, 8400, t, b));
    assert_eq!(store.metadata().delay_offsets.get(1), 4, "a level never moves back");
    let ids = |members: Vec<u64>, new_id| BrokerCommand::NodeIdsUsed { members, new_id }.encode().unwrap();
    let (t, b) = ids(vec![1, 2, 3], Some(4));
    assert_eq!(ApplyOutcome::decode(&store.apply(entry(7, 8500, t, b))), ApplyOutcome::Done);
    let (t, b) = ids(vec![1, 2, 4], Some(3));
    assert!(matches!(ApplyOutcome::decode(&store.apply(entry(8, 8600, t, b))), ApplyOutcome::Rejected(_)));
    let (t, b) = ids(vec![2, 4], Some(1));
    assert!(matches!(ApplyOutcome::decode(&store.apply(entry(9, 8700, t, b))), ApplyOutcome::Rejected(_)));
    assert_eq!(store.metadata().used_node_ids, BTreeSet::from([1, 2, 3, 4]));
    // Ids are recorded up to what a snapshot holds, and refused alike past it.
    let (t, b) = ids((5..=RAFT_NODE_IDS_MAX_COUNT as u64).collect(), None);
    assert_eq!(ApplyOutcome::decode(&store.apply(entry(10, 8800, t, b))), ApplyOutcome::Done);
    let (t, b) = ids(vec![1, 2, 3], Some(RAFT_NODE_IDS_MAX_COUNT as u64 + 1));
    assert!(matches!(ApplyOutcome::decode(&store.apply(entry(11, 8900, t, b))), ApplyOutcome::Rejected(_)));
    assert_eq!(store.metadata().used_node_ids.len(), RAFT_NODE_IDS_MAX_COUNT);
    let (t, b) = BrokerCommand::TopicDelete { proposed_at_ms: 1, topic: "T".into() }.encode().unwrap();
    store.apply(entry(4, 9000, t, b));
    assert_eq!(store.queue_offsets("T", 0), (0, 0));
    assert_eq!(store.topic_generation(), 1);
    assert!(store.failure().is_none());
}

#[test]
fn recovery_truncates_units_beyond_the_log_end() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = MessageStore::open(settings(dir.path()), 0).unwrap();
        let payload = encode_messages(&[record(0), record(1)]).unwrap();
        store.apply(entry(1, 48, tag::MESSAGES, payload));
        store.flush();
    }
    let second_record_at = {
        let store = MessageStore::open(settings(dir.path()), u64::MAX >> 1).unwrap();
        assert_eq!(store.queue_offsets("T", 0), (0, 2));
        store.consume_queues().get("T", 0).unwrap().unit_at(1).unwrap().phy_offset
    };
    let store = MessageStore::open(settings(dir.path()), second_record_at as u64).unwrap();
    assert_eq!(store.queue_offsets("T", 0), (0, 1));
}

/// The entries of [`manifest_install_then_replay_converges_on_the_builders_state`]: index → entry.
fn retention_log() -> Vec<CommittedEntry> {
    use raftmq_common::protocol::body::subscription_group::SubscriptionGroupConfig;
    use raftmq_common::protocol::body::topic::TopicConfig;
    let cmd = |index: u64, pos: u64, c: BrokerCommand| {
        let (t, b) = c.encode().unwrap();
        entry(index, pos, t, b)
    };
    let msgs = |index: u64, pos: u64, offsets: &[i64]| {
        let records: Vec<MessageExt> = offsets.iter().map(|o| record(*o)).collect();
        entry(index, pos, tag::MESSAGES, encode_messages(&records).unwrap())
    };
    let offset = |o: i64| {
        BrokerCommand::ConsumerOffsets(vec![OffsetCommit {
            topic: "T".into(),
            group: "g".into(),
            queue_id: 0,
            offset: o,
        }])
    };
    vec![
        cmd(1, 48, BrokerCommand::TopicUpsert { proposed_at_ms: 1, config: TopicConfig::new("T") }),
        msgs(2, 1_048, &[0, 1]),
        cmd(3, 2_048, offset(1)),
        msgs(4, 4_096, &[2]),
        msgs(5, 8_192, &[3]), // P: the log up to here is purged; next_pos 12_288
        cmd(6, 12_336, BrokerCommand::TopicUpsert { proposed_at_ms: 6, config: TopicConfig::new("U") }),
        msgs(7, 16_384, &[4]),
        cmd(8, 20_480, offset(3)),
        cmd(9, 20_600, BrokerCommand::DelayProgress(vec![DelayProgress { queue_id: 0, offset: 2 }])),
        cmd(10, 20_700, BrokerCommand::NodeIdsUsed { members: vec![1, 2, 3], new_id: Some(4) }),
        cmd(11, 20_800, BrokerCommand::TopicDelete { proposed_at_ms: 11, topic: "U".into() }),
        cmd(12, 20_900, BrokerCommand::RetentionPurge { index: 5, term: 1, next_pos: 12_288 }),
        cmd(
            13,
            21_000,
            BrokerCommand::SubscriptionGroupUpsert { proposed_at_ms: 13, config: SubscriptionGroupConfig::new("g2") },
        ),
        // Applied after the manifest was built, on both.
        cmd(14, 24_576, BrokerCommand::TopicUpsert { proposed_at_ms: 14, config: TopicConfig::new("V") }),
        msgs(15, 28_672, &[5]),
        cmd(16, 32_768, offset(5)),
    ]
}

fn assert_same_state(a: &MessageStore, b: &MessageStore, what: &str) {
    let (ma, mb) = (a.metadata(), b.metadata());
    assert_eq!(ma.topics, mb.topics, "{what}: topics and their DataVersion");
    assert_eq!(ma.groups, mb.groups, "{what}: groups and their DataVersion");
    assert_eq!(ma.offsets, mb.offsets, "{what}: consumer offsets");
    assert_eq!(ma.delay_offsets, mb.delay_offsets, "{what}: delay progress");
    assert_eq!(ma.used_node_ids, mb.used_node_ids, "{what}: used node ids");
    assert_eq!(a.queue_offsets("T", 0), b.queue_offsets("T", 0), "{what}: queue T:0");
    let (qa, qb) = (a.consume_queues(), b.consume_queues());
    let (min, max) = b.queue_offsets("T", 0);
    for o in min..max {
        assert_eq!(qa.get("T", 0).unwrap().unit_at(o), qb.get("T", 0).unwrap().unit_at(o), "{what}: unit {o}");
    }
}

#[test]
fn manifest_install_then_replay_converges_on_the_builders_state() {
    let log = retention_log();
    let p = log_id(1, 5);
    let built_at = 13;
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let leader = MessageStore::open(settings(dirs[0].path()), 0).unwrap();
    assert_eq!(leader.build_manifest(log_id(1, 0)).unwrap(), None, "no boundary yet");
    for e in &log[..built_at] {
        assert!(!matches!(ApplyOutcome::decode(&leader.apply(e.clone())), ApplyOutcome::Rejected(_)));
    }
    let boundary = RetentionBoundary { index: 5, term: 1, next_pos: 12_288 };
    assert_eq!(leader.retention_boundary(), Some(boundary));
    let (at, manifest) = leader.build_manifest(log_id(1, 13)).unwrap().expect("a boundary is set");
    assert_eq!(at, p);
    let decoded = Manifest::decode(&manifest).unwrap();
    assert_eq!((decoded.meta_index, decoded.queues.len()), (13, 1), "U was deleted before the build");
    assert_eq!(decoded.queues[0].next_offset, 4, "units 0..=3 lie at or below P");

    // A follower behind P installs the manifest, then receives P+1.. (metadata entries up to 13
    // are in the manifest already: re-applying them must not bump a DataVersion again).
    let follower = MessageStore::open(settings(dirs[1].path()), 0).unwrap();
    let stale = encode_messages(&[record(0)]).unwrap();
    follower.apply(entry(1, 48, tag::MESSAGES, stale));
    follower.install_manifest(manifest.clone(), p).unwrap();
    assert_eq!(follower.queue_offsets("T", 0), (4, 4), "stale units wiped, queue starts at P");
    assert_eq!(follower.index().file_count(), 0);
    assert!(follower.install_manifest(manifest.clone(), log_id(2, 5)).is_err(), "wrong boundary term");
    for e in &log[5..] {
        follower.apply(e.clone());
    }
    for e in &log[built_at..] {
        leader.apply(e.clone());
    }
    assert_eq!(follower.retention_boundary(), Some(boundary));
    // Building the manifest raised the leader's minimum; the files go once the log is purged.
    assert_eq!(leader.queue_offsets("T", 0), (4, 6));
    leader.delete_files_below(boundary.next_pos);
    assert_same_state(&leader, &follower, "installed");
    assert!(follower.metadata().topics.get("U").is_none() && follower.metadata().topics.get("V").is_some());

    // A restart on the leader's files with its snapshot converges too.
    leader.flush();
    drop(leader);
    let restarted = MessageStore::open(settings(dirs[0].path()), u64::MAX >> 1).unwrap();
    restarted.restore_snapshot(&manifest, p).unwrap();
    assert_eq!(restarted.queue_offsets("T", 0), (4, 6), "minimum corrected after reopening the files");
    for e in &log[5..] {
        restarted.apply(e.clone());
    }
    assert_same_state(&restarted, &follower, "restarted");
    assert!(restarted.restore_snapshot(b"garbage", p).is_err());
}

#[test]
fn replies_round_trip_and_a_local_failure_stays_apart_from_a_rejection() {
    for outcome in [
        ApplyOutcome::Stored { payload_pos: 48 },
        ApplyOutcome::Done,
        ApplyOutcome::Granted(vec![true, false, true]),
        ApplyOutcome::Granted(Vec::new()),
        ApplyOutcome::Rejected("deterministic".into()),
        ApplyOutcome::LocalFailure("ConsumeQueue write failed".into()),
    ] {
        assert_eq!(ApplyOutcome::decode(&outcome.encode()), outcome);
    }
}

#[test]
fn disk_full_flag() {
    let dir = tempfile::tempdir().unwrap();
    let store = MessageStore::open(settings(dir.path()), 0).unwrap();
    assert_eq!(store.disk_full(), None);
    assert_eq!(store.set_disk_full(Some(0.95)), None);
    assert_eq!(store.disk_full(), Some(0.95));
    assert_eq!(store.set_disk_full(None), Some(0.95));
}

#[test]
fn replies_round_trip() {
    for o in [ApplyOutcome::Stored { payload_pos: 7 }, ApplyOutcome::Done, ApplyOutcome::Rejected("x".into())] {
        assert_eq!(ApplyOutcome::decode(&o.encode()), o);
    }
    assert!(matches!(ApplyOutcome::decode(&AppReply::default()), ApplyOutcome::Rejected(_)));
}
