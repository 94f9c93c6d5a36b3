//! The command-line surface: clap definitions and the dispatch to each crate.
//!
//! Flags follow RocketMQ's daemons (`-c/--configFile`, `-p/--printConfigItem`, the broker's
//! `-n/--namesrvAddr` / `NAMESRV_ADDR`) so scripts written for `mqnamesrv` and `mqbroker` keep working;
//! `-D key=value` overrides any config key, as Java's `-Dkey=value`.

use std::path::PathBuf;

use anyhow::Context;
use anyhow::Result;
use clap::Args;
use clap::Parser;
use clap::Subcommand;
use raftmq_broker::BrokerConfig;
use raftmq_namesrv::NamesrvConfig;

/// RocketMQ's architecture on a Raft-replicated CommitLog.
#[derive(Debug, Parser)]
#[command(name = "raftmq", version, about, propagate_version = true)]
pub struct Cli {
    /// Log as JSON lines (for containers); the level comes from RUST_LOG or `--verbose`.
    /// `RAFTMQ_LOG_JSON` takes 1/0, true/false, yes/no or on/off, as containers set it.
    #[arg(
        long,
        global = true,
        env = "RAFTMQ_LOG_JSON",
        action = clap::ArgAction::SetTrue,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub log_json: bool,

    /// Log more: once for info, twice for debug. By default servers log at info (openraft at warn),
    /// `dev` only warnings and the other commands only errors; RUST_LOG overrides both. (`-v` is
    /// taken by mqadmin's `-v/--value`.)
    #[arg(long = "verbose", global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

/// What to run.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a NameServer (RocketMQ's `mqnamesrv`): brokers register, clients look up routes.
    Namesrv(NamesrvArgs),
    /// Run a broker replica (RocketMQ's `mqbroker`): one member of a Raft-replicated broker group.
    Broker(BrokerArgs),
    /// Run a local cluster with no config: a NameServer and a 3-node broker group on 127.0.0.1.
    Dev(crate::dev::DevArgs),
    /// Administer topics, groups, offsets and messages (RocketMQ's `mqadmin`).
    Admin(crate::admin::AdminArgs),
    /// Send a message and print the broker's answer.
    Send(crate::send::SendArgs),
    /// Consume a topic as a consumer group and print each message.
    Consume(crate::consume::ConsumeArgs),
    /// Benchmark producing or consuming (RocketMQ's `benchmark/` Producer and Consumer).
    Bench(crate::bench::BenchArgs),
    /// Exit 0 when a URL answers HTTP 200 (the container health check of a broker's `/readyz`).
    Healthcheck(crate::healthcheck::HealthcheckArgs),
    /// Make a cluster secret file (32 random bytes as hex, owner-only) unless it exists.
    ClusterSecret(crate::cluster_secret_file::ClusterSecretArgs),
    /// Serve the web console for the cluster of these NameServers.
    Console(crate::console::ConsoleArgs),
}

impl Command {
    /// How much this command logs by default (`crate::logging`).
    pub fn quietness(&self) -> crate::logging::Quietness {
        use crate::logging::Quietness;
        match self {
            Command::Namesrv(_) | Command::Broker(_) | Command::Console(_) => Quietness::Server,
            Command::Dev(_) => Quietness::Dev,
            Command::Admin(_)
            | Command::Send(_)
            | Command::Consume(_)
            | Command::Bench(_)
            | Command::Healthcheck(_)
            | Command::ClusterSecret(_) => Quietness::Command,
        }
    }

    /// Worker threads of the process's tokio runtime: one for the client commands, as Java's
    /// `NettyRemotingClient` serves all its connections from one event-loop thread. Their blocking
    /// work (listeners) runs on threads of its own; a second worker mostly added wake-ups between
    /// the two (BENCHMARKS.md#experiments, E32: `bench produce` 2–6 % faster in six pairs of seven, with
    /// less client CPU; catch-up consumption within noise). Servers take tokio's default, one per
    /// core. `TOKIO_WORKER_THREADS` still wins.
    pub fn runtime_worker_threads(&self) -> Option<usize> {
        match self {
            Command::Namesrv(_) | Command::Broker(_) | Command::Dev(_) | Command::Console(_) => None,
            Command::Admin(_)
            | Command::Send(_)
            | Command::Consume(_)
            | Command::Bench(_)
            | Command::Healthcheck(_)
            | Command::ClusterSecret(_) => Some(1),
        }
    }
}

