//! `NamesrvProcessor`: the NameServer's request handlers (`DefaultRequestProcessor` and
//! `ClientRequestProcessor` in RocketMQ), one method per request code.
//!
//! ```text
//!  request ──> handle(conn, request) ──match code──> decode header/body ──> RouteInfoManager (RwLock)
//!                                                                      └─> KvConfigManager (RwLock)
//!          <── response (SUCCESS + body | error code + remark)
//! ```
//!
//! Handlers are synchronous and hold a lock only while touching the tables: JSON encoding of a
//! route happens after the read lock is released. Nothing here panics on peer input; every bad
//! header or body becomes an error response with a remark (SYSTEM_ERROR, as a Java NameServer
//! answers a `RemotingCommandException`), and the connection carries on.
//!
//! Codes served: REGISTER_BROKER, UNREGISTER_BROKER, GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO,
//! GET_ALL_TOPIC_LIST_FROM_NAMESERVER, GET_TOPICS_BY_CLUSTER, GET_SYSTEM_TOPIC_LIST_FROM_NS,
//! DELETE_TOPIC_IN_NAMESRV, PUT/GET/DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE,
//! WIPE/ADD_WRITE_PERM_OF_BROKER, GET/UPDATE_NAMESRV_CONFIG, QUERY_DATA_VERSION, GET_UNIT_TOPIC_LIST,
//! GET_HAS_UNIT_SUB_TOPIC_LIST, GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST ([`SERVED_CODES`]: every code a
//! 4.9 NameServer serves); the transport answers any other code REQUEST_CODE_NOT_SUPPORTED.
//!
//! With a cluster secret ([`NamesrvProcessor::with_cluster_key`]) the codes only members send
//! ([`MEMBER_CODES`]: registrations, liveness, every write) must carry a valid cluster signature
//! (`raftmq_common::protocol::cluster_signature`), checked before their header is read; anything
//! else is answered NO_PERMISSION and changes nothing. Reads (routes, cluster info, KV reads,
//! topic lists, config reads) stay open, so unchanged RocketMQ clients work.
//!
//! PUT_KV_CONFIG is bounded (`KV_CONFIG_*` limits): names, values, entries and the whole table.
//!
//! UPDATE_NAMESRV_CONFIG changes the running NameServer only (all keys or none, from
//! [`crate::config::RUNTIME_UPDATABLE_KEYS`]); it is not written back to the config file, which stays
//! what a restart reads. Java writes its `configStorePath` copy, which its startup does not read either.

use std::sync::PoisonError;
use std::sync::RwLock;
use std::sync::RwLockReadGuard;
use std::sync::RwLockWriteGuard;
use std::time::Instant;

use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::properties_text;
use raftmq_common::protocol::body::register::RegisterBrokerBody;
use raftmq_common::protocol::body::register::body_crc32;
use raftmq_common::protocol::body::topic::DataVersion;
use raftmq_common::protocol::body::topic::topic_sys_flag;
use raftmq_common::protocol::cluster_signature::ClusterKey;
use raftmq_common::protocol::cluster_signature::ClusterVerifier;
use raftmq_common::protocol::cluster_signature::wall_clock_ms;
use raftmq_common::protocol::header::CommandHeader;
use raftmq_common::protocol::header::namesrv::AddWritePermOfBrokerRequestHeader;
use raftmq_common::protocol::header::namesrv::AddWritePermOfBrokerResponseHeader;
use raftmq_common::protocol::header::namesrv::DeleteKvConfigRequestHeader;
use raftmq_common::protocol::header::namesrv::DeleteTopicFromNamesrvRequestHeader;
use raftmq_common::protocol::header::namesrv::GetKvConfigRequestHeader;
use raftmq_common::protocol::header::namesrv::GetKvConfigResponseHeader;
use raftmq_common::protocol::header::namesrv::GetKvListByNamespaceRequestHeader;
use raftmq_common::protocol::header::namesrv::GetRouteInfoRequestHeader;
use raftmq_common::protocol::header::namesrv::GetTopicsByClusterRequestHeader;
use raftmq_common::protocol::header::namesrv::PutKvConfigRequestHeader;
use raftmq_common::protocol::header::namesrv::QueryDataVersionRequestHeader;
use raftmq_common::protocol::header::namesrv::QueryDataVersionResponseHeader;
use raftmq_common::protocol::header::namesrv::RegisterBrokerRequestHeader;
use raftmq_common::protocol::header::namesrv::RegisterBrokerResponseHeader;
use raftmq_common::protocol::header::namesrv::UnregisterBrokerRequestHeader;
use raftmq_common::protocol::header::namesrv::WipeWritePermOfBrokerRequestHeader;
use raftmq_common::protocol::header::namesrv::WipeWritePermOfBrokerResponseHeader;
use raftmq_common::remoting::ConnectionContext;
use raftmq_common::remoting::RefusalLog;
use raftmq_common::remoting::RequestProcessor;

