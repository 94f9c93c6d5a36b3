//! Raft group administration (raftmq's own, no mqadmin counterpart): `groupStatus` asks every member
//! for its own view (the NameServer's view when no member serves RAFT_GROUP_STATUS); `addNode`,
//! `removeNode` and `transferLeader` go to the group's leader, following leader hints.

use anyhow::Context;
use anyhow::Result;
use anyhow::anyhow;
use clap::Args;
use raftmq_client::Admin;
use raftmq_client::ClientError;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::body::membership::MembershipReport;
use raftmq_common::protocol::body::route::MASTER_ID;
use serde_json::json;

use super::cluster::role_of;
use super::explain::explain;
use super::explain::not_supported;
use super::out::Out;
use crate::table::Table;

#[derive(Debug, Args)]
pub(super) struct GroupArgs {
    /// Broker group name (= Raft group).
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
}

#[derive(Debug, Args)]
pub(super) struct TransferLeaderArgs {
    /// Broker group name (= Raft group), or one member's address (`ip:port`).
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
    /// Raft node id of the new leader (default: the most up-to-date voter).
    #[arg(short = 'i', long = "to", value_name = "NODE")]
    to: Option<u64>,
}

#[derive(Debug, Args)]
pub(super) struct AddNodeArgs {
    /// Broker group name (= Raft group), or one member's address (`ip:port`).
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
    /// Raft node id of the new node: never used before in this group.
    #[arg(short = 'i', long = "nodeId")]
    id: u64,
    /// The new node's remoting address (`brokerIP1:listenPort`).
    #[arg(short = 'r', long = "remotingAddr")]
    remoting_addr: String,
    /// The new node's Raft address.
    #[arg(short = 'a', long = "raftAddr")]
    raft_addr: String,
}

#[derive(Debug, Args)]
pub(super) struct RemoveNodeArgs {
    /// Broker group name (= Raft group), or one member's address (`ip:port`).
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
    /// Raft node id of the node to remove.
    #[arg(short = 'i', long = "nodeId")]
    id: u64,
}

/// `-` for an absent value.
pub(super) fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn ids(ids: impl IntoIterator<Item = u64>) -> String {
    let list: Vec<String> = ids.into_iter().map(|i| i.to_string()).collect();
    if list.is_empty() { "-".to_owned() } else { list.join(",") }
}

/// Prints the outcome of a membership change or transfer.
fn print_report(
    out: Out,
    command: &str,
    request: RequestCode,
    broker_name: &str,
    report: std::result::Result<MembershipReport, ClientError>,
) -> Result<()> {
    let r = report.map_err(|e| explain(command, request, e))?;
    if out.json {
        let mut v = serde_json::to_value(&r)?;
        v["brokerName"] = json!(broker_name);
        out.json(&v);
        return Ok(());
    }
    println!("{command} {} on group {broker_name} success ({} ms).", opt(r.node_id), r.elapsed_ms);
    let mut table = Table::new(&["#Broker Name", "#Term", "#Leader", "#Leader Addr", "#Voters", "#Learners"]);
    table.row([
        broker_name.to_owned(),
        r.term.to_string(),
        opt(r.leader),
        opt(r.leader_addr.clone()),
        ids(r.voters.iter().copied()),
        ids(r.learners.iter().copied()),
    ]);
    out.table(&table);
    Ok(())
}

