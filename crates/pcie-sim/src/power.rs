//! Power failure: which PMR states a crash after trace entry `k` may leave.
//!
//! The envelope (`docs/persistence.md`, rules W and P), applied to a
//! recorded trace, whatever this run's timing did:
//!
//! - **Posted writes** (uncached stores to a PMR) arrive in the order they
//!   were sent (PCIe 3.0 2.4.1, Table 2-39): of those still on the way, any
//!   prefix per link may have landed; one is persistent once it took effect.
//! - **Write-combining lines** (Intel SDM vol. 3A 11.3.1) may leave their
//!   core in any order, at any time from their last store until the core's
//!   next drain (a fence, or an uncached access, recorded as an
//!   [`EventKind::Fence`] marker), whether the running core sent them at
//!   once (a full line, an eviction) or kept them. So a line is a pending
//!   item with a *send window*: it cannot have left before its last store
//!   (`after`), and it had left by its core's next marker (`ordered_at`, if
//!   there was one yet).
//! - **Order between items** on one link: an item that landed implies
//!   every item whose window ends before its own window starts landed too
//!   (it was ahead on the link). For posted writes the window is a point.
//! - **Certain**: a posted write once it took effect; a line once a later
//!   host request on its link, sent after the line's marker, took effect
//!   (it was behind the line), or once the device (or a host read it
//!   served) read bytes of it after it took effect here ([`EventKind::PmrRead`]:
//!   whoever read them may have acted on them); and every item that must
//!   precede a certain one.
//! - Registers, doorbells, host DRAM and everything else are lost.
//!
//! Buffered lines are replayed with the core's own
//! [`WriteCombiningBuffer`] (one per core), driven by the recorded
//! `WcStore`s, so the line, mask and eviction rules exist once; a line the
//! trace shows leave is rebuilt from its TLPs and keeps its window.
//!
//! Deviations (documented in `docs/persistence.md`): a line is one unit
//! (the stores that combined into it land together), and two cores' lines
//! to the same bytes that the envelope leaves unordered land in store
//! order, not in both orders.
//!
//! [`CrashCursor`] walks the trace once, keeping the persistent image and
//! the pending items up to date, so a whole exploration costs one pass plus
//! the states it materializes. A materialized state shares every page it
//! does not change with the cursor's image (copy-on-write), so building one
//! costs the pages its pending writes touch, not the image size.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, VecDeque};

use crate::error::PcieError;
use crate::machine::BusLayout;
use crate::pmr::PageStore;
use crate::time::SimTime;
use crate::trace::{BusTrace, EventKind, TraceMode, FLAG_LINE_START, FLAG_PMR, FLAG_UR, FLAG_WC};
use crate::wc::{WcLine, WriteCombiningBuffer, LINE};

/// A write-combining line that may or may not have landed at the crash
/// point: still in its core's buffers, or sent without an order yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingLine {
    /// The core that stored it.
    pub core: u8,
    /// The device whose PMR it targets.
    pub port: u8,
    /// The line's bytes, address and valid-byte mask.
    pub line: WcLine,
    /// Trace index of the last store into the line: it cannot have left
    /// the core before.
    pub after: usize,
    /// Trace index of the core's [`EventKind::Fence`] marker that ordered
    /// it: it had left by then. `None`: not ordered yet.
    pub ordered_at: Option<usize>,
}

/// Everything that may or may not have landed at a crash point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    /// Per port, the trace indices of posted PMR writes on the way, oldest
    /// first.
    pub in_flight: Vec<Vec<usize>>,
    /// Write-combining lines, each with its send window.
    pub lines: Vec<PendingLine>,
}

/// One crash state: how far each link's in-flight writes got, and which
/// pending lines landed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CrashChoice {
    /// Per port: how many of its in-flight writes landed (a prefix).
    pub in_flight_landed: Vec<usize>,
    /// Indices into [`Pending::lines`] of the lines that landed.
    pub lines_landed: Vec<usize>,
}

/// A pending line's send window and identity, for the order rule.
#[derive(Clone, Copy, Debug)]
struct Window {
    after: usize,
    ordered_at: Option<usize>,
    core: u8,
    addr: u64,
}

