//! The push consumer's listener threads (RocketMQ's `consumeExecutor`): listeners are blocking code,
//! so they run on dedicated OS threads, at most `consumeThreadMax` at a time, never on the async
//! runtime.
//!
//! ```text
//! consume task ──run(job)──▶ FIFO queue ──▶ idle thread (woken) | new thread (below the cap)
//!        ▲                                       │ job under catch_unwind
//!        └────────── oneshot: result | panic ◀───┘ then the next job, without sleeping
//! ```
//!
//! Why not `spawn_blocking` per call: with the default batch of one message per call, every message
//! woke a blocking-pool thread and then the runtime (two futex wake-ups), ≈ 15 % of a consuming
//! client's CPU. Here a thread that finishes a job takes the next one without sleeping, and a
//! submitter wakes a thread only when one is idle.
//!
//! At most one wake-up is in flight (`waking`): a pulled batch of 32 submitted at once used to wake
//! up to 32 threads, one futex wake and context switch each, for jobs of a few microseconds; over
//! half of a consuming client's CPU went to switching threads. Now the submitter wakes one thread;
//! that thread, once it has taken a job, wakes the next only if jobs are still queued. Short jobs
//! are drained by the threads already running; long ones still spread over every thread, one
//! wake-up after another.
//!
//! Invariants:
//! - Every submitted job runs exactly once, also after [`ConsumePool::close`] (the queue drains), so
//!   a caller awaiting a result always gets one.
//! - A panicking listener never takes a thread down: the panic is the job's result.
//! - At most `threads_max` threads exist; they are started on demand and exit once the pool is
//!   closed and its queue is empty.
//! - No job is stranded: while the queue is not empty, a thread is running a job (it looks at the
//!   queue when done), a wake-up is in flight, or a thread is being started.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::Condvar;
use std::sync::Mutex;
use std::sync::MutexGuard;

use tokio::sync::oneshot;

type Job = Box<dyn FnOnce() + Send>;

/// Why a job gave no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PoolError {
    /// The listener panicked (its message, when it was a string).
    Panicked(String),
    /// The pool could not start a thread to run the job.
    NoThread(String),
}

impl fmt::Display for PoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Panicked(m) => write!(f, "listener panicked: {m}"),
            Self::NoThread(e) => write!(f, "no consume thread: {e}"),
        }
    }
}

struct State {
    jobs: VecDeque<Job>,
    idle: usize,
    /// Idle threads notified that have not yet woken up (0 or 1, but for spurious wake-ups).
    waking: usize,
    threads: usize,
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    work: Condvar,
    name: String,
    threads_max: usize,
}

/// A fixed-cap pool of listener threads.
pub(crate) struct ConsumePool {
    shared: Arc<Shared>,
}

impl ConsumePool {
    /// A pool whose threads are named `<name>_<n>`, at most `threads_max` (at least 1) of them.
    pub(crate) fn new(name: &str, threads_max: usize) -> Self {
        let state = State { jobs: VecDeque::new(), idle: 0, waking: 0, threads: 0, closed: false };
        let shared = Shared {
            state: Mutex::new(state),
            work: Condvar::new(),
            name: name.to_owned(),
            threads_max: threads_max.max(1),
        };
        Self { shared: Arc::new(shared) }
    }

    /// Queues `f` at once (not when the future is first polled) to run on a pool thread; the future
    /// resolves to its result, or the panic it raised.
    pub(crate) fn run<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> impl Future<Output = Result<R, PoolError>> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let submitted = self.submit(Box::new(move || {
            let outcome =
                std::panic::catch_unwind(AssertUnwindSafe(f)).map_err(|p| PoolError::Panicked(panic_text(&*p)));
            // The caller may have gone away (its task aborted); nothing is waiting for the result then.
            let _ = tx.send(outcome);
        }));
        async move {
            submitted?;
            rx.await.unwrap_or_else(|_| Err(PoolError::Panicked("the job was dropped".into())))
        }
    }

    /// Queues `f` to run on a pool thread, with nobody waiting for it; a panic is logged.
    pub(crate) fn execute(&self, f: impl FnOnce() + Send + 'static) -> Result<(), PoolError> {
        self.submit(Box::new(move || {
            if let Err(p) = std::panic::catch_unwind(AssertUnwindSafe(f)) {
                tracing::error!(panic = %panic_text(&*p), "a consume job panicked");
            }
        }))
    }

    fn submit(&self, job: Job) -> Result<(), PoolError> {
        let mut st = lock(&self.shared.state);
        st.jobs.push_back(job);
        if st.idle > st.waking {
            // An idle thread not yet called: call one, unless one is already on its way (it takes
            // this job, or wakes the next thread for it).
            if st.waking == 0 {
                st.waking += 1;
                self.shared.work.notify_one();
            }
            return Ok(());
        }
        if st.threads >= self.shared.threads_max {
            // Every thread is busy: the job waits its turn in FIFO order.
            return Ok(());
        }
        let shared = Arc::clone(&self.shared);
        let spawned = std::thread::Builder::new()
            .name(format!("{}_{}", self.shared.name, st.threads + 1))
            .spawn(move || worker(&shared));
        match spawned {
            Ok(_) => {
                st.threads += 1;
                Ok(())
            }
            // With other threads alive the job still runs; with none it never would.
            Err(_) if st.threads > 0 => Ok(()),
            Err(e) => {
                st.jobs.pop_back();
                Err(PoolError::NoThread(e.to_string()))
            }
        }
    }

    /// Whether a thread exists: from then on the pool accepts every job.
    pub(crate) fn has_threads(&self) -> bool {
        lock(&self.shared.state).threads > 0
    }

    /// Lets the threads exit once the queue is empty; jobs already queued still run.
    pub(crate) fn close(&self) {
        lock(&self.shared.state).closed = true;
        self.shared.work.notify_all();
    }
}

