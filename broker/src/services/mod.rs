//! Background services of a replica, each started with the handles it uses: group commit and
//! offset commit (batching into Raft entries), the replica's leadership view, membership changes,
//! NameServer registration, delay and timer delivery, retention, the disk guard (a leader with a
//! full disk hands leadership over), the replication watch (a leader reports a follower whose
//! replication makes no progress), the transaction check-back (and the producers it reaches over gRPC), the connected-client table and
//! orderly consumers' queue locks through Raft.

pub mod client_manager;
pub mod disk_guard;
pub mod group_commit;
pub mod membership;
pub mod namesrv_registration;
pub mod offset_commit;
pub mod pop;
pub mod rebalance_lock;
pub mod record_writer;
pub mod replica;
pub mod replication_watch;
pub mod retention;
pub mod schedule;
pub mod table_clock;
pub mod timer;
pub mod topic_create;
#[allow(clippy::result_large_err)]
pub mod transaction_check;
pub mod transaction_checker;