impl Window {
    fn of(l: &PendingLine) -> Window {
        Window {
            after: l.after,
            ordered_at: l.ordered_at,
            core: l.core,
            addr: l.line.addr,
        }
    }

    /// True if this line is ahead of `other` on the link whenever `other`
    /// landed: its window ends before `other`'s starts, or it is an
    /// earlier line of the same core to the same address (one core's
    /// stores to one location are not reordered: Intel SDM vol. 3A 8.2.2,
    /// "writes by a single processor are observed in the same order").
    fn precedes(&self, other: &Window) -> bool {
        self.ordered_at.is_some_and(|d| d < other.after)
            || (self.core == other.core && self.addr == other.addr && self.after < other.after)
    }
}

/// Closes a set of landed items under the order rule on one link: every
/// line ahead of a landed item landed too. `bound` is a trace index before
/// which every posted write of the link landed (and so every line ordered
/// before it); `set` holds indices into `lines`. Returns the closed bound
/// (posted writes before it must have landed) and grows `set`.
fn close(lines: &[Window], mut bound: usize, set: &mut BTreeSet<usize>) -> usize {
    loop {
        bound = set.iter().map(|&i| lines[i].after).fold(bound, usize::max);
        let before = set.len();
        for (i, w) in lines.iter().enumerate() {
            if !set.contains(&i)
                && (w.ordered_at.is_some_and(|d| d < bound) || set.iter().any(|&j| w.precedes(&lines[j])))
            {
                set.insert(i);
            }
        }
        if set.len() == before {
            return bound;
        }
    }
}

/// A line the trace showed leave, not yet certain to have landed.
#[derive(Clone, Debug)]
struct SentLine {
    pending: PendingLine,
    /// PMR offset of the line (its port is in `pending`).
    offset: u64,
    /// When its last TLP took effect in this run.
    effect: SimTime,
}

/// One core's write-combining state, replayed from a trace.
#[derive(Clone, Debug)]
struct CoreLines {
    /// The lines still buffered: the running core's buffer type, driven by
    /// the recorded stores.
    buffer: WriteCombiningBuffer,
    /// Trace index of the last store into each buffered line, by the
    /// line's allocation number.
    last_store: BTreeMap<u64, usize>,
    /// Lines the buffer let go of (filled, or evicted for room) whose first
    /// TLP is not in the trace yet, in the order they will be sent, with
    /// their last store.
    leaving: Vec<(WcLine, usize)>,
}

impl CoreLines {
    fn new(buffers: Option<usize>) -> Self {
        CoreLines {
            buffer: buffers.map_or_else(WriteCombiningBuffer::unbounded, WriteCombiningBuffer::new),
            last_store: BTreeMap::new(),
            leaving: Vec::new(),
        }
    }

    /// Replays store `i` of `data` at `addr`.
    fn store(&mut self, i: usize, addr: u64, data: &[u8], e: &crate::trace::TraceEntry) {
        let mut out = Vec::new();
        self.buffer.store(addr, data, e.purpose, e.attr, &mut out);
        let end = addr + data.len() as u64;
        let touched = |l: &WcLine| l.addr < end && l.addr + LINE as u64 > addr;
        for l in out {
            let last = self.last_store.remove(&l.seq);
            let after = if touched(&l) { i } else { last.unwrap_or(i) };
            self.leaving.push((l, after));
        }
        for l in self.buffer.lines().iter().filter(|l| touched(l)) {
            self.last_store.insert(l.seq, i);
        }
    }

    /// The first TLP of the line holding `addr` is in the trace: the line
    /// left the buffer (or had left it, filled or evicted for room).
    /// Returns its last store; 0 for a line stored before the trace began.
    fn depart(&mut self, addr: u64) -> usize {
        let line_addr = addr & !(LINE as u64 - 1);
        if !self.leaving.is_empty() {
            // The running core sends the lines its buffers let go of in
            // order, before any drain takes another from the buffers
            // (`Core::drain_wc`): the first TLP is the first leaving line's.
            debug_assert_eq!(
                self.leaving[0].0.addr, line_addr,
                "a core's lines leave in the order they left its buffers"
            );
            if let Some(i) = self.leaving.iter().position(|(l, _)| l.addr == line_addr) {
                return self.leaving.remove(i).1;
            }
        }
        match self.buffer.take_line(line_addr) {
            Some(l) => self.last_store.remove(&l.seq).unwrap_or(0),
            None => 0,
        }
    }

