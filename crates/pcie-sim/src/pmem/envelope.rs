//! Power failure on the memory bus: which persistent-memory states a crash
//! after entry `k` of a [`PmTrace`] may leave, whatever this run's cache
//! evictions did (`docs/persistence.md`, "Persistent memory on the memory
//! bus", rules M1 to M5).
//!
//! - **Units.** A cached store is one 8-byte *word store* per aligned word
//!   it covers: an aligned 8-byte write is failure-atomic (Intel SDM vol.
//!   3A 8.1.1), a wider store is not (8.1.1: it may be carried out as
//!   several memory accesses). A write-combining line of non-temporal stores is
//!   one unit (as rule W of the PMR model).
//! - **Line order (M1).** A line is written back whole, from the one
//!   coherent copy in the cache, so what persisted of a line is its
//!   content at one instant: all word stores of its first `j` store
//!   instructions (in global visibility order, here trace order) and any
//!   subset of the words of instruction `j` (a write-back between two of
//!   its word accesses). Lines are independent of each other.
//! - **Flushes (M2).** `clflush`, `clflushopt` and `clwb` of a line take
//!   its content at that point or later (they are ordered with older
//!   writes to the line, and CLFLUSHOPT and CLWB not with younger ones:
//!   SDM vol. 2A CLFLUSH, CLFLUSHOPT, CLWB). The content is certain
//!   once the flush completed: a `clflush` by the core's next store,
//!   non-temporal store, `clflush` or fence (CLFLUSH is ordered with
//!   writes and other CLFLUSHes), a `clflushopt` or `clwb` only by the
//!   core's next `sfence`/`mfence` (SDM vol. 3A 8.2.5; vol. 2A CLWB: not
//!   ordered with other writes).
//! - **Non-temporal lines (M3).** A line in the core's write-combining
//!   buffers, or sent by them, may or may not have reached the write
//!   pending queue until the core's next fence (SDM vol. 3A 11.3.1: WC
//!   writes are weakly ordered and may be delayed; 8.2.5: SFENCE
//!   orders them). A non-temporal store to a line makes that line's
//!   earlier cached stores certain (its dirty copy is written back first,
//!   SDM vol. 1 10.4.6.2).
//! - **eADR (M4).** Every cached store is certain once it executed.
//! - **Write-backs (M5).** Evictions this run did ([`PmEventKind::Writeback`])
//!   constrain nothing: nothing can observe them before a crash.
//!
//! A state is a choice of the pending items (word stores not certain,
//! non-temporal lines not certain), closed under M1: a word store of
//! instruction `j` of a line implies every word store of that line's
//! earlier pending instructions. The items of each state are applied to the
//! certain image in trace order. [`PmemCursor::choices`] enumerates every
//! subset of the pending items up to a bound and samples past it
//! ([`crate::subsets::subsets`]), each closed under M1 (every allowed state
//! is its own closure, so within the bound every allowed state is reached).
//! Since M1 binds one line's items only, the allowed states are also every
//! combination of one M1-closed set per line: [`super::classes`] walks them
//! that way, by what checks read, with no bound.
//!
//! Deviations: a store and a non-temporal line of two different cores to
//! the same bytes that nothing orders are materialized in trace order only.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::PcieError;
use crate::pmem::profile::PersistenceDomain;
use crate::pmem::trace::{PmEventKind, PmTrace};
use crate::pmr::PageStore;
use crate::trace::TraceMode;
use crate::wc::{WcLine, WriteCombiningBuffer, LINE};

/// One item that may or may not have persisted at the crash point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PmItem {
    /// One aligned 8-byte word of a cached store not yet certain.
    Word {
        /// Line of the word (PM offset).
        line: u64,
        /// Index of its store among the stores to the line since the
        /// cursor began.
        group: usize,
        /// Offset of the word in the persistent memory.
        addr: u64,
        /// The word's bytes.
        value: [u8; 8],
        /// Trace index of the store.
        seq: usize,
    },
    /// A write-combining line of non-temporal stores not yet certain.
    NtLine {
        /// The core that stored it.
        core: u8,
        /// Its bytes, address and valid-byte mask.
        line: WcLine,
        /// Trace index of its last store.
        seq: usize,
    },
}

