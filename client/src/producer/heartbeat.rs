//! A producer's heartbeats (HEART_BEAT with `producerDataSet`), as Java's `MQClientInstance` sends them:
//! at start, every interval, when a topic's route is first used and soon after a group's leader
//! address changes; and the synchronous round before a request to brokers not heartbeated yet.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use raftmq_common::limits::CLIENT_HEARTBEAT_INTERVAL_DEFAULT_MS;
use raftmq_common::limits::PRODUCER_HEARTBEAT_ROUTE_CHECK_MS;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::heartbeat::HeartbeatData;
use raftmq_common::protocol::body::heartbeat::ProducerData;
use raftmq_common::sync::lock;
use tokio::time::Instant;

use super::inner::Producer;

impl Producer {
    /// Heartbeats the brokers of the cached routes that no request has heartbeated yet, and waits
    /// for them (Java's `sendHeartbeatToAllBrokerWithLock` before a request to a new topic), so a
    /// reply pushed right after the request finds this client registered.
    /// The brokers are asked together, and each that answers is marked on its own, so one
    /// unreachable address costs one heartbeat timeout at most, and only until it answers.
    pub(super) async fn heartbeat_before_request(&self) {
        let fresh: Vec<String> = {
            let ready = lock(&self.inner.heartbeat.request_ready);
            self.heartbeat_addrs().into_iter().filter(|a| !ready.contains(a)).collect()
        };
        // Dropped (the request's deadline passed), the set aborts the heartbeats still out.
        let mut asked = tokio::task::JoinSet::new();
        for addr in fresh {
            let producer = self.clone();
            asked.spawn(async move {
                let answered = producer.send_heartbeat(&BTreeSet::from([addr.clone()])).await == 1;
                (addr, answered)
            });
        }
        while let Some(joined) = asked.join_next().await {
            if let Ok((addr, true)) = joined {
                lock(&self.inner.heartbeat.request_ready).insert(addr);
            }
        }
    }

    /// The heartbeat task (`startScheduledTask`'s heartbeat): one HEART_BEAT round at once, then every
    /// interval, when a topic's route is first used, and within [`PRODUCER_HEARTBEAT_ROUTE_CHECK_MS`]
    /// of a change of the groups' leader addresses (a failover, learned from a route poll or a
    /// leader hint), so a new leader knows the producer long before its first check round. Holds the
    /// producer weakly so a dropped one stops it.
    pub(super) fn start_heartbeat(&self) {
        let mut task = lock(&self.inner.heartbeat.task);
        if task.is_some() {
            return;
        }
        let weak = Arc::downgrade(&self.inner);
        let wake = self.inner.heartbeat.wake.clone();
        let period = Duration::from_millis(CLIENT_HEARTBEAT_INTERVAL_DEFAULT_MS);
        *task = Some(tokio::spawn(async move {
            let mut ticker = tokio::time::interval(Duration::from_millis(PRODUCER_HEARTBEAT_ROUTE_CHECK_MS));
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut sent_to: BTreeSet<String> = BTreeSet::new();
            let mut sent_at: Option<Instant> = None;
            loop {
                let woken = tokio::select! {
                    _ = ticker.tick() => false,
                    _ = wake.notified() => true,
                };
                let Some(inner) = weak.upgrade() else { return };
                let producer = Producer { inner };
                let addrs = producer.heartbeat_addrs();
                let due = woken || addrs != sent_to || sent_at.is_none_or(|at| at.elapsed() >= period);
                if due && !addrs.is_empty() {
                    producer.send_heartbeat(&addrs).await;
                    sent_to = addrs;
                    sent_at = Some(Instant::now());
                }
            }
        }));
    }

    /// The brokerId 0 address of every group in the cached routes (producers skip followers, as
    /// `sendHeartbeatToAllBroker` does).
    pub(super) fn heartbeat_addrs(&self) -> BTreeSet<String> {
        let routes = &self.inner.routes;
        routes
            .cached_topics()
            .iter()
            .filter_map(|topic| routes.cached_route(topic))
            .flat_map(|route| route.broker_datas.into_iter())
            .filter_map(|bd| routes.broker_addr_in_publish(&bd.broker_name))
            .collect()
    }

    /// HEART_BEAT {clientID, producerDataSet: \[group\]} to `addrs`. Returns how many answered
    /// SUCCESS; failures are logged.
    pub(super) async fn send_heartbeat(&self, addrs: &BTreeSet<String>) -> usize {
        if addrs.is_empty() {
            return 0;
        }
        let data = HeartbeatData {
            client_id: self.inner.client_id.clone(),
            consumer_data_set: Vec::new(),
            producer_data_set: vec![ProducerData { group_name: self.inner.config.producer_group.clone() }],
        };
        let body = match data.encode() {
            Ok(body) => Bytes::from(body),
            Err(e) => {
                tracing::error!(error = %e, "heartbeat body does not encode");
                return 0;
            }
        };
        let mut ok = 0;
        for addr in addrs {
            let mut request = RemotingCommand::request(RequestCode::HeartBeat).with_body(body.clone());
            request.serialize_type = self.inner.config.serialize_type;
            match self.inner.remoting.invoke(addr, request, self.inner.config.client.route_config.rpc_timeout).await {
                Ok(r) if r.response_code() == ResponseCode::Success => ok += 1,
                Ok(r) => {
                    tracing::warn!(addr = %addr, code = %r.response_code(), remark = ?r.remark, "heartbeat refused")
                }
                Err(e) => tracing::warn!(addr = %addr, error = %e, "heartbeat failed"),
            }
        }
        ok
    }

    /// Wakes the heartbeat task the first time `topic`'s route is used.
    pub(super) fn note_route_for_heartbeat(&self, topic: &str) {
        if !self.inner.config.heartbeat {
            return;
        }
        let first = {
            let mut topics = lock(&self.inner.heartbeat.topics);
            !topics.contains(topic) && topics.insert(topic.to_owned())
        };
        if first {
            self.inner.heartbeat.wake.notify_one();
        }
    }
}
