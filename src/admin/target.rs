//! Where a command goes: the `-c CLUSTER` / `-b BROKER` flags turned into the SDK's choice of
//! replicas ([`Admin`]'s `replica` calls: leaders for writes, every replica for per-replica state),
//! and the CLI's wording when there is none.

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
            admin.replica_addrs_of_cluster(c).await.context(op)?.ok_or_else(|| anyhow!("cluster {c} is unknown"))
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
        (None, Some(broker)) => Ok(vec![(broker.clone(), admin.write_addr_of(broker).await?)]),
        (None, None) => bail!("give -c CLUSTER or -b BROKER"),
    }
}

/// The address to read group `broker_name`'s queues of `topic` from ([`Admin::read_addr_of_group`]).
pub(super) fn group_read_addr(route: &TopicRouteData, cmd: &str, broker_name: &str, topic: &str) -> Result<String> {
    Admin::read_addr_of_group(route, broker_name)
        .ok_or_else(|| anyhow!("{cmd}: broker group {broker_name} does not serve topic {topic}"))
}