    /// The lines not sent yet, in the order they were allocated.
    fn unsent(&self, core: u8, layout: &BusLayout) -> Vec<PendingLine> {
        let mut lines: Vec<(&WcLine, usize)> = self
            .leaving
            .iter()
            .map(|(l, a)| (l, *a))
            .chain(
                self.buffer
                    .lines()
                    .iter()
                    .map(|l| (l, self.last_store.get(&l.seq).copied().unwrap_or(0))),
            )
            .collect();
        lines.sort_by_key(|(l, _)| l.seq);
        lines
            .into_iter()
            .filter_map(|(l, after)| {
                let first = l.addr + u64::from(l.mask.trailing_zeros());
                let (port, _, _) = layout.decode(first, 1)?;
                Some(PendingLine {
                    core,
                    port,
                    line: l.clone(),
                    after,
                    ordered_at: None,
                })
            })
            .collect()
    }
}

/// Walks a recorded trace and yields the persistent PMR states after any
/// entry.
#[derive(Debug)]
pub struct CrashCursor<'t> {
    trace: &'t BusTrace,
    layout: BusLayout,
    applied: usize,
    time: SimTime,
    pmr: Vec<PageStore>,
    /// Per port: posted (uncached) PMR writes on the way, oldest first.
    in_flight: Vec<VecDeque<usize>>,
    /// Per port: host requests (writes and reads) not yet in effect, by
    /// effect time, and the newest one in effect: proofs that the lines
    /// ordered before them arrived.
    requests: Vec<BinaryHeap<Reverse<(SimTime, usize)>>>,
    proven: Vec<Option<usize>>,
    /// Per core: its replayed write-combining buffers.
    wc: Vec<CoreLines>,
    /// Lines the trace showed leave that are not certain yet, oldest first.
    sent: Vec<SentLine>,
    /// Line buffers per core (`None`: unbounded, see
    /// [`CrashCursor::with_wc_buffers`]).
    wc_buffers: Option<usize>,
    /// Bumped whenever the persistent images or the pending items change:
    /// two points with the same value have the same crash states.
    changes: u64,
}

impl<'t> CrashCursor<'t> {
    /// A cursor before the first entry of `trace` (recorded in `Full`
    /// mode), over the PMR images each device started with.
    pub fn new(
        trace: &'t BusTrace,
        layout: BusLayout,
        initial_pmr: Vec<PageStore>,
    ) -> Result<Self, PcieError> {
        if trace.mode() != TraceMode::Full {
            return Err(PcieError::TraceDetail("payloads (record in TraceMode::Full)"));
        }
        if initial_pmr.len() != layout.ports.len() {
            return Err(PcieError::BadChoice("one initial PMR image per port is required"));
        }
        let ports = layout.ports.len();
        Ok(CrashCursor {
            trace,
            layout,
            applied: 0,
            time: SimTime::ZERO,
            pmr: initial_pmr,
            in_flight: vec![VecDeque::new(); ports],
            requests: vec![BinaryHeap::new(); ports],
            proven: vec![None; ports],
            wc: Vec::new(),
            sent: Vec::new(),
            wc_buffers: None,
            changes: 0,
        })
    }

    /// Replays each core's write-combining buffers with `count` lines, as
    /// the machine's [`crate::CpuProfile::wc_buffers`], so a line evicted
    /// for room leaves the replayed buffer at the store that evicted it (and
    /// the replay checks, in debug builds, that the trace shows it leave).
    /// Only valid if the trace starts with every core's buffers empty.
    ///
    /// Without it the replayed buffers never run out: a line evicted for
    /// room leaves at its first TLP instead. Both give the same crash
    /// states (a line is pending with the same window either way); only
    /// [`CrashCursor::buffered`] differs in between.
    pub fn with_wc_buffers(mut self, count: usize) -> Self {
        self.wc_buffers = Some(count);
        self
    }

