//! `clusterList`: clusters, broker groups and their nodes as the NameServer lists them, with each
//! broker's runtime counters. In a route, brokerId 0 is the group's Raft leader and `n + 1` node `n`.

use anyhow::Context;
use anyhow::Result;
use raftmq_client::Admin;
use raftmq_common::protocol::body::route::MASTER_ID;

use super::out::Out;
use crate::table::Table;

/// A node's role as the route shows it: brokerId 0 is the group's Raft leader, `n + 1` is node `n`.
pub(super) fn role_of(broker_id: i64) -> (&'static str, String) {
    if broker_id == MASTER_ID { ("LEADER", "-".to_owned()) } else { ("FOLLOWER", (broker_id - 1).to_string()) }
}

pub(super) async fn cluster_list(admin: &Admin, out: Out) -> Result<()> {
    let info = admin.cluster_info().await.context("clusterList")?;
    if out.json {
        out.json(&serde_json::to_value(&info)?);
        return Ok(());
    }
    // Java's clusterList also shows each broker's GET_BROKER_RUNTIME_INFO; a broker that does not
    // answer keeps its row, with `-` for what it would have said. Today is since midnight, UTC.
    let mut table = Table::new(&[
        "#Cluster Name",
        "#Broker Name",
        "#BID",
        "#Addr",
        "#Role",
        "#Version",
        "#InTPS",
        "#OutTPS",
        "#InTotalToday",
        "#OutTotalToday",
    ]);
    for (cluster, names) in &info.cluster_addr_table {
        for name in names {
            let Some(bd) = info.broker_addr_table.get(name) else { continue };
            for (id, addr) in &bd.broker_addrs {
                let runtime = admin.broker_runtime_info(addr).await.map(|kv| kv.table).unwrap_or_default();
                let value = |k: &str| runtime.get(k).cloned().unwrap_or_else(|| "-".to_owned());
                // Java shows the 10-second rate (the first of the three) and today's counts as the
                // total now less the total at midnight.
                let rate = |k: &str| value(k).split(' ').next().unwrap_or("-").to_owned();
                let since_midnight = |now: &str, morning: &str| {
                    let count = |k: &str| runtime.get(k).and_then(|v| v.parse::<u64>().ok());
                    match (count(now), count(morning)) {
                        (Some(n), Some(m)) => n.saturating_sub(m).to_string(),
                        _ => "-".to_owned(),
                    }
                };
                table.row([
                    cluster.clone(),
                    name.clone(),
                    id.to_string(),
                    addr.clone(),
                    role_of(*id).0.to_owned(),
                    value("brokerVersionDesc"),
                    rate("putTps"),
                    rate("getTransferedTps"),
                    since_midnight("msgPutTotalTodayNow", "msgPutTotalTodayMorning"),
                    since_midnight("msgGetTotalTodayNow", "msgGetTotalTodayMorning"),
                ]);
            }
        }
    }
    out.table(&table);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_ids_map_to_raft_roles() {
        assert_eq!(role_of(0), ("LEADER", "-".to_owned()));
        assert_eq!(role_of(3), ("FOLLOWER", "2".to_owned()));
    }
}
