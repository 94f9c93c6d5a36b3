//! Replication stalls still open at the end of a run, read from the node logs: a leader's
//! replication watch (`broker/src/services/replication_watch.rs`) warns when a follower's matched
//! index stops moving behind its log, and says when it moves again or is no longer watched. A
//! warning with neither after it is a follower the leader could not bring up to date by the end;
//! the note names it, with the warning's time and fields (a recent `ack_age_ms`: the follower
//! answered heartbeats while its replication stream was stuck).
//!
//! Informational: the `replica_divergence` checker decides; this says when and how it started.

use std::collections::BTreeMap;
use std::path::Path;

use crate::db::BROKER_BOOT_MARKER;

/// How the watch's warning starts (`REPLICATION_STALL_MARKER` in the broker).
pub const STALL_MARKER: &str = "replication to a follower makes no progress";
/// How its all-clear starts (`REPLICATION_RESUMED_MARKER`).
pub const RESUMED_MARKER: &str = "replication to a follower moves again";
/// How its end of watching starts (`REPLICATION_UNWATCHED_MARKER`).
pub const UNWATCHED_MARKER: &str = "replication to a follower no longer watched";

/// The `follower=N` field of a log line.
fn follower_of(line: &str) -> Option<&str> {
    let at = line.find("follower=")? + "follower=".len();
    let rest = &line[at..];
    let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// The stall warnings of one log with nothing after them for the same follower, oldest first. A
/// log holds every incarnation of its node: a restart ([`BROKER_BOOT_MARKER`]) ends what the one
/// before it watched.
pub fn open_stalls<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    let mut open: BTreeMap<&str, &str> = BTreeMap::new();
    for line in lines {
        if line.contains(BROKER_BOOT_MARKER) {
            open.clear();
            continue;
        }
        let Some(follower) = follower_of(line) else { continue };
        if line.contains(STALL_MARKER) {
            open.insert(follower, line);
        } else if line.contains(RESUMED_MARKER) || line.contains(UNWATCHED_MARKER) {
            open.remove(follower);
        }
    }
    let mut stalls: Vec<&str> = open.into_values().collect();
    // Lines start with their timestamp.
    stalls.sort_unstable();
    stalls
}

/// Notes for `node`'s log at `log`: one per stall still open at its end.
pub fn notes(node: &str, log: &Path) -> Vec<String> {
    let Ok(bytes) = std::fs::read(log) else { return Vec::new() };
    let text = String::from_utf8_lossy(&bytes);
    open_stalls(text.lines())
        .into_iter()
        .map(|line| {
            let line: String = line.chars().take(400).collect();
            format!("{node}: a replication stall still open at the end: {line}")
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_warnings_without_a_later_word_on_their_follower_stay_open() {
        let log = [
            "2026-12-07T10:00:01Z  WARN w: replication to a follower makes no progress (...) follower=1 matched=4 stuck_ms=5000 ack_age_ms=20",
            "2026-12-07T10:00:02Z  WARN w: replication to a follower makes no progress (...) follower=3 matched=9 stuck_ms=5000 ack_age_ms=9000",
            "2026-12-07T10:00:03Z  INFO w: replication to a follower moves again follower=3 stuck_ms=7000",
            "2026-12-07T10:00:04Z  WARN w: replication to a follower makes no progress (...) follower=12 stuck_ms=5000",
            "2026-12-07T10:00:05Z  INFO w: replication to a follower no longer watched follower=12",
            "2026-12-07T10:00:06Z  INFO other: follower=1 something else",
        ];
        let open = open_stalls(log);
        assert_eq!(open, vec![log[0]]);
        let restarted = [log[0], "2026-12-07T10:00:09Z  INFO b: boot success", log[1]];
        assert_eq!(open_stalls(restarted), vec![log[1]], "a restart ends the watch before it");
        assert!(open_stalls(["no markers here", ""]).is_empty());
    }

    #[test]
    fn the_follower_field_is_read_whole() {
        assert_eq!(follower_of("x follower=12 y"), Some("12"));
        assert_eq!(follower_of("x follower=7"), Some("7"));
        assert_eq!(follower_of("x follower= y"), None);
        assert_eq!(follower_of("x"), None);
    }
}
