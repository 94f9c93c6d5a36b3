//! Orderly consumers (`--orderly-consumers N`): push consumers of group [`ORDERLY_GROUP`] with the
//! SDK's orderly listener (`MessageListenerOrderly`), which the `order` checker judges.
//!
//! ```text
//! o<i>.<incarnation>: start ─▶ listener: per message  invoke process (queue, offset, value)
//!                                                     hold it PROCESS_MS (the work)
//!                                                     ok process
//!                     ─▶ after a seeded 6–15 s: shutdown, next incarnation (a new client id)
//! ```
//!
//! The restarts keep queues moving between consumers (every join and leave is a rebalance), so a
//! leader change finds queues whose new owner asks for a lock while the old owner may still be
//! processing: exactly when a lock table that did not survive the leader change lets two consumers
//! process one queue at once. Each incarnation has its own instance name, so its client id is new
//! and it owns nothing its predecessor locked.

use std::time::Duration;

use raftmq_client::PushConsumer;
use raftmq_client::consumer::ConsumeFrom;
use raftmq_client::consumer::listener::ConsumeOrderlyContext;
use raftmq_client::consumer::listener::ConsumeOrderlyStatus;
use raftmq_common::message::MessageExt;
use rand::Rng;
use rand::SeedableRng;
use rand::rngs::StdRng;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::history::Op;
use crate::history::OpF;
use crate::history::OpType;
use crate::history::Recorder;
use crate::workload::WorkloadConfig;

/// The orderly consumers' group.
pub const ORDERLY_GROUP: &str = "jepsen_orderly";
/// How long the listener holds each message (the work it does): long enough that an owner that
/// lost its queue is still inside a call when a wrongly granted new owner starts.
pub const PROCESS_MS: u64 = 40;
/// Shortest life of one incarnation.
pub const CHURN_MIN_MS: u64 = 6_000;
/// Longest life of one incarnation.
pub const CHURN_MAX_MS: u64 = 15_000;

/// Starts `cfg.orderly_consumers` orderly consumers in `set`, seeded by `seed`; they run until `stop`.
pub fn spawn_into(
    set: &mut JoinSet<()>,
    namesrv: &str,
    cfg: &WorkloadConfig,
    rec: &Recorder,
    stop: &watch::Receiver<bool>,
    seed: u64,
) {
    for i in 0..cfg.orderly_consumers {
        let rng = StdRng::seed_from_u64(seed ^ 0x6f72_6465_726c_7900 ^ i as u64);
        set.spawn(orderly_consumer(i, namesrv.to_owned(), cfg.topic.clone(), rec.clone(), stop.clone(), rng));
    }
}

/// Records the start and the end of processing each message, holding it [`PROCESS_MS`] in between.
fn process(rec: &Recorder, process: &str, msgs: &[MessageExt], ctx: &ConsumeOrderlyContext) -> ConsumeOrderlyStatus {
    let q = format!("{}:{}", ctx.message_queue.broker_name, ctx.message_queue.queue_id);
    for m in msgs {
        let value = String::from_utf8_lossy(&m.message.body).into_owned();
        let op = Op::new(OpType::Invoke, OpF::Process, process).queue(&q).offset(m.queue_offset).value(&value);
        rec.record(op);
        // The listener runs on the consumer's listener threads, which may block: this is the work.
        std::thread::sleep(Duration::from_millis(PROCESS_MS));
        rec.record(Op::new(OpType::Ok, OpF::Process, process).queue(&q).offset(m.queue_offset).value(&value));
    }
    ConsumeOrderlyStatus::Success
}

async fn orderly_consumer(
    i: usize,
    namesrv: String,
    topic: String,
    rec: Recorder,
    mut stop: watch::Receiver<bool>,
    mut rng: StdRng,
) {
    let mut incarnation = 0u32;
    while !*stop.borrow() {
        let name = format!("o{i}.{incarnation}");
        incarnation += 1;
        let (listener_rec, listener_name) = (rec.clone(), name.clone());
        let built = PushConsumer::builder(ORDERLY_GROUP)
            .namesrv_addr(&namesrv)
            .instance_name(&name)
            .subscribe(&topic, "*")
            .consume_from(ConsumeFrom::FirstOffset)
            .rebalance_interval(Duration::from_secs(2))
            .listener_orderly(move |msgs: &[MessageExt], ctx: &mut ConsumeOrderlyContext| {
                process(&listener_rec, &listener_name, msgs, ctx)
            })
            .build();
        let c = match built {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(process = %name, error = %e, "orderly consumer not built");
                return;
            }
        };
        if let Err(e) = c.start().await {
            tracing::warn!(process = %name, error = %e, "orderly consumer did not start; retrying");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        let life = Duration::from_millis(rng.random_range(CHURN_MIN_MS..=CHURN_MAX_MS));
        tokio::select! {
            _ = tokio::time::sleep(life) => {}
            _ = stop.wait_for(|s| *s) => {}
        }
        c.shutdown().await;
    }
}
