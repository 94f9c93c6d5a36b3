//! Message queries on a 3-replica group: QUERY_MESSAGE by key and by UNIQ_KEY, VIEW_MESSAGE_BY_ID by
//! physical offset, SEARCH_OFFSET_BY_TIMESTAMP and GET_EARLIEST_MSG_STORETIME — on every replica,
//! after the leader is shut down (the new leader answers the same offsets with the same bytes, and
//! `queryMsgById` resolves ids naming the stopped host), and after a full restart (IndexFiles reopen,
//! nothing is indexed twice).

use crate::harness;

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::time::Duration;
use std::time::Instant;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use anyhow::ensure;
use bytes::Bytes;
use harness::group::Group;
use harness::group::RPC_TIMEOUT;
use harness::group::drain_queue;
use raftmq_broker::Broker;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::OffsetMsgId;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_all;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::TopicConfig;
use raftmq_common::protocol::header::offset::GetEarliestMsgStoretimeRequestHeader;
use raftmq_common::protocol::header::offset::GetEarliestMsgStoretimeResponseHeader;
use raftmq_common::protocol::header::offset::SearchOffsetRequestHeader;
use raftmq_common::protocol::header::offset::SearchOffsetResponseHeader;
use raftmq_common::protocol::header::query::QueryMessageRequestHeader;
use raftmq_common::protocol::header::query::QueryMessageResponseHeader;
use raftmq_common::protocol::header::query::ViewMessageRequestHeader;
use raftmq_common::remoting::RemotingClient;

const WAIT: Duration = Duration::from_secs(20);
const TOPIC: &str = "T50_QUERY";
const QUEUES: i32 = 2;
const SHARED_KEY: &str = "shared";

/// What a send stored.
#[derive(Debug, Clone)]
struct Sent {
    key: String,
    msg_id: String,
    offset_id: OffsetMsgId,
}

