//! Transactional messages on the Raft CommitLog, at the wire: a NameServer and a 3-replica group in
//! process (harness `t40_cluster`, `transactionTimeOut` 1 s, `transactionCheckInterval` 300 ms), a
//! producer speaking raw remoting (SEND_MESSAGE_V2 with TRAN_MSG, END_TRANSACTION, HEART_BEAT, and a
//! processor for the broker's CHECK_TRANSACTION_STATE), and a push consumer of the real topic.
//!
//! - t70: commit and rollback by END_TRANSACTION; unknown halves are checked back and ended by the
//!   check's answer; a repeated END_TRANSACTION writes nothing; wrong END_TRANSACTIONs get
//!   SYSTEM_ERROR with RocketMQ's remarks; a follower answers SLAVE_NOT_AVAILABLE. The consumer sees
//!   exactly the committed messages, once each, and nothing of a half before its commit.
//! - t71: a half left unknown when the leader is killed is checked by the new leader and committed.
//! - t72: the SDK's `TransactionProducer` end to end: commit, rollback, and unknown halves resolved
//!   by its listener's check answer; the consumer sees exactly the committed ones.
//! - t73: the SDK producer heartbeats the new leader after a failover (route poll) and answers its
//!   check of a half the old leader stored.
//! - t74: a half checked twice (its first answer travelling slowly) and ended late by its producer
//!   too: all three COMMITs of one transaction (two copies and the original) store one message. A
//!   new half whose producer set TRAN_PREPARED_QUEUE_OFFSET to that chain still commits.
//! - t75: a half given up after `transactionCheckMax` checks is resumed (RESUME_CHECK_HALF_MESSAGE),
//!   checked again and committed; a message that is not a half is refused.
//! - hole 5 of issue 31: while the CommitLog cannot be read (an injected EIO), a due half is not
//!   skipped: no check, the check progress stays before it; once reads work it is checked and
//!   committed.

use crate::harness;

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use anyhow::ensure;
use harness::cluster::Cluster;
use harness::cluster::Collector;
use harness::cluster::WAIT;
use raftmq_client::Admin;
use raftmq_client::Producer;
use raftmq_client::PushConsumer;
use raftmq_client::consumer::ConsumeConcurrentlyContext;
use raftmq_client::consumer::ConsumeConcurrentlyStatus;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_client::transaction::LocalTransactionState;
use raftmq_client::transaction::TransactionListener;
use raftmq_client::transaction::TransactionProducer;
use raftmq_common::message::MessageExt;
use raftmq_common::message::msg_id::OffsetMsgId;
use raftmq_common::message::properties;
use raftmq_common::message::properties::Properties;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_record_bytes;
use raftmq_common::message::sys_flag;
use raftmq_common::message::validate::RMQ_SYS_TRANS_HALF_TOPIC;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::heartbeat::HeartbeatData;
use raftmq_common::protocol::body::heartbeat::ProducerData;
use raftmq_common::protocol::header::send::SendMessageRequestHeader;
use raftmq_common::protocol::header::send::SendMessageRequestHeaderV2;
use raftmq_common::protocol::header::send::SendMessageResponseHeader;
use raftmq_common::protocol::header::transaction::CheckTransactionStateRequestHeader;
use raftmq_common::protocol::header::transaction::EndTransactionRequestHeader;
use raftmq_common::protocol::header::transaction::commit_or_rollback;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::RemotingClient;
use raftmq_common::remoting::processor_fn;
use tokio::sync::mpsc;

const GROUP: &str = "tx-producers";
const RPC: Duration = Duration::from_secs(5);

fn tweak(c: &mut raftmq_broker::config::broker_config::BrokerConfig) {
    c.transaction_time_out = Duration::from_secs(1);
    c.transaction_check_interval = Duration::from_millis(300);
}

/// A half as its producer knows it after SEND_OK.
#[derive(Debug, Clone)]
struct Half {
    body: String,
    uniq: String,
    /// `tranStateTableOffset`: the half's offset in the half queue.
    queue_offset: i64,
    /// The half's CommitLog offset, from the offsetMsgId.
    commit_log_offset: i64,
}

/// One CHECK_TRANSACTION_STATE the producer received.
#[derive(Debug)]
struct Check {
    from: SocketAddr,
    header: CheckTransactionStateRequestHeader,
    message: MessageExt,
}

