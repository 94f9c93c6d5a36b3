//! Broker state and config: `brokerStatus`, `getBrokerConfig`, `updateBrokerConfig`. A config is per
//! replica: `-b` one address; `-c` the group leaders (reads) or every replica (updates).

use std::collections::BTreeMap;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use clap::Args;
use raftmq_client::Admin;
use raftmq_common::protocol::RequestCode;

use super::config_update::UpdateLines;
use super::config_update::update_config_each;
use super::explain::explain;
use super::out::Out;
use super::render::print_key_values;
use super::target::replica_addrs;

#[derive(Debug, Args)]
pub(super) struct BrokerStatusArgs {
    /// One broker's address (`ip:port`).
    #[arg(short = 'b', long = "brokerAddr", required_unless_present = "cluster")]
    broker: Option<String>,
    /// Every broker of a cluster (each group's leader).
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
}

#[derive(Debug, Args)]
pub(super) struct UpdateBrokerConfigArgs {
    /// One replica's address (`ip:port`).
    #[arg(short = 'b', long = "brokerAddr", required_unless_present = "cluster")]
    broker: Option<String>,
    /// Every replica of every broker group of a cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// The config key (RocketMQ's name, e.g. `brokerPermission`).
    #[arg(short = 'k', long = "key")]
    key: String,
    /// The new value.
    #[arg(short = 'v', long = "value")]
    value: String,
}

/// The brokers `-b` or `-c` names: one address, or each group leader of a cluster.
async fn broker_addrs(admin: &Admin, command: &str, a: &BrokerStatusArgs) -> Result<Vec<String>> {
    Ok(match (&a.broker, &a.cluster) {
        (Some(b), _) => vec![b.clone()],
        (None, Some(c)) => {
            admin.master_addrs_of_cluster(c).await.context(command.to_owned())?.into_iter().map(|(_, a)| a).collect()
        }
        (None, None) => bail!("give -b BROKER_ADDR or -c CLUSTER"),
    })
}

/// Java's `BrokerStatusSubCommand`: `key: value` lines (`%-32s: %s`), or with `-c` each broker's
/// lines prefixed by its address.
pub(super) async fn broker_status(admin: &Admin, out: Out, a: BrokerStatusArgs) -> Result<()> {
    let addrs = broker_addrs(admin, "brokerStatus", &a).await?;
    let mut all = BTreeMap::new();
    for addr in &addrs {
        let kv = admin
            .broker_runtime_info(addr)
            .await
            .map_err(|e| explain("brokerStatus", RequestCode::GetBrokerRuntimeInfo, e))?;
        all.insert(addr.clone(), kv.table);
    }
    print_key_values(out, &addrs, &all);
    Ok(())
}

pub(super) async fn broker_config(admin: &Admin, out: Out, a: BrokerStatusArgs) -> Result<()> {
    let addrs = broker_addrs(admin, "getBrokerConfig", &a).await?;
    let mut all = BTreeMap::new();
    for addr in &addrs {
        let config =
            admin.broker_config(addr).await.map_err(|e| explain("getBrokerConfig", RequestCode::GetBrokerConfig, e))?;
        all.insert(addr.clone(), config);
    }
    print_key_values(out, &addrs, &all);
    Ok(())
}

/// Java's `UpdateBrokerConfigSubCommand`: `-b` updates one replica; `-c` every replica of the
/// cluster (Java's masters and slaves), each told on its own. Every broker is tried; the command
/// fails if any refused.
pub(super) async fn update_broker_config(admin: &Admin, out: Out, a: UpdateBrokerConfigArgs) -> Result<()> {
    let addrs = replica_addrs(admin, "updateBrokerConfig", a.broker.as_deref(), a.cluster.as_deref()).await?;
    let lines = UpdateLines { op: "updateBrokerConfig", noun: "broker", ok: "success, ", servers: "brokers" };
    update_config_each(out, &addrs, lines, (&a.key, &a.value), async |addr, updates| {
        admin.update_broker_config(addr, updates).await
    })
    .await
}
