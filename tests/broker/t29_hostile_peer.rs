//! A hostile peer against a real 3-replica group with a cluster secret (issue 32): whoever reaches
//! the Raft port or the NameServer without the secret is refused and changes nothing.
//!
//! - Forged AppendEntries (a higher term, a leader of its own), Vote with term `u64::MAX`,
//!   InstallSnapshot and Probe, unsigned or signed with another secret, are answered NO_PERMISSION
//!   by every replica: terms, leaders, voters, logs and commit indexes stay as they were, and the
//!   Probe learns nothing (no body).
//! - A request signed with the real secret but replayed, or sent to another replica than it names,
//!   is refused; a signed Vote with term `u64::MAX` (a member gone wrong) is refused as implausible.
//! - A forged REGISTER_BROKER (LEADER, the highest term, our address), UNREGISTER_BROKER and
//!   WIPE_WRITE_PERM_OF_BROKER without the secret are refused: the route still names the real leader,
//!   writable.
//! - Entries that name `../` paths, proposed through the real leader (a member gone wrong, or a bug
//!   on the way to the log), are applied on every replica without touching a sentinel directory
//!   outside the stores, and the group goes on applying.
//! - Through it all the group serves: a send after the attacks is SEND_OK and readable.

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
use harness::group::drain_queue;
use raftmq_broker::state::entry::BrokerCommand;
use raftmq_broker::state::entry::encode_messages;
use raftmq_broker::state::entry::tag;
use raftmq_client::Producer;
use raftmq_client::SendStatus;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::cluster_signature::CLUSTER_TARGET;
use raftmq_common::protocol::cluster_signature::ClusterKey;
use raftmq_common::protocol::cluster_signature::ClusterSigner;
use raftmq_common::protocol::cluster_signature::wall_clock_ms;
use raftmq_common::protocol::header::namesrv::RaftRegistration;
use raftmq_common::protocol::header::namesrv::RaftRole;
use raftmq_common::protocol::header::namesrv::RegisterBrokerRequestHeader;
use raftmq_common::protocol::header::namesrv::UnregisterBrokerRequestHeader;
use raftmq_common::protocol::header::namesrv::WipeWritePermOfBrokerRequestHeader;
use raftmq_common::remoting::RemotingClient;
use raftmq_raft::network::wire;
use raftmq_raft::network::wire::RaftRequest;
use raftmq_raft::state_machine::SnapshotMeta;
use raftmq_raft::type_config::AppPayload;
use raftmq_raft::type_config::AppendEntriesRequest;
use raftmq_raft::type_config::Entry;
use raftmq_raft::type_config::EntryPayload;
use raftmq_raft::type_config::StoredMembership;
use raftmq_raft::type_config::Vote;
use raftmq_raft::type_config::VoteRequest;
use raftmq_raft::type_config::log_id;

const SECRET: &str = "t29: the group's own cluster secret";
const TOPIC: &str = "T29";
const FORGER: u64 = 99;
const CALL: Duration = Duration::from_secs(5);

/// What an attack must not change on a replica.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    term: u64,
    leader: Option<u64>,
    voters: BTreeSet<u64>,
    last_log_index: Option<u64>,
    committed: Option<u64>,
}

fn seen(group: &Group) -> BTreeMap<u64, Seen> {
    group
        .brokers
        .iter()
        .map(|(id, b)| {
            let s = b.raft().status();
            let seen = Seen {
                term: s.leadership.term,
                leader: s.leadership.leader_id,
                voters: s.voters,
                last_log_index: s.last_log_index,
                committed: s.committed.map(|c| c.index),
            };
            (*id, seen)
        })
        .collect()
}

fn raft_addr(group: &Group, id: u64) -> Result<String> {
    Ok(group.configs[&id].self_peer().context("self peer")?.raft_addr.clone())
}

