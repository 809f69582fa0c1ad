//! Which inodes own each unsynced metadata block: every inode's set of
//! dirtied metadata blocks ([`DirtyMeta`]) and one reverse index over all
//! of them (`DirtyIndex`, block to owners), kept up to date by every
//! change to a set.
//!
//! The `mq` journal closes a transaction over entanglement (every inode
//! whose unsynced metadata shares a block with the transaction hands its
//! set over, `MqJournal::entangled`). With the reverse index that closure
//! visits each (block, owner) pair once, instead of scanning every cached
//! inode for every transaction (quadratic in the number of inodes when an
//! unmount syncs 100,000 unsynced creates one by one).

use std::cell::{Cell, Ref, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::rc::Rc;

use crate::fs::Ino;

/// An owner in the index: the inode's number and the key of its set (an
/// inode freed and its number reused while the old state is still alive
/// has two sets under one number; the key tells them apart).
pub(crate) type Owner = (Ino, u64);

/// Block to the sets holding it, for every [`DirtyMeta`] of a file system.
#[derive(Default)]
pub(crate) struct DirtyIndex {
    by_block: RefCell<BTreeMap<u64, BTreeSet<Owner>>>,
    next_key: Cell<u64>,
    /// Index entries looked up ([`DirtyIndex::owners`]) or removed so far:
    /// the index work of syncs, which tests check grows linearly.
    work: Cell<u64>,
}

impl DirtyIndex {
    /// A new, empty index.
    pub(crate) fn new() -> Rc<DirtyIndex> {
        Rc::new(DirtyIndex::default())
    }

    /// The sets holding block `b` now, in (number, key) order.
    pub(crate) fn owners(&self, b: u64) -> Vec<Owner> {
        let owners: Vec<Owner> = self
            .by_block
            .borrow()
            .get(&b)
            .map(|o| o.iter().copied().collect())
            .unwrap_or_default();
        self.work.set(self.work.get() + owners.len() as u64);
        owners
    }

    /// Index entries looked up or removed since the mount.
    #[cfg(test)]
    pub(crate) fn work(&self) -> u64 {
        self.work.get()
    }

    fn add(&self, b: u64, owner: Owner) {
        self.by_block.borrow_mut().entry(b).or_default().insert(owner);
    }

    fn remove(&self, b: u64, owner: Owner) {
        self.work.set(self.work.get() + 1);
        let mut by_block = self.by_block.borrow_mut();
        if let Some(o) = by_block.get_mut(&b) {
            o.remove(&owner);
            if o.is_empty() {
                by_block.remove(&b);
            }
        }
    }
}

/// Metadata blocks changed on behalf of one inode and not yet synced (what
/// an `mq` or `none` fsync of it must persist), registered in its file
/// system's `DirtyIndex` (dropping the set unregisters it).
pub struct DirtyMeta {
    owner: Owner,
    set: RefCell<BTreeSet<u64>>,
    index: Rc<DirtyIndex>,
}

impl fmt::Debug for DirtyMeta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.set.borrow().iter()).finish()
    }
}

impl DirtyMeta {
    /// An empty set of inode `ino`, in `index`.
    pub(crate) fn new(index: &Rc<DirtyIndex>, ino: Ino) -> DirtyMeta {
        let key = index.next_key.get();
        index.next_key.set(key + 1);
        DirtyMeta {
            owner: (ino, key),
            set: RefCell::new(BTreeSet::new()),
            index: index.clone(),
        }
    }

    /// This set's entry in the index.
    pub(crate) fn owner(&self) -> Owner {
        self.owner
    }

    /// Adds block `b`.
    pub fn insert(&self, b: u64) {
        if self.set.borrow_mut().insert(b) {
            self.index.add(b, self.owner);
        }
    }

    /// Adds every block of `blocks`.
    pub fn extend(&self, blocks: impl IntoIterator<Item = u64>) {
        for b in blocks {
            self.insert(b);
        }
    }

    /// Adds every block of `other` (another inode's set).
    pub fn absorb(&self, other: &DirtyMeta) {
        let theirs: Vec<u64> = other.set.borrow().iter().copied().collect();
        self.extend(theirs);
    }

    /// Empties the set, returning what it held.
    pub fn take(&self) -> BTreeSet<u64> {
        let taken = std::mem::take(&mut *self.set.borrow_mut());
        for b in &taken {
            self.index.remove(*b, self.owner);
        }
        taken
    }

    /// Empties the set.
    pub fn clear(&self) {
        self.take();
    }

    /// True if the set holds no block.
    pub fn is_empty(&self) -> bool {
        self.set.borrow().is_empty()
    }

    /// The blocks, in order (borrowed: do not change the set meanwhile).
    pub fn blocks(&self) -> Ref<'_, BTreeSet<u64>> {
        self.set.borrow()
    }
}

impl Drop for DirtyMeta {
    fn drop(&mut self) {
        for b in self.set.borrow().iter() {
            self.index.remove(*b, self.owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_follows_every_change_and_a_dropped_set_leaves_it() {
        let index = DirtyIndex::new();
        let a = DirtyMeta::new(&index, 5);
        let b = DirtyMeta::new(&index, 5);
        a.extend([1, 2]);
        b.insert(2);
        assert_eq!(index.owners(2), vec![a.owner(), b.owner()]);
        b.absorb(&a);
        assert_eq!(index.owners(1), vec![a.owner(), b.owner()]);
        assert_eq!(a.take(), BTreeSet::from([1, 2]));
        assert_eq!(index.owners(1), vec![b.owner()]);
        drop(b);
        assert!(index.owners(1).is_empty() && index.owners(2).is_empty());
        assert!(index.by_block.borrow().is_empty());
        // Five entries looked up, four removed.
        assert_eq!(index.work(), 9);
    }
}
