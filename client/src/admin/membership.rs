//! Raft group administration (raftmq's private RAFT_* codes): every member's own view of its group,
//! and node addition, removal and leadership transfer. Changes go to the group's leader: brokerId 0
//! first, then wherever a `leader=<ip:port>` hint points, at most [`LEADER_HINT_HOPS_MAX`] times,
//! bounded by `MEMBERSHIP_CHANGE_TIMEOUT_MS` (or the admin's timeout if longer), since adding a node
//! waits for it to catch up.

use std::collections::BTreeMap;
use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;
use raftmq_common::limits::MEMBERSHIP_CHANGE_TIMEOUT_MS;
use raftmq_common::limits::RAFT_NODE_IDS_MAX_COUNT;
use raftmq_common::protocol::RemotingCommand;
use raftmq_common::protocol::RequestCode;
use raftmq_common::protocol::ResponseCode;
use raftmq_common::protocol::body::JsonBody;
use raftmq_common::protocol::body::membership::AddNodeRequest;
use raftmq_common::protocol::body::membership::GroupStatus;
use raftmq_common::protocol::body::membership::MembershipReport;
use raftmq_common::protocol::body::membership::RemoveNodeRequest;
use raftmq_common::protocol::body::membership::TransferLeadershipRequest;
use raftmq_common::protocol::leader_hint::parse_leader_hint;

use super::client::Admin;
use super::response::decode_body;
use super::response::success;
use crate::error::ClientError;
use crate::error::ErrorKind;
use crate::error::Result;

/// Leader hints a group-administration call follows before giving up.
pub const LEADER_HINT_HOPS_MAX: usize = 3;

impl Admin {
    /// One member's view of its group (RAFT_GROUP_STATUS). A broker without group administration
    /// answers REQUEST_CODE_NOT_SUPPORTED.
    pub async fn group_status(&self, addr: &str) -> Result<GroupStatus> {
        let op = "groupStatus";
        let response = self.broker_call(op, addr, RemotingCommand::request(RequestCode::RaftGroupStatus)).await?;
        decode_body(op, &response)
    }

    /// Every member's view of group `broker` (a group name, or one member's `ip:port`): the members
    /// the NameServer lists, then every voter and learner the answers name. Keyed by address; a
    /// member that did not answer has its error.
    pub async fn group_status_all(&self, broker: &str) -> Result<BTreeMap<String, Result<GroupStatus>>> {
        let mut pending: BTreeSet<String> = self.group_addrs(broker).await?;
        let mut views = BTreeMap::new();
        while let Some(addr) = pending.pop_first() {
            let view = self.group_status(&addr).await;
            if let Ok(status) = &view {
                for m in status.voters.iter().chain(&status.learners) {
                    if !m.remoting_addr.is_empty() && !views.contains_key(&m.remoting_addr) && m.remoting_addr != addr {
                        pending.insert(m.remoting_addr.clone());
                    }
                }
            }
            views.insert(addr, view);
            if views.len() >= RAFT_NODE_IDS_MAX_COUNT {
                break;
            }
        }
        Ok(views)
    }

    /// Adds node `id` to group `broker` (RAFT_ADD_NODE): a learner first, a voter once caught up.
    pub async fn add_node(
        &self,
        broker: &str,
        id: u64,
        remoting_addr: &str,
        raft_addr: &str,
    ) -> Result<MembershipReport> {
        let body = AddNodeRequest { id, raft_addr: raft_addr.to_owned(), remoting_addr: remoting_addr.to_owned() };
        self.membership_call("addNode", broker, RequestCode::RaftAddNode, &body).await
    }

    /// Removes node `id` (voter or learner, the leader included) from group `broker` (RAFT_REMOVE_NODE).
    pub async fn remove_node(&self, broker: &str, id: u64) -> Result<MembershipReport> {
        self.membership_call("removeNode", broker, RequestCode::RaftRemoveNode, &RemoveNodeRequest { id, term: 0 })
            .await
    }

    /// Hands group `broker`'s leadership to node `to`, or to any caught-up voter
    /// (RAFT_TRANSFER_LEADERSHIP); returns once the new leader takes writes.
    pub async fn transfer_leader(&self, broker: &str, to: Option<u64>) -> Result<MembershipReport> {
        let body = TransferLeadershipRequest { to };
        self.membership_call("transferLeader", broker, RequestCode::RaftTransferLeadership, &body).await
    }

    /// Sends a group-administration request to the leader of `broker`, following leader hints.
    async fn membership_call<B: JsonBody>(
        &self,
        op: &'static str,
        broker: &str,
        code: RequestCode,
        body: &B,
    ) -> Result<MembershipReport> {
        let body = body.encode().map_err(|e| ClientError::invalid_argument(op, e.to_string()))?;
        let mut addr = match broker.contains(':') {
            true => broker.to_owned(),
            false => match self.master_addr_of_group(broker).await {
                Ok(addr) => addr,
                // No leader registered (e.g. it was just removed): any member can point at it.
                Err(_) => self.group_addrs(broker).await?.pop_first().unwrap_or_default(),
            },
        };
        let timeout = self.timeout.max(Duration::from_millis(MEMBERSHIP_CHANGE_TIMEOUT_MS));
        for _ in 0..=LEADER_HINT_HOPS_MAX {
            let request = RemotingCommand::request(code).with_body(Bytes::from(body.clone()));
            let response = self
                .remoting
                .invoke(&addr, request, timeout)
                .await
                .map_err(|e| ClientError::remoting(op, e).with_context("addr", &addr))?;
            if response.response_code() == ResponseCode::ServiceNotAvailable
                && let Some(leader) = response.remark.as_deref().and_then(parse_leader_hint)
                && leader != addr
            {
                addr = leader.to_owned();
                continue;
            }
            let response = success(op, response).map_err(|e| e.with_context("addr", &addr))?;
            return decode_body(op, &response);
        }
        Err(ClientError::new(ErrorKind::NoRoute, op, "leader hints did not lead to the leader")
            .with_context("addr", addr))
    }
}
