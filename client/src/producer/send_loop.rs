//! The attempt loop of a send (the diagram in the producer's header): queue choice by the fault
//! strategy, the leader's address, failover steps within a group, retries on other groups, and
//! the one deadline every attempt shares. An outcome-unknown attempt ends the send, never retried.

use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use raftmq_common::limits::PRODUCER_SEND_ATTEMPTS_MAX_COUNT;
use raftmq_common::limits::PRODUCER_SEND_STALL_PROBE_MS;
use raftmq_common::message::Message;
use raftmq_common::message::MessageQueue;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::sync::lock;
use tokio::time::Instant;

use crate::clock::now_ms;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;
use crate::failover::FAILOVER_STEPS_MAX;
use crate::route::TopicPublishInfo;
use crate::route::WriteTarget;
use crate::route::parse_leader_hint;
use crate::send_result::SendResult;
use crate::send_result::SendStatus;
use crate::send_result::process_send_response;

use super::inner::Producer;
use super::outgoing::Outgoing;

impl Producer {
    pub(super) async fn send_with_retries(&self, mut msg: Message, retries: u32) -> Result<SendResult> {
        self.check_running("send")?;
        let out = self.prepare(&mut msg, "send")?;
        self.send_default(out, 1 + retries, "send").await
    }

    pub(super) async fn publish_info(&self, topic: &str, op: &'static str) -> Result<Arc<TopicPublishInfo>> {
        let config = &self.inner.config;
        let default = Some((config.create_topic_key.as_str(), config.default_topic_queue_nums));
        let info = self.inner.routes.publish_info(topic, default).await.map_err(|mut e| {
            e.operation = op;
            e
        })?;
        self.note_route_for_heartbeat(topic);
        Ok(info)
    }

    /// The queue for the next attempt, as of `now` (the caller's clock reading: a send reads the
    /// clock once per attempt, not once per use).
    pub(super) fn select_queue(
        &self,
        info: &TopicPublishInfo,
        last_broker: Option<&str>,
        now: Instant,
    ) -> Option<MessageQueue> {
        let now_ms = self.clock_ms(now);
        lock(&self.inner.fault).select_one_message_queue(info, last_broker, now_ms)
    }

    /// Records an attempt on `broker_name` that ran from `began` to `ended`.
    pub(super) fn update_fault(&self, broker_name: &str, began: Instant, ended: Instant, isolation: bool) {
        let latency_ms = u64::try_from(ended.saturating_duration_since(began).as_millis()).unwrap_or(u64::MAX);
        let now_ms = self.clock_ms(ended);
        lock(&self.inner.fault).update_fault_item(broker_name, latency_ms, isolation, now_ms);
    }

    /// `now` on the fault strategy's clock (ms since the producer started).
    pub(super) fn clock_ms(&self, now: Instant) -> u64 {
        u64::try_from(now.saturating_duration_since(self.inner.epoch).as_millis()).unwrap_or(u64::MAX)
    }

    /// Where a write to `mq` goes: its group's write address, or a replica to ask when that one is
    /// suspect or `probe`; refreshing the group's route (rate-limited) when nothing is known.
    pub(super) async fn resolve_target(&self, mq: &MessageQueue, op: &'static str, probe: bool) -> Result<WriteTarget> {
        let routes = &self.inner.routes;
        if let Some(target) = routes.write_target(&mq.broker_name, probe) {
            return Ok(target);
        }
        routes.refresh_group(&mq.broker_name, Some(&mq.topic), Instant::now()).await;
        if routes.write_target(&mq.broker_name, probe).is_none()
            && let Err(e) = routes.update_route(&mq.topic).await
        {
            tracing::debug!(topic = %mq.topic, error = %e, "route refresh for a missing broker address failed");
        }
        routes.write_target(&mq.broker_name, probe).ok_or_else(|| {
            ClientError::new(ErrorKind::NoRoute, op, format!("The broker[{}] not exist", mq.broker_name))
                .with_context("topic", &mq.topic)
                .with_context("broker", &mq.broker_name)
        })
    }

