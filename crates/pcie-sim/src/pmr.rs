//! The Persistent Memory Region: byte storage that survives power failure,
//! and the timing of the device-side path that serves it.
//!
//! The storage is a table of copy-on-write 4 KiB pages. Cloning a
//! [`PageStore`] copies only the table (one `Arc` per written page; a page
//! never written is an empty slot that reads as zeros), so a crash state
//! or a fresh machine booting over a crashed image shares every page it does
//! not write. This is what lets crash exploration avoid copying images.

use std::sync::Arc;

use crate::content_hash::{unit_term, ContentHash, Space};
use crate::time::SimDuration;

const PAGE: usize = 4096;

/// Copy-on-write byte storage in 4 KiB pages. Reads past the end read
/// zeros; writes past the end are rejected by the callers (the BAR decode).
#[derive(Clone, Debug)]
pub struct PageStore {
    len: u64,
    /// `None`: a page never written, all zeros (no allocation, nothing to
    /// count on clone or drop: a PMR is mostly such pages).
    pages: Vec<Option<Arc<[u8; PAGE]>>>,
    /// Per page: its contribution to the content hash (0 for zero pages),
    /// or `None` if it was written since last computed.
    page_hash: Vec<Option<ContentHash>>,
    /// Pages written since their hash was computed.
    dirty: Vec<usize>,
    /// XOR of every clean page's contribution.
    total: ContentHash,
}

impl PartialEq for PageStore {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self.pages.iter().zip(&other.pages).all(|(a, b)| match (a, b) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a[..] == b[..],
                (Some(p), None) | (None, Some(p)) => p.iter().all(|&x| x == 0),
            })
    }
}
impl Eq for PageStore {}

impl PageStore {
    /// A zero-filled store of `len` bytes. Every page starts as an empty
    /// slot.
    pub fn zeroed(len: u64) -> Self {
        let n = (len as usize).div_ceil(PAGE);
        PageStore {
            len,
            pages: vec![None; n],
            page_hash: vec![Some(0); n],
            dirty: Vec::new(),
            total: 0,
        }
    }

    /// Size in bytes.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if the store has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies bytes at `offset` into `buf`; bytes past the end read as zero.
    pub fn read(&self, offset: u64, buf: &mut [u8]) {
        let mut done = 0usize;
        while done < buf.len() {
            let off = offset as usize + done;
            let (p, o) = (off / PAGE, off % PAGE);
            let n = (PAGE - o).min(buf.len() - done);
            match self.pages.get(p) {
                Some(Some(page)) => buf[done..done + n].copy_from_slice(&page[o..o + n]),
                _ => buf[done..done + n].fill(0),
            }
            done += n;
        }
    }

    /// Writes `data` at `offset`, copying a page first if it is shared.
    /// Bytes past the end are dropped.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        let mut done = 0usize;
        while done < data.len() {
            let off = offset as usize + done;
            let (p, o) = (off / PAGE, off % PAGE);
            let n = (PAGE - o).min(data.len() - done);
            let Some(slot) = self.pages.get_mut(p) else {
                return;
            };
            let page = slot.get_or_insert_with(|| Arc::new([0u8; PAGE]));
            Arc::make_mut(page)[o..o + n].copy_from_slice(&data[done..done + n]);
            if let Some(old) = self.page_hash[p].take() {
                self.total ^= old;
                self.dirty.push(p);
            }
            done += n;
        }
    }

    /// Writes the bytes of `data` whose bit is set in `mask` (bit i covers
    /// `data[i]`), for partial write-combining lines (at most 64 bytes).
    /// Each run of consecutive set bits is one write.
    pub fn write_masked(&mut self, offset: u64, data: &[u8], mask: u64) {
        let n = data.len().min(64);
        let mut m = if n == 64 { mask } else { mask & ((1u64 << n) - 1) };
        while m != 0 {
            let start = m.trailing_zeros() as usize;
            let end = start + (!(m >> start)).trailing_zeros() as usize;
            self.write(offset + start as u64, &data[start..end]);
            m = if end >= 64 { 0 } else { m & !((1u64 << end) - 1) };
        }
    }

    /// Copies out the whole image (for reports and tests).
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = vec![0; self.len as usize];
        self.read(0, &mut v);
        v
    }

    /// A 128-bit hash of the content ([`crate::content_hash`]): stores
    /// with equal bytes hash equal, whatever pages they share. Kept
    /// incrementally: only pages written since the last call are hashed
    /// again.
    pub fn content_hash(&mut self) -> ContentHash {
        for p in std::mem::take(&mut self.dirty) {
            let h = match &self.pages[p] {
                Some(page) => unit_term(Space::PmrPage, p as u64, &page[..]),
                None => 0,
            };
            self.page_hash[p] = Some(h);
            self.total ^= h;
        }
        self.total ^ ContentHash::from(self.len)
    }

    /// The content hash ([`PageStore::content_hash`]) if no page was
    /// written since it was last computed (`None` then: call that). Lets a
    /// reader holding a shared store use the hash without copying it.
    pub fn current_hash(&self) -> Option<ContentHash> {
        self.dirty
            .is_empty()
            .then(|| self.total ^ ContentHash::from(self.len))
    }

    /// Number of pages that are not shared with any other store.
    pub fn private_pages(&self) -> usize {
        self.pages
            .iter()
            .filter(|p| p.as_ref().is_some_and(|p| Arc::strong_count(p) == 1))
            .count()
    }
}

