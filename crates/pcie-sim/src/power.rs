//! Power failure: which PMR states a crash after trace entry `k` may leave.
//!
//! The model (`docs/persistence.md`), applied to a recorded trace:
//!
//! - a posted write to the PMR is persistent once it took effect (its
//!   entry's `effect` time is at or before the crash);
//! - posted writes still on the way (emitted, not yet in effect) arrive in
//!   order, so any *prefix* of them per link may have landed;
//! - bytes in a core's write-combining buffers are lost unless the line was
//!   evicted: hardware may evict any line at any time, so any subset of the
//!   buffered lines may have landed, but an evicted line travels behind
//!   every write already on the link, so it can only have landed if all of
//!   those did;
//! - registers, doorbells, host DRAM and everything else are lost.
//!
//! Buffered lines are replayed with the core's own
//! [`WriteCombiningBuffer`] (one per core), driven by the recorded
//! `WcStore`s: a line that fills (or, when the cursor knows the core's
//! buffer count, is evicted for room) leaves the buffer as the store is
//! replayed, and stays pending until its first TLP (`FLAG_LINE_START`) is in
//! the trace; a line that leaves on a fence, a `clflush`, an uncached access
//! or idle eviction leaves the buffer at its first TLP, which is where the
//! running core takes it out of its buffer too.
//!
//! [`CrashCursor`] walks the trace once, keeping the persistent image and
//! the pending items up to date, so a whole exploration costs one pass plus
//! the states it materializes. A materialized state shares every page it
//! does not change with the cursor's image (copy-on-write), so building one
//! costs the pages its pending writes touch, not the image size.

use std::collections::VecDeque;

use crate::error::PcieError;
use crate::machine::BusLayout;
use crate::pmr::PageStore;
use crate::time::SimTime;
use crate::trace::{BusTrace, EventKind, TraceMode, FLAG_LINE_START, FLAG_PMR, FLAG_UR, FLAG_WC};
use crate::wc::{WcLine, WriteCombiningBuffer, LINE};

/// A write-combining line buffered in a core at the crash point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingLine {
    /// The core holding it.
    pub core: u8,
    /// The device whose PMR it targets.
    pub port: u8,
    /// The line's bytes, address and valid-byte mask.
    pub line: WcLine,
}

/// Everything that may or may not have landed at a crash point.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    /// Per port, the trace indices of PMR writes on the way, oldest first.
    pub in_flight: Vec<Vec<usize>>,
    /// Lines buffered in cores, in no particular order of landing.
    pub lines: Vec<PendingLine>,
}

/// One crash state: how far each link's in-flight writes got, and which
/// buffered lines were evicted and landed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CrashChoice {
    /// Per port: how many of its in-flight writes landed (a prefix).
    pub in_flight_landed: Vec<usize>,
    /// Indices into [`Pending::lines`] of the lines that landed.
    pub lines_landed: Vec<usize>,
}

/// One core's write-combining state, replayed from a trace.
#[derive(Clone, Debug)]
struct CoreLines {
    /// The lines still buffered: the running core's buffer type, driven by
    /// the recorded stores.
    buffer: WriteCombiningBuffer,
    /// Lines the buffer let go of (filled, or evicted for room) whose first
    /// TLP is not in the trace yet, in the order they will be sent: not on
    /// the link, so still pending.
    leaving: Vec<WcLine>,
}

impl CoreLines {
    fn new(buffers: Option<usize>) -> Self {
        CoreLines {
            buffer: buffers.map_or_else(WriteCombiningBuffer::unbounded, WriteCombiningBuffer::new),
            leaving: Vec::new(),
        }
    }

    /// The first TLP of the line holding `addr` is in the trace: the line
    /// is on the link now. It is a line the buffer let go of (sent in
    /// order) or one leaving the buffer on a fence, `clflush`, uncached
    /// access or idle eviction. A line unknown here was stored before the
    /// trace began.
    fn depart(&mut self, addr: u64) {
        let line_addr = addr & !(LINE as u64 - 1);
        if let Some(i) = self.leaving.iter().position(|l| l.addr == line_addr) {
            // The running core sends the lines a store let go of in order;
            // only the idle evictor's lines (from the buffer) interleave.
            debug_assert_eq!(i, 0, "lines let go of by one store are sent in order");
            self.leaving.remove(i);
        } else {
            self.buffer.take_line(line_addr);
        }
    }

