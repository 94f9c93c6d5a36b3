//! The leader hint: how a broker that cannot take a write names the node that can.
//!
//! A follower (or a deposed leader) answers a write with SERVICE_NOT_AVAILABLE (14), the code a
//! RocketMQ 4.x producer retries on another group, and puts `leader=<ip:port>` in the remark. Java
//! clients only log the remark; our SDK parses it and sends the retry straight to that leader. The
//! format lives here so the broker that writes it and the client that reads it cannot drift apart.

/// The marker that introduces the leader's address in a SERVICE_NOT_AVAILABLE remark.
pub const LEADER_HINT_KEY: &str = "leader=";

/// The remark fragment a broker appends to name the leader: `leader=<ip:port>`.
pub fn format_leader_hint(leader_addr: &str) -> String {
    format!("{LEADER_HINT_KEY}{leader_addr}")
}

/// The leader address named in `remark` by [`LEADER_HINT_KEY`], if it is a plausible `host:port`.
/// The address ends at whitespace or one of `;,)]` (a bracketed IPv6 host is kept whole); the key
/// must not be glued to a preceding word.
pub fn parse_leader_hint(remark: &str) -> Option<&str> {
    let mut search_from = 0;
    while let Some(found) = remark.get(search_from..)?.find(LEADER_HINT_KEY) {
        let start = search_from + found;
        let value_start = start + LEADER_HINT_KEY.len();
        search_from = value_start;
        let glued = remark[..start].chars().next_back().is_some_and(|c| c.is_alphanumeric() || c == '_');
        if glued {
            continue;
        }
        let rest = &remark[value_start..];
        // A bracketed IPv6 host contains ':' and ']' itself: the scan for the end starts after it.
        let skip = if rest.starts_with('[') { rest.find(']').map_or(rest.len(), |i| i + 1) } else { 0 };
        let end = rest[skip..]
            .find(|c: char| c.is_whitespace() || matches!(c, ';' | ',' | ')' | ']'))
            .map_or(rest.len(), |i| skip + i);
        let addr = &rest[..end];
        if is_host_port(addr) {
            return Some(addr);
        }
    }
    None
}

fn is_host_port(addr: &str) -> bool {
    match addr.rsplit_once(':') {
        Some((host, port)) => !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p != 0),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_round_trip_and_ignore_noise() {
        assert_eq!(parse_leader_hint(&format_leader_hint("10.0.0.2:10911")), Some("10.0.0.2:10911"));
        assert_eq!(parse_leader_hint("not leader; leader=[2001:db8::1]:10911, term 7"), Some("[2001:db8::1]:10911"));
        assert_eq!(parse_leader_hint("myleader=10.0.0.2:10911"), None);
        assert_eq!(parse_leader_hint("leader=unknown"), None);
        assert_eq!(parse_leader_hint(""), None);
    }
}
