//! `raftmq dev`: a whole local cluster in one process, with no configuration — a NameServer and one
//! broker group of three Raft replicas on 127.0.0.1, data under `./raftmq-data` (or `--data`);
//! `--groups N --namesrvs M` gives the shape of docker-compose.yml (N groups, M NameServers that
//! share nothing, every broker registering with each).
//!
//! Ports follow RocketMQ's conventions: NameServer 9876 (the `j`-th at `9876 + j`); broker `i` of
//! group `g` listens on `10911 + 100·g + 10·i` (10911, 10921, 10931, the spacing of rocketmq-docker's
//! DLedger compose file) with its Raft port at `40911 + 10·g + i` (DLedger's sample peers) and its
//! admin port at `8080 + 10·g + i`. Groups are named `broker-a`, `broker-b`, … after `--broker-name`. Restarting with the same
//! `--data` keeps every message: a broker never re-initialises a group that has state on disk.
//! Ctrl-C stops the brokers, then the NameServer, gracefully.
//!
//! The cluster makes its own cluster secret (`<data>/cluster.secret`, 32 random bytes as hex, mode
//! 0600, kept across restarts) and every member uses it, as a deployment beyond loopback must:
//! Raft RPCs and NameServer registrations are signed; `raftmq admin --clusterSecretFile` signs
//! the NameServer writes an operator sends.
//!
//! `--tls` makes a self-signed CA and a server certificate in `<data>/tls/` (kept across restarts)
//! and runs every NameServer and broker remoting port TLS-enforcing, the brokers' own calls over
//! TLS; the banner prints what a client must set.

use std::path::PathBuf;

use anyhow::Context;
use anyhow::Result;
use clap::Args;
use raftmq_broker::Broker;
use raftmq_broker::BrokerConfig;
use raftmq_broker::config::broker_config::RaftPeer;
use raftmq_common::tls_settings::TlsMode;
use raftmq_grpc::GrpcServer;
use raftmq_namesrv::NameServer;
use raftmq_namesrv::NamesrvConfig;

use crate::dev_certs::DevCertFiles;

/// `raftmq dev` flags.
#[derive(Debug, Args)]
pub struct DevArgs {
    /// Directory for the NameServer's KV config and every broker's store.
    #[arg(long, value_name = "DIR", default_value = "raftmq-data")]
    pub data: PathBuf,

    /// Replicas in the broker group: 1 (development without replication), 3 or 5.
    #[arg(long, default_value_t = 3, value_parser = parse_group_size)]
    pub nodes: u64,

