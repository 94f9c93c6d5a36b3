//! [`Topology`]: the cluster as the NameServers tell it — clusters, broker groups (`brokerName`,
//! one Raft group each) and each replica's remoting address — plus each replica's admin API
//! address, which no NameServer knows: it is read once from the replica's own config
//! (GET_BROKER_CONFIG's `adminPort`, on the remoting address's host) and cached.
//!
//! Invariants: a replica whose admin address cannot be learnt stays in the topology with the
//! reason (the page shows it as down); the cache forgets an address whose replica left the
//! NameServers' view, so a replaced machine is asked again.

use std::collections::BTreeMap;
use std::collections::HashMap;

use raftmq_client::Admin;
use raftmq_common::sync::lock;
use serde::Serialize;

/// One replica of a group.
#[derive(Debug, Clone, Serialize)]
pub struct Replica {
    /// The brokerId it registers with (0: the leader; followers `node id + 1`... as the group decides).
    pub broker_id: i64,
    /// Remoting address.
    pub remoting_addr: String,
    /// Admin API address, when known.
    pub admin_addr: Option<String>,
    /// Why the admin address is not known.
    pub admin_error: Option<String>,
}

/// One broker group.
#[derive(Debug, Clone, Serialize)]
pub struct BrokerGroup {
    /// `brokerName`.
    pub name: String,
    /// `brokerClusterName`.
    pub cluster: String,
    /// Its registered replicas by brokerId.
    pub replicas: Vec<Replica>,
}

impl BrokerGroup {
    /// Admin addresses of the replicas, the registered leader (brokerId 0) first.
    pub fn admin_addrs(&self) -> Vec<String> {
        let mut replicas: Vec<&Replica> = self.replicas.iter().collect();
        replicas.sort_by_key(|r| r.broker_id != 0);
        replicas.iter().filter_map(|r| r.admin_addr.clone()).collect()
    }

    /// Remoting address of the registered leader (brokerId 0), else of any replica.
    pub fn leader_remoting_addr(&self) -> Option<&str> {
        self.replicas
            .iter()
            .find(|r| r.broker_id == 0)
            .or_else(|| self.replicas.first())
            .map(|r| r.remoting_addr.as_str())
    }

    /// Remoting addresses of every replica.
    pub fn remoting_addrs(&self) -> Vec<String> {
        self.replicas.iter().map(|r| r.remoting_addr.clone()).collect()
    }
}

/// The cluster now.
#[derive(Debug, Clone, Serialize)]
pub struct Topology {
    /// Groups by name.
    pub groups: Vec<BrokerGroup>,
}

impl Topology {
    /// The group named `name`.
    pub fn group(&self, name: &str) -> Option<&BrokerGroup> {
        self.groups.iter().find(|g| g.name == name)
    }
}

/// Why the topology could not be read.
#[derive(Debug, thiserror::Error)]
#[error("no NameServer answered: {0}")]
pub struct TopologyError(pub String);

/// Reads the topology; caches admin addresses.
#[derive(Debug, Default)]
pub struct Discovery {
    admin_addrs: std::sync::Mutex<HashMap<String, String>>,
}

impl Discovery {
    /// An empty cache.
    pub fn new() -> Self {
        Discovery::default()
    }

    /// The topology now (one NameServer call, and one GET_BROKER_CONFIG per replica not cached).
    pub async fn topology(&self, admin: &Admin) -> Result<Topology, TopologyError> {
        let info = admin.cluster_info().await.map_err(|e| TopologyError(e.to_string()))?;
        let cluster_of: BTreeMap<&str, &str> = info
            .cluster_addr_table
            .iter()
            .flat_map(|(cluster, names)| names.iter().map(move |n| (n.as_str(), cluster.as_str())))
            .collect();
        let known: Vec<String> =
            info.broker_addr_table.values().flat_map(|d| d.broker_addrs.values().cloned()).collect();
        lock(&self.admin_addrs).retain(|remoting, _| known.contains(remoting));
        let missing: Vec<String> =
            { known.iter().filter(|a| !lock(&self.admin_addrs).contains_key(*a)).cloned().collect() };
        let learnt = futures::future::join_all(missing.iter().map(|addr| async move {
            (
                addr.clone(),
                admin.broker_config(addr).await.map_err(|e| e.to_string()).and_then(|c| admin_addr(addr, &c)),
            )
        }))
        .await;
        let mut errors = HashMap::new();
        {
            let mut cache = lock(&self.admin_addrs);
            for (remoting, result) in learnt {
                match result {
                    Ok(a) => {
                        cache.insert(remoting, a);
                    }
                    Err(e) => {
                        errors.insert(remoting, e);
                    }
                }
            }
        }
        let cache = lock(&self.admin_addrs).clone();
        let groups = info
            .broker_addr_table
            .iter()
            .map(|(name, data)| BrokerGroup {
                name: name.clone(),
                cluster: cluster_of.get(name.as_str()).map_or_else(|| data.cluster.clone(), |c| (*c).to_owned()),
                replicas: data
                    .broker_addrs
                    .iter()
                    .map(|(id, remoting)| Replica {
                        broker_id: *id,
                        remoting_addr: remoting.clone(),
                        admin_addr: cache.get(remoting).cloned(),
                        admin_error: errors.get(remoting).cloned(),
                    })
                    .collect(),
            })
            .collect();
        Ok(Topology { groups })
    }
}

/// The admin API address of the replica at `remoting` whose config is `config`.
fn admin_addr(remoting: &str, config: &BTreeMap<String, String>) -> Result<String, String> {
    let port: u16 = config
        .get("adminPort")
        .and_then(|p| p.trim().parse().ok())
        .filter(|p| *p != 0)
        .ok_or_else(|| "the broker's config has no adminPort".to_owned())?;
    let host = match remoting.rsplit_once(':') {
        Some((host, _)) => host,
        None => remoting,
    };
    Ok(format!("{host}:{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_admin_address_is_the_remoting_host_with_the_admin_port() {
        let config = BTreeMap::from([("adminPort".to_owned(), "8081".to_owned())]);
        assert_eq!(admin_addr("10.0.0.5:10911", &config).as_deref(), Ok("10.0.0.5:8081"));
        assert!(admin_addr("10.0.0.5:10911", &BTreeMap::new()).is_err());
    }
}
