//! POP consumers (`--pop-consumers N`): RocketMQ 5 POP consumption of the workload's topic by group
//! [`POP_GROUP`] over remoting (POP_MESSAGE, ACK_MESSAGE), which the `pop` checker judges.
//!
//! ```text
//! q<i>: for each broker group in turn: invoke pop ─▶ POP_MESSAGE to the group's leader
//!         ok pop (the messages: offset, value)     SERVICE_NOT_AVAILABLE ─▶ fail, follow the hint
//!         per message (seeded): ack now (most) │ never ack (its invisible time expires, it comes
//!         back) │ ack after the invisible time (a stale receipt: the ack fails, it comes back)
//!         invoke ack ─▶ ok (acked for good) │ fail (stale receipt) │ info (unknown)
//!         the acks of one pop go out at once, from processes q<i>a<k> (one ack each at a time),
//!         as a client acks a batch; late acks from q<i>l<n>
//! settle (after the final heal): one process pops and acks everything until every group answered
//!         nothing for longer than the invisible time plus a revive pass
//! ```
//!
//! Receipts are built as RocketMQ's clients build them (`ExtraInfo` from the response header).

use std::collections::BTreeMap;
use std::time::Duration;

use raftmq_common::message::MessageExt;
use raftmq_common::message::properties;
use raftmq_common::message::record::DecodeOptions;
use raftmq_common::message::record::decode_all;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::header::pop::AckMessageRequestHeader;
use raftmq_common::protocol::header::pop::ExtraInfo;
use raftmq_common::protocol::header::pop::PopMessageRequestHeader;
use raftmq_common::protocol::header::pop::PopMessageResponseHeader;
use raftmq_common::protocol::header::pop::PopTopicType;
use raftmq_common::protocol::header::pop::start_offset_of;
use raftmq_common::protocol::leader_hint::parse_leader_hint;
use raftmq_common::remoting::RemotingClient;
use rand::Rng;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::cluster::Layout;
use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;
use crate::history::ReadMsg;
use crate::history::Recorder;
use crate::workload::WorkloadConfig;

/// The POP consumers' group.
pub const POP_GROUP: &str = "jepsen_pop";
/// The invisible time the consumers ask for.
pub const POP_INVISIBLE_MS: i64 = 4_000;
/// How long one pop may wait for messages.
pub const POP_POLL_MS: i64 = 1_000;
/// Messages per pop.
pub const POP_BATCH_COUNT: i32 = 32;
/// Deadline of one pop or ack beyond its poll time.
pub const POP_RPC_TIMEOUT_MS: u64 = 3_000;
/// Per mille of messages never acked (they come back after their invisible time).
pub const POP_SKIP_PER_MILLE: u32 = 80;
/// Per mille of messages acked only after their invisible time (a stale receipt, usually).
pub const POP_LATE_PER_MILLE: u32 = 20;
/// How long the final settle may take.
pub const POP_SETTLE_TIMEOUT_MS: u64 = 180_000;
/// The settle is done once every group answered nothing for this long: longer than the invisible
/// time plus a revive pass, so nothing left in flight can still come back.
pub const POP_SETTLE_QUIET_MS: u64 = POP_INVISIBLE_MS as u64 + 3_000;

/// The remoting addresses of every replica of each group (spares included), group by group.
fn group_addrs(layout: &Layout) -> Vec<(String, Vec<String>)> {
    layout
        .groups()
        .into_iter()
        .map(|g| {
            let addrs = layout.members(&g).iter().chain(layout.spares(&g).iter()).map(|n| n.remoting_addr()).collect();
            (g, addrs)
        })
        .collect()
}

