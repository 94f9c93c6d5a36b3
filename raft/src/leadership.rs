//! [`Leadership`]: who leads a group as one replica sees it, and the watches that mirror openraft's
//! metrics into it and into the membership config's log id.
//!
//! Both watches follow openraft's server metrics, which change with the vote, role, leader or
//! membership only, and notify only on a change: the full metrics change with every append and
//! apply. Invariant: whoever wakes on the membership watch reads the membership from the same
//! server metrics ([`crate::node::RaftNode::members`]); openraft publishes them before the full
//! metrics, so the full metrics may still hold the old config.

use openraft::async_runtime::WatchReceiver;
use openraft::metrics::RaftServerMetrics;
use openraft::{RaftMetrics, ServerState};
use tokio::sync::watch;

use crate::log_store::WeakLogStore;
use crate::state_machine::Raft;
use crate::type_config::{NodeId, TypeConfig};

/// The membership config in effect, by its log id (term, index); `None` before any.
pub type MembershipLogId = Option<(u64, u64)>;

/// Role of a replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Accepts proposals.
    Leader,
    /// Voter following a leader (or waiting for one).
    Follower,
    /// Campaigning.
    Candidate,
    /// Non-voter (new replica catching up, or not yet initialised).
    Learner,
    /// Shut down, failed, or refusing to take part (damaged store).
    Stopped,
}

/// Who leads, as this replica sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leadership {
    /// Current term.
    pub term: u64,
    /// Known leader, if any.
    pub leader_id: Option<NodeId>,
    /// This replica's role.
    pub role: Role,
}

pub(crate) fn role_of(state: ServerState) -> Role {
    match state {
        ServerState::Leader => Role::Leader,
        ServerState::Follower => Role::Follower,
        ServerState::Candidate => Role::Candidate,
        ServerState::Learner => Role::Learner,
        ServerState::Shutdown => Role::Stopped,
    }
}

pub(crate) fn leadership_of(m: &RaftMetrics<TypeConfig>) -> Leadership {
    let role = if m.running_state.is_err() { Role::Stopped } else { role_of(m.state) };
    Leadership { term: m.current_term, leader_id: m.current_leader, role }
}

/// Mirror openraft's metrics into a `Leadership` watch and a membership watch, each notifying only
/// on change, and give the store the page-cache window of its role.
pub(crate) fn spawn_leadership_watch(
    raft: &Raft,
    store: WeakLogStore,
) -> (watch::Receiver<Leadership>, watch::Receiver<MembershipLogId>) {
    // The server metrics change with the vote, role, leader or membership only; the full metrics
    // change with every append and apply, and cloning them for each woke this task thousands of
    // times a second per replica for nothing. A core that stopped drops the sender: Stopped.
    let mut server = raft.server_metrics();
    let first = leadership_of(&raft.metrics().borrow_watched());
    let (tx, rx) = watch::channel(first);
    let (membership_tx, membership_rx) = watch::channel(membership_of_server(&server.borrow_watched()));
    tokio::spawn(async move {
        let mut cache_role = None;
        loop {
            let (l, membership) = {
                let m = server.borrow_and_update();
                (leadership_of_server(&m), membership_of_server(&m))
            };
            membership_tx.send_if_modified(|cur| {
                let changed = *cur != membership;
                *cur = membership;
                changed
            });
            // Before the watch: whoever sees the new role sees the store's window for it.
            if cache_role.replace(l.role) != Some(l.role)
                && let Some(store) = store.upgrade()
            {
                store.set_role(l.role == Role::Leader);
            }
            tx.send_if_modified(|cur| {
                let changed = *cur != l;
                *cur = l;
                changed
            });
            if server.changed().await.is_err() {
                tx.send_if_modified(|cur| {
                    let changed = cur.role != Role::Stopped;
                    cur.role = Role::Stopped;
                    changed
                });
                break;
            }
        }
    });
    (rx, membership_rx)
}

fn membership_of_server(m: &RaftServerMetrics<TypeConfig>) -> MembershipLogId {
    m.membership_config.log_id().as_ref().map(|id| (id.leader_id.term, id.index))
}

fn leadership_of_server(m: &RaftServerMetrics<TypeConfig>) -> Leadership {
    Leadership { term: m.vote.leader_id().term, leader_id: m.current_leader, role: role_of(m.state) }
}