impl PmItem {
    /// The line it writes (a PM offset, 64-byte aligned): every item
    /// writes within one line.
    pub fn line(&self) -> u64 {
        match self {
            PmItem::Word { line, .. } => *line,
            PmItem::NtLine { line, .. } => line.addr,
        }
    }

    fn seq(&self) -> usize {
        match self {
            PmItem::Word { seq, .. } | PmItem::NtLine { seq, .. } => *seq,
        }
    }
}

/// Everything that may or may not have persisted at a crash point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PmPending {
    /// The items, lines in address order, each line's words in store
    /// order, then each core's non-temporal lines.
    pub items: Vec<PmItem>,
}

/// One crash state: the pending items that persisted (sorted indices into
/// [`PmPending::items`], closed under rule M1).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PmChoice {
    /// Indices of the items that persisted.
    pub landed: Vec<usize>,
}

/// One cached store instruction to a line.
#[derive(Clone, Debug)]
struct Group {
    seq: usize,
    addr: u64,
    data: Vec<u8>,
}

/// A non-temporal line with the trace index of its last store.
#[derive(Clone, Debug)]
struct NtRec {
    seq: usize,
    line: WcLine,
}

/// The history of one line since the cursor began (or its last fold).
#[derive(Clone, Debug, Default)]
struct LineState {
    /// Groups folded into the base image (absolute index of `groups[0]`).
    folded: usize,
    groups: Vec<Group>,
    /// Absolute number of groups certainly persisted (a prefix).
    durable: usize,
    /// Non-temporal lines to this line, certain, not yet folded.
    certain_nt: Vec<NtRec>,
}

impl LineState {
    fn total(&self) -> usize {
        self.folded + self.groups.len()
    }
}

/// A flush not yet completed.
#[derive(Clone, Copy, Debug)]
struct PendingFlush {
    core: u8,
    line: u64,
    /// Absolute number of the line's groups it covers.
    upto: usize,
    /// `clflush` (completed by the core's next write); else `clflushopt`
    /// or `clwb` (completed by its next fence).
    strong: bool,
}

/// One core's non-temporal lines, replayed with the running core's buffer
/// type.
#[derive(Clone, Debug)]
struct CoreNt {
    buffer: WriteCombiningBuffer,
    /// Trace index of the last store into each buffered line, by the
    /// line's allocation number.
    last_store: BTreeMap<u64, usize>,
    /// Lines that left the buffer, not yet fenced.
    left: Vec<NtRec>,
}

/// Walks a [`PmTrace`] once, keeping the certain image and the pending
/// items after each entry.
#[derive(Clone, Debug)]
pub struct PmemCursor<'t> {
    trace: &'t PmTrace,
    domain: PersistenceDomain,
    base: PageStore,
    /// Entries applied so far.
    pos: usize,
    /// Every line stored to since the cursor began (a folded line keeps
    /// its group count: pending flushes name groups by absolute index).
    lines: BTreeMap<u64, LineState>,
    /// The lines of `lines` holding groups or non-temporal lines not
    /// folded yet: the only ones a state's items and certain image come
    /// from (a run touches many lines, few of them at once).
    active: BTreeSet<u64>,
    cores: Vec<CoreNt>,
    flushes: Vec<PendingFlush>,
    wc_buffers: usize,
}

impl<'t> PmemCursor<'t> {
    /// A cursor before the first entry of `trace`, over `base` (the
    /// persistent memory's content when the trace began), for the
    /// persistence `domain` the run had, with `wc_buffers` write-combining
    /// buffers per core (the CPU profile's). The trace must be recorded in
    /// [`TraceMode::Full`].
    pub fn new(
        trace: &'t PmTrace,
        base: PageStore,
        domain: PersistenceDomain,
        wc_buffers: usize,
    ) -> Result<Self, PcieError> {
        if trace.mode() != TraceMode::Full && !trace.is_empty() {
            return Err(PcieError::TraceDetail("store payloads (TraceMode::Full)"));
        }
        Ok(PmemCursor {
            trace,
            domain,
            base,
            pos: 0,
            lines: BTreeMap::new(),
            active: BTreeSet::new(),
            cores: Vec::new(),
            flushes: Vec::new(),
            wc_buffers,
        })
    }

    /// Entries in the trace.
    pub fn len(&self) -> usize {
        self.trace.entries().len()
    }