    /// Broker groups in the cluster, each of `--nodes` replicas: `broker-a`, `broker-b`, …
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=DEV_GROUPS_MAX))]
    pub groups: u64,

    /// NameServers (each independent; every broker registers with all of them).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=DEV_NAMESRVS_MAX))]
    pub namesrvs: u64,

    /// Port of the first NameServer; NameServer `j` uses this + j.
    #[arg(long, default_value_t = 9876)]
    pub namesrv_port: u16,

    /// Remoting port of the first broker; broker `i` uses this + 10·i.
    #[arg(long, default_value_t = 10911)]
    pub broker_port: u16,

    /// Raft port of the first broker; broker `i` uses this + i.
    #[arg(long, default_value_t = 40911)]
    pub raft_port: u16,

    /// Admin HTTP port of the first broker; broker `i` uses this + i.
    #[arg(long, default_value_t = 8080)]
    pub admin_port: u16,

    /// gRPC MessagingService port (RocketMQ 5 clients; `grpcServerPort`) of the first broker;
    /// broker `i` of group `g` uses this + 10·g + i; 0 picks free ones (the banner prints them).
    #[arg(long, default_value_t = 8085)]
    pub grpc_port: u16,

    /// Port of the web console (`raftmq console`) on 127.0.0.1; 0 picks a free one (the banner
    /// prints it).
    #[arg(long, default_value_t = 8000)]
    pub console_port: u16,

    /// Start no web console.
    #[arg(long)]
    pub no_console: bool,

    /// The first broker group's name (`brokerName`); with `--groups`, a name ending in `-a` counts
    /// on (`-b`, `-c`, …) and any other gets `-2`, `-3`, … appended.
    #[arg(long, default_value = "broker-a")]
    pub broker_name: String,

    /// Check every request against this plain ACL file (RocketMQ's `plain_acl.yml`; `aclEnable`).
    #[arg(long, value_name = "FILE")]
    pub acl_file: Option<PathBuf>,

    /// The admin account of the ACL file the replicas sign their calls to each other with
    /// (`innerAccessKey`); needs `--inner-secret-key`.
    #[arg(long, value_name = "KEY", requires = "inner_secret_key")]
    pub inner_access_key: Option<String>,

    /// Secret of `--inner-access-key` (`innerSecretKey`).
    #[arg(
        long,
        value_name = "SECRET",
        env = "RAFTMQ_INNER_SECRET_KEY",
        hide_env_values = true,
        requires = "inner_access_key"
    )]
    pub inner_secret_key: Option<String>,

    /// Run without a cluster secret: Raft RPCs and NameServer registrations unauthenticated (the
    /// cluster is on loopback; for measuring what authentication costs).
    #[arg(long)]
    pub insecure_no_cluster_secret: bool,

    /// TLS on every remoting port (`tls.server.mode=enforcing`), with a CA and certificate made in
    /// `<data>/tls/`; clients need `--tls --tlsTrustCertPath <data>/tls/ca.pem`.
    #[arg(long)]
    pub tls: bool,

    /// Override a broker config key on every replica, e.g. `-D raftCheckpointIntervalMs=0`;
    /// repeatable.
    #[arg(short = 'D', value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

/// The most broker groups `raftmq dev` starts (their ports are 100 apart).
const DEV_GROUPS_MAX: u64 = 9;
/// The most NameServers `raftmq dev` starts.
const DEV_NAMESRVS_MAX: u64 = 5;

/// The name of group `g` (0-based) after the first one's.
pub fn group_name(first: &str, g: u64) -> String {
    if g == 0 {
        return first.to_owned();
    }
    match first.strip_suffix('a') {
        Some(prefix) if prefix.ends_with('-') => {
            format!("{prefix}{}", char::from(b'a' + u8::try_from(g).unwrap_or(0)))
        }
        _ => format!("{first}-{}", g + 1),
    }
}

fn parse_group_size(s: &str) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(n @ (1 | 3 | 5)) => Ok(n),
        _ => Err(format!("{s:?}: a broker group has 1, 3 or 5 nodes")),
    }
}

/// The broker configs of the dev cluster, group by group (pure: tests check the layout without
/// starting anything).
pub fn broker_configs(args: &DevArgs, namesrv_addr: &str) -> Result<Vec<BrokerConfig>> {
    let port = |base: u16, step: u64, i: u64| -> Result<u16> {
        u16::try_from(u64::from(base) + step * i).context("a port beyond 65535: choose lower base ports")
    };
    let overrides = BrokerConfig::parse_overrides(args.overrides.iter().map(String::as_str))?;
    let mut configs = Vec::new();
    for g in 0..args.groups {
        let name = group_name(&args.broker_name, g);
        let broker_port = |i: u64| port(args.broker_port, 1, 100 * g + 10 * i);
        let mut peers = Vec::new();
        for i in 0..args.nodes {
            peers.push(RaftPeer {
                id: i,
                remoting_addr: format!("127.0.0.1:{}", broker_port(i)?),
                raft_addr: format!("127.0.0.1:{}", port(args.raft_port, 1, 10 * g + i)?),
            });
        }
        for i in 0..args.nodes {
            let config = BrokerConfig {
                broker_name: name.clone(),
                broker_ip1: Some("127.0.0.1".to_owned()),
                listen_port: broker_port(i)?,
                namesrv_addr: namesrv_addr.to_owned(),
                store_path_root_dir: args.data.join(&name).join(format!("n{i}")),
                admin_port: port(args.admin_port, 1, 10 * g + i)?,
                grpc_server_port: if args.grpc_port == 0 { 0 } else { port(args.grpc_port, 1, 10 * g + i)? },
                raft_self_id: i,
                raft_peers: peers.clone(),
                // A development cluster serves every subscription a client may try (RocketMQ's
                // default is off; production configs opt in).
                enable_property_filter: true,
                acl_enable: args.acl_file.is_some(),
                acl_file: args.acl_file.clone(),
                inner_access_key: args.inner_access_key.clone(),
                inner_secret_key: args.inner_secret_key.clone(),
                cluster_secret_file: (!args.insecure_no_cluster_secret).then(|| cluster_secret_path(&args.data)),
                ..BrokerConfig::default()
            };
            let config = if args.tls { with_tls(config, &tls_files(&args.data)) } else { config };
            configs.push(config.with_overrides(&overrides).with_context(|| format!("-D overrides for {name} n{i}"))?);
        }
    }
    Ok(configs)
}

