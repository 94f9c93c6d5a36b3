//! The fault schedule: a list of steps (start, hold, fault) drawn from a seed, one fault at a time,
//! with quiet gaps between them so the cluster recovers in between.
//!
//! Invariants: steps do not overlap, every step ends (healed) before the time limit, and the same
//! seed, kinds and layout give the same schedule (for `--seed` reproduction with the same build).
//! A group gets at most [`MEMBERSHIP_CHANGES_PER_GROUP_MAX`] replacements, so its spares (one per
//! replacement, more when an addition must be retried with a fresh id) cannot run out; once every
//! group has had its share, other asked kinds take the remaining slots (or the schedule ends).

use std::time::Duration;

use rand::Rng;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::seq::SliceRandom;

use super::Fault;
use super::NemesisKind;
use super::Target;
use super::membership::Victim;
use super::partition::PartitionKind;
use crate::cluster::SPARE_NODES_PER_GROUP;

/// Time before the first fault, so the workload starts on a healthy cluster.
pub const SCHEDULE_WARMUP_MS: u64 = 3_000;
/// Shortest and longest time a fault is held.
pub const FAULT_HOLD_MS: (u64, u64) = (3_000, 10_000);
/// Shortest and longest healthy gap between faults.
pub const FAULT_GAP_MS: (u64, u64) = (2_000, 6_000);
/// Replacements per group and run: half the spares, the other half left for retried additions.
pub const MEMBERSHIP_CHANGES_PER_GROUP_MAX: usize = SPARE_NODES_PER_GROUP / 2;
const _: () = assert!(MEMBERSHIP_CHANGES_PER_GROUP_MAX >= 1);

/// One scheduled fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// When it starts, from the start of the workload.
    pub at: Duration,
    /// How long it is held before healing.
    pub hold: Duration,
    /// The fault.
    pub fault: Fault,
}

