//! Shutdown signals: the first SIGINT or SIGTERM starts a graceful shutdown; a second one exits
//! the process at once (RocketMQ's `mqshutdown` sends SIGTERM and waits).
//!
//! [`shutdown`] installs the handlers when it is called, not when its future is first polled:
//! callers create it before starting servers, so a SIGTERM that arrives the moment a server is up
//! is never lost to the default action (which would kill the process without a graceful stop).

use std::future::Future;

/// Installs the handlers now; the returned future resolves on the first SIGINT/SIGTERM and arms a
/// watcher that exits the process on the second.
pub fn shutdown() -> impl Future<Output = ()> + Send + 'static {
    let mut signals = Signals::install();
    async move {
        signals.recv().await;
        tracing::info!("shutdown requested; send the signal again to exit at once");
        tokio::spawn(async move {
            signals.recv().await;
            tracing::warn!("second signal: exiting without a graceful shutdown");
            std::process::exit(130);
        });
    }
}

#[cfg(unix)]
struct Signals {
    streams: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

#[cfg(unix)]
impl Signals {
    fn install() -> Self {
        use tokio::signal::unix::SignalKind;
        use tokio::signal::unix::signal;
        match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
            (Ok(int), Ok(term)) => Signals { streams: Some((int, term)) },
            // Without handlers the process can still be stopped; say so and fall back to Ctrl-C,
            // which tokio supports everywhere.
            _ => {
                tracing::warn!("could not install SIGINT/SIGTERM handlers; only Ctrl-C stops gracefully");
                Signals { streams: None }
            }
        }
    }

    async fn recv(&mut self) {
        match &mut self.streams {
            Some((int, term)) => {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
            }
            None => {
                // Ctrl-C unavailable too: nothing can stop us gracefully; wait forever.
                if tokio::signal::ctrl_c().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}

#[cfg(not(unix))]
struct Signals;

#[cfg(not(unix))]
impl Signals {
    fn install() -> Self {
        Signals
    }

    async fn recv(&mut self) {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
