//! [`ClientConfig`]: the options every SDK client shares, as Java's `ClientConfig`: NameServers,
//! the client id (`ip@instanceName`), route polling and the NameServer deadline, ACL credentials,
//! TLS (`useTLS`) and message trace. [`ProducerBuilder`](crate::ProducerBuilder), the push and the pull consumer
//! builders each hold one and expose its setters through [`client_config_setters`], so the shared
//! options are written once.
//!
//! Invariant: plain data, read when a client is built; nothing changes it afterwards.

use std::net::IpAddr;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::SystemTime;
use std::time::UNIX_EPOCH;

use raftmq_common::protocol::acl::SessionCredentials;
use raftmq_common::remoting::ClientTls;
use raftmq_common::tls_settings::TlsClientSettings;

use crate::error::ClientError;
use crate::error::Result;

use crate::route::RouteConfig;
use crate::trace::TraceSettings;

/// The options every client shares; see the module header.
#[derive(Debug, Clone, Default)]
pub(crate) struct ClientConfig {
    /// NameServer addresses (`namesrvAddr`).
    pub(crate) namesrv_addrs: Vec<String>,
    /// The instance name in the client id; `None`: the client kind's default.
    pub(crate) instance_name: Option<String>,
    /// The IP in the client id (and in message ids); `None`: [`local_ip`].
    pub(crate) client_ip: Option<IpAddr>,
    /// Route refresh period and NameServer deadline (`pollNameServerInterval`, `mqClientApiTimeout`).
    pub(crate) route_config: RouteConfig,
    /// Signs every request (`AclClientRPCHook`); `None` signs nothing.
    pub(crate) credentials: Option<Arc<SessionCredentials>>,
    /// `enableMsgTrace`, `customizedTraceTopic`.
    pub(crate) trace: TraceSettings,
    /// `useTLS`: every connection, to NameServers and brokers, is TLS.
    pub(crate) use_tls: bool,
    /// How TLS checks the servers (trust root, client certificate) when `use_tls`.
    pub(crate) tls: TlsClientSettings,
}

impl ClientConfig {
    /// The client IP: the configured one, else the outward address (one UDP probe).
    pub(crate) fn ip(&self) -> IpAddr {
        self.client_ip.unwrap_or_else(local_ip)
    }

    /// The instance name: the configured one, else `default`.
    pub(crate) fn instance_name_or(&self, default: impl FnOnce() -> String) -> String {
        self.instance_name.clone().unwrap_or_else(default)
    }

    /// The TLS connector when `use_tls` (trust root and client certificate read now); an invalid
    /// setting is `InvalidArgument` for `op`.
    pub(crate) fn client_tls(&self, op: &'static str) -> Result<Option<ClientTls>> {
        if !self.use_tls {
            return Ok(None);
        }
        ClientTls::from_settings(&self.tls)
            .map(Some)
            .map_err(|e| ClientError::invalid_argument(op, format!("use_tls: {e}")))
    }

    /// The credentials, owned (for a client built from this one: the trace or retry producer).
    pub(crate) fn owned_credentials(&self) -> Option<SessionCredentials> {
        self.credentials.as_deref().cloned()
    }
}

