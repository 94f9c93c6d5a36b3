//! mqadmin's time arguments: `now`, epoch milliseconds, or `yyyy-MM-dd#HH:mm:ss:SSS` in local time.

use anyhow::Context;
use anyhow::Result;
use anyhow::anyhow;

use crate::namesrv_addr::now_ms;

/// mqadmin's `-s`: `now`, epoch milliseconds, or `yyyy-MM-dd#HH:mm:ss:SSS` in local time.
pub(super) fn parse_reset_timestamp(s: &str) -> Result<i64> {
    if s == "now" {
        return Ok(now_ms());
    }
    if let Ok(ms) = s.parse::<i64>() {
        return Ok(ms);
    }
    use chrono::TimeZone;
    let naive = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%d#%H:%M:%S:%3f")
        .with_context(|| format!("-s {s}: expected now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS"))?;
    chrono::Local
        .from_local_datetime(&naive)
        .earliest()
        .map(|t| t.timestamp_millis())
        .ok_or_else(|| anyhow!("-s {s}: no such local time"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_timestamps_parse_like_mqadmin() {
        assert_eq!(parse_reset_timestamp("1700000000000").unwrap(), 1_700_000_000_000);
        assert!(parse_reset_timestamp("now").unwrap() > 1_700_000_000_000);
        let local = parse_reset_timestamp("2024-01-02#03:04:05:006").unwrap();
        assert_eq!(local.rem_euclid(1000), 6, "milliseconds are kept");
        assert!(parse_reset_timestamp("yesterday").is_err());
    }
}
