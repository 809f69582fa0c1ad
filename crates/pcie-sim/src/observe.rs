//! What a program observed of a crash state: the units of persistent
//! storage (64-byte PMR lines, media blocks) it read before it had written
//! all of their bytes itself, each once, in the order first read.
//!
//! A crash checker is a deterministic program whose only inputs are the
//! state's PMR bytes and media blocks. Two states that agree on every unit
//! a check of one of them observed make the check take the same steps
//! (induction over its reads: each read returns the same bytes), so they
//! get the same verdict. Bytes the check wrote before reading them are not
//! inputs: they are the same in both runs. The crash explorer's read-set
//! reduction (`crashfuzz::observe`) is built on this log; the PMR side logs
//! in the machine ([`crate::Machine::log_pmr_access`]), the media side in
//! the drive's back end, with this one type.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// Bytes in one PMR unit (a write-combining line: pending PMR items never
/// straddle one, see [`crate::wc::LINE`]).
pub const PMR_UNIT: u64 = crate::wc::LINE as u64;

/// Every byte of a unit (for whole-unit accesses such as a media block).
pub const WHOLE: u64 = u64::MAX;

/// A count of first reads shared by the access logs of one program over
/// several stores (the drives of one machine), so that their first reads
/// can be put back in the order they happened ([`AccessLog::stamps`]).
pub type ReadClock = Rc<Cell<u64>>;

/// Reads and writes of one program over units, in first-read order.
#[derive(Clone, Debug, Default)]
pub struct AccessLog {
    order: Vec<u64>,
    /// The units in `order`, as a bitmap per 512 units, by chunk number
    /// (a check reads long runs of units: one entry per run of 512).
    seen: Vec<(u64, [u64; 8])>,
    /// The entry of `seen` used last (runs of reads stay in one chunk).
    hint: usize,
    /// Per unit, the bytes the program wrote (bit per byte; [`WHOLE`]: all).
    written: BTreeMap<u64, u64>,
    /// With a clock: per entry of `order`, the clock's count at its read.
    stamps: Vec<u64>,
    clock: Option<ReadClock>,
}

impl AccessLog {
    /// A log whose first reads are stamped from `clock`, shared with the
    /// logs of the program's other stores.
    pub fn stamped(clock: ReadClock) -> AccessLog {
        AccessLog {
            clock: Some(clock),
            ..AccessLog::default()
        }
    }

    /// What was logged so far; logging goes on afresh, on the same clock.
    pub fn take(&mut self) -> AccessLog {
        let fresh = AccessLog {
            clock: self.clock.clone(),
            ..AccessLog::default()
        };
        std::mem::replace(self, fresh)
    }

    /// Per unit of [`AccessLog::reads`], the shared clock's count when it
    /// was first read: merging several logs by it gives the program's
    /// first reads across them in the order they happened. Empty for a log
    /// without a clock.
    pub fn stamps(&self) -> &[u64] {
        &self.stamps
    }

    /// Notes a read of the bytes `mask` of `unit`: it is observed unless the
    /// program wrote every one of those bytes first.
    pub fn read(&mut self, unit: u64, mask: u64) {
        let (chunk, bit) = (unit >> 9, unit & 511);
        let (word, mask_bit) = ((bit >> 6) as usize, 1u64 << (bit & 63));
        let i = self.chunk(chunk);
        if self.seen[i].1[word] & mask_bit != 0 {
            return;
        }
        let own = self.written.get(&unit).copied().unwrap_or(0);
        if mask & !own != 0 {
            self.seen[i].1[word] |= mask_bit;
            self.order.push(unit);
            if let Some(c) = &self.clock {
                self.stamps.push(c.get());
                c.set(c.get() + 1);
            }
        }
    }

    /// The index in `seen` of chunk `chunk`'s entry (made if missing).
    fn chunk(&mut self, chunk: u64) -> usize {
        if self.seen.get(self.hint).is_some_and(|e| e.0 == chunk) {
            return self.hint;
        }
        let i = match self.seen.binary_search_by_key(&chunk, |e| e.0) {
            Ok(i) => i,
            Err(i) => {
                self.seen.insert(i, (chunk, [0; 8]));
                i
            }
        };
        self.hint = i;
        i
    }