use crate::config::NamesrvConfig;
use crate::config::UpdateError;
use crate::kv_config::KvConfigError;
use crate::kv_config::KvConfigManager;
use crate::kv_config::NAMESPACE_ORDER_TOPIC_CONFIG;
use crate::route_info::BrokerRegistration;
use crate::route_info::ConnId;
use crate::route_info::RemovedBroker;
use crate::route_info::RouteInfoManager;
use crate::route_info::RouteSettings;

/// The request codes [`NamesrvProcessor`] handles.
pub const SERVED_CODES: [RequestCode; 20] = [
    RequestCode::RegisterBroker,
    RequestCode::UnregisterBroker,
    RequestCode::GetRouteinfoByTopic,
    RequestCode::GetBrokerClusterInfo,
    RequestCode::GetAllTopicListFromNameserver,
    RequestCode::GetTopicsByCluster,
    RequestCode::DeleteTopicInNamesrv,
    RequestCode::PutKvConfig,
    RequestCode::GetKvConfig,
    RequestCode::DeleteKvConfig,
    RequestCode::GetKvlistByNamespace,
    RequestCode::WipeWritePermOfBroker,
    RequestCode::AddWritePermOfBroker,
    RequestCode::GetSystemTopicListFromNs,
    RequestCode::GetNamesrvConfig,
    RequestCode::UpdateNamesrvConfig,
    RequestCode::QueryDataVersion,
    RequestCode::GetUnitTopicList,
    RequestCode::GetHasUnitSubTopicList,
    RequestCode::GetHasUnitSubUnunitTopicList,
];

/// The request codes that need a cluster signature when the NameServer has a cluster secret:
/// what brokers send about themselves and every write an operator sends.
pub const MEMBER_CODES: [RequestCode; 9] = [
    RequestCode::RegisterBroker,
    RequestCode::UnregisterBroker,
    RequestCode::QueryDataVersion,
    RequestCode::DeleteTopicInNamesrv,
    RequestCode::PutKvConfig,
    RequestCode::DeleteKvConfig,
    RequestCode::WipeWritePermOfBroker,
    RequestCode::AddWritePermOfBroker,
    RequestCode::UpdateNamesrvConfig,
];

/// The NameServer's state and request handlers; shared by all connections.
#[derive(Debug)]
pub struct NamesrvProcessor {
    /// Checks cluster signatures on [`MEMBER_CODES`] (none: no cluster secret, loopback only).
    verifier: Option<ClusterVerifier>,
    routes: RwLock<RouteInfoManager>,
    kv: RwLock<KvConfigManager>,
    /// The running configuration (UPDATE_NAMESRV_CONFIG changes its runtime keys).
    config: RwLock<NamesrvConfig>,
    /// Liveness runs on a monotonic clock: ms since this instant.
    epoch: Instant,
    /// Refused requests, logged once per connection and code.
    refusals: RefusalLog,
}

/// An error answer: its code and remark.
#[derive(Debug)]
struct Rejection {
    code: ResponseCode,
    remark: String,
}

impl Rejection {
    fn new(code: ResponseCode, remark: String) -> Self {
        Rejection { code, remark }
    }

    fn into_command(self) -> RemotingCommand {
        RemotingCommand::response(self.code, Some(self.remark))
    }
}

type Response = Result<RemotingCommand, Rejection>;

fn route_settings(config: &NamesrvConfig) -> RouteSettings {
    RouteSettings {
        broker_channel_expired_ms: config.broker_channel_expired_ms(),
        delete_topic_with_broker_registration: config.delete_topic_with_broker_registration,
    }
}

