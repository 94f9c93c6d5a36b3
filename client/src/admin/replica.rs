//! Which replica to ask. Writes go to a group's brokerId 0, in raftmq its Raft leader (a follower
//! would refuse them); reads go to the leader, else the lowest-id replica; per-replica state
//! (configs, retention, ACL versions) is asked of every replica. Routes and cluster info come from
//! the NameServer, so a choice is as fresh as its last registration.

use std::collections::BTreeSet;

use raftmq_common::protocol::body::route::MASTER_ID;

use super::client::Admin;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;

impl Admin {
    /// `(brokerName, brokerId 0 address)` of every group of `cluster` that has one
    /// (`CommandUtil.fetchMasterAddrByClusterName`).
    pub async fn master_addrs_of_cluster(&self, cluster: &str) -> Result<Vec<(String, String)>> {
        let info = self.cluster_info().await?;
        let names = info.cluster_addr_table.get(cluster).ok_or_else(|| {
            ClientError::invalid_argument("clusterMasters", "no such cluster").with_context("cluster", cluster)
        })?;
        Ok(names
            .iter()
            .filter_map(|name| {
                let addr = info.broker_addr_table.get(name)?.broker_addrs.get(&MASTER_ID)?;
                Some((name.clone(), addr.clone()))
            })
            .collect())
    }

    /// The brokerId 0 address of `broker_name`.
    pub async fn master_addr_of_group(&self, broker_name: &str) -> Result<String> {
        let info = self.cluster_info().await?;
        info.broker_addr_table.get(broker_name).and_then(|bd| bd.broker_addrs.get(&MASTER_ID)).cloned().ok_or_else(
            || {
                ClientError::new(ErrorKind::NoRoute, "groupMaster", "the group has no brokerId 0 (leader) address")
                    .with_context("broker", broker_name)
            },
        )
    }

    /// Addresses of group `broker`'s members the NameServer lists (`broker` may be one address).
    pub(super) async fn group_addrs(&self, broker: &str) -> Result<BTreeSet<String>> {
        if broker.contains(':') {
            return Ok(BTreeSet::from([broker.to_owned()]));
        }
        let info = self.cluster_info().await?;
        let addrs: BTreeSet<String> = info
            .broker_addr_table
            .get(broker)
            .map(|bd| bd.broker_addrs.values().cloned().collect())
            .unwrap_or_default();
        if addrs.is_empty() {
            return Err(ClientError::new(ErrorKind::NoRoute, "groupStatus", "no member of the group is registered")
                .with_context("broker", broker));
        }
        Ok(addrs)
    }
}
