//! `raftmq console -n NAMESRV`: serves the web console (`raftmq-console`) until a shutdown signal.
//! Only wiring: flags to a `ConsoleConfig`, start, print the URL, stop.

use std::net::SocketAddr;

use anyhow::Context;
use anyhow::Result;
use clap::Args;
use raftmq_console::Console;
use raftmq_console::ConsoleConfig;

use crate::namesrv_addr::NamesrvAddrArgs;

/// `raftmq console` flags.
#[derive(Debug, Args)]
pub struct ConsoleArgs {
    #[command(flatten)]
    pub namesrv: NamesrvAddrArgs,

    /// Where the console listens; without `--token` only a loopback address is allowed.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8000")]
    pub listen: SocketAddr,

    /// The brokers' `adminToken`: sent to their admin API, and the token that logs in to the
    /// console (prefer the environment variable: a flag shows in `ps`).
    #[arg(long, value_name = "TOKEN", env = "RAFTMQ_ADMIN_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// The console's config from the flags.
pub fn config(args: &ConsoleArgs) -> Result<ConsoleConfig> {
    let file = args.namesrv.cluster_secret_file.as_ref().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    let cluster_key = raftmq_common::cluster_secret::ClusterSecret::from_config("", &file)?.map(|s| s.key());
    let credentials = match (&args.namesrv.access_key, &args.namesrv.secret_key) {
        (Some(ak), Some(sk)) => Some((ak.clone(), sk.clone())),
        _ => None,
    };
    Ok(ConsoleConfig {
        namesrv_addr: args.namesrv.namesrv_addr.clone(),
        listen: args.listen,
        token: args.token.clone(),
        credentials,
        cluster_key,
    })
}

/// Serves until the first shutdown signal.
pub async fn run(args: ConsoleArgs) -> Result<()> {
    let shutdown = crate::signal::shutdown();
    let console = Console::start(config(&args)?).await.context("starting the web console")?;
    println!("raftmq console on http://{} (NameServers {})", console.local_addr(), args.namesrv.namesrv_addr);
    shutdown.await;
    console.shutdown().await;
    Ok(())
}
