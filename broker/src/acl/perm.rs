//! Permission bits and their text (`org.apache.rocketmq.acl.common.Permission`): what an account
//! holds on a resource and what a request needs, and the `name=PERM` items of `topicPerms` /
//! `groupPerms`.
//!
//! Invariants: DENY wins over every other bit; any text but the exact words is DENY.

/// Denied, whatever else is set.
pub const DENY: u8 = 1;
/// Needs PUB or SUB.
pub const ANY: u8 = 1 << 1;
/// Publish.
pub const PUB: u8 = 1 << 2;
/// Subscribe.
pub const SUB: u8 = 1 << 3;

/// `Permission.parsePermFromString`: `PUB`, `SUB`, `PUB|SUB` / `SUB|PUB` (exactly, as Java
/// matches them), anything else DENY.
pub fn parse(text: &str) -> u8 {
    match text.trim() {
        "PUB" => PUB,
        "SUB" => SUB,
        "PUB|SUB" | "SUB|PUB" => PUB | SUB,
        _ => DENY,
    }
}

/// `Permission.checkPermission`: whether `owned` grants `needed`.
pub fn grants(needed: u8, owned: u8) -> bool {
    if owned & DENY != 0 {
        return false;
    }
    if needed & ANY != 0 {
        return owned & (PUB | SUB) != 0;
    }
    needed & owned != 0
}

/// `name=PERM` split as Java's `StringUtils.split(item, "=")` splits it: runs of `=` are one
/// separator and empty parts are dropped, so `t==PUB` is `t` and `PUB`, and `=PUB` is one part.
pub(crate) fn split_resource_perm(item: &str) -> Option<(&str, &str)> {
    let mut parts = item.split('=').filter(|p| !p.is_empty());
    match (parts.next(), parts.next(), parts.next()) {
        (Some(name), Some(perm), None) => Some((name, perm)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_follow_javas_check() {
        assert_eq!(parse("PUB|SUB"), parse(" SUB|PUB "));
        assert_eq!(parse("pub"), DENY, "Java matches the words exactly");
        assert_eq!(parse("typo"), DENY);
        assert!(grants(PUB, PUB | SUB));
        assert!(!grants(PUB, SUB));
        assert!(!grants(SUB, SUB | DENY), "DENY wins");
        assert!(grants(ANY, SUB) && !grants(ANY, DENY));
    }
}
