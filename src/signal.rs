//! Shutdown signals: the first SIGINT or SIGTERM starts a graceful shutdown; a second one exits
//! the process at once (RocketMQ's `mqshutdown` sends SIGTERM and waits).

/// Resolves on the first SIGINT/SIGTERM and arms a watcher that exits on the second.
pub async fn shutdown() {
    wait_for_signal().await;
    tracing::info!("shutdown requested; send the signal again to exit at once");
    tokio::spawn(async {
        wait_for_signal().await;
        tracing::warn!("second signal: exiting without a graceful shutdown");
        std::process::exit(130);
    });
}

#[cfg(unix)]
async fn wait_for_signal() {
    use tokio::signal::unix::SignalKind;
    use tokio::signal::unix::signal;
    match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        // Without signal handlers the process can still be stopped by SIGKILL; say so and wait
        // on Ctrl-C, which tokio supports everywhere.
        _ => {
            tracing::warn!("could not install SIGINT/SIGTERM handlers; only Ctrl-C stops gracefully");
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

#[cfg(not(unix))]
async fn wait_for_signal() {
    let _ = tokio::signal::ctrl_c().await;
}
