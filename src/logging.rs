//! Process-wide logging: `tracing` with `RUST_LOG` filters, human-readable or JSON lines.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber once; later calls are ignored (tests may call it repeatedly).
pub fn init(json: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Colour codes only on a terminal: log files and CI output stay plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    // A second init in the same process fails harmlessly: the first subscriber stays.
    let _ = if json { builder.json().try_init() } else { builder.try_init() };
}
