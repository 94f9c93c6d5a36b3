//! Producers the transaction check-back reaches through another protocol: a RocketMQ 5 gRPC
//! producer is asked on its Telemetry stream (`RecoverOrphanedTransactionCommand`), not over a
//! remoting connection. `raftmq-grpc` registers one [`TransactionChecker`] per stream and producer
//! group (through the `Bridge`); the check service asks it exactly what it asks a remoting producer
//! with CHECK_TRANSACTION_STATE: the header and the half as it was sent. The adapter converts, so
//! no tonic or prost type appears here.
//!
//! Invariants: `check` only queues (the check service never waits on a client); a closed checker is
//! never chosen; dropping a [`CheckerRegistration`] removes its checker, so a stream that ended
//! leaves nothing behind.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::Weak;

use raftmq_common::message::MessageExt;
use raftmq_common::protocol::header::transaction::CheckTransactionStateRequestHeader;
use raftmq_common::sync::lock;

/// One check-back question: what CHECK_TRANSACTION_STATE carries.
#[derive(Debug, Clone)]
pub struct CheckRequest {
    /// The check copy's offsets and ids (the producer ends the transaction with them).
    pub header: CheckTransactionStateRequestHeader,
    /// The half as the producer sent it: its real topic and queue, the copy's offsets.
    pub message: MessageExt,
}

/// A producer reachable for check-back outside the remoting connections.
pub trait TransactionChecker: Send + Sync + Debug {
    /// Queues `request` for the producer; `false` when it cannot be delivered now (the half is
    /// checked again in a later round).
    fn check(&self, request: CheckRequest) -> bool;
    /// Whether the producer can still be reached.
    fn is_open(&self) -> bool;
}

#[derive(Debug, Default)]
struct Table {
    next_id: u64,
    /// Checkers by producer group, then registration id.
    groups: HashMap<String, BTreeMap<u64, Arc<dyn TransactionChecker>>>,
    /// Rotates [`TransactionCheckers::pick`]'s choice.
    turn: usize,
}

/// The registered checkers of one replica.
#[derive(Debug, Default)]
pub struct TransactionCheckers {
    table: Arc<Mutex<Table>>,
}

/// Keeps a checker registered; dropping it unregisters.
#[derive(Debug)]
pub struct CheckerRegistration {
    table: Weak<Mutex<Table>>,
    group: String,
    id: u64,
}

impl Drop for CheckerRegistration {
    fn drop(&mut self) {
        let Some(table) = self.table.upgrade() else { return };
        let mut table = lock(&table);
        if let Some(checkers) = table.groups.get_mut(&self.group) {
            checkers.remove(&self.id);
            if checkers.is_empty() {
                table.groups.remove(&self.group);
            }
        }
    }
}

impl TransactionCheckers {
    /// None registered.
    pub fn new() -> Self {
        TransactionCheckers::default()
    }

    /// Registers `checker` as a producer of `group` until the registration is dropped.
    pub fn register(&self, group: &str, checker: Arc<dyn TransactionChecker>) -> CheckerRegistration {
        let mut table = lock(&self.table);
        table.next_id += 1;
        let id = table.next_id;
        table.groups.entry(group.to_owned()).or_default().insert(id, checker);
        CheckerRegistration { table: Arc::downgrade(&self.table), group: group.to_owned(), id }
    }

    /// Whether an open checker of `group` is registered.
    pub fn has_open(&self, group: &str) -> bool {
        lock(&self.table).groups.get(group).is_some_and(|c| c.values().any(|c| c.is_open()))
    }

    /// An open checker of `group`, turn by turn across calls so checks spread over its producers.
    pub fn pick(&self, group: &str) -> Option<Arc<dyn TransactionChecker>> {
        let mut table = lock(&self.table);
        let turn = table.turn;
        let open: Vec<Arc<dyn TransactionChecker>> =
            table.groups.get(group)?.values().filter(|c| c.is_open()).cloned().collect();
        if open.is_empty() {
            return None;
        }
        table.turn = turn.wrapping_add(1);
        open.get(turn % open.len()).cloned()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering;

    use super::*;

    #[derive(Debug, Default)]
    struct Probe {
        asked: AtomicUsize,
        closed: AtomicBool,
    }

    impl TransactionChecker for Probe {
        fn check(&self, _request: CheckRequest) -> bool {
            self.asked.fetch_add(1, Ordering::Relaxed);
            true
        }
        fn is_open(&self) -> bool {
            !self.closed.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn checkers_are_picked_in_turn_while_open_and_leave_with_their_registration() {
        let checkers = TransactionCheckers::new();
        let (a, b) = (Arc::new(Probe::default()), Arc::new(Probe::default()));
        let ra = checkers.register("g", a.clone());
        let rb = checkers.register("g", b.clone());
        assert!(checkers.has_open("g") && !checkers.has_open("other"));
        for _ in 0..4 {
            let header = CheckTransactionStateRequestHeader {
                tran_state_table_offset: 0,
                commit_log_offset: 0,
                msg_id: None,
                transaction_id: None,
                offset_msg_id: None,
                bname: None,
            };
            let request = CheckRequest { header, message: MessageExt::default() };
            assert!(checkers.pick("g").expect("an open checker").check(request));
        }
        assert_eq!((a.asked.load(Ordering::Relaxed), b.asked.load(Ordering::Relaxed)), (2, 2));
        a.closed.store(true, Ordering::Relaxed);
        drop(rb);
        assert!(checkers.pick("g").is_none(), "a closed checker is never chosen");
        assert!(!checkers.has_open("g"));
        drop(ra);
        assert!(lock(&checkers.table).groups.is_empty(), "dropped registrations leave nothing behind");
    }
}
