//! The content-oblivious allocator (paper L98-L106): the whole PM is one
//! pool of 4 KiB pages and 64-byte lines. Its latest view is the DRAM free
//! lists below; its consistent view is the PM bitmap (one bit per line,
//! one 8-byte word per page), which only the persister writes, through
//! [`Alloc::mark`]. Freed space returns to the free lists only once no
//! consistent pointer reaches it (rule C2, paper L111).

use std::collections::{BTreeMap, BTreeSet};

use fsapi::Errno;

use crate::error::FsError;
use crate::layout::{bitmap_word, LINE, LINES_PER_PAGE, PAGE};

/// The allocator's DRAM state.
#[derive(Debug, Default)]
pub(crate) struct Alloc {
    free_pages: BTreeSet<u64>,
    free_lines: BTreeSet<u64>,
    /// The bitmap words as last stored to PM, by page number.
    bitmap: BTreeMap<u64, u64>,
}

impl Alloc {
    /// From a bitmap (word per page), with pages `first..pages` usable.
    pub fn from_bitmap(words: &[u64], first: u64) -> Alloc {
        let mut a = Alloc::default();
        for (p, &w) in words.iter().enumerate() {
            let p = p as u64;
            if w != 0 {
                a.bitmap.insert(p, w);
            }
            if p < first {
                continue;
            }
            if w == 0 {
                a.free_pages.insert(p * PAGE);
            } else if w != u64::MAX {
                for l in 0..LINES_PER_PAGE {
                    if w & (1 << l) == 0 {
                        a.free_lines.insert(p * PAGE + l * LINE);
                    }
                }
            }
        }
        a
    }

    /// A free page (lowest first).
    pub fn page(&mut self) -> Result<u64, FsError> {
        self.free_pages
            .pop_first()
            .ok_or(FsError::Fs(Errno::NoSpace("pages")))
    }

    /// A free line; carves a page into lines when none is left.
    pub fn line(&mut self) -> Result<u64, FsError> {
        if self.free_lines.is_empty() {
            let p = self.page()?;
            self.free_lines.extend((0..LINES_PER_PAGE).map(|l| p + l * LINE));
        }
        self.free_lines
            .pop_first()
            .ok_or(FsError::Fs(Errno::NoSpace("lines")))
    }

    /// Returns a page to the free list (its bitmap bits cleared first).
    pub fn free_page(&mut self, addr: u64) {
        self.free_pages.insert(addr);
    }

    /// Returns a line to the free list (lines are not merged back into
    /// pages).
    pub fn free_line(&mut self, addr: u64) {
        self.free_lines.insert(addr);
    }

    /// Free pages and lines.
    pub fn free_space(&self) -> (usize, usize) {
        (self.free_pages.len(), self.free_lines.len())
    }

    /// Marks `addr` (a line, or with `page` a whole page) allocated or
    /// free in the bitmap shadow: the word to store, if it changed.
    pub fn mark(&mut self, addr: u64, page: bool, set: bool) -> Option<(u64, u64)> {
        let p = addr / PAGE;
        let bits = if page {
            u64::MAX
        } else {
            1u64 << ((addr % PAGE) / LINE)
        };
        let old = self.bitmap.get(&p).copied().unwrap_or(0);
        let new = if set { old | bits } else { old & !bits };
        if new == old {
            return None;
        }
        self.bitmap.insert(p, new);
        Some((bitmap_word(p), new))
    }

    /// True if the bitmap shadow has `addr`'s line allocated.
    #[cfg(test)]
    pub fn is_marked(&self, addr: u64) -> bool {
        let w = self.bitmap.get(&(addr / PAGE)).copied().unwrap_or(0);
        w & (1 << ((addr % PAGE) / LINE)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carve_pages_and_the_bitmap_tracks_marks() {
        let mut a = Alloc::from_bitmap(&[u64::MAX, u64::MAX, 0, 0], 2);
        assert_eq!(a.page().unwrap(), 2 * PAGE);
        let l = a.line().unwrap();
        assert_eq!(l, 3 * PAGE);
        assert_eq!(a.mark(l, false, true), Some((bitmap_word(3), 1)));
        assert!(a.is_marked(l));
        assert_eq!(a.mark(l, false, true), None);
        assert_eq!(a.mark(l, false, false), Some((bitmap_word(3), 0)));
        assert_eq!(a.free_space(), (0, 63));
    }
}
