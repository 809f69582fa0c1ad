//! Which subsets of pending items a crash state enumerates.
//!
//! With `n` items pending and a bound `b`, every one of the 2^n subsets is
//! enumerated when `n <= b`. Past the bound, exactly 2^b subsets are
//! visited, chosen deterministically from `seed`: the empty and the full
//! set, every single item, every set of all items but one (the states
//! closest to "nothing landed" and "everything landed", where ordering
//! bugs show first), then uniformly random subsets until the budget is
//! spent. The rest are counted as not visited.

use std::collections::BTreeSet;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Largest bound honoured (2^20 subsets per crash point).
pub const MAX_BOUND: u32 = 20;

/// The subsets of `0..n` to visit under `bound` (each sorted), and how
/// many subsets were left out.
pub fn subsets(n: usize, bound: u32, seed: u64) -> (Vec<Vec<usize>>, u64) {
    let bound = bound.min(MAX_BOUND);
    if n as u32 <= bound {
        let all = (0u64..1 << n)
            .map(|mask| (0..n).filter(|b| mask & (1 << b) != 0).collect())
            .collect();
        return (all, 0);
    }
    let budget = 1usize << bound;
    let total: u64 = if n >= 64 { u64::MAX } else { 1u64 << n };
    let mut seen: BTreeSet<Vec<usize>> = BTreeSet::new();
    let mut out = Vec::with_capacity(budget);
    let mut push = |s: Vec<usize>, out: &mut Vec<Vec<usize>>| {
        if out.len() < budget && seen.insert(s.clone()) {
            out.push(s);
        }
    };
    push(Vec::new(), &mut out);
    push((0..n).collect(), &mut out);
    // Once the budget is spent nothing more is pushed: stop building the
    // candidates (each all-but-one set is `n` long, so `n` of them past the
    // budget cost O(n^2): most of a check's time with thousands pending).
    for i in 0..n {
        if out.len() >= budget {
            break;
        }
        push(vec![i], &mut out);
        push((0..n).filter(|&j| j != i).collect(), &mut out);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ (n as u64).rotate_left(32));
    // Past a few misses in a row the space is nearly covered; stop.
    let mut misses = 0;
    while out.len() < budget && misses < 64 {
        let s: Vec<usize> = (0..n).filter(|_| rng.gen_bool(0.5)).collect();
        let before = out.len();
        push(s, &mut out);
        misses = if out.len() == before { misses + 1 } else { 0 };
    }
    // Past 2^64 the count is "at least u64::MAX": it stays saturated
    // rather than read as an exact number a few below it.
    let left = if total == u64::MAX {
        u64::MAX
    } else {
        total - out.len() as u64
    };
    (out, left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn within_the_bound_everything_is_enumerated() {
        let (s, left) = subsets(3, 4, 0);
        assert_eq!(s.len(), 8);
        assert_eq!(left, 0);
        assert!(s.contains(&vec![0, 2]));
    }

    #[test]
    fn past_two_to_the_64_the_count_left_out_stays_saturated() {
        let (s, left) = subsets(70, 3, 1);
        assert_eq!(s.len(), 8);
        assert_eq!(left, u64::MAX, "not u64::MAX less the 8 enumerated");
        let (_, left) = subsets(63, 3, 1);
        assert_eq!(left, (1u64 << 63) - 8);
    }

    #[test]
    fn past_the_bound_the_extremes_come_first() {
        let (s, left) = subsets(10, 5, 7);
        assert_eq!(s.len(), 32);
        assert_eq!(left, 1024 - 32);
        assert_eq!(s[0], Vec::<usize>::new());
        assert_eq!(s[1], (0..10).collect::<Vec<_>>());
        for i in 0..10 {
            assert!(s.contains(&vec![i]));
        }
        assert_eq!(subsets(10, 5, 7), (s, left), "deterministic");
    }

    proptest! {
        #[test]
        fn subsets_are_distinct_sorted_and_in_range(n in 0usize..40, bound in 0u32..8, seed: u64) {
            let (s, left) = subsets(n, bound, seed);
            let set: BTreeSet<_> = s.iter().cloned().collect();
            prop_assert_eq!(set.len(), s.len());
            if n as u32 <= bound {
                prop_assert_eq!(s.len(), 1usize << n);
            } else {
                prop_assert!(s.len() <= 1usize << bound);
                prop_assert!(s.contains(&Vec::new()));
            }
            for x in &s {
                prop_assert!(x.windows(2).all(|w| w[0] < w[1]));
                prop_assert!(x.iter().all(|&i| i < n));
            }
            let total = if n >= 64 { u64::MAX } else { 1u64 << n };
            prop_assert_eq!(left, total - s.len() as u64);
        }
    }
}