    /// True if the trace has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries applied so far (the crash point is after entry
    /// `position() - 1`).
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Moves the crash point to just after entry `k` (never backwards).
    pub fn advance_past(&mut self, k: usize) -> Result<(), PcieError> {
        if k >= self.len() {
            return Err(PcieError::CrashPointOutOfRange {
                point: k as u64,
                len: self.len() as u64,
            });
        }
        while self.pos <= k {
            self.apply(self.pos);
            self.pos += 1;
        }
        Ok(())
    }

    fn core(&mut self, core: usize) -> &mut CoreNt {
        if self.cores.len() <= core {
            let n = self.wc_buffers;
            self.cores.resize_with(core + 1, || CoreNt {
                buffer: WriteCombiningBuffer::new(n),
                last_store: BTreeMap::new(),
                left: Vec::new(),
            });
        }
        &mut self.cores[core]
    }

    /// Completes the core's pending flushes: only `clflush`es (`strong`),
    /// or all of them (a fence).
    fn complete_flushes(&mut self, core: u8, strong_only: bool, touched: &mut Vec<u64>) {
        let lines = &mut self.lines;
        self.flushes.retain(|f| {
            if f.core != core || (strong_only && !f.strong) {
                return true;
            }
            if let Some(ls) = lines.get_mut(&f.line) {
                ls.durable = ls.durable.max(f.upto);
            }
            touched.push(f.line);
            false
        });
    }

    /// The core's buffered line at `line`, if any, leaves (still pending).
    fn send_line(&mut self, core: usize, line: u64, at: usize) {
        let c = self.core(core);
        if let Some(l) = c.buffer.take_line(line) {
            let seq = c.last_store.remove(&l.seq).unwrap_or(at);
            c.left.push(NtRec { seq, line: l });
        }
    }

    fn apply(&mut self, i: usize) {
        let trace = self.trace;
        let e = &trace.entries()[i];
        let core = e.source;
        let line = e.addr & !(LINE as u64 - 1);
        let mut touched = vec![line];
        match e.kind {
            PmEventKind::Store => {
                self.complete_flushes(core, true, &mut touched);
                self.send_line(core as usize, line, i);
                let eadr = self.domain == PersistenceDomain::Eadr;
                self.active.insert(line);
                let ls = self.lines.entry(line).or_default();
                ls.groups.push(Group {
                    seq: i,
                    addr: e.addr,
                    data: trace.payload(e).to_vec(),
                });
                if eadr {
                    ls.durable = ls.total();
                }
            }
            PmEventKind::NtStore => {
                self.complete_flushes(core, true, &mut touched);
                if let Some(ls) = self.lines.get_mut(&line) {
                    ls.durable = ls.total();
                }
                let data = trace.payload(e);
                let c = self.core(core as usize);
                let mut out = Vec::new();
                c.buffer.store(e.addr, data, e.purpose, 0, &mut out);
                for l in out {
                    let last = c.last_store.remove(&l.seq);
                    let seq = if l.addr == line { i } else { last.unwrap_or(i) };
                    touched.push(l.addr);
                    c.left.push(NtRec { seq, line: l });
                }
                if let Some(l) = c.buffer.lines().iter().find(|l| l.addr == line) {
                    c.last_store.insert(l.seq, i);
                }
            }
            PmEventKind::Clflush | PmEventKind::Clflushopt | PmEventKind::Clwb => {
                let strong = e.kind == PmEventKind::Clflush;
                if strong {
                    self.complete_flushes(core, true, &mut touched);
                }
                self.send_line(core as usize, line, i);
                let upto = self.lines.get(&line).map_or(0, LineState::total);
                self.flushes.push(PendingFlush {
                    core,
                    line,
                    upto,
                    strong,
                });
            }
            PmEventKind::Sfence | PmEventKind::Mfence => {
                self.complete_flushes(core, false, &mut touched);
                let c = self.core(core as usize);
                let mut certain = std::mem::take(&mut c.left);
                while let Some(l) = c.buffer.pop_oldest() {
                    let seq = c.last_store.remove(&l.seq).unwrap_or(i);
                    certain.push(NtRec { seq, line: l });
                }
                for r in certain {
                    touched.push(r.line.addr);
                    self.active.insert(r.line.addr);
                    self.lines.entry(r.line.addr).or_default().certain_nt.push(r);
                }
            }
            PmEventKind::Writeback | PmEventKind::NtLine => {}
        }
        touched.sort_unstable();
        touched.dedup();
        for l in touched {
            self.fold(l);
        }
    }

