//! `NameServer`: the running NameServer — a remoting server dispatching to [`NamesrvProcessor`], the
//! liveness scanner, and the connection-closed hook that drops a broker the moment its connection goes.
//!
//! ```text
//!  TCP ──> RemotingServer ──code──> NamesrvProcessor::handle ──> RouteInfoManager / KvConfigManager
//!             │ connection closed ──> NamesrvProcessor::connection_closed(conn id)
//!  every scanNotActiveBrokerInterval ──> NamesrvProcessor::scan_not_active_brokers()
//! ```
//!
//! Lifecycle: [`NameServer::start`] binds, starts the scanner and prints RocketMQ's boot line
//! (`The Name Server boot success. serializeType=JSON, address <ip:port>`, which scripts grep);
//! [`NameServer::shutdown`] stops the scanner, then shuts the remoting server down gracefully
//! (stop accepting, drain in-flight requests, close connections). [`run`] does both around a
//! shutdown future, for the CLI. NameServers never talk to each other.

use std::future::Future;
use std::net::IpAddr;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::RemotingServer;
use raftmq_common::remoting::ServerOptions;
use raftmq_common::remoting::ServerTls;
use thiserror::Error;
use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use crate::config::ConfigError;
use crate::config::NamesrvConfig;
use crate::kv_config::KvConfigError;
use crate::kv_config::KvConfigManager;
use crate::processor::NamesrvProcessor;
use crate::processor::SERVED_CODES;

/// Why the NameServer could not start.
#[derive(Debug, Error)]
pub enum NamesrvError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The KV-config file could not be loaded.
    #[error(transparent)]
    KvConfig(#[from] KvConfigError),
    /// `bindAddress` is not an IP address.
    #[error("bindAddress {0:?} is not an IP address")]
    BadBindAddress(String),
    /// The port could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The TLS certificate, key or trust roots could not be loaded.
    #[error("NameServer TLS: {0}")]
    Tls(#[source] raftmq_common::remoting::TlsError),
}

/// A running NameServer.
#[derive(Debug)]
pub struct NameServer {
    remoting: RemotingServer,
    processor: Arc<NamesrvProcessor>,
    scanner: JoinHandle<()>,
}

impl NameServer {
    /// Loads the KV config, binds `bindAddress:listenPort` (port 0 picks a free one), starts the
    /// liveness scanner and prints the boot line.
    pub async fn start(config: NamesrvConfig) -> Result<NameServer, NamesrvError> {
        config.validate()?;
        let ip: IpAddr = config
            .bind_address
            .trim()
            .parse()
            .map_err(|_| NamesrvError::BadBindAddress(config.bind_address.clone()))?;
        let addr = SocketAddr::new(ip, config.listen_port);
        let key = config.load_cluster_secret()?.map(|s| s.key());
        if key.is_none() {
            tracing::info!("no cluster secret: broker registrations and NameServer writes are unauthenticated");
        }
        let kv = KvConfigManager::load(config.kv_config_file())?;
        let processor = Arc::new(NamesrvProcessor::new(&config, kv).with_cluster_key(key));

        let mut table = ProcessorTable::new();
        for code in SERVED_CODES {
            table.register(code, processor.clone());
        }
        let on_closed = processor.clone();
        // The hook runs on a connection task: it takes the route write lock briefly and returns.
        let options = ServerOptions::default().on_connection_closed(move |event| {
            on_closed.connection_closed(event.connection_id);
        });
        let tls = ServerTls::from_settings(&config.tls_server()).map_err(NamesrvError::Tls)?;
        if let Some(tls) = &tls {
            tracing::info!(mode = tls.mode().name(), "NameServer serves TLS");
        }
        let options = options.tls(tls);
        let remoting = RemotingServer::bind_with(addr, table, options)
            .await
            .map_err(|source| NamesrvError::Bind { addr, source })?;
        let scanner = tokio::spawn(scan_loop(processor.clone(), config.scan_not_active_broker_interval));

        let line = format!("The Name Server boot success. serializeType=JSON, address {}", remoting.local_addr());
        tracing::info!("{line}");
        println!("{line}");
        Ok(NameServer { remoting, processor, scanner })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.remoting.local_addr()
    }

    /// The handlers and tables (for tests and admin views).
    pub fn processor(&self) -> &Arc<NamesrvProcessor> {
        &self.processor
    }

    /// Stops the scanner, then shuts the remoting server down gracefully. Idempotent.
    pub async fn shutdown(&self) {
        self.scanner.abort();
        self.remoting.shutdown().await;
        tracing::info!(local_addr = %self.local_addr(), "name server stopped");
    }
}

impl Drop for NameServer {
    fn drop(&mut self) {
        self.scanner.abort();
    }
}

/// Runs a NameServer until `shutdown` completes, then stops it gracefully. What `raftmq namesrv`
/// calls after building the config with [`NamesrvConfig::load`].
pub async fn run(config: NamesrvConfig, shutdown: impl Future<Output = ()>) -> Result<(), NamesrvError> {
    let server = NameServer::start(config).await?;
    shutdown.await;
    server.shutdown().await;
    Ok(())
}

async fn scan_loop(processor: Arc<NamesrvProcessor>, period: Duration) {
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    // A stalled runtime should not cause a burst of back-to-back scans.
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        interval.tick().await;
        processor.scan_not_active_brokers();
    }
}
