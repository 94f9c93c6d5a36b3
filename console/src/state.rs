//! [`ConsoleState`]: what every console handler shares — the SDK's `Admin` (NameServers and the
//! brokers' remoting ports), the admin-API client, discovery, sessions and chart history — and the
//! ways a call reaches a group: [`ConsoleState::read`] asks replicas in turn until one answers,
//! [`ConsoleState::change`] asks the leader and follows one NOT_LEADER hint.

use std::time::Duration;

use axum::http::Method;
use axum::http::StatusCode;
use raftmq_client::Admin;
use raftmq_common::limits::CONSOLE_UPSTREAM_TIMEOUT_MS;
use serde_json::Value;

use crate::api::error::ApiError;
use crate::api::error::ApiResult;
use crate::config::ConsoleConfig;
use crate::history::History;
use crate::session::Sessions;
use crate::topology::BrokerGroup;
use crate::topology::Discovery;
use crate::topology::Topology;
use crate::upstream::Answer;
use crate::upstream::BrokerHttp;

/// Shared by every handler.
#[derive(Debug)]
pub struct ConsoleState {
    /// The settings.
    pub config: ConsoleConfig,
    /// NameServers and remoting calls (every NameServer in failover order).
    pub admin: Admin,
    /// One `Admin` per NameServer, to tell which of them answer.
    pub namesrv_admins: Vec<(String, Admin)>,
    /// The brokers' admin API.
    pub http: BrokerHttp,
    /// Admin addresses.
    pub discovery: Discovery,
    /// Logins.
    pub sessions: Sessions,
    /// Chart samples.
    pub history: History,
    /// The producer DLQ resends go out with, started on first use.
    pub resend_producer: tokio::sync::OnceCell<raftmq_client::Producer>,
}

/// The producer group DLQ resends go out as.
const RESEND_PRODUCER_GROUP: &str = "RAFTMQ_CONSOLE_RESEND";

/// The deadline of a read.
pub fn read_deadline() -> Duration {
    Duration::from_millis(CONSOLE_UPSTREAM_TIMEOUT_MS)
}

impl ConsoleState {
    /// The cluster now.
    pub async fn topology(&self) -> ApiResult<Topology> {
        self.discovery.topology(&self.admin).await.map_err(|e| ApiError::upstream(e.to_string()))
    }

    /// The producer of DLQ resends.
    pub async fn resend_producer(&self) -> ApiResult<&raftmq_client::Producer> {
        self.resend_producer.get_or_try_init(|| self.start_resend_producer()).await
    }

    async fn start_resend_producer(&self) -> ApiResult<raftmq_client::Producer> {
        let mut builder =
            raftmq_client::Producer::builder(RESEND_PRODUCER_GROUP).namesrv_addr(&self.config.namesrv_addr);
        if let Some((ak, sk)) = &self.config.credentials {
            let credentials = raftmq_client::SessionCredentials::new(ak.clone(), sk.clone())
                .map_err(|e| ApiError::invalid(e.to_string()))?;
            builder = builder.credentials(credentials);
        }
        let producer = builder.build()?;
        producer.start().await?;
        Ok(producer)
    }

    /// The group `name`, or 404.
    pub async fn group(&self, name: &str) -> ApiResult<BrokerGroup> {
        self.topology()
            .await?
            .group(name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(format!("no broker group {name} is registered")))
    }

    /// `GET path` at the first replica of `group` that answers (the leader first): its answer,
    /// 2xx or not (a 404 is an answer). Every replica down is a 502 naming each.
    pub async fn read(&self, group: &BrokerGroup, path: &str) -> ApiResult<(String, Answer)> {
        let mut errors = Vec::new();
        for addr in group.admin_addrs() {
            match self.http.call(&addr, Method::GET, path, None, read_deadline()).await {
                Ok(answer) if answer.status.is_server_error() => errors.push(format!("{addr}: {}", answer.message())),
                Ok(answer) => return Ok((addr, answer)),
                Err(e) => errors.push(e.to_string()),
            }
        }
        for r in group.replicas.iter().filter(|r| r.admin_addr.is_none()) {
            errors.push(format!(
                "{}: {}",
                r.remoting_addr,
                r.admin_error.as_deref().unwrap_or("admin address unknown")
            ));
        }
        Err(ApiError::upstream(format!("no replica of {} answered: {}", group.name, errors.join("; "))))
    }

    /// [`Self::read`] that must succeed: the JSON of a 2xx answer.
    pub async fn read_ok(&self, group: &BrokerGroup, path: &str) -> ApiResult<Value> {
        let (addr, answer) = self.read(group, path).await?;
        if answer.ok() { Ok(answer.body) } else { Err(ApiError::from_answer(&addr, &answer)) }
    }

    /// `method path` with `body` at the leader of `group`, within `deadline`: the replica
    /// registered as brokerId 0 first, then the one a NOT_LEADER answer names, then the others.
    pub async fn change(
        &self,
        group: &BrokerGroup,
        method: Method,
        path: &str,
        body: Option<&Value>,
        deadline: Duration,
    ) -> ApiResult<Value> {
        let mut tried: Vec<String> = Vec::new();
        let mut queue = group.admin_addrs();
        let mut last = None;
        while let Some(addr) = (!queue.is_empty()).then(|| queue.remove(0)) {
            if tried.contains(&addr) {
                continue;
            }
            tried.push(addr.clone());
            match self.http.call(&addr, method.clone(), path, body, deadline).await {
                Ok(answer) if answer.ok() => return Ok(answer.body),
                Ok(answer) if answer.status == StatusCode::MISDIRECTED_REQUEST => {
                    // The hint names the leader's remoting address: its admin address is the
                    // replica registered with it.
                    let hint = answer.body["leader_addr"].as_str().unwrap_or_default().to_owned();
                    if let Some(admin) =
                        group.replicas.iter().find(|r| r.remoting_addr == hint).and_then(|r| r.admin_addr.clone())
                    {
                        queue.insert(0, admin);
                    }
                    last = Some(ApiError::from_answer(&addr, &answer));
                }
                Ok(answer) => return Err(ApiError::from_answer(&addr, &answer)),
                Err(e) => last = Some(ApiError::from(e)),
            }
        }
        Err(last.unwrap_or_else(|| ApiError::upstream(format!("no admin address of {} is known", group.name))))
    }
}