/// Starts `cfg.pop_consumers` POP consumers in `set`, seeded by `seed`; they run until `stop`.
pub fn spawn_into(
    set: &mut JoinSet<()>,
    layout: &Layout,
    cfg: &WorkloadConfig,
    rec: &Recorder,
    stop: &watch::Receiver<bool>,
    seed: u64,
) {
    for i in 0..cfg.pop_consumers {
        let rng = StdRng::seed_from_u64(seed ^ 0x706f_7000_0000_0000 ^ i as u64);
        let consumer = PopConsumer::new(format!("q{i}"), group_addrs(layout), cfg.topic.clone(), rec.clone());
        set.spawn(consumer.run(stop.clone(), rng));
    }
}

/// One popped message with its receipt.
struct Popped {
    message: MessageExt,
    extra: ExtraInfo,
}

/// How a pop ended.
enum PopEnd {
    /// Messages (maybe none).
    Got(Vec<Popped>),
    /// Not the leader (or no leader yet): try elsewhere.
    Refused(Option<String>),
    /// No answer.
    Unknown(String),
}

struct PopConsumer {
    process: String,
    groups: Vec<(String, Vec<String>)>,
    /// The address each group answered from last (or was hinted).
    leaders: BTreeMap<String, String>,
    topic: String,
    rec: Recorder,
    client: RemotingClient,
}

impl PopConsumer {
    fn new(process: String, groups: Vec<(String, Vec<String>)>, topic: String, rec: Recorder) -> Self {
        let leaders = groups.iter().filter_map(|(g, addrs)| Some((g.clone(), addrs.first()?.clone()))).collect();
        PopConsumer { process, groups, leaders, topic, rec, client: RemotingClient::new() }
    }

    async fn run(mut self, mut stop: watch::Receiver<bool>, mut rng: StdRng) {
        let mut late = JoinSet::new();
        let mut late_count = 0u64;
        while !*stop.borrow() {
            for g in 0..self.groups.len() {
                let group = self.groups[g].0.clone();
                let popped = tokio::select! {
                    p = self.pop_recorded(&group) => p,
                    _ = stop.wait_for(|s| *s) => break,
                };
                let addr = self.leaders.get(&group).cloned().unwrap_or_default();
                let mut now = Vec::new();
                for p in popped {
                    let roll = rng.random_range(0..1_000);
                    if roll < POP_SKIP_PER_MILLE {
                        continue;
                    }
                    if roll < POP_SKIP_PER_MILLE + POP_LATE_PER_MILLE {
                        let (client, rec, topic, addr) =
                            (self.client.clone(), self.rec.clone(), self.topic.clone(), addr.clone());
                        let process = format!("{}l{late_count}", self.process);
                        late_count += 1;
                        late.spawn(async move {
                            tokio::time::sleep(Duration::from_millis(POP_INVISIBLE_MS as u64 + 500)).await;
                            ack_recorded(&client, &rec, &process, &topic, &addr, &p).await;
                        });
                        continue;
                    }
                    now.push(p);
                }
                self.ack_all(&addr, &now).await;
            }
        }
        late.abort_all();
    }

    /// Acks `popped` at once, each from its own ack process.
    async fn ack_all(&self, addr: &str, popped: &[Popped]) {
        let acks = popped.iter().enumerate().map(|(k, p)| {
            let process = format!("{}a{k}", self.process);
            async move { ack_recorded(&self.client, &self.rec, &process, &self.topic, addr, p).await }
        });
        futures::future::join_all(acks).await;
    }

