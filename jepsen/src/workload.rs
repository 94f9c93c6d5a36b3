//! The workload: producers, a consumer group and an offset monitor driving the cluster through the
//! SDK and recording every operation; then the final drain of every queue from offset 0.
//!
//! ```text
//! sync producers  p<i>.<incarnation>: send one unique value, wait, record, repeat   (reorder is checked on these)
//! async producers a<i>.<incarnation>: keep a window of sends in flight
//! tx producers    t<i>.<incarnation>: transactional sends, one at a time (crate::transaction; spawned apart)
//! delay producers d<i>.<incarnation>: delayed and timer sends, one at a time (crate::delay; spawned apart)
//! consumers       c<i>:       subscribe (rebalance), poll, record reads, commit every second
//! orderly         o<i>.<incarnation>: orderly push consumers, restarted every 6–15 s (crate::orderly; spawned apart)
//! pop             q<i>:       POP consumers: pop, ack most, let some expire (crate::pop; spawned apart)
//! monitor:                    the broker's stored consumer offset of every queue, every second
//! final drain:                a fresh consumer assigned every queue, seek 0, read to the max offset
//! ```
//!
//! Outcome rules (docs/reliability.md#history-rules): a send is `ok` with a result, `fail` only when it
//! definitely was not stored (not sent, busy, client-side refusal), `info`
//! otherwise; after an `info` the process retires and `<incarnation>` increments. Values are
//! `"<process>-<counter>"`, unique for the run.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::time::Duration;

use raftmq_client::ClientError;
use raftmq_client::ErrorKind;
use raftmq_client::Producer;
use raftmq_client::PullConsumer;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_common::message::Message;
use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::topic::TopicConfig;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::cluster::Layout;
use crate::db::Db;
use crate::history::NEMESIS_PROCESS;
use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;
use crate::history::ReadMsg;
use crate::history::Recorder;

/// Deadline of one send.
pub const SEND_TIMEOUT_MS: u64 = 3_000;
/// How long one consumer poll waits.
pub const POLL_TIMEOUT_MS: u64 = 500;
/// Period of consumer commits and monitor observations.
pub const OFFSET_PERIOD_MS: u64 = 1_000;

/// What the workload does.
#[derive(Debug, Clone)]
pub struct WorkloadConfig {
    /// The topic.
    pub topic: String,
    /// Write (= read) queues per group.
    pub queues: i32,
    /// Producers sending one message at a time.
    pub sync_producers: usize,
    /// Producers with a window of async sends.
    pub async_producers: usize,
    /// Sends in flight per async producer.
    pub async_window: usize,
    /// Transaction producers (`t<i>`, [`crate::transaction`]); 0 = none.
    pub tx_producers: usize,
    /// Delay producers (`d<i>`, [`crate::delay`]); 0 = none.
    pub delay_producers: usize,
    /// Consumers in the group.
    pub consumers: usize,
    /// Orderly push consumers (`o<i>`, [`crate::orderly`]); 0 = none.
    pub orderly_consumers: usize,
    /// POP consumers (`q<i>`, [`crate::pop`]); 0 = none.
    pub pop_consumers: usize,
    /// The consumer group.
    pub group: String,
}

/// Whether a failed send definitely did not store the message.
pub fn send_definitely_failed(e: &ClientError) -> bool {
    match &e.kind {
        ErrorKind::InvalidArgument
        | ErrorKind::NoRoute
        | ErrorKind::DeadlineExceeded
        | ErrorKind::Connection
        | ErrorKind::Busy
        | ErrorKind::Shutdown => true,
        ErrorKind::Broker { code, .. } => matches!(
            code,
            ResponseCode::TopicNotExist
                | ResponseCode::NoPermission
                | ResponseCode::MessageIllegal
                | ResponseCode::SystemBusy
        ),
        // SERVICE_NOT_AVAILABLE also answers a quorum timeout, after which the entry may still commit;
        // timeouts, lost connections, protocol errors on a stored message, other codes: unknown.
        ErrorKind::Timeout | ErrorKind::OutcomeUnknown | ErrorKind::Protocol => false,
    }
}

