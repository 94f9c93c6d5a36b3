//! `NodeRuntime`: a tokio runtime of one replica's own. Everything the replica spawns (openraft's
//! core, its state-machine worker and replication streams, the Raft RPC server and its
//! connections) runs on it, apart from the tasks that serve clients.
//!
//! Why: a commit crosses a dozen tasks (core, store callback, replication, peer RPC, apply). On a
//! runtime shared with the broker's request tasks, each of those hops waits behind the hundreds
//! of send and pull tasks runnable at the time, and the commit latency is mostly that queueing.
//! On a thread of its own the replica is scheduled by the kernel as soon as it is woken. Measured
//! with `cargo bench -p raftmq-raft --bench replicate` (BENCHMARKS.md#experiments, E20): 3 nodes, 256
//! writers, +8 to +29 % committed entries/s in alternating runs against a shared runtime. TiKV
//! keeps its raftstore threads apart from its gRPC threads for the same reason.
//!
//! Invariants: dropping a `NodeRuntime` never blocks (it may be dropped inside another runtime,
//! e.g. a test that drops a broker to emulate a crash); tasks still on it are dropped unfinished,
//! which is what a crash does to them anyway. A graceful stop shuts the replica down first.

use std::future::Future;
use std::io;

use tokio::runtime::{Builder, Handle, Runtime};

/// Worker threads of a replica's runtime: the core, replication and apply of one replica are a
/// pipeline of short steps; one thread keeps them from waking one another across cores.
pub const NODE_RUNTIME_WORKER_THREADS: usize = 1;

/// A replica's own runtime; see the module docs.
pub struct NodeRuntime {
    rt: Option<Runtime>,
}

impl std::fmt::Debug for NodeRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeRuntime").finish_non_exhaustive()
    }
}

impl NodeRuntime {
    /// A multi-thread runtime with `worker_threads` workers named `thread_name`, with I/O and
    /// time drivers.
    pub fn new(thread_name: &str, worker_threads: usize) -> io::Result<Self> {
        let rt = Builder::new_multi_thread()
            .worker_threads(worker_threads.max(1))
            .thread_name(thread_name)
            .enable_all()
            .build()?;
        Ok(Self { rt: Some(rt) })
    }

    /// Handle to spawn on this runtime.
    pub fn handle(&self) -> &Handle {
        match &self.rt {
            Some(rt) => rt.handle(),
            None => unreachable!("the runtime is only taken by drop"),
        }
    }

    /// Run `fut` on this runtime (so whatever it spawns stays here) and await its output from
    /// the caller's runtime. A panic in `fut` comes back as an error.
    pub async fn run<F>(&self, fut: F) -> io::Result<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.handle().spawn(fut).await.map_err(|e| io::Error::other(format!("replica runtime task failed: {e}")))
    }
}

impl Drop for NodeRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn spawned_work_stays_on_the_runtime_and_drop_does_not_block() -> io::Result<()> {
        let rt = NodeRuntime::new("node-rt-test", NODE_RUNTIME_WORKER_THREADS)?;
        let name = rt
            .run(async {
                // A task spawned from inside lands on the same runtime.
                tokio::spawn(async { std::thread::current().name().map(str::to_owned) }).await
            })
            .await?
            .map_err(io::Error::other)?;
        assert_eq!(name.as_deref(), Some("node-rt-test"));
        let parked = rt.handle().spawn(std::future::pending::<()>());
        // Dropping inside this runtime's async context must not panic nor wait for `parked`.
        drop(rt);
        let err = parked.await.expect_err("a task left on a dropped runtime is cancelled");
        assert!(err.is_cancelled());
        Ok(())
    }
}