    /// True if some core's non-temporal line to `line` is pending.
    fn nt_pending(&self, line: u64) -> bool {
        self.cores.iter().any(|c| {
            c.buffer.lines().iter().any(|l| l.addr == line) || c.left.iter().any(|r| r.line.addr == line)
        })
    }

    /// Folds a line with nothing pending into the base image.
    fn fold(&mut self, line: u64) {
        if self.nt_pending(line) {
            return;
        }
        let Some(ls) = self.lines.get_mut(&line) else {
            return;
        };
        if ls.durable < ls.total() {
            return;
        }
        let mut writes: Vec<(usize, u64, &[u8], u64)> = Vec::new();
        for g in &ls.groups {
            writes.push((g.seq, g.addr, &g.data, u64::MAX));
        }
        for r in &ls.certain_nt {
            writes.push((r.seq, r.line.addr, &r.line.data, r.line.mask));
        }
        writes.sort_by_key(|w| w.0);
        for (_, addr, data, mask) in writes {
            self.base.write_masked(addr, data, mask);
        }
        ls.folded = ls.total();
        ls.groups.clear();
        ls.certain_nt.clear();
        self.active.remove(&line);
    }

    /// The lines with groups or non-temporal lines not folded, in address
    /// order (every other line contributes nothing to a state).
    fn active_lines(&self) -> impl Iterator<Item = (u64, &LineState)> + '_ {
        self.active
            .iter()
            .filter_map(|&l| self.lines.get(&l).map(|ls| (l, ls)))
    }

    /// The items that may or may not have persisted at this point.
    pub fn pending(&self) -> PmPending {
        let mut items = Vec::new();
        for (line, ls) in self.active_lines() {
            for g in ls.durable..ls.total() {
                let grp = &ls.groups[g - ls.folded];
                for (w, word) in grp.data.chunks_exact(8).enumerate() {
                    let mut value = [0u8; 8];
                    value.copy_from_slice(word);
                    items.push(PmItem::Word {
                        line,
                        group: g,
                        addr: grp.addr + 8 * w as u64,
                        value,
                        seq: grp.seq,
                    });
                }
            }
        }
        for (c, core) in self.cores.iter().enumerate() {
            for l in core.buffer.lines() {
                items.push(PmItem::NtLine {
                    core: c as u8,
                    line: l.clone(),
                    seq: core.last_store.get(&l.seq).copied().unwrap_or(0),
                });
            }
            for r in &core.left {
                items.push(PmItem::NtLine {
                    core: c as u8,
                    line: r.line.clone(),
                    seq: r.seq,
                });
            }
        }
        PmPending { items }
    }

    /// Closes a set of items (sorted, distinct indices) under rule M1: a
    /// word of a line's store `j` implies every word of the line's pending
    /// stores before `j`. The result is sorted.
    fn close(pending: &PmPending, set: &[usize]) -> Vec<usize> {
        if set.len() == pending.items.len() {
            return set.to_vec(); // everything landed: closed already
        }
        let mut top: BTreeMap<u64, usize> = BTreeMap::new();
        for &i in set {
            if let Some(PmItem::Word { line, group, .. }) = pending.items.get(i) {
                let t = top.entry(*line).or_insert(*group);
                *t = (*t).max(*group);
            }
        }
        if top.is_empty() {
            return set.to_vec();
        }
        let mut out = Vec::with_capacity(set.len());
        let mut chosen = set.iter().copied().peekable();
        for (i, it) in pending.items.iter().enumerate() {
            let landed = chosen.next_if_eq(&i).is_some();
            let implied = matches!(it, PmItem::Word { line, group, .. }
                if top.get(line).is_some_and(|t| group < t));
            if landed || implied {
                out.push(i);
            }
        }
        out.extend(chosen);
        out
    }

    /// The crash states at this point: every subset of the pending items
    /// (exhaustive up to `2^bound` subsets, then sampled with `seed`:
    /// [`crate::subsets::subsets`]), each closed under rule M1, without
    /// duplicates; and how many subsets were left out.
    pub fn choices(&self, bound: u32, seed: u64) -> (Vec<PmChoice>, u64) {
        self.choices_of(&self.pending(), bound, seed)
    }

    /// [`PmemCursor::choices`] of `pending`, this point's
    /// [`PmemCursor::pending`] (computed once by a caller that needs it
    /// too).
    pub(crate) fn choices_of(&self, pending: &PmPending, bound: u32, seed: u64) -> (Vec<PmChoice>, u64) {
        let (subs, left) = crate::subsets::subsets(pending.items.len(), bound, seed);
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        for s in subs {
            let landed = Self::close(pending, &s);
            if !seen.contains(&landed) {
                seen.insert(landed.clone());
                out.push(PmChoice { landed });
            }
        }
        (out, left)
    }

    /// Checks that `choice` names pending items (sorted, distinct) and is
    /// closed under rule M1.
    pub fn validate(&self, pending: &PmPending, choice: &PmChoice) -> Result<(), PcieError> {
        if !choice.landed.windows(2).all(|w| w[0] < w[1]) {
            return Err(PcieError::BadChoice("items not sorted and distinct"));
        }
        if choice.landed.last().is_some_and(|&i| i >= pending.items.len()) {
            return Err(PcieError::BadChoice("no such pending item"));
        }
        if Self::close(pending, &choice.landed) != choice.landed {
            return Err(PcieError::BadChoice(
                "a word persisted without the line's earlier stores (rule M1)",
            ));
        }
        Ok(())
    }

    /// The persistent memory's content in the crash state `choice` (of
    /// [`PmemCursor::pending`] at this point).
    pub fn materialize(&self, choice: &PmChoice) -> Result<PageStore, PcieError> {
        let pending = self.pending();
        self.validate(&pending, choice)?;
        Ok(self.materialize_of(&pending, choice))
    }

    /// [`PmemCursor::materialize`] of a choice [`PmemCursor::choices_of`]
    /// made from `pending` (this point's; valid by construction, so not
    /// validated again).
    pub(crate) fn materialize_of(&self, pending: &PmPending, choice: &PmChoice) -> PageStore {
        self.landed_over(&self.certain_of(), pending, choice)
    }

    /// The certain writes of line state `ls` (the groups certainly
    /// persisted, then the certain non-temporal lines), as
    /// `(seq, addr, bytes, mask)`.
    fn certain_writes<'a>(ls: &'a LineState, out: &mut Vec<(usize, u64, &'a [u8], u64)>) {
        for g in ls.folded..ls.durable {
            let grp = &ls.groups[g - ls.folded];
            out.push((grp.seq, grp.addr, &grp.data, u64::MAX));
        }
        for r in &ls.certain_nt {
            out.push((r.seq, r.line.addr, &r.line.data, r.line.mask));
        }
    }

    /// The content every crash state at this point has in common: the
    /// base with every certain write applied in trace order.
    pub fn certain_of(&self) -> PageStore {
        let mut writes = Vec::new();
        for (_, ls) in self.active_lines() {
            Self::certain_writes(ls, &mut writes);
        }
        writes.sort_by_key(|w| w.0);
        let mut img = self.base.clone();
        for (_, addr, data, mask) in writes {
            img.write_masked(addr, data, mask);
        }
        img
    }

    /// The crash state `choice` of `pending` built over `certain`, this
    /// point's [`PmemCursor::certain_of`] (made once for all the point's
    /// states, its pages shared with each).
    ///
    /// Every write lies within one line. The state is the base with the
    /// certain writes and the landed items applied in trace order; on a
    /// line no landed item touches, that is what `certain` holds. On a
    /// line one does, the writes to the line (the line's certain writes
    /// and its landed items) are applied again in trace order over
    /// `certain`: each byte ends with the last of them that covers it, as
    /// when everything is applied over the base, and a byte none covers
    /// keeps the base's value, which `certain` holds there. Writes with
    /// equal trace index keep the order they have when everything is
    /// applied (certain writes first).
    pub(crate) fn landed_over(
        &self,
        certain: &PageStore,
        pending: &PmPending,
        choice: &PmChoice,
    ) -> PageStore {
        let mut img = certain.clone();
        if choice.landed.is_empty() {
            return img;
        }
        let landed: Vec<&PmItem> = choice
            .landed
            .iter()
            .filter_map(|&i| pending.items.get(i))
            .collect();
        let mut touched: Vec<u64> = landed
            .iter()
            .map(|item| match item {
                PmItem::Word { line, .. } => *line,
                PmItem::NtLine { line, .. } => line.addr,
            })
            .collect();
        touched.sort_unstable();
        touched.dedup();
        let mut writes: Vec<(usize, u64, &[u8], u64)> = Vec::new();
        for ls in touched.iter().filter_map(|l| self.lines.get(l)) {
            Self::certain_writes(ls, &mut writes);
        }
        for item in landed {
            match item {
                PmItem::Word { addr, value, seq, .. } => writes.push((*seq, *addr, value, u64::MAX)),
                PmItem::NtLine { line, seq, .. } => writes.push((*seq, line.addr, &line.data, line.mask)),
            }
        }
        writes.sort_by_key(|w| w.0);
        for (_, addr, data, mask) in writes {
            img.write_masked(addr, data, mask);
        }
        img
    }

    /// Per line with an item in `pending` (this point's), how many certain
    /// writes `PmemCursor::landed_over` applies again on it (stores, then
    /// non-temporal lines). A line with a pending item is never folded, so
    /// its certain writes only grow while the item is pending: two points
    /// with the same pending items, certain content and counts build every
    /// state alike.
    pub fn certain_counts(&self, pending: &PmPending) -> Vec<(u64, usize, usize)> {
        let mut lines: Vec<u64> = pending.items.iter().map(PmItem::line).collect();
        lines.sort_unstable();
        lines.dedup();
        lines
            .into_iter()
            .map(|l| {
                self.lines
                    .get(&l)
                    .map_or((l, 0, 0), |ls| (l, ls.durable - ls.folded, ls.certain_nt.len()))
            })
            .collect()
    }

    /// The bytes of line `line` (a PM offset, 64-byte aligned) in a state
    /// whose landed items on that line are `landed` (indices into
    /// `pending`, this point's; every one on that line), over `certain`
    /// (this point's [`PmemCursor::certain_of`]): as
    /// [`PmemCursor::landed_over`] builds it, on that line alone.
    pub(crate) fn line_bytes(
        &self,
        certain: &PageStore,
        pending: &PmPending,
        line: u64,
        landed: &[usize],
    ) -> [u8; LINE] {
        let mut buf = [0u8; LINE];
        certain.read(line, &mut buf);
        if landed.is_empty() {
            return buf;
        }
        let mut writes: Vec<(usize, u64, &[u8], u64)> = Vec::new();
        if let Some(ls) = self.lines.get(&line) {
            Self::certain_writes(ls, &mut writes);
        }
        for item in landed.iter().filter_map(|&i| pending.items.get(i)) {
            match item {
                PmItem::Word { addr, value, seq, .. } => writes.push((*seq, *addr, value, u64::MAX)),
                PmItem::NtLine { line, seq, .. } => writes.push((*seq, line.addr, &line.data, line.mask)),
            }
        }
        writes.sort_by_key(|w| w.0);
        for (_, addr, data, mask) in writes {
            let at = (addr - line) as usize;
            for (i, b) in data.iter().take(LINE).enumerate() {
                if mask >> i & 1 == 1 {
                    buf[at + i] = *b;
                }
            }
        }
        buf
    }

    /// The content every crash state at this point has in common: only
    /// what is certain.
    pub fn certain_image(&self) -> Result<PageStore, PcieError> {
        self.materialize(&PmChoice::default())
    }

    /// The trace index of every pending item, in item order (for reports).
    pub fn pending_seqs(&self) -> Vec<usize> {
        self.pending().items.iter().map(PmItem::seq).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pmem::trace::PmEntry;
    use crate::time::SimTime;
    use crate::trace::{Purpose, NO_PAYLOAD};

    fn trace(ops: &[(PmEventKind, u8, u64, &[u8])]) -> PmTrace {
        let mut t = PmTrace::new(TraceMode::Full);
        for (i, (kind, core, addr, data)) in ops.iter().enumerate() {
            t.record(
                PmEntry {
                    time: SimTime(i as u64),
                    bus_seq: 0,
                    addr: *addr,
                    payload: NO_PAYLOAD,
                    len: data.len() as u32,
                    kind: *kind,
                    purpose: Purpose::UNTAGGED,
                    source: *core,
                },
                data,
            );
        }
        t
    }

    fn cursor(t: &PmTrace, domain: PersistenceDomain) -> PmemCursor<'_> {
        PmemCursor::new(t, PageStore::zeroed(4096), domain, 10).unwrap()
    }

    fn word(img: &PageStore, addr: u64) -> u64 {
        let mut b = [0u8; 8];
        img.read(addr, &mut b);
        u64::from_le_bytes(b)
    }

    use PmEventKind::*;
    const ONE: &[u8] = &[1, 0, 0, 0, 0, 0, 0, 0];
    const TWO: &[u8] = &[2, 0, 0, 0, 0, 0, 0, 0];

    #[test]
    fn a_line_with_nothing_pending_is_folded_into_the_base() {
        let t = trace(&[(Store, 0, 64, ONE), (Clwb, 0, 64, &[]), (Sfence, 0, 0, &[])]);
        let mut c = cursor(&t, PersistenceDomain::Adr);
        c.advance_past(1).unwrap();
        assert_eq!(c.pending().items.len(), 1, "clwb alone is not complete");
        c.advance_past(2).unwrap();
        assert!(c.pending().items.is_empty());
        assert!(c.lines[&64].groups.is_empty(), "folded");
        assert_eq!(word(&c.base, 64), 1);
        assert_eq!(word(&c.certain_image().unwrap(), 64), 1);
    }

    #[test]
    fn a_clflush_completes_at_its_own_cores_next_write_only() {
        let t = trace(&[
            (Store, 0, 0, ONE),
            (Clflush, 0, 0, &[]),
            (Store, 1, 128, TWO),
            (Store, 0, 256, TWO),
        ]);
        let mut c = cursor(&t, PersistenceDomain::Adr);
        c.advance_past(2).unwrap();
        assert_eq!(
            word(&c.certain_image().unwrap(), 0),
            0,
            "another core's store does not complete it"
        );
        c.advance_past(3).unwrap();
        assert_eq!(word(&c.certain_image().unwrap(), 0), 1);
    }

    #[test]
    fn non_temporal_lines_replay_the_cores_buffer_and_are_certain_at_its_fence() {
        let t = trace(&[
            (NtStore, 0, 0, &[7; 64]),
            (NtStore, 0, 64, ONE),
            (Sfence, 1, 0, &[]),
            (Sfence, 0, 0, &[]),
        ]);
        let mut c = cursor(&t, PersistenceDomain::Eadr);
        c.advance_past(2).unwrap();
        let p = c.pending();
        assert_eq!(p.items.len(), 2, "a full line that left and a buffered one");
        assert!(p
            .items
            .iter()
            .all(|i| matches!(i, PmItem::NtLine { core: 0, .. })));
        assert_eq!(c.cores[0].buffer.lines().len(), 1);
        c.advance_past(3).unwrap();
        assert!(c.pending().items.is_empty());
        let img = c.certain_image().unwrap();
        assert_eq!((word(&img, 0), word(&img, 64)), (0x0707_0707_0707_0707, 1));
    }

    #[test]
    fn a_non_temporal_store_makes_the_lines_cached_stores_certain() {
        let t = trace(&[(Store, 0, 0, ONE), (NtStore, 1, 8, TWO)]);
        let mut c = cursor(&t, PersistenceDomain::Adr);
        c.advance_past(0).unwrap();
        assert_eq!(c.pending().items.len(), 1);
        c.advance_past(1).unwrap();
        let p = c.pending();
        assert_eq!(p.items.len(), 1);
        assert!(matches!(p.items[0], PmItem::NtLine { core: 1, .. }));
        assert_eq!(word(&c.certain_image().unwrap(), 0), 1);
    }

    #[test]
    fn a_trace_without_payloads_is_refused() {
        let mut t = PmTrace::new(TraceMode::Events);
        t.record(
            PmEntry {
                time: SimTime(0),
                bus_seq: 0,
                addr: 0,
                payload: NO_PAYLOAD,
                len: 8,
                kind: Store,
                purpose: Purpose::UNTAGGED,
                source: 0,
            },
            ONE,
        );
        assert!(matches!(
            PmemCursor::new(&t, PageStore::zeroed(64), PersistenceDomain::Adr, 10),
            Err(PcieError::TraceDetail(_))
        ));
    }

    /// Every state over the whole trace applied to the base at once, as
    /// the cursor built states before the per-point certain image.
    fn materialize_whole(c: &PmemCursor<'_>, pending: &PmPending, choice: &PmChoice) -> PageStore {
        let mut writes = Vec::new();
        for ls in c.lines.values() {
            PmemCursor::certain_writes(ls, &mut writes);
        }
        for item in choice.landed.iter().filter_map(|&i| pending.items.get(i)) {
            match item {
                PmItem::Word { addr, value, seq, .. } => writes.push((*seq, *addr, &value[..], u64::MAX)),
                PmItem::NtLine { line, seq, .. } => writes.push((*seq, line.addr, &line.data[..], line.mask)),
            }
        }
        writes.sort_by_key(|w| w.0);
        let mut img = c.base.clone();
        for (_, addr, data, mask) in writes {
            img.write_masked(addr, data, mask);
        }
        img
    }

    /// Rule M1's closure as sets, the way the cursor computed it before
    /// it worked on sorted vectors.
    fn close_as_sets(pending: &PmPending, set: &BTreeSet<usize>) -> BTreeSet<usize> {
        let mut top: BTreeMap<u64, usize> = BTreeMap::new();
        for &i in set {
            if let Some(PmItem::Word { line, group, .. }) = pending.items.get(i) {
                let t = top.entry(*line).or_insert(*group);
                *t = (*t).max(*group);
            }
        }
        let mut out = set.clone();
        for (i, it) in pending.items.iter().enumerate() {
            if let PmItem::Word { line, group, .. } = it {
                if top.get(line).is_some_and(|t| group < t) {
                    out.insert(i);
                }
            }
        }
        out
    }

    #[test]
    fn states_over_the_certain_image_equal_states_over_the_base() {
        // Stores, wide stores, non-temporal stores, flushes and fences of
        // two cores over a few lines, both domains: at every point every
        // state built over the point's certain image is the one built by
        // applying everything to the base, byte for byte and by hash.
        let mut x = 11u64;
        let mut next = move |n: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        let mut ops: Vec<(PmEventKind, u8, u64, Vec<u8>)> = Vec::new();
        for i in 0..400u64 {
            let core = next(2) as u8;
            let line = next(6) * 64 + next(2) * 4096;
            let word = next(8) * 8;
            let v = (i as u8).wrapping_add(1);
            let op = match next(10) {
                0..=3 => (Store, core, line + word, vec![v; 8]),
                4 => (Store, core, line, vec![v; 64]),
                5 => (NtStore, core, line + word, vec![v; 8]),
                6 => (Clwb, core, line, Vec::new()),
                7 => (Clflushopt, core, line, Vec::new()),
                8 => (Clflush, core, line, Vec::new()),
                _ => (Sfence, core, 0, Vec::new()),
            };
            ops.push(op);
        }
        let ops: Vec<(PmEventKind, u8, u64, &[u8])> =
            ops.iter().map(|(k, c, a, d)| (*k, *c, *a, &d[..])).collect();
        let t = trace(&ops);
        for domain in [PersistenceDomain::Adr, PersistenceDomain::Eadr] {
            let mut c = PmemCursor::new(&t, PageStore::zeroed(8192), domain, 4).unwrap();
            let mut states = 0;
            for k in 0..t.entries().len() {
                c.advance_past(k).unwrap();
                let pending = c.pending();
                let (choices, _) = c.choices_of(&pending, 4, k as u64);
                let (subs, _) = crate::subsets::subsets(pending.items.len(), 4, k as u64);
                for sub in &subs {
                    let as_set: BTreeSet<usize> = sub.iter().copied().collect();
                    let want: Vec<usize> = close_as_sets(&pending, &as_set).into_iter().collect();
                    assert_eq!(PmemCursor::close(&pending, sub), want);
                }
                let mut certain = c.certain_of();
                certain.content_hash();
                for choice in &choices {
                    let mut fast = c.landed_over(&certain, &pending, choice);
                    let mut whole = materialize_whole(&c, &pending, choice);
                    assert_eq!(fast, whole, "point {k}, {choice:?}");
                    assert_eq!(fast.content_hash(), whole.content_hash());
                    assert_eq!(c.materialize(choice).unwrap(), whole);
                    states += 1;
                }
            }
            assert!(states > 1000, "{states} states");
        }
    }
}
