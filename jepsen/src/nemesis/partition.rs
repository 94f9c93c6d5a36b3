//! Which node pairs a partition cuts (Jepsen's "grudges"), as pure functions of the members, the
//! leader and a seeded RNG. Every variant returns unordered pairs of member positions; the caller
//! maps them to addresses and cuts both directions.
//!
//! Invariants: pairs are distinct, never `(x, x)`, and `halves`/`bridge`/`ring` leave at least one
//! side (or every node, for the ring) with a majority, so the group can keep making progress.

use rand::Rng;
use rand::seq::SliceRandom;
use serde::Deserialize;
use serde::Serialize;

/// A partition shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PartitionKind {
    /// One random node cut from the rest.
    IsolateOne,
    /// The current leader cut from the rest.
    IsolateLeader,
    /// A random minority cut from the majority.
    Halves,
    /// Two halves joined only through one bridge node (needs 5 nodes; otherwise halves).
    Bridge,
    /// Every node sees a different majority (needs 5 nodes; otherwise halves).
    MajoritiesRing,
}

impl PartitionKind {
    /// Every kind, for schedules.
    pub const ALL: [PartitionKind; 5] = [
        PartitionKind::IsolateOne,
        PartitionKind::IsolateLeader,
        PartitionKind::Halves,
        PartitionKind::Bridge,
        PartitionKind::MajoritiesRing,
    ];

    /// The kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            PartitionKind::IsolateOne => "isolate-one",
            PartitionKind::IsolateLeader => "isolate-leader",
            PartitionKind::Halves => "halves",
            PartitionKind::Bridge => "bridge",
            PartitionKind::MajoritiesRing => "majorities-ring",
        }
    }
}

fn isolate(n: usize, x: usize) -> Vec<(usize, usize)> {
    (0..n).filter(|&y| y != x).map(|y| (x.min(y), x.max(y))).collect()
}

fn cross(a: &[usize], b: &[usize]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = a.iter().flat_map(|&x| b.iter().map(move |&y| (x.min(y), x.max(y)))).collect();
    out.sort_unstable();
    out
}

/// The pairs `kind` cuts among `n` members; `leader` is the leader's position when known (else a
/// random node stands in).
pub fn cuts(kind: PartitionKind, n: usize, leader: Option<usize>, rng: &mut impl Rng) -> Vec<(usize, usize)> {
    if n < 2 {
        return Vec::new();
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(rng);
    match kind {
        PartitionKind::IsolateOne => isolate(n, order[0]),
        PartitionKind::IsolateLeader => isolate(n, leader.filter(|&l| l < n).unwrap_or(order[0])),
        PartitionKind::Bridge if n >= 5 => {
            // order[0] is the bridge; the rest split in two, each side plus the bridge a majority of 5.
            let rest = &order[1..];
            let (a, b) = rest.split_at(rest.len() / 2);
            cross(a, b)
        }
        PartitionKind::MajoritiesRing if n >= 5 => {
            // In ring order each node keeps its k nearest on either side: 1 + 2k is a bare majority.
            let k = (n / 2).div_ceil(2);
            let mut out = Vec::new();
            for i in 0..n {
                for j in (i + 1)..n {
                    let d = (j - i).min(n - (j - i));
                    if d > k {
                        let (x, y) = (order[i], order[j]);
                        out.push((x.min(y), x.max(y)));
                    }
                }
            }
            out.sort_unstable();
            out
        }
        PartitionKind::Halves | PartitionKind::Bridge | PartitionKind::MajoritiesRing => {
            let (minority, majority) = order.split_at((n - 1) / 2);
            cross(minority, majority)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    /// Nodes reachable from `x` directly.
    fn sees(n: usize, cut: &[(usize, usize)], x: usize) -> usize {
        (0..n).filter(|&y| y == x || !cut.contains(&(x.min(y), x.max(y)))).count()
    }

    #[test]
    fn shapes_hold_for_many_seeds() {
        for seed in 0..200u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            for n in [3usize, 5] {
                let majority = n / 2 + 1;
                for kind in PartitionKind::ALL {
                    let c = cuts(kind, n, Some(1), &mut rng);
                    let distinct: BTreeSet<_> = c.iter().collect();
                    assert_eq!(distinct.len(), c.len(), "seed {seed} {kind:?} n={n}: duplicate pairs");
                    assert!(c.iter().all(|(a, b)| a < b && *b < n), "seed {seed} {kind:?}: bad pair");
                    assert!(!c.is_empty(), "seed {seed} {kind:?} n={n}: cuts nothing");
                    let with_majority = (0..n).filter(|&x| sees(n, &c, x) >= majority).count();
                    match kind {
                        PartitionKind::IsolateOne | PartitionKind::IsolateLeader => {
                            let alone: Vec<usize> = (0..n).filter(|&x| sees(n, &c, x) == 1).collect();
                            assert_eq!(alone.len(), 1, "seed {seed} {kind:?}");
                            if kind == PartitionKind::IsolateLeader {
                                assert_eq!(alone, vec![1]);
                            }
                        }
                        PartitionKind::MajoritiesRing if n >= 5 => {
                            assert_eq!(with_majority, n, "seed {seed}: every node sees a majority");
                            assert!((0..n).all(|x| sees(n, &c, x) < n), "seed {seed}: nobody sees everyone");
                        }
                        PartitionKind::Bridge if n >= 5 => {
                            let bridges = (0..n).filter(|&x| sees(n, &c, x) == n).count();
                            assert_eq!(bridges, 1, "seed {seed}: exactly one bridge");
                        }
                        _ => assert_eq!(with_majority, majority, "seed {seed} {kind:?} n={n}: one majority side"),
                    }
                }
            }
        }
    }
}