    /// The lines the replayed buffers of `core` hold at this point: the
    /// lines the running core held there. Lines that already left the
    /// buffer but whose TLPs are not in the trace yet are not included
    /// (they are in [`CrashCursor::pending`]).
    pub fn buffered(&self, core: usize) -> &[WcLine] {
        self.wc.get(core).map_or(&[], |c| c.buffer.lines())
    }

    /// Number of entries in the trace (crash points are `0..len`).
    pub fn len(&self) -> usize {
        self.trace.entries().len()
    }

    /// True if the trace has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Moves to "just after entry `k`". Points only move forward.
    pub fn advance_past(&mut self, k: usize) -> Result<(), PcieError> {
        let entries = self.trace.entries();
        if k >= entries.len() {
            return Err(PcieError::CrashPointOutOfRange {
                point: k as u64,
                len: entries.len() as u64,
            });
        }
        if k + 1 < self.applied {
            return Err(PcieError::BadChoice("crash points only move forward"));
        }
        while self.applied <= k {
            let i = self.applied;
            self.apply_entry(i);
            self.applied += 1;
        }
        self.time = entries[k].time;
        self.settle();
        Ok(())
    }

    /// A counter of changes to the persistent images and pending items.
    /// Equal at two points means equal crash states at both.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    fn core_lines(&mut self, core: usize) -> &mut CoreLines {
        if self.wc.len() <= core {
            let buffers = self.wc_buffers;
            self.wc.resize_with(core + 1, || CoreLines::new(buffers));
        }
        &mut self.wc[core]
    }

    fn apply_entry(&mut self, i: usize) {
        let trace = self.trace;
        let e = &trace.entries()[i];
        match e.kind {
            EventKind::WcStore => {
                if self.layout.decode(e.addr, e.len as u64).is_none() {
                    return;
                }
                let core = e.source as usize;
                let buffers = self.wc_buffers;
                let c = self.core_lines(core);
                // The core is occupied until the lines its previous store
                // let go of were sent: none may still be leaving.
                debug_assert!(
                    buffers.is_none() || c.leaving.is_empty(),
                    "entry {i}: core {core} stores while lines its buffer let go of were never sent: \
                     the replayed buffers disagree with the trace"
                );
                c.store(i, e.addr, trace.payload(e), e);
                self.changes += 1;
            }
            EventKind::MmioWrite | EventKind::MmioRead => {
                let Some((port, _, off)) = self.layout.decode(e.addr, u64::from(e.len)) else {
                    return;
                };
                if e.flags & FLAG_WC == 0 {
                    // Sent exactly here (an uncached access, not a line that
                    // could have left later): once in effect, it proves the
                    // lines ordered before it arrived.
                    self.requests[port as usize].push(Reverse((e.effect, i)));
                }
                if e.kind == EventKind::MmioRead || e.flags & FLAG_PMR == 0 {
                    return;
                }
                self.changes += 1;
                if e.flags & FLAG_WC == 0 {
                    if e.flags & FLAG_UR == 0 {
                        self.in_flight[port as usize].push_back(i);
                    }
                    return;
                }
                let line_addr = e.addr & !(LINE as u64 - 1);
                let core = e.source;
                if e.flags & FLAG_LINE_START != 0 {
                    let after = self.core_lines(core as usize).depart(e.addr);
                    if e.flags & FLAG_UR != 0 {
                        // Rejected by the device: it never lands.
                        return;
                    }
                    let line = WcLine {
                        addr: line_addr,
                        data: [0; LINE],
                        mask: 0,
                        purpose: e.purpose,
                        attr: e.attr,
                        seq: 0,
                    };
                    self.sent.push(SentLine {
                        pending: PendingLine {
                            core,
                            port,
                            line,
                            after,
                            ordered_at: None,
                        },
                        offset: off - (e.addr - line_addr),
                        effect: e.effect,
                    });
                }
                if e.flags & FLAG_UR != 0 {
                    return;
                }
                // A later run of the line (or its first): add its bytes.
                let Some(s) = self
                    .sent
                    .iter_mut()
                    .rev()
                    .find(|s| s.pending.core == core && s.pending.line.addr == line_addr)
                else {
                    return;
                };
                let at = (e.addr - line_addr) as usize;
                let data = trace.payload(e);
                s.pending.line.data[at..at + data.len()].copy_from_slice(data);
                for b in at..at + data.len() {
                    s.pending.line.mask |= 1 << b;
                }
                s.effect = s.effect.max(e.effect);
            }
            EventKind::Fence => {
                for s in &mut self.sent {
                    if s.pending.core == e.source && s.pending.ordered_at.is_none() {
                        s.pending.ordered_at = Some(i);
                        self.changes += 1;
                    }
                }
            }
            EventKind::PmrRead => {
                let port = e.source;
                let (lo, hi) = (e.addr, e.addr + u64::from(e.len));
                let seen: BTreeSet<usize> = self
                    .sent
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.pending.port == port && s.effect <= e.time && s.overlaps(lo, hi))
                    .map(|(j, _)| j)
                    .collect();
                if !seen.is_empty() {
                    self.make_certain(port as usize, 0, seen);
                }
            }
            _ => {}
        }
    }

    /// Makes certain, on `port`, the posted writes before trace index
    /// `bound` and the sent lines `lines` (indices into `self.sent`), with
    /// everything the order rule puts ahead of them, applied in an order
    /// the rule allows.
    fn make_certain(&mut self, port: usize, bound: usize, lines: BTreeSet<usize>) {
        let on_port: Vec<usize> = (0..self.sent.len())
            .filter(|&j| self.sent[j].pending.port as usize == port)
            .collect();
        let windows: Vec<Window> = on_port.iter().map(|&j| self.sent[j].window()).collect();
        let mut set: BTreeSet<usize> = on_port
            .iter()
            .enumerate()
            .filter(|(_, j)| lines.contains(j))
            .map(|(k, _)| k)
            .collect();
        let bound = close(&windows, bound, &mut set);
        let mut items: Vec<(usize, Item)> = Vec::new();
        while let Some(&i) = self.in_flight[port].front() {
            if i >= bound {
                break;
            }
            self.in_flight[port].pop_front();
            items.push((i, Item::Posted(i)));
        }
        let taken: BTreeSet<usize> = set.iter().map(|&k| on_port[k]).collect();
        if items.is_empty() && taken.is_empty() {
            return;
        }
        let mut kept = Vec::with_capacity(self.sent.len());
        for (j, s) in std::mem::take(&mut self.sent).into_iter().enumerate() {
            if taken.contains(&j) {
                items.push((s.pending.after, Item::Line(s.pending.line)));
            } else {
                kept.push(s);
            }
        }
        self.sent = kept;
        items.sort_by_key(|(at, _)| *at);
        for (_, item) in &items {
            match item {
                Item::Posted(i) => Self::apply_write(&self.layout, &mut self.pmr, self.trace, *i),
                Item::Line(l) => Self::apply_line(&self.layout, &mut self.pmr, l),
            }
        }
        self.changes += 1;
    }

    /// Makes certain what this point's time proves: posted writes that took
    /// effect (with what must precede them), and lines ordered before a
    /// host request that took effect.
    fn settle(&mut self) {
        let entries = self.trace.entries();
        for port in 0..self.in_flight.len() {
            while let Some(Reverse((effect, i))) = self.requests[port].peek().copied() {
                if effect > self.time {
                    break;
                }
                self.requests[port].pop();
                self.proven[port] = Some(self.proven[port].map_or(i, |p| p.max(i)));
            }
            let mut bound = self.proven[port].map_or(0, |p| p + 1);
            for &i in &self.in_flight[port] {
                if entries[i].effect > self.time {
                    break;
                }
                bound = bound.max(i + 1);
            }
            let due = self.in_flight[port].front().is_some_and(|&i| i < bound)
                || self.sent.iter().any(|s| {
                    s.pending.port as usize == port && s.pending.ordered_at.is_some_and(|d| d < bound)
                });
            if due {
                self.make_certain(port, bound, BTreeSet::new());
            }
        }
    }

    fn apply_write(layout: &BusLayout, pmr: &mut [PageStore], trace: &BusTrace, i: usize) {
        let e = &trace.entries()[i];
        if let Some((port, _, off)) = layout.decode(e.addr, e.len as u64) {
            pmr[port as usize].write(off, trace.payload(e));
        }
    }

    fn apply_line(layout: &BusLayout, pmr: &mut [PageStore], line: &WcLine) {
        if line.mask == 0 {
            return;
        }
        if let Some((port, _, off)) = layout.decode(line.addr, LINE as u64) {
            pmr[port as usize].write_masked(off, &line.data, line.mask);
        }
    }

    /// The simulated time of the crash point.
    pub fn time(&self) -> SimTime {
        self.time
    }

    /// The PMR images that are persistent for certain at this point.
    pub fn persistent(&self) -> &[PageStore] {
        &self.pmr
    }

    /// What may or may not have landed at this point: posted writes on the
    /// way, lines sent but not certain, then lines not sent yet.
    pub fn pending(&self) -> Pending {
        let mut lines: Vec<PendingLine> = self.sent.iter().map(|s| s.pending.clone()).collect();
        for (core, c) in self.wc.iter().enumerate() {
            lines.extend(c.unsent(core as u8, &self.layout));
        }
        Pending {
            in_flight: self
                .in_flight
                .iter()
                .map(|q| q.iter().copied().collect())
                .collect(),
            lines,
        }
    }

    /// Checks that `choice` is a state the persistence model allows: per
    /// port, the landed lines are closed under the order rule and need no
    /// posted write that did not land.
    pub fn validate(&self, pending: &Pending, choice: &CrashChoice) -> Result<(), PcieError> {
        if choice.in_flight_landed.len() != pending.in_flight.len() {
            return Err(PcieError::BadChoice("one in-flight prefix per port is required"));
        }
        for (p, n) in choice.in_flight_landed.iter().enumerate() {
            if *n > pending.in_flight[p].len() {
                return Err(PcieError::BadChoice("prefix longer than the in-flight writes"));
            }
        }
        if choice.lines_landed.iter().any(|&li| li >= pending.lines.len()) {
            return Err(PcieError::BadChoice("no such pending line"));
        }
        for p in 0..pending.in_flight.len() {
            let (on_port, windows) = port_lines(pending, p);
            let n = choice.in_flight_landed[p];
            let mut set: BTreeSet<usize> = on_port
                .iter()
                .enumerate()
                .filter(|(_, li)| choice.lines_landed.contains(li))
                .map(|(k, _)| k)
                .collect();
            let given = set.len();
            let bound = close(&windows, landed_bound(&pending.in_flight[p], n), &mut set);
            if set.len() != given {
                return Err(PcieError::BadChoice(
                    "a landed item implies a line ahead of it on the link that did not land",
                ));
            }
            if pending.in_flight[p]
                .get(n)
                .is_some_and(|&first_missing| bound > first_missing)
            {
                return Err(PcieError::BadChoice(
                    "a landed line implies a posted write ahead of it that did not land",
                ));
            }
        }
        Ok(())
    }

    /// Builds the PMR images of one crash state (copy-on-write over the
    /// persistent images), applying the landed items in an order the
    /// order rule allows (by the start of their send windows).
    pub fn materialize(&self, pending: &Pending, choice: &CrashChoice) -> Result<Vec<PageStore>, PcieError> {
        self.validate(pending, choice)?;
        let mut images = self.pmr.clone();
        let mut items: Vec<(usize, Item)> = Vec::new();
        for (p, &n) in choice.in_flight_landed.iter().enumerate() {
            items.extend(pending.in_flight[p][..n].iter().map(|&i| (i, Item::Posted(i))));
        }
        for &li in &choice.lines_landed {
            let pl = &pending.lines[li];
            items.push((pl.after, Item::Line(pl.line.clone())));
        }
        items.sort_by_key(|(at, _)| *at);
        for (_, item) in &items {
            match item {
                Item::Posted(i) => Self::apply_write(&self.layout, &mut images, self.trace, *i),
                Item::Line(l) => Self::apply_line(&self.layout, &mut images, l),
            }
        }
        Ok(images)
    }

    /// Every state the model allows at this point, as choices. Per port and
    /// per prefix of its in-flight writes: the lines that prefix forces
    /// (ordered before a landed write), with every subset of the lines it
    /// allows (none needing a write that did not land), each closed under
    /// the order rule. Ports are independent, so the states are the
    /// product over ports. `max_lines` bounds the subsets enumerated per
    /// prefix (2^max_lines, sampled past the bound as [`crate::subsets`]
    /// says); the second value is how many subsets the bound left out.
    pub fn choices(&self, pending: &Pending, max_lines: u32) -> (Vec<CrashChoice>, u64) {
        let ports = pending.in_flight.len();
        let mut per_port: Vec<Vec<(usize, Vec<usize>)>> = Vec::with_capacity(ports);
        let mut left_out = 0u64;
        for p in 0..ports {
            let inflight = &pending.in_flight[p];
            let (on_port, windows) = port_lines(pending, p);
            let mut opts: BTreeSet<(usize, Vec<usize>)> = BTreeSet::new();
            for n in 0..=inflight.len() {
                let first_missing = inflight.get(n).copied().unwrap_or(usize::MAX);
                let bound = landed_bound(inflight, n);
                let mut forced = BTreeSet::new();
                close(&windows, bound, &mut forced);
                let free: Vec<usize> = (0..windows.len())
                    .filter(|k| windows[*k].after < first_missing && !forced.contains(k))
                    .collect();
                let (sets, left) =
                    crate::subsets::subsets(free.len(), max_lines, self.applied as u64 ^ (n as u64) << 40);
                left_out = left_out.saturating_add(left);
                for chosen in sets {
                    let mut set = forced.clone();
                    set.extend(chosen.into_iter().map(|b| free[b]));
                    close(&windows, bound, &mut set);
                    opts.insert((n, set.into_iter().map(|k| on_port[k]).collect()));
                }
            }
            per_port.push(opts.into_iter().collect());
        }
        let mut out = vec![CrashChoice {
            in_flight_landed: vec![0; ports],
            lines_landed: Vec::new(),
        }];
        for (p, opts) in per_port.iter().enumerate() {
            let mut next = Vec::with_capacity(out.len() * opts.len());
            for base in &out {
                for (n, lines) in opts {
                    let mut c = base.clone();
                    c.in_flight_landed[p] = *n;
                    c.lines_landed.extend(lines);
                    c.lines_landed.sort_unstable();
                    next.push(c);
                }
            }
            out = next;
        }
        (out, left_out)
    }
}

