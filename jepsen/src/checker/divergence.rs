//! `replica_divergence`: at the end (after heal and quiet) every replica of a group holds the same
//! committed log: identical records at identical offsets.
//!
//! Input: one [`ReplicaDump`] per replica, `offset → digest` of its log (the Raft log index and a digest
//! of the entry, see `dump.rs`) plus its committed offset. The replica with the highest committed
//! offset is the reference; every other replica must hold the reference's digest at every offset from
//! its own first offset (earlier ones may be purged into a snapshot) up to the reference's committed
//! offset. A different digest is `divergent`; an absent one is `missing` (the replica lags or lost
//! committed data). Both are errors. No dump at all cannot be valid.
//!
//! Membership: when the history records a group's final members (`members …`, see
//! [`crate::history::final_members`]), only those replicas are compared: a removed node stopped
//! taking part when it left, so its log may lag or end early without anything being wrong
//! (`excluded`); a final member without a dump is an error (`undumped`), since what it holds cannot be
//! decided. Groups without such a record compare every dump, as before membership changes existed.

use std::collections::BTreeMap;
use std::collections::BTreeSet;

use serde::Deserialize;
use serde::Serialize;

use super::check_result::CheckResult;

/// One replica's log at the end of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaDump {
    /// The broker group (`brokerName`).
    pub group: String,
    /// The node (`n1`, ...).
    pub node: String,
    /// First offset still held (earlier ones purged).
    pub first: u64,
    /// Highest committed offset (0 = none).
    pub committed: u64,
    /// Offset → record digest, for every offset held.
    pub records: BTreeMap<u64, String>,
}

impl ReplicaDump {
    /// A dump from `(offset, digest)` pairs.
    pub fn new<D: Into<String>>(
        group: &str,
        node: &str,
        first: u64,
        committed: u64,
        records: impl IntoIterator<Item = (u64, D)>,
    ) -> Self {
        ReplicaDump {
            group: group.to_owned(),
            node: node.to_owned(),
            first,
            committed,
            records: records.into_iter().map(|(o, d)| (o, d.into())).collect(),
        }
    }
}

/// Runs the check over every dump.
pub fn check(dumps: &[ReplicaDump]) -> CheckResult {
    check_members(dumps, &BTreeMap::new())
}

