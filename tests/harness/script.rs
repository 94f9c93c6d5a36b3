//! A client driver run as a child process that prints one JSON event per line
//! (`{"event": "sent", ...}`), as the interop tests' Python drivers do: run it with a deadline,
//! collect its events, and fail with everything it said when it failed.
//!
//! A run passes only if the process exits 0, prints no `error` event and exactly one `done`.

use std::process::Stdio;
use std::time::Duration;

use anyhow::Context;
use anyhow::Result;
use anyhow::bail;
use serde_json::Value;

/// A driver's output lines that parsed as JSON, in order.
pub struct ScriptOutput {
    pub events: Vec<Value>,
}

impl ScriptOutput {
    /// The events named `event`.
    pub fn of(&self, event: &str) -> Vec<&Value> {
        self.events.iter().filter(|e| e["event"] == event).collect()
    }
}

/// Runs `command` (its stdout and stderr captured, killed if dropped) for at most `timeout`.
/// `name` names it in errors; `log_tail` adds the client library's own log to a failure.
pub async fn run_json_lines(
    mut command: tokio::process::Command,
    name: &str,
    timeout: Duration,
    log_tail: impl FnOnce() -> String,
) -> Result<ScriptOutput> {
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {name}"))?;
    let out = tokio::time::timeout(timeout, child.wait_with_output())
        .await
        .with_context(|| format!("{name} still running after {timeout:?}"))??;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let events = stdout.lines().filter_map(|line| serde_json::from_str(line).ok()).collect();
    let output = ScriptOutput { events };
    let errors = output.of("error");
    if !out.status.success() || !errors.is_empty() || output.of("done").len() != 1 {
        bail!(
            "{name} ({}): errors {errors:#?}\nstdout:\n{stdout}\nstderr:\n{stderr}\nclient log (last lines):\n{}",
            out.status,
            log_tail()
        );
    }
    Ok(output)
}
