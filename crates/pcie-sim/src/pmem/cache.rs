//! The modelled CPU cache (which persistent-memory lines it holds, and
//! which are dirty) and the DIMM's side of the memory bus (the write
//! pending queue, the XPBuffer, media bandwidth).
//!
//! Both are plain data: the caller ([`crate::pmem::Pmem`]) passes in the
//! time and the seeded choices, so nothing here reads a clock or an RNG.

use std::collections::VecDeque;

use crate::pmem::profile::PmemTiming;
use crate::time::{SimDuration, SimTime};

/// The lines of persistent memory in the CPU cache, by line offset, each
/// with its dirty bit. A victim is chosen by its index in address order,
/// so that it is the same line in every run with the same seed.
///
/// Lines are kept as bits, in groups of [`GROUP_LINES`] consecutive lines
/// (one bit per line for "cached", one for "dirty") with each group's
/// counts: a lookup is a bit test, and the line at an index in address
/// order is found by walking the groups' counts and selecting a bit in one
/// group, not by walking every line before it (every load and store looks
/// its lines up, and a full cache of 16384 lines evicts on every miss).
#[derive(Clone, Debug)]
pub(crate) struct Cache {
    /// Group `g` holds lines `g * GROUP_LINES ..`; grown as lines come in.
    groups: Vec<Group>,
    len: usize,
    dirty_total: usize,
    capacity: usize,
}

/// Lines per group.
const GROUP_LINES: u64 = 256;
const WORDS: usize = (GROUP_LINES / 64) as usize;
/// Bytes per cache line.
const LINE_BYTES: u64 = 64;

#[derive(Clone, Copy, Debug, Default)]
struct Group {
    held: [u64; WORDS],
    dirty: [u64; WORDS],
    n_held: u32,
    n_dirty: u32,
}

/// Where a line's bits are: (group, word, bit mask).
fn place(line: u64) -> (usize, usize, u64) {
    let i = line / LINE_BYTES;
    let g = (i / GROUP_LINES) as usize;
    let bit = i % GROUP_LINES;
    (g, (bit / 64) as usize, 1u64 << (bit % 64))
}

/// The offset of the `j`th set bit (from 0, lowest first) of `words`,
/// the line of group `g` it stands for.
fn select(g: usize, words: &[u64; WORDS], mut j: u32) -> Option<u64> {
    for (w, &word) in words.iter().enumerate() {
        let n = word.count_ones();
        if j < n {
            let mut x = word;
            for _ in 0..j {
                x &= x - 1;
            }
            let bit = u64::from(x.trailing_zeros());
            let i = g as u64 * GROUP_LINES + w as u64 * 64 + bit;
            return Some(i * LINE_BYTES);
        }
        j -= n;
    }
    None
}

