//! The buffer cache (metadata blocks by device block) and the page cache
//! (file data by inode and file block), both in host memory.
//!
//! Each cached block has its bytes, a host page that I/O moves through
//! (the device reaches host memory only by DMA), a dirty flag, and a page
//! lock. The page lock is the one whose contention the paper measures
//! (ccNVMe 5.3, 7.3): an update of a block takes it, and a journal that
//! writes a block without copying it first keeps it until the write is
//! done, so other files sharing the block wait.
//!
//! Each cache keeps the keys of its dirty blocks as their dirty flags
//! change, as Linux tags dirty pages in the page cache's tree
//! (`PAGECACHE_TAG_DIRTY`, set by `__set_page_dirty`, cleared by
//! `clear_page_dirty_for_io`): a sync or a commit finds a file's dirty
//! pages at the cost of their number, not of the file's cached pages (a
//! scan made every fsync of an appended file cost its whole length).

use std::cell::{Cell, Ref, RefCell, RefMut};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::{Rc, Weak};
use std::sync::Arc;

use pcie_sim::{HostAddr, HostMemory};
use tokio::sync::Mutex;

use crate::error::FsError;
use crate::layout::BLOCK;

/// One cached block.
pub struct CachedBlock {
    data: RefCell<Box<[u8; BLOCK]>>,
    page: Cell<Option<HostAddr>>,
    dirty: Cell<bool>,
    /// Bumped at every modification (to tell journaled versions apart).
    version: Cell<u64>,
    /// The version last captured by a journal transaction.
    journaled: Cell<u64>,
    /// The page lock. Shared (`Arc`) so that a journal commit can hold it
    /// across tasks with an owned guard until its I/O completes.
    pub lock: Arc<Mutex<()>>,
    /// Held while the block is written home in place (Linux's buffer lock
    /// as `sync_dirty_buffer` holds it, fs/buffer.c: taken before the
    /// dirty bit is tested, released when the write completes), so that
    /// writes of one block go one at a time and a writer that waited finds
    /// the block clean if the write it waited for carried its change.
    /// Modifiers do not take it.
    pub(crate) write_lock: Arc<Mutex<()>>,
    /// The dirty keys of the cache holding the block, and its key there
    /// (none while in no cache).
    tag: RefCell<Option<(Weak<DirtyKeys>, u64)>>,
}

/// The keys of a cache's dirty blocks.
type DirtyKeys = RefCell<BTreeSet<u64>>;

impl std::fmt::Debug for CachedBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedBlock")
            .field("dirty", &self.dirty.get())
            .field("version", &self.version.get())
            .finish()
    }
}

impl CachedBlock {
    /// A block holding `data`.
    pub fn new(data: Box<[u8; BLOCK]>) -> Rc<CachedBlock> {
        Rc::new(CachedBlock {
            data: RefCell::new(data),
            page: Cell::new(None),
            dirty: Cell::new(false),
            version: Cell::new(0),
            journaled: Cell::new(0),
            lock: Arc::new(Mutex::new(())),
            write_lock: Arc::new(Mutex::new(())),
            tag: RefCell::new(None),
        })
    }

    /// Sets the dirty flag, and the key in the dirty keys of the block's
    /// cache with it.
    fn mark(&self, d: bool) {
        if self.dirty.replace(d) == d {
            return;
        }
        if let Some((keys, key)) = self.tag.borrow().as_ref() {
            if let Some(keys) = keys.upgrade() {
                if d {
                    keys.borrow_mut().insert(*key);
                } else {
                    keys.borrow_mut().remove(key);
                }
            }
        }
    }