    /// The write address of `mq`'s group (a replica to ask when it is suspect).
    pub(super) async fn resolve_addr(&self, mq: &MessageQueue, op: &'static str) -> Result<String> {
        self.resolve_target(mq, op, false).await.map(|t| t.addr)
    }

    /// Resolves once `mq`'s group has a write address other than `addr`: while a send to `addr`
    /// that began at `began` waits, every [`PRODUCER_SEND_STALL_PROBE_MS`] the group's route is
    /// refreshed (rate-limited and shared with every other caller). A send answered in time never
    /// gets past the first sleep.
    pub(super) async fn leader_moved_away(&self, mq: &MessageQueue, addr: &str, began: Instant) -> String {
        let routes = &self.inner.routes;
        let probe = Duration::from_millis(PRODUCER_SEND_STALL_PROBE_MS);
        let mut wake = began + probe;
        loop {
            tokio::time::sleep_until(wake).await;
            let now = Instant::now();
            wake = now + probe;
            routes.refresh_group(&mq.broker_name, Some(&mq.topic), now).await;
            if let Some(target) = routes.write_target(&mq.broker_name, false)
                && !target.probing
                && target.addr != addr
            {
                return target.addr;
            }
        }
    }

    /// The publish info of `topic`, waiting (within `deadline`, at the groups' refresh rate) while
    /// a known topic has no writable queue because its groups are electing a leader.
    pub(super) async fn publish_info_within(
        &self,
        topic: &str,
        op: &'static str,
        deadline: Instant,
    ) -> Result<Arc<TopicPublishInfo>> {
        self.publish_info_by(topic, op, deadline).await.map(|(info, _)| info)
    }

    /// [`Self::publish_info_within`], and whether it was answered on the first poll (so a clock
    /// read before the call is still current).
    async fn publish_info_by(
        &self,
        topic: &str,
        op: &'static str,
        deadline: Instant,
    ) -> Result<(Arc<TopicPublishInfo>, bool)> {
        let mut at_once = true;
        loop {
            // A known route answers on the first poll: no deadline timer is armed for it (this is
            // every send's path).
            let lookup = self.publish_info(topic, op);
            let mut lookup = std::pin::pin!(lookup);
            let result = match poll_once(lookup.as_mut()).await {
                Poll::Ready(result) => result,
                Poll::Pending => match tokio::time::timeout_at(deadline, lookup).await {
                    Ok(result) => {
                        at_once = false;
                        result
                    }
                    Err(_) => {
                        return Err(ClientError::new(
                            ErrorKind::NoRoute,
                            op,
                            "no writable queue before the send timeout",
                        )
                        .with_context("topic", topic));
                    }
                },
            };
            match result {
                Err(e)
                    if e.kind == ErrorKind::NoRoute
                        && self.inner.routes.cached_route(topic).is_some()
                        && !remaining(deadline).is_zero() =>
                {
                    at_once = false;
                }
                result => return result.map(|info| (info, at_once)),
            }
        }
    }

    /// One synchronous attempt on `mq` at `addr`, begun at `began` (the caller's clock reading),
    /// answered by `deadline`.
    pub(super) async fn attempt(
        &self,
        out: &Outgoing,
        mq: &MessageQueue,
        addr: &str,
        began: Instant,
        deadline: Instant,
    ) -> Result<SendResult> {
        // The wall clock only when tracing: this is every send's path.
        let began_ms = self.inner.trace.is_some().then(now_ms);
        let timeout = deadline.saturating_duration_since(began);
        let call = self.inner.remoting.invoke_until(addr, self.send_command(out, mq), deadline, timeout);
        let response = tokio::select! {
            biased;
            response = call => response.map_err(|e| ClientError::remoting("send", e))?,
            leader = self.leader_moved_away(mq, addr, began) => {
                // The old leader may have committed the message before it stopped answering (a new
                // leader then holds it), so this is not a refusal: the caller learns the outcome is
                // unknown at once instead of after the send timeout, and the refreshed route sends
                // its next message to `leader`. Resending here would store it twice.
                return Err(ClientError::new(
                    ErrorKind::OutcomeUnknown,
                    "send",
                    format!("no answer from {addr} while the group elected a new leader ({leader}); the message may or may not be stored"),
                )
                .with_context("addr", addr));
            }
        };
        let result = process_send_response(&response, &out.topic, &mq.broker_name, &out.msg_id);
        if let (Ok(r), Some(began_ms)) = (&result, began_ms) {
            self.trace_attempt(out, r, addr, began_ms, began.elapsed());
        }
        result
    }