/// Facts fixed about the pending PMR items of one point, for choosing
/// states by what a reader looked at (`crashfuzz`'s read-set reduction):
/// lines that landed or did not, and per port a range for how many of its
/// in-flight writes landed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ItemConstraint {
    /// Indices into [`Pending::lines`] that landed.
    pub lines_in: BTreeSet<usize>,
    /// Indices into [`Pending::lines`] that did not land.
    pub lines_out: BTreeSet<usize>,
    /// Per port: at least this many in-flight writes landed (missing: 0).
    pub posted_min: Vec<usize>,
    /// Per port: at most this many landed (missing: all of them).
    pub posted_max: Vec<usize>,
}

impl ItemConstraint {
    /// Both constraints at once.
    pub fn and(&self, other: &ItemConstraint) -> ItemConstraint {
        let ports = self.posted_min.len().max(other.posted_min.len());
        let get = |v: &[usize], p: usize, d: usize| v.get(p).copied().unwrap_or(d);
        let ports_max = self.posted_max.len().max(other.posted_max.len());
        ItemConstraint {
            lines_in: self.lines_in.union(&other.lines_in).copied().collect(),
            lines_out: self.lines_out.union(&other.lines_out).copied().collect(),
            posted_min: (0..ports)
                .map(|p| get(&self.posted_min, p, 0).max(get(&other.posted_min, p, 0)))
                .collect(),
            posted_max: (0..ports_max)
                .map(|p| get(&self.posted_max, p, usize::MAX).min(get(&other.posted_max, p, usize::MAX)))
                .collect(),
        }
    }
}