/// `raftmq namesrv` flags.
#[derive(Debug, Args)]
pub struct NamesrvArgs {
    /// Config file with RocketMQ's keys (`listenPort`, `scanNotActiveBrokerInterval`, ...): TOML when
    /// named `*.toml`, else Java properties as RocketMQ's `namesrv.properties`.
    #[arg(short = 'c', long = "configFile", value_name = "FILE")]
    pub config_file: Option<PathBuf>,

    /// Print the merged configuration as TOML and exit.
    #[arg(short = 'p', long = "printConfigItem")]
    pub print_config: bool,

    /// Port to listen on (overrides `listenPort`).
    #[arg(long = "listenPort", value_name = "PORT")]
    pub listen_port: Option<u16>,

    /// Override any config key, e.g. `-D brokerChannelExpiredTime=30s`; repeatable.
    #[arg(short = 'D', value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

/// `raftmq broker` flags.
#[derive(Debug, Args)]
pub struct BrokerArgs {
    /// Config file with RocketMQ's keys (`brokerName`, `listenPort`, `raftPeers`, ...): TOML when named
    /// `*.toml`, else Java properties as RocketMQ's `broker.conf` (`brokerRole`, `brokerId`,
    /// `flushDiskType` are skipped with a warning).
    #[arg(short = 'c', long = "configFile", value_name = "FILE")]
    pub config_file: Option<PathBuf>,

    /// Print the merged configuration as TOML and exit.
    #[arg(short = 'p', long = "printConfigItem")]
    pub print_config: bool,

    /// NameServer addresses, `host:port;host:port` (overrides `namesrvAddr`).
    #[arg(short = 'n', long = "namesrvAddr", value_name = "ADDRS", env = "NAMESRV_ADDR")]
    pub namesrv_addr: Option<String>,

    /// Override any config key, e.g. `-D listenPort=10921`; repeatable.
    #[arg(short = 'D', value_name = "KEY=VALUE")]
    pub overrides: Vec<String>,
}

/// Runs the chosen subcommand to completion.
pub async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Namesrv(args) => namesrv(args).await,
        Command::Broker(args) => broker(args).await,
        Command::Dev(args) => crate::dev::run(args).await,
        Command::Admin(args) => crate::admin::run(args).await,
        Command::Send(args) => crate::send::run(args).await,
        Command::Consume(args) => crate::consume::run(args).await,
        Command::Bench(args) => crate::bench::run(args).await,
        Command::Healthcheck(args) => crate::healthcheck::run(&args),
        Command::ClusterSecret(args) => crate::cluster_secret_file::run(&args),
        Command::Console(args) => crate::console::run(args).await,
    }
}

async fn broker(args: BrokerArgs) -> Result<()> {
    let mut overrides = BrokerConfig::parse_overrides(args.overrides.iter().map(String::as_str))?;
    if let Some(addrs) = args.namesrv_addr {
        // A text key: the value is taken as it is, never read as TOML.
        overrides.push(("namesrvAddr".to_owned(), addrs));
    }
    let config = BrokerConfig::load(args.config_file.as_deref(), &overrides).context("loading the broker config")?;
    if args.print_config {
        print!("{}", config.to_toml_string());
        return Ok(());
    }
    let shutdown = crate::signal::shutdown();
    let broker = raftmq_broker::Broker::start(config).await.context("running the broker")?;
    // `grpcServerPort` (0: off): RocketMQ 5 clients' MessagingService next to the broker.
    let grpc = match raftmq_grpc::GrpcServer::start(broker.bridge()).await {
        Ok(grpc) => grpc,
        Err(e) => {
            broker.shutdown().await;
            return Err(anyhow::Error::new(e).context("starting the gRPC server"));
        }
    };
    shutdown.await;
    // Before the broker: the gRPC server holds handles on it until it stops.
    if let Some(grpc) = grpc {
        grpc.shutdown().await;
    }
    broker.shutdown().await;
    Ok(())
}

async fn namesrv(args: NamesrvArgs) -> Result<()> {
    let mut overrides = NamesrvConfig::parse_overrides(args.overrides.iter().map(String::as_str))?;
    if let Some(port) = args.listen_port {
        overrides.push(("listenPort".to_owned(), port.to_string()));
    }
    let config =
        NamesrvConfig::load(args.config_file.as_deref(), &overrides).context("loading the NameServer config")?;
    if args.print_config {
        print!("{}", config.to_toml_string());
        return Ok(());
    }
    raftmq_namesrv::run(config, crate::signal::shutdown()).await.context("running the NameServer")?;
    Ok(())
}