fn rpc(req: &RaftRequest) -> Result<RemotingCommand> {
    let code = match req {
        RaftRequest::AppendEntries(_) | RaftRequest::StreamAppend { .. } => RequestCode::RaftAppendEntries,
        RaftRequest::InstallSnapshot { .. } | RaftRequest::InstallSnapshotChunk { .. } => {
            RequestCode::RaftInstallSnapshot
        }
        RaftRequest::TransferLeader(_) => RequestCode::RaftTransferLeader,
        _ => RequestCode::RaftVote,
    };
    Ok(RemotingCommand::request(code).with_body(wire::encode(req)?))
}

/// The forger's requests: a leader of its own in a higher term, a vote that would wrap openraft's
/// term + 1, a snapshot, and a probe for the membership.
fn forged_requests(term: u64) -> Vec<(&'static str, RaftRequest)> {
    let entry = Entry {
        log_id: log_id(term + 1, 1_000_000),
        payload: EntryPayload::Normal(AppPayload::new(tag::TOPIC_DELETE, Bytes::from_static(b"forged"))),
    };
    let append = AppendEntriesRequest {
        vote: Vote::new_committed(term + 1, FORGER),
        prev_log_id: None,
        entries: vec![entry],
        leader_commit: Some(log_id(term + 1, 1_000_000)),
    };
    let snapshot = RaftRequest::InstallSnapshot {
        vote: Vote::new_committed(term + 1, FORGER),
        meta: SnapshotMeta {
            last_log_id: Some(log_id(term + 1, 1_000_000)),
            last_membership: StoredMembership::default(),
        },
        data: b"a forged manifest".to_vec(),
    };
    vec![
        ("AppendEntries", RaftRequest::AppendEntries(append)),
        ("Vote(u64::MAX)", RaftRequest::Vote(VoteRequest::new(Vote::new(u64::MAX, FORGER), None))),
        ("PreVote(u64::MAX)", RaftRequest::PreVote(VoteRequest::new(Vote::new(u64::MAX, FORGER), None))),
        ("InstallSnapshot", snapshot),
        ("Probe", RaftRequest::Probe { from: FORGER }),
    ]
}

async fn expect_refused(client: &RemotingClient, addr: &str, what: &str, request: RemotingCommand) -> Result<()> {
    let response = client.invoke(addr, request, CALL).await.with_context(|| format!("{what} to {addr}"))?;
    ensure!(
        response.response_code() == ResponseCode::NoPermission,
        "{what} to {addr} was not refused: {:?} {:?}",
        response.response_code(),
        response.remark
    );
    ensure!(response.body.is_empty(), "{what} to {addr}: a refusal carries nothing ({} bytes)", response.body.len());
    Ok(())
}