impl Pending {
    /// The least state the envelope allows that meets `c` (its landed
    /// items are in every allowed state that meets `c`), or `None` if no
    /// allowed state meets it. The order rule is monotone (landing more
    /// only forces more), so the closure of what `c` says landed is that
    /// state, and if it lands an item `c` says did not, every state that
    /// meets `c`'s landings does too.
    pub fn least_choice(&self, c: &ItemConstraint) -> Option<CrashChoice> {
        if !c.lines_in.is_disjoint(&c.lines_out) || c.lines_in.iter().any(|&l| l >= self.lines.len()) {
            return None;
        }
        let ports = self.in_flight.len();
        let mut out = CrashChoice {
            in_flight_landed: vec![0; ports],
            lines_landed: Vec::new(),
        };
        for p in 0..ports {
            let in_flight = &self.in_flight[p];
            let (on_port, windows) = port_lines(self, p);
            let mut set: BTreeSet<usize> = on_port
                .iter()
                .enumerate()
                .filter(|(_, li)| c.lines_in.contains(li))
                .map(|(k, _)| k)
                .collect();
            let mut n = c.posted_min.get(p).copied().unwrap_or(0);
            if n > in_flight.len() {
                return None;
            }
            loop {
                let bound = close(&windows, landed_bound(in_flight, n), &mut set);
                // In-flight writes are oldest first: those before the bound.
                let forced = in_flight.iter().take_while(|&&i| i < bound).count();
                if forced <= n {
                    break;
                }
                n = forced;
            }
            if n > c.posted_max.get(p).copied().unwrap_or(usize::MAX) {
                return None;
            }
            let landed: Vec<usize> = set.into_iter().map(|k| on_port[k]).collect();
            if landed.iter().any(|l| c.lines_out.contains(l)) {
                return None;
            }
            out.in_flight_landed[p] = n;
            out.lines_landed.extend(landed);
        }
        out.lines_landed.sort_unstable();
        Some(out)
    }
}