async fn send_keyed(group: &Group, from: usize, count: usize) -> Result<Vec<Sent>> {
    let producer = Producer::builder("t50_producer")
        .namesrv_addr(&group.namesrv_addr)
        .route_poll_interval(Duration::from_millis(200))
        .send_timeout(Duration::from_secs(3))
        .build()?;
    producer.start().await?;
    let mut sent = Vec::new();
    for i in from..from + count {
        let key = format!("order-{i}");
        let m = Message::new(TOPIC, format!("body-{i}")).with_tags("TagA").with_keys(format!("{key} {SHARED_KEY}"));
        let deadline = Instant::now() + WAIT;
        // Right after an election a send may be refused until routes catch up; retry until the deadline.
        let r = loop {
            match producer.send(m.clone()).await {
                Ok(r) => break r,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("send {i} retried: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => return Err(e.into()),
            }
        };
        sent.push(Sent { key, msg_id: r.msg_id, offset_id: r.offset_msg_id.parse()? });
    }
    producer.shutdown().await;
    Ok(sent)
}

async fn call(client: &RemotingClient, addr: &str, request: RemotingCommand) -> Result<RemotingCommand> {
    Ok(client.invoke(addr, request, RPC_TIMEOUT).await?)
}

async fn view_raw(client: &RemotingClient, addr: &str, offset: i64) -> Result<RemotingCommand> {
    let request =
        RemotingCommand::request_with_header(RequestCode::ViewMessageById, &ViewMessageRequestHeader { offset });
    call(client, addr, request).await
}

async fn query(
    client: &RemotingClient,
    addr: &str,
    key: &str,
    max_num: i32,
    unique: bool,
) -> Result<(ResponseCode, Vec<MessageExt>)> {
    let header = QueryMessageRequestHeader {
        topic: TOPIC.into(),
        key: key.into(),
        max_num,
        begin_timestamp: 0,
        end_timestamp: i64::MAX,
        unique_key_query: unique.then_some(true),
    };
    let response = call(client, addr, RemotingCommand::request_with_header(RequestCode::QueryMessage, &header)).await?;
    let code = response.response_code();
    // Both answers carry the index position.
    let h = response.decode_header::<QueryMessageResponseHeader>()?;
    ensure!(h.index_last_update_timestamp > 0 && h.index_last_update_phyoffset > 0, "{h:?}");
    let msgs =
        if code == ResponseCode::Success { decode_all(&response.body, DecodeOptions::verify_crc())? } else { vec![] };
    Ok((code, msgs))
}

async fn search_offset(client: &RemotingClient, addr: &str, queue_id: i32, timestamp: i64) -> Result<i64> {
    let header = SearchOffsetRequestHeader { topic: TOPIC.into(), queue_id, timestamp, bname: None };
    let r =
        call(client, addr, RemotingCommand::request_with_header(RequestCode::SearchOffsetByTimestamp, &header)).await?;
    ensure!(r.response_code() == ResponseCode::Success, "{:?}", r.remark);
    Ok(r.decode_header::<SearchOffsetResponseHeader>()?.offset)
}

async fn earliest(client: &RemotingClient, addr: &str, queue_id: i32) -> Result<i64> {
    let header = GetEarliestMsgStoretimeRequestHeader { topic: TOPIC.into(), queue_id, bname: None };
    let r =
        call(client, addr, RemotingCommand::request_with_header(RequestCode::GetEarliestMsgStoretime, &header)).await?;
    ensure!(r.response_code() == ResponseCode::Success, "{:?}", r.remark);
    Ok(r.decode_header::<GetEarliestMsgStoretimeResponseHeader>()?.timestamp)
}

/// Every query kind against `addr`, for the messages in `sent` (all of them, in send order).
async fn check_queries(client: &RemotingClient, addr: &str, sent: &[Sent], bytes: &BTreeMap<i64, Bytes>) -> Result<()> {
    for s in sent {
        let offset = s.offset_id.commit_log_offset;
        let r = view_raw(client, addr, offset).await?;
        ensure!(r.response_code() == ResponseCode::Success, "{addr} view {offset}: {:?}", r.remark);
        ensure!(r.body == bytes[&offset], "{addr} answers other bytes at {offset}");

        let (code, by_key) = query(client, addr, &s.key, 64, false).await?;
        ensure!(code == ResponseCode::Success && by_key.len() == 1, "{addr} key {}: {code:?} {}", s.key, by_key.len());
        ensure!(by_key[0].msg_id() == s.msg_id && by_key[0].commit_log_offset == offset);

        let (code, by_id) = query(client, addr, &s.msg_id, 64, true).await?;
        ensure!(code == ResponseCode::Success && by_id.len() == 1, "{addr} uniq {}: {code:?}", s.msg_id);
        ensure!(by_id[0].commit_log_offset == offset);
    }
    // The shared key: every message once (newest first), nothing indexed twice.
    let (code, shared) = query(client, addr, SHARED_KEY, 2_048, false).await?;
    ensure!(code == ResponseCode::Success, "{code:?}");
    let offsets: Vec<i64> = shared.iter().map(|m| m.commit_log_offset).collect();
    let mut want: Vec<i64> = sent.iter().map(|s| s.offset_id.commit_log_offset).collect();
    want.sort_unstable_by(|a, b| b.cmp(a));
    ensure!(offsets == want, "{addr}: shared key answered {offsets:?}, want {want:?}");
    let (code, limited) = query(client, addr, SHARED_KEY, 3, false).await?;
    ensure!(code == ResponseCode::Success && limited.len() == 3, "maxNum is honoured");
    let (code, none) = query(client, addr, "no-such-key", 64, false).await?;
    ensure!(code == ResponseCode::QueryNotFound && none.is_empty(), "{code:?}");

    // Offsets that are not record starts, or beyond the committed data: SYSTEM_ERROR, never bytes.
    let first = sent[0].offset_id.commit_log_offset;
    for bad in [first + 1, first - 1, i64::MAX / 2, -5] {
        let r = view_raw(client, addr, bad).await?;
        ensure!(r.response_code() == ResponseCode::SystemError && r.body.is_empty(), "{addr} view {bad}");
        ensure!(r.remark.as_deref().is_some_and(|m| m.contains("can not find message")), "{:?}", r.remark);
    }

    // Offsets by time: the lower bound over each queue's store times.
    for q in 0..QUEUES {
        let msgs = drain_queue(client, addr, TOPIC, q).await?;
        let times: Vec<i64> = msgs.iter().map(|m| m.store_timestamp).collect();
        ensure!(!times.is_empty(), "queue {q} is empty");
        ensure!(earliest(client, addr, q).await? == times[0]);
        let mut probes: BTreeSet<i64> = [0, i64::MAX].into();
        for &t in &times {
            probes.extend([t - 1, t, t + 1]);
        }
        for ts in probes {
            let want = times.iter().position(|&t| t >= ts).unwrap_or(times.len()) as i64;
            let got = search_offset(client, addr, q, ts).await?;
            ensure!(got == want, "{addr} queue {q} ts {ts}: {got} != {want}");
        }
    }
    ensure!(earliest(client, addr, 99).await? == -1);
    Ok(())
}

/// Retries `check_queries` until it passes (a follower applies a little behind the leader).
async fn eventually_check(
    client: &RemotingClient,
    addr: &str,
    sent: &[Sent],
    bytes: &BTreeMap<i64, Bytes>,
) -> Result<()> {
    let deadline = Instant::now() + WAIT;
    loop {
        match check_queries(client, addr, sent, bytes).await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() < deadline => {
                eprintln!("{addr} not there yet: {e:#}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => bail!("{addr}: {e:#}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_by_key_id_and_time_survive_failover_and_restart() -> Result<()> {
    let mut group = Group::start(3).await?;
    let first_leader = group.wait_leader(WAIT).await?;
    let admin = Admin::new(&group.namesrv_addr)?;
    let config = TopicConfig { read_queue_nums: QUEUES, write_queue_nums: QUEUES, ..TopicConfig::new(TOPIC) };
    admin.create_topic(&group.addr(first_leader), &config).await?;
    let client = RemotingClient::new();

    let mut sent = send_keyed(&group, 0, 12).await?;
    let mut bytes = BTreeMap::new();
    for s in &sent {
        let r = view_raw(&client, &group.addr(first_leader), s.offset_id.commit_log_offset).await?;
        ensure!(r.response_code() == ResponseCode::Success, "{:?}", r.remark);
        bytes.insert(s.offset_id.commit_log_offset, r.body.clone());
    }
    for id in group.configs.keys().copied().collect::<Vec<_>>() {
        eventually_check(&client, &group.addr(id), &sent, &bytes).await?;
    }

    // Failover: the stopped leader's offsetMsgIds resolve through the new leader (same offsets, same bytes).
    group.stop(first_leader).await;
    let second_leader = group.wait_leader(WAIT).await?;
    ensure!(second_leader != first_leader);
    for id in group.brokers.keys().copied().collect::<Vec<_>>() {
        eventually_check(&client, &group.addr(id), &sent, &bytes).await?;
    }
    for s in &sent {
        ensure!(s.offset_id.store_host.to_string() == group.addr(first_leader), "stored by the first leader");
        let m =
            admin.view_message_by_id(&s.offset_id).await.with_context(|| format!("queryMsgById {}", s.offset_id))?;
        ensure!(m.msg_id() == s.msg_id && m.commit_log_offset == s.offset_id.commit_log_offset);
    }
    let id = sent[0].offset_id.to_string();
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_raftmq"))
        .args(["admin", "queryMsgById", "-n", &group.namesrv_addr, "-i", &id])
        .env("RUST_LOG", "warn")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(WAIT, run).await??;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(out.status.success(), "queryMsgById after failover: {}", String::from_utf8_lossy(&out.stderr));
    ensure!(stdout.contains(&sent[0].msg_id) && stdout.contains("body-0"), "{stdout}");

    // More messages through the new leader, then a full restart of all three replicas.
    let more = send_keyed(&group, 12, 8).await?;
    for s in &more {
        let r = view_raw(&client, &group.addr(second_leader), s.offset_id.commit_log_offset).await?;
        ensure!(r.response_code() == ResponseCode::Success, "{:?}", r.remark);
        bytes.insert(s.offset_id.commit_log_offset, r.body.clone());
    }
    sent.extend(more);
    let index_files_before: BTreeMap<u64, usize> =
        group.configs.iter().map(|(id, c)| (*id, index_file_count(&c.store_path_root_dir))).collect();
    for id in group.brokers.keys().copied().collect::<Vec<_>>() {
        group.stop(id).await;
    }
    let starts = group.configs.values().cloned().map(Broker::start);
    for broker in futures::future::join_all(starts).await {
        let broker = broker?;
        group.brokers.insert(broker.node_id(), broker);
    }
    group.wait_leader(WAIT).await?;
    for id in group.configs.keys().copied().collect::<Vec<_>>() {
        eventually_check(&client, &group.addr(id), &sent, &bytes).await?;
        let c = &group.configs[&id];
        ensure!(index_file_count(&c.store_path_root_dir) == index_files_before[&id], "IndexFiles reopened, none added");
    }

    admin.shutdown().await;
    client.close().await;
    group.shutdown().await;
    Ok(())
}

fn index_file_count(store_root: &std::path::Path) -> usize {
    std::fs::read_dir(store_root.join("index")).map(|d| d.filter_map(|e| e.ok()).count()).unwrap_or(0)
}
