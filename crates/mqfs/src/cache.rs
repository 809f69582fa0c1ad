//! The buffer cache (metadata blocks by device block) and the page cache
//! (file data by inode and file block), both in host memory.
//!
//! Each cached block has its bytes, a host page that I/O moves through
//! (the device reaches host memory only by DMA), a dirty flag, and a page
//! lock. The page lock is the one whose contention the paper measures
//! (ccNVMe 5.3, 7.3): an update of a block takes it, and a journal that
//! writes a block without copying it first keeps it until the write is
//! done, so other files sharing the block wait.

use std::cell::{Cell, Ref, RefCell, RefMut};
use std::collections::BTreeMap;
use std::rc::Rc;
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
}

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
        })
    }

    /// The bytes.
    pub fn data(&self) -> Ref<'_, Box<[u8; BLOCK]>> {
        self.data.borrow()
    }

    /// The bytes, for modification: marks the block dirty and bumps its
    /// version.
    pub fn modify(&self) -> RefMut<'_, Box<[u8; BLOCK]>> {
        self.dirty.set(true);
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
        self.dirty.set(d);
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

/// Metadata blocks by device block number.
#[derive(Debug, Default)]
pub struct BufferCache {
    blocks: RefCell<BTreeMap<u64, Rc<CachedBlock>>>,
}

impl BufferCache {
    /// The cached block `b`, if present.
    pub fn get(&self, b: u64) -> Option<Rc<CachedBlock>> {
        self.blocks.borrow().get(&b).cloned()
    }

    /// Inserts (or replaces) block `b`.
    pub fn insert(&self, b: u64, blk: Rc<CachedBlock>) {
        self.blocks.borrow_mut().insert(b, blk);
    }

    /// Removes block `b` (it was freed).
    pub fn remove(&self, b: u64) -> Option<Rc<CachedBlock>> {
        self.blocks.borrow_mut().remove(&b)
    }

    /// Dirty blocks, by block number.
    pub fn dirty(&self) -> Vec<(u64, Rc<CachedBlock>)> {
        let mut v: Vec<(u64, Rc<CachedBlock>)> = self
            .blocks
            .borrow()
            .iter()
            .filter(|(_, b)| b.is_dirty())
            .map(|(k, b)| (*k, b.clone()))
            .collect();
        v.sort_by_key(|(k, _)| *k);
        v
    }
}

/// File data of one inode, by file block.
#[derive(Debug, Default)]
pub struct FilePages {
    pages: RefCell<BTreeMap<u32, Rc<CachedBlock>>>,
}

impl FilePages {
    /// The cached page of file block `fb`, if present.
    pub fn get(&self, fb: u32) -> Option<Rc<CachedBlock>> {
        self.pages.borrow().get(&fb).cloned()
    }

    /// Inserts file block `fb`.
    pub fn insert(&self, fb: u32, p: Rc<CachedBlock>) {
        self.pages.borrow_mut().insert(fb, p);
    }

    /// Dirty pages in file order.
    pub fn dirty(&self) -> Vec<(u32, Rc<CachedBlock>)> {
        self.pages
            .borrow()
            .iter()
            .filter(|(_, p)| p.is_dirty())
            .map(|(k, p)| (*k, p.clone()))
            .collect()
    }

    /// Drops pages at and past file block `from` (truncate); returns them.
    pub fn truncate(&self, from: u32) -> Vec<Rc<CachedBlock>> {
        let mut pages = self.pages.borrow_mut();
        let tail = pages.split_off(&from);
        tail.into_values().collect()
    }

    /// Drops the pages of file blocks `[from, to)` (a punched hole).
    pub fn remove_range(&self, from: u32, to: u32) {
        self.pages.borrow_mut().retain(|fb, _| *fb < from || *fb >= to);
    }

    /// Every page.
    pub fn all(&self) -> Vec<Rc<CachedBlock>> {
        self.pages.borrow().values().cloned().collect()
    }
}