/// The PMR units (port, offset / [`crate::observe::PMR_UNIT`]) each pending
/// item writes: per port, each in-flight write's; each line's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ItemUnits {
    /// Per port, per in-flight write (oldest first).
    pub posted: Vec<Vec<Vec<(u8, u64)>>>,
    /// Per line of [`Pending::lines`].
    pub lines: Vec<Vec<(u8, u64)>>,
}

impl CrashCursor<'_> {
    /// Where each of `pending`'s items writes.
    pub fn item_units(&self, pending: &Pending) -> ItemUnits {
        let units = |addr: u64, len: u64| -> Vec<(u8, u64)> {
            match self.layout.decode(addr, len) {
                Some((port, _, off)) => crate::observe::pmr_units(off, len)
                    .map(|(u, _)| (port, u))
                    .collect(),
                None => Vec::new(),
            }
        };
        let entries = self.trace.entries();
        ItemUnits {
            posted: pending
                .in_flight
                .iter()
                .map(|q| {
                    q.iter()
                        .map(|&i| units(entries[i].addr, u64::from(entries[i].len)))
                        .collect()
                })
                .collect(),
            lines: pending
                .lines
                .iter()
                .map(|l| {
                    if l.line.mask == 0 {
                        return Vec::new();
                    }
                    let first = u64::from(l.line.mask.trailing_zeros());
                    let last = 63 - u64::from(l.line.mask.leading_zeros());
                    units(l.line.addr + first, last + 1 - first)
                })
                .collect(),
        }
    }
}

/// A landed item to apply: a posted write (its trace index) or a line.
enum Item {
    Posted(usize),
    Line(WcLine),
}

impl SentLine {
    /// True if a valid byte of the line is in PMR offsets `lo..hi`.
    fn overlaps(&self, lo: u64, hi: u64) -> bool {
        let start = lo.max(self.offset);
        let end = hi.min(self.offset + LINE as u64);
        (start..end).any(|o| self.pending.line.mask & (1 << (o - self.offset)) != 0)
    }

    fn window(&self) -> Window {
        Window::of(&self.pending)
    }
}

/// The pending lines of `port` (indices into [`Pending::lines`]) and their
/// windows.
fn port_lines(pending: &Pending, port: usize) -> (Vec<usize>, Vec<Window>) {
    pending
        .lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.port as usize == port)
        .map(|(i, l)| (i, Window::of(l)))
        .unzip()
}

/// The bound (see [`close`]) of the first `n` in-flight writes having
/// landed: just past the last of them.
fn landed_bound(in_flight: &[usize], n: usize) -> usize {
    n.checked_sub(1).map_or(0, |last| in_flight[last] + 1)
}