/// Runs the check over the dumps of each group's final `members` (group → node names); groups absent
/// from `members` compare every dump.
pub fn check_members(dumps: &[ReplicaDump], members: &BTreeMap<String, BTreeSet<String>>) -> CheckResult {
    let mut r = CheckResult::new("replica_divergence");
    let mut groups: BTreeMap<&str, Vec<&ReplicaDump>> = BTreeMap::new();
    let mut excluded = 0usize;
    for d in dumps {
        match members.get(&d.group) {
            Some(final_members) if !final_members.contains(&d.node) => {
                r.sample(format!("{}: {} is not a final member; not compared", d.group, d.node));
                excluded += 1;
            }
            _ => groups.entry(d.group.as_str()).or_default().push(d),
        }
    }
    let mut undumped = 0usize;
    for (group, final_members) in members {
        for node in final_members {
            if !dumps.iter().any(|d| &d.group == group && &d.node == node) {
                r.sample(format!("{group}: final member {node} was not dumped"));
                undumped += 1;
            }
        }
    }
    if groups.is_empty() {
        r.fail("no replica dumps: divergence cannot be decided");
    }
    let (mut compared, mut divergent, mut missing) = (0usize, 0usize, 0usize);
    for (group, replicas) in &groups {
        let Some(reference) = replicas.iter().max_by_key(|d| (d.committed, std::cmp::Reverse(d.node.as_str()))) else {
            continue;
        };
        if replicas.len() < 2 {
            r.sample(format!("{group}: only {} was dumped", reference.node));
        }
        for d in replicas.iter().filter(|d| d.node != reference.node) {
            let from = d.first.max(reference.first);
            let (mut div_here, mut miss_here) = (0usize, 0usize);
            for off in from..=reference.committed {
                compared += 1;
                match (reference.records.get(&off), d.records.get(&off)) {
                    (Some(a), Some(b)) if a == b => {}
                    (Some(a), Some(b)) => {
                        if div_here == 0 {
                            r.sample(format!("{group}: {}@{off} = {b} but {}@{off} = {a}", d.node, reference.node));
                        }
                        div_here += 1;
                    }
                    (None, _) => {
                        if miss_here + div_here == 0 {
                            r.sample(format!("{group}: reference {} lacks its own committed {off}", reference.node));
                        }
                        miss_here += 1;
                    }
                    (Some(_), None) => {
                        if miss_here == 0 {
                            r.sample(format!(
                                "{group}: {} lacks offset {off} (committed up to {} on {})",
                                d.node, reference.committed, reference.node
                            ));
                        }
                        miss_here += 1;
                    }
                }
            }
            divergent += div_here;
            missing += miss_here;
        }
    }
    r.count("groups", groups.len());
    r.count("compared", compared);
    r.count("divergent", divergent);
    r.count("missing", missing);
    r.count("excluded", excluded);
    r.count("undumped", undumped);
    if divergent + missing + undumped > 0 {
        r.valid = false;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(node: &str, first: u64, committed: u64, recs: &[(u64, &str)]) -> ReplicaDump {
        ReplicaDump::new("g", node, first, committed, recs.iter().map(|(o, s)| (*o, *s)))
    }

    #[test]
    fn table() {
        let full = [(1, "a"), (2, "b"), (3, "c")];
        let cases: Vec<(&str, Vec<ReplicaDump>, bool, u64, u64)> = vec![
            ("identical", vec![d("n1", 1, 3, &full), d("n2", 1, 3, &full), d("n3", 1, 3, &full)], true, 0, 0),
            (
                "an uncommitted tail may differ",
                vec![d("n1", 1, 2, &full), d("n2", 1, 2, &[(1, "a"), (2, "b"), (3, "z")])],
                true,
                0,
                0,
            ),
            ("a purged prefix is skipped", vec![d("n1", 1, 3, &full), d("n2", 3, 3, &[(3, "c")])], true, 0, 0),
            (
                "one record differs",
                vec![d("n1", 1, 3, &full), d("n2", 1, 3, &[(1, "a"), (2, "X"), (3, "c")])],
                false,
                1,
                0,
            ),
            (
                "a replica lags behind the committed log",
                vec![d("n1", 1, 3, &full), d("n2", 1, 1, &[(1, "a")])],
                false,
                0,
                2,
            ),
            (
                "a stale entry below the reference's commit",
                vec![d("n1", 1, 3, &full), d("n2", 1, 1, &[(1, "a"), (2, "old"), (3, "c")])],
                false,
                1,
                0,
            ),
            ("no dumps", vec![], false, 0, 0),
        ];
        for (name, dumps, valid, divergent, missing) in cases {
            let r = check(&dumps);
            assert_eq!((r.valid, r.get("divergent"), r.get("missing")), (valid, divergent, missing), "{name}: {r:?}");
        }
    }

    #[test]
    fn only_final_members_are_compared_and_each_must_be_dumped() {
        let full = [(1, "a"), (2, "b"), (3, "c")];
        let members =
            |names: &[&str]| BTreeMap::from([("g".to_owned(), names.iter().map(|n| (*n).to_owned()).collect())]);
        // n2 was removed after index 1: its short log is not an error, and n4 (added) is compared.
        let dumps = vec![d("n1", 1, 3, &full), d("n2", 1, 1, &[(1, "a")]), d("n4", 1, 3, &full)];
        assert!(!check(&dumps).valid, "without the membership record n2 lags");
        let r = check_members(&dumps, &members(&["n1", "n4"]));
        assert!(r.valid, "{r:?}");
        assert_eq!((r.get("excluded"), r.get("compared")), (1, 3));
        // A final member that diverges still fails; one without a dump fails too.
        let bad = vec![d("n1", 1, 3, &full), d("n4", 1, 3, &[(1, "a"), (2, "X"), (3, "c")])];
        assert_eq!(check_members(&bad, &members(&["n1", "n4"])).get("divergent"), 1);
        let r = check_members(&dumps[..1], &members(&["n1", "n4"]));
        assert!(!r.valid && r.get("undumped") == 1, "{r:?}");
    }
}
