//! `Broker`: one replica of a broker group, wired and running (RocketMQ's `BrokerController`).
//!
//! ```text
//! start(config)
//!   LogStore::open ─▶ recovered CommitLog end ─▶ MessageStore::open (ConsumeQueues truncated to it)
//!   snapshot file? ─▶ MessageStore::restore_snapshot (queues from P, metadata from the manifest)
//!   on the replica's own NodeRuntime: RaftServer::bind(raftAddr) ─▶ RaftNode::start (first boot of
//!     the group: smallest id initialises; a restart never re-initialises) ─▶ attach the Raft service
//!   group commit + offset committer tasks ─▶ AdminServer(adminPort) ─▶ RemotingServer(listenPort, BrokerProcessor)
//!   client housekeeping + delay-queue delivery + retention + NameServer registration tasks ─▶ boot line
//! shutdown()
//!   draining (/readyz 503) ─▶ leader: hand leadership over ─▶ refusals name the new leader
//!   ─▶ parked long polls released ─▶ unregister from NameServers ─▶ remoting: stop accepting, drain
//!   ─▶ stop tasks ─▶ admin HTTP off ─▶ Raft RPC off
//!   ─▶ RaftNode::shutdown (log flushed) ─▶ ConsumeQueues flushed ─▶ the replica's runtime dropped
//! ```
//!
//! Invariant: the ConsumeQueues are recovered against the CommitLog before Raft applies anything, so
//! re-applied entries meet queues that never run past the log (docs/raft-log.md#crash-rule).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;

use raftmq_common::protocol::cluster_signature::ClusterSigner;
use raftmq_common::protocol::cluster_signature::ClusterVerifier;
use raftmq_common::protocol::leader_hint::format_leader_hint;
use raftmq_common::remoting::ClientTls;
use raftmq_common::remoting::ProcessorTable;
use raftmq_common::remoting::RemotingClient;
use raftmq_common::remoting::RemotingServer;
use raftmq_common::remoting::SHUTTING_DOWN_REMARK;
use raftmq_common::remoting::ServerOptions;
use raftmq_common::remoting::ServerTls;
use raftmq_raft::ApplyHandler;
use raftmq_raft::Leadership;
use raftmq_raft::LogStore;
use raftmq_raft::NODE_RUNTIME_WORKER_THREADS;
use raftmq_raft::NodeConfig;
use raftmq_raft::NodeRuntime;
use raftmq_raft::RaftNode;
use raftmq_raft::network::RaftServer;
use raftmq_raft::network::TcpTransport;
use raftmq_raft::snapshot_file::SnapshotData;
use raftmq_raft::snapshot_file::StoredSnapshot;
use raftmq_raft::type_config::Node;
use thiserror::Error;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::info;
use tracing::warn;

use crate::config::broker_config::BrokerConfig;
use crate::config::live_config::LiveConfig;
use crate::context::BrokerContext;
use crate::http::handles::HttpHandles;
use crate::http::server::AdminServer;
use crate::observability::metrics::BrokerMetrics;
use crate::processors::bridge::Bridge;
use crate::processors::client_manage::notify_consumer_ids_changed;
use crate::processors::router::BrokerProcessor;
use crate::processors::router::SERVED_CODES;
use crate::services::client_manager::ClientManager;
use crate::services::group_commit::GroupCommit;
use crate::services::membership::GroupMembership;
use crate::services::namesrv_registration;
use crate::services::namesrv_registration::RegistrationHandles;
use crate::services::offset_commit::OffsetCommitter;
use crate::services::record_writer::RecordWriter;
use crate::services::replica::Replica;
use crate::services::retention;
use crate::services::retention::RetentionHandles;
use crate::services::retention::RetentionSettings;
use crate::services::schedule;
use crate::services::schedule::ScheduleHandles;
use crate::services::transaction_check::CheckHandles;
use crate::state::pull::PullLimits;
use crate::state::store::BrokerPatcher;
use crate::state::store::MessageStore;
use crate::state::store::StoreSettings;
use crate::state::store::now_ms;
use crate::state::topic_config::SystemTopicOptions;