/// Timing of the device-side path that serves PMR accesses. The paper
/// gives no absolute PMR numbers (ccNVMe 4.3 gives only Figure 5's ratios); these are calibrated to
/// the sources that exist: Horae measured 0.9 us for an 8-byte and 113 us
/// for a 4 KiB MMIO read of a capacitor-backed CMB (Horae 5.2), and
/// ccNVMe's Figure 5 shows a persistent 64-byte write costing 2.5x a
/// non-persistent one (the rest of that shape comes from the CPU's
/// write-combining path, `CpuProfile::wc_line_interval`). See
/// `examples/pmr_calibration.rs` for the check.
#[derive(Clone, Debug, PartialEq)]
pub struct PmrTiming {
    /// Device time to apply one posted write to the PMR's DRAM, fixed part.
    pub write_fixed: SimDuration,
    /// Device time per byte written to the PMR.
    pub write_ps_per_byte: u64,
    /// Device time to answer a read, fixed part (pipelined: a read waits
    /// for earlier writes but does not hold up later requests). With two
    /// link latencies and the CPU's load issue it gives the 0.9 us 8-byte
    /// read (Horae 5.2).
    pub read_fixed: SimDuration,
    /// Device time per byte read.
    pub read_ps_per_byte: u64,
    /// Posted-request credits the device advertises for its BAR ingress
    /// (PCIe 3.0 2.6.1).
    pub posted_credits: u32,
}

impl Default for PmrTiming {
    fn default() -> Self {
        PmrTiming {
            write_fixed: SimDuration::from_ns(50),
            write_ps_per_byte: 0,
            read_fixed: SimDuration::from_ns(460),
            read_ps_per_byte: 0,
            posted_credits: 32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_current_hash_is_known_only_until_a_write() {
        let mut s = PageStore::zeroed(3 * PAGE as u64);
        s.write(5000, &[7; 10]);
        assert_eq!(s.current_hash(), None, "a page written since");
        let h = s.content_hash();
        assert_eq!(s.current_hash(), Some(h));
        s.write(10, &[1]);
        assert_eq!(s.current_hash(), None);
        assert_ne!(s.content_hash(), h);
    }

    #[test]
    fn a_masked_write_writes_exactly_the_bytes_of_its_set_bits() {
        let data: Vec<u8> = (1..=64).collect();
        for (mask, len) in [
            (u64::MAX, 64),
            (u64::MAX, 8),
            (0, 64),
            (0x8000_0000_0000_0001, 64),
            (0x0ff0_00f0_f0f0_ffff, 64),
            (0b1011_0110, 5),
            (u64::MAX << 1, 64),
            (u64::MAX >> 1, 64),
        ] {
            let mut s = PageStore::zeroed(2 * PAGE as u64);
            // Across a page boundary.
            let at = PAGE as u64 - 20;
            s.write_masked(at, &data[..len], mask);
            let mut got = vec![0u8; 64];
            s.read(at, &mut got);
            for (i, &b) in got.iter().enumerate() {
                let want = if i < len && mask & (1 << i) != 0 {
                    data[i]
                } else {
                    0
                };
                assert_eq!(b, want, "mask {mask:#x} len {len} byte {i}");
            }
        }
    }

    #[test]
    fn clones_share_pages_until_written() {
        let mut a = PageStore::zeroed(3 * PAGE as u64 + 10);
        a.write(4090, &[1, 2, 3, 4, 5, 6, 7, 8]);
        let mut b = a.clone();
        assert_eq!(b.private_pages(), 0);
        b.write(0, &[9]);
        let mut buf = [0u8; 8];
        a.read(4090, &mut buf);
        assert_eq!(buf, [1, 2, 3, 4, 5, 6, 7, 8]);
        let mut one = [0u8; 1];
        a.read(0, &mut one);
        assert_eq!(one, [0]);
        b.read(0, &mut one);
        assert_eq!(one, [9]);
        assert_ne!(a, b);
        // Equal bytes, equal hash; a write changes it; writing zeros back
        // restores the all-zero hash.
        let mut c = PageStore::zeroed(3 * PAGE as u64 + 10);
        let zero_hash = c.content_hash();
        c.write(4090, &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(c.content_hash(), a.content_hash());
        assert_ne!(b.content_hash(), a.content_hash());
        c.write(4090, &[0; 8]);
        assert_eq!(c.content_hash(), zero_hash);
        // A written page of zeros equals a page never written.
        assert_eq!(c, PageStore::zeroed(3 * PAGE as u64 + 10));
        assert_ne!(a, PageStore::zeroed(3 * PAGE as u64 + 10));
    }

    #[test]
    fn masked_write_only_touches_enabled_bytes() {
        let mut s = PageStore::zeroed(128);
        let data = [0xaa; 8];
        s.write_masked(64, &data, 0b1010_0101);
        let mut buf = [0u8; 8];
        s.read(64, &mut buf);
        assert_eq!(buf, [0xaa, 0, 0xaa, 0, 0, 0xaa, 0, 0xaa]);
    }

    #[test]
    fn reads_past_end_are_zero_and_writes_are_dropped() {
        let mut s = PageStore::zeroed(16);
        s.write(4096 * 4, &[1]);
        let mut buf = [7u8; 4];
        s.read(4096 * 4, &mut buf);
        assert_eq!(buf, [0; 4]);
    }
}
