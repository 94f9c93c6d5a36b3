//! End-to-end retention on a 3-replica group over real sockets, with 1 MiB CommitLog segments,
//! small ConsumeQueue and index files, a 1 s reserved time, and the disk usage read from a file
//! the test controls (`diskUsedRatioFile`), so the machine's real disk usage plays no part.
//!
//! - t60: with one follower stopped, enough is sent to seal several segments; raising the disk
//!   usage past `diskMaxUsedSpaceRatio` (outside the `deleteWhen` hour) makes the leader purge
//!   through Raft: old segments, ConsumeQueue files and IndexFiles disappear on both live replicas,
//!   a pull below the new minimum gets PULL_OFFSET_MOVED with it, every retained message is still
//!   there, and the stopped follower, restarted, installs the snapshot and then holds exactly the
//!   leader's retained messages.
//! - t62: `deleteExpiredCommitLog` purges expired segments outside the `deleteWhen` hours without
//!   disk pressure; `cleanExpiredCQ` answers, and every retained message is still readable.
//! - t61: at `diskSpaceWarningLevelRatio` sends are refused with SERVICE_NOT_AVAILABLE and
//!   RocketMQ's "disk is full" remark, and nothing is stored; below it sends resume.

use crate::harness;

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use anyhow::ensure;
use harness::group::Group;
use harness::group::pull;
use harness::group::pull_settled;
use raftmq_broker::Broker;
use raftmq_broker::BrokerConfig;
use raftmq_broker::services::retention::local_hour_of_day;
use raftmq_client::Admin;
use raftmq_common::message::MessageExt;
use raftmq_common::message::msg_id::OffsetMsgId;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::header::send::SendMessageRequestHeaderV2;
use raftmq_common::protocol::header::send::SendMessageResponseHeader;
use raftmq_common::remoting::RemotingClient;

const WAIT: Duration = Duration::from_secs(60);
const SEGMENT_BYTES: u64 = 1 << 20;
const QUEUES: i32 = 2;

/// The store settings every replica of these tests runs with.
fn small_store(c: &mut BrokerConfig, ratio_file: &Path, interval_ms: u64) {
    c.mapped_file_size_commit_log = SEGMENT_BYTES;
    // A segment must hold two maximal messages.
    c.max_message_size = 256 * 1024;
    c.mapped_file_size_consume_queue = 20 * 40;
    // 100 usable entries per IndexFile: KEYS + UNIQ_KEY = 2 per message → 50 messages a file.
    c.max_hash_slot_num = 64;
    c.max_index_num = 101;
    // Never the deleteWhen hour during the test: only disk pressure triggers a purge.
    c.delete_when = format!("{:02}", (local_hour_of_day(now_ms()) + 12) % 24);
    c.file_reserved_time_ms = Some(1_000);
    c.clean_resource_interval = Duration::from_millis(interval_ms);
    c.disk_max_used_space_ratio = 75;
    c.disk_space_clean_forcibly_ratio = 85;
    c.clean_file_forcibly_enable = true;
    c.disk_space_warning_level_ratio = 90;
    c.disk_used_ratio_file = Some(ratio_file.to_path_buf());
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

async fn create_topic(group: &Group, leader: u64, topic: &str) -> Result<()> {
    let admin = Admin::new(&group.namesrv_addr)?;
    let config = TopicConfig { read_queue_nums: QUEUES, write_queue_nums: QUEUES, ..TopicConfig::new(topic) };
    admin.create_topic(&group.addr(leader), &config).await?;
    admin.shutdown().await;
    Ok(())
}

fn send_request(topic: &str, queue_id: i32, i: usize, body: Vec<u8>) -> RemotingCommand {
    let body = bytes::Bytes::from(body);
    let header = SendMessageRequestHeaderV2 {
        a: "t60_producer".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: 4,
        e: queue_id,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: Some(format!("KEYS\u{1}key-{i}\u{2}UNIQ_KEY\u{1}UNIQ{i:08}\u{2}")),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: None,
    };
    RemotingCommand::request_with_header(RequestCode::SendMessageV2, &header).with_body(body)
}

fn body(i: usize) -> Vec<u8> {
    let mut b = format!("message-{i}:").into_bytes();
    b.resize(8 * 1024, b'a' + (i % 26) as u8);
    b
}

/// Numbered files in `dir` (CommitLog segments, ConsumeQueue files, IndexFiles), sorted.
fn files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().into_string().ok())
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .collect()
        })
        .unwrap_or_default()
}

