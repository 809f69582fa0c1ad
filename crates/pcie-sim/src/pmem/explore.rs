//! Checking every crash state of a recorded persistent-memory run: the
//! exploration loops the file systems on persistent memory share (their
//! crash tests and crashfuzz's PM modes give them their recovery and their
//! oracle).
//!
//! [`explore_read_sets`] gives every state the envelope allows a verdict,
//! none sampled and no bound, checking a few: the read-set tree
//! ([`crate::readset`], the one the drives' explorer uses too) over 64-byte
//! lines ([`PmClasses`]). [`explore`] judges every state
//! [`PmemCursor::choices`] allows up to a bound instead (sampled past it,
//! the sample seeded by the entry's index). Either way a state is judged
//! once per distinct content *and* promise: two states with the same bytes
//! after points where the same things are promised get one verdict (the
//! judge is a deterministic function of the image and of what is
//! promised); the same bytes under different promises are judged again,
//! since an operation that returned in between may be lost in them.
//!
//! # Why the read-set enumeration judges every state
//!
//! [`crate::readset`] gives the argument for any store; here is why its
//! three premises hold on persistent memory.
//!
//! - *The check is a function of the lines it read.* The judge is a
//!   deterministic program whose inputs are the image and the promise key
//!   (`promised(k)`: it must name everything else the judge takes from
//!   the point). It reads the image only through [`crate::Pmem::load`],
//!   which logs every 64-byte line it reads before the program wrote all
//!   of the bytes read ([`crate::Pmem::log_access`]); nothing else of the
//!   image reaches the program (stores, flushes and fences do not return
//!   its bytes; timing and evictions do not depend on them). So two images
//!   equal on every line one's check logged make the other's check take
//!   the same steps (induction over the loads), and the same verdict.
//! - *A line's class decides its bytes.* Every pending item writes within
//!   one line (a word store, a write-combining line), and a state's bytes
//!   on a line are the certain content with that line's certain writes
//!   and landed items applied in trace order
//!   (`PmemCursor::landed_over`): they depend on that line's landed
//!   items alone. [`PmClasses`] makes a class of each distinct line
//!   content over the line's allowed landed sets: equal classes, equal
//!   bytes, by definition.
//! - *The least state of a constraint is allowed.* Rule M1 binds the items
//!   of one line only, and M2-M5 decide which items are pending, not how
//!   they combine: the allowed states are every combination of one
//!   M1-closed landed set per line. A constraint fixes some lines' classes;
//!   landing a set of each fixed line's class, and nothing on the other
//!   lines, is allowed and meets it, and a constraint fixing no line twice
//!   is met.
//!
//! Two shortcuts keep every verdict: a node whose image equals (with an
//! equal promise key) one judged before takes that judgement's verdict and
//! its reads, which are its own (the check is a function of the image and
//! the key); and a point whose pending items, certain content, certain
//! writes on the pending lines ([`PmemCursor::certain_counts`]: a state
//! applies them again over its landed items) and promise key equal those
//! of one of the last two points explored in full has the same states with
//! the same contents, all judged there. A line with more
//! landed sets than [`super::classes::MAX_LINE_SETS`], or a point cut at
//! the budget, leaves states unjudged: they are counted in
//! [`PmExploreReport::left_out`], never dropped.
//! `crashfuzz/tests/pm_read_sets.rs` compares every allowed state of small
//! WOFS, SoupFS and PMFS runs with its leaf's verdict.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::content_hash::ContentHash;
use crate::error::PcieError;
use crate::pmr::PageStore;

use super::classes::PmClasses;
use super::envelope::{PmPending, PmemCursor};
use crate::readset::ReadSetTree;

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

/// What [`explore`] or [`explore_read_sets`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PmExploreReport {
    /// Crash points visited.
    pub points: usize,
    /// Crash states checked (each a materialized image).
    pub states: u64,
    /// States judged (the others took the verdict of an equal state under
    /// equal promises).
    pub judged: u64,
    /// Crash points with states left out: more pending items than the
    /// bound (sampled), or a read-set tree cut at its budget or with a
    /// line too wide to split.
    pub sampled_points: usize,
    /// States left out, summed over the points (for a read-set tree, a
    /// lower bound: each node left open holds at least one; `u64::MAX` if
    /// a line was too wide to split).
    pub left_out: u64,
    /// States the envelope allows, summed over the points (saturating;
    /// read-set enumeration only).
    pub allowed: u64,
    /// States given the verdict of their leaf's checked state, without a
    /// check of their own (read-set enumeration only).
    pub by_read_set: u64,
    /// The failing states, in the order found.
    pub violations: Vec<PmViolation>,
}