    /// `sendDefaultImpl` for synchronous sends: up to `attempts` tries within one deadline, plus the
    /// failover steps within one group ([`FailoverStep`]), which do not count as tries.
    ///
    /// The clock is read once before the first attempt (when nothing waited since the send began)
    /// and once after each: every send's path, so no reading more.
    pub(super) async fn send_default(&self, out: Outgoing, attempts: u32, op: &'static str) -> Result<SendResult> {
        let start = Instant::now();
        let deadline = start + self.inner.config.send_timeout;
        let (info, at_once) = self.publish_info_by(&out.topic, op, deadline).await?;
        // The clock as of the next attempt; stale after anything that may have waited.
        let mut now = Some(start).filter(|_| at_once);
        let attempts = attempts.clamp(1, PRODUCER_SEND_ATTEMPTS_MAX_COUNT);
        let mut attempt = 0;
        let mut steps = 0;
        let mut probe = false;
        let mut last_broker: Option<String> = None;
        let mut pinned: Option<MessageQueue> = None;
        let mut stored_not_ok: Option<SendResult> = None;
        let mut last_err: Option<ClientError> = None;
        let mut tried: Vec<String> = Vec::new();
        while attempt < attempts {
            let began = now.take().unwrap_or_else(Instant::now);
            let mq = match pinned.take() {
                Some(mq) => mq,
                None => match self.select_queue(&info, last_broker.as_deref(), began) {
                    Some(mq) => mq,
                    None => break,
                },
            };
            if deadline <= began {
                break;
            }
            let (target, at_once) = {
                let resolve = self.resolve_target(&mq, op, std::mem::take(&mut probe));
                let mut resolve = std::pin::pin!(resolve);
                match poll_once(resolve.as_mut()).await {
                    Poll::Ready(target) => (target, true),
                    Poll::Pending => (resolve.await, false),
                }
            };
            let target = match target {
                Ok(target) => target,
                Err(e) => {
                    attempt += 1;
                    last_broker = Some(mq.broker_name.clone());
                    last_err = Some(e);
                    continue;
                }
            };
            let began = if at_once { began } else { Instant::now() };
            let attempted = self.attempt(&out, &mq, &target.addr, began, deadline).await;
            let ended = Instant::now();
            now = Some(ended);
            // Named in the error if the send gives up; a send answered at once never needs it.
            if !matches!(&attempted, Ok(result) if result.status == SendStatus::SendOk) {
                tried.push(mq.broker_name.clone());
            }
            match attempted {
                Ok(result) => {
                    self.answered(&mq, &target, began, ended);
                    attempt += 1;
                    let retry = result.status != SendStatus::SendOk
                        && self.inner.config.retry_another_broker_when_not_store_ok
                        && attempt < attempts;
                    if !retry {
                        return Ok(result);
                    }
                    last_broker = Some(mq.broker_name.clone());
                    stored_not_ok = Some(result);
                }
                Err(e) => {
                    let mut e = context(e, &mq, &target.addr);
                    e.operation = op;
                    let step = self.failover_step(&e, &mq, &target);
                    if e.is_outcome_unknown() {
                        self.update_fault(&mq.broker_name, began, ended, true);
                        return Err(e);
                    }
                    // Within the group when the address moved (a hint), or when no other group can
                    // take the message; otherwise Java's way: the next try goes to another group.
                    let stay = step.is_some_and(|s| s == FailoverStep::Hint || !has_other_group(&info, &mq));
                    if let Some(step) = step.filter(|_| stay && steps < FAILOVER_STEPS_MAX) {
                        steps += 1;
                        tracing::debug!(topic = %out.topic, ?step, error = %e, "send failed over within the group");
                        probe = self.pace_failover(step, &mq, deadline).await;
                        now = None;
                        pinned = Some(mq);
                        last_err = Some(e);
                        continue;
                    }
                    attempt += 1;
                    // A non-retryable answer (MESSAGE_ILLEGAL, …) is about the message, not the
                    // group: its latency counts, but the group is not backed off (Java isolates it).
                    // Nor is it for a reply the broker could not push (its requester went away):
                    // the group is healthy, and backing it off would move ordinary sends.
                    let isolate = e.is_retryable() && !out.reply;
                    self.update_fault(&mq.broker_name, began, ended, isolate);
                    if !(e.is_retryable() || e.kind == ErrorKind::NoRoute) {
                        return Err(e);
                    }
                    tracing::debug!(topic = %out.topic, attempt, error = %e, "send attempt failed; retrying");
                    last_broker = Some(mq.broker_name.clone());
                    last_err = Some(e);
                }
            }
        }
        if let Some(result) = stored_not_ok {
            return Ok(result);
        }
        Err(give_up(op, &out.topic, tried, last_err))
    }