/// What a replica's store directory holds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct StoreFiles {
    segments: BTreeSet<String>,
    cq: BTreeMap<i32, BTreeSet<String>>,
    index: BTreeSet<String>,
}

fn store_files(root: &Path, topic: &str) -> StoreFiles {
    StoreFiles {
        segments: files(&root.join("commitlog")),
        cq: (0..QUEUES).map(|q| (q, files(&root.join("consumequeue").join(topic).join(q.to_string())))).collect(),
        index: files(&root.join("index")),
    }
}

async fn wait_for(what: &str, mut done: impl FnMut() -> bool) -> Result<()> {
    let deadline = Instant::now() + WAIT;
    while !done() {
        ensure!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Every message of a queue from `from` to its end, through PULL_MESSAGE at `addr`.
async fn read_queue(
    client: &RemotingClient,
    addr: &str,
    topic: &str,
    queue_id: i32,
    from: i64,
) -> Result<Vec<MessageExt>> {
    let mut out = Vec::new();
    let mut offset = from;
    loop {
        let p = pull(client, addr, "t60_reader", topic, queue_id, offset, 32, None).await?;
        match p.code {
            ResponseCode::Success => {
                out.extend(p.messages);
                offset = p.header.context("header")?.next_begin_offset;
            }
            ResponseCode::PullNotFound => return Ok(out),
            other => bail!("pull {topic}:{queue_id}@{offset} from {addr} answered {other:?}: {:?}", p.remark),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_through_raft_then_a_lagging_follower_installs_the_snapshot() -> Result<()> {
    const TOPIC: &str = "T60_RETENTION";
    const MESSAGES: usize = 640;
    let ratio_dir = tempfile::tempdir()?;
    let ratio_file = ratio_dir.path().join("disk-used-ratio");
    std::fs::write(&ratio_file, "0.10")?;
    let mut group = Group::start_with(3, |c| small_store(c, &ratio_file, 200)).await?;
    let leader = group.wait_leader(WAIT).await?;
    create_topic(&group, leader, TOPIC).await?;
    let lagging = *group.brokers.keys().rev().find(|id| **id != leader).context("a follower")?;
    let live = *group.brokers.keys().find(|id| **id != leader && **id != lagging).context("another follower")?;
    let roots: BTreeMap<u64, PathBuf> =
        group.configs.iter().map(|(id, c)| (*id, c.store_path_root_dir.clone())).collect();
    let root = |id: u64| -> PathBuf { roots[&id].clone() };
    eprintln!(
        "leader {leader} at {}, live follower {live}, lagging follower {lagging} at {}",
        group.addr(leader),
        group.addr(lagging)
    );
    group.stop(lagging).await;

    // Send enough to seal several segments, one message per entry.
    let client = RemotingClient::new();
    let leader_addr = group.addr(leader);
    let mut sent: BTreeMap<(i32, i64), (usize, String)> = BTreeMap::new();
    for i in 0..MESSAGES {
        let queue_id = (i % QUEUES as usize) as i32;
        let response =
            client.invoke(&leader_addr, send_request(TOPIC, queue_id, i, body(i)), Duration::from_secs(10)).await?;
        ensure!(response.response_code() == ResponseCode::Success, "send {i}: {:?}", response.remark);
        let h = response.decode_header::<SendMessageResponseHeader>()?;
        sent.insert((queue_id, h.queue_offset), (i, h.msg_id));
    }
    let store = group.brokers[&leader].store().clone();
    wait_for("the live follower to apply every message", || {
        (0..QUEUES).all(|q| group.brokers[&live].store().queue_offsets(TOPIC, q) == store.queue_offsets(TOPIC, q))
    })
    .await?;
    let before = store_files(&root(leader), TOPIC);
    eprintln!(
        "before: {} segments, CQ files {:?}, {} index files",
        before.segments.len(),
        before.cq.values().map(BTreeSet::len).collect::<Vec<_>>(),
        before.index.len()
    );
    ensure!(before.segments.len() >= 5, "expected several segments: {before:?}");
    ensure!(before.cq.values().all(|f| f.len() >= 4), "expected several ConsumeQueue files: {before:?}");
    ensure!(before.index.len() >= 6, "expected several index files: {before:?}");
    assert_eq!(store.retention_boundary(), None, "not the deleteWhen hour and no disk pressure: nothing purged yet");

    // Disk usage past diskMaxUsedSpaceRatio (below the forcible ratio): expired segments go.
    std::fs::write(&ratio_file, "0.80")?;
    let active = before.segments.last().cloned().context("a segment")?;
    for id in [leader, live] {
        wait_for(&format!("replica {id} to purge every sealed segment"), || {
            let segments = files(&root(id).join("commitlog"));
            let boundary = group.brokers[&id].store().retention_boundary();
            let purged = group.brokers[&id].raft().status().purged;
            let Some(b) = boundary.filter(|b| purged.is_some_and(|p| p.index >= b.index)) else { return false };
            // ... and the ConsumeQueue and index files below it are gone (done after the purge).
            let now = store_files(&root(id), TOPIC);
            segments.first().is_some_and(|s| *s >= active)
                && before.cq.iter().all(|(q, old)| old.first().is_some_and(|f| !now.cq[q].contains(f)))
                && before.index.first().is_some_and(|f| !now.index.contains(f))
                && (0..QUEUES).all(|q| {
                    let store = group.brokers[&id].store();
                    let (min, _) = store.queue_offsets(TOPIC, q);
                    let unit = store.consume_queues().get(TOPIC, q).and_then(|cq| cq.unit_at(min));
                    min > 0 && unit.is_none_or(|u| u.phy_offset >= b.next_pos as i64)
                })
        })
        .await?;
    }
    let boundary = store.retention_boundary().context("boundary")?;
    eprintln!("purged up to entry {} (next position {})", boundary.index, boundary.next_pos);
    for id in [leader, live] {
        let after = store_files(&root(id), TOPIC);
        for s in &before.segments {
            if *s < active {
                assert!(!after.segments.contains(s), "replica {id} kept segment {s}");
            }
        }
        for (q, old) in &before.cq {
            let first = old.first().context("a CQ file")?;
            assert!(!after.cq[q].contains(first), "replica {id} kept ConsumeQueue {q} file {first}: {after:?}");
            assert!(after.cq[q].len() < old.len(), "replica {id}: ConsumeQueue {q} files did not shrink");
        }
        let first_index = before.index.first().context("an index file")?;
        assert!(!after.index.contains(first_index), "replica {id} kept IndexFile {first_index}: {after:?}");
        assert!(after.index.len() < before.index.len(), "replica {id}: IndexFiles did not shrink");
        assert_eq!(group.brokers[&id].store().retention_boundary(), Some(boundary), "replica {id} boundary");
    }

    // Consumers before the purge point are moved to the new minimum; nothing retained is lost.
    let mut retained: BTreeMap<i32, Vec<MessageExt>> = BTreeMap::new();
    for q in 0..QUEUES {
        let (min, max) = store.queue_offsets(TOPIC, q);
        let p = pull_settled(&client, &leader_addr, "t60_group", TOPIC, q, 0, 32, WAIT).await?;
        assert_eq!(p.code, ResponseCode::PullOffsetMoved, "queue {q}: {:?}", p.remark);
        let h = p.header.context("header")?;
        assert_eq!((h.next_begin_offset, h.min_offset), (min as i64, min as i64), "queue {q}: moved to the minimum");
        let messages = read_queue(&client, &leader_addr, TOPIC, q, min as i64).await?;
        assert_eq!(messages.len() as u64, max - min, "queue {q}: every retained message is readable");
        for m in &messages {
            let (i, msg_id) = &sent[&(q, m.queue_offset)];
            let offset_msg_id = OffsetMsgId::new(m.store_host, m.commit_log_offset).to_string();
            assert_eq!(&offset_msg_id, msg_id, "queue {q} offset {}", m.queue_offset);
            assert_eq!(m.message.body.as_ref(), body(*i).as_slice());
            assert!(m.commit_log_offset >= boundary.next_pos as i64, "a purged message is still served");
        }
        // Every unit below the minimum pointed below the purge point: it was purged, not lost.
        let sent_in_queue = sent.keys().filter(|(sq, _)| *sq == q).count() as u64;
        assert_eq!(max, sent_in_queue);
        retained.insert(q, messages);
    }

    // The stopped follower comes back: the leader's log no longer holds what it lacks, so it
    // installs the snapshot, then catches up on the retained log.
    let restarted = Broker::start(group.configs[&lagging].clone()).await?;
    group.brokers.insert(lagging, restarted);
    wait_for("the lagging follower to install the snapshot and catch up", || {
        let b = &group.brokers[&lagging];
        b.raft().status().purged.is_some_and(|p| p.index >= boundary.index)
            && (0..QUEUES).all(|q| b.store().queue_offsets(TOPIC, q) == store.queue_offsets(TOPIC, q))
    })
    .await?;
    assert!(root(lagging).join("snapshot").exists(), "the installed snapshot is kept on disk");
    let after = store_files(&root(lagging), TOPIC);
    // It rebased its log at the boundary: the segment holding next_pos may exist (a blank pads its
    // tail before entry P+1, exactly as on the leader), nothing wholly below it.
    let wholly_below = |s: &String| s.parse::<u64>().is_ok_and(|base| base + SEGMENT_BYTES <= boundary.next_pos);
    assert!(!after.segments.iter().any(wholly_below), "a segment below the purge point: {after:?}");
    for q in 0..QUEUES {
        let (min, _) = store.queue_offsets(TOPIC, q);
        let from_follower = read_queue(&client, &group.addr(lagging), TOPIC, q, min as i64).await?;
        assert_eq!(from_follower.len(), retained[&q].len(), "queue {q} on the restarted follower");
        for (a, b) in retained[&q].iter().zip(&from_follower) {
            assert_eq!(
                (a.queue_offset, a.commit_log_offset, a.message.uniq_key(), &a.message.body),
                (b.queue_offset, b.commit_log_offset, b.message.uniq_key(), &b.message.body),
                "queue {q}: the follower's copy is the leader's"
            );
        }
    }
    client.close().await;
    group.shutdown().await;
    Ok(())
}

/// `mqadmin deleteExpiredCommitLog` outside the `deleteWhen` hours and without disk pressure: the
/// next retention rounds purge the expired sealed segments (the active one stays) and the
/// ConsumeQueue files below them go; `cleanExpiredCQ` then answers SUCCESS with nothing left below
/// the minimum, and every retained message is still there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_expired_commit_log_purges_outside_the_delete_hours() -> Result<()> {
    const TOPIC: &str = "T62_MANUAL";
    const MESSAGES: usize = 400;
    let ratio_dir = tempfile::tempdir()?;
    let ratio_file = ratio_dir.path().join("disk-used-ratio");
    std::fs::write(&ratio_file, "0.10")?;
    let group = Group::start_with(1, |c| small_store(c, &ratio_file, 100)).await?;
    let leader = group.wait_leader(WAIT).await?;
    create_topic(&group, leader, TOPIC).await?;
    let client = RemotingClient::new();
    let addr = group.addr(leader);
    for i in 0..MESSAGES {
        let queue_id = (i % QUEUES as usize) as i32;
        let r = client.invoke(&addr, send_request(TOPIC, queue_id, i, body(i)), Duration::from_secs(10)).await?;
        ensure!(r.response_code() == ResponseCode::Success, "send {i}: {:?}", r.remark);
    }
    let root = group.configs[&leader].store_path_root_dir.clone();
    let before = store_files(&root, TOPIC);
    ensure!(before.segments.len() >= 3, "expected several segments: {before:?}");
    let store = group.brokers[&leader].store().clone();
    ensure!(store.retention_boundary().is_none(), "not the deleteWhen hour and no disk pressure: nothing purged");

    let admin = Admin::new(&group.namesrv_addr)?;
    // QUERY_BROKER_OFFSET: the whole CommitLog before the purge, the retained part after it.
    let (min_before, max_before) = admin.broker_offset(&addr).await?;
    let applied_end = raftmq_broker::state::pull::CommitLogReader::max_offset(store.commit_log());
    ensure!(
        min_before == 0 && max_before > 0 && max_before <= applied_end,
        "queryBrokerOffset before the purge: ({min_before}, {max_before}), applied end {applied_end}"
    );
    admin.delete_expired_commit_log(&addr).await?;
    let active = before.segments.last().cloned().context("a segment")?;
    wait_for("the expired segments to be purged", || {
        let purged = group.brokers[&leader].raft().status().purged;
        let now = store_files(&root, TOPIC);
        store.retention_boundary().is_some_and(|b| purged.is_some_and(|p| p.index >= b.index))
            && now.segments.first().is_some_and(|s| *s >= active)
            && before.cq.iter().all(|(q, old)| old.first().is_some_and(|f| !now.cq[q].contains(f)))
    })
    .await?;
    admin.clean_expired_consume_queue(&addr).await?;
    let boundary = store.retention_boundary().context("boundary")?;
    let (min_after, max_after) = admin.broker_offset(&addr).await?;
    ensure!(
        min_after == boundary.next_pos as i64 && min_after > 0 && max_after >= max_before && min_after <= max_after,
        "queryBrokerOffset after the purge: ({min_after}, {max_after}), boundary {}",
        boundary.next_pos
    );
    for q in 0..QUEUES {
        let (min, max) = store.queue_offsets(TOPIC, q);
        let first = store.consume_queues().get(TOPIC, q).and_then(|cq| cq.unit_at(min)).context("a retained unit")?;
        ensure!(first.phy_offset >= boundary.next_pos as i64, "queue {q} starts below the CommitLog minimum");
        let retained = read_queue(&client, &addr, TOPIC, q, i64::try_from(min)?).await?;
        ensure!(
            retained.len() as u64 == max - min,
            "queue {q}: {} of {} retained messages read",
            retained.len(),
            max - min
        );
    }
    admin.shutdown().await;
    group.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_full_refuses_sends_until_space_is_freed() -> Result<()> {
    const TOPIC: &str = "T61_DISK_FULL";
    let ratio_dir = tempfile::tempdir()?;
    let ratio_file = ratio_dir.path().join("disk-used-ratio");
    std::fs::write(&ratio_file, "0.50")?;
    let group = Group::start_with(1, |c| small_store(c, &ratio_file, 50)).await?;
    let leader = group.wait_leader(WAIT).await?;
    create_topic(&group, leader, TOPIC).await?;
    let client = RemotingClient::new();
    let addr = group.addr(leader);
    let send = |i: usize| client.invoke(&addr, send_request(TOPIC, 0, i, body(i)), Duration::from_secs(10));
    assert_eq!(send(0).await?.response_code(), ResponseCode::Success);

    std::fs::write(&ratio_file, "0.93")?;
    let refused = {
        let deadline = Instant::now() + WAIT;
        loop {
            let r = send(1).await?;
            if r.response_code() != ResponseCode::Success {
                break r;
            }
            ensure!(Instant::now() < deadline, "sends never refused");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    assert_eq!(refused.response_code(), ResponseCode::ServiceNotAvailable);
    let remark = refused.remark.clone().unwrap_or_default();
    assert!(remark.contains("the broker's disk is full [CL:  0.93 CQ:  0.93 INDEX:  0.93]"), "{remark}");
    let max_when_full = group.brokers[&leader].store().queue_offsets(TOPIC, 0).1;
    for i in 2..5 {
        assert_eq!(send(i).await?.response_code(), ResponseCode::ServiceNotAvailable, "send {i} while full");
    }
    assert_eq!(group.brokers[&leader].store().queue_offsets(TOPIC, 0).1, max_when_full, "nothing stored while full");

    std::fs::write(&ratio_file, "0.70")?;
    let deadline = Instant::now() + WAIT;
    loop {
        let r = send(5).await?;
        if r.response_code() == ResponseCode::Success {
            break;
        }
        assert_eq!(r.response_code(), ResponseCode::ServiceNotAvailable);
        ensure!(Instant::now() < deadline, "sends never resumed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(send(6).await?.response_code(), ResponseCode::Success);
    client.close().await;
    group.shutdown().await;
    Ok(())
}
