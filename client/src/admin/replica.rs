//! Which replica to ask. Writes go to a group's brokerId 0, in raftmq its Raft leader (a follower
//! would refuse them); reads go to the leader, else the lowest-id replica (Java's
//! `BrokerData.selectBrokerAddr` without the randomness); per-replica state (configs, retention, ACL
//! versions) is asked of every replica. Routes and cluster info come from the NameServer, so a
//! choice is as fresh as the group's last registration.
//!
//! The functions over a [`TopicRouteData`] take the route the caller already holds, so a command
//! that also reads the route's queues asks the NameServer once.

use std::collections::BTreeSet;

use raftmq_common::protocol::body::route::MASTER_ID;
use raftmq_common::protocol::body::route::TopicRouteData;

use super::client::Admin;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;

impl Admin {
    /// `(group, address to read from)` of each group serving `route`, in route order: its leader,
    /// else its lowest-id replica; a group listing no address is left out.
    pub fn read_addrs_of_route(route: &TopicRouteData) -> Vec<(String, String)> {
        route
            .broker_datas
            .iter()
            .filter_map(|bd| bd.select_broker_addr().map(|addr| (bd.broker_name.clone(), addr.to_owned())))
            .collect()
    }

    /// The address to read group `broker_name` of `route` from (see [`Self::read_addrs_of_route`]);
    /// `None` when the group does not serve the route's topic.
    pub fn read_addr_of_group(route: &TopicRouteData, broker_name: &str) -> Option<String> {
        Self::read_addrs_of_route(route).into_iter().find(|(name, _)| name == broker_name).map(|(_, addr)| addr)
    }

    /// Each group of `route` with its leader's (brokerId 0) address, `None` while it has none, in
    /// route order: a write that must reach every group checks them all before it starts.
    pub fn leaders_of_route(route: &TopicRouteData) -> Vec<(String, Option<String>)> {
        route.broker_datas.iter().map(|bd| (bd.broker_name.clone(), bd.broker_addrs.get(&MASTER_ID).cloned())).collect()
    }

    /// `(group, address to read from)` of every group the NameServer lists, by group name: the
    /// leader, else the lowest-id replica (see [`Self::read_addrs_of_route`]).
    pub async fn read_addrs_of_all_groups(&self) -> Result<Vec<(String, String)>> {
        let info = self.cluster_info().await?;
        Ok(info
            .broker_addr_table
            .iter()
            .filter_map(|(name, bd)| bd.select_broker_addr().map(|addr| (name.clone(), addr.to_owned())))
            .collect())
    }

    /// Every replica's address of every group of `cluster`, sorted, each once; `None` when the
    /// NameServer knows no such cluster.
    pub async fn replica_addrs_of_cluster(&self, cluster: &str) -> Result<Option<Vec<String>>> {
        let info = self.cluster_info().await?;
        let Some(names) = info.cluster_addr_table.get(cluster) else { return Ok(None) };
        let addrs: BTreeSet<String> = names
            .iter()
            .filter_map(|name| info.broker_addr_table.get(name))
            .flat_map(|group| group.broker_addrs.values().cloned())
            .collect();
        Ok(Some(addrs.into_iter().collect()))
    }

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

    /// Where a write to `broker` goes: a group name's brokerId 0 address, or `broker` itself when
    /// it is one address (`ip:port`), asked without looking it up.
    pub async fn write_addr_of(&self, broker: &str) -> Result<String> {
        if broker.contains(':') {
            return Ok(broker.to_owned());
        }
        self.master_addr_of_group(broker).await
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

#[cfg(test)]
mod tests {
    use raftmq_common::protocol::body::route::BrokerData;

    use super::*;

    fn group(name: &str, addrs: &[(i64, &str)]) -> BrokerData {
        BrokerData {
            broker_name: name.to_owned(),
            broker_addrs: addrs.iter().map(|(id, a)| (*id, (*a).to_owned())).collect(),
            ..BrokerData::default()
        }
    }

    fn route() -> TopicRouteData {
        TopicRouteData {
            broker_datas: vec![
                group("broker-a", &[(0, "a0:1"), (2, "a2:1")]),
                group("broker-b", &[(3, "b3:1"), (2, "b2:1")]),
                group("broker-c", &[]),
            ],
            ..TopicRouteData::default()
        }
    }

    #[test]
    fn reads_go_to_the_leader_else_the_lowest_id() {
        let reads = Admin::read_addrs_of_route(&route());
        assert_eq!(reads, [("broker-a".into(), "a0:1".into()), ("broker-b".into(), "b2:1".into())]);
        assert_eq!(Admin::read_addr_of_group(&route(), "broker-b").as_deref(), Some("b2:1"));
        assert_eq!(Admin::read_addr_of_group(&route(), "broker-c"), None, "a group without addresses");
        assert_eq!(Admin::read_addr_of_group(&route(), "broker-z"), None, "a group not in the route");
    }

    #[test]
    fn every_group_is_listed_with_its_leader_or_none() {
        let leaders = Admin::leaders_of_route(&route());
        assert_eq!(
            leaders,
            [("broker-a".into(), Some("a0:1".into())), ("broker-b".into(), None), ("broker-c".into(), None)]
        );
    }
}