    /// `sendSelectImpl` / `send(msg, mq)`: attempts on `mq` only; a leader hint or a failover step
    /// ([`FailoverStep`]) retries it at the group's (new) leader within the deadline, anything else
    /// ends the send.
    pub(super) async fn send_to_fixed_queue(
        &self,
        out: &Outgoing,
        mq: MessageQueue,
        op: &'static str,
    ) -> Result<SendResult> {
        let deadline = Instant::now() + self.inner.config.send_timeout;
        let mut last_err = None;
        let mut probe = false;
        for _ in 0..=FAILOVER_STEPS_MAX {
            if remaining(deadline).is_zero() {
                break;
            }
            let target = self.resolve_target(&mq, op, std::mem::take(&mut probe)).await?;
            let began = Instant::now();
            let attempted = self.attempt(out, &mq, &target.addr, began, deadline).await;
            let ended = Instant::now();
            match attempted {
                Ok(result) => {
                    self.answered(&mq, &target, began, ended);
                    return Ok(result);
                }
                Err(e) => {
                    let mut e = context(e, &mq, &target.addr);
                    e.operation = op;
                    let step = self.failover_step(&e, &mq, &target).filter(|_| !e.is_outcome_unknown());
                    let Some(step) = step else {
                        self.update_fault(&mq.broker_name, began, ended, e.is_retryable());
                        return Err(e);
                    };
                    probe = self.pace_failover(step, &mq, deadline).await;
                    last_err = Some(e);
                }
            }
        }
        Err(give_up(op, &out.topic, vec![mq.broker_name.clone()], last_err))
    }

    /// An attempt at `target` was answered: latency recorded; a replica asked in a failover that
    /// took the write leads the group now.
    pub(super) fn answered(&self, mq: &MessageQueue, target: &WriteTarget, began: Instant, ended: Instant) {
        self.update_fault(&mq.broker_name, began, ended, false);
        if target.probing {
            self.inner.routes.report_leader_answered(&mq.broker_name, &target.addr);
        }
    }

