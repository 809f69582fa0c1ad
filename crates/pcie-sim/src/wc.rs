//! A core's write-combining buffers (Intel SDM Vol. 3A 11.3.1: WC memory).
//!
//! Stores to WC-mapped memory collect in a few 64-byte line buffers.
//! Consecutive stores to the same line combine. A line leaves the core as a
//! posted write when it fills, when the core runs out of buffers (the oldest
//! line is evicted), on a fence, on `clflush` of that line, or before an
//! uncached access. A partial line leaves as one TLP per run of contiguous
//! valid bytes (byte enables cover partial DWs at each end of a run).
//!
//! The same [`WriteCombiningBuffer`] runs inside every simulated core
//! ([`crate::Core`]) and inside the crash model ([`crate::CrashCursor`]),
//! which drives it with the stores a trace recorded: the line, mask and
//! eviction rules exist once.

use crate::trace::Purpose;

/// Bytes per WC line.
pub const LINE: usize = 64;
const FULL: u64 = u64::MAX;

/// One buffered line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WcLine {
    /// Line-aligned bus address.
    pub addr: u64,
    /// Bytes of the line; only those with their `mask` bit set are valid.
    pub data: [u8; LINE],
    /// Bit i set: byte i was stored.
    pub mask: u64,
    /// Purpose of the last store into the line.
    pub purpose: Purpose,
    /// Attribution tag of the last store into the line.
    pub attr: u32,
    /// Allocation number of the line in its buffer: a line allocated
    /// earlier has a smaller number (the buffer's eviction order).
    pub seq: u64,
}

impl WcLine {
    /// True if every byte of the line was stored.
    pub fn is_full(&self) -> bool {
        self.mask == FULL
    }

    /// Runs of contiguous valid bytes: (offset in line, length). A full line
    /// is one run of 64 bytes.
    pub fn runs(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        let mut i = 0usize;
        std::iter::from_fn(move || {
            while i < LINE && self.mask & (1 << i) == 0 {
                i += 1;
            }
            if i >= LINE {
                return None;
            }
            let start = i;
            while i < LINE && self.mask & (1 << i) != 0 {
                i += 1;
            }
            Some((start, i - start))
        })
    }
}

/// A core's set of WC line buffers, kept in allocation order (oldest
/// first, which is the eviction order).
#[derive(Clone, Debug)]
pub struct WriteCombiningBuffer {
    lines: Vec<WcLine>,
    capacity: usize,
    next_seq: u64,
}

impl WriteCombiningBuffer {
    /// Buffers for `capacity` lines (at least one).
    pub fn new(capacity: usize) -> Self {
        WriteCombiningBuffer {
            lines: Vec::with_capacity(capacity.clamp(1, LINE)),
            capacity: capacity.max(1),
            next_seq: 0,
        }
    }

    /// Buffers that never run out (no line is ever evicted for room).
    /// Deviates from hardware, which has a handful of buffers: the crash
    /// model uses it when it does not know the core's buffer count, so that
    /// lines leave only where the trace shows them leave.
    pub fn unbounded() -> Self {
        Self::new(usize::MAX)
    }

    /// How many lines the buffers hold at most.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Lines currently buffered, oldest first.
    pub fn lines(&self) -> &[WcLine] {
        &self.lines
    }

    /// True if no line is buffered.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Stores `data` at `addr`; lines that must leave (evicted for room, or
    /// filled) are appended to `out` in the order they leave.
    pub fn store(&mut self, addr: u64, data: &[u8], purpose: Purpose, attr: u32, out: &mut Vec<WcLine>) {
        let mut done = 0usize;
        while done < data.len() {
            let a = addr + done as u64;
            let line_addr = a & !(LINE as u64 - 1);
            let off = (a - line_addr) as usize;
            let n = (LINE - off).min(data.len() - done);
            let idx = match self.lines.iter().position(|l| l.addr == line_addr) {
                Some(i) => i,
                None => {
                    if self.lines.len() == self.capacity {
                        out.push(self.lines.remove(0));
                    }
                    self.lines.push(WcLine {
                        addr: line_addr,
                        data: [0; LINE],
                        mask: 0,
                        purpose,
                        attr,
                        seq: self.next_seq,
                    });
                    self.next_seq += 1;
                    self.lines.len() - 1
                }
            };
            let line = &mut self.lines[idx];
            line.data[off..off + n].copy_from_slice(&data[done..done + n]);
            let bits = if n == LINE { FULL } else { ((1u64 << n) - 1) << off };
            line.mask |= bits;
            line.purpose = purpose;
            line.attr = attr;
            if line.is_full() {
                out.push(self.lines.remove(idx));
            }
            done += n;
        }
    }