impl Cache {
    /// A cache holding at most `capacity` lines (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        Cache {
            groups: Vec::new(),
            len: 0,
            dirty_total: 0,
            capacity: capacity.max(1),
        }
    }

    /// The line's bits: (cached, dirty).
    fn bits(&self, line: u64) -> (bool, bool) {
        let (g, w, m) = place(line);
        match self.groups.get(g) {
            Some(gr) => (gr.held[w] & m != 0, gr.dirty[w] & m != 0),
            None => (false, false),
        }
    }

    /// True if the line is cached.
    pub(crate) fn contains(&self, line: u64) -> bool {
        self.bits(line).0
    }

    /// True if the line is cached and dirty.
    #[cfg(test)]
    pub(crate) fn is_dirty(&self, line: u64) -> bool {
        self.bits(line).1
    }

    /// The cached line at index `i` in address order, if any.
    fn nth(&self, mut i: usize) -> Option<u64> {
        for (g, gr) in self.groups.iter().enumerate() {
            let n = gr.n_held as usize;
            if i < n {
                return select(g, &gr.held, i as u32);
            }
            i -= n;
        }
        None
    }

    /// Brings `line` in (clean if absent) and marks it dirty if `dirty`.
    /// If the cache was full, the line at index `pick(len)` (in address
    /// order) is evicted first and returned with its dirty bit.
    pub(crate) fn insert(
        &mut self,
        line: u64,
        dirty: bool,
        pick: impl FnOnce(usize) -> usize,
    ) -> Option<(u64, bool)> {
        let mut victim = None;
        if !self.contains(line) && self.len >= self.capacity {
            let i = pick(self.len) % self.len;
            if let Some(v) = self.nth(i) {
                victim = Some((v, self.remove(v)));
            }
        }
        let (g, w, m) = place(line);
        if self.groups.len() <= g {
            self.groups.resize(g + 1, Group::default());
        }
        let gr = &mut self.groups[g];
        if gr.held[w] & m == 0 {
            gr.held[w] |= m;
            gr.n_held += 1;
            self.len += 1;
        }
        if dirty && gr.dirty[w] & m == 0 {
            gr.dirty[w] |= m;
            gr.n_dirty += 1;
            self.dirty_total += 1;
        }
        victim
    }

    /// Marks a cached line clean; returns whether it was dirty.
    pub(crate) fn clean(&mut self, line: u64) -> bool {
        let (g, w, m) = place(line);
        let Some(gr) = self.groups.get_mut(g) else {
            return false;
        };
        if gr.dirty[w] & m == 0 {
            return false;
        }
        gr.dirty[w] &= !m;
        gr.n_dirty -= 1;
        self.dirty_total -= 1;
        true
    }

    /// Drops a line; returns whether it was dirty.
    pub(crate) fn remove(&mut self, line: u64) -> bool {
        let (g, w, m) = place(line);
        let Some(gr) = self.groups.get_mut(g) else {
            return false;
        };
        if gr.held[w] & m == 0 {
            return false;
        }
        gr.held[w] &= !m;
        gr.n_held -= 1;
        self.len -= 1;
        self.clean(line)
    }

    /// How many cached lines are dirty.
    pub(crate) fn dirty_count(&self) -> usize {
        self.dirty_total
    }

    /// The dirty line at index `i` among the dirty lines in address order,
    /// if any.
    pub(crate) fn nth_dirty(&self, mut i: usize) -> Option<u64> {
        for (g, gr) in self.groups.iter().enumerate() {
            let n = gr.n_dirty as usize;
            if i < n {
                return select(g, &gr.dirty, i as u32);
            }
            i -= n;
        }
        None
    }

    /// The cached lines, in address order.
    #[cfg(test)]
    pub(crate) fn lines(&self) -> Vec<u64> {
        (0..self.len).filter_map(|i| self.nth(i)).collect()
    }

    /// The dirty lines, in address order.
    #[cfg(test)]
    pub(crate) fn dirty_lines(&self) -> impl Iterator<Item = u64> + '_ {
        (0..self.dirty_total).filter_map(|i| self.nth_dirty(i))
    }
}

/// The DIMM behind the memory controller: lines reach the write pending
/// queue (persistent under ADR) one write latency after they leave the
/// core, unless the DIMM's buffer is full: the media writes XPLines from
/// the XPBuffer at its write bandwidth, and a line that would need a
/// media write waits until the XPLines queued before it fit in the
/// buffer's [`PmemTiming::xpbuffer_xplines`] with its own (so up to 16 KiB
/// of writes overlap the media's drain, as behind a real buffer, and a
/// longer burst runs at the media bandwidth). A line whose XPLine is
/// not in the XPBuffer costs one media write of an XPLine (write
/// amplification of small random writes, Izraelevitz et al. 2019, 5.1).
/// The write pending queue in front of the DIMM is not modelled apart:
/// its depth is not published, and the XPBuffer bounds the backlog.
#[derive(Clone, Debug, Default)]
pub(crate) struct Media {
    /// XPLines in the XPBuffer, oldest first.
    xpbuffer: VecDeque<u64>,
    /// When the media has written everything queued so far.
    busy_until: SimTime,
    /// The line of the last read miss (sequential reads are faster).
    last_read: Option<u64>,
    /// The XPLine of the last media read.
    last_read_xpline: Option<u64>,
}

/// What a line write cost on the media side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LineWrite {
    /// When the line is in the write pending queue.
    pub(crate) done: SimTime,
    /// True if it cost a media write (its XPLine was not buffered).
    pub(crate) media_write: bool,
}

