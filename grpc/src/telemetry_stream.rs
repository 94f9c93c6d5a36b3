//! One client's Telemetry stream: its commands answered in order ([`crate::telemetry`]), and the
//! server's own commands (transaction checks) written to the same stream. A producer's `Settings`
//! register the stream as a checker of each topic it publishes (producer group
//! [`producer_group_of`] the topic, as RocketMQ's proxy registers a producer under each topic);
//! new `Settings` replace the set.
//!
//! Under `aclEnable` each `Settings` is admitted first ([`crate::acl::settings`]: PUB on what it
//! publishes, SUB on what it subscribes to); a refused one ends the stream with PERMISSION_DENIED,
//! before anything is registered, so a client may not take transaction checks for a topic it may
//! not publish to.
//!
//! Invariants: the stream ends when the client ends it or the server stops; its checker
//! registrations are dropped then, so the broker never asks a closed stream; the outbox is bounded
//! (`GRPC_TELEMETRY_OUTBOX_MAX_COUNT`) and only checks may be refused by a full one (an answer waits
//! for room).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use raftmq_broker::acl::GrpcCredentials;
use raftmq_broker::processors::bridge::Bridge;
use raftmq_broker::services::transaction_checker::CheckerRegistration;
use raftmq_broker::services::transaction_checker::TransactionChecker;
use raftmq_common::limits::GRPC_TELEMETRY_OUTBOX_MAX_COUNT;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::Streaming;

use crate::check_back::Outbox;
use crate::check_back::TelemetryChecker;
use crate::namespace::Namespaced;
use crate::pb::Settings;
use crate::pb::TelemetryCommand;
use crate::pb::settings::PubSub;
use crate::pb::telemetry_command::Command;
use crate::telemetry::GroupSettings;
use crate::telemetry::ServerSettings;
use crate::telemetry::answer;
use crate::transaction::producer_group_of;

/// Who the stream's client is, for the ACL's check of each `Settings` (`None`: no ACL).
#[derive(Debug, Clone)]
pub struct Admission {
    /// The credentials of the call's metadata.
    pub credentials: Option<GrpcCredentials>,
    /// The client's address.
    pub peer: IpAddr,
}

/// The server's side of one Telemetry call.
pub fn open(
    bridge: Bridge,
    admission: Option<Admission>,
    server: ServerSettings,
    inbound: Streaming<TelemetryCommand>,
    stopping: CancellationToken,
) -> BoxStream<'static, Result<TelemetryCommand, tonic::Status>> {
    let (outbox, mut rx) = mpsc::channel(GRPC_TELEMETRY_OUTBOX_MAX_COUNT);
    tokio::spawn(serve(bridge, admission, server, inbound, outbox, stopping.clone()));
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).take_until(stopping.cancelled_owned()).boxed()
}

/// The consumer group's settings, when `settings` are a consumer's and the group exists.
fn group_settings(bridge: &Bridge, settings: &Settings) -> Option<GroupSettings> {
    let Some(PubSub::Subscription(subscription)) = &settings.pub_sub else { return None };
    let config = bridge.subscription_group(&subscription.group.as_ref()?.name)?;
    Some(GroupSettings { fifo: crate::receive::is_fifo(&config), retry_max_times: config.retry_max_times })
}

async fn serve(
    bridge: Bridge,
    admission: Option<Admission>,
    server: ServerSettings,
    mut inbound: Streaming<TelemetryCommand>,
    outbox: Outbox,
    stopping: CancellationToken,
) {
    let checker: Arc<dyn TransactionChecker> = Arc::new(TelemetryChecker::new(outbox.clone()));
    let mut registrations: HashMap<String, CheckerRegistration> = HashMap::new();
    loop {
        let command = tokio::select! {
            _ = stopping.cancelled() => break,
            command = inbound.next() => command,
        };
        // A transport error or the client's end of stream ends the call.
        let Some(Ok(command)) = command else { break };
        let mut group = None;
        if let Some(Command::Settings(asked)) = &command.command {
            // Checked and registered with the namespace joined; answered as the client sent them.
            let mut settings = asked.clone();
            settings.join_namespace();
            let settings = &settings;
            if let Some(a) = &admission
                && let Err(denied) = crate::acl::settings(settings)
                    .and_then(|needed| bridge.admit_grpc(a.credentials.as_ref(), a.peer, &needed))
            {
                tracing::debug!(peer = %a.peer, reason = %denied, "telemetry settings refused by the ACL");
                // The stream ends here, and what it registered with it; a client already gone
                // needs no answer.
                let _ = outbox.send(Err(crate::acl::denied(denied))).await;
                break;
            }
            group = group_settings(&bridge, settings);
            let producer_groups: Vec<String> = match &settings.pub_sub {
                Some(PubSub::Publishing(p)) => p.topics.iter().map(|t| producer_group_of(&t.name)).collect(),
                _ => Vec::new(),
            };
            registrations.retain(|g, _| producer_groups.contains(g));
            for g in producer_groups {
                let checker = Arc::clone(&checker);
                registrations.entry(g.clone()).or_insert_with(|| bridge.register_transaction_checker(&g, checker));
            }
        }
        if outbox.send(Ok(answer(command, server, group))).await.is_err() {
            break;
        }
    }
}