/// The NameServer configs of the dev cluster: the first keeps its data in `namesrv/`, the others
/// in `namesrv-2/`, `namesrv-3/`, …
pub fn namesrv_configs(args: &DevArgs) -> Result<Vec<NamesrvConfig>> {
    (0..args.namesrvs)
        .map(|j| {
            let listen_port = u16::try_from(u64::from(args.namesrv_port) + j)
                .context("a NameServer port beyond 65535: choose a lower --namesrv-port")?;
            let dir = if j == 0 { "namesrv".to_owned() } else { format!("namesrv-{}", j + 1) };
            let tls = tls_files(&args.data);
            Ok(NamesrvConfig {
                tls_server_mode: if args.tls { TlsMode::Enforcing } else { TlsMode::default() },
                tls_server_cert_path: args.tls.then(|| tls.server_cert.clone()),
                tls_server_key_path: args.tls.then(|| tls.server_key.clone()),
                listen_port,
                bind_address: "127.0.0.1".to_owned(),
                kv_config_path: args.data.join(dir).join("kvConfig.json").display().to_string(),
                cluster_secret_file: if args.insecure_no_cluster_secret {
                    String::new()
                } else {
                    cluster_secret_path(&args.data).display().to_string()
                },
                ..NamesrvConfig::default()
            })
        })
        .collect()
}

/// A broker config serving and calling TLS only, with the dev certificates.
fn with_tls(config: BrokerConfig, tls: &DevCertFiles) -> BrokerConfig {
    BrokerConfig {
        tls_server_mode: TlsMode::Enforcing,
        tls_server_cert_path: Some(tls.server_cert.clone()),
        tls_server_key_path: Some(tls.server_key.clone()),
        tls_enable: true,
        tls_client_trust_cert_path: Some(tls.ca_cert.clone()),
        ..config
    }
}

/// Where the dev cluster keeps its TLS files.
pub fn tls_files(data: &std::path::Path) -> DevCertFiles {
    DevCertFiles::in_dir(&data.join("tls"))
}

/// Where the dev cluster keeps its cluster secret.
pub fn cluster_secret_path(data: &std::path::Path) -> PathBuf {
    data.join("cluster.secret")
}

