//! [`RaftRuntime`]: the async runtime openraft runs on in raftmq. It is openraft's tokio runtime,
//! delegating every task, timer, channel and lock to it, except for the two places where tokio
//! or openraft would pick at random:
//!
//! 1. openraft draws its election timeouts and tick jitter from `AsyncRuntime::thread_rng()`;
//! 2. tokio's watch channel parks each `changed()` waiter on one of 8 `Notify` shards chosen by
//!    the runtime's internal RNG, which stable tokio cannot seed, so waiters of one change wake
//!    in a random order ([`RaftWatch`] keeps the tokio channel and, in a simulation, waits on one
//!    FIFO `Notify` per channel instead).
//!
//! - Production (nothing installed): `thread_rng()` is `TokioRuntime`'s (rand's OS-seeded thread
//!   RNG), and `changed()` is tokio's, so behaviour is exactly that of openraft's `TokioRuntime`.
//! - Deterministic simulation: [`install_sim_seed`] puts a seeded SplitMix64 stream on the
//!   calling OS thread; every `thread_rng()` on that thread then returns a generator seeded from
//!   the next value of that stream, and watch waiters wake in the order they started waiting. A
//!   simulation runs a whole group on one current-thread tokio runtime, so every draw of every
//!   replica comes from the one stream, in a fixed order.
//!
//! Invariants: the seed is per OS thread and scoped by the returned guard (the previous state is
//! restored on drop, so nested or sequential simulations on one thread do not leak into each
//! other); a thread that never installed a seed never sees a seeded generator. A watch channel
//! is used either entirely on a simulation thread or entirely off one (a simulation's sends
//! notify its own `Notify` only when made on a simulation thread).

use std::cell::Cell;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

// The deprecated re-export is the very type openraft's default config uses; naming it here
// keeps production on the identical runtime without another direct dependency.
#[allow(deprecated)]
use openraft::impls::TokioRuntime;
use openraft::rt::watch::{RecvError, SendError, Watch, WatchReceiver, WatchSender};
use openraft::rt::{AsyncRuntime, OptionalSend, OptionalSync};
use openraft_rand_core::TryRng;
use tokio::sync::{Notify, watch as tokio_watch};

/// openraft's tokio runtime with a seedable `thread_rng()` (see the module docs).
#[derive(Debug)]
pub struct RaftRuntime(TokioRuntime);

thread_local! {
    /// State of this thread's simulation stream; `None` in production.
    static SIM_STREAM: Cell<Option<u64>> = const { Cell::new(None) };
}

/// Restores the thread's previous RNG mode when dropped. Not `Send`: the seed belongs to the
/// thread that installed it.
#[must_use = "the seed is uninstalled when the guard is dropped"]
pub struct SimSeedGuard {
    previous: Option<u64>,
    _thread_bound: PhantomData<*const ()>,
}

impl Drop for SimSeedGuard {
    fn drop(&mut self) {
        SIM_STREAM.with(|s| s.set(self.previous));
    }
}

/// Make openraft's randomness on this thread a deterministic function of `seed` until the
/// guard is dropped. For simulations running every replica on one current-thread runtime.
pub fn install_sim_seed(seed: u64) -> SimSeedGuard {
    let previous = SIM_STREAM.with(|s| s.replace(Some(seed)));
    SimSeedGuard { previous, _thread_bound: PhantomData }
}

/// Whether this thread draws openraft's randomness from a simulation seed.
pub fn sim_seed_installed() -> bool {
    SIM_STREAM.with(|s| s.get().is_some())
}

/// SplitMix64 (Steele, Lea, Flood 2014): one u64 of state, full period, good enough to pick
/// timeouts, and trivially reproducible.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let z = self.0;
        let z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The generator `RaftRuntime::thread_rng()` returns.
#[derive(Debug)]
pub enum RaftRng {
    /// `TokioRuntime`'s generator, rand's OS-seeded thread RNG (production).
    Entropy(<TokioRuntime as AsyncRuntime>::ThreadLocalRng),
    /// Seeded from the thread's simulation stream.
    Seeded(SplitMix64),
}

impl TryRng for RaftRng {
    type Error = Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        match self {
            Self::Entropy(r) => r.try_next_u32(),
            // The high half: SplitMix64's best-mixed bits.
            Self::Seeded(r) => Ok((r.next() >> 32) as u32),
        }
    }

    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        match self {
            Self::Entropy(r) => r.try_next_u64(),
            Self::Seeded(r) => Ok(r.next()),
        }
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        match self {
            Self::Entropy(r) => r.try_fill_bytes(dst),
            Self::Seeded(r) => {
                for chunk in dst.chunks_mut(8) {
                    let word = r.next().to_le_bytes();
                    chunk.copy_from_slice(&word[..chunk.len()]);
                }
                Ok(())
            }
        }
    }
}

