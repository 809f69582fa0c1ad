//! Checking every crash state of a recorded persistent-memory run: the one
//! exploration loop the file systems on persistent memory share (their
//! crash tests give it their recovery and their oracle).
//!
//! After every trace entry in the range asked for, every crash state
//! [`PmemCursor::choices`] allows up to the bound (sampled past it, the
//! sample seeded by the entry's index) is materialized and judged. A state
//! is judged once per distinct content *and* promise: two states with the
//! same bytes after points where the same things are promised get one
//! verdict (the judge is a deterministic function of the image and of what
//! is promised); the same bytes under different promises are judged
//! again, since an operation that returned in between may be lost in them.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::content_hash::ContentHash;
use crate::error::PcieError;
use crate::pmr::PageStore;

use super::envelope::PmemCursor;

/// A crash state that failed its check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PmViolation {
    /// The crash came just after this trace entry.
    pub point: usize,
    /// The pending items that landed ([`super::PmChoice::landed`]).
    pub landed: Vec<usize>,
    /// How many items were pending.
    pub pending: usize,
    /// What the judge found wrong.
    pub why: String,
}

impl std::fmt::Display for PmViolation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write_state(f, self.point, &self.landed, self.pending)?;
        write!(f, ": {}", self.why)
    }
}

/// Writes where a crash state is: the trace entry it follows and the
/// pending items that landed (listed up to 16, counted past that), as
/// every report of a persistent-memory crash state says it.
pub fn write_state(
    f: &mut std::fmt::Formatter<'_>,
    point: usize,
    landed: &[usize],
    pending: usize,
) -> std::fmt::Result {
    if landed.len() <= 16 {
        write!(f, "after trace entry {point}, landed {landed:?}")
    } else {
        write!(
            f,
            "after trace entry {point}, {} of {pending} pending items landed",
            landed.len()
        )
    }
}

/// What [`explore`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PmExploreReport {
    /// Crash points visited.
    pub points: usize,
    /// Crash states checked (each a materialized image).
    pub states: u64,
    /// States judged (the others took the verdict of an equal state under
    /// equal promises).
    pub judged: u64,
    /// Crash points with more pending items than the bound (sampled).
    pub sampled_points: usize,
    /// States the bound left out, summed over the points.
    pub left_out: u64,
    /// The failing states, in the order found.
    pub violations: Vec<PmViolation>,
}

/// Checks every crash state after each entry in `points` (all subsets of
/// the pending items up to `bound`, sampled past it). `promised(k)` names
/// what is promised after entry `k`; `judge(k, image)` recovers the image
/// and checks it, `Ok` with what it found or `Err` with why it fails;
/// `tally` sees every passing state's verdict (judged or reused). Stops at
/// the first violation if `first_only`.
pub fn explore<K: Ord + Clone, V: Clone>(
    cursor: &mut PmemCursor<'_>,
    points: Range<usize>,
    bound: u32,
    first_only: bool,
    mut promised: impl FnMut(usize) -> K,
    mut judge: impl FnMut(usize, PageStore) -> Result<V, String>,
    mut tally: impl FnMut(&V),
) -> Result<PmExploreReport, PcieError> {
    let mut r = PmExploreReport::default();
    let mut verdicts: BTreeMap<(ContentHash, K), Result<V, String>> = BTreeMap::new();
    for k in points {
        cursor.advance_past(k)?;
        r.points += 1;
        // The pending items once per point: the choices, their images and
        // the count all come from them.
        let items = cursor.pending();
        let (choices, left) = cursor.choices_of(&items, bound, k as u64);
        r.sampled_points += usize::from(left > 0);
        r.left_out = r.left_out.saturating_add(left);
        let pending = items.items.len();
        let promise = promised(k);
        // What every state of the point holds, made and hashed once: each
        // state shares its pages and hashes only the pages it changes.
        let mut certain = cursor.certain_of();
        certain.content_hash();
        for c in choices {
            let mut image = cursor.landed_over(&certain, &items, &c);
            r.states += 1;
            let key = (image.content_hash(), promise.clone());
            let verdict = match verdicts.get(&key) {
                Some(v) => v.clone(),
                None => {
                    r.judged += 1;
                    let v = judge(k, image);
                    verdicts.insert(key, v.clone());
                    v
                }
            };
            match verdict {
                Ok(v) => tally(&v),
                Err(why) => {
                    r.violations.push(PmViolation {
                        point: k,
                        landed: c.landed.clone(),
                        pending,
                        why,
                    });
                    if first_only {
                        return Ok(r);
                    }
                }
            }
        }
    }
    Ok(r)
}