/// Runs the dev cluster until the first shutdown signal.
pub async fn run(args: DevArgs) -> Result<()> {
    // Handlers first, so a signal during start-up still stops the cluster gracefully.
    let shutdown = crate::signal::shutdown();
    std::fs::create_dir_all(&args.data).with_context(|| format!("creating {}", args.data.display()))?;
    if !args.insecure_no_cluster_secret {
        crate::cluster_secret_file::ensure(&cluster_secret_path(&args.data))?;
    }
    if args.tls {
        let (files, made) = crate::dev_certs::ensure_dev_certs(&args.data.join("tls"))?;
        if made {
            println!(
                "made a TLS CA and server certificate in {}",
                files.ca_cert.parent().unwrap_or(&args.data).display()
            );
        }
    }
    let mut namesrvs = Vec::new();
    for config in namesrv_configs(&args)? {
        let port = config.listen_port;
        match NameServer::start(config).await {
            Ok(namesrv) => namesrvs.push(namesrv),
            Err(e) => {
                for namesrv in namesrvs {
                    namesrv.shutdown().await;
                }
                return Err(anyhow::Error::new(e).context(format!("starting the NameServer on port {port}")));
            }
        }
    }
    let namesrv_addr = namesrvs.iter().map(|n| n.local_addr().to_string()).collect::<Vec<_>>().join(";");

    let configs = broker_configs(&args, &namesrv_addr)?;
    // All replicas start together: a group elects its first leader only once a majority is up.
    let started = futures::future::join_all(configs.iter().cloned().map(Broker::start)).await;
    let mut brokers = Vec::new();
    let mut failure = None;
    for (result, config) in started.into_iter().zip(&configs) {
        match result {
            Ok(broker) => brokers.push(broker),
            Err(e) => {
                failure = Some(anyhow::Error::new(e).context(format!("starting broker node {}", config.raft_self_id)))
            }
        }
    }
    let mut grpc_servers = Vec::new();
    if failure.is_none() {
        for broker in &brokers {
            // `--grpc-port 0`: an ephemeral port per replica (the banner prints it).
            let started = if broker_grpc_port(broker) == 0 && args.grpc_port == 0 {
                GrpcServer::bind(broker.bridge(), std::net::SocketAddr::from(([0, 0, 0, 0], 0))).await.map(Some)
            } else {
                GrpcServer::start(broker.bridge()).await
            };
            match started {
                Ok(server) => grpc_servers.push(server),
                Err(e) => {
                    failure = Some(
                        anyhow::Error::new(e).context(format!("starting the gRPC server of node {}", broker.node_id())),
                    );
                    break;
                }
            }
        }
    }
    if let Some(error) = failure {
        for server in grpc_servers.into_iter().flatten() {
            server.shutdown().await;
        }
        for broker in brokers {
            broker.shutdown().await;
        }
        for namesrv in namesrvs {
            namesrv.shutdown().await;
        }
        return Err(error);
    }

    tokio::pin!(shutdown);
    // The banner promises a working cluster: print it once every group has a leader taking writes.
    let leaders = tokio::select! {
        biased;
        _ = &mut shutdown => None,
        leaders = ready_leaders(&brokers, &configs) => Some(leaders),
    };
    let mut console = None;
    if let Some(leaders) = leaders {
        if !args.no_console {
            match raftmq_console::Console::start(console_config(&args, &namesrv_addr, &configs)?).await {
                Ok(c) => console = Some(c),
                Err(e) => println!("web console not started: {e} (choose another --console-port)"),
            }
        }
        let grpc: Vec<Option<std::net::SocketAddr>> =
            grpc_servers.iter().map(|s| s.as_ref().map(GrpcServer::local_addr)).collect();
        print_banner(&args, &namesrv_addr, &configs, &leaders, &grpc, console.as_ref().map(|c| c.local_addr()));
        shutdown.await;
    }
    if let Some(c) = console {
        c.shutdown().await;
    }
    // Before the brokers: a gRPC server holds handles on its replica until it stops.
    for server in grpc_servers.into_iter().flatten() {
        server.shutdown().await;
    }
    for broker in brokers {
        broker.shutdown().await;
    }
    for namesrv in namesrvs {
        namesrv.shutdown().await;
    }
    println!("raftmq dev stopped; data kept in {}", args.data.display());
    Ok(())
}

/// The web console of the dev cluster: on loopback, with the brokers' `adminToken` when `-D` gave
/// one, the cluster secret (so deleting a topic also clears its NameServer routes) and the inner
/// ACL account when the cluster runs the plain ACL.
fn console_config(
    args: &DevArgs,
    namesrv_addr: &str,
    configs: &[BrokerConfig],
) -> Result<raftmq_console::ConsoleConfig> {
    let cluster_key = if args.insecure_no_cluster_secret {
        None
    } else {
        let file = cluster_secret_path(&args.data).display().to_string();
        raftmq_common::cluster_secret::ClusterSecret::from_config("", &file)?.map(|s| s.key())
    };
    Ok(raftmq_console::ConsoleConfig {
        namesrv_addr: namesrv_addr.to_owned(),
        listen: std::net::SocketAddr::from(([127, 0, 0, 1], args.console_port)),
        token: configs.first().and_then(|c| c.admin_token.clone()),
        credentials: args.inner_access_key.clone().zip(args.inner_secret_key.clone()),
        cluster_key,
    })
}

