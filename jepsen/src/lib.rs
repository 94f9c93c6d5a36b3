//! raftmq-jepsen: the process-level fault-injection harness (docs/reliability.md#test-layers).
//!
//! Modules in data-flow order:
//! - [`net`]: the run's network namespace, per-node source addresses, iptables partitions;
//! - [`cluster`]: where every process lives (addresses, ports, configs);
//! - [`disk`]: the run's private mount namespace, a size-limited tmpfs per node, the `disk-full` filler;
//! - [`node`], [`db`]: the `raftmq` processes, their control (kill, pause, restart) and each group's
//!   current members;
//! - [`nemesis`]: faults, their schedule, lose-unfsynced, membership changes, disk-full, fd-exhaustion;
//! - [`history`]: the recorded operations (JSONL);
//! - [`dump`]: per-replica committed logs;
//! - [`stall`]: replication stalls still open at the end, from the leaders' logs (notes);
//! - [`checker`]: one property per file, combined into a report;
//! - [`run`]: one run end to end and its results folder;
//! - [`workload`]: producers, consumers and the final drain through the SDK;
//! - [`transaction`]: transaction producers, their commit/rollback rule, the wait for checks to settle;
//! - [`delay`]: delay producers (delay levels and timers), each value's delay, the wait for the
//!   delay levels to drain;
//! - [`orderly`]: orderly push consumers (restarted every few seconds) recording what they process;
//! - [`timeline`]: the SVG picture of operations and faults.

pub mod checker;
pub mod cluster;
pub mod db;
pub mod delay;
pub mod disk;
pub mod dump;
pub mod history;
pub mod nemesis;
pub mod net;
pub mod node;
pub mod orderly;
pub mod pop;
pub mod run;
pub mod stall;
pub mod timeline;
pub mod transaction;
pub mod workload;
