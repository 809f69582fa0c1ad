//! Space: the free lists of package slots and data pages, and immediate
//! reclamation with its causal rule (slides, "Package Management (2/2)":
//! "Immediate package reclamation": "① Reason the causal dependency",
//! "② Return to allocator (similar to call free())").
//!
//! A package whose role is over (superseded, or its entry cancelled)
//! returns to the free list at once: a later package overwrites it, and a
//! torn overwrite fails its checksum, so an old package is either whole or
//! gone, and a whole superseded one loses to its successor at recovery.
//!
//! The causal rule: a package that *cancels* another (an unlink or rmdir
//! package, a rename package for the entry it moves and the one it
//! replaces) is evidence recovery needs for as long as the cancelled
//! package can still be read. So a canceller is kept (not freed, even once
//! its own role is over) until every package it cancels is *reclaimed*:
//! its slot overwritten by a later package that is persistent. Freeing it
//! earlier lets a crash leave the cancelled entry without its cancellation
//! and recovery would resurrect the file (the pending table of the WOFS
//! code, `objm.h`).

use fsapi::Errno;
use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Result, WofsError};

/// The allocator's state.
#[derive(Clone, Debug, Default)]
pub struct Space {
    /// Free slots, a stack: the most recently freed is reused first.
    free_slots: Vec<u32>,
    /// Cancelled slot -> the cancellers waiting for it to be overwritten.
    holders: BTreeMap<u32, BTreeSet<u32>>,
    /// Canceller -> how many of its targets are not yet overwritten.
    waiting: BTreeMap<u32, usize>,
    /// Cancellers whose own role is over, kept only for their targets.
    retired: BTreeSet<u32>,
    /// Free data pages, a stack.
    free_pages: Vec<u32>,
    /// Fault switch: free cancellers at once ([`crate::Faults::early_unlink_reclaim`]).
    early_reclaim: bool,
    /// Slots and pages taken or given back since [`Space::take_ops`].
    ops: u64,
}

/// How the slots and pages are used (for tests and reports).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Free package slots.
    pub free_slots: usize,
    /// Slots kept only by the causal rule (retired cancellers).
    pub held_slots: usize,
    /// Free data pages.
    pub free_pages: usize,
}

impl Space {
    /// An allocator with `free_slots` and `free_pages` free (each given in
    /// ascending order; the lowest is handed out first).
    pub fn new(free_slots: Vec<u32>, free_pages: Vec<u32>, early_reclaim: bool) -> Space {
        let mut s = Space {
            free_slots,
            free_pages,
            early_reclaim,
            ..Space::default()
        };
        s.free_slots.reverse();
        s.free_pages.reverse();
        s
    }

    /// Takes a free slot.
    pub fn alloc_slot(&mut self) -> Result<u32> {
        self.ops += 1;
        self.free_slots
            .pop()
            .ok_or(WofsError::Fs(Errno::NoSpace("package slots")))
    }

    /// Gives back a slot whose new package was never made persistent.
    pub fn unalloc_slot(&mut self, slot: u32) {
        self.ops += 1;
        self.free_slots.push(slot);
    }

    /// A package is now persistent in `slot`: whatever the slot held
    /// before is reclaimed, and cancellers waiting only for it are freed.
    pub fn overwritten(&mut self, slot: u32) {
        for c in self.holders.remove(&slot).unwrap_or_default() {
            let left = self.waiting.get_mut(&c).map(|n| {
                *n = n.saturating_sub(1);
                *n
            });
            if left == Some(0) {
                self.waiting.remove(&c);
                if self.retired.remove(&c) {
                    self.free_slots.push(c);
                }
            }
        }
    }

    /// `canceller` cancels the package in `target`: it is kept until
    /// `target` is overwritten (the causal rule).
    pub fn hold(&mut self, canceller: u32, target: u32) {
        if self.early_reclaim {
            return;
        }
        if self.holders.entry(target).or_default().insert(canceller) {
            *self.waiting.entry(canceller).or_default() += 1;
        }
    }

    /// The package in `slot` has no role of its own any more: freed now,
    /// or when its last cancelled target is overwritten.
    pub fn retire(&mut self, slot: u32) {
        self.ops += 1;
        if self.waiting.contains_key(&slot) {
            self.retired.insert(slot);
        } else {
            self.free_slots.push(slot);
        }
    }

    /// Takes a free data page.
    pub fn alloc_page(&mut self) -> Result<u32> {
        self.ops += 1;
        self.free_pages
            .pop()
            .ok_or(WofsError::Fs(Errno::NoSpace("data pages")))
    }

    /// Frees data page `page` (0, a hole, is ignored).
    pub fn free_page(&mut self, page: u32) {
        self.ops += 1;
        if page != 0 {
            self.free_pages.push(page);
        }
    }

    /// Slots and pages taken or given back since the last call (the
    /// allocator's share of a call's DRAM work).
    pub fn take_ops(&mut self) -> u64 {
        std::mem::take(&mut self.ops)
    }

    /// How the space is used.
    pub fn usage(&self) -> Usage {
        Usage {
            free_slots: self.free_slots.len(),
            held_slots: self.retired.len(),
            free_pages: self.free_pages.len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unlink_package_is_kept_until_its_create_is_overwritten() {
        let mut s = Space::new(vec![0, 1, 2], vec![], false);
        let create = s.alloc_slot().unwrap();
        s.overwritten(create);
        let unlink = s.alloc_slot().unwrap();
        s.overwritten(unlink);
        // The unlink cancels the create: the create is freed, the unlink kept.
        s.retire(create);
        s.hold(unlink, create);
        s.retire(unlink);
        assert_eq!(s.usage().held_slots, 1);
        assert_eq!(
            s.alloc_slot().unwrap(),
            create,
            "the create's slot is reused first"
        );
        s.overwritten(create);
        assert_eq!(
            s.usage(),
            Usage {
                free_slots: 2,
                held_slots: 0,
                free_pages: 0
            }
        );
    }

    #[test]
    fn early_reclaim_frees_the_unlink_first() {
        let mut s = Space::new(vec![0, 1, 2], vec![], true);
        let (create, unlink) = (s.alloc_slot().unwrap(), s.alloc_slot().unwrap());
        s.retire(create);
        s.hold(unlink, create);
        s.retire(unlink);
        assert_eq!(
            s.alloc_slot().unwrap(),
            unlink,
            "the create's package is still readable"
        );
    }
}