fn system_error(remark: String) -> Rejection {
    Rejection::new(ResponseCode::SystemError, remark)
}

fn header<H: CommandHeader>(request: &RemotingCommand) -> Result<H, Rejection> {
    request.decode_header::<H>().map_err(|e| system_error(format!("bad request header: {e}")))
}

fn json_body(body: &impl JsonBody) -> Response {
    body.encode().map(|bytes| RemotingCommand::success().with_body(bytes)).map_err(|e| system_error(e.to_string()))
}

impl NamesrvProcessor {
    /// Empty route tables and the given KV config.
    pub fn new(config: &NamesrvConfig, kv: KvConfigManager) -> Self {
        NamesrvProcessor {
            verifier: None,
            routes: RwLock::new(RouteInfoManager::new(route_settings(config))),
            kv: RwLock::new(kv),
            config: RwLock::new(config.clone()),
            epoch: Instant::now(),
            refusals: RefusalLog::default(),
        }
    }

    /// This processor requiring a signature of the cluster secret `key` on [`MEMBER_CODES`].
    pub fn with_cluster_key(mut self, key: Option<ClusterKey>) -> Self {
        self.verifier = key.map(ClusterVerifier::new);
        self
    }

    /// Refuses a member-only request without a valid cluster signature.
    fn check_member(&self, code: RequestCode, request: &RemotingCommand) -> Result<(), Rejection> {
        let Some(verifier) = &self.verifier else { return Ok(()) };
        if !MEMBER_CODES.contains(&code) {
            return Ok(());
        }
        verifier
            .verify(request, wall_clock_ms())
            .map(drop)
            .map_err(|e| Rejection::new(ResponseCode::NoPermission, format!("{code} needs the cluster secret: {e}")))
    }

    /// Answers one request. `conn` is the connection it came on (brokers are dropped when it closes).
    pub fn handle(&self, conn: Option<ConnId>, request: &RemotingCommand) -> RemotingCommand {
        let code = request.request_code();
        if let Err(rejection) = self.check_member(code, request) {
            return rejection.into_command().answering(request);
        }
        let result = match code {
            RequestCode::RegisterBroker => self.register_broker(conn, request),
            RequestCode::UnregisterBroker => self.unregister_broker(request),
            RequestCode::GetRouteinfoByTopic => self.get_route_info_by_topic(request),
            RequestCode::GetBrokerClusterInfo => self.get_broker_cluster_info(),
            RequestCode::GetAllTopicListFromNameserver => self.get_all_topic_list(),
            RequestCode::GetTopicsByCluster => self.get_topics_by_cluster(request),
            RequestCode::DeleteTopicInNamesrv => self.delete_topic(request),
            RequestCode::PutKvConfig => self.put_kv_config(request),
            RequestCode::GetKvConfig => self.get_kv_config(request),
            RequestCode::DeleteKvConfig => self.delete_kv_config(request),
            RequestCode::GetKvlistByNamespace => self.get_kv_list_by_namespace(request),
            RequestCode::WipeWritePermOfBroker => self.wipe_write_perm(request),
            RequestCode::AddWritePermOfBroker => self.add_write_perm(request),
            RequestCode::GetSystemTopicListFromNs => json_body(&self.routes().system_topics()),
            RequestCode::GetNamesrvConfig => Ok(self.get_namesrv_config()),
            RequestCode::UpdateNamesrvConfig => self.update_namesrv_config(request),
            RequestCode::QueryDataVersion => self.query_data_version(request),
            RequestCode::GetUnitTopicList => self.unit_topic_list(topic_sys_flag::FLAG_UNIT, None),
            RequestCode::GetHasUnitSubTopicList => self.unit_topic_list(topic_sys_flag::FLAG_UNIT_SUB, None),
            RequestCode::GetHasUnitSubUnunitTopicList => {
                self.unit_topic_list(topic_sys_flag::FLAG_UNIT_SUB, Some(topic_sys_flag::FLAG_UNIT))
            }
            _ => Err(Rejection::new(
                ResponseCode::RequestCodeNotSupported,
                format!(" request type {} not supported", request.code),
            )),
        };
        let response = result.unwrap_or_else(Rejection::into_command);
        if response.code != ResponseCode::Success.as_i32() {
            tracing::debug!(request_code = %code, response_code = response.code, remark = ?response.remark,
                "namesrv request failed");
        }
        response.answering(request)
    }