/// The client's outward IP, found without sending anything: the source address the kernel picks
/// for a UDP "connection" (Java's `RemotingUtil.getLocalAddress` also prefers a non-loopback one).
pub(crate) fn local_ip() -> IpAddr {
    let probe = || -> std::io::Result<IpAddr> {
        let socket = std::net::UdpSocket::bind("0.0.0.0:0")?;
        socket.connect("192.0.2.1:9")?;
        Ok(socket.local_addr()?.ip())
    };
    probe().ok().filter(|ip| !ip.is_unspecified()).unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// A consumer's default instance name, `pid#nanos`: distinct for every consumer of a process, as
/// 4.9.x's `changeInstanceNameToPID`.
pub(crate) fn consumer_instance_name() -> String {
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{}#{nanos}", std::process::id())
}

/// The builder setters of the [`ClientConfig`] held in field `$config`: expanded inside each
/// client builder's `impl`, so every builder has the same shared options with the same meaning.
macro_rules! client_config_setters {
    ($config:ident) => {
        /// NameServers as RocketMQ writes them: `"ip:port;ip:port"`.
        pub fn namesrv_addr(mut self, addrs: &str) -> Self {
            self.$config.namesrv_addrs = $crate::namesrv::parse_namesrv_addrs(addrs);
            self
        }

        /// NameServers as a list.
        pub fn namesrv_addrs<I: IntoIterator<Item = S>, S: Into<String>>(mut self, addrs: I) -> Self {
            self.$config.namesrv_addrs = addrs.into_iter().map(Into::into).collect();
            self
        }

        /// Signs every request with these credentials (RocketMQ's plain ACL, `AclClientRPCHook`): a
        /// broker with `aclEnable` checks them; NameServers ignore them.
        /// `None` signs nothing (the default).
        pub fn credentials(
            mut self,
            credentials: impl Into<Option<::raftmq_common::protocol::acl::SessionCredentials>>,
        ) -> Self {
            self.$config.credentials = credentials.into().map(::std::sync::Arc::new);
            self
        }

        /// The instance name in the client id `ip@instanceName` (default: the process id for a
        /// producer, `pid#nanos`, unique per consumer, for a consumer).
        pub fn instance_name(mut self, name: impl Into<String>) -> Self {
            self.$config.instance_name = Some(name.into());
            self
        }

        /// The client IP in the client id and message ids (default: the address of the default route).
        pub fn client_ip(mut self, ip: ::std::net::IpAddr) -> Self {
            self.$config.client_ip = Some(ip);
            self
        }

        /// How often cached routes are refreshed (`pollNameServerInterval`, 30 s).
        pub fn route_poll_interval(mut self, interval: ::std::time::Duration) -> Self {
            self.$config.route_config.poll_interval = interval;
            self
        }

        /// Connects to NameServers and brokers with TLS (Java's `ClientConfig.useTLS`, off by
        /// default): servers must run `tls.server.mode` permissive or enforcing. The server's
        /// certificate is checked against [`tls_trust_cert_path`](Self::tls_trust_cert_path), which
        /// is then needed, unless [`tls_auth_server`](Self::tls_auth_server) is false.
        pub fn use_tls(mut self, enable: bool) -> Self {
            self.$config.use_tls = enable;
            self
        }

        /// The CA certificates (PEM) the servers' certificates must chain to
        /// (`tls.client.trustCertPath`). A certificate must also name the address dialled (an IP
        /// address SAN for `ip:port` addresses).
        pub fn tls_trust_cert_path(mut self, path: impl Into<::std::path::PathBuf>) -> Self {
            self.$config.tls.trust_cert_path = Some(path.into());
            self
        }

        /// Whether the servers' certificates are checked (`tls.client.authServer`, default true).
        /// False takes any certificate: encrypted, but open to a man in the middle (test networks).
        pub fn tls_auth_server(mut self, check: bool) -> Self {
            self.$config.tls.auth_server = check;
            self
        }

        /// A client certificate and key (PEM) for servers that require one
        /// (`tls.client.certPath`, `tls.client.keyPath`; `tls.server.need.client.auth=require`).
        pub fn tls_client_cert(
            mut self,
            cert_path: impl Into<::std::path::PathBuf>,
            key_path: impl Into<::std::path::PathBuf>,
        ) -> Self {
            self.$config.tls.cert_path = Some(cert_path.into());
            self.$config.tls.key_path = Some(key_path.into());
            self
        }

        /// TLS with these settings (`Some`: as [`use_tls`](Self::use_tls)`(true)` with the
        /// settings' trust root, client certificate and `authServer`), or none (`None`).
        pub fn tls(mut self, settings: Option<::raftmq_common::tls_settings::TlsClientSettings>) -> Self {
            self.$config.use_tls = settings.is_some();
            self.$config.tls = settings.unwrap_or_default();
            self
        }

        /// Traces what the client sends or consumes to the trace topic (`enableMsgTrace`, off by
        /// default): a producer writes a Pub record per message; a consumer a SubBefore per message
        /// handed to the application and a SubAfter with the outcome. `queryMsgTraceById` finds them.
        pub fn enable_msg_trace(mut self, enable: bool) -> Self {
            self.$config.trace.enabled = enable;
            self
        }

        /// The topic trace records go to (`customizedTraceTopic`; default `RMQ_SYS_TRACE_TOPIC`).
        pub fn customized_trace_topic(mut self, topic: impl Into<String>) -> Self {
            self.$config.trace.topic = Some(topic.into());
            self
        }
    };
}

pub(crate) use client_config_setters;