impl AsyncRuntime for RaftRuntime {
    type JoinError = <TokioRuntime as AsyncRuntime>::JoinError;
    type JoinHandle<T: OptionalSend + 'static> = <TokioRuntime as AsyncRuntime>::JoinHandle<T>;
    type Sleep = <TokioRuntime as AsyncRuntime>::Sleep;
    type Instant = <TokioRuntime as AsyncRuntime>::Instant;
    type TimeoutError = <TokioRuntime as AsyncRuntime>::TimeoutError;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = <TokioRuntime as AsyncRuntime>::Timeout<R, T>;
    type ThreadLocalRng = RaftRng;

    #[inline]
    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        TokioRuntime::spawn(future)
    }

    #[inline]
    fn sleep(duration: Duration) -> Self::Sleep {
        TokioRuntime::sleep(duration)
    }

    #[inline]
    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        TokioRuntime::sleep_until(deadline)
    }

    #[inline]
    fn timeout<R, F: Future<Output = R> + OptionalSend>(duration: Duration, future: F) -> Self::Timeout<R, F> {
        TokioRuntime::timeout(duration, future)
    }

    #[inline]
    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(deadline: Self::Instant, future: F) -> Self::Timeout<R, F> {
        TokioRuntime::timeout_at(deadline, future)
    }

    #[inline]
    fn is_panic(join_error: &Self::JoinError) -> bool {
        TokioRuntime::is_panic(join_error)
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        let seeded = SIM_STREAM.with(|s| {
            let state = s.get()?;
            let mut stream = SplitMix64(state);
            let child = stream.next();
            s.set(Some(stream.0));
            Some(SplitMix64(child))
        });
        match seeded {
            Some(r) => RaftRng::Seeded(r),
            None => RaftRng::Entropy(TokioRuntime::thread_rng()),
        }
    }

    type Mpsc = <TokioRuntime as AsyncRuntime>::Mpsc;
    type Watch = RaftWatch;
    type Oneshot = <TokioRuntime as AsyncRuntime>::Oneshot;
    type Mutex<T: OptionalSend + 'static> = <TokioRuntime as AsyncRuntime>::Mutex<T>;

    fn new(threads: usize) -> Self {
        Self(TokioRuntime::new(threads))
    }

    fn block_on<F, T>(&mut self, future: F) -> T
    where
        F: Future<Output = T>,
    {
        self.0.block_on(future)
    }

    fn spawn_blocking<F, T>(f: F) -> impl Future<Output = Result<T, io::Error>> + Send
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        TokioRuntime::spawn_blocking(f)
    }
}

/// openraft's watch channel: a tokio watch channel plus one `Notify` that, on a simulation
/// thread, every send and every sender drop wakes (FIFO), and every `changed()` waits on.
pub struct RaftWatch;

/// Wakes a simulation's waiters when dropped. A field after the tokio sender, so it fires once
/// that sender is gone (and the channel closed if it was the last one).
struct CloseNotifier(Arc<Notify>);

impl Drop for CloseNotifier {
    fn drop(&mut self) {
        if sim_seed_installed() {
            self.0.notify_waiters();
        }
    }
}

/// Sending half of a [`RaftWatch`] channel.
pub struct RaftWatchSender<T> {
    tx: tokio_watch::Sender<T>,
    closer: CloseNotifier,
}

impl<T> Clone for RaftWatchSender<T> {
    fn clone(&self) -> Self {
        Self { tx: self.tx.clone(), closer: CloseNotifier(Arc::clone(&self.closer.0)) }
    }
}

impl<T> RaftWatchSender<T> {
    fn notify(&self) {
        if sim_seed_installed() {
            self.closer.0.notify_waiters();
        }
    }
}

/// Receiving half of a [`RaftWatch`] channel.
pub struct RaftWatchReceiver<T> {
    rx: tokio_watch::Receiver<T>,
    notify: Arc<Notify>,
}

impl<T> Clone for RaftWatchReceiver<T> {
    fn clone(&self) -> Self {
        Self { rx: self.rx.clone(), notify: Arc::clone(&self.notify) }
    }
}

impl Watch for RaftWatch {
    type Sender<T: OptionalSend + OptionalSync> = RaftWatchSender<T>;
    type Receiver<T: OptionalSend + OptionalSync> = RaftWatchReceiver<T>;
    type Ref<'a, T: OptionalSend + 'a> = tokio_watch::Ref<'a, T>;

    fn channel<T: OptionalSend + OptionalSync>(init: T) -> (Self::Sender<T>, Self::Receiver<T>) {
        let (tx, rx) = tokio_watch::channel(init);
        let notify = Arc::new(Notify::new());
        (RaftWatchSender { tx, closer: CloseNotifier(Arc::clone(&notify)) }, RaftWatchReceiver { rx, notify })
    }
}