    /// The liveness scan: drops brokers silent past their timeout. Returns them for the log.
    pub fn scan_not_active_brokers(&self) -> Vec<RemovedBroker> {
        let removed = self.routes_mut().scan_not_active_brokers(self.now_ms());
        for r in &removed {
            tracing::warn!(broker_name = %r.broker_name, broker_addr = %r.broker_addr, was_leader = r.was_leader,
                "broker expired: no heartbeat within its timeout");
        }
        removed
    }

    /// A connection closed: drops the brokers that registered over it.
    pub fn connection_closed(&self, conn: ConnId) -> Vec<RemovedBroker> {
        let removed = self.routes_mut().connection_closed(conn);
        for r in &removed {
            tracing::info!(broker_name = %r.broker_name, broker_addr = %r.broker_addr, was_leader = r.was_leader,
                "broker connection closed; broker removed");
        }
        removed
    }

    /// Read access to the route tables (tests, admin views).
    pub fn routes(&self) -> RwLockReadGuard<'_, RouteInfoManager> {
        // A panic while holding the lock can only come from a bug in RouteInfoManager, whose
        // methods keep the tables consistent before any step that could panic; serving on is safer
        // than failing every later request.
        self.routes.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn routes_mut(&self) -> RwLockWriteGuard<'_, RouteInfoManager> {
        self.routes.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn config(&self) -> RwLockReadGuard<'_, NamesrvConfig> {
        self.config.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn kv(&self) -> RwLockReadGuard<'_, KvConfigManager> {
        self.kv.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn kv_mut(&self) -> RwLockWriteGuard<'_, KvConfigManager> {
        self.kv.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn register_broker(&self, conn: Option<ConnId>, request: &RemotingCommand) -> Response {
        let h: RegisterBrokerRequestHeader = header(request)?;
        if h.body_crc32 != 0 && body_crc32(&request.body) != h.body_crc32 {
            return Err(system_error(format!(
                "crc32 not match: header bodyCrc32={} but the body's is {}",
                h.body_crc32,
                body_crc32(&request.body)
            )));
        }
        // Java treats a missing body as an empty table with DataVersion 0.
        let body = if request.body.is_empty() {
            RegisterBrokerBody::default()
        } else {
            RegisterBrokerBody::decode_body(&request.body, h.compressed)
                .map_err(|e| system_error(format!("bad REGISTER_BROKER body: {e}")))?
        };
        let registration = BrokerRegistration {
            cluster_name: h.cluster_name,
            broker_name: h.broker_name,
            broker_addr: h.broker_addr,
            ha_server_addr: h.ha_server_addr,
            broker_id: h.broker_id,
            raft: h.raft,
            topic_config: body.topic_config_serialize_wrapper,
            // A non-positive timeout makes no sense; fall back to the NameServer's default.
            heartbeat_timeout_ms: h.heartbeat_timeout_millis.and_then(|ms| u64::try_from(ms).ok()).filter(|ms| *ms > 0),
            conn,
        };
        let (broker_name, broker_addr, raft) =
            (registration.broker_name.clone(), registration.broker_addr.clone(), registration.raft);
        let outcome = self
            .routes_mut()
            .register(registration, self.now_ms())
            .map_err(|e| system_error(format!("bad REGISTER_BROKER: {e}")))?;
        if outcome.leader_changed {
            tracing::info!(%broker_name, %broker_addr, term = ?raft.map(|r| r.term), writable = outcome.is_writable,
                "broker group's writable address changed");
        } else {
            tracing::debug!(%broker_name, %broker_addr, term = ?raft.map(|r| r.term), "broker heartbeat");
        }
        let mut response = RemotingCommand::success().with_header(&RegisterBrokerResponseHeader {
            ha_server_addr: outcome.ha_server_addr,
            master_addr: outcome.master_addr,
        });
        if let Some(order_topics) = self.kv().namespace(NAMESPACE_ORDER_TOPIC_CONFIG) {
            response = response.with_body(order_topics.encode().map_err(|e| system_error(e.to_string()))?);
        }
        Ok(response)
    }