    /// The bytes.
    pub fn data(&self) -> Ref<'_, Box<[u8; BLOCK]>> {
        self.data.borrow()
    }

    /// The bytes, for modification: marks the block dirty and bumps its
    /// version.
    pub fn modify(&self) -> RefMut<'_, Box<[u8; BLOCK]>> {
        self.mark(true);
        self.version.set(self.version.get() + 1);
        self.data.borrow_mut()
    }

    /// Replaces the bytes without marking the block dirty (a read filled it).
    pub fn fill(&self, data: &[u8; BLOCK]) {
        self.data.borrow_mut().copy_from_slice(data);
    }

    /// A copy of the bytes (a shadow page).
    pub fn snapshot(&self) -> Box<[u8; BLOCK]> {
        self.data.borrow().clone()
    }

    /// True if modified since last written home.
    pub fn is_dirty(&self) -> bool {
        self.dirty.get()
    }

    /// Marks the block clean (written home) or dirty.
    pub fn set_dirty(&self, d: bool) {
        self.mark(d);
    }

    /// Version counter.
    pub fn version(&self) -> u64 {
        self.version.get()
    }

    /// True if modified since a journal transaction last captured it.
    pub fn needs_journal(&self) -> bool {
        self.version.get() > self.journaled.get()
    }

    /// Records that a journal transaction captured version `v`.
    pub fn set_journaled(&self, v: u64) {
        self.journaled.set(self.journaled.get().max(v));
    }

    /// The host page I/O of this block uses, allocated on first use.
    pub fn page(&self, mem: &HostMemory) -> Result<HostAddr, FsError> {
        if let Some(p) = self.page.get() {
            return Ok(p);
        }
        let p = mem.alloc(BLOCK as u64)?;
        self.page.set(Some(p));
        Ok(p)
    }

    /// Releases the host page.
    pub fn release(&self, mem: &HostMemory) {
        if let Some(p) = self.page.take() {
            let _ = mem.free(p);
        }
    }
}

/// Cached blocks by key, with the keys of the dirty ones (the one
/// mechanism of both caches; see the module doc). Invariant: `dirty` holds
/// exactly the keys whose block is dirty, each block's tag names this
/// map's `dirty` and its key, and a block that leaves the map loses its
/// tag.
#[derive(Debug, Default)]
struct Tagged {
    blocks: RefCell<BTreeMap<u64, Rc<CachedBlock>>>,
    dirty: Rc<DirtyKeys>,
}

impl Tagged {
    fn get(&self, k: u64) -> Option<Rc<CachedBlock>> {
        self.blocks.borrow().get(&k).cloned()
    }

    fn insert(&self, k: u64, blk: Rc<CachedBlock>) {
        *blk.tag.borrow_mut() = Some((Rc::downgrade(&self.dirty), k));
        let dirty = blk.is_dirty();
        if let Some(old) = self.blocks.borrow_mut().insert(k, blk) {
            old.tag.borrow_mut().take();
        }
        if dirty {
            self.dirty.borrow_mut().insert(k);
        } else {
            self.dirty.borrow_mut().remove(&k);
        }
    }

    /// Unties blocks that left the map (their keys are gone from it).
    fn untie<'a>(&self, gone: impl IntoIterator<Item = (u64, &'a Rc<CachedBlock>)>) {
        let mut dirty = self.dirty.borrow_mut();
        for (k, b) in gone {
            b.tag.borrow_mut().take();
            dirty.remove(&k);
        }
    }

    fn remove(&self, k: u64) -> Option<Rc<CachedBlock>> {
        let b = self.blocks.borrow_mut().remove(&k)?;
        self.untie([(k, &b)]);
        Some(b)
    }

    /// The dirty blocks in key order.
    fn dirty(&self) -> Vec<(u64, Rc<CachedBlock>)> {
        let blocks = self.blocks.borrow();
        let v: Vec<(u64, Rc<CachedBlock>)> = self
            .dirty
            .borrow()
            .iter()
            .filter_map(|k| Some((*k, blocks.get(k)?.clone())))
            .collect();
        debug_assert!(
            v.len() == self.dirty.borrow().len()
                && v.iter().all(|(_, b)| b.is_dirty())
                && blocks.values().filter(|b| b.is_dirty()).count() == v.len(),
            "the dirty keys are the keys of the dirty blocks"
        );
        v
    }

    /// Removes the blocks with keys in `keys`; returns them.
    fn remove_range(&self, keys: impl std::ops::RangeBounds<u64>) -> Vec<Rc<CachedBlock>> {
        let mut blocks = self.blocks.borrow_mut();
        let gone: Vec<u64> = blocks.range(keys).map(|(k, _)| *k).collect();
        let out: Vec<(u64, Rc<CachedBlock>)> = gone
            .into_iter()
            .filter_map(|k| Some((k, blocks.remove(&k)?)))
            .collect();
        drop(blocks);
        self.untie(out.iter().map(|(k, b)| (*k, b)));
        out.into_iter().map(|(_, b)| b).collect()
    }

    fn values(&self) -> Vec<Rc<CachedBlock>> {
        self.blocks.borrow().values().cloned().collect()
    }
}

/// Metadata blocks by device block number.
#[derive(Debug, Default)]
pub struct BufferCache {
    blocks: Tagged,
}

impl BufferCache {
    /// The cached block `b`, if present.
    pub fn get(&self, b: u64) -> Option<Rc<CachedBlock>> {
        self.blocks.get(b)
    }

