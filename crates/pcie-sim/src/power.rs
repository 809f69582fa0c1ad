//! Power failure: which PMR states a crash after trace entry `k` may leave.
//!
//! The model (ARCHITECTURE.md 4), applied to a recorded trace:
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
use crate::wc::{WcLine, LINE};

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
    /// Per core: buffered lines.
    wc: Vec<Vec<PendingLine>>,
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
            changes: 0,
        })
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
                let payload = self.trace.payload(e);
                let Some((port, _, _)) = self.layout.decode(e.addr, e.len as u64) else {
                    return;
                };
                let core = e.source as usize;
                self.changes += 1;
                if self.wc.len() <= core {
                    self.wc.resize(core + 1, Vec::new());
                }
                let mut done = 0usize;
                while done < payload.len() {
                    let a = e.addr + done as u64;
                    let line_addr = a & !(LINE as u64 - 1);
                    let off = (a - line_addr) as usize;
                    let n = (LINE - off).min(payload.len() - done);
                    let lines = &mut self.wc[core];
                    let idx = match lines.iter().position(|l| l.line.addr == line_addr) {
                        Some(x) => x,
                        None => {
                            lines.push(PendingLine {
                                core: e.source,
                                port,
                                line: WcLine {
                                    addr: line_addr,
                                    data: [0; LINE],
                                    mask: 0,
                                    purpose: e.purpose,
                                    attr: e.attr,
                                },
                            });
                            lines.len() - 1
                        }
                    };
                    let l = &mut lines[idx].line;
                    l.data[off..off + n].copy_from_slice(&payload[done..done + n]);
                    l.mask |= if n == LINE {
                        u64::MAX
                    } else {
                        ((1u64 << n) - 1) << off
                    };
                    done += n;
                }
            }
            EventKind::MmioWrite if e.flags & FLAG_PMR != 0 => {
                self.changes += 1;
                if e.flags & FLAG_WC != 0 && e.flags & FLAG_LINE_START != 0 {
                    let core = e.source as usize;
                    if let Some(lines) = self.wc.get_mut(core) {
                        let line_addr = e.addr & !(LINE as u64 - 1);
                        lines.retain(|l| l.line.addr != line_addr);
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
            lines: self.wc.iter().flatten().cloned().collect(),
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
