//! Namespaces as RocketMQ spells them in a resource's name (`NamespaceUtil`): `ns%name`, with a
//! retry or dead-letter prefix kept in front (`%RETRY%ns%group`). The broker stores and serves the
//! joined name like any other, so a 4.x client that wraps its own names (`setNamespace`) and a 5.x
//! gRPC client that sends `resource_namespace` meet on the same topics and groups.
//!
//! Invariants: system topics and system consumer groups are never joined; joining is idempotent (a
//! name already in the namespace is left alone); [`split`] undoes [`join`] for every name [`join`]
//! changes with a namespace that holds no `%` (as in Java, `a%b` joined splits as namespace `a`).

use super::validate::DLQ_GROUP_TOPIC_PREFIX;
use super::validate::RETRY_GROUP_TOPIC_PREFIX;
use super::validate::is_system_topic;

/// Between a namespace and the name inside it (`NamespaceUtil.NAMESPACE_SEPARATOR`).
pub const NAMESPACE_SEPARATOR: char = '%';

/// Consumer groups of the system (`MixAll.CID_RMQ_SYS_PREFIX`): never in a namespace.
pub const SYSTEM_CONSUMER_GROUP_PREFIX: &str = "CID_RMQ_SYS_";

/// `%RETRY%` or `%DLQ%` in front of `name`, and the rest.
fn retry_or_dlq_prefix(name: &str) -> (&str, &str) {
    for prefix in [RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX] {
        if let Some(rest) = name.strip_prefix(prefix) {
            return (prefix, rest);
        }
    }
    ("", name)
}

/// Whether `name` belongs to the system and so to no namespace (`NamespaceUtil.isSystemResource`).
fn is_system_resource(name: &str) -> bool {
    is_system_topic(name) || name.starts_with(SYSTEM_CONSUMER_GROUP_PREFIX)
}

/// `name` (a topic or group, perhaps `%RETRY%`/`%DLQ%`-prefixed) inside `namespace`
/// (`NamespaceUtil.wrapNamespace`): `ns%name`, `%RETRY%ns%group`. An empty namespace, a system
/// resource and a name already inside `namespace` come back unchanged.
pub fn join(namespace: &str, name: &str) -> String {
    if namespace.is_empty() || name.is_empty() || is_system_resource(name) {
        return name.to_owned();
    }
    let (prefix, rest) = retry_or_dlq_prefix(name);
    let already = rest.strip_prefix(namespace).is_some_and(|after| after.starts_with(NAMESPACE_SEPARATOR));
    if already {
        return name.to_owned();
    }
    format!("{prefix}{namespace}{NAMESPACE_SEPARATOR}{rest}")
}

/// A stored name as a namespace and the name inside it (`NamespaceUtil.getNamespaceFromResource`
/// and `withoutNamespace`): `ns%T` → `("ns", "T")`, `%RETRY%ns%G` → `("ns", "%RETRY%G")`. A name with
/// no separator after its prefix, one that starts with it, and a system resource have no namespace.
pub fn split(name: &str) -> (&str, String) {
    if is_system_resource(name) {
        return ("", name.to_owned());
    }
    let (prefix, rest) = retry_or_dlq_prefix(name);
    match rest.find(NAMESPACE_SEPARATOR) {
        Some(at) if at > 0 => (&rest[..at], format!("{prefix}{}", &rest[at + 1..])),
        _ => ("", name.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_table() {
        for (namespace, name, joined) in [
            ("ns", "T", "ns%T"),
            ("", "T", "T"),
            ("ns", "", ""),
            ("ns", "ns%T", "ns%T"),
            ("ns", "nsx%T", "ns%nsx%T"),
            ("ns", "other%T", "ns%other%T"),
            ("ns", "%RETRY%G", "%RETRY%ns%G"),
            ("ns", "%DLQ%G", "%DLQ%ns%G"),
            ("ns", "%RETRY%ns%G", "%RETRY%ns%G"),
            ("ns", "RMQ_SYS_TRACE_TOPIC", "RMQ_SYS_TRACE_TOPIC"),
            ("ns", "TBW102", "TBW102"),
            ("ns", "rmq_sys_anything", "rmq_sys_anything"),
            ("ns", "CID_RMQ_SYS_X", "CID_RMQ_SYS_X"),
        ] {
            assert_eq!(join(namespace, name), joined, "join({namespace:?}, {name:?})");
        }
    }

    #[test]
    fn split_table() {
        for (name, namespace, inside) in [
            ("ns%T", "ns", "T"),
            ("T", "", "T"),
            ("%T", "", "%T"),
            ("a%b%c", "a", "b%c"),
            ("%RETRY%ns%G", "ns", "%RETRY%G"),
            ("%DLQ%ns%G", "ns", "%DLQ%G"),
            ("%RETRY%G", "", "%RETRY%G"),
            ("RMQ_SYS_TRANS_HALF_TOPIC", "", "RMQ_SYS_TRANS_HALF_TOPIC"),
            // A namespace holding the separator does not come back whole, in Java either.
            ("a%b%T", "a", "b%T"),
        ] {
            assert_eq!(split(name), (namespace, inside.to_owned()), "split({name:?})");
        }
    }

    #[test]
    fn split_undoes_join() {
        for namespace in ["ns", "a-b_c", "x|y"] {
            for name in ["T", "%RETRY%G", "%DLQ%G", "T_1-x"] {
                let joined = join(namespace, name);
                assert_eq!(split(&joined), (namespace, name.to_owned()), "{joined}");
            }
        }
    }
}