    /// One recorded pop from `group`'s leader; the messages it handed out.
    async fn pop_recorded(&mut self, group: &str) -> Vec<Popped> {
        let addr = self.leaders.get(group).cloned().unwrap_or_default();
        self.rec.record(Op::new(OpType::Invoke, OpF::Pop, &self.process).queue(group).node(&addr));
        match pop(&self.client, &addr, &self.topic, group).await {
            PopEnd::Got(popped) => {
                let msgs = popped
                    .iter()
                    .map(|p| ReadMsg {
                        offset: p.message.queue_offset,
                        value: String::from_utf8_lossy(&p.message.message.body).into_owned(),
                        copy: Some(copy_of(&p.message)),
                    })
                    .collect();
                self.rec.record(Op::new(OpType::Ok, OpF::Pop, &self.process).queue(group).node(&addr).msgs(msgs));
                popped
            }
            PopEnd::Refused(hint) => {
                self.rec.record(
                    Op::new(OpType::Fail, OpF::Pop, &self.process).queue(group).node(&addr).error("not the leader"),
                );
                self.next_addr(group, hint);
                tokio::time::sleep(Duration::from_millis(100)).await;
                Vec::new()
            }
            PopEnd::Unknown(e) => {
                // Anything it handed out stays invisible, then comes back: nothing to retire.
                self.rec.record(Op::new(OpType::Info, OpF::Pop, &self.process).queue(group).node(&addr).error(e));
                self.next_addr(group, None);
                Vec::new()
            }
        }
    }

    /// The hinted leader, else the next replica of the group.
    fn next_addr(&mut self, group: &str, hint: Option<String>) {
        let Some((_, addrs)) = self.groups.iter().find(|(g, _)| g == group) else { return };
        let next = match hint {
            Some(h) => h,
            None => {
                let current = self.leaders.get(group);
                let at = addrs.iter().position(|a| Some(a) == current).map_or(0, |i| (i + 1) % addrs.len());
                addrs[at].clone()
            }
        };
        self.leaders.insert(group.to_owned(), next);
    }
}

/// POP_MESSAGE of every queue of `topic` at `addr`.
async fn pop(client: &RemotingClient, addr: &str, topic: &str, group: &str) -> PopEnd {
    let header = PopMessageRequestHeader {
        consumer_group: POP_GROUP.into(),
        topic: topic.into(),
        queue_id: -1,
        max_msg_nums: POP_BATCH_COUNT,
        invisible_time: POP_INVISIBLE_MS,
        poll_time: POP_POLL_MS,
        born_time: 0,
        init_mode: 0,
        exp_type: Some("TAG".into()),
        exp: Some("*".into()),
        order: Some(false),
        attempt_id: None,
    };
    let request = RemotingCommand::request_with_header(RequestCode::PopMessage, &header);
    let timeout = Duration::from_millis(POP_RPC_TIMEOUT_MS + POP_POLL_MS as u64);
    let response = match client.invoke(addr, request, timeout).await {
        Ok(r) => r,
        Err(e) => return PopEnd::Unknown(e.to_string()),
    };
    match response.response_code() {
        ResponseCode::Success => {}
        ResponseCode::PollingTimeout => return PopEnd::Got(Vec::new()),
        ResponseCode::ServiceNotAvailable => {
            return PopEnd::Refused(response.remark.as_deref().and_then(parse_leader_hint).map(str::to_owned));
        }
        other => return PopEnd::Unknown(format!("{other:?}: {:?}", response.remark)),
    }
    let Ok(h) = response.decode_header::<PopMessageResponseHeader>() else {
        return PopEnd::Unknown("a POP answer without its header".into());
    };
    let messages = match decode_all(&response.body, DecodeOptions::verify_crc()) {
        Ok(m) => m,
        Err(e) => return PopEnd::Unknown(format!("a POP body that does not decode: {e}")),
    };
    let start_info = h.start_offset_info.unwrap_or_default();
    let popped = messages
        .into_iter()
        .filter_map(|message| {
            let topic_type =
                if message.message.topic.as_str() == topic { PopTopicType::Normal } else { PopTopicType::Retry };
            let ck_offset = start_offset_of(&start_info, topic_type, message.queue_id)?;
            let extra = ExtraInfo {
                ck_offset,
                pop_time: h.pop_time,
                invisible_time: h.invisible_time,
                revive_qid: h.revive_qid,
                topic_type,
                broker_name: group.to_owned(),
                queue_id: message.queue_id,
                queue_offset: Some(message.queue_offset),
            };
            Some(Popped { message, extra })
        })
        .collect();
    PopEnd::Got(popped)
}

