//! The crash states of one persistent-memory crash point as the read-set
//! tree ([`crate::readset`]) walks them: a unit is a 64-byte line (the
//! unit [`crate::Pmem::log_access`] logs), and a line's class is its bytes.
//!
//! Every pending item writes one line, and rule M1 binds only the items of
//! one line ([`super::envelope`]): the allowed states are, line by line,
//! any M1-closed set of that line's items (the words of the line's first
//! `j` pending stores, any subset of store `j`'s words, and any subset of
//! its non-temporal lines), and every combination of those is allowed. A
//! line's bytes in a state depend only on the items of that line that
//! landed, so the states split by a line's bytes into classes, each the
//! landed sets that leave those bytes (two landed sets leaving equal bytes
//! are one class: a check that read the line cannot tell them apart).
//! The least state of a constraint (some lines fixed to a class) lands, on
//! each fixed line, its class's first landed set, and nothing elsewhere.
//! A line's classes are worked out when a check first reads it: most
//! pending lines are never read.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::pmr::PageStore;
use crate::readset::{ClassSpace, Classes};
use crate::wc::LINE;

use super::envelope::{PmChoice, PmItem, PmPending, PmemCursor};

/// Most landed sets listed per line; a line with more is not split (its
/// point counts as having states not visited).
pub const MAX_LINE_SETS: usize = 1 << 12;

/// A set of a point's states: some lines (by line number, offset / 64)
/// fixed to a class.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PmConstraint {
    /// Line number and class, by line number.
    lines: Vec<(u64, usize)>,
    /// Two classes asked of one line: no state meets it.
    empty: bool,
}

/// One line's pending items and classes.
#[derive(Clone, Debug)]
struct LineClasses {
    /// Every allowed landed set of the line's items, with its class.
    sets: BTreeMap<Vec<usize>, usize>,
    /// Per class, its first landed set.
    reps: Vec<Vec<usize>>,
    /// More landed sets than [`MAX_LINE_SETS`]: not listed.
    too_many: bool,
}

/// The states of one crash point, by line ([`ClassSpace`]).
#[derive(Debug)]
pub struct PmClasses<'a, 't> {
    cursor: &'a PmemCursor<'t>,
    pending: &'a PmPending,
    certain: &'a PageStore,
    /// The classes of the lines worked out so far.
    lines: RefCell<BTreeMap<u64, Rc<LineClasses>>>,
    /// The point's item indices, by line number.
    items_of: BTreeMap<u64, Vec<usize>>,
    /// The least and greatest line number with items (an empty span when
    /// none): most lines a check reads lie outside it.
    span: (u64, u64),
    /// How many states the envelope allows here (saturating).
    allowed: u64,
}

impl<'a, 't> PmClasses<'a, 't> {
    /// The classes of the point `cursor` is at, whose pending items are
    /// `pending` and certain content `certain` ([`PmemCursor::certain_of`]).
    pub fn new(cursor: &'a PmemCursor<'t>, pending: &'a PmPending, certain: &'a PageStore) -> Self {
        let mut items_of: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (i, it) in pending.items.iter().enumerate() {
            items_of.entry(it.line() / LINE as u64).or_default().push(i);
        }
        let allowed = items_of
            .values()
            .fold(1u64, |n, items| n.saturating_mul(count_sets(pending, items)));
        let span = match (items_of.keys().next(), items_of.keys().next_back()) {
            (Some(&lo), Some(&hi)) => (lo, hi + 1),
            _ => (0, 0),
        };
        PmClasses {
            cursor,
            pending,
            certain,
            lines: RefCell::new(BTreeMap::new()),
            items_of,
            span,
            allowed,
        }
    }

    /// True if a pending item writes line `unit`.
    fn pending_at(&self, unit: u64) -> bool {
        (self.span.0..self.span.1).contains(&unit) && self.items_of.contains_key(&unit)
    }

    /// Line `unit`'s classes (`None`: no pending item writes it).
    fn line(&self, unit: u64) -> Option<Rc<LineClasses>> {
        // Most lines a check reads have nothing pending.
        if !self.pending_at(unit) {
            return None;
        }
        let items = self.items_of.get(&unit)?;
        if let Some(lc) = self.lines.borrow().get(&unit) {
            return Some(lc.clone());
        }
        let sets = closed_sets(self.pending, items);
        let mut lc = LineClasses {
            sets: BTreeMap::new(),
            reps: Vec::new(),
            too_many: sets.is_none(),
        };
        let mut by_bytes: BTreeMap<[u8; LINE], usize> = BTreeMap::new();
        for set in sets.unwrap_or_default() {
            let bytes = self
                .cursor
                .line_bytes(self.certain, self.pending, unit * LINE as u64, &set);
            let n = by_bytes.len();
            let class = *by_bytes.entry(bytes).or_insert(n);
            if class == lc.reps.len() {
                lc.reps.push(set.clone());
            }
            lc.sets.insert(set, class);
        }
        let lc = Rc::new(lc);
        self.lines.borrow_mut().insert(unit, lc.clone());
        Some(lc)
    }

    /// How many states the envelope allows at this point (saturating at
    /// `u64::MAX`).
    pub fn allowed(&self) -> u64 {
        self.allowed
    }

    /// The landed items of `choice` on line `unit`.
    fn landed_on(&self, unit: u64, choice: &PmChoice) -> Vec<usize> {
        let Some(items) = self.items_of.get(&unit) else {
            return Vec::new();
        };
        items
            .iter()
            .copied()
            .filter(|i| choice.landed.binary_search(i).is_ok())
            .collect()
    }