/// Waits until every group has a replica that leads and takes writes; per group, by name, its
/// leader's (node id, term). Logs while it waits, since recovering a large store can take a while.
async fn ready_leaders(brokers: &[Broker], configs: &[BrokerConfig]) -> std::collections::BTreeMap<String, (u64, u64)> {
    let groups: std::collections::BTreeSet<&str> = configs.iter().map(|c| c.broker_name.as_str()).collect();
    let started = std::time::Instant::now();
    let mut waiting_logged = false;
    loop {
        let leaders: std::collections::BTreeMap<String, (u64, u64)> = brokers
            .iter()
            .zip(configs)
            .filter(|(b, _)| b.is_ready_leader())
            .map(|(b, c)| (c.broker_name.clone(), (b.node_id(), b.leadership().term)))
            .collect();
        if leaders.len() == groups.len() {
            return leaders;
        }
        if !waiting_logged && started.elapsed() > DEV_LEADER_WAIT_NOTICE {
            println!("waiting for the broker groups to elect leaders and catch up…");
            waiting_logged = true;
        }
        tokio::time::sleep(DEV_LEADER_POLL).await;
    }
}

/// The `grpcServerPort` a replica was started with.
fn broker_grpc_port(broker: &Broker) -> u16 {
    broker.bridge().config().grpc_server_port
}

/// How often start-up checks whether the group is ready.
const DEV_LEADER_POLL: std::time::Duration = std::time::Duration::from_millis(50);
/// When start-up says that it is still waiting for a leader.
const DEV_LEADER_WAIT_NOTICE: std::time::Duration = std::time::Duration::from_secs(3);