/// Which stored copy a popped message is: the offsetMsgId of the record first stored (a retry
/// carries it as ORIGIN_MESSAGE_ID).
fn copy_of(message: &MessageExt) -> String {
    match message.message.properties.get(properties::ORIGIN_MESSAGE_ID) {
        Some(origin) if !origin.is_empty() => origin.to_owned(),
        _ => message.offset_msg_id().to_string(),
    }
}

/// One recorded ACK_MESSAGE: `ok` acked, `fail` a stale receipt (the message comes back), `info`
/// unknown.
async fn ack_recorded(client: &RemotingClient, rec: &Recorder, process: &str, topic: &str, addr: &str, p: &Popped) {
    let value = String::from_utf8_lossy(&p.message.message.body).into_owned();
    let acked = vec![ReadMsg { offset: p.message.queue_offset, value: value.clone(), copy: Some(copy_of(&p.message)) }];
    rec.record(Op::new(OpType::Invoke, OpF::Ack, process).value(&value).node(addr).msgs(acked.clone()));
    let header = AckMessageRequestHeader {
        consumer_group: POP_GROUP.into(),
        topic: topic.into(),
        queue_id: p.extra.queue_id,
        extra_info: p.extra.to_string(),
        offset: p.message.queue_offset,
    };
    let request = RemotingCommand::request_with_header(RequestCode::AckMessage, &header);
    let end = match client.invoke(addr, request, Duration::from_millis(POP_RPC_TIMEOUT_MS)).await {
        Ok(r) if r.response_code() == ResponseCode::Success => Op::new(OpType::Ok, OpF::Ack, process),
        // Stale, or refused before anything was proposed (not the leader): not acked.
        Ok(r) if matches!(r.response_code(), ResponseCode::NoMessage | ResponseCode::InvalidParameter) => {
            Op::new(OpType::Fail, OpF::Ack, process).error(format!("{:?}", r.remark))
        }
        Ok(r) => Op::new(OpType::Info, OpF::Ack, process).error(format!("{:?}: {:?}", r.response_code(), r.remark)),
        Err(e) => Op::new(OpType::Info, OpF::Ack, process).error(e.to_string()),
    };
    rec.record(end.value(&value).node(addr).msgs(acked));
}

/// After the final heal: pops and acks everything left until every group has been quiet for
/// [`POP_SETTLE_QUIET_MS`] or `deadline` passes; records `settle` as a nemesis-free process.
pub async fn settle(layout: &Layout, topic: &str, rec: &Recorder, deadline: Instant) {
    let mut c = PopConsumer::new("qsettle".into(), group_addrs(layout), topic.to_owned(), rec.clone());
    let mut quiet_since: BTreeMap<String, Instant> = BTreeMap::new();
    let groups: Vec<String> = c.groups.iter().map(|(g, _)| g.clone()).collect();
    rec.record(Op::new(OpType::Invoke, OpF::PopSettle, "qsettle"));
    while Instant::now() < deadline {
        for group in &groups {
            let popped = c.pop_recorded(group).await;
            if popped.is_empty() {
                quiet_since.entry(group.clone()).or_insert_with(Instant::now);
            } else {
                quiet_since.remove(group);
            }
            let addr = c.leaders.get(group).cloned().unwrap_or_default();
            c.ack_all(&addr, &popped).await;
        }
        let quiet = Duration::from_millis(POP_SETTLE_QUIET_MS);
        if groups.iter().all(|g| quiet_since.get(g).is_some_and(|t| t.elapsed() >= quiet)) {
            rec.record(Op::new(OpType::Ok, OpF::PopSettle, "qsettle"));
            return;
        }
    }
    rec.record(Op::new(OpType::Info, OpF::PopSettle, "qsettle").error("the POP settle ran out of time"));
}