    /// The class `choice` puts line `unit` in (`None`: the line is not
    /// split).
    fn class_of(&self, unit: u64, choice: &PmChoice) -> Option<usize> {
        let lc = self.line(unit)?;
        lc.sets.get(&self.landed_on(unit, choice)).copied()
    }

    /// True if `choice` meets `c` (for tests).
    pub fn meets(&self, c: &PmConstraint, choice: &PmChoice) -> bool {
        !c.empty && c.lines.iter().all(|&(u, k)| self.class_of(u, choice) == Some(k))
    }
}

/// A line's `items` (indices into `pending`, in item order: words by
/// store, then non-temporal lines) as its stores' words and its
/// non-temporal lines.
fn split_items(pending: &PmPending, items: &[usize]) -> (Vec<Vec<usize>>, Vec<usize>) {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut last = None;
    let mut nt = Vec::new();
    for &i in items {
        match &pending.items[i] {
            PmItem::Word { group, .. } => {
                if last != Some(*group) {
                    groups.push(Vec::new());
                    last = Some(*group);
                }
                if let Some(g) = groups.last_mut() {
                    g.push(i);
                }
            }
            PmItem::NtLine { .. } => nt.push(i),
        }
    }
    (groups, nt)
}

/// How many M1-closed sets a line's `items` have: the first j stores
/// whole and a proper subset of store j's words, for each j, or every
/// store whole; times any subset of the non-temporal lines (saturating).
fn count_sets(pending: &PmPending, items: &[usize]) -> u64 {
    let (groups, nt) = split_items(pending, items);
    let mut words = 1u64;
    for g in &groups {
        words = words.saturating_add(pow2(g.len()).saturating_sub(1));
    }
    words.saturating_mul(pow2(nt.len()))
}

/// Every M1-closed set of a line's `items` (as [`count_sets`] counts
/// them), the set with nothing landed first; `None` past
/// [`MAX_LINE_SETS`].
fn closed_sets(pending: &PmPending, items: &[usize]) -> Option<Vec<Vec<usize>>> {
    let count = count_sets(pending, items);
    if count > MAX_LINE_SETS as u64 {
        return None;
    }
    let (groups, nt) = split_items(pending, items);
    let mut word_sets: Vec<Vec<usize>> = Vec::new();
    let mut whole: Vec<usize> = Vec::new();
    for g in &groups {
        for mask in 0..(1u64 << g.len()) - 1 {
            let mut s = whole.clone();
            s.extend(
                g.iter()
                    .enumerate()
                    .filter(|(b, _)| mask >> b & 1 == 1)
                    .map(|(_, &i)| i),
            );
            word_sets.push(s);
        }
        whole.extend(g);
    }
    word_sets.push(whole);
    let mut out = Vec::with_capacity(count as usize);
    for mask in 0..1u64 << nt.len() {
        for w in &word_sets {
            let mut s = w.clone();
            s.extend(
                nt.iter()
                    .enumerate()
                    .filter(|(b, _)| mask >> b & 1 == 1)
                    .map(|(_, &i)| i),
            );
            s.sort_unstable();
            out.push(s);
        }
    }
    Some(out)
}

fn pow2(n: usize) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        1u64 << n
    }
}

impl ClassSpace for PmClasses<'_, '_> {
    type Unit = u64;
    type Constraint = PmConstraint;
    type Choice = PmChoice;

    fn least(&self, c: &PmConstraint) -> Option<PmChoice> {
        if c.empty {
            return None;
        }
        let mut landed = Vec::new();
        for &(u, k) in &c.lines {
            landed.extend(self.line(u)?.reps.get(k)?);
        }
        landed.sort_unstable();
        Some(PmChoice { landed })
    }

    fn and(&self, a: &PmConstraint, b: &PmConstraint) -> PmConstraint {
        let mut out = a.clone();
        self.and_in(&mut out, b);
        out
    }

    fn and_in(&self, a: &mut PmConstraint, b: &PmConstraint) {
        a.empty |= b.empty;
        for &(u, k) in &b.lines {
            match a.lines.binary_search_by_key(&u, |l| l.0) {
                Ok(i) => a.empty |= a.lines[i].1 != k,
                Err(i) => a.lines.insert(i, (u, k)),
            }
        }
    }

    fn fixed(&self, c: &PmConstraint, u: u64) -> bool {
        // A line no pending item writes has one class in every state: the
        // common case, told before anything else.
        !self.pending_at(u) || c.lines.binary_search_by_key(&u, |l| l.0).is_ok()
    }

    fn met(&self, c: &PmConstraint) -> bool {
        // Every class of every line is allowed with any class of the
        // others (lines are independent).
        !c.empty
    }

    fn classes(&self, u: u64, choice: &PmChoice) -> Classes<PmConstraint> {
        let Some(lc) = self.line(u) else {
            return Classes::One;
        };
        if lc.too_many {
            return Classes::TooMany;
        }
        if lc.reps.len() < 2 {
            return Classes::One;
        }
        let Some(mine) = self.class_of(u, choice) else {
            // Not an allowed state (not M1-closed on the line).
            return Classes::TooMany;
        };
        let one = |k: usize| PmConstraint {
            lines: vec![(u, k)],
            empty: false,
        };
        Classes::Split {
            mine: one(mine),
            others: (0..lc.reps.len()).filter(|&k| k != mine).map(one).collect(),
        }
    }
}