impl<T: OptionalSend + OptionalSync> WatchSender<RaftWatch, T> for RaftWatchSender<T> {
    fn send(&self, value: T) -> Result<(), SendError<T>> {
        self.tx.send(value).map_err(|e| SendError(e.0))?;
        self.notify();
        Ok(())
    }

    fn send_if_modified<F>(&self, modify: F) -> bool
    where
        F: FnOnce(&mut T) -> bool,
    {
        let modified = self.tx.send_if_modified(modify);
        if modified {
            self.notify();
        }
        modified
    }

    fn borrow_watched(&self) -> tokio_watch::Ref<'_, T> {
        self.tx.borrow()
    }

    fn subscribe(&self) -> RaftWatchReceiver<T> {
        RaftWatchReceiver { rx: self.tx.subscribe(), notify: Arc::clone(&self.closer.0) }
    }
}

impl<T: OptionalSend + OptionalSync> WatchReceiver<RaftWatch, T> for RaftWatchReceiver<T> {
    async fn changed(&mut self) -> Result<(), RecvError> {
        if !sim_seed_installed() {
            return self.rx.changed().await.map_err(|_| RecvError(()));
        }
        // tokio's own semantics (an unseen value first, then closed), waiting on the FIFO
        // `Notify`; the `Notified` exists before the checks, so a send in between is not lost.
        loop {
            let notified = self.notify.notified();
            if self.rx.borrow().has_changed() {
                self.rx.mark_unchanged();
                return Ok(());
            }
            if self.rx.has_changed().is_err() {
                return Err(RecvError(()));
            }
            notified.await;
        }
    }

    fn borrow_watched(&self) -> tokio_watch::Ref<'_, T> {
        self.rx.borrow()
    }

    fn borrow_and_update(&mut self) -> tokio_watch::Ref<'_, T> {
        self.rx.borrow_and_update()
    }
}

#[cfg(test)]
mod tests {
    use openraft_rand_core::Rng;

    use super::*;

    fn draws(n: usize) -> Vec<u64> {
        (0..n).map(|_| RaftRuntime::thread_rng().next_u64()).collect()
    }

    #[test]
    fn a_seed_fixes_every_draw_and_the_guard_restores_entropy() {
        assert!(!sim_seed_installed());
        let a = {
            let _g = install_sim_seed(7);
            assert!(matches!(RaftRuntime::thread_rng(), RaftRng::Seeded(_)));
            draws(16)
        };
        assert!(!sim_seed_installed(), "guard dropped: back to entropy");
        assert!(matches!(RaftRuntime::thread_rng(), RaftRng::Entropy(_)));
        let b = {
            let _g = install_sim_seed(7);
            let _ = RaftRuntime::thread_rng(); // the one draw the first run's matches! made
            draws(16)
        };
        let c = {
            let _g = install_sim_seed(8);
            let _ = RaftRuntime::thread_rng();
            draws(16)
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn the_seed_is_per_thread() {
        let _g = install_sim_seed(1);
        let other = std::thread::spawn(sim_seed_installed).join().expect("thread");
        assert!(!other);
        assert!(sim_seed_installed());
    }

    #[test]
    fn sim_watch_wakes_waiters_in_order_and_reports_close() {
        let _g = install_sim_seed(5);
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        rt.block_on(async {
            let (tx, rx) = RaftWatch::channel(0u32);
            let order = Arc::new(std::sync::Mutex::new(Vec::new()));
            let mut tasks = Vec::new();
            for i in 0..6 {
                let mut rx = rx.clone();
                let order = Arc::clone(&order);
                tasks.push(tokio::spawn(async move {
                    let first = rx.changed().await;
                    order.lock().expect("order").push(i);
                    let value = *rx.borrow_watched();
                    (first, value, rx.changed().await)
                }));
                tokio::task::yield_now().await;
            }
            tx.send(7).expect("receivers exist");
            drop(tx);
            for t in tasks {
                let (first, value, second) = t.await.expect("task");
                assert_eq!((first, value), (Ok(()), 7));
                assert_eq!(second, Err(RecvError(())), "closed after the last value was seen");
            }
            assert_eq!(*order.lock().expect("order"), vec![0, 1, 2, 3, 4, 5], "FIFO wake-up");
        });
    }

    #[test]
    fn seeded_fill_bytes_covers_odd_lengths() {
        let mut r = RaftRng::Seeded(SplitMix64(3));
        let mut buf = [0u8; 13];
        r.fill_bytes(&mut buf);
        assert_ne!(buf, [0u8; 13]);
    }
}