    fn unregister_broker(&self, request: &RemotingCommand) -> Response {
        let h: UnregisterBrokerRequestHeader = header(request)?;
        if let Some(r) = self.routes_mut().unregister(&h.broker_name, &h.broker_addr) {
            tracing::info!(broker_name = %r.broker_name, broker_addr = %r.broker_addr, was_leader = r.was_leader,
                "broker unregistered");
        }
        Ok(RemotingCommand::success())
    }

    fn get_route_info_by_topic(&self, request: &RemotingCommand) -> Response {
        let h: GetRouteInfoRequestHeader = header(request)?;
        let route = self.routes().pickup_topic_route(&h.topic);
        let Some(mut route) = route else {
            return Err(Rejection::new(
                ResponseCode::TopicNotExist,
                format!(
                    "No topic route info in name server for the topic: {}; no live broker group serves it \
                     (create it with `raftmq admin updateTopic`, or check that its brokers are registered)",
                    h.topic
                ),
            ));
        };
        if self.config().order_message_enable {
            route.order_topic_conf = self.kv().get(NAMESPACE_ORDER_TOPIC_CONFIG, &h.topic).map(str::to_owned);
        }
        // Always standard JSON (quoted brokerId keys): fastjson reads it whatever the client's version.
        json_body(&route)
    }

    fn get_broker_cluster_info(&self) -> Response {
        // Copy under the read lock, encode after releasing it.
        let info = self.routes().cluster_info();
        json_body(&info)
    }

    fn get_all_topic_list(&self) -> Response {
        if !self.config().enable_all_topic_list {
            return Err(system_error("disable".to_owned()));
        }
        let topics = self.routes().all_topics();
        json_body(&topics)
    }

    fn get_topics_by_cluster(&self, request: &RemotingCommand) -> Response {
        let h: GetTopicsByClusterRequestHeader = header(request)?;
        if !self.config().enable_topic_list {
            return Err(system_error("disable".to_owned()));
        }
        let topics = self.routes().topics_by_cluster(&h.cluster);
        json_body(&topics)
    }

    /// QUERY_DATA_VERSION: may the broker skip registering (`needRegister`)? Answers `changed` and
    /// the version this NameServer holds for it; an unchanged broker's liveness is refreshed.
    fn query_data_version(&self, request: &RemotingCommand) -> Response {
        let h: QueryDataVersionRequestHeader = header(request)?;
        let version = DataVersion::decode(&request.body)
            .map_err(|e| system_error(format!("the DataVersion body does not decode: {e}")))?;
        let now = self.now_ms();
        let (changed, held) = self.routes_mut().query_data_version(&h.broker_addr, &version, now);
        let mut response = RemotingCommand::success().with_header(&QueryDataVersionResponseHeader { changed });
        if let Some(held) = held {
            response = response.with_body(held.encode().map_err(|e| system_error(e.to_string()))?);
        }
        Ok(response)
    }

    /// GET_UNIT_TOPIC_LIST, GET_HAS_UNIT_SUB_TOPIC_LIST, GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST (refused
    /// like the other topic lists when `enableTopicList` is off, as in 5.x).
    fn unit_topic_list(&self, flag: i32, without: Option<i32>) -> Response {
        if !self.config().enable_topic_list {
            return Err(system_error("disable".to_owned()));
        }
        let topics = self.routes().topics_with_sys_flag(flag, without);
        json_body(&topics)
    }

    /// GET_NAMESRV_CONFIG (`mqadmin getNamesrvConfig`): Java properties text of every key.
    fn get_namesrv_config(&self) -> RemotingCommand {
        let entries = self.config().to_properties();
        RemotingCommand::success().with_body(properties_text::encode(&entries))
    }

    /// UPDATE_NAMESRV_CONFIG (`mqadmin updateNamesrvConfig`): Java properties text of the keys to
    /// change. A key that needs a restart is refused with NO_PERMISSION (as Java refuses its
    /// black-listed keys), an unknown key or a bad value with SYSTEM_ERROR, naming the key.
    fn update_namesrv_config(&self, request: &RemotingCommand) -> Response {
        let text = std::str::from_utf8(&request.body)
            .map_err(|_| system_error("the config update is not UTF-8 properties text".to_owned()))?;
        let updates = properties_text::decode(text);
        let mut config = self.config.write().unwrap_or_else(PoisonError::into_inner);
        let updated = config.with_updates(&updates).map_err(|e| {
            let code = match e {
                UpdateError::NotRuntimeUpdatable(_) => ResponseCode::NoPermission,
                _ => ResponseCode::SystemError,
            };
            Rejection::new(code, e.to_string())
        })?;
        self.routes_mut().set_settings(route_settings(&updated));
        tracing::info!(?updates, "UPDATE_NAMESRV_CONFIG applied");
        *config = updated;
        Ok(RemotingCommand::success())
    }

