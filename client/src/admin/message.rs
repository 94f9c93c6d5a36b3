//! Messages: view by offsetMsgId (the store host first, then its group's other replicas), query by
//! key through the IndexFile, trace records, pulls without committing, direct consumption by one
//! client, and putting a half message back for checking.

use raftmq_common::message::MessageExt;
use raftmq_common::message::MessageQueue;
use raftmq_common::message::msg_id::OffsetMsgId;
use raftmq_common::message::trace::TRACE_TOPIC_DEFAULT;
use raftmq_common::message::trace::TraceView;
use raftmq_common::message::trace::views_of;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::consume_directly::ConsumeMessageDirectlyResult;
use raftmq_common::protocol::body::route::BrokerData;
use raftmq_common::protocol::header::client::ConsumeMessageDirectlyResultRequestHeader;
use raftmq_common::protocol::header::pull::PullMessageRequestHeader;
use raftmq_common::protocol::header::pull::pull_sys_flag;
use raftmq_common::protocol::header::query::QueryMessageRequestHeader;
use raftmq_common::protocol::header::query::ViewMessageRequestHeader;
use raftmq_common::protocol::header::transaction::ResumeCheckHalfMessageRequestHeader;

use super::client::Admin;
use super::response::decode_body;
use super::response::decode_messages;
use super::response::success;
use crate::consumer::PullResult;
use crate::consumer::pull_api::process_pull_response;
use crate::consumer::subscription::build_subscription_data;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;

impl Admin {
    /// The message stored at `commit_log_offset` on the broker at `addr` (`queryMsgById`,
    /// VIEW_MESSAGE_BY_ID); the body is decompressed.
    pub async fn view_message(&self, addr: &str, commit_log_offset: i64) -> Result<MessageExt> {
        let op = "queryMsgById";
        let header = ViewMessageRequestHeader { offset: commit_log_offset };
        let request = RemotingCommand::request_with_header(RequestCode::ViewMessageById, &header);
        let response = self.broker_call(op, addr, request).await?;
        let mut msgs = decode_messages(op, &response.body)?;
        if msgs.len() != 1 {
            return Err(ClientError::new(ErrorKind::Protocol, op, format!("{} records in the answer", msgs.len())));
        }
        msgs.pop().ok_or_else(|| ClientError::new(ErrorKind::Protocol, op, "no record in the answer"))
    }

    /// The message an offsetMsgId names (`queryMsgById`). Asks the store host it encodes first; when
    /// that host is gone or cannot answer (a failover moved the group on), asks the replicas of the
    /// host's group (leader first), then those of every other group, for the same physical offset:
    /// replicas of a Raft group hold identical bytes at identical offsets, and an answer is accepted
    /// only if its STOREHOST and PHYSICALOFFSET are the id's, so another group's record never passes.
    pub async fn view_message_by_id(&self, id: &OffsetMsgId) -> Result<MessageExt> {
        let host = id.store_host.to_string();
        let first_error = match self.view_message(&host, id.commit_log_offset).await {
            Ok(m) if m.store_host == id.store_host && m.commit_log_offset == id.commit_log_offset => return Ok(m),
            Ok(m) => ClientError::new(
                ErrorKind::Protocol,
                "queryMsgById",
                format!("{host} answered the record of {} at {}", m.store_host, m.commit_log_offset),
            ),
            Err(e) => e,
        };
        let Ok(cluster) = self.cluster_info().await else { return Err(first_error) };
        let mut groups: Vec<&BrokerData> = cluster.broker_addr_table.values().collect();
        // The host's own group first (a stable sort keeps the rest in name order).
        groups.sort_by_key(|g| !g.broker_addrs.values().any(|a| *a == host));
        for group in groups {
            // brokerId 0 (the leader) first: BTreeMap order.
            for addr in group.broker_addrs.values().filter(|a| **a != host) {
                if let Ok(m) = self.view_message(addr, id.commit_log_offset).await
                    && m.store_host == id.store_host
                    && m.commit_log_offset == id.commit_log_offset
                {
                    return Ok(m);
                }
            }
        }
        Err(first_error)
    }

    /// Puts the half message an offsetMsgId names back for checking, its check count at 0
    /// (`resumeCheckHalfMessage`, RESUME_CHECK_HALF_MESSAGE): typically one given up to
    /// TRANS_CHECK_MAX_TIME_TOPIC after `transactionCheckMax` checks. Sent to the current leader of
    /// the group whose replica stored it (replicas hold the record at the same offset), or to the
    /// store host itself when no route names its group. Returns the address that took it.
    pub async fn resume_check_half_message(&self, id: &OffsetMsgId) -> Result<String> {
        let op = "resumeCheckHalfMessage";
        let host = id.store_host.to_string();
        let group = self.cluster_info().await.ok().and_then(|cluster| {
            cluster
                .broker_addr_table
                .values()
                .find(|g| g.broker_addrs.values().any(|a| *a == host))
                .map(|g| g.broker_name.clone())
        });
        let addr = match group {
            Some(name) => self.master_addr_of_group(&name).await.unwrap_or(host),
            None => host,
        };
        let header = ResumeCheckHalfMessageRequestHeader { msg_id: Some(id.to_string()) };
        let request = RemotingCommand::request_with_header(RequestCode::ResumeCheckHalfMessage, &header);
        self.broker_call(op, &addr, request).await?;
        Ok(addr)
    }

