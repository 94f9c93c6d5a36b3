//! The flags every client command shares: `-n/--namesrvAddr` (mqadmin's spelling, `NAMESRV_ADDR`,
//! then `127.0.0.1:9876`) and the per-call deadline.
//!
//! Invariant: the address list is passed to the SDK verbatim (`ip:port;ip:port`); the SDK parses and
//! fails over, so no command has its own notion of "which NameServer".

use std::time::Duration;

use clap::Args;

/// Where a command finds the NameServers and how long each call may take.
#[derive(Debug, Clone, Args)]
pub struct NamesrvAddrArgs {
    /// NameServer addresses, `host:port;host:port`.
    #[arg(
        short = 'n',
        long = "namesrvAddr",
        value_name = "ADDRS",
        env = "NAMESRV_ADDR",
        default_value = "127.0.0.1:9876",
        global = true
    )]
    pub namesrv_addr: String,

    /// Deadline of each remote call, e.g. `3s`, `500ms`.
    #[arg(long = "timeout", value_name = "DURATION", default_value = "3s", value_parser = humantime::parse_duration, global = true)]
    pub timeout: Duration,
}

/// The local time as RocketMQ's tools print it (`UtilAll.timeMillisToHumanString2`).
pub fn human_time_ms(epoch_ms: i64) -> String {
    use chrono::TimeZone;
    match chrono::Local.timestamp_millis_opt(epoch_ms) {
        chrono::LocalResult::Single(t) | chrono::LocalResult::Ambiguous(t, _) => {
            t.format("%Y-%m-%d %H:%M:%S,%3f").to_string()
        }
        chrono::LocalResult::None => epoch_ms.to_string(),
    }
}

/// Milliseconds since the epoch, by the wall clock (what message timestamps are measured in).
pub fn now_ms() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    i64::try_from(since.as_millis()).unwrap_or(i64::MAX)
}