    /// Empties every buffer (a fence or an uncached access), oldest first.
    pub fn drain(&mut self, out: &mut Vec<WcLine>) {
        out.append(&mut self.lines);
    }

    /// Evicts the line holding `addr`, if buffered (`clflush`).
    pub fn flush_line(&mut self, addr: u64, out: &mut Vec<WcLine>) {
        out.extend(self.take_line(addr));
    }

    /// Removes and returns the line holding `addr`, if buffered: one line
    /// leaving on its own (a `clflush`, or a departure a trace recorded).
    pub fn take_line(&mut self, addr: u64) -> Option<WcLine> {
        let line_addr = addr & !(LINE as u64 - 1);
        let i = self.lines.iter().position(|l| l.addr == line_addr)?;
        Some(self.lines.remove(i))
    }

    /// Removes and returns the oldest line, if any: one step of a drain,
    /// for a drain that sends its lines one at a time.
    pub fn pop_oldest(&mut self) -> Option<WcLine> {
        if self.lines.is_empty() {
            None
        } else {
            Some(self.lines.remove(0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_stores_combine_and_a_full_line_leaves() {
        let mut wc = WriteCombiningBuffer::new(4);
        let mut out = Vec::new();
        for i in 0..7u64 {
            wc.store(0x1000 + i * 8, &[i as u8; 8], Purpose::new(1), 1, &mut out);
        }
        assert!(out.is_empty());
        assert_eq!(wc.lines().len(), 1);
        wc.store(0x1038, &[7; 8], Purpose::new(1), 1, &mut out);
        assert_eq!(out.len(), 1);
        assert!(out[0].is_full());
        assert_eq!(out[0].data[56], 7);
        assert!(wc.is_empty());
    }

    #[test]
    fn oldest_line_is_evicted_when_buffers_run_out() {
        let mut wc = WriteCombiningBuffer::new(2);
        let mut out = Vec::new();
        wc.store(0x0, &[1], Purpose::UNTAGGED, 0, &mut out);
        wc.store(0x40, &[2], Purpose::UNTAGGED, 0, &mut out);
        wc.store(0x80, &[3], Purpose::UNTAGGED, 0, &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].addr, 0x0);
        assert_eq!(
            wc.lines().iter().map(|l| l.addr).collect::<Vec<_>>(),
            vec![0x40, 0x80]
        );
    }

    #[test]
    fn partial_lines_leave_as_runs() {
        let mut wc = WriteCombiningBuffer::new(2);
        let mut out = Vec::new();
        wc.store(0x100, &[1, 2, 3, 4], Purpose::new(3), 0, &mut out);
        wc.store(0x110, &[5; 8], Purpose::new(3), 0, &mut out);
        wc.drain(&mut out);
        let runs: Vec<_> = out[0].runs().collect();
        assert_eq!(runs, vec![(0, 4), (16, 8)]);
    }

    #[test]
    fn a_store_spanning_lines_splits() {
        let mut wc = WriteCombiningBuffer::new(4);
        let mut out = Vec::new();
        wc.store(0x30, &[9; 128], Purpose::UNTAGGED, 0, &mut out);
        // 0x30..0x40 partial, 0x40..0x80 full (leaves), 0x80..0xb0 partial
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].addr, 0x40);
        assert_eq!(wc.lines().len(), 2);
    }

    #[test]
    fn take_and_pop_remove_single_lines_in_allocation_order() {
        let mut wc = WriteCombiningBuffer::new(4);
        let mut out = Vec::new();
        for a in [0x0u64, 0x40, 0x80] {
            wc.store(a + 3, &[1], Purpose::UNTAGGED, 0, &mut out);
        }
        assert_eq!(wc.take_line(0x47).map(|l| (l.addr, l.seq)), Some((0x40, 1)));
        assert_eq!(wc.take_line(0x47), None);
        assert_eq!(wc.pop_oldest().map(|l| (l.addr, l.seq)), Some((0x0, 0)));
        wc.store(0x0, &[2], Purpose::UNTAGGED, 0, &mut out);
        assert_eq!(
            wc.lines().iter().map(|l| (l.addr, l.seq)).collect::<Vec<_>>(),
            vec![(0x80, 2), (0x0, 3)]
        );
        assert!(out.is_empty());
    }

    #[test]
    fn an_unbounded_buffer_never_evicts_for_room() {
        let mut wc = WriteCombiningBuffer::unbounded();
        let mut out = Vec::new();
        for i in 0..100u64 {
            wc.store(i * 64, &[1], Purpose::UNTAGGED, 0, &mut out);
        }
        assert!(out.is_empty());
        assert_eq!(wc.lines().len(), 100);
    }
}