    /// Notes a write of the bytes `mask` of `unit`.
    pub fn write(&mut self, unit: u64, mask: u64) {
        *self.written.entry(unit).or_insert(0) |= mask;
    }

    /// The units observed, in the order first read.
    pub fn reads(&self) -> &[u64] {
        &self.order
    }

    /// The units written (all or some of their bytes).
    pub fn written(&self) -> impl Iterator<Item = u64> + '_ {
        self.written.keys().copied()
    }

    /// Notes a read of PMR bytes `offset..offset + len`.
    pub fn read_bytes(&mut self, offset: u64, len: u64) {
        for (unit, mask) in pmr_units(offset, len) {
            self.read(unit, mask);
        }
    }

    /// Notes a write of PMR bytes `offset..offset + len`.
    pub fn write_bytes(&mut self, offset: u64, len: u64) {
        for (unit, mask) in pmr_units(offset, len) {
            self.write(unit, mask);
        }
    }
}

/// The PMR units bytes `offset..offset + len` touch, each with the mask of
/// the bytes touched.
pub fn pmr_units(offset: u64, len: u64) -> impl Iterator<Item = (u64, u64)> {
    let end = offset.saturating_add(len);
    let first = offset / PMR_UNIT;
    let last = if len == 0 { first } else { (end - 1) / PMR_UNIT + 1 };
    (first..last).map(move |u| {
        let lo = (u * PMR_UNIT).max(offset) - u * PMR_UNIT;
        let hi = ((u + 1) * PMR_UNIT).min(end) - u * PMR_UNIT;
        let mask = if hi - lo == 64 {
            WHOLE
        } else {
            ((1u64 << (hi - lo)) - 1) << lo
        };
        (u, mask)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_on_one_clock_merge_in_the_order_read() {
        let clock = ReadClock::default();
        let (mut a, mut b) = (
            AccessLog::stamped(clock.clone()),
            AccessLog::stamped(clock.clone()),
        );
        a.read(7, WHOLE);
        b.read(3, WHOLE);
        a.read(7, WHOLE); // not a first read: no stamp
        a.read(1, WHOLE);
        assert_eq!(a.reads(), &[7, 1]);
        assert_eq!(a.stamps(), &[0, 2]);
        assert_eq!(b.stamps(), &[1]);
        // A take starts afresh on the same clock.
        let taken = a.take();
        assert_eq!(taken.reads(), &[7, 1]);
        a.read(9, WHOLE);
        assert_eq!(a.stamps(), &[3]);
        // Without a clock, nothing is stamped.
        let mut c = AccessLog::default();
        c.read(1, WHOLE);
        assert!(c.stamps().is_empty());
    }

    #[test]
    fn a_unit_written_whole_before_it_is_read_is_not_observed() {
        let mut log = AccessLog::default();
        log.write_bytes(64, 64);
        log.read_bytes(64, 64);
        assert!(log.reads().is_empty());
        // Written in part: the other bytes are the state's.
        log.write_bytes(128, 8);
        log.read_bytes(128, 8);
        assert!(log.reads().is_empty(), "only written bytes read");
        log.read_bytes(128, 16);
        assert_eq!(log.reads(), &[2]);
    }

    #[test]
    fn units_are_logged_once_in_first_read_order() {
        let mut log = AccessLog::default();
        log.read(7, WHOLE);
        log.read(3, WHOLE);
        log.read(7, WHOLE);
        log.write(9, WHOLE);
        log.read(9, WHOLE);
        assert_eq!(log.reads(), &[7, 3]);
        assert_eq!(log.written().collect::<Vec<_>>(), vec![9]);
    }

    #[test]
    fn byte_ranges_split_into_lines_with_their_masks() {
        let v: Vec<_> = pmr_units(60, 8).collect();
        assert_eq!(v, vec![(0, 0xF << 60), (1, 0xF)]);
        assert_eq!(pmr_units(0, 64).collect::<Vec<_>>(), vec![(0, WHOLE)]);
        assert_eq!(pmr_units(0, 0).count(), 0);
    }
}