fn print_banner(
    args: &DevArgs,
    namesrv_addr: &str,
    configs: &[BrokerConfig],
    leaders: &std::collections::BTreeMap<String, (u64, u64)>,
    grpc: &[Option<std::net::SocketAddr>],
    console: Option<std::net::SocketAddr>,
) {
    println!();
    let shape: Vec<String> = leaders
        .iter()
        .map(|(group, (node, term))| format!("{group}: {} replica(s), leader n{node} in term {term}", args.nodes))
        .collect();
    println!("raftmq dev cluster is up ({}), data in {}", shape.join("; "), args.data.display());
    // One line with every NameServer, as `-n` takes them.
    println!("  NameServer    {namesrv_addr}");
    if let Some(addr) = console {
        println!("  web console   http://{addr}/");
    }
    for (i, c) in configs.iter().enumerate() {
        let grpc = match grpc.get(i).copied().flatten() {
            Some(addr) => format!("  grpc 127.0.0.1:{}", addr.port()),
            None => String::new(),
        };
        println!(
            "  {} n{}  remoting 127.0.0.1:{}  raft {}  admin http://127.0.0.1:{}{grpc}",
            c.broker_name,
            c.raft_self_id,
            c.listen_port,
            c.self_peer().map_or("?", |p| p.raft_addr.as_str()),
            c.admin_port
        );
    }
    if args.insecure_no_cluster_secret {
        println!("  cluster secret none (--insecure-no-cluster-secret: Raft and registrations unauthenticated)");
    } else {
        let secret = cluster_secret_path(&args.data);
        println!(
            "  cluster secret {} (NameServer writes: raftmq admin --clusterSecretFile {})",
            secret.display(),
            secret.display()
        );
    }
    if args.tls {
        let ca = tls_files(&args.data).ca_cert;
        println!("  TLS           enforcing on every remoting port; CA certificate {}", ca.display());
        println!(
            "    raftmq CLI  --tls --tlsTrustCertPath {0}  (or RAFTMQ_TLS=true RAFTMQ_TLS_TRUST_CERT_PATH={0})",
            ca.display()
        );
        println!("    Rust SDK    .use_tls(true).tls_trust_cert_path(\"{}\")", ca.display());
        println!(
            "    Java client -Dtls.enable=true -Dtls.client.authServer=true -Dtls.client.trustCertPath={}",
            ca.display()
        );
    }
    if let Some(file) = &args.acl_file {
        println!(
            "  plain ACL     {} (sign with --accessKey/--secretKey or RAFTMQ_ACCESS_KEY/RAFTMQ_SECRET_KEY)",
            file.display()
        );
    }
    println!();
    println!("Try it (another terminal):");
    let n = if args.tls {
        format!("{namesrv_addr} --tls --tlsTrustCertPath {}", tls_files(&args.data).ca_cert.display())
    } else {
        namesrv_addr.to_owned()
    };
    println!("  raftmq admin updateTopic -n {n} -c DefaultCluster -t TopicTest");
    println!("  raftmq send -n {n} -t TopicTest --tag TagA --count 3 'hello raftmq'");
    println!("  raftmq consume -n {n} -t TopicTest -g demo-group --from-first --count 3");
    println!("  raftmq bench produce -n {n} -t TopicTest --count 10000");
    println!();
    println!("Ctrl-C stops the cluster; run `raftmq dev` again to continue with the same data.");
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `raftmq dev`'s defaults (a 3-node group on RocketMQ's ports, data in `d`) with `overrides`.
    fn default_args(overrides: &[&str]) -> DevArgs {
        DevArgs {
            data: PathBuf::from("d"),
            nodes: 3,
            groups: 1,
            namesrvs: 1,
            namesrv_port: 9876,
            broker_port: 10911,
            raft_port: 40911,
            admin_port: 8080,
            grpc_port: 8085,
            console_port: 8000,
            no_console: false,
            broker_name: "broker-a".into(),
            acl_file: None,
            inner_access_key: None,
            inner_secret_key: None,
            insecure_no_cluster_secret: false,
            tls: false,
            overrides: overrides.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn dev_group_layout_follows_rocketmq_ports() {
        let args = default_args(&[]);
        let configs = broker_configs(&args, "127.0.0.1:9876").unwrap();
        assert_eq!(configs.iter().map(|c| c.listen_port).collect::<Vec<_>>(), [10911, 10921, 10931]);
        assert_eq!(configs.iter().map(|c| c.admin_port).collect::<Vec<_>>(), [8080, 8081, 8082]);
        assert_eq!(configs[2].raft_peers[2].raft_addr, "127.0.0.1:40913");
        assert_eq!(configs[1].store_path_root_dir, PathBuf::from("d/broker-a/n1"));
        for c in &configs {
            c.validate().expect("every dev config is valid");
        }
        assert!(configs.iter().all(|c| !c.acl_enable), "no ACL unless asked");
        assert!(configs.iter().all(|c| c.cluster_secret_file == Some(PathBuf::from("d/cluster.secret"))));
        let acl = DevArgs {
            acl_file: Some(PathBuf::from("acl.yml")),
            inner_access_key: Some("groupPeers".into()),
            inner_secret_key: Some("peer-secret".into()),
            ..args
        };
        for c in broker_configs(&acl, "127.0.0.1:9876").unwrap() {
            assert!(c.acl_enable && c.acl_file_path() == std::path::Path::new("acl.yml"));
            assert_eq!(c.inner_credentials().unwrap().map(|k| k.access_key().to_owned()), Some("groupPeers".into()));
        }
        assert!(parse_group_size("2").is_err());
    }

    #[test]
    fn dev_groups_and_namesrvs_take_the_next_names_and_ports() {
        let args = DevArgs { groups: 2, namesrvs: 2, nodes: 3, ..default_args(&[]) };
        let configs = broker_configs(&args, "127.0.0.1:9876;127.0.0.1:9877").unwrap();
        assert_eq!(configs.len(), 6);
        let b: Vec<_> = configs.iter().filter(|c| c.broker_name == "broker-b").collect();
        assert_eq!(b.iter().map(|c| c.listen_port).collect::<Vec<_>>(), [11011, 11021, 11031]);
        assert_eq!(b.iter().map(|c| c.admin_port).collect::<Vec<_>>(), [8090, 8091, 8092]);
        assert_eq!(b[0].raft_peers[2].raft_addr, "127.0.0.1:40923");
        assert_eq!(b[1].store_path_root_dir, PathBuf::from("d/broker-b/n1"));
        assert!(configs.iter().all(|c| c.namesrv_addrs().count() == 2));
        let ports: std::collections::BTreeSet<u16> =
            configs.iter().flat_map(|c| [c.listen_port, c.admin_port, c.grpc_server_port]).collect();
        assert_eq!(ports.len(), 18, "no port is used twice");
        assert_eq!(b.iter().map(|c| c.grpc_server_port).collect::<Vec<_>>(), [8095, 8096, 8097]);
        let ns = namesrv_configs(&args).unwrap();
        assert_eq!(ns.iter().map(|n| n.listen_port).collect::<Vec<_>>(), [9876, 9877]);
        assert!(ns[1].kv_config_path.ends_with("namesrv-2/kvConfig.json"));
        assert_eq!(group_name("broker-a", 2), "broker-c");
        assert_eq!(group_name("orders", 0), "orders");
        assert_eq!(group_name("orders", 1), "orders-2");
    }

    #[test]
    fn dev_tls_enforces_tls_everywhere_with_its_own_certificates() {
        let args = DevArgs { tls: true, ..default_args(&[]) };
        for c in broker_configs(&args, "127.0.0.1:9876").unwrap() {
            assert_eq!(c.tls_server_mode, TlsMode::Enforcing);
            assert_eq!(c.tls_server_cert_path, Some(PathBuf::from("d/tls/server.pem")));
            assert_eq!(c.tls_client().and_then(|t| t.trust_cert_path), Some(PathBuf::from("d/tls/ca.pem")));
        }
        for n in namesrv_configs(&args).unwrap() {
            assert_eq!(n.tls_server_mode, TlsMode::Enforcing);
            n.validate().expect("valid");
        }
        let plain = broker_configs(&default_args(&[]), "127.0.0.1:9876").unwrap();
        assert!(plain.iter().all(|c| !c.tls_server().serves_tls() && c.tls_client().is_none()));
    }

    #[test]
    fn dev_certs_are_made_once_and_load_as_a_server_pair() {
        let dir = tempfile::tempdir().unwrap();
        let (files, made) = crate::dev_certs::ensure_dev_certs(dir.path()).unwrap();
        assert!(made);
        let (_, again) = crate::dev_certs::ensure_dev_certs(dir.path()).unwrap();
        assert!(!again, "existing certificates are kept");
        raftmq_common::remoting::tls_files::certified_key(("cert", &files.server_cert), ("key", &files.server_key))
            .expect("the pair loads and matches");
        raftmq_common::remoting::tls_files::read_roots("ca", &files.ca_cert).expect("the CA loads");
    }

    #[test]
    fn dev_overrides_reach_every_replica_and_bad_ones_name_the_key() {
        let args = default_args;
        let configs =
            broker_configs(&args(&["raftCheckpointIntervalMs=0", "deleteWhen=4", "maxMessageSize=65536"]), "ns:9876")
                .unwrap();
        for c in &configs {
            assert_eq!(c.raft_checkpoint_interval_ms, 0);
            assert_eq!(c.delete_when, "4", "a text key keeps its text");
            assert_eq!(c.max_message_size, 65536);
        }
        assert_eq!(configs[2].listen_port, 10931, "the layout is kept");
        let unknown = broker_configs(&args(&["noSuchKey=1"]), "ns:9876").unwrap_err();
        assert!(format!("{unknown:#}").contains("noSuchKey"), "{unknown:#}");
        assert!(broker_configs(&args(&["novalue"]), "ns:9876").is_err());
        let invalid = broker_configs(&args(&["brokerName= "]), "ns:9876").unwrap_err();
        assert!(format!("{invalid:#}").contains("brokerName"), "{invalid:#}");
        assert_eq!(parse_group_size("1"), Ok(1));
    }
}