/// A producer on raw remoting, with a processor collecting the broker's checks.
struct RawProducer {
    client: RemotingClient,
    checks: mpsc::UnboundedReceiver<Result<Check>>,
}

impl RawProducer {
    fn new() -> RawProducer {
        let (tx, checks) = mpsc::unbounded_channel();
        let mut table = ProcessorTable::new();
        table.register(
            RequestCode::CheckTransactionState,
            Arc::new(processor_fn(move |ctx, request: RemotingCommand| {
                let tx = tx.clone();
                async move {
                    let check = (|| -> Result<Check> {
                        ensure!(request.is_oneway(), "CHECK_TRANSACTION_STATE is oneway");
                        let header: CheckTransactionStateRequestHeader = request.decode_header()?;
                        let (message, _) = decode_record_bytes(&request.body, DecodeOptions::default())?;
                        Ok(Check { from: ctx.peer_addr(), header, message })
                    })();
                    let _ = tx.send(check);
                    None
                }
            })),
        );
        RawProducer { client: RemotingClient::with_processors(table), checks }
    }

    async fn heartbeat(&self, addr: &str) -> Result<()> {
        let data = HeartbeatData {
            client_id: "127.0.0.1@t70".into(),
            consumer_data_set: Vec::new(),
            producer_data_set: vec![ProducerData { group_name: GROUP.into() }],
        };
        let request = RemotingCommand::request(RequestCode::HeartBeat).with_body(data.encode()?);
        let response = self.client.invoke(addr, request, RPC).await?;
        ensure!(response.response_code() == ResponseCode::Success, "heartbeat: {:?}", response.remark);
        Ok(())
    }

    async fn send_half(&self, addr: &str, topic: &str, queue_id: i32, body: &str) -> Result<Half> {
        self.send_half_with(addr, topic, queue_id, body, &[]).await
    }

    /// [`Self::send_half`] with `extra` properties set by the producer.
    async fn send_half_with(
        &self,
        addr: &str,
        topic: &str,
        queue_id: i32,
        body: &str,
        extra: &[(&str, &str)],
    ) -> Result<Half> {
        let uniq = format!("UNIQ-{body}");
        let mut props = Properties::new();
        for (key, value) in extra {
            props.insert(*key, *value);
        }
        props.insert(properties::TRAN_MSG, "true");
        props.insert(properties::PGROUP, GROUP);
        props.insert(properties::UNIQ_KEY, uniq.as_str());
        props.insert(properties::TAGS, "TagTx");
        let header = SendMessageRequestHeader {
            producer_group: GROUP.into(),
            topic: topic.into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id,
            sys_flag: sys_flag::TRANSACTION_PREPARED_TYPE,
            born_timestamp: now_ms(),
            flag: 0,
            properties: Some(props.to_wire_string()),
            reconsume_times: Some(0),
            unit_mode: Some(false),
            batch: Some(false),
            max_reconsume_times: None,
            bname: None,
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::SendMessageV2, &SendMessageRequestHeaderV2::from(header))
                .with_body(body.as_bytes().to_vec());
        let response = self.client.invoke(addr, request, RPC).await?;
        ensure!(response.response_code() == ResponseCode::Success, "half send: {:?}", response.remark);
        let h: SendMessageResponseHeader = response.decode_header()?;
        ensure!(h.queue_id == queue_id, "the answer names the real queue, got {}", h.queue_id);
        ensure!(h.transaction_id.as_deref() == Some(uniq.as_str()), "transactionId {:?}", h.transaction_id);
        let id: OffsetMsgId = h.msg_id.parse().context("offsetMsgId")?;
        Ok(Half { body: body.into(), uniq, queue_offset: h.queue_offset, commit_log_offset: id.commit_log_offset })
    }

    /// END_TRANSACTION as a request (not oneway) so the test sees the broker's answer.
    async fn end(&self, addr: &str, half: &Half, state: i32, from_check: bool) -> Result<RemotingCommand> {
        let header = EndTransactionRequestHeader {
            producer_group: GROUP.into(),
            tran_state_table_offset: half.queue_offset,
            commit_log_offset: half.commit_log_offset,
            commit_or_rollback: state,
            from_transaction_check: Some(from_check),
            msg_id: half.uniq.clone(),
            transaction_id: Some(half.uniq.clone()),
            bname: Some(harness::cluster::BROKER_NAME.into()),
        };
        let request = RemotingCommand::request_with_header(RequestCode::EndTransaction, &header);
        Ok(self.client.invoke(addr, request, RPC).await?)
    }

