//! Bodies of raftmq's private group-administration requests (RAFT_ADD_NODE 20101,
//! RAFT_REMOVE_NODE 20102, RAFT_TRANSFER_LEADERSHIP 20103, RAFT_GROUP_STATUS 20104,
//! RAFT_NODE_REMOVED 20105): what an operator asks a broker group's Raft leader, and what any
//! member reports about its group.
//!
//! There is no Java counterpart; the bodies follow the same conventions as RocketMQ's (camelCase keys
//! in alphabetical order, absent options omitted) so one JSON reader serves every body. Node ids are
//! the Raft ids of `raftPeers`; addresses are `host:port`.

use serde::Deserialize;
use serde::Serialize;

use super::JsonBody;

/// RAFT_ADD_NODE: the new node's id and addresses.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AddNodeRequest {
    /// Raft id; never used before in this group.
    pub id: u64,
    /// Its Raft RPC listener.
    pub raft_addr: String,
    /// Its remoting address (`brokerIP1:listenPort`).
    pub remoting_addr: String,
}

impl JsonBody for AddNodeRequest {
    const NAME: &'static str = "AddNodeRequest";
}

/// RAFT_REMOVE_NODE and RAFT_NODE_REMOVED: which node.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RemoveNodeRequest {
    /// Raft id of the node to remove (or that was removed).
    pub id: u64,
    /// RAFT_NODE_REMOVED: the term of the leader that removed it (a notice from an older term, or
    /// without one, is refused). 0 in RAFT_REMOVE_NODE.
    pub term: u64,
}

impl JsonBody for RemoveNodeRequest {
    const NAME: &'static str = "RemoveNodeRequest";
}

/// RAFT_TRANSFER_LEADERSHIP: the node to hand leadership to; absent = any caught-up voter.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TransferLeadershipRequest {
    /// Raft id of the new leader.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<u64>,
}

impl JsonBody for TransferLeadershipRequest {
    const NAME: &'static str = "TransferLeadershipRequest";
}

/// The answer of a completed membership change or leadership transfer: the group as the answering
/// node sees it afterwards.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MembershipReport {
    /// Time the operation took, ms.
    pub elapsed_ms: u64,
    /// Learners afterwards.
    pub learners: Vec<u64>,
    /// Leader afterwards, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<u64>,
    /// The leader's remoting address, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_addr: Option<String>,
    /// The node added, removed or made leader.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_id: Option<u64>,
    /// `addNode`, `removeNode`, `transferLeader`, or `finishJoint` (a change left joint, finished
    /// by the group's leader on its own).
    pub operation: String,
    /// Term afterwards.
    pub term: u64,
    /// Voters afterwards.
    pub voters: Vec<u64>,
}

impl JsonBody for MembershipReport {
    const NAME: &'static str = "MembershipReport";
}

/// A member of a group: id and addresses, as the membership config records them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupMember {
    /// Raft id.
    pub id: u64,
    /// Raft RPC address.
    pub raft_addr: String,
    /// Remoting address.
    pub remoting_addr: String,
}

/// How far a follower's log matches the leader's (reported by the leader only).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FollowerProgress {
    /// Raft id.
    pub id: u64,
    /// Entries behind the leader's last index (`None` while nothing matched).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lag: Option<u64>,
    /// Highest index known to match the leader's log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub match_index: Option<u64>,
}

/// RAFT_GROUP_STATUS: one member's view of its group.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupStatus {
    /// This node's remoting address.
    pub addr: String,
    /// Last applied index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub applied_index: Option<u64>,
    /// `brokerName` (= the Raft group).
    pub broker_name: String,
    /// Committed index as known here.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub committed_index: Option<u64>,
    /// Why the store is damaged (the node takes no part), if it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub damaged: Option<String>,
    /// Per follower replication progress (leader only).
    pub followers: Vec<FollowerProgress>,
    /// The membership is a joint config (a change is half done).
    pub joint: bool,
    /// Last log index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_log_index: Option<u64>,
    /// Known leader.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader: Option<u64>,
    /// The leader's remoting address, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub leader_addr: Option<String>,
    /// Non-voting members.
    pub learners: Vec<GroupMember>,
    /// The membership change this node is running, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub membership_change: Option<String>,
    /// This node's Raft id.
    pub node_id: u64,
    /// Why the store is poisoned (an fsync failed), if it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub poisoned: Option<String>,
    /// This node leads and has passed the readiness gate (takes writes).
    pub ready: bool,
    /// This node was removed from the group (it no longer registers with NameServers).
    pub removed: bool,
    /// `LEADER`, `FOLLOWER`, `CANDIDATE`, `LEARNER` or `STOPPED`.
    pub role: String,
    /// Current term.
    pub term: u64,
    /// Every node id this group has ever recorded (never given to a new node).
    pub used_node_ids: Vec<u64>,
    /// Voting members.
    pub voters: Vec<GroupMember>,
}

impl JsonBody for GroupStatus {
    const NAME: &'static str = "GroupStatus";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_camel_case_alphabetical_and_round_trip() {
        let add = AddNodeRequest { id: 4, raft_addr: "10.0.0.4:40911".into(), remoting_addr: "10.0.0.4:10911".into() };
        let json = String::from_utf8(add.encode().unwrap()).unwrap();
        assert_eq!(json, r#"{"id":4,"raftAddr":"10.0.0.4:40911","remotingAddr":"10.0.0.4:10911"}"#);
        assert_eq!(AddNodeRequest::decode(json.as_bytes()).unwrap(), add);
        assert_eq!(String::from_utf8(TransferLeadershipRequest::default().encode().unwrap()).unwrap(), "{}");
        let status = GroupStatus {
            node_id: 2,
            role: "LEADER".into(),
            followers: vec![FollowerProgress { id: 3, lag: Some(0), match_index: Some(9) }],
            ..GroupStatus::default()
        };
        assert_eq!(GroupStatus::decode(&status.encode().unwrap()).unwrap(), status);
        // Lenient: unknown keys ignored, missing keys defaulted.
        let r = MembershipReport::decode(br#"{"operation":"addNode","future":1}"#).unwrap();
        assert_eq!((r.operation.as_str(), r.term), ("addNode", 0));
        assert!(GroupStatus::decode(b"[").is_err());
    }
}
