//! The Telemetry stream's answers: each command a client sends gets one. A client's `Settings` are
//! answered with the server's view of them (RocketMQ proxy's `GrpcClientSettingsManager`: retry
//! policy, request timeout, the broker's max body size; for consumers the receive batch size, the
//! long-polling time, `fifo` and the attempts from the subscription group). The one command the
//! server sends on its own is the transaction check ([`crate::check_back`]); thread stack traces and
//! message verification are not supported, so a client's reply to one, or such a command sent by a
//! client, is refused with a status saying so; the stream stays open. Pure.

use raftmq_common::limits::GRPC_LONG_POLLING_MAX_MS;
use raftmq_common::limits::RPC_TIMEOUT_DEFAULT_MS;

use crate::message::duration;
use crate::pb::Code;
use crate::pb::ExponentialBackoff;
use crate::pb::Metric;
use crate::pb::RetryPolicy;
use crate::pb::Settings;
use crate::pb::TelemetryCommand;
use crate::pb::settings::PubSub;
use crate::pb::telemetry_command::Command;
use crate::status::ok;
use crate::status::status;

/// Attempts a client makes for one request (the proxy's `maxAttempts` for producers).
const CLIENT_ATTEMPTS_MAX_COUNT: i32 = 3;
/// First retry backoff.
const BACKOFF_INITIAL_MS: u64 = 10;
/// Longest retry backoff.
const BACKOFF_MAX_MS: u64 = 1_000;
/// Backoff growth per attempt.
const BACKOFF_MULTIPLIER: f32 = 2.0;
/// Messages one receive returns at most (the proxy's default `receiveBatchSize`).
const RECEIVE_BATCH_COUNT: i32 = 32;

/// What the server tells every client.
#[derive(Debug, Clone, Copy)]
pub struct ServerSettings {
    /// The broker's `maxMessageSize`.
    pub max_body_bytes: u32,
}

/// What a consumer's subscription group decides (the proxy's `mergeSubscriptionData`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupSettings {
    /// `consumeMessageOrderly`: messages of one message group are received in order.
    pub fifo: bool,
    /// `retryMaxTimes`: deliveries after the first before the dead-letter queue.
    pub retry_max_times: i32,
}

/// The client's settings as the server fills them in; `group` is the consumer's subscription group
/// when it exists.
pub fn settings_answer(client: &Settings, server: ServerSettings, group: Option<GroupSettings>) -> Settings {
    let mut answer = client.clone();
    answer.backoff_policy = Some(RetryPolicy {
        max_attempts: CLIENT_ATTEMPTS_MAX_COUNT,
        strategy: Some(crate::pb::retry_policy::Strategy::ExponentialBackoff(ExponentialBackoff {
            initial: Some(duration(BACKOFF_INITIAL_MS)),
            max: Some(duration(BACKOFF_MAX_MS)),
            multiplier: BACKOFF_MULTIPLIER,
        })),
    });
    answer.request_timeout = Some(duration(RPC_TIMEOUT_DEFAULT_MS));
    answer.metric = Some(Metric { on: false, endpoints: None });
    match &mut answer.pub_sub {
        Some(PubSub::Publishing(p)) => {
            p.max_body_size = i32::try_from(server.max_body_bytes).unwrap_or(i32::MAX);
            p.validate_message_type = false;
        }
        Some(PubSub::Subscription(s)) => {
            s.fifo = Some(group.is_some_and(|g| g.fifo));
            s.receive_batch_size = Some(RECEIVE_BATCH_COUNT);
            s.long_polling_timeout = Some(duration(GRPC_LONG_POLLING_MAX_MS));
            if let (Some(g), Some(policy)) = (group, answer.backoff_policy.as_mut()) {
                policy.max_attempts = g.retry_max_times.saturating_add(1);
            }
        }
        None => {}
    }
    answer
}