    /// Inserts (or replaces) block `b`.
    pub fn insert(&self, b: u64, blk: Rc<CachedBlock>) {
        self.blocks.insert(b, blk);
    }

    /// Removes block `b` (it was freed).
    pub fn remove(&self, b: u64) -> Option<Rc<CachedBlock>> {
        self.blocks.remove(b)
    }

    /// Dirty blocks, by block number.
    pub fn dirty(&self) -> Vec<(u64, Rc<CachedBlock>)> {
        self.blocks.dirty()
    }
}

/// File data of one inode, by file block.
#[derive(Debug, Default)]
pub struct FilePages {
    pages: Tagged,
}

impl FilePages {
    /// The cached page of file block `fb`, if present.
    pub fn get(&self, fb: u32) -> Option<Rc<CachedBlock>> {
        self.pages.get(u64::from(fb))
    }

    /// Inserts file block `fb`.
    pub fn insert(&self, fb: u32, p: Rc<CachedBlock>) {
        self.pages.insert(u64::from(fb), p);
    }

    /// How many pages are dirty (no copy of the set).
    pub fn dirty_count(&self) -> usize {
        self.pages.dirty.borrow().len()
    }

    /// Dirty pages in file order.
    pub fn dirty(&self) -> Vec<(u32, Rc<CachedBlock>)> {
        self.pages
            .dirty()
            .into_iter()
            .filter_map(|(k, p)| Some((u32::try_from(k).ok()?, p)))
            .collect()
    }

    /// Drops pages at and past file block `from` (truncate); returns them.
    pub fn truncate(&self, from: u32) -> Vec<Rc<CachedBlock>> {
        self.pages.remove_range(u64::from(from)..)
    }

    /// Drops the pages of file blocks `[from, to)` (a punched hole).
    pub fn remove_range(&self, from: u32, to: u32) {
        self.pages
            .remove_range(u64::from(from)..u64::from(to).max(u64::from(from)));
    }

    /// Every page.
    pub fn all(&self) -> Vec<Rc<CachedBlock>> {
        self.pages.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page() -> Rc<CachedBlock> {
        CachedBlock::new(Box::new([0u8; BLOCK]))
    }

    fn dirty_keys(p: &FilePages) -> Vec<u32> {
        p.dirty().into_iter().map(|(k, _)| k).collect()
    }

    #[test]
    fn the_dirty_tag_follows_the_pages_dirty_flags() {
        let p = FilePages::default();
        let (a, b, c) = (page(), page(), page());
        p.insert(1, a.clone());
        p.insert(5, b.clone());
        p.insert(9, c.clone());
        assert!(dirty_keys(&p).is_empty());
        b.modify()[0] = 1;
        a.set_dirty(true);
        assert_eq!(dirty_keys(&p), vec![1, 5]);
        a.set_dirty(false);
        assert_eq!(dirty_keys(&p), vec![5]);
        // A dirty page inserted is tagged at once.
        let d = page();
        d.set_dirty(true);
        p.insert(7, d);
        assert_eq!(dirty_keys(&p), vec![5, 7]);
        // Pages that left (truncate, a punched hole, a replacement) no
        // longer touch the tag: a new page at the same key keeps its own.
        let gone = p.truncate(6);
        assert_eq!(gone.len(), 2);
        assert_eq!(dirty_keys(&p), vec![5]);
        let e = page();
        p.insert(9, e.clone());
        c.set_dirty(true);
        assert_eq!(dirty_keys(&p), vec![5], "a truncated page's flag is its own");
        p.insert(5, page());
        b.set_dirty(true);
        assert!(dirty_keys(&p).is_empty(), "a replaced page's flag is its own");
        e.set_dirty(true);
        p.remove_range(0, 10);
        assert!(dirty_keys(&p).is_empty());
        assert!(p.all().is_empty());
    }

    #[test]
    fn the_buffer_cache_finds_its_dirty_blocks_in_block_order() {
        let bc = BufferCache::default();
        let blocks: Vec<_> = (0..4).map(|_| page()).collect();
        for (i, b) in blocks.iter().enumerate() {
            bc.insert(100 - i as u64, b.clone());
        }
        blocks[0].set_dirty(true);
        blocks[3].modify()[1] = 2;
        let keys: Vec<u64> = bc.dirty().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, vec![97, 100]);
        bc.remove(97);
        blocks[3].set_dirty(false);
        let keys: Vec<u64> = bc.dirty().into_iter().map(|(k, _)| k).collect();
        assert_eq!(keys, vec![100]);
    }
}
