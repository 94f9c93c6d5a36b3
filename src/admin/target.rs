//! Where a command goes: the `-c CLUSTER` / `-b BROKER` flags of writes, and which replica of each
//! group a command asks (leader for writes; leader, else lowest id, for reads; every replica for
//! per-replica state).

use std::collections::BTreeSet;

use anyhow::Context;
use anyhow::Result;
use anyhow::anyhow;
use anyhow::bail;
use clap::ArgGroup;
use clap::Args;
use raftmq_client::Admin;
use raftmq_common::protocol::body::route::TopicRouteData;

/// Where a write goes: a cluster (`-c`) or one broker group / address (`-b`).
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("target").required(true).args(["cluster", "broker"])))]
pub(super) struct Target {
    /// Cluster name: every group of the cluster.
    #[arg(short = 'c', long = "clusterName")]
    pub(super) cluster: Option<String>,
    /// Broker group name (`broker-a`) or one broker address (`ip:port`).
    #[arg(short = 'b', long = "brokerAddr")]
    pub(super) broker: Option<String>,
}

/// One broker address (`-b`), or every replica of every group of a cluster (`-c`), sorted.
pub(super) async fn replica_addrs(
    admin: &Admin,
    op: &'static str,
    broker: Option<&str>,
    cluster: Option<&str>,
) -> Result<Vec<String>> {
    match (broker, cluster) {
        (Some(b), _) => Ok(vec![b.to_owned()]),
        (None, Some(c)) => {
            let info = admin.cluster_info().await.context(op)?;
            let names = info.cluster_addr_table.get(c).ok_or_else(|| anyhow!("cluster {c} is unknown"))?;
            let addrs: BTreeSet<String> = names
                .iter()
                .filter_map(|name| info.broker_addr_table.get(name))
                .flat_map(|group| group.broker_addrs.values().cloned())
                .collect();
            Ok(addrs.into_iter().collect())
        }
        (None, None) => bail!("give -b BROKER_ADDR or -c CLUSTER"),
    }
}

/// `(group name, leader address)` of each target group; an address given with `-b` is its own name.
pub(super) async fn write_targets(admin: &Admin, target: &Target) -> Result<Vec<(String, String)>> {
    match (&target.cluster, &target.broker) {
        (Some(cluster), _) => {
            let masters = admin.master_addrs_of_cluster(cluster).await?;
            if masters.is_empty() {
                bail!("cluster {cluster} has no broker group with a leader");
            }
            Ok(masters)
        }
        (None, Some(broker)) if broker.contains(':') => Ok(vec![(broker.clone(), broker.clone())]),
        (None, Some(name)) => Ok(vec![(name.clone(), admin.master_addr_of_group(name).await?)]),
        (None, None) => bail!("give -c CLUSTER or -b BROKER"),
    }
}

/// `(group name, address to read from)` of each group serving `route`: the leader, else the lowest id.
pub(super) fn read_targets(route: &TopicRouteData) -> Vec<(String, String)> {
    route
        .broker_datas
        .iter()
        .filter_map(|bd| bd.select_broker_addr().map(|addr| (bd.broker_name.clone(), addr.to_owned())))
        .collect()
}

/// The address to read group `broker_name`'s queues of `topic` from (see [`read_targets`]).
pub(super) fn group_read_addr(route: &TopicRouteData, cmd: &str, broker_name: &str, topic: &str) -> Result<String> {
    read_targets(route)
        .into_iter()
        .find(|(name, _)| name == broker_name)
        .map(|(_, addr)| addr)
        .ok_or_else(|| anyhow!("{cmd}: broker group {broker_name} does not serve topic {topic}"))
}