/// Creates the topic on every group, retrying until `deadline` (groups need a leader first).
pub async fn setup_topic(db: &Db, cfg: &WorkloadConfig, deadline: Instant) -> Result<(), String> {
    let topic =
        TopicConfig { read_queue_nums: cfg.queues, write_queue_nums: cfg.queues, ..TopicConfig::new(&cfg.topic) };
    let groups = db.layout.groups();
    loop {
        let mut missing = Vec::new();
        for g in &groups {
            if let Err(e) = db.admin().create_topic_in_group(g, &topic).await {
                missing.push(format!("{g}: {e}"));
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!("could not create topic {}: {}", cfg.topic, missing.join("; ")));
        }
        tracing::info!(?missing, "topic not created yet; retrying");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The producers' group of the plain producers (`p<i>`, `a<i>`).
pub const PRODUCER_GROUP: &str = "jepsen_producers";

/// A producer of `group` with one attempt per send.
pub(crate) fn producer(group: &str, namesrv: &str, instance: &str) -> Result<Producer, ClientError> {
    Producer::builder(group)
        .namesrv_addr(namesrv)
        .instance_name(instance)
        .send_timeout(Duration::from_millis(SEND_TIMEOUT_MS))
        // One attempt per op: an SDK retry after an ambiguous refusal could store a value twice.
        .retry_times_when_send_failed(0)
        .retry_times_when_send_async_failed(0)
        .build()
}

/// Records the completion of a send; false when its outcome is unknown (the process retires).
/// `with_offset`: an `ok` names the result's queue offset (false when that offset is not the
/// real queue's, as for a delayed message).
pub(crate) fn record_send(
    rec: &Recorder,
    process: &str,
    value: &str,
    result: &Result<raftmq_client::SendResult, ClientError>,
    with_offset: bool,
) -> bool {
    match result {
        Ok(r) => {
            let q = format!("{}:{}", r.message_queue.broker_name, r.message_queue.queue_id);
            let op = Op::new(OpType::Ok, OpF::Send, process).value(value).queue(q);
            rec.record(if with_offset { op.offset(r.queue_offset) } else { op });
            true
        }
        Err(e) if send_definitely_failed(e) => {
            rec.record(Op::new(OpType::Fail, OpF::Send, process).value(value).error(e.to_string()));
            true
        }
        Err(e) => {
            rec.record(Op::new(OpType::Info, OpF::Send, process).value(value).error(e.to_string()));
            false
        }
    }
}

/// How a sequential producer sends its values: one at a time, each waited for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SequentialStyle {
    /// The process name's prefix (`p` for `p<i>.<incarnation>`).
    pub prefix: &'static str,
    /// The producers' group.
    pub group: &'static str,
    /// The message of a value on a topic; `None` stops the producer.
    pub message: fn(&str, &str) -> Option<Message>,
    /// Whether an `ok` records the result's queue offset ([`record_send`]).
    pub with_offset: bool,
}

/// The plain sequential producers (`p<i>`): reorder is checked on their sends.
const PLAIN: SequentialStyle = SequentialStyle {
    prefix: "p",
    group: PRODUCER_GROUP,
    message: |topic, value| Some(Message::new(topic.to_owned(), value.to_owned())),
    with_offset: true,
};

/// Sends values `<prefix><i>.<incarnation>-<counter>` one at a time until `stop`; after an unknown
/// outcome the next incarnation starts at counter 0.
pub(crate) async fn sequential_producer(
    i: usize,
    style: SequentialStyle,
    namesrv: String,
    topic: String,
    rec: Recorder,
    stop: watch::Receiver<bool>,
) {
    let Ok(p) = producer(style.group, &namesrv, &format!("{}{i}", style.prefix)) else { return };
    if p.start().await.is_err() {
        return;
    }
    let (mut incarnation, mut counter) = (0u32, 0u64);
    while !*stop.borrow() {
        let process = format!("{}{i}.{incarnation}", style.prefix);
        let value = format!("{process}-{counter}");
        counter += 1;
        let Some(message) = (style.message)(&topic, &value) else { break };
        rec.record(Op::new(OpType::Invoke, OpF::Send, &process).value(&value));
        let result = p.send(message).await;
        if !record_send(&rec, &process, &value, &result, style.with_offset) {
            incarnation += 1;
            counter = 0;
        }
    }
    p.shutdown().await;
}

async fn async_producer(
    i: usize,
    window: usize,
    namesrv: String,
    topic: String,
    rec: Recorder,
    stop: watch::Receiver<bool>,
) {
    let Ok(p) = producer(PRODUCER_GROUP, &namesrv, &format!("a{i}")) else { return };
    if p.start().await.is_err() {
        return;
    }
    let (mut incarnation, mut counter) = (0u32, 0u64);
    let mut inflight = JoinSet::new();
    loop {
        while !*stop.borrow() && inflight.len() < window.max(1) {
            let process = format!("a{i}.{incarnation}");
            let value = format!("{process}-{counter}");
            counter += 1;
            rec.record(Op::new(OpType::Invoke, OpF::Send, &process).value(&value));
            let send = p.send_async(Message::new(topic.clone(), value.clone()));
            inflight.spawn(async move { (process, value, send.await) });
        }
        let Some(done) = inflight.join_next().await else { break };
        let Ok((process, value, result)) = done else { continue };
        if !record_send(&rec, &process, &value, &result, true) && process == format!("a{i}.{incarnation}") {
            incarnation += 1;
            counter = 0;
        }
    }
    p.shutdown().await;
}

fn queue_of(layout: &Layout, m: &MessageExt) -> String {
    let group = layout.node_by_addr(&m.store_host.to_string()).map_or("?", |n| n.group.as_str());
    format!("{group}:{}", m.queue_id)
}

fn read_msgs(m: &[MessageExt]) -> Vec<ReadMsg> {
    m.iter()
        .map(|m| ReadMsg {
            offset: m.queue_offset,
            value: String::from_utf8_lossy(&m.message.body).into_owned(),
            copy: None,
        })
        .collect()
}

fn mq_label(mq: &MessageQueue) -> String {
    format!("{}:{}", mq.broker_name, mq.queue_id)
}

async fn consumer(
    i: usize,
    namesrv: String,
    cfg: WorkloadConfig,
    layout: Layout,
    rec: Recorder,
    stop: watch::Receiver<bool>,
) {
    let process = format!("c{i}");
    let built = PullConsumer::builder(&cfg.group)
        .namesrv_addr(&namesrv)
        .subscribe(&cfg.topic, "*")
        .instance_name(&process)
        .consume_from(ConsumeFrom::FirstOffset)
        .auto_commit(false)
        .rebalance_interval(Duration::from_secs(2))
        .build();
    let Ok(c) = built else { return };
    if let Err(e) = c.start().await {
        tracing::warn!(%process, error = %e, "consumer did not start");
        return;
    }
    let mut assigned: BTreeSet<MessageQueue> = BTreeSet::new();
    let mut epoch = 0u64;
    let mut next_commit = Instant::now() + Duration::from_millis(OFFSET_PERIOD_MS);
    // The epoch also catches a queue released and taken again between two looks: same set, but
    // restarted from its committed offset.
    let note_assignment = |assigned: &mut BTreeSet<MessageQueue>, epoch: &mut u64| {
        let (now_epoch, now_assigned) = (c.assignment_epoch(), c.assignment());
        if now_assigned != *assigned || now_epoch != *epoch {
            *epoch = now_epoch;
            let names: Vec<String> = now_assigned.iter().map(mq_label).collect();
            rec.record(Op::new(OpType::Ok, OpF::Assign, &process).value(names.join(",")));
            *assigned = now_assigned;
        }
    };
    while !*stop.borrow() {
        note_assignment(&mut assigned, &mut epoch);
        match c.poll(Duration::from_millis(POLL_TIMEOUT_MS)).await {
            Ok(msgs) if msgs.is_empty() => {}
            Ok(msgs) => {
                // A rebalance during the poll restarted queues from their committed offsets, and
                // the poll may return their first messages: the history shows it before the read
                // (the poll returns only messages of the current assignment).
                note_assignment(&mut assigned, &mut epoch);
                let q = msgs.first().map(|m| queue_of(&layout, m)).unwrap_or_default();
                rec.record(Op::new(OpType::Invoke, OpF::Read, &process).queue(&q));
                rec.record(Op::new(OpType::Ok, OpF::Read, &process).queue(&q).msgs(read_msgs(&msgs)));
            }
            Err(e) => {
                rec.record(Op::new(OpType::Invoke, OpF::Read, &process));
                rec.record(Op::new(OpType::Info, OpF::Read, &process).error(e.to_string()));
            }
        }
        if Instant::now() >= next_commit {
            next_commit = Instant::now() + Duration::from_millis(OFFSET_PERIOD_MS);
            c.commit().await;
            for mq in &assigned {
                if let Ok(Some(off)) = c.committed(mq).await {
                    rec.record(
                        Op::new(OpType::Ok, OpF::CommitOffset, &process)
                            .value(&cfg.group)
                            .queue(mq_label(mq))
                            .offset(off),
                    );
                }
            }
        }
    }
    c.shutdown().await;
}

async fn monitor(
    db_admin: raftmq_client::Admin,
    groups: Vec<String>,
    cfg: WorkloadConfig,
    rec: Recorder,
    stop: watch::Receiver<bool>,
) {
    while !*stop.borrow() {
        for g in &groups {
            let Ok(addr) = db_admin.master_addr_of_group(g).await else { continue };
            for q in 0..cfg.queues {
                if let Ok(Some(off)) = db_admin.query_consumer_offset(&addr, &cfg.group, &cfg.topic, q).await {
                    rec.record(
                        Op::new(OpType::Ok, OpF::FetchOffset, "monitor")
                            .value(&cfg.group)
                            .queue(format!("{g}:{q}"))
                            .offset(off)
                            .node(&addr),
                    );
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(OFFSET_PERIOD_MS)).await;
    }
}

/// Starts every workload task but the transaction and delay producers (their modules spawn them,
/// as they build on this one); they run until `stop` turns true.
pub fn spawn(
    db: &Db,
    cfg: &WorkloadConfig,
    rec: &Recorder,
    stop: &watch::Receiver<bool>,
) -> Result<JoinSet<()>, String> {
    let namesrv = db.layout.namesrv_addr();
    let mut set = JoinSet::new();
    for i in 0..cfg.sync_producers {
        set.spawn(sequential_producer(i, PLAIN, namesrv.clone(), cfg.topic.clone(), rec.clone(), stop.clone()));
    }
    for i in 0..cfg.async_producers {
        set.spawn(async_producer(i, cfg.async_window, namesrv.clone(), cfg.topic.clone(), rec.clone(), stop.clone()));
    }
    for i in 0..cfg.consumers {
        set.spawn(consumer(i, namesrv.clone(), cfg.clone(), db.layout.clone(), rec.clone(), stop.clone()));
    }
    let admin = raftmq_client::Admin::new(&namesrv).map_err(|e| e.to_string())?;
    set.spawn(monitor(admin, db.layout.groups(), cfg.clone(), rec.clone(), stop.clone()));
    Ok(set)
}

/// Waits until `check` holds twice, at least `confirm` apart (what was stored or applied between
/// two looks shows in the second), polling every `poll`, or until `deadline`. Records a `nemesis`
/// op `label`: `ok` when settled, `info` with the last reason otherwise (the checkers then judge).
pub(crate) async fn settle_twice<F, Fut>(
    rec: &Recorder,
    label: &str,
    confirm: Duration,
    poll: Duration,
    deadline: Instant,
    mut check: F,
) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    rec.record(Op::new(OpType::Invoke, OpF::Nemesis, NEMESIS_PROCESS).value(label));
    let started = Instant::now();
    let mut first_settled: Option<Instant> = None;
    let mut last_error = String::from("never looked");
    loop {
        // Polling is the only way to see replicated progress from outside the broker.
        match check().await {
            Ok(()) => match first_settled {
                Some(at) if at.elapsed() >= confirm => {
                    tracing::info!(took = ?started.elapsed(), label, "settled");
                    rec.record(Op::new(OpType::Ok, OpF::Nemesis, NEMESIS_PROCESS).value(label));
                    return true;
                }
                Some(_) => {}
                None => first_settled = Some(Instant::now()),
            },
            Err(e) => {
                first_settled = None;
                last_error = e;
            }
        }
        if Instant::now() >= deadline {
            tracing::warn!(error = %last_error, label, "not settled before the deadline");
            rec.record(
                Op::new(OpType::Info, OpF::Nemesis, NEMESIS_PROCESS)
                    .value(label)
                    .error(format!("not settled after {:?}: {last_error}", started.elapsed())),
            );
            return false;
        }
        tokio::time::sleep(poll).await;
    }
}

/// Reads every queue of the topic from offset 0 up to its max offset (or until `deadline`) and
/// records one `final-read` per queue: `ok` with every message, or `fail` when incomplete.
pub async fn final_drain(db: &Db, cfg: &WorkloadConfig, rec: &Recorder, deadline: Instant) -> Result<(), String> {
    let namesrv = db.layout.namesrv_addr();
    let mqs: Vec<MessageQueue> = db
        .layout
        .groups()
        .iter()
        .flat_map(|g| (0..cfg.queues).map(move |q| MessageQueue::new(&cfg.topic, g.clone(), q)))
        .collect();
    let mut max: BTreeMap<MessageQueue, i64> = BTreeMap::new();
    while max.len() < mqs.len() && Instant::now() < deadline {
        for mq in &mqs {
            if max.contains_key(mq) {
                continue;
            }
            let Ok(addr) = db.admin().master_addr_of_group(&mq.broker_name).await else { continue };
            if let Ok(m) = db.admin().max_offset(&addr, &mq.topic, mq.queue_id).await {
                max.insert(mq.clone(), m);
            }
        }
        if max.len() < mqs.len() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let c = PullConsumer::builder("jepsen_final_drain")
        .namesrv_addr(&namesrv)
        .assign(mqs.clone())
        .instance_name("final")
        .auto_commit(false)
        .pull_batch_size(32)
        .build()
        .map_err(|e| e.to_string())?;
    c.start().await.map_err(|e| e.to_string())?;
    for mq in &mqs {
        c.seek(mq, 0).map_err(|e| e.to_string())?;
    }
    let mut got: BTreeMap<String, BTreeMap<i64, Vec<String>>> = BTreeMap::new();
    let done = |got: &BTreeMap<String, BTreeMap<i64, Vec<String>>>| {
        mqs.iter().all(|mq| {
            let Some(&m) = max.get(mq) else { return false };
            m == 0 || got.get(&mq_label(mq)).and_then(|o| o.keys().next_back()).is_some_and(|&last| last + 1 >= m)
        })
    };
    while !done(&got) && Instant::now() < deadline {
        match c.poll(Duration::from_millis(POLL_TIMEOUT_MS)).await {
            Ok(msgs) => {
                for m in &msgs {
                    let body = String::from_utf8_lossy(&m.message.body).into_owned();
                    got.entry(queue_of(&db.layout, m)).or_default().entry(m.queue_offset).or_default().push(body);
                }
            }
            Err(e) => tracing::warn!(error = %e, "final drain poll failed"),
        }
    }
    c.shutdown().await;
    for mq in &mqs {
        let label = mq_label(mq);
        rec.record(Op::new(OpType::Invoke, OpF::FinalRead, "final").queue(&label));
        let msgs: Vec<ReadMsg> = got
            .get(&label)
            .map(|o| {
                o.iter()
                    .flat_map(|(off, vs)| vs.iter().map(|v| ReadMsg { offset: *off, value: v.clone(), copy: None }))
                    .collect()
            })
            .unwrap_or_default();
        let last = msgs.last().map_or(0, |m| m.offset + 1);
        match max.get(mq) {
            Some(&m) if last >= m => {
                rec.record(Op::new(OpType::Ok, OpF::FinalRead, "final").queue(&label).msgs(msgs).offset(m));
            }
            m => {
                let why = format!("drain incomplete: read up to {last}, max offset {m:?}");
                rec.record(Op::new(OpType::Fail, OpF::FinalRead, "final").queue(&label).msgs(msgs).error(why));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use raftmq_common::protocol::ResponseCode;

    use super::*;

    #[test]
    fn only_definite_failures_are_fail() {
        let e = |kind| ClientError::new(kind, "send", "x");
        assert!(send_definitely_failed(&e(ErrorKind::Connection)));
        assert!(send_definitely_failed(&e(ErrorKind::Broker { code: ResponseCode::TopicNotExist, remark: None })));
        assert!(!send_definitely_failed(&e(ErrorKind::Broker {
            code: ResponseCode::ServiceNotAvailable,
            remark: None
        })));
        assert!(!send_definitely_failed(&e(ErrorKind::Timeout)));
        assert!(!send_definitely_failed(&e(ErrorKind::OutcomeUnknown)));
        assert!(!send_definitely_failed(&e(ErrorKind::Protocol)));
        assert!(!send_definitely_failed(&e(ErrorKind::Broker { code: ResponseCode::SystemError, remark: None })));
    }
}