    /// What a failed attempt at `target` says about its group's leader (see [`FailoverStep`]), with
    /// the route updated accordingly: a usable hint moves the write address, a refused or dropped
    /// connection makes the address suspect, a timeout or a dropped connection refreshes the
    /// group's route in the background (the send itself ends outcome-unknown).
    pub(super) fn failover_step(
        &self,
        e: &ClientError,
        mq: &MessageQueue,
        target: &WriteTarget,
    ) -> Option<FailoverStep> {
        let routes = &self.inner.routes;
        match &e.kind {
            ErrorKind::Broker { code: ResponseCode::ServiceNotAvailable, remark } => {
                match remark.as_deref().and_then(parse_leader_hint) {
                    // Followed even when suspect: a replica that still names it may be right (a
                    // dropped connection, not a dead node); if not, the address refuses again and
                    // that step is paced by the group's refresh.
                    Some(leader) if leader != target.addr => {
                        routes.clear_suspect(leader);
                        routes.apply_leader_hint(&mq.broker_name, leader);
                        Some(FailoverStep::Hint)
                    }
                    _ => Some(FailoverStep::Unavailable),
                }
            }
            ErrorKind::Connection => {
                routes.report_unreachable(&target.addr);
                Some(FailoverStep::Dead)
            }
            ErrorKind::OutcomeUnknown => {
                routes.report_unreachable(&target.addr);
                routes.refresh_group_soon(&mq.broker_name);
                None
            }
            ErrorKind::Timeout => {
                routes.refresh_group_soon(&mq.broker_name);
                None
            }
            _ => None,
        }
    }

    /// Before the next attempt of a failover step: a hint is followed at once; otherwise the
    /// group's route is refreshed first (rate-limited and shared, so this also paces the retries).
    /// Returns whether the next attempt should ask another replica.
    pub(super) async fn pace_failover(&self, step: FailoverStep, mq: &MessageQueue, deadline: Instant) -> bool {
        if step == FailoverStep::Hint {
            return false;
        }
        let refresh = self.inner.routes.refresh_group(&mq.broker_name, Some(&mq.topic), Instant::now());
        let _in_time = tokio::time::timeout_at(deadline, refresh).await;
        step == FailoverStep::Unavailable
    }
}

/// How a failed attempt moves a send within its group (none of these counts as one of the send's
/// `retryTimesWhenSendFailed` tries; [`FAILOVER_STEPS_MAX`] and the send timeout bound them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FailoverStep {
    /// SERVICE_NOT_AVAILABLE naming another leader: the same queue at that address, at once.
    Hint,
    /// The address refused the connection (nothing was sent): the group's route is refreshed and
    /// the same queue tried at the new leader, or at a replica that names it.
    Dead,
    /// SERVICE_NOT_AVAILABLE without a usable hint (no leader yet, a leader still applying, a
    /// replica naming a dead one): the route is refreshed and another replica asked.
    Unavailable,
}

/// Whether `info` has a queue outside `mq`'s group (a failed send may go there instead).
pub(super) fn has_other_group(info: &TopicPublishInfo, mq: &MessageQueue) -> bool {
    info.message_queues().iter().any(|q| q.broker_name != mq.broker_name)
}

pub(super) fn give_up(op: &'static str, topic: &str, tried: Vec<String>, last_err: Option<ClientError>) -> ClientError {
    let attempts = tried.len();
    let tried = format!("[{}]", tried.join(", "));
    match last_err {
        Some(last) => {
            ClientError::new(last.kind.clone(), op, format!("Send [{attempts}] times, still failed: {}", last.message))
                .with_context("topic", topic)
                .with_context("brokersSent", tried)
                .with_source(last)
        }
        None => ClientError::new(
            ErrorKind::DeadlineExceeded,
            op,
            format!("Send [{attempts}] times, the send timeout passed before another attempt"),
        )
        .with_context("topic", topic)
        .with_context("brokersSent", tried),
    }
}

pub(super) fn no_queue(op: &'static str, topic: &str) -> ClientError {
    ClientError::new(ErrorKind::NoRoute, op, "no writable queue").with_context("topic", topic)
}

pub(super) fn context(e: ClientError, mq: &MessageQueue, addr: &str) -> ClientError {
    e.with_context("topic", &mq.topic).with_context("queue", mq_label(mq)).with_context("addr", addr)
}

pub(super) fn mq_label(mq: &MessageQueue) -> String {
    format!("{}:{}", mq.broker_name, mq.queue_id)
}

/// Polls `fut` once with the task's context. Ready means nothing waited, so a clock read before
/// it is still current; pending, it may be awaited on (or under a timeout) from where it stands.
async fn poll_once<F: Future>(mut fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await
}

pub(super) fn remaining(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}
