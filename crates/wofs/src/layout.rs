//! Where things are in the persistent memory: the superblock, the package
//! slots and the data pages.
//!
//! ```text
//! 0        4 KiB                      4 KiB + slots * 256       page-aligned
//! | super  | package slots (256 B each) ........ | pad | data pages (4 KiB each)
//! ```
//!
//! Packages live in fixed 256-byte slots (one Optane XPLine, four cache
//! lines), a non-log layout allocated from a free list
//! (slides, "Package Persistence (1/2)": "Non-log layout, using free lists
//! for allocation"). Data page numbers are 1-based; 0 is a hole.

use pcie_sim::PmAddr;

use crate::error::{Result, WofsError};

/// Bytes of one package slot.
pub const SLOT: u64 = 256;
/// Bytes of one data page.
pub const PAGE: u64 = 4096;
/// Bytes of one cache line.
pub const LINE: u64 = 64;
/// Where the package slots begin.
pub const SLOTS_AT: u64 = PAGE;
/// The superblock's magic ("WOFSSUP1").
pub const SUPER_MAGIC: u64 = u64::from_le_bytes(*b"WOFSSUP1");

/// The file system's geometry, as the superblock records it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Package slots.
    pub slots: u32,
    /// Data pages.
    pub pages: u32,
}

impl Geometry {
    /// The geometry mkfs gives persistent memory of `size` bytes with
    /// `slots` package slots: every whole page after them is a data page.
    pub fn for_size(size: u64, slots: u32) -> Result<Geometry> {
        if slots == 0 {
            return Err(WofsError::Geometry("no package slots"));
        }
        let g = Geometry { slots, pages: 0 };
        let first = g.data_at();
        if size <= first {
            return Err(WofsError::Geometry("the package slots fill the memory"));
        }
        let pages =
            u32::try_from((size - first) / PAGE).map_err(|_| WofsError::Geometry("too many pages"))?;
        if pages == 0 {
            return Err(WofsError::Geometry("no room for a data page"));
        }
        Ok(Geometry { slots, pages })
    }

    /// Where the data pages begin (page-aligned, after the slots).
    pub fn data_at(&self) -> u64 {
        (SLOTS_AT + u64::from(self.slots) * SLOT).next_multiple_of(PAGE)
    }

    /// Bytes the layout needs.
    pub fn size(&self) -> u64 {
        self.data_at() + u64::from(self.pages) * PAGE
    }

    /// The address of slot `slot`.
    pub fn slot_addr(&self, slot: u32) -> PmAddr {
        PmAddr(SLOTS_AT + u64::from(slot) * SLOT)
    }

    /// The address of data page `page` (1-based).
    pub fn page_addr(&self, page: u32) -> PmAddr {
        PmAddr(self.data_at() + u64::from(page.saturating_sub(1)) * PAGE)
    }

    /// The superblock's bytes (one cache line).
    pub fn encode(&self) -> [u8; LINE as usize] {
        let mut b = [0u8; LINE as usize];
        b[0..8].copy_from_slice(&SUPER_MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&self.slots.to_le_bytes());
        b[12..16].copy_from_slice(&self.pages.to_le_bytes());
        let crc = crc32fast::hash(&b[0..16]);
        b[16..20].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Reads a superblock, checked against the memory's `size`.
    pub fn decode(b: &[u8; LINE as usize], size: u64) -> Result<Geometry> {
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        if b[0..8] != SUPER_MAGIC.to_le_bytes() {
            return Err(WofsError::NotWofs("no superblock magic"));
        }
        if crc32fast::hash(&b[0..16]) != word(16) {
            return Err(WofsError::NotWofs("superblock checksum"));
        }
        let g = Geometry {
            slots: word(8),
            pages: word(12),
        };
        if g.slots == 0 || g.pages == 0 || g.size() > size {
            return Err(WofsError::NotWofs("geometry does not fit the memory"));
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_superblock_round_trips_and_a_bad_one_is_a_typed_error() {
        let g = Geometry::for_size(1 << 20, 64).unwrap();
        assert_eq!(g.data_at(), 5 * PAGE);
        assert_eq!(g.pages, 256 - 5);
        assert_eq!(Geometry::decode(&g.encode(), 1 << 20).unwrap(), g);
        let mut bad = g.encode();
        bad[9] ^= 1;
        assert!(matches!(
            Geometry::decode(&bad, 1 << 20),
            Err(WofsError::NotWofs(_))
        ));
        assert!(matches!(
            Geometry::decode(&g.encode(), 1 << 16),
            Err(WofsError::NotWofs(_))
        ));
        assert!(Geometry::for_size(8192, 64).is_err());
    }
}