impl Drop for ConsumePool {
    fn drop(&mut self) {
        self.close();
    }
}

fn worker(shared: &Shared) {
    loop {
        let job = {
            let mut st = lock(&shared.state);
            loop {
                if let Some(job) = st.jobs.pop_front() {
                    // Chain: more work queued and nobody on the way to it yet.
                    if !st.jobs.is_empty() && st.idle > 0 && st.waking == 0 {
                        st.waking += 1;
                        shared.work.notify_one();
                    }
                    break job;
                }
                if st.closed {
                    st.threads -= 1;
                    return;
                }
                st.idle += 1;
                st = shared.work.wait(st).unwrap_or_else(|e| e.into_inner());
                st.idle -= 1;
                // Spurious wake-ups may count as the notified one; then a later submit notifies again.
                st.waking = st.waking.saturating_sub(1);
            }
        };
        job();
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // Jobs run outside the lock and catch their panics, so a poisoned lock still holds a sound state.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(not a string)".to_owned())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering;

    use super::*;

    async fn join_all<T>(pending: Vec<impl Future<Output = T>>) -> Vec<T> {
        let mut out = Vec::with_capacity(pending.len());
        for p in pending {
            out.push(p.await);
        }
        out
    }

    #[tokio::test]
    async fn jobs_run_and_return_their_results() {
        let pool = ConsumePool::new("t", 2);
        // Every job is queued before the first is awaited (`run` submits eagerly).
        let pending: Vec<_> = (0..64).map(|i| pool.run(move || i * 2)).collect();
        let results = join_all(pending).await;
        assert_eq!(results, (0..64).map(|i| Ok(i * 2)).collect::<Vec<_>>());
        assert!(lock(&pool.shared.state).threads <= 2);
    }

    #[tokio::test]
    async fn a_panic_is_the_jobs_result_and_the_thread_survives() {
        let pool = ConsumePool::new("t", 1);
        let r = pool.run(|| -> i32 { panic!("boom") }).await;
        assert_eq!(r, Err(PoolError::Panicked("boom".into())));
        assert_eq!(pool.run(|| 7).await, Ok(7));
        assert_eq!(lock(&pool.shared.state).threads, 1);
    }

    #[tokio::test]
    async fn at_most_threads_max_jobs_run_at_once() {
        let pool = ConsumePool::new("t", 3);
        let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let barrier = Arc::new(std::sync::Barrier::new(3));
        let jobs: Vec<_> = (0..9)
            .map(|_| {
                let (running, peak, barrier) = (Arc::clone(&running), Arc::clone(&peak), Arc::clone(&barrier));
                pool.run(move || {
                    let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    // Three jobs meet here, so three threads really ran at once; a fourth would wait.
                    barrier.wait();
                    running.fetch_sub(1, Ordering::SeqCst);
                })
            })
            .collect();
        let results = join_all(jobs).await;
        assert!(results.iter().all(Result::is_ok));
        assert_eq!(peak.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn executed_jobs_run_and_a_panic_spares_the_thread() {
        let pool = ConsumePool::new("t", 1);
        let (tx, rx) = oneshot::channel();
        pool.execute(|| panic!("boom")).unwrap();
        pool.execute(move || tx.send(5).unwrap()).unwrap();
        assert_eq!(rx.await, Ok(5));
        assert_eq!(lock(&pool.shared.state).threads, 1);
    }

    #[tokio::test]
    async fn idle_threads_are_woken_one_after_another_until_every_job_runs() {
        const THREADS: usize = 4;
        let pool = ConsumePool::new("t", THREADS);
        let barrier = Arc::new(std::sync::Barrier::new(THREADS));
        let round = || {
            let jobs: Vec<_> = (0..THREADS)
                .map(|_| {
                    let barrier = Arc::clone(&barrier);
                    // Returns only once THREADS jobs wait here together: every thread must run.
                    pool.run(move || barrier.wait().is_leader())
                })
                .collect();
            // A missing wake-up would leave jobs queued behind threads blocked in the barrier.
            tokio::time::timeout(std::time::Duration::from_secs(30), join_all(jobs))
        };
        // First round: no thread idle, so each job starts one.
        assert_eq!(round().await.expect("every job ran").iter().filter(|r| **r == Ok(true)).count(), 1);
        // Second round: every thread idle; the submitter wakes one, which wakes the next, and so on.
        assert_eq!(round().await.expect("every job ran").iter().filter(|r| **r == Ok(true)).count(), 1);
        assert_eq!(lock(&pool.shared.state).threads, THREADS);
    }

    #[tokio::test]
    async fn queued_jobs_still_run_after_close() {
        let pool = ConsumePool::new("t", 1);
        let first = pool.run(|| 1); // queued here, before the close
        pool.close();
        assert_eq!(first.await, Ok(1));
        assert_eq!(pool.run(|| 2).await, Ok(2), "a closed pool still runs what it is given");
    }
}