/// The XPLine holding PM offset `line`: a shift for a power-of-two
/// XPLine (the 256 bytes of every profile; a division is tens of cycles
/// on every miss and line write), else a division.
#[inline]
fn xpline_of(line: u64, t: &PmemTiming) -> u64 {
    let x = t.xpline.max(1);
    if x.is_power_of_two() {
        line >> x.trailing_zeros()
    } else {
        line / x
    }
}

impl Media {
    /// A 64-byte line at PM offset `line` leaves the core at `now`.
    pub(crate) fn write_line(&mut self, now: SimTime, line: u64, t: &PmemTiming) -> LineWrite {
        let xp = xpline_of(line, t);
        let media_write = !self.xpbuffer.contains(&xp);
        // The line is taken unless the buffer is full: the XPLines queued
        // and not yet written, with this one, must fit in the XPBuffer.
        let one = SimDuration::for_bytes(t.xpline, t.write_bandwidth);
        let room = SimDuration::from_ps(one.as_ps() * t.xpbuffer_xplines.max(1) as u64);
        let full_until = if media_write {
            SimTime::ZERO
                + SimDuration::from_ps(self.busy_until.as_ps().saturating_sub(room.as_ps() - one.as_ps()))
        } else {
            SimTime::ZERO
        };
        let done = (now + t.write_latency).max(full_until);
        if media_write {
            self.xpbuffer.push_back(xp);
            while self.xpbuffer.len() > t.xpbuffer_xplines.max(1) {
                self.xpbuffer.pop_front();
            }
            self.busy_until = self.busy_until.max(now) + SimDuration::for_bytes(t.xpline, t.write_bandwidth);
        }
        LineWrite { done, media_write }
    }

    /// A cache miss reads the 64-byte line at `line`: its latency, and
    /// whether it cost a media read (an XPLine other than the last one
    /// read).
    pub(crate) fn read_line(&mut self, line: u64, t: &PmemTiming) -> (SimDuration, bool) {
        let sequential = self.last_read.is_some_and(|l| l + 64 == line);
        self.last_read = Some(line);
        let xp = xpline_of(line, t);
        let media_read = self.last_read_xpline != Some(xp);
        self.last_read_xpline = Some(xp);
        let mut lat = if sequential {
            t.read_latency_sequential
        } else {
            t.read_latency_random
        };
        if media_read {
            lat += SimDuration::for_bytes(64, t.read_bandwidth);
        }
        (lat, media_read)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_xpline_of_an_offset_is_its_index_in_xpline_units() {
        let mut t = PmemTiming::default();
        assert_eq!(t.xpline, 256);
        for (line, xp) in [(0, 0), (192, 0), (256, 1), (640, 2), (1 << 40, 1 << 32)] {
            assert_eq!(xpline_of(line, &t), xp, "{line}");
        }
        // Not a power of two: divided, as before.
        t.xpline = 300;
        assert_eq!(xpline_of(640, &t), 2);
        assert_eq!(xpline_of(899, &t), 2);
        assert_eq!(xpline_of(900, &t), 3);
        t.xpline = 0;
        assert_eq!(xpline_of(640, &t), 640, "a zero XPLine counts as one byte");
    }

    #[test]
    fn a_full_cache_evicts_the_picked_line_and_keeps_dirty_bits() {
        let mut c = Cache::new(2);
        assert_eq!(c.insert(0, true, |_| 0), None);
        assert_eq!(c.insert(64, false, |_| 0), None);
        assert_eq!(c.insert(64, true, |_| 0), None, "already cached");
        assert!(c.is_dirty(64));
        assert_eq!(c.insert(128, false, |n| n - 1), Some((64, true)));
        assert!(c.contains(0) && c.contains(128) && !c.contains(64));
        assert_eq!(c.dirty_lines().collect::<Vec<_>>(), vec![0]);
        assert!(c.clean(0));
        assert!(!c.clean(0));
        assert!(!c.remove(128));
    }

    #[test]
    fn the_groups_pick_the_same_lines_as_a_map_in_address_order() {
        // A plain ordered map is the model: lines spread over many groups,
        // evicted, cleaned and dropped at random indices; every pick is
        // the line the model's walk in address order finds.
        use std::collections::BTreeMap;
        let mut c = Cache::new(300);
        let mut model: BTreeMap<u64, bool> = BTreeMap::new();
        let mut x = 7u64;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            x >> 33
        };
        for _ in 0..5000 {
            let line = (next() % 4096) * 64;
            let dirty = next() % 3 == 0;
            let r = next() as usize;
            let victim = c.insert(line, dirty, |_| r);
            let mut expect = None;
            if !model.contains_key(&line) && model.len() >= 300 {
                let v = *model.keys().nth(r % model.len()).expect("full");
                expect = model.remove(&v).map(|d| (v, d));
            }
            *model.entry(line).or_insert(false) |= dirty;
            assert_eq!(victim, expect);
            let dirty_now: Vec<u64> = model.iter().filter(|(_, d)| **d).map(|(l, _)| *l).collect();
            assert_eq!(c.dirty_count(), dirty_now.len());
            if !dirty_now.is_empty() {
                let k = next() as usize % dirty_now.len();
                assert_eq!(c.nth_dirty(k), Some(dirty_now[k]));
                if next() % 4 == 0 {
                    assert!(c.clean(dirty_now[k]));
                    model.insert(dirty_now[k], false);
                }
            }
            if next() % 5 == 0 {
                assert_eq!(c.remove(line), model.remove(&line).unwrap_or(false));
            }
            assert_eq!(c.lines(), model.keys().copied().collect::<Vec<_>>());
        }
    }