/// The answer to one command of a client's Telemetry stream (`group`: see [`settings_answer`]).
pub fn answer(command: TelemetryCommand, server: ServerSettings, group: Option<GroupSettings>) -> TelemetryCommand {
    let refuse = |code: Code, why: &str| TelemetryCommand { status: Some(status(code, why.to_owned())), command: None };
    match command.command {
        Some(Command::Settings(settings)) => TelemetryCommand {
            status: Some(ok()),
            command: Some(Command::Settings(settings_answer(&settings, server, group))),
        },
        Some(
            Command::ThreadStackTrace(_)
            | Command::VerifyMessageResult(_)
            | Command::PrintThreadStackTraceCommand(_)
            | Command::VerifyMessageCommand(_),
        ) => refuse(
            Code::Unsupported,
            "raftmq does not support thread stack traces or message verification over gRPC, and never asks for them",
        ),
        Some(
            Command::RecoverOrphanedTransactionCommand(_)
            | Command::ReconnectEndpointsCommand(_)
            | Command::NotifyUnsubscribeLiteCommand(_),
        ) => refuse(Code::BadRequest, "this command goes from the server to a client, not the other way"),
        None => refuse(Code::BadRequest, "the telemetry command is empty"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pb::PrintThreadStackTraceCommand;
    use crate::pb::Publishing;
    use crate::pb::Subscription;
    use crate::pb::ThreadStackTrace;
    use crate::pb::VerifyMessageCommand;

    const SERVER: ServerSettings = ServerSettings { max_body_bytes: 4 << 20 };

    #[test]
    fn settings_are_answered_with_the_servers_view() {
        let client = Settings {
            pub_sub: Some(PubSub::Publishing(Publishing {
                topics: vec![],
                max_body_size: 0,
                validate_message_type: true,
            })),
            ..Default::default()
        };
        let a = answer(TelemetryCommand { status: None, command: Some(Command::Settings(client)) }, SERVER, None);
        assert_eq!(a.status.unwrap().code, Code::Ok as i32);
        let Some(Command::Settings(s)) = a.command else { panic!("no settings answered") };
        let Some(PubSub::Publishing(p)) = s.pub_sub else { panic!("publishing lost") };
        assert_eq!(p.max_body_size, 4 << 20);
        assert_eq!(s.backoff_policy.unwrap().max_attempts, CLIENT_ATTEMPTS_MAX_COUNT);

        let consumer = Settings { pub_sub: Some(PubSub::Subscription(Subscription::default())), ..Default::default() };
        let a =
            answer(TelemetryCommand { status: None, command: Some(Command::Settings(consumer.clone())) }, SERVER, None);
        let Some(Command::Settings(s)) = a.command else { panic!("no settings answered") };
        let Some(PubSub::Subscription(sub)) = s.pub_sub else { panic!("subscription lost") };
        assert_eq!(sub.receive_batch_size, Some(RECEIVE_BATCH_COUNT));
        assert_eq!(sub.fifo, Some(false));

        let orderly = GroupSettings { fifo: true, retry_max_times: 3 };
        let s = settings_answer(&consumer, SERVER, Some(orderly));
        let Some(PubSub::Subscription(sub)) = s.pub_sub else { panic!("subscription lost") };
        assert_eq!(sub.fifo, Some(true), "fifo is the group's consumeMessageOrderly");
        assert_eq!(s.backoff_policy.unwrap().max_attempts, 4, "attempts are retryMaxTimes + 1");
    }

    #[test]
    fn other_commands_are_refused_with_a_status() {
        let trace = TelemetryCommand {
            status: None,
            command: Some(Command::ThreadStackTrace(ThreadStackTrace { nonce: "n".into(), thread_stack_trace: None })),
        };
        assert_eq!(answer(trace, SERVER, None).status.unwrap().code, Code::Unsupported as i32);
        for command in [
            Command::PrintThreadStackTraceCommand(PrintThreadStackTraceCommand { nonce: "n".into() }),
            Command::VerifyMessageCommand(VerifyMessageCommand { nonce: "n".into(), message: None }),
        ] {
            let a = answer(TelemetryCommand { status: None, command: Some(command) }, SERVER, None);
            let status = a.status.unwrap();
            assert_eq!(status.code, Code::Unsupported as i32);
            assert!(status.message.contains("not support"), "{}", status.message);
        }
        let empty = TelemetryCommand { status: None, command: None };
        let a = answer(empty, SERVER, None);
        assert_eq!(a.status.unwrap().code, Code::BadRequest as i32);
        assert!(a.command.is_none());
    }
}