/// Draws a schedule for `kinds` over `time_limit` against `groups` (name → member node names).
pub fn generate(kinds: &[NemesisKind], groups: &[(String, Vec<String>)], time_limit: Duration, seed: u64) -> Vec<Step> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut steps = Vec::new();
    if kinds.is_empty() || groups.is_empty() {
        return steps;
    }
    let limit_ms = u64::try_from(time_limit.as_millis()).unwrap_or(u64::MAX);
    let mut t = SCHEDULE_WARMUP_MS;
    // Every asked kind comes once (in a seeded order) before any repeats, so short runs cover them all.
    let mut first_pass: Vec<NemesisKind> = kinds.to_vec();
    first_pass.shuffle(&mut rng);
    first_pass.reverse();
    let mut replacements_left: Vec<usize> = vec![MEMBERSHIP_CHANGES_PER_GROUP_MAX; groups.len()];
    let others: Vec<NemesisKind> = kinds.iter().copied().filter(|k| *k != NemesisKind::Membership).collect();
    loop {
        let hold = rng.random_range(FAULT_HOLD_MS.0..=FAULT_HOLD_MS.1);
        if t + hold > limit_ms {
            break;
        }
        let Some(mut kind) = first_pass.pop().or_else(|| kinds.choose(&mut rng).copied()) else { break };
        let Some(mut group_index) = (0..groups.len()).collect::<Vec<_>>().choose(&mut rng).copied() else { break };
        if kind == NemesisKind::Membership && replacements_left[group_index] == 0 {
            // Another group with spares to give, else another kind; no extra draw when neither is needed.
            match replacements_left.iter().position(|left| *left > 0) {
                Some(i) => group_index = i,
                None => match others.choose(&mut rng) {
                    Some(k) => kind = *k,
                    None => break,
                },
            }
        }
        let (group, members) = &groups[group_index];
        let pick_target =
            |rng: &mut StdRng, allow_group: bool| match rng.random_range(0..if allow_group { 3 } else { 2 }) {
                0 => Target::Leader(group.clone()),
                1 => members.choose(rng).map_or_else(|| Target::Leader(group.clone()), |n| Target::Node(n.clone())),
                _ => Target::Group(group.clone()),
            };
        let fault = match kind {
            NemesisKind::Partition => {
                let Some(kind) = PartitionKind::ALL.choose(&mut rng).copied() else { break };
                Fault::Partition { group: group.clone(), kind }
            }
            NemesisKind::Namesrv => Fault::IsolateNamesrv,
            NemesisKind::Kill => Fault::Kill(pick_target(&mut rng, false)),
            NemesisKind::Pause => Fault::Pause(pick_target(&mut rng, false)),
            NemesisKind::LoseUnfsynced => Fault::LoseUnfsynced(pick_target(&mut rng, true)),
            NemesisKind::PowerLoss => Fault::LoseUnfsynced(Target::Group(group.clone())),
            // One replica's disk at a time: a whole group wiped has nothing left to recover from.
            NemesisKind::Wipe => Fault::Wipe(pick_target(&mut rng, false)),
            // One replica's disk at a time, as for `wipe`: it is rebuilt from the others.
            NemesisKind::Corrupt => Fault::Corrupt(pick_target(&mut rng, false)),
            // A whole group full too: nothing can be written, and everything must resume once freed.
            NemesisKind::DiskFull => Fault::DiskFull(pick_target(&mut rng, true)),
            NemesisKind::FdExhaustion => {
                let target = pick_target(&mut rng, false);
                Fault::FdExhaustion {
                    target,
                    limit: rng.random_range(super::FD_LIMIT_RANGE.0..=super::FD_LIMIT_RANGE.1),
                }
            }
            NemesisKind::Clock => {
                // One to all members, each its own offset, both ways, small and large.
                let count = rng.random_range(1..=members.len().max(1));
                let mut indexes: Vec<usize> = (0..members.len()).collect();
                indexes.shuffle(&mut rng);
                let offsets = indexes
                    .into_iter()
                    .take(count)
                    .map(|i| (i, rng.random_range(-super::CLOCK_SKEW_MAX_MS..=super::CLOCK_SKEW_MAX_MS)))
                    .collect();
                Fault::ClockSkew { group: group.clone(), offsets }
            }
            NemesisKind::Membership => {
                replacements_left[group_index] -= 1;
                let victim = match rng.random_range(0..2) {
                    0 => Victim::Leader,
                    _ => Victim::Follower(rng.random_range(0..members.len().max(1))),
                };
                Fault::ReplaceMember { group: group.clone(), victim, add_first: rng.random_bool(0.5) }
            }
        };
        steps.push(Step { at: Duration::from_millis(t), hold: Duration::from_millis(hold), fault });
        t += hold + rng.random_range(FAULT_GAP_MS.0..=FAULT_GAP_MS.1);
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn groups() -> Vec<(String, Vec<String>)> {
        vec![("broker-a".into(), vec!["n11".into(), "n12".into(), "n13".into()])]
    }

    #[test]
    fn same_seed_same_schedule_and_steps_never_overlap_or_overrun() {
        let kinds = NemesisKind::parse_list("partition,kill,pause,lose-unfsynced").expect("known kinds");
        for seed in 0..100u64 {
            let limit = Duration::from_secs(60);
            let a = generate(&kinds, &groups(), limit, seed);
            assert_eq!(a, generate(&kinds, &groups(), limit, seed), "seed {seed}");
            assert!(a.len() >= 3, "seed {seed}: {} steps", a.len());
            for w in a.windows(2) {
                assert!(w[0].at + w[0].hold < w[1].at, "seed {seed}: overlap");
            }
            assert!(a.iter().all(|s| s.at + s.hold <= limit), "seed {seed}: overrun");
        }
    }

    #[test]
    fn every_kind_appears_even_in_a_short_run() {
        let kinds = NemesisKind::parse_list("lose-unfsynced,kill").expect("known kinds");
        for seed in 0..100u64 {
            let steps = generate(&kinds, &groups(), Duration::from_secs(30), seed);
            assert!(steps.iter().any(|s| matches!(s.fault, Fault::LoseUnfsynced(_))), "seed {seed}: {steps:?}");
            assert!(steps.iter().any(|s| matches!(s.fault, Fault::Kill(_))), "seed {seed}: {steps:?}");
        }
    }

    #[test]
    fn membership_replacements_stay_within_the_spares_and_other_kinds_take_over() {
        let two = vec![
            ("broker-a".to_owned(), vec!["n11".into(), "n12".into(), "n13".into()]),
            ("broker-b".to_owned(), vec!["n21".into(), "n22".into(), "n23".into()]),
        ];
        let kinds = NemesisKind::parse_list("membership,kill").expect("known kinds");
        for seed in 0..50u64 {
            let steps = generate(&kinds, &two, Duration::from_secs(1_200), seed);
            for (g, _) in &two {
                let n = steps
                    .iter()
                    .filter(|s| matches!(&s.fault, Fault::ReplaceMember { group, .. } if group == g))
                    .count();
                assert!(n <= MEMBERSHIP_CHANGES_PER_GROUP_MAX, "seed {seed}: {g} replaced {n} times");
                assert!(n > 0, "seed {seed}: {g} never replaced in 20 minutes");
            }
            assert!(steps.len() > 2 * MEMBERSHIP_CHANGES_PER_GROUP_MAX, "seed {seed}: kill fills the rest");
            for w in steps.windows(2) {
                assert!(w[0].at + w[0].hold < w[1].at, "seed {seed}: overlap");
            }
        }
        // Membership alone ends once every group had its share.
        let only = generate(&[NemesisKind::Membership], &groups(), Duration::from_secs(1_200), 3);
        assert_eq!(only.len(), MEMBERSHIP_CHANGES_PER_GROUP_MAX);
        assert!(only.iter().any(|s| matches!(s.fault, Fault::ReplaceMember { victim: Victim::Leader, .. })));
        assert!(only.iter().any(|s| matches!(s.fault, Fault::ReplaceMember { victim: Victim::Follower(_), .. })));
    }

    #[test]
    fn only_the_asked_kinds_appear() {
        let kinds = [NemesisKind::Pause];
        let steps = generate(&kinds, &groups(), Duration::from_secs(120), 7);
        assert!(steps.iter().all(|s| matches!(s.fault, Fault::Pause(_))));
        let none = generate(&[], &groups(), Duration::from_secs(120), 7);
        assert!(none.is_empty());
    }
}