/// How often silent client channels are looked for (`ClientHousekeepingService`: 10 s).
const CLIENT_HOUSEKEEPING_INTERVAL_MS: u64 = 10_000;
/// Longest wait for the broker's tasks to stop at shutdown.
const TASK_STOP_MAX_MS: u64 = 5_000;

/// Why the broker could not start.
#[derive(Debug, Error)]
pub enum BrokerError {
    /// The configuration is unusable.
    #[error("invalid broker config: {0}")]
    Config(String),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The CommitLog could not be opened.
    #[error("CommitLog: {0}")]
    CommitLog(#[from] raftmq_raft::StoreError),
    /// The ConsumeQueues could not be recovered.
    #[error(transparent)]
    Store(#[from] crate::state::store::StoreOpenError),
    /// Raft did not start.
    #[error("raft: {0}")]
    Raft(#[from] raftmq_raft::NodeError),
    /// The replica's runtime could not start, or a start-up step on it panicked.
    #[error("replica runtime: {0}")]
    Runtime(#[source] std::io::Error),
}

/// A running broker replica.
pub struct Broker {
    ctx: Arc<BrokerContext>,
    raft_server: RaftServer,
    transport: Arc<TcpTransport>,
    remoting: RemotingServer,
    /// The processors as the gRPC MessagingService (`raftmq-grpc`) reaches them.
    bridge: Bridge,
    admin: AdminServer,
    namesrv_client: RemotingClient,
    cancel: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
    /// Declared last: dropped after everything that runs on it.
    raft_runtime: NodeRuntime,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker").field("addr", &self.remoting.local_addr()).field("replica", &self.ctx.replica).finish()
    }
}

async fn resolve(addr: &str) -> Result<SocketAddr, BrokerError> {
    let mut found =
        tokio::net::lookup_host(addr).await.map_err(|source| BrokerError::Bind { addr: addr.to_owned(), source })?;
    found.next().ok_or_else(|| BrokerError::Config(format!("{addr} resolves to no address")))
}

/// The pull limits of `config` on this machine (`accessMessageInMemoryMaxRatio` of its RAM, read
/// with `sysinfo`); if the RAM cannot be read, the default tail ([`PullLimits::default`]).
fn pull_limits(config: &BrokerConfig) -> PullLimits {
    match nix::sys::sysinfo::sysinfo() {
        Ok(info) => config.pull_limits(info.ram_total()),
        Err(e) => {
            let fallback = PullLimits::default().memory_bytes;
            warn!(error = %e, fallback, "cannot read the machine's RAM; accessMessageInMemoryMaxRatio not applied");
            PullLimits { memory_bytes: fallback, ..config.pull_limits(0) }
        }
    }
}

impl Broker {
    /// Recovers the store, joins (or on first boot, forms) the Raft group and starts serving.
    pub async fn start(config: BrokerConfig) -> Result<Broker, BrokerError> {
        config.validate().map_err(|e| BrokerError::Config(e.to_string()))?;
        // Keys changed at runtime before a restart apply over the config file from the start.
        let live =
            LiveConfig::open(config, crate::state::store::now_ms()).map_err(|e| BrokerError::Config(e.to_string()))?;
        let config = BrokerConfig::clone(&live.current());
        let store_host = config
            .store_host()
            .ok_or_else(|| BrokerError::Config(format!("brokerIP1 {} is not an IP address", config.broker_ip())))?;
        let me = config.self_peer().cloned().ok_or_else(|| BrokerError::Config("raftSelfId is not a peer".into()))?;
        let raft_cfg = config.raft_config();
        let root = config.store_path_root_dir.clone();
        let delay_levels_ms = config.message_delay_levels_ms().map_err(|e| BrokerError::Config(e.to_string()))?;
        // The recovered CommitLog end bounds the ConsumeQueues before raft applies anything.
        let log_end = LogStore::open(&root, &raft_cfg)?.end_pos();
        let settings = StoreSettings {
            store_root: root.clone(),
            cq_units_per_file: config.consume_queue_units_per_file(),
            segment_size: config.mapped_file_size_commit_log,
            delay_levels_ms,
            system_topics: SystemTopicOptions::from(&config),
            index_sizes: config.index_file_sizes(),
        };
        let store = Arc::new(MessageStore::open(settings, log_end)?);
        // A purged log starts after its snapshot: queues and metadata start from its manifest.
        if let Some(snapshot) = StoredSnapshot::load(&root)?
            && let Some(last) = snapshot.last_log_id
        {
            let data = SnapshotData::decode(&snapshot.data)
                .map_err(|reason| raftmq_raft::StoreError::Corrupt { pos: 0, reason })?;
            store.restore_snapshot(&data.manifest, last).map_err(|e| BrokerError::Config(format!("snapshot: {e}")))?;
        }

        // The replica and its RPC server run on a runtime of their own (see `NodeRuntime`).
        let raft_runtime = NodeRuntime::new("raft-node", NODE_RUNTIME_WORKER_THREADS).map_err(BrokerError::Runtime)?;
        let raft_addr = resolve(&me.raft_addr).await?;
        // Raft RPCs and NameServer calls are signed with the cluster secret, and Raft RPCs without it refused.
        let cluster_key =
            config.load_cluster_secret().map_err(|e| BrokerError::Config(e.to_string()))?.map(|s| s.key());
        let verifier = cluster_key.clone().map(|k| Arc::new(ClusterVerifier::new(k)));
        let raft_signer = cluster_key.clone().map(|k| Arc::new(ClusterSigner::new(k, me.id.to_string())));
        let cluster_signer = cluster_key.map(|k| Arc::new(ClusterSigner::new(k, config.broker_addr())));
        if cluster_signer.is_none() {
            info!("no cluster secret: Raft RPCs and NameServer registrations are unauthenticated (loopback only)");
        }
        let raft_server = raft_runtime
            .run(RaftServer::bind_with(raft_addr, verifier))
            .await
            .map_err(BrokerError::Runtime)?
            .map_err(|source| BrokerError::Bind { addr: me.raft_addr.clone(), source })?;
        let members: BTreeMap<u64, Node> = config
            .raft_peers
            .iter()
            .map(|p| (p.id, Node { raft_addr: p.raft_addr.clone(), data: p.remoting_addr.clone() }))
            .collect();
        let mut node_cfg = NodeConfig::new(&config.broker_name, me.id, root, members);
        node_cfg.raft = raft_cfg;
        node_cfg.patcher = Box::new(BrokerPatcher);
        let transport = match raft_signer {
            Some(signer) => Arc::new(TcpTransport::new().signed(signer)),
            None => Arc::new(TcpTransport::new()),
        };
        let handler: Arc<dyn ApplyHandler> = store.clone();
        let start = RaftNode::start(node_cfg, handler, Arc::clone(&transport));
        let node = raft_runtime.run(start).await.map_err(BrokerError::Runtime)??;
        let node = Arc::new(node);
        raft_server.attach(node.service());
        // Pulls copy committed records out of the log store's mapping from now on.
        store.commit_log().attach(node.store().weak());

        let peers = config.raft_peers.iter().map(|p| (p.id, p.remoting_addr.clone())).collect();
        let replica = Arc::new(Replica::new(node, Arc::clone(&store), peers, &config.broker_name));
        let cancel = CancellationToken::new();
        let (group_commit, group_commit_task) = {
            let (replica, token) = (Arc::clone(&replica), cancel.child_token());
            raft_runtime.run(async move { GroupCommit::spawn(replica, token) }).await.map_err(BrokerError::Runtime)?
        };
        let (offsets, offsets_task) = OffsetCommitter::spawn(Arc::clone(&replica), cancel.child_token());
        let acl = if config.acl_enable {
            let path = config.acl_file_path();
            let acl = crate::acl::Acl::load(&path).map_err(|e| BrokerError::Config(e.to_string()))?;
            info!(path = %path.display(), accounts = acl.current().accounts.len(), "plain ACL enabled");
            Some(Arc::new(acl))
        } else {
            None
        };
        let inner = config.inner_credentials().map_err(|e| BrokerError::Config(e.to_string()))?.map(Arc::new);
        if config.acl_enable && inner.is_none() && config.raft_peers.len() > 1 {
            warn!(
                "aclEnable without innerAccessKey/innerSecretKey: this replica's calls to its peers (leadership \
                 transfer, removal notices) pass only if the peers list it in globalWhiteRemoteAddresses"
            );
        }
        // `tls.enable`: every call this replica makes on a remoting port (its peers', the
        // NameServers') is TLS; the Raft port stays plain, authenticated by the cluster secret.
        let client_tls = match config.tls_client() {
            Some(settings) => {
                Some(ClientTls::from_settings(&settings).map_err(|e| BrokerError::Config(format!("TLS client: {e}")))?)
            }
            None => None,
        };
        let peer_client = RemotingClient::with_tls(ProcessorTable::new(), false, inner, client_tls.clone());
        let forwarder = RemotingClient::with_tls(ProcessorTable::new(), false, None, client_tls.clone());
        let register_now = Arc::new(Notify::new());
        let membership = Arc::new(GroupMembership {
            config: config.clone(),
            replica: Arc::clone(&replica),
            store: Arc::clone(&store),
            register_now: Arc::clone(&register_now),
            forwarder: forwarder.clone(),
            peer_client: peer_client.clone(),
            cluster_signer: cluster_signer.clone(),
        });
        let metrics = BrokerMetrics::new(&config.broker_cluster_name, &config.broker_name, me.id);
        let stats = Arc::new(crate::observability::stats::StatsTable::new(config.broker_cluster_name.clone()));
        let broker_totals = Arc::new(crate::observability::stats::BrokerTotals::new(crate::state::store::now_ms()));
        let writer = RecordWriter::new(group_commit.clone(), Arc::clone(&broker_totals), Arc::clone(&stats));
        if config.test_only_local_queue_locks_unsafe {
            warn!("TEST ONLY: queue locks stay in the leader's memory (testOnlyLocalQueueLocksUnsafe)");
        }
        let locks = Arc::new(crate::services::rebalance_lock::RebalanceLocks::new(
            Arc::clone(&replica),
            config.test_only_local_queue_locks_unsafe,
        ));
        let pop = Arc::new(crate::services::pop::PopService::new(crate::services::pop::PopHandles {
            replica: Arc::clone(&replica),
            store: Arc::clone(&store),
            writer: writer.clone(),
            broker_name: config.broker_name.clone(),
            store_host,
            register_now: Arc::clone(&register_now),
            pull_limits: pull_limits(&config),
        }));
        let ctx = Arc::new(BrokerContext {
            pull_limits: pull_limits(&config),
            config: Arc::new(config),
            live: Arc::new(live),
            replica,
            store,
            group_commit,
            writer,
            offsets,
            clients: Arc::new(ClientManager::new()),
            locks,
            pop,
            store_host,
            forwarder,
            membership,
            peer_client,
            acl,
            register_now,
            metrics: Arc::new(metrics),
            draining: Arc::new(AtomicBool::new(false)),
            transactions: Arc::new(crate::state::transaction::TransactionState::new()),
            manual_purge_rounds: Arc::new(std::sync::atomic::AtomicU32::new(0)),
            sql_filters: Arc::default(),
            group_get_stats: Arc::default(),
            stats,
            broker_totals,
        });

        let mut table = ProcessorTable::new();
        let processor = Arc::new(BrokerProcessor::new(Arc::clone(&ctx)));
        for code in SERVED_CODES {
            table.register(*code, Arc::clone(&processor));
        }
        let bridge = Bridge::new(Arc::clone(&ctx), (*processor).clone());
        let hook_ctx = Arc::downgrade(&ctx);
        // Runs on a connection task: removes the channels and spawns the notifications.
        let options = ServerOptions::default()
            .on_connection_closed(move |event| {
                if let Some(ctx) = hook_ctx.upgrade() {
                    for group in ctx.clients.connection_closed(event.connection_id) {
                        notify_consumer_ids_changed(&ctx.clients, &group);
                    }
                }
            })
            // A group commit answers many sends at once; they leave in one write.
            .coalesce_writes(true);
        // Without a token the admin API is open to whoever reaches it: loopback only then.
        let admin_ip = if ctx.config.admin_token.is_some() { [0, 0, 0, 0] } else { [127, 0, 0, 1] };
        let admin_listen = SocketAddr::from((admin_ip, ctx.config.admin_port));
        if ctx.config.admin_token.is_none() {
            tracing::info!(%admin_listen, "admin HTTP on loopback only: set adminToken to serve other hosts");
        }
        let admin_tls = match ctx.config.admin_https_files() {
            Some((cert, key)) => Some(
                ServerTls::https(("adminHttpsCertPath", "adminHttpsKeyPath"), &cert, &key)
                    .map_err(|e| BrokerError::Config(format!("admin HTTPS: {e}")))?,
            ),
            None => None,
        };
        let remoting_tls =
            ServerTls::from_settings(&ctx.config.tls_server()).map_err(|e| BrokerError::Config(format!("TLS: {e}")))?;
        if let Some(tls) = &remoting_tls {
            tracing::info!(mode = tls.mode().name(), "remoting port serves TLS");
        }
        let options = options.tls(remoting_tls);
        let admin = AdminServer::bind_with_tls(
            Arc::new(HttpHandles {
                config: Arc::clone(&ctx.config),
                live: Arc::clone(&ctx.live),
                replica: Arc::clone(&ctx.replica),
                store: Arc::clone(&ctx.store),
                clients: Arc::clone(&ctx.clients),
                membership: Arc::clone(&ctx.membership),
                register_now: Arc::clone(&ctx.register_now),
                draining: Arc::clone(&ctx.draining),
                metrics: Arc::clone(&ctx.metrics),
                acl: ctx.acl.clone(),
            }),
            admin_listen,
            admin_tls,
        )
        .await
        .map_err(|source| BrokerError::Bind { addr: admin_listen.to_string(), source })?;
        let listen = SocketAddr::from(([0, 0, 0, 0], ctx.config.listen_port));
        let remoting = RemotingServer::bind_with(listen, table, options)
            .await
            .map_err(|source| BrokerError::Bind { addr: listen.to_string(), source })?;

        let namesrv_tls = match ctx.config.tls_client() {
            Some(settings) => {
                Some(ClientTls::from_settings(&settings).map_err(|e| BrokerError::Config(format!("TLS client: {e}")))?)
            }
            None => None,
        };
        let namesrv_client = RemotingClient::with_tls(ProcessorTable::new(), false, None, namesrv_tls);
        let mut tasks = vec![
            group_commit_task,
            offsets_task,
            tokio::spawn(housekeeping(Arc::clone(&ctx), cancel.child_token())),
            ctx.pop.spawn_revive(cancel.child_token()),
            tokio::spawn({
                let ctx = Arc::clone(&ctx);
                let cancel = cancel.child_token();
                async move { crate::observability::metrics::upkeep(&ctx.metrics, cancel).await }
            }),
            schedule::spawn(
                Arc::new(ScheduleHandles {
                    store: Arc::clone(&ctx.store),
                    replica: Arc::clone(&ctx.replica),
                    writer: ctx.writer.clone(),
                    store_host: ctx.store_host,
                }),
                cancel.child_token(),
            ),
            crate::services::transaction_check::spawn(
                Arc::new(CheckHandles {
                    check_interval: ctx.config.transaction_check_interval,
                    broker_name: ctx.config.broker_name.clone(),
                    live: Arc::clone(&ctx.live),
                    store: Arc::clone(&ctx.store),
                    replica: Arc::clone(&ctx.replica),
                    writer: ctx.writer.clone(),
                    transactions: Arc::clone(&ctx.transactions),
                    clients: Arc::clone(&ctx.clients),
                    store_host: ctx.store_host,
                    register_now: Arc::clone(&ctx.register_now),
                }),
                cancel.child_token(),
            ),
            crate::services::disk_guard::spawn(
                Arc::clone(&ctx.replica),
                Arc::clone(&ctx.store),
                ctx.config.raft_heartbeat_interval_ms,
                cancel.child_token(),
            ),
            crate::services::replication_watch::spawn(Arc::clone(&ctx.replica), cancel.child_token()),
            crate::services::membership::spawn_joint_finisher(Arc::clone(&ctx.membership), cancel.child_token()),
            retention::spawn(
                RetentionHandles {
                    store: Arc::clone(&ctx.store),
                    replica: Arc::clone(&ctx.replica),
                    config: ctx.live.subscribe(),
                    manual_purge_rounds: Arc::clone(&ctx.manual_purge_rounds),
                },
                RetentionSettings::from_config(&ctx.config),
                cancel.child_token(),
            ),
            namesrv_registration::spawn(
                Arc::new(RegistrationHandles {
                    config: BrokerConfig::clone(&ctx.config),
                    replica: Arc::clone(&ctx.replica),
                    store: Arc::clone(&ctx.store),
                    live: Arc::clone(&ctx.live),
                    register_now: Arc::clone(&ctx.register_now),
                    cluster_signer: ctx.membership.cluster_signer.clone(),
                }),
                namesrv_client.clone(),
                cancel.child_token(),
            ),
        ];
        if let Some(acl) = &ctx.acl {
            tasks.push(tokio::spawn(Arc::clone(acl).watch(cancel.child_token())));
            let boot_log_end = ctx.replica.node().log_end().unwrap_or(0);
            tasks.push(tokio::spawn(crate::processors::acl::follow_replicated_edits(
                Arc::clone(acl),
                ctx.store.acl_documents(),
                ctx.store.applied(),
                boot_log_end,
                Arc::clone(ctx.replica.node()),
                cancel.child_token(),
            )));
        }
        if let Some(file) = &ctx.config.test_clock_skew_file {
            warn!(file = %file.display(), "TEST ONLY: the wall clock follows testClockSkewFile");
            tasks.push(crate::state::clock::spawn_skew_watcher(file.clone(), cancel.child_token()));
        }
        let line = format!(
            "The broker[{}, {}] boot success. serializeType=JSON and name server is {}",
            ctx.config.broker_name,
            ctx.config.broker_addr(),
            ctx.config.namesrv_addr
        );
        info!("{line}");
        println!("{line}");
        Ok(Broker { ctx, raft_server, transport, remoting, bridge, admin, namesrv_client, cancel, tasks, raft_runtime })
    }

    /// The bound remoting address.
    pub fn local_addr(&self) -> SocketAddr {
        self.remoting.local_addr()
    }

    /// The processors as another protocol reaches them (the gRPC MessagingService).
    pub fn bridge(&self) -> Bridge {
        self.bridge.clone()
    }

    /// The bound admin HTTP address (`adminPort`; port 0 binds an ephemeral one).
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        Some(self.admin.local_addr())
    }

    /// Marks this replica draining ahead of [`Broker::shutdown`] (which does it first anyway): `/readyz`
    /// answers 503 so load balancers move away, and admin HTTP changes are refused.
    pub fn begin_draining(&self) {
        self.ctx.draining.store(true, Ordering::Release);
    }

    /// `brokerIP1:listenPort` as registered.
    pub fn broker_addr(&self) -> String {
        self.ctx.config.broker_addr()
    }

    /// This replica's Raft id.
    pub fn node_id(&self) -> u64 {
        self.ctx.replica.node_id()
    }

    /// Term, leader and role as this replica sees them.
    pub fn leadership(&self) -> Leadership {
        self.ctx.replica.leadership()
    }

    /// Whether this replica leads and takes writes (passed the readiness gate).
    pub fn is_ready_leader(&self) -> bool {
        self.ctx.replica.ready_term().is_some()
    }

    /// `/readyz`'s checks now.
    pub fn readiness(&self) -> crate::http::probes::Readiness {
        crate::http::probes::Readiness::of(&self.ctx.replica, &self.ctx.store, &self.ctx.draining)
    }

    /// The applied state (tests, admin).
    pub fn store(&self) -> &Arc<MessageStore> {
        &self.ctx.store
    }

    /// The Raft node (status, membership).
    pub fn raft(&self) -> &Arc<RaftNode> {
        self.ctx.replica.node()
    }

    /// Stops gracefully: hand leadership over (if leading), release parked long polls, unregister
    /// from the NameServers, stop accepting and drain requests, stop the tasks, leave the Raft
    /// group's RPC, shut Raft down (the log is flushed), flush the ConsumeQueues.
    pub async fn shutdown(self) {
        let Broker {
            ctx,
            raft_server,
            transport,
            remoting,
            bridge,
            admin,
            namesrv_client,
            cancel,
            tasks,
            raft_runtime,
        } = self;
        // Holds the context; the gRPC server stopped before shutdown was called.
        drop(bridge);
        // First: `/readyz` answers 503 and admin changes are refused while everything drains.
        ctx.draining.store(true, Ordering::Release);
        // A leader hands over while it still answers: sends in flight and after it are refused with
        // the new leader's address (SERVICE_NOT_AVAILABLE, `leader=`), so clients move at once and
        // the group waits out no lease and no election timeout.
        if ctx.replica.leadership().role == raftmq_raft::Role::Leader {
            match crate::services::membership::transfer_leader(&ctx.membership, None).await {
                Ok(r) => info!(to = ?r.leader, "leadership handed over before shutdown"),
                Err(e) => warn!(error = %e, "no leadership handover before shutdown; the group will elect"),
            }
        }
        // Requests that reach the closing port are refused naming the leader, as a follower would.
        if let Some(leader) =
            ctx.replica.leader_addr().filter(|_| ctx.replica.leadership().role != raftmq_raft::Role::Leader)
        {
            remoting.set_refusal_remark(format!("{SHUTTING_DOWN_REMARK}; {}", format_leader_hint(&leader)));
        }
        // Parked long polls re-run now, on a follower (they answer what it has applied, or
        // PULL_NOT_FOUND); they would otherwise hold the drain below for their suspend timeouts.
        ctx.store.release_suspended_pulls();
        // Off the route before the port closes: clients that re-read it find only live replicas.
        let signer = ctx.membership.cluster_signer.as_deref();
        namesrv_registration::unregister_all(&ctx.replica, &ctx.config, &namesrv_client, signer).await;
        remoting.shutdown().await;
        drop(remoting);
        cancel.cancel();
        for task in tasks {
            if tokio::time::timeout(Duration::from_millis(TASK_STOP_MAX_MS), task).await.is_err() {
                warn!("a broker task did not stop in time");
            }
        }
        // Its handlers hold the context, which must be the last handle before Raft shuts down.
        admin.shutdown().await;
        namesrv_client.close().await;
        ctx.forwarder.close().await;
        ctx.peer_client.close().await;
        raft_server.shutdown().await;
        transport.close().await;
        let store = Arc::clone(&ctx.store);
        let node = Arc::clone(ctx.replica.node());
        drop(ctx);
        match wait_unique(node).await {
            Ok(node) => {
                if let Err(e) = node.shutdown().await {
                    warn!(error = %e, "raft shutdown failed");
                }
            }
            Err(node) => {
                warn!("the raft node is still shared at shutdown; stopping openraft only");
                if let Some(raft) = node.raft_handle()
                    && let Err(e) = raft.shutdown().await
                {
                    warn!(error = %e, "raft shutdown failed");
                }
            }
        }
        store.flush();
        drop(raft_runtime);
        info!(broker = %store.store_root().display(), "broker stopped");
    }
}

/// Waits (bounded) until `node` is the last handle, so it can be shut down by value.
async fn wait_unique(mut node: Arc<RaftNode>) -> Result<RaftNode, Arc<RaftNode>> {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(TASK_STOP_MAX_MS);
    loop {
        match Arc::try_unwrap(node) {
            Ok(n) => return Ok(n),
            Err(shared) if tokio::time::Instant::now() >= deadline => return Err(shared),
            Err(shared) => {
                node = shared;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// `ClientHousekeepingService`: drops silent client channels and notifies their groups.
async fn housekeeping(ctx: Arc<BrokerContext>, cancel: CancellationToken) {
    let mut interval = tokio::time::interval(Duration::from_millis(CLIENT_HOUSEKEEPING_INTERVAL_MS));
    loop {
        tokio::select! {
            biased;
            _ = cancel.cancelled() => break,
            _ = interval.tick() => {
                for group in ctx.clients.expire(now_ms()) {
                    notify_consumer_ids_changed(&ctx.clients, &group);
                }
            }
        }
    }
}

/// Runs a broker until `shutdown` completes, then stops it gracefully (what `raftmq broker` calls).
pub async fn run(config: BrokerConfig, shutdown: impl std::future::Future<Output = ()>) -> Result<(), BrokerError> {
    let broker = Broker::start(config).await?;
    shutdown.await;
    broker.shutdown().await;
    Ok(())
}