/// Counts a state's verdict: a passing one goes to `tally`, a failing one
/// into the report's violations (the state after entry `point` with the
/// items `landed` of `pending`). True if it failed.
fn take_verdict<V>(
    r: &mut PmExploreReport,
    verdict: Result<V, String>,
    point: usize,
    landed: &[usize],
    pending: usize,
    tally: &mut impl FnMut(&V),
) -> bool {
    match verdict {
        Ok(v) => {
            tally(&v);
            false
        }
        Err(why) => {
            r.violations.push(PmViolation {
                point,
                landed: landed.to_vec(),
                pending,
                why,
            });
            true
        }
    }
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
            if take_verdict(&mut r, verdict, k, &c.landed, pending, &mut tally) && first_only {
                return Ok(r);
            }
        }
    }
    Ok(r)
}

/// What makes up a point's states: its pending items, its certain
/// content's hash and [`PmemCursor::certain_counts`].
type PointStates = (PmPending, ContentHash, Vec<(u64, usize, usize)>);

/// A judge's verdict on one state and the lines (offset / 64) its check
/// read before writing them ([`crate::Pmem::log_access`]).
pub type Judgement<V> = (Result<V, String>, Vec<u64>);

/// Judges every crash state the envelope allows after each entry in
/// `points`, none sampled and no bound, by what the checks read
/// ([`crate::readset`], over the point's [`PmClasses`]): each node's state
/// is materialized and judged, the verdict stands for every state of its
/// leaf, and the node splits on the other classes of the lines its check
/// read. `judge(k, image)` must log the lines its check (recovery and
/// every later read of the image) read before writing them, and be a
/// deterministic function of the image and of `promised(k)`: a state equal
/// in content under equal promises takes the verdict and the reads of the
/// one judged before. At most `budget` nodes are handed out per point;
/// each node left open past it counts as (at least) one state left out.
/// `tally` sees every passing node's verdict; a violation is reported per
/// failing node (its leaf's states fail alike). Stops at the first
/// violation if `first_only`.
#[allow(clippy::too_many_arguments)]
pub fn explore_read_sets<K: Ord + Clone, V: Clone>(
    cursor: &mut PmemCursor<'_>,
    points: Range<usize>,
    budget: usize,
    first_only: bool,
    mut promised: impl FnMut(usize) -> K,
    mut judge: impl FnMut(usize, PageStore) -> Judgement<V>,
    mut tally: impl FnMut(&V),
) -> Result<PmExploreReport, PcieError> {
    let mut r = PmExploreReport::default();
    let mut verdicts: BTreeMap<(ContentHash, K), Judgement<V>> = BTreeMap::new();
    // The last two points explored in full: what makes up their states
    // (pending items, certain content, certain writes on pending lines),
    // promise and count of states (two: a promise that holds at one point
    // only comes back at the next).
    let mut last: Vec<(PointStates, K, u64)> = Vec::new();
    for k in points {
        cursor.advance_past(k)?;
        r.points += 1;
        let items = cursor.pending();
        let pending = items.items.len();
        let promise = promised(k);
        let mut certain = cursor.certain_of();
        let certain_hash = certain.content_hash();
        let counts = cursor.certain_counts(&items);
        if let Some((_, _, n)) = last
            .iter()
            .find(|((i, h, c), p, _)| *i == items && *h == certain_hash && *c == counts && *p == promise)
        {
            // The same states as at a point before (entries since left
            // nothing certain or pending otherwise: flushes not yet
            // complete), under the same promise: all judged there.
            r.allowed = r.allowed.saturating_add(*n);
            r.by_read_set = r.by_read_set.saturating_add(*n);
            continue;
        }
        let space = PmClasses::new(cursor, &items, &certain);
        r.allowed = r.allowed.saturating_add(space.allowed());
        let mut tree = ReadSetTree::<PmClasses<'_, '_>>::new();
        while tree.nodes() < budget {
            let Some((id, c)) = tree.next_node(&space) else {
                break;
            };
            let mut image = cursor.landed_over(&certain, &items, &c);
            r.states += 1;
            let key = (image.content_hash(), promise.clone());
            let (verdict, reads) = match verdicts.get(&key) {
                Some(v) => v.clone(),
                None => {
                    r.judged += 1;
                    let v = judge(k, image);
                    verdicts.insert(key, v.clone());
                    v
                }
            };
            tree.read(&space, id, &reads);
            if take_verdict(&mut r, verdict, k, &c.landed, pending, &mut tally) && first_only {
                return Ok(r);
            }
        }
        let open = tree.open() as u64;
        let cut = if tree.too_wide { u64::MAX } else { open };
        r.sampled_points += usize::from(cut > 0);
        r.left_out = r.left_out.saturating_add(cut);
        r.by_read_set = r
            .by_read_set
            .saturating_add(space.allowed().saturating_sub(tree.nodes() as u64 + open));
        let n = space.allowed();
        drop(space);
        if cut == 0 {
            if last.len() == 2 {
                last.remove(0);
            }
            last.push(((items, certain_hash, counts), promise, n));
        }
    }
    Ok(r)
}