/// Polls until every replica applied at least `index`.
async fn wait_applied(group: &Group, index: u64) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let behind: Vec<(u64, Option<u64>)> = group
            .brokers
            .iter()
            .map(|(id, b)| (*id, b.raft().status().applied.map(|a| a.index)))
            .filter(|(_, a)| a.is_none_or(|a| a < index))
            .collect();
        if behind.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("replicas did not apply index {index}: {behind:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls until every replica holds and knows committed the same log (followers learn the commit
/// index with the next heartbeat), then what it has seen.
async fn settled(group: &Group) -> Result<BTreeMap<u64, Seen>> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = seen(group);
        let ends: BTreeSet<(Option<u64>, Option<u64>)> =
            now.values().map(|s| (s.last_log_index, s.committed)).collect();
        if ends.len() == 1 {
            return Ok(now);
        }
        if Instant::now() > deadline {
            bail!("the replicas did not settle: {now:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn send_ok(producer: &Producer, body: &str) -> Result<()> {
    let result = producer.send(Message::new(TOPIC, body.to_owned())).await?;
    ensure!(result.status == SendStatus::SendOk, "send {body}: {result:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_hostile_peer_changes_nothing() -> Result<()> {
    harness::cluster::init_logging();
    let group = Group::start_custom(
        3,
        |namesrv| namesrv.cluster_secret = SECRET.into(),
        |c| c.cluster_secret = Some(SECRET.into()),
    )
    .await?;
    let leader = group.wait_leader(Duration::from_secs(30)).await?;
    // A route exists only if the NameServer took the leader's signed registration.
    let producer = Producer::builder("t29_producer").namesrv_addr(&group.namesrv_addr).build()?;
    producer.start().await?;
    send_ok(&producer, "before").await?;
    let before = settled(&group).await?;
    let term = before[&leader].term;
    eprintln!("leader {leader} in term {term}; before the attacks: {before:?}");

    let client = RemotingClient::new();
    let outsider = ClusterSigner::new(ClusterKey::new(b"a guess at the secret, not it"), "99");
    for id in group.brokers.keys().copied().collect::<Vec<_>>() {
        let addr = raft_addr(&group, id)?;
        for (what, req) in forged_requests(term) {
            expect_refused(&client, &addr, &format!("unsigned {what}"), rpc(&req)?).await?;
            let mut wrong = rpc(&req)?;
            wrong.ext_fields.insert(CLUSTER_TARGET.into(), id.to_string().into());
            outsider.sign(&mut wrong, wall_clock_ms());
            expect_refused(&client, &addr, &format!("{what} signed with another secret"), wrong).await?;
        }
    }

    // The real secret does not make a replay, another replica's request or an absurd term pass.
    let member = ClusterSigner::new(ClusterKey::new(SECRET.as_bytes()), "1");
    let follower = *group.brokers.keys().find(|id| **id != leader).context("a follower")?;
    let other = *group.brokers.keys().find(|id| **id != leader && **id != follower).context("another")?;
    let follower_addr = raft_addr(&group, follower)?;
    let mut probe = rpc(&RaftRequest::Probe { from: leader })?;
    probe.ext_fields.insert(CLUSTER_TARGET.into(), follower.to_string().into());
    member.sign(&mut probe, wall_clock_ms());
    let answered = client.invoke(&follower_addr, probe.clone(), CALL).await?;
    ensure!(answered.response_code() == ResponseCode::Success, "a member's probe: {:?}", answered.remark);
    expect_refused(&client, &follower_addr, "a replayed probe", probe).await?;
    let mut misdirected = rpc(&RaftRequest::Probe { from: leader })?;
    misdirected.ext_fields.insert(CLUSTER_TARGET.into(), other.to_string().into());
    member.sign(&mut misdirected, wall_clock_ms());
    expect_refused(&client, &follower_addr, "a probe for another replica", misdirected).await?;
    let mut max_vote = rpc(&RaftRequest::Vote(VoteRequest::new(Vote::new(u64::MAX, leader), None)))?;
    max_vote.ext_fields.insert(CLUSTER_TARGET.into(), follower.to_string().into());
    member.sign(&mut max_vote, wall_clock_ms());
    let reply = client.invoke(&follower_addr, max_vote, CALL).await?;
    let decoded: wire::RaftReply = wire::decode(&reply.body)?;
    ensure!(
        matches!(&decoded, wire::RaftReply::Refused(why) if why.contains("implausible")),
        "a signed vote with term u64::MAX: {decoded:?}"
    );

    // The NameServer: forged registration, unregistration and write-perm wipe.
    let ns = group.namesrv_addr.clone();
    let register = RegisterBrokerRequestHeader {
        broker_name: harness::group::BROKER_NAME.into(),
        broker_addr: "127.0.0.1:1".into(),
        cluster_name: "DefaultCluster".into(),
        ha_server_addr: "127.0.0.1:2".into(),
        broker_id: 0,
        heartbeat_timeout_millis: None,
        compressed: false,
        body_crc32: 0,
        raft: Some(RaftRegistration { term: u64::MAX / 2, role: RaftRole::Leader, node_id: FORGER }),
    };
    let forged = [
        ("REGISTER_BROKER", RemotingCommand::request_with_header(RequestCode::RegisterBroker, &register)),
        (
            "UNREGISTER_BROKER",
            RemotingCommand::request_with_header(
                RequestCode::UnregisterBroker,
                &UnregisterBrokerRequestHeader {
                    broker_name: harness::group::BROKER_NAME.into(),
                    broker_addr: group.addr(leader),
                    cluster_name: "DefaultCluster".into(),
                    broker_id: 0,
                },
            ),
        ),
        (
            "WIPE_WRITE_PERM_OF_BROKER",
            RemotingCommand::request_with_header(
                RequestCode::WipeWritePermOfBroker,
                &WipeWritePermOfBrokerRequestHeader { broker_name: harness::group::BROKER_NAME.into() },
            ),
        ),
    ];
    for (what, request) in forged {
        expect_refused(&client, &ns, &format!("unsigned {what}"), request.clone()).await?;
        let mut wrong = request;
        outsider.sign(&mut wrong, wall_clock_ms());
        expect_refused(&client, &ns, &format!("{what} signed with another secret"), wrong).await?;
    }
    let route = group.namesrv.processor().routes().pickup_topic_route(TOPIC).context("the route is gone")?;
    let addrs = &route.broker_datas.first().context("no broker data")?.broker_addrs;
    ensure!(addrs.get(&0) == Some(&group.addr(leader)), "the route's leader changed: {addrs:?}");
    ensure!(route.queue_datas.iter().all(|q| q.perm & 2 != 0), "the route lost its write permission: {route:?}");

    let after = seen(&group);
    ensure!(after == before, "the attacks changed the group:\nbefore {before:?}\nafter  {after:?}");

    // Names that climb out of the store, in entries the leader proposes: applied on every replica
    // (skipped alike), no file outside the stores touched.
    let sentinel = group.dir.path().join("sentinel");
    std::fs::create_dir_all(&sentinel)?;
    std::fs::write(sentinel.join("keep"), b"must survive")?;
    let escape = group.dir.path().join("escape");
    let node = group.brokers[&leader].raft();
    let mut last = 0;
    for topic in ["../../sentinel", "T29/../../../sentinel", "/tmp/../sentinel", ".."] {
        let (t, body) = BrokerCommand::TopicDelete { proposed_at_ms: 1, topic: topic.into() }.encode()?;
        last = node.propose(AppPayload::new(t, body)).await?.log_id.index;
    }
    let msg = MessageExt {
        message: Message::new("../../escape", "out of the store"),
        queue_id: 0,
        queue_offset: 0,
        ..MessageExt::default()
    };
    let messages = encode_messages(&[msg])?;
    last = last.max(node.propose(AppPayload::new(tag::MESSAGES, messages)).await?.log_id.index);
    wait_applied(&group, last).await?;
    ensure!(std::fs::read(sentinel.join("keep"))? == b"must survive", "the sentinel changed");
    ensure!(!escape.exists(), "a ConsumeQueue was made outside the stores at {}", escape.display());
    for (id, b) in &group.brokers {
        ensure!(b.raft().status().poisoned.is_none(), "replica {id} stopped applying");
        ensure!(b.store().failure().is_none(), "replica {id}'s store failed: {:?}", b.store().failure());
    }

    // The group still serves, and what was sent before the attacks is still there.
    send_ok(&producer, "after").await?;
    let leader_now = group.wait_leader(Duration::from_secs(10)).await?;
    ensure!(leader_now == leader, "leadership moved from {leader} to {leader_now}");
    let mut bodies = BTreeSet::new();
    for queue_id in 0..8 {
        for m in drain_queue(&client, &group.addr(leader), TOPIC, queue_id).await.unwrap_or_default() {
            bodies.insert(String::from_utf8_lossy(&m.message.body).into_owned());
        }
    }
    ensure!(bodies.contains("before") && bodies.contains("after"), "messages: {bodies:?}");

    producer.shutdown().await;
    client.close().await;
    group.shutdown().await;
    Ok(())
}