    /// The pending lines, in the order they were allocated.
    fn pending(&self, core: u8, layout: &BusLayout) -> Vec<PendingLine> {
        let mut lines: Vec<&WcLine> = self.leaving.iter().chain(self.buffer.lines()).collect();
        lines.sort_by_key(|l| l.seq);
        lines
            .into_iter()
            .filter_map(|l| {
                let first = l.addr + u64::from(l.mask.trailing_zeros());
                let (port, _, _) = layout.decode(first, 1)?;
                Some(PendingLine {
                    core,
                    port,
                    line: l.clone(),
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
    in_flight: Vec<VecDeque<usize>>,
    /// Per core: its replayed write-combining state.
    wc: Vec<CoreLines>,
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
            wc: Vec::new(),
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
    /// states (an evicted line is pending until its TLP either way); only
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

    fn apply_entry(&mut self, i: usize) {
        let e = &self.trace.entries()[i];
        match e.kind {
            EventKind::WcStore => {
                if self.layout.decode(e.addr, e.len as u64).is_none() {
                    return;
                }
                let core = e.source as usize;
                self.changes += 1;
                if self.wc.len() <= core {
                    let buffers = self.wc_buffers;
                    self.wc.resize_with(core + 1, || CoreLines::new(buffers));
                }
                let c = &mut self.wc[core];
                // The core is occupied until the lines its previous store
                // let go of were sent: none may still be leaving.
                debug_assert!(
                    self.wc_buffers.is_none() || c.leaving.is_empty(),
                    "entry {i}: core {core} stores while lines its buffer let go of were never sent: \
                     the replayed buffers disagree with the trace"
                );
                c.buffer
                    .store(e.addr, self.trace.payload(e), e.purpose, e.attr, &mut c.leaving);
            }
            EventKind::MmioWrite if e.flags & FLAG_PMR != 0 => {
                self.changes += 1;
                if e.flags & FLAG_WC != 0 && e.flags & FLAG_LINE_START != 0 {
                    if let Some(c) = self.wc.get_mut(e.source as usize) {
                        c.depart(e.addr);
                    }
                }
                if e.flags & FLAG_UR != 0 {
                    return;
                }
                if let Some((port, _, _)) = self.layout.decode(e.addr, e.len as u64) {
                    self.in_flight[port as usize].push_back(i);
                }
            }
            _ => {}
        }
    }

    /// Applies every in-flight write whose effect time has passed.
    fn settle(&mut self) {
        let entries = self.trace.entries();
        for port in 0..self.in_flight.len() {
            while let Some(&i) = self.in_flight[port].front() {
                let e = &entries[i];
                if e.effect > self.time {
                    break;
                }
                self.in_flight[port].pop_front();
                self.changes += 1;
                Self::apply_write(&self.layout, &mut self.pmr, self.trace, i);
            }
        }
    }

    fn apply_write(layout: &BusLayout, pmr: &mut [PageStore], trace: &BusTrace, i: usize) {
        let e = &trace.entries()[i];
        if let Some((port, _, off)) = layout.decode(e.addr, e.len as u64) {
            pmr[port as usize].write(off, trace.payload(e));
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

    /// What may or may not have landed at this point.
    pub fn pending(&self) -> Pending {
        Pending {
            in_flight: self
                .in_flight
                .iter()
                .map(|q| q.iter().copied().collect())
                .collect(),
            lines: self
                .wc
                .iter()
                .enumerate()
                .flat_map(|(core, c)| c.pending(core as u8, &self.layout))
                .collect(),
        }
    }

    /// Checks that `choice` is a state the persistence model allows.
    pub fn validate(&self, pending: &Pending, choice: &CrashChoice) -> Result<(), PcieError> {
        if choice.in_flight_landed.len() != pending.in_flight.len() {
            return Err(PcieError::BadChoice("one in-flight prefix per port is required"));
        }
        for (p, n) in choice.in_flight_landed.iter().enumerate() {
            if *n > pending.in_flight[p].len() {
                return Err(PcieError::BadChoice("prefix longer than the in-flight writes"));
            }
        }
        for &li in &choice.lines_landed {
            let Some(line) = pending.lines.get(li) else {
                return Err(PcieError::BadChoice("no such pending line"));
            };
            let p = line.port as usize;
            if choice.in_flight_landed[p] != pending.in_flight[p].len() {
                return Err(PcieError::BadChoice(
                    "an evicted line cannot land before the writes ahead of it on the link",
                ));
            }
        }
        Ok(())
    }

    /// Builds the PMR images of one crash state (copy-on-write over the
    /// persistent images).
    pub fn materialize(&self, pending: &Pending, choice: &CrashChoice) -> Result<Vec<PageStore>, PcieError> {
        self.validate(pending, choice)?;
        let mut images = self.pmr.clone();
        for (p, &n) in choice.in_flight_landed.iter().enumerate() {
            for &i in &pending.in_flight[p][..n] {
                Self::apply_write(&self.layout, &mut images, self.trace, i);
            }
        }
        for &li in &choice.lines_landed {
            let pl = &pending.lines[li];
            if let Some((port, _, off)) = self.layout.decode(pl.line.addr, LINE as u64) {
                images[port as usize].write_masked(off, &pl.line.data, pl.line.mask);
            }
        }
        Ok(images)
    }

    /// Every state the model allows at this point, as choices. Per port:
    /// each strict prefix of the in-flight writes with no line landed, and
    /// the full prefix with every subset of that port's lines. Ports are
    /// independent, so the states are the product over ports. `max_lines`
    /// bounds the subsets enumerated per port (2^max_lines, sampled past
    /// the bound as [`crate::subsets`] says); the second value is how many
    /// states the bound left out.
    pub fn choices(&self, pending: &Pending, max_lines: u32) -> (Vec<CrashChoice>, u64) {
        let ports = pending.in_flight.len();
        let mut per_port: Vec<Vec<(usize, Vec<usize>)>> = Vec::with_capacity(ports);
        let mut left_out = 0u64;
        for p in 0..ports {
            let inflight = pending.in_flight[p].len();
            let lines: Vec<usize> = pending
                .lines
                .iter()
                .enumerate()
                .filter(|(_, l)| l.port as usize == p)
                .map(|(i, _)| i)
                .collect();
            let mut opts: Vec<(usize, Vec<usize>)> = (0..inflight).map(|n| (n, Vec::new())).collect();
            let (sets, left) = crate::subsets::subsets(lines.len(), max_lines, self.applied as u64);
            for set in sets {
                opts.push((inflight, set.into_iter().map(|b| lines[b]).collect()));
            }
            left_out = left_out.saturating_add(left);
            per_port.push(opts);
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
                    next.push(c);
                }
            }
            out = next;
        }
        (out, left_out)
    }
}