    #[test]
    fn small_random_writes_cost_a_media_write_each_and_sequential_ones_share_it() {
        let t = PmemTiming::default();
        let mut m = Media::default();
        let now = SimTime::ZERO;
        let writes: Vec<_> = (0..4)
            .map(|i| m.write_line(now, i * 64, &t).media_write)
            .collect();
        assert_eq!(writes, vec![true, false, false, false], "one XPLine");
        let mut m = Media::default();
        let far: Vec<_> = (0..4)
            .map(|i| m.write_line(now, i * 4096, &t).media_write)
            .collect();
        assert_eq!(far, vec![true; 4]);
        let first = Media::default().write_line(now, 0, &t);
        assert_eq!(
            first.done,
            now + t.write_latency,
            "an idle DIMM takes the write latency"
        );
    }

    #[test]
    fn the_media_bandwidth_delays_writes_that_outrun_the_buffer() {
        let t = PmemTiming::default();
        let mut m = Media::default();
        let done: Vec<SimTime> = (0..1000u64)
            .map(|i| m.write_line(SimTime::ZERO, i * 256, &t).done)
            .collect();
        // The first 64 XPLines fill the XPBuffer and are taken at once.
        assert!(done[..64].iter().all(|&d| d == SimTime::ZERO + t.write_latency));
        assert!(
            done[64] > SimTime::ZERO + t.write_latency,
            "the 65th waits for room"
        );
        // 1000 XPLines of 256 bytes at 2.3 GB/s: about 111 us for the
        // media, the last taken when 63 are still to be written (about
        // 7 us before the end).
        let us = done[999].since(SimTime::ZERO).as_us_f64();
        assert!((103.0..106.0).contains(&us), "{us}");
    }

    #[test]
    fn with_a_one_line_buffer_a_write_waits_for_the_media() {
        let t = PmemTiming {
            xpbuffer_xplines: 1,
            ..PmemTiming::default()
        };
        let mut m = Media::default();
        let mut last = SimTime::ZERO;
        for i in 0..1000u64 {
            last = m.write_line(SimTime::ZERO, i * 256, &t).done;
        }
        let us = last.since(SimTime::ZERO).as_us_f64();
        assert!((110.0..113.0).contains(&us), "{us}");
    }

    #[test]
    fn sequential_misses_are_faster_than_random_ones() {
        let t = PmemTiming::default();
        let mut m = Media::default();
        let (first, r) = m.read_line(0, &t);
        let (next, _) = m.read_line(64, &t);
        let (far, _) = m.read_line(1 << 20, &t);
        assert!(r);
        assert!(next < first && far >= first);
    }
}