    async fn end_ok(&self, addr: &str, half: &Half, state: i32, from_check: bool) -> Result<()> {
        let response = self.end(addr, half, state, from_check).await?;
        ensure!(response.response_code() == ResponseCode::Success, "end {}: {:?}", half.body, response.remark);
        Ok(())
    }

    /// Waits for the next check (the deadline is a safety bound).
    async fn next_check(&mut self) -> Result<Check> {
        match tokio::time::timeout(WAIT, self.checks.recv()).await {
            Ok(Some(check)) => check,
            Ok(None) => bail!("check channel closed"),
            Err(_) => bail!("no CHECK_TRANSACTION_STATE within {WAIT:?}"),
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

async fn consumer(cluster: &Cluster, group: &str, topic: &str, seen: &Collector) -> Result<PushConsumer> {
    let sink = seen.clone();
    let c = PushConsumer::builder(group)
        .namesrv_addr(&cluster.namesrv_addr)
        .instance_name(group)
        .subscribe(topic, "*")
        .consume_from(ConsumeFrom::FirstOffset)
        .rebalance_interval(Duration::from_secs(1))
        .route_poll_interval(Duration::from_secs(1))
        .heartbeat_interval(Duration::from_millis(500))
        .listener_concurrently(move |msgs: &[MessageExt], _ctx: &mut ConsumeConcurrentlyContext| {
            for m in msgs {
                assert_eq!(m.message.property(properties::TRAN_MSG), None, "a committed message is not a half");
            }
            sink.record("c", msgs);
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
        .build()?;
    c.start().await?;
    Ok(c)
}

/// Answers checks until every body of `answers` got its answer; checks of other halves (copies
/// re-put while an earlier answer travelled) are answered the same way by body.
async fn answer_checks(
    producer: &mut RawProducer,
    addr_of: &BTreeMap<SocketAddr, String>,
    answers: &BTreeMap<String, i32>,
) -> Result<()> {
    let mut answered = BTreeSet::new();
    while answered.len() < answers.len() {
        let check = producer.next_check().await?;
        let body = String::from_utf8_lossy(&check.message.message.body).into_owned();
        let Some(state) = answers.get(&body) else { bail!("check of a half that was ended already: {body}") };
        ensure!(check.message.message.topic != RMQ_SYS_TRANS_HALF_TOPIC, "the check shows the real topic");
        ensure!(check.message.message.property(properties::PGROUP) == Some(GROUP), "PGROUP kept");
        ensure!(check.header.msg_id.as_deref() == check.message.message.uniq_key(), "msgId is the UNIQ_KEY");
        let half = Half {
            body: body.clone(),
            uniq: check.message.message.uniq_key().unwrap_or_default().to_owned(),
            queue_offset: check.header.tran_state_table_offset,
            commit_log_offset: check.header.commit_log_offset,
        };
        // The answer goes to the broker the check came from, as Java's producer does.
        let addr = addr_of.get(&check.from).context("a check from an unknown broker")?;
        producer.end_ok(addr, &half, *state, true).await?;
        answered.insert(body);
    }
    Ok(())
}

/// Waits until the broker at `addr` has checked (or seen ended) every half stored so far: the
/// check progress, consumer offset of CID_RMQ_SYS_TRANS on the half queue, reaches its end.
async fn wait_check_progress(admin: &Admin, addr: &str) -> Result<()> {
    let half_max = admin.max_offset(addr, RMQ_SYS_TRANS_HALF_TOPIC, 0).await?;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let progress = admin
            .all_consumer_offset(addr)
            .await?
            .offset_table
            .get(&format!("{RMQ_SYS_TRANS_HALF_TOPIC}@CID_RMQ_SYS_TRANS"))
            .and_then(|q| q.get(&0).copied())
            .unwrap_or(-1);
        if progress >= half_max {
            return Ok(());
        }
        ensure!(tokio::time::Instant::now() < deadline, "check progress {progress} never reached {half_max}");
        // The progress is replicated state with no subscription API: poll it.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Records stored in the 4 queues of `topic` on the broker at `addr`.
async fn stored_total(admin: &Admin, addr: &str, topic: &str) -> Result<i64> {
    let mut total = 0;
    for q in 0..4 {
        total += admin.max_offset(addr, topic, q).await?;
    }
    Ok(total)
}

fn addr_map(cluster: &Cluster) -> BTreeMap<SocketAddr, String> {
    cluster.running().into_iter().filter_map(|id| Some((cluster.addr(id).parse().ok()?, cluster.addr(id)))).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_rollback_and_check_back() -> Result<()> {
    let cluster = Cluster::start_with(3, tweak).await?;
    let topic = "T70Tx";
    cluster.create_topic(topic, 4).await?;
    let leader = cluster.wait_leader(WAIT).await?;
    let addr = cluster.addr(leader);
    let mut producer = RawProducer::new();
    producer.heartbeat(&addr).await?;

    let seen = Collector::default();
    let consumer = consumer(&cluster, "t70-consumers", topic, &seen).await?;

    let commit = producer.send_half(&addr, topic, 1, "commit").await?;
    let rollback = producer.send_half(&addr, topic, 2, "rollback").await?;
    let checked_commit = producer.send_half(&addr, topic, 3, "checked-commit").await?;
    let checked_rollback = producer.send_half(&addr, topic, 0, "checked-rollback").await?;
    ensure!(
        [rollback.queue_offset, checked_commit.queue_offset, checked_rollback.queue_offset]
            == [commit.queue_offset + 1, commit.queue_offset + 2, commit.queue_offset + 3],
        "halves share the half queue"
    );

    // Wrong END_TRANSACTIONs are refused with RocketMQ's remarks and write nothing.
    let wrong_group = {
        let request = RemotingCommand::request_with_header(
            RequestCode::EndTransaction,
            &EndTransactionRequestHeader {
                producer_group: "someone-else".into(),
                tran_state_table_offset: commit.queue_offset,
                commit_log_offset: commit.commit_log_offset,
                commit_or_rollback: commit_or_rollback::COMMIT_TYPE,
                from_transaction_check: None,
                msg_id: commit.uniq.clone(),
                transaction_id: None,
                bname: None,
            },
        );
        producer.client.invoke(&addr, request, RPC).await?
    };
    ensure!(wrong_group.response_code() == ResponseCode::SystemError, "{wrong_group:?}");
    ensure!(wrong_group.remark.as_deref() == Some("The producer group wrong"), "{:?}", wrong_group.remark);
    let wrong_offset =
        producer.end(&addr, &Half { queue_offset: commit.queue_offset + 1, ..commit.clone() }, 8, false).await?;
    ensure!(
        wrong_offset.remark.as_deref() == Some("The transaction state table offset wrong"),
        "{:?}",
        wrong_offset.remark
    );
    let nowhere = producer.end(&addr, &Half { commit_log_offset: 1 << 40, ..commit.clone() }, 8, false).await?;
    ensure!(nowhere.response_code() == ResponseCode::SystemError, "{nowhere:?}");
    ensure!(nowhere.remark.as_deref().is_some_and(|r| r.starts_with("Find prepared transaction message failed")));
    let follower = cluster.running().into_iter().find(|id| *id != leader).context("a follower")?;
    let on_follower = producer.end(&cluster.addr(follower), &commit, 8, false).await?;
    ensure!(on_follower.response_code() == ResponseCode::SlaveNotAvailable, "{on_follower:?}");

    // A committed half reaches the consumer; a rolled-back one never does.
    producer.end_ok(&addr, &commit, commit_or_rollback::COMMIT_TYPE, false).await?;
    producer.end_ok(&addr, &rollback, commit_or_rollback::ROLLBACK_TYPE, false).await?;
    // UNKNOWN is accepted and leaves the half to the check.
    producer.end_ok(&addr, &checked_commit, commit_or_rollback::NOT_TYPE, false).await?;
    seen.wait_for_bodies(&BTreeSet::from(["commit".to_owned()])).await?;
    // Ending it again (a retried oneway) writes nothing.
    producer.end_ok(&addr, &commit, commit_or_rollback::COMMIT_TYPE, false).await?;
    producer.end_ok(&addr, &commit, commit_or_rollback::ROLLBACK_TYPE, false).await?;

    // The two unknown halves are checked once they are older than transactionTimeOut.
    let answers = BTreeMap::from([
        ("checked-commit".to_owned(), commit_or_rollback::COMMIT_TYPE),
        ("checked-rollback".to_owned(), commit_or_rollback::ROLLBACK_TYPE),
    ]);
    answer_checks(&mut producer, &addr_map(&cluster), &answers).await?;
    seen.wait_for_bodies(&BTreeSet::from(["commit".to_owned(), "checked-commit".to_owned()])).await?;

    // Once the check progress has passed every half and copy, nothing more can arrive: the
    // consumer saw each committed message once, in its real queue, and no rolled-back one.
    let admin = Admin::new(&cluster.namesrv_addr)?;
    wait_check_progress(&admin, &addr).await?;
    // Ends repeated after the check progress passed their halves write nothing either.
    producer.end_ok(&addr, &commit, commit_or_rollback::COMMIT_TYPE, false).await?;
    producer.end_ok(&addr, &rollback, commit_or_rollback::COMMIT_TYPE, false).await?;
    let max_total = stored_total(&admin, &addr, topic).await?;
    ensure!(max_total == 2, "exactly two committed records in {topic}, found {max_total}");
    seen.wait_until("both committed messages", |r| r.len() >= 2).await?;
    let got: Vec<(String, i32)> = seen.all().into_iter().map(|r| (r.body, r.queue_id)).collect();
    let mut sorted = got.clone();
    sorted.sort();
    ensure!(sorted == vec![("checked-commit".to_owned(), 3), ("commit".to_owned(), 1)], "consumed {got:?}");
    ensure!(producer.checks.try_recv().is_err(), "no check after every half was ended");

    consumer.shutdown().await;
    admin.shutdown().await;
    cluster.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_checks_the_halves_of_the_old_one() -> Result<()> {
    let mut cluster = Cluster::start_with(3, tweak).await?;
    let topic = "T71Tx";
    cluster.create_topic(topic, 2).await?;
    let old = cluster.wait_leader(WAIT).await?;
    let mut producer = RawProducer::new();
    let half = producer.send_half(&cluster.addr(old), topic, 1, "survivor").await?;
    cluster.kill(old);
    let new = cluster.wait_leader(WAIT).await?;
    ensure!(new != old, "a new leader");
    // A producer heartbeats every broker of its routes; the new leader learns of it this way.
    producer.heartbeat(&cluster.addr(new)).await?;
    let seen = Collector::default();
    let consumer = consumer(&cluster, "t71-consumers", topic, &seen).await?;
    let check = producer.next_check().await?;
    ensure!(check.message.message.uniq_key() == Some(half.uniq.as_str()), "the check is about the half");
    ensure!(check.from.to_string() == cluster.addr(new), "checked by the new leader");
    let copy = Half {
        queue_offset: check.header.tran_state_table_offset,
        commit_log_offset: check.header.commit_log_offset,
        ..half.clone()
    };
    producer.end_ok(&cluster.addr(new), &copy, commit_or_rollback::COMMIT_TYPE, true).await?;
    seen.wait_for_bodies(&BTreeSet::from(["survivor".to_owned()])).await?;
    consumer.shutdown().await;
    cluster.shutdown().await
}

/// The SDK's listener for t72/t73: the body names the local outcome; a check of "sdk-late" commits,
/// any other check rolls back. Every checked body is published.
struct BodyListener {
    checked: tokio::sync::watch::Sender<BTreeSet<String>>,
}

impl BodyListener {
    fn new() -> Arc<BodyListener> {
        Arc::new(BodyListener { checked: tokio::sync::watch::channel(BTreeSet::new()).0 })
    }

    async fn wait_checked(&self, body: &str) -> Result<()> {
        let mut rx = self.checked.subscribe();
        match tokio::time::timeout(WAIT, rx.wait_for(|set| set.contains(body))).await {
            Ok(Ok(_)) => Ok(()),
            _ => bail!("{body} was never checked"),
        }
    }
}

impl TransactionListener for BodyListener {
    fn execute_local_transaction(
        &self,
        msg: &raftmq_common::message::Message,
        _arg: &(dyn std::any::Any + Send + Sync),
    ) -> LocalTransactionState {
        match &msg.body[..] {
            b"sdk-commit" => LocalTransactionState::CommitMessage,
            b"sdk-rollback" => LocalTransactionState::RollbackMessage,
            _ => LocalTransactionState::Unknown,
        }
    }

    fn check_local_transaction(&self, msg: &MessageExt) -> LocalTransactionState {
        let body = String::from_utf8_lossy(&msg.message.body).into_owned();
        self.checked.send_modify(|set| {
            set.insert(body);
        });
        match &msg.message.body[..] {
            b"sdk-late" => LocalTransactionState::CommitMessage,
            _ => LocalTransactionState::RollbackMessage,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_transaction_producer_end_to_end() -> Result<()> {
    let cluster = Cluster::start_with(3, tweak).await?;
    let topic = "T72Tx";
    cluster.create_topic(topic, 4).await?;
    let listener = BodyListener::new();
    let producer = TransactionProducer::builder(
        Producer::builder("t72-tx-producers").namesrv_addr(&cluster.namesrv_addr),
        listener.clone(),
    )
    .build()?;
    producer.start().await?;
    let seen = Collector::default();
    let consumer = consumer(&cluster, "t72-consumers", topic, &seen).await?;
    let mut states = BTreeMap::new();
    for body in ["sdk-commit", "sdk-rollback", "sdk-late", "sdk-late-rollback"] {
        let msg = raftmq_common::message::Message::new(topic, body.as_bytes().to_vec()).with_tags("TagTx");
        let result = producer.send_message_in_transaction(msg, &()).await?;
        states.insert(body, result.local_transaction_state);
    }
    ensure!(states["sdk-commit"] == LocalTransactionState::CommitMessage, "{states:?}");
    ensure!(states["sdk-late"] == LocalTransactionState::Unknown, "{states:?}");
    // The committed one at once, the unknown one after its check: each once, never a rolled-back one.
    seen.wait_for_bodies(&BTreeSet::from(["sdk-commit".to_owned(), "sdk-late".to_owned()])).await?;
    listener.wait_checked("sdk-late-rollback").await?;
    let leader = cluster.wait_leader(WAIT).await?;
    let admin = Admin::new(&cluster.namesrv_addr)?;
    wait_check_progress(&admin, &cluster.addr(leader)).await?;
    let mut total = 0;
    for q in 0..4 {
        total += admin.max_offset(&cluster.addr(leader), topic, q).await?;
    }
    ensure!(total == 2, "exactly the two committed messages stored in {topic}, found {total}");
    let mut bodies = seen.bodies();
    bodies.sort();
    ensure!(bodies == vec!["sdk-commit".to_owned(), "sdk-late".to_owned()], "consumed {bodies:?}");
    consumer.shutdown().await;
    producer.shutdown().await;
    admin.shutdown().await;
    cluster.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_producer_answers_the_new_leaders_check_after_a_failover() -> Result<()> {
    let mut cluster = Cluster::start_with(3, tweak).await?;
    let topic = "T73Tx";
    cluster.create_topic(topic, 2).await?;
    let old = cluster.wait_leader(WAIT).await?;
    let producer = TransactionProducer::builder(
        Producer::builder("t73-tx-producers")
            .namesrv_addr(&cluster.namesrv_addr)
            .route_poll_interval(Duration::from_millis(500)),
        BodyListener::new(),
    )
    .build()?;
    producer.start().await?;
    let msg = raftmq_common::message::Message::new(topic, b"sdk-late".to_vec());
    let sent = producer.send_message_in_transaction(msg, &()).await?;
    ensure!(sent.local_transaction_state == LocalTransactionState::Unknown, "{sent:?}");
    cluster.kill(old);
    let new = cluster.wait_leader(WAIT).await?;
    ensure!(new != old, "a new leader");
    // The producer learns the new leader from its route poll and heartbeats it; the new leader's
    // check reaches the listener, whose answer commits the half.
    let seen = Collector::default();
    let consumer = consumer(&cluster, "t73-consumers", topic, &seen).await?;
    seen.wait_for_bodies(&BTreeSet::from(["sdk-late".to_owned()])).await?;
    consumer.shutdown().await;
    producer.shutdown().await;
    cluster.shutdown().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_end_and_repeated_check_answers_commit_a_transaction_once() -> Result<()> {
    let cluster = Cluster::start_with(3, tweak).await?;
    let topic = "T74Tx";
    cluster.create_topic(topic, 4).await?;
    let leader = cluster.wait_leader(WAIT).await?;
    let addr = cluster.addr(leader);
    let mut producer = RawProducer::new();
    producer.heartbeat(&addr).await?;
    let seen = Collector::default();
    let consumer = consumer(&cluster, "t74-consumers", topic, &seen).await?;

    let half = producer.send_half(&addr, topic, 2, "chain").await?;
    // Left unanswered, the half is checked once transactionTimeOut has passed, and its copy again
    // a transactionTimeOut after that check: two copies of one transaction.
    let first = producer.next_check().await?;
    let second = producer.next_check().await?;
    let copy_of = |check: &Check| Half {
        queue_offset: check.header.tran_state_table_offset,
        commit_log_offset: check.header.commit_log_offset,
        ..half.clone()
    };
    let (first_copy, second_copy) = (copy_of(&first), copy_of(&second));
    ensure!(
        half.queue_offset < first_copy.queue_offset && first_copy.queue_offset < second_copy.queue_offset,
        "copies go to the half queue's end: {} {} {}",
        half.queue_offset,
        first_copy.queue_offset,
        second_copy.queue_offset
    );
    let root = half.queue_offset.to_string();
    for check in [&first, &second] {
        let named = check.message.message.property(properties::TRAN_PREPARED_QUEUE_OFFSET);
        ensure!(named == Some(root.as_str()), "a copy names the original half: {named:?}");
    }

    // All three records of the chain are answered COMMIT: the later check first, then the earlier
    // one (its answer travelled slowly), then the producer's own END, later still. One commit.
    producer.end_ok(&addr, &second_copy, commit_or_rollback::COMMIT_TYPE, true).await?;
    producer.end_ok(&addr, &first_copy, commit_or_rollback::COMMIT_TYPE, true).await?;
    producer.end_ok(&addr, &half, commit_or_rollback::COMMIT_TYPE, false).await?;
    seen.wait_for_bodies(&BTreeSet::from(["chain".to_owned()])).await?;

    // A new half claiming the ended chain as its root (a re-sent message that carried the
    // property, or a hostile producer) is a transaction of its own, and commits.
    let claimed = [(properties::TRAN_PREPARED_QUEUE_OFFSET, root.as_str())];
    let imposter = producer.send_half_with(&addr, topic, 1, "imposter", &claimed).await?;
    producer.end_ok(&addr, &imposter, commit_or_rollback::COMMIT_TYPE, false).await?;
    seen.wait_for_bodies(&BTreeSet::from(["chain".to_owned(), "imposter".to_owned()])).await?;

    let admin = Admin::new(&cluster.namesrv_addr)?;
    wait_check_progress(&admin, &addr).await?;
    let max_total = stored_total(&admin, &addr, topic).await?;
    ensure!(max_total == 2, "one committed record each for the chain and the imposter in {topic}, found {max_total}");
    ensure!(seen.all().len() == 2, "consumed {:?}", seen.all());
    ensure!(producer.checks.try_recv().is_err(), "no check once the chain is ended");

    consumer.shutdown().await;
    admin.shutdown().await;
    cluster.shutdown().await
}

/// t75: a half given up after `transactionCheckMax` checks (here 1) is copied to
/// TRANS_CHECK_MAX_TIME_TOPIC; RESUME_CHECK_HALF_MESSAGE (the SDK's `resume_check_half_message`)
/// puts it back with its count at 0, the broker checks it again, and the producer's COMMIT answer
/// delivers it, once. A message that is not a half is refused, naming why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_given_up_half_is_resumed_checked_again_and_committed() -> Result<()> {
    let cluster = Cluster::start_with(3, |c| {
        tweak(c);
        c.transaction_check_max = 1;
    })
    .await?;
    let topic = "T75Tx";
    cluster.create_topic(topic, 4).await?;
    let leader = cluster.wait_leader(WAIT).await?;
    let addr = cluster.addr(leader);
    let mut producer = RawProducer::new();
    producer.heartbeat(&addr).await?;
    producer.send_half(&addr, topic, 1, "t75-resumed").await?;
    // Its one check goes unanswered; the next round gives it up.
    let first = producer.next_check().await?;
    ensure!(first.message.message.body.as_ref() == b"t75-resumed", "checked {:?}", first.message.message.body);
    let admin = Admin::new(&cluster.namesrv_addr)?;
    let deadline = tokio::time::Instant::now() + WAIT;
    let given_up = loop {
        let units = admin
            .query_consume_queue(
                &addr,
                raftmq_common::message::validate::RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC,
                0,
                0,
                1,
                None,
            )
            .await
            .map(|(body, _)| body.queue_data);
        if let Ok(Some(unit)) = units.as_ref().map(|u| u.first()) {
            break unit.physic_offset;
        }
        ensure!(tokio::time::Instant::now() < deadline, "the half was never given up: {units:?}");
        // The give-up is the broker's own round, with no event to wait on: poll it.
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let id = OffsetMsgId::new(addr.parse()?, given_up);
    let took = admin.resume_check_half_message(&id).await?;
    ensure!(took == addr, "sent to the leader {addr}, went to {took}");
    let again = producer.next_check().await?;
    ensure!(again.message.message.body.as_ref() == b"t75-resumed", "checked {:?}", again.message.message.body);
    let half = Half {
        body: "t75-resumed".into(),
        uniq: again.message.message.uniq_key().unwrap_or_default().to_owned(),
        queue_offset: again.header.tran_state_table_offset,
        commit_log_offset: again.header.commit_log_offset,
    };
    let from = addr_map(&cluster).get(&again.from).cloned().context("a check from an unknown broker")?;
    producer.end_ok(&from, &half, commit_or_rollback::COMMIT_TYPE, true).await?;
    let seen = Collector::default();
    let consumer = consumer(&cluster, "t75-consumers", topic, &seen).await?;
    seen.wait_for_bodies(&BTreeSet::from(["t75-resumed".to_owned()])).await?;
    ensure!(stored_total(&admin, &addr, topic).await? == 1, "committed once");

    // Not a half: refused.
    let plain = Producer::builder("t75-plain").namesrv_addr(&cluster.namesrv_addr).build()?;
    plain.start().await?;
    let sent = plain.send(raftmq_common::message::Message::new(topic, b"plain".to_vec())).await?;
    let refused = admin.resume_check_half_message(&sent.offset_msg_id.parse()?).await;
    ensure!(refused.as_ref().is_err_and(|e| e.to_string().contains("not a half message")), "{refused:?}");

    plain.shutdown().await;
    consumer.shutdown().await;
    admin.shutdown().await;
    cluster.shutdown().await
}

/// Hole 5 of issue 31: a transient read error (EMFILE, EIO) made a half read as "not there", and
/// the check skipped it for good: its producer was never asked, the transaction never ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hole5_a_half_that_cannot_be_read_now_is_checked_once_it_can() -> Result<()> {
    let cluster = Cluster::start_with(1, tweak).await?;
    let topic = "T31ReadError";
    cluster.create_topic(topic, 4).await?;
    let leader = cluster.wait_leader(WAIT).await?;
    let addr = cluster.addr(leader);
    let store = cluster.broker(leader).context("the leader runs")?.store().clone();
    let mut producer = RawProducer::new();
    producer.heartbeat(&addr).await?;
    let seen = Collector::default();
    let consumer = consumer(&cluster, "t31-consumers", topic, &seen).await?;

    store.commit_log().inject_read_errors(Some(std::io::ErrorKind::Other));
    let half = producer.send_half(&addr, topic, 1, "held").await?;
    // transactionTimeOut (1 s) and several check rounds (300 ms) pass while reads fail.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    ensure!(producer.checks.try_recv().is_err(), "a half was checked while it could not be read");
    let progress = store.metadata().offsets.query(RMQ_SYS_TRANS_HALF_TOPIC, "CID_RMQ_SYS_TRANS", 0);
    ensure!(
        progress.is_none_or(|p| p <= half.queue_offset),
        "the check progress {progress:?} passed the unread half {}",
        half.queue_offset
    );
    ensure!(store.commit_log().read_errors() > 0, "the failed reads were not counted");

    store.commit_log().inject_read_errors(None);
    let check = producer.next_check().await?;
    ensure!(check.message.message.uniq_key() == Some(half.uniq.as_str()), "the check is about the held half");
    let copy = Half {
        queue_offset: check.header.tran_state_table_offset,
        commit_log_offset: check.header.commit_log_offset,
        ..half.clone()
    };
    producer.end_ok(&addr, &copy, commit_or_rollback::COMMIT_TYPE, true).await?;
    seen.wait_for_bodies(&BTreeSet::from(["held".to_owned()])).await?;
    consumer.shutdown().await;
    cluster.crash_all().await
}