    fn delete_topic(&self, request: &RemotingCommand) -> Response {
        let h: DeleteTopicFromNamesrvRequestHeader = header(request)?;
        let removed = self.routes_mut().delete_topic(&h.topic, h.cluster_name.as_deref());
        tracing::info!(topic = %h.topic, cluster = ?h.cluster_name, removed, "DELETE_TOPIC_IN_NAMESRV");
        Ok(RemotingCommand::success())
    }

    fn put_kv_config(&self, request: &RemotingCommand) -> Response {
        let h: PutKvConfigRequestHeader = header(request)?;
        self.kv_mut().put(&h.namespace, &h.key, &h.value).map_err(|e| match e {
            KvConfigError::TooLarge(_) => Rejection::new(ResponseCode::MessageIllegal, e.to_string()),
            _ => system_error(e.to_string()),
        })?;
        Ok(RemotingCommand::success())
    }

    fn get_kv_config(&self, request: &RemotingCommand) -> Response {
        let h: GetKvConfigRequestHeader = header(request)?;
        match self.kv().get(&h.namespace, &h.key) {
            Some(value) => {
                Ok(RemotingCommand::success().with_header(&GetKvConfigResponseHeader { value: Some(value.to_owned()) }))
            }
            None => Err(Rejection::new(
                ResponseCode::QueryNotFound,
                format!("No config item, Namespace: {} Key: {}", h.namespace, h.key),
            )),
        }
    }

    fn delete_kv_config(&self, request: &RemotingCommand) -> Response {
        let h: DeleteKvConfigRequestHeader = header(request)?;
        self.kv_mut().delete(&h.namespace, &h.key).map_err(|e| system_error(e.to_string()))?;
        Ok(RemotingCommand::success())
    }

    fn get_kv_list_by_namespace(&self, request: &RemotingCommand) -> Response {
        let h: GetKvListByNamespaceRequestHeader = header(request)?;
        let table = self.kv().namespace(&h.namespace);
        match table {
            Some(table) => json_body(&table),
            None => {
                Err(Rejection::new(ResponseCode::QueryNotFound, format!("No config item, Namespace: {}", h.namespace)))
            }
        }
    }

    fn wipe_write_perm(&self, request: &RemotingCommand) -> Response {
        let h: WipeWritePermOfBrokerRequestHeader = header(request)?;
        let count = self.routes_mut().wipe_write_perm(&h.broker_name);
        tracing::info!(broker_name = %h.broker_name, topics = count, "WIPE_WRITE_PERM_OF_BROKER");
        let wipe_topic_count = i32::try_from(count).unwrap_or(i32::MAX);
        Ok(RemotingCommand::success().with_header(&WipeWritePermOfBrokerResponseHeader { wipe_topic_count }))
    }

    fn add_write_perm(&self, request: &RemotingCommand) -> Response {
        let h: AddWritePermOfBrokerRequestHeader = header(request)?;
        let count = self.routes_mut().add_write_perm(&h.broker_name);
        tracing::info!(broker_name = %h.broker_name, topics = count, "ADD_WRITE_PERM_OF_BROKER");
        let add_topic_count = i32::try_from(count).unwrap_or(i32::MAX);
        Ok(RemotingCommand::success().with_header(&AddWritePermOfBrokerResponseHeader { add_topic_count }))
    }
}

/// The transport entry point: every served code goes through [`NamesrvProcessor::handle`].
impl RequestProcessor for NamesrvProcessor {
    async fn process(&self, ctx: ConnectionContext, request: RemotingCommand) -> Option<RemotingCommand> {
        let response = self.handle(Some(ctx.connection_id()), &request);
        self.refusals.note(ctx.connection_id(), ctx.peer_addr(), &request, &response);
        Some(response)
    }
}

#[cfg(test)]
mod tests;
