//! White-address patterns (`globalWhiteRemoteAddresses`, an account's `whiteRemoteAddress`):
//! Java's `RemoteAddressStrategyFactory` forms, parsed once and matched per request.
//!
//! Invariants: peers and exact patterns compare in canonical form (`::ffff:10.0.0.1` is 10.0.0.1);
//! `*` expands only at the end of an IPv4 pattern, as in Java; a blank pattern admits nobody.

use std::net::IpAddr;

/// Which peer addresses a pattern admits (`RemoteAddressStrategyFactory`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AddressPattern {
    /// `*` or `*.*.*.*`: every address.
    Any,
    /// One address, IPv4 or IPv6.
    Exact(IpAddr),
    /// Any of several addresses: `1.1.1.1,2.2.2.2`.
    List(Vec<IpAddr>),
    /// IPv4 with per-octet rules: `192.168.1.*`, `192.168.1.10-20`, `192.168.0.{1,2,3}`.
    Ipv4([Octet; 4]),
}

/// One octet's rule of an [`AddressPattern::Ipv4`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Octet {
    /// Any value (`*`).
    Any,
    /// `lo-hi`, inclusive (one value: `lo == hi`).
    Range(u8, u8),
    /// `{a,b,c}` (last octet only, as in Java).
    Set(Vec<u8>),
}

impl AddressPattern {
    /// Parses a pattern; `None` for a blank one (Java's blank strategy admits nobody).
    pub fn parse(text: &str) -> Result<Option<Self>, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        if text == "*" || text == "*.*.*.*" || text == "*:*:*:*:*:*:*:*" {
            return Ok(Some(AddressPattern::Any));
        }
        // Canonical forms, as peers are compared: `::ffff:10.0.0.1` is 10.0.0.1.
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(Some(AddressPattern::Exact(ip.to_canonical())));
        }
        if text.contains(',') && !text.ends_with('}') {
            let ips: Result<Vec<IpAddr>, _> =
                text.split(',').map(|p| p.trim().parse::<IpAddr>().map(|ip| ip.to_canonical())).collect();
            return ips
                .map(|ips| Some(AddressPattern::List(ips)))
                .map_err(|_| format!("'{text}' is not a list of addresses (1.1.1.1,2.2.2.2)"));
        }
        let bad = || format!("'{text}' is not an address pattern (a.b.c.d, a.b.c.*, a.b.c.10-20, a.b.c.{{1,2}}, *)");
        let parts: Vec<&str> = text.split('.').collect();
        if parts.len() != 4 {
            return Err(bad());
        }
        let mut octets = [Octet::Any, Octet::Any, Octet::Any, Octet::Any];
        for (i, part) in parts.iter().enumerate() {
            let last = i == 3;
            octets[i] = if *part == "*" {
                Octet::Any
            } else if let Some(inner) = part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                if !last {
                    return Err(bad());
                }
                let values: Result<Vec<u8>, _> = inner.split(',').map(|v| v.trim().parse::<u8>()).collect();
                Octet::Set(values.map_err(|_| bad())?)
            } else if let Some((lo, hi)) = part.split_once('-') {
                let (lo, hi) = (lo.parse::<u8>().map_err(|_| bad())?, hi.parse::<u8>().map_err(|_| bad())?);
                if lo > hi {
                    return Err(bad());
                }
                Octet::Range(lo, hi)
            } else {
                let v = part.parse::<u8>().map_err(|_| bad())?;
                Octet::Range(v, v)
            };
        }
        // Java expands `*` only at the end ("192.168.*.*", not "192.*.1.1").
        let first_any = octets.iter().position(|o| *o == Octet::Any).unwrap_or(4);
        if octets[first_any..].iter().any(|o| *o != Octet::Any) {
            return Err(bad());
        }
        Ok(Some(AddressPattern::Ipv4(octets)))
    }

    /// Whether `ip` matches.
    pub fn matches(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        match (self, ip) {
            (AddressPattern::Any, _) => true,
            (AddressPattern::Exact(want), got) => *want == got,
            (AddressPattern::List(ips), got) => ips.contains(&got),
            (AddressPattern::Ipv4(octets), IpAddr::V4(v4)) => {
                octets.iter().zip(v4.octets()).all(|(rule, b)| match rule {
                    Octet::Any => true,
                    Octet::Range(lo, hi) => (*lo..=*hi).contains(&b),
                    Octet::Set(values) => values.contains(&b),
                })
            }
            (AddressPattern::Ipv4(_), IpAddr::V6(_)) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn address_patterns_follow_javas_forms() {
        let p = |s: &str| AddressPattern::parse(s).unwrap().unwrap();
        assert!(p("*").matches(ip("1.2.3.4")) && p("*.*.*.*").matches(ip("::1")));
        assert!(p("192.168.1.*").matches(ip("192.168.1.77")) && !p("192.168.1.*").matches(ip("192.168.2.77")));
        assert!(p("192.168.*.*").matches(ip("192.168.9.9")));
        assert!(p("192.168.1.10-20").matches(ip("192.168.1.20")) && !p("192.168.1.10-20").matches(ip("192.168.1.21")));
        assert!(p("192.168.0.{1,2}").matches(ip("192.168.0.2")) && !p("192.168.0.{1,2}").matches(ip("192.168.0.3")));
        assert!(p("127.0.0.1").matches(ip("::ffff:127.0.0.1")), "IPv4-mapped peers match IPv4 patterns");
        assert!(p("::ffff:10.0.0.1").matches(ip("10.0.0.1")), "and IPv4-mapped patterns IPv4 peers");
        assert!(p("::1").matches(ip("::1")) && !p("::1").matches(ip("127.0.0.1")));
        assert_eq!(AddressPattern::parse("  ").unwrap(), None);
        for bad in ["192.*.1.1", "1.2.3", "1.2.3.20-10", "1.2.{3}.4", "a.b.c.d"] {
            assert!(AddressPattern::parse(bad).is_err(), "{bad}");
        }
    }
}
