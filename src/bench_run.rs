//! What every `raftmq bench` run shares: when it stops ([`StopWhen`]: a count, a duration or a
//! signal), how fast it may send ([`Pacer`], `--rate`), its latency histograms (hdrhistogram,
//! microseconds, clamped to [`RT_MAX_US`]), where its lines go ([`Reporter`]) and how a call ended
//! ([`Outcome`]).

use std::io::IsTerminal;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::time::Duration;

use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use indicatif::ProgressStyle;
use raftmq_client::ClientError;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Highest latency the histograms hold (µs); longer ones are clamped to it.
pub(crate) const RT_MAX_US: u64 = 3_600_000_000;

/// A latency histogram in microseconds.
pub(crate) fn histogram() -> Histogram<u64> {
    // Bounds are constants that hdrhistogram accepts (low 1, high > 2 × low, 3 digits).
    Histogram::new_with_bounds(1, RT_MAX_US, 3).expect("constant histogram bounds are valid")
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panicking recorder leaves the histogram consistent (one `record` call), so keep using it.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn us_of(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).clamp(1, RT_MAX_US)
}

pub(crate) fn ms_of_us(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// Why a run stops: the count (claimed by workers), the duration or a signal set `stop`.
pub(crate) struct StopWhen {
    stop: AtomicBool,
    /// Woken by [`Self::stop`].
    pub(crate) stopped: Notify,
}

impl StopWhen {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(StopWhen { stop: AtomicBool::new(false), stopped: Notify::new() })
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.stopped.notify_waiters();
    }

    /// Stops after `duration` or on the first signal.
    pub(crate) fn arm(self: &Arc<Self>, duration: Option<Duration>) {
        let me = Arc::clone(self);
        tokio::spawn(async move {
            let timer = async {
                match duration {
                    Some(d) => tokio::time::sleep(d).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = timer => {}
                _ = crate::signal::shutdown() => {}
            }
            me.stop();
        });
    }
}

/// Holds senders to a rate (`--rate`): each send takes the next free slot, `1 / rate` after the
/// previous one. A sender that fell behind takes the slot at once and the schedule moves on from
/// there, so a rate above capacity runs at capacity and never bursts to catch up.
pub(crate) struct Pacer {
    per_message: Duration,
    next: Mutex<Instant>,
}

impl Pacer {
    pub(crate) fn new(rate_per_s: u64) -> Self {
        Pacer {
            per_message: Duration::from_secs(1) / u32::try_from(rate_per_s).unwrap_or(u32::MAX),
            next: Mutex::new(Instant::now()),
        }
    }

    /// Waits for the slot of the next `n` messages.
    pub(crate) async fn wait(&self, n: u64) {
        let slot = {
            let mut next = lock(&self.next);
            let slot = (*next).max(Instant::now());
            *next = slot + self.per_message * u32::try_from(n).unwrap_or(u32::MAX);
            slot
        };
        tokio::time::sleep_until(slot).await;
    }
}

/// Where the interval lines go and how progress is drawn.
pub(crate) struct Reporter {
    json: bool,
    bar: Option<ProgressBar>,
}

impl Reporter {
    pub(crate) fn new(json: bool, count: Option<u64>) -> Self {
        let bar = (!json && std::io::stdout().is_terminal()).then(|| {
            let bar = match count {
                Some(n) => ProgressBar::new(n).with_style(
                    ProgressStyle::with_template("{bar:40} {pos}/{len} msgs {per_sec} eta {eta}")
                        .unwrap_or_else(|_| ProgressStyle::default_bar()),
                ),
                None => ProgressBar::new_spinner(),
            };
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Reporter { json, bar }
    }

    pub(crate) fn line(&self, text: &str) {
        match (&self.bar, self.json) {
            (Some(bar), _) => bar.println(text),
            (None, true) => eprintln!("{text}"),
            (None, false) => println!("{text}"),
        }
    }

    pub(crate) fn position(&self, done: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(done);
        }
    }

    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// How one call ended, in RocketMQ's benchmark terms.
pub(crate) enum Outcome {
    Ok,
    /// The server answered with an error (RocketMQ's "Response Failed", MQBrokerException).
    ResponseFailed,
    /// No answer: no route, a timeout, the connection ("Send Failed").
    SendFailed,
}

impl Outcome {
    pub(crate) fn of_client<T>(result: &Result<T, ClientError>) -> Outcome {
        match result {
            Ok(_) => Outcome::Ok,
            Err(e) if e.response_code().is_some() => Outcome::ResponseFailed,
            Err(_) => Outcome::SendFailed,
        }
    }
}

/// Waits for every task; a panicked worker only loses its own sends.
pub(crate) async fn futures_join(handles: Vec<tokio::task::JoinHandle<()>>) {
    for h in handles {
        if let Err(e) = h.await {
            tracing::warn!("a benchmark task failed: {e}");
        }
    }
}