/// Every member's own view (RAFT_GROUP_STATUS); the NameServer's view when no member serves it.
pub(super) async fn group_status(admin: &Admin, out: Out, a: GroupArgs) -> Result<()> {
    let broker_name = a.broker_name.as_str();
    let views = admin.group_status_all(broker_name).await.context("groupStatus")?;
    if !views.values().any(|v| v.is_ok()) && views.values().all(|v| v.as_ref().is_err_and(not_supported)) {
        eprintln!("groupStatus: the brokers do not support RAFT_GROUP_STATUS; showing the NameServer's view");
        return namesrv_group_status(admin, out, broker_name).await;
    }
    let leader = views.values().filter_map(|v| v.as_ref().ok()).filter(|s| s.role == "LEADER").max_by_key(|s| s.term);
    if out.json {
        let members: Vec<_> = views
            .iter()
            .map(|(addr, v)| match v {
                Ok(s) => json!({"addr": addr, "status": s}),
                Err(e) => json!({"addr": addr, "error": e.to_string()}),
            })
            .collect();
        let leader = leader.map(|s| json!({"id": s.node_id, "addr": s.addr, "term": s.term}));
        out.json(&json!({"brokerName": broker_name, "leader": leader, "members": members}));
        return Ok(());
    }
    let mut table = Table::new(&[
        "#Broker Name",
        "#Node",
        "#Addr",
        "#Role",
        "#Term",
        "#Leader",
        "#Last Index",
        "#Committed",
        "#Applied",
        "#Voters",
        "#Learners",
        "#Note",
    ]);
    for (addr, view) in &views {
        match view {
            Ok(s) => {
                let mut note: Vec<String> = Vec::new();
                if s.ready {
                    note.push("ready".into());
                }
                if s.removed {
                    note.push("removed".into());
                }
                if let Some(c) = &s.membership_change {
                    note.push(format!("change: {c}"));
                }
                if let Some(d) = s.damaged.as_ref().or(s.poisoned.as_ref()) {
                    note.push(format!("damaged: {d}"));
                }
                table.row([
                    broker_name.to_owned(),
                    s.node_id.to_string(),
                    addr.clone(),
                    s.role.clone(),
                    s.term.to_string(),
                    opt(s.leader),
                    opt(s.last_log_index),
                    opt(s.committed_index),
                    opt(s.applied_index),
                    ids(s.voters.iter().map(|m| m.id)),
                    ids(s.learners.iter().map(|m| m.id)),
                    if note.is_empty() { "-".to_owned() } else { note.join("; ") },
                ]);
            }
            Err(e) => {
                let why = if not_supported(e) { "not supported by this broker".to_owned() } else { e.to_string() };
                table.row([broker_name, "-", addr, "UNREACHABLE", "-", "-", "-", "-", "-", "-", "-", &why]);
            }
        }
    }
    out.table(&table);
    println!();
    let Some(leader) = leader else {
        println!("Leader: none (election in progress, or the group lost its quorum)");
        return Ok(());
    };
    println!("Leader: {} (node {}, term {})", leader.addr, leader.node_id, leader.term);
    if !leader.followers.is_empty() {
        println!();
        let mut table = Table::new(&["#Node", "#Match Index", "#Lag"]);
        for f in &leader.followers {
            table.row([f.id.to_string(), opt(f.match_index), opt(f.lag)]);
        }
        out.table(&table);
    }
    Ok(())
}

/// The group as the NameServer lists it (brokers without RAFT_GROUP_STATUS).
async fn namesrv_group_status(admin: &Admin, out: Out, broker_name: &str) -> Result<()> {
    let info = admin.cluster_info().await.context("groupStatus")?;
    let bd = info
        .broker_addr_table
        .get(broker_name)
        .ok_or_else(|| anyhow!("groupStatus: no broker group {broker_name} is registered with the NameServer"))?;
    let leader = bd.broker_addrs.get(&MASTER_ID);
    if out.json {
        let members: Vec<_> = bd
            .broker_addrs
            .iter()
            .map(|(id, addr)| {
                let (role, node) = role_of(*id);
                json!({"brokerId": id, "raftNodeId": (*id != MASTER_ID).then_some(id - 1), "role": role, "addr": addr,
                       "node": node})
            })
            .collect();
        out.json(&json!({"brokerName": broker_name, "cluster": bd.cluster, "leader": leader, "members": members}));
        return Ok(());
    }
    let mut table = Table::new(&["#Broker Name", "#BID", "#Raft Node", "#Role", "#Addr"]);
    for (id, addr) in &bd.broker_addrs {
        let (role, node) = role_of(*id);
        table.row([broker_name, &id.to_string(), &node, role, addr]);
    }
    out.table(&table);
    println!();
    match leader {
        Some(addr) => println!("Leader: {addr}"),
        None => println!("Leader: none registered (election in progress, or the group lost its quorum)"),
    }
    Ok(())
}

/// `transferLeader`: the group's leader hands leadership to `-i` (or the most up-to-date voter).
pub(super) async fn transfer_leader(admin: &Admin, out: Out, a: TransferLeaderArgs) -> Result<()> {
    let report = admin.transfer_leader(&a.broker_name, a.to).await;
    print_report(out, "transferLeader", RequestCode::RaftTransferLeadership, &a.broker_name, report)
}

/// `addNode`: the group's leader adds the node as a learner, then promotes it once caught up.
pub(super) async fn add_node(admin: &Admin, out: Out, a: AddNodeArgs) -> Result<()> {
    let report = admin.add_node(&a.broker_name, a.id, &a.remoting_addr, &a.raft_addr).await;
    print_report(out, "addNode", RequestCode::RaftAddNode, &a.broker_name, report)
}

/// `removeNode`: the group's leader removes the node (itself included).
pub(super) async fn remove_node(admin: &Admin, out: Out, a: RemoveNodeArgs) -> Result<()> {
    let report = admin.remove_node(&a.broker_name, a.id).await;
    print_report(out, "removeNode", RequestCode::RaftRemoveNode, &a.broker_name, report)
}
