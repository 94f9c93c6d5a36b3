//! Process-wide logging: `tracing` with `RUST_LOG` filters, human-readable or JSON lines.
//!
//! Quiet by default: servers log at info with openraft at warn (its info lines are per-election
//! chatter), `raftmq dev` shows only its banner and warnings, and client commands (`send`,
//! `consume`, `bench`, `admin`) print their results and nothing else unless asked with `--verbose`.
//! `RUST_LOG` always wins.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// The filter when neither `RUST_LOG` nor `--verbose` says otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quietness {
    /// A long-running server (`namesrv`, `broker`): its own info lines, openraft's warnings.
    Server,
    /// `raftmq dev`: the banner (printed, not logged) and warnings.
    Dev,
    /// A command that prints its results: errors only.
    Command,
}

/// The filter directive for a quietness and a `--verbose` count (0, 1 = info, 2+ = debug).
pub fn default_filter(quietness: Quietness, verbose: u8) -> &'static str {
    match (verbose, quietness) {
        (0, Quietness::Server) => "info,openraft=warn",
        (0, Quietness::Dev) => "warn",
        (0, Quietness::Command) => "error",
        (1, _) => "info,openraft=warn",
        _ => "debug",
    }
}

/// Installs the global subscriber once; later calls are ignored (tests may call it repeatedly).
pub fn init(json: bool, quietness: Quietness, verbose: u8) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_filter(quietness, verbose)));
    // Colour codes only on a terminal: log files and CI output stay plain text.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    // A second init in the same process fails harmlessly: the first subscriber stays.
    let _ = if json { builder.json().try_init() } else { builder.try_init() };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_by_default_and_louder_when_asked() {
        assert_eq!(default_filter(Quietness::Command, 0), "error");
        assert_eq!(default_filter(Quietness::Dev, 0), "warn");
        assert_eq!(default_filter(Quietness::Server, 0), "info,openraft=warn");
        assert_eq!(default_filter(Quietness::Command, 1), "info,openraft=warn");
        assert_eq!(default_filter(Quietness::Dev, 2), "debug");
    }
}