    /// Messages of `topic` whose KEYS (or, with `unique_key`, UNIQ_KEY) contain `key`, stored between
    /// the two times, from the broker at `addr` (`queryMsgByKey`, QUERY_MESSAGE through the IndexFile).
    /// A broker with nothing indexed answers QUERY_NOT_FOUND: an empty list.
    pub async fn query_message(&self, addr: &str, query: &QueryMessageRequestHeader) -> Result<Vec<MessageExt>> {
        let op = if query.unique_key_query == Some(true) { "queryMsgById" } else { "queryMsgByKey" };
        let request = RemotingCommand::request_with_header(RequestCode::QueryMessage, query);
        let response = self
            .remoting
            .invoke(addr, request, self.timeout)
            .await
            .map_err(|e| ClientError::remoting(op, e).with_context("addr", addr))?;
        if response.response_code() == ResponseCode::QueryNotFound {
            return Ok(Vec::new());
        }
        let response = success(op, response).map_err(|e| e.with_context("addr", addr))?;
        decode_messages(op, &response.body)
    }

    /// What the trace records say happened to the message `msg_id` (`queryMsgTraceById`): its
    /// Pub, SubBefore, SubAfter and EndTransaction records in `trace_topic` (default
    /// `RMQ_SYS_TRACE_TOPIC`), from every group of the trace topic's route, oldest first.
    pub async fn query_msg_trace_by_id(&self, msg_id: &str, trace_topic: Option<&str>) -> Result<Vec<TraceView>> {
        let topic = trace_topic.unwrap_or(TRACE_TOPIC_DEFAULT);
        let route = self.topic_route(topic).await.map_err(|e| e.with_context("traceTopic", topic))?;
        let query = QueryMessageRequestHeader {
            topic: topic.to_owned(),
            key: msg_id.to_owned(),
            max_num: raftmq_common::limits::ADMIN_QUERY_MESSAGE_DEFAULT_COUNT,
            begin_timestamp: 0,
            end_timestamp: i64::MAX,
            unique_key_query: None,
        };
        let mut views = Vec::new();
        let (mut answered, mut last_error) = (false, None);
        for (_, addr) in Self::read_addrs_of_route(&route) {
            // As Java's `queryMessage`: a group that cannot answer is skipped, the others still count.
            let msgs = match self.query_message(&addr, &query).await {
                Ok(msgs) => msgs,
                Err(e) => {
                    tracing::warn!(addr = addr.as_str(), trace_topic = topic, error = %e, "queryMsgTraceById: a group did not answer");
                    last_error = Some(e);
                    continue;
                }
            };
            answered = true;
            // The IndexFile matches key hashes; only messages that carry the id are trace records of it.
            for m in msgs.iter().filter(|m| m.message.key_list().any(|k| k == msg_id)) {
                let body = String::from_utf8_lossy(&m.message.body);
                views.extend(views_of(msg_id, &body, &m.born_host.ip().to_string()));
            }
        }
        if let (false, Some(mut e)) = (answered, last_error) {
            e.operation = "queryMsgTraceById";
            return Err(e.with_context("traceTopic", topic));
        }
        views.sort_by_key(|v| v.timestamp_ms);
        Ok(views)
    }

    /// Has consumer `client_id` of `consumer_group` hand the message `offset_msg_id` to its
    /// listener once (`queryMsgById -g -d`, CONSUME_MESSAGE_DIRECTLY), through the broker at
    /// `addr`, which must hold both the message and the client's connection; no offset moves.
    pub async fn consume_message_directly(
        &self,
        addr: &str,
        consumer_group: &str,
        client_id: &str,
        offset_msg_id: &str,
    ) -> Result<ConsumeMessageDirectlyResult> {
        let op = "consumeMessageDirectly";
        let header = ConsumeMessageDirectlyResultRequestHeader {
            consumer_group: consumer_group.to_owned(),
            client_id: Some(client_id.to_owned()),
            msg_id: Some(offset_msg_id.to_owned()),
            broker_name: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::ConsumeMessageDirectly, &header);
        let response = self.broker_call(op, addr, request).await?;
        decode_body(op, &response)
    }

    /// Up to `max` messages of queue `mq` from `offset`, as `group` (Java's tools
    /// pull as `TOOLS_CONSUMER`), filtered by the tag expression `sub_expression` (PULL_MESSAGE
    /// without suspending or committing, `DefaultMQPullConsumer.pull`). NO_NEW_MSG,
    /// NO_MATCHED_MSG and OFFSET_ILLEGAL are results, not errors.
    pub async fn pull(
        &self,
        addr: &str,
        group: &str,
        mq: &MessageQueue,
        offset: i64,
        max: i32,
        sub_expression: &str,
    ) -> Result<PullResult> {
        let op = "pullMessage";
        let sub = build_subscription_data(&mq.topic, sub_expression, 0);
        let header = PullMessageRequestHeader {
            consumer_group: group.to_owned(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            queue_offset: offset,
            max_msg_nums: max,
            sys_flag: pull_sys_flag::build(false, false, true, false, false),
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some(sub.sub_string.clone()),
            sub_version: sub.sub_version,
            expression_type: Some(sub.expression_type.clone()),
            bname: None,
        };
        let request = RemotingCommand::request_with_header(RequestCode::PullMessage, &header);
        let response = self
            .remoting
            .invoke(addr, request, self.timeout)
            .await
            .map_err(|e| ClientError::remoting(op, e).with_context("addr", addr))?;
        process_pull_response(&response, &sub).map_err(|e| e.with_context("addr", addr))
    }
}
