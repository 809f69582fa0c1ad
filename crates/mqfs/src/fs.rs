//! The mounted file system: device I/O through the block layer, the
//! superblock, the inode and buffer caches, and block and inode allocation.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use ccnvme::{Bio, BioFlags, BlockDevice};
use pcie_sim::{HostAddr, Machine, SimDuration};
use tokio::sync::{Mutex, Semaphore, SemaphorePermit};

use crate::cache::{BufferCache, CachedBlock, FilePages};
use crate::dirty::{DirtyIndex, DirtyMeta};
use crate::error::FsError;
use crate::extent_tree::ExtentTree;
use crate::journal::Journal;
use crate::layout::{
    decode_node, encode_node, Extent, Inode, Mode, Superblock, BLOCK, INODE_SIZE, MAX_EXTENT_LEN,
};
use crate::profile::FsProfile;
use crate::volume::Submitted;

/// An inode number.
pub type Ino = u32;

/// The calling simulated thread: the core it runs on (its hardware queue
/// and, in `mq` mode, journal area). The one of the shared file-system
/// interface.
pub use fsapi::Ctx;

/// In-memory state of an inode.
#[derive(Debug)]
pub struct InodeState {
    /// Its number.
    pub ino: Ino,
    /// The inode (authoritative; written into its table block on change).
    pub inode: RefCell<Inode>,
    /// Serializes operations on the inode (Linux's i_rwsem).
    pub lock: Mutex<()>,
    /// Cached file data.
    pub pages: FilePages,
    /// Metadata blocks changed on behalf of this inode and not yet synced
    /// (what an `mq` or `none` fsync of it must persist).
    pub dirty_meta: DirtyMeta,
    /// Fields other than timestamps changed since the last sync (decides
    /// whether fdatasync / fdataatomic must include the inode).
    pub size_dirty: Cell<bool>,
    /// Data blocks allocated since the last sync (their old content is
    /// dead, so an atomic sync may write them in place; `docs/decisions.md` M12).
    pub new_blocks: RefCell<BTreeSet<u64>>,
    /// Blocks reused from metadata that this inode's next transaction must
    /// revoke (selective revocation, ccNVMe 5.4).
    pub revokes: RefCell<BTreeSet<u64>>,
    /// Data written home outside a sync (O_DIRECT, sync_file_range) since
    /// the last durable sync, with no FLUSH after it: the next fsync must
    /// flush even when it finds nothing dirty (ext4_sync_file's
    /// `blkdev_issue_flush`, fs/ext4/fsync.c).
    pub unflushed: Cell<bool>,
    /// Open file descriptions ([`Fs::open`]); an inode whose last name
    /// goes while it is open stays, an orphan, until the last close.
    pub open: Cell<u32>,
    /// The directory that got a new entry naming this inode since the
    /// inode was last synced (Linux's `EXT4_STATE_NEWENTRY` and the
    /// dentry's parent): an Ext4-NJ fsync syncs that directory too
    /// (fs/ext4/fsync.c `ext4_sync_parent`).
    pub new_entry: Cell<Option<Ino>>,
}

/// The mounted file system.
pub struct Fs {
    /// The drive or striped volume every block goes to ([`crate::volume`]).
    pub(crate) vol: crate::volume::Volume,
    pub(crate) machine: Machine,
    pub(crate) sb: RefCell<Superblock>,
    pub(crate) profile: FsProfile,
    pub(crate) bufs: BufferCache,
    pub(crate) inodes: RefCell<BTreeMap<Ino, Rc<InodeState>>>,
    /// Which cached inodes own each unsynced metadata block.
    pub(crate) dirty_index: Rc<DirtyIndex>,
    pub(crate) journal: RefCell<Option<Journal>>,
    /// Global transaction id counter (ccNVMe 5.1 linearization point).
    pub(crate) next_txid: Cell<u64>,
    pub(crate) readonly: Cell<bool>,
    /// The block allocator's preallocations ([`crate::mballoc`]).
    pub(crate) mb: crate::mballoc::Mballoc,
    /// Inode allocation hint.
    pub(crate) next_ino: Cell<u32>,
    /// Serializes namespace changes that span directories (rename).
    pub(crate) rename_lock: Mutex<()>,
    /// The operation gate: operations hold one permit, a journal snapshot
    /// takes them all (see `ops.rs`).
    pub(crate) gate: Semaphore,
    /// Host pages recycled for I/O.
    pub(crate) pages: Rc<RefCell<Vec<HostAddr>>>,
    /// The clock's reading at mount in ns since 1970: the larger of
    /// [`FsProfile::clock_base_ns`] and the image's newest time + 1
    /// ([`Superblock::newest_time`]); see [`Fs::now_ns`].
    pub(crate) clock_base: Cell<u64>,
    /// Simulated time at mount in ns (the clock counts from it).
    pub(crate) clock_start: Cell<u64>,
    /// Damaged transactions this mount's recovery did not replay.
    pub(crate) journal_damage: RefCell<Vec<crate::journal::JournalDamage>>,
    /// The periodic writeback's state ([`crate::flusher`]).
    pub(crate) flusher: crate::flusher::Flusher,
}

/// Held by an operation for its duration: one permit of the gate,
/// returned when dropped.
#[derive(Debug)]
pub struct OpGuard<'a> {
    pub(crate) _permit: SemaphorePermit<'a>,
}

/// Every permit of the gate: no operation is half-way while it is held
/// (a journal snapshot). Returned when dropped.
#[derive(Debug)]
pub(crate) struct Frozen<'a> {
    _permits: SemaphorePermit<'a>,
}

impl Fs {
    /// Waits until no operation is half-way and keeps new ones out until the
    /// returned guard is dropped. The gate is FIFO: operations that arrive
    /// after this call wait behind it.
    pub(crate) async fn freeze(&self) -> Frozen<'_> {
        match self.gate.acquire_many(crate::ops::GATE).await {
            Ok(permits) => Frozen { _permits: permits },
            Err(_) => unreachable!("the operation gate is never closed"),
        }
    }
}

impl std::fmt::Debug for Fs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fs").field("mode", &self.mode()).finish()
    }
}

impl Fs {
    /// The consistency mode.
    pub fn mode(&self) -> Mode {
        self.sb.borrow().mode
    }

    /// A copy of the superblock.
    pub fn superblock(&self) -> Superblock {
        self.sb.borrow().clone()
    }

    /// The block device (a striped volume's first member).
    pub fn device(&self) -> &Rc<BlockDevice> {
        self.vol.first()
    }

    /// The volume: its devices and how blocks map onto them.
    pub fn volume(&self) -> &crate::volume::Volume {
        &self.vol
    }

    /// The machine.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The profile.
    pub fn profile(&self) -> &FsProfile {
        &self.profile
    }

    /// Charges `d` of CPU time to the calling thread's core.
    pub(crate) async fn cpu(&self, ctx: Ctx, d: SimDuration) {
        if let Ok(core) = self.machine.core(self.core_of(ctx)) {
            core.busy(d).await;
        }
    }

    /// The calling thread slept (on another thread) and is woken: one
    /// wake-up and context switch costing `cost` on its core
    /// ([`pcie_sim::Core::wake_up`]).
    pub(crate) async fn woken(&self, ctx: Ctx, cost: SimDuration) {
        if let Ok(core) = self.machine.core(self.core_of(ctx)) {
            core.wake_up(cost).await;
        }
    }

    /// Charges `c` cycles to the calling thread's core.
    pub(crate) async fn cycles(&self, ctx: Ctx, c: pcie_sim::Cycles) {
        if let Ok(core) = self.machine.core(self.core_of(ctx)) {
            core.compute(c).await;
        }
    }

    fn core_of(&self, ctx: Ctx) -> usize {
        ctx.core % self.machine.core_count().max(1)
    }

    /// The file system's clock in ns since 1970 (for timestamps): the base
    /// chosen at mount plus the simulated time since the mount. The base is
    /// an input (never the wall clock: the simulation stays deterministic),
    /// and never below the image's newest time + 1, so the clock never goes
    /// back across mounts (`docs/decisions.md` M17).
    pub fn now_ns(&self) -> u64 {
        self.clock_base.get().saturating_add(self.since_mount_ns())
    }

    /// Simulated ns since the mount started the clock.
    fn since_mount_ns(&self) -> u64 {
        (self.machine.sim().now().as_ps() / 1000).saturating_sub(self.clock_start.get())
    }

    /// The time file timestamps carry (Linux `current_time`): the clock
    /// as of its last tick ([`crate::FsProfile::timestamp_tick`]), ticks
    /// counted from the mount. Two changes within one tick get the same
    /// time; [`Fs::now_ns`] is the clock itself.
    pub fn current_time(&self) -> u64 {
        let tick = self.profile.timestamp_tick.as_ps() / 1000;
        let since = self.since_mount_ns();
        let at_tick = since.checked_div(tick).map_or(since, |n| n * tick);
        self.clock_base.get().saturating_add(at_tick)
    }

    /// Moves the clock forward to at least `ns` (never back; simulated time
    /// is not touched): a front end serving real programs calls it with
    /// the host's time before each request, so the clock runs while the
    /// simulation idles between requests as a kernel's does (a program
    /// that sleeps a second between two changes sees their ctimes a second
    /// apart, as POSIX conformance suites check). `docs/decisions.md` M17.
    pub fn clock_at_least(&self, ns: u64) {
        let now = self.now_ns();
        if ns > now {
            self.clock_base
                .set(self.clock_base.get().saturating_add(ns - now));
        }
    }

    /// Starts the clock at mount: base `max(profile base, newest + 1)`
    /// where `newest` is the newest time the superblock records.
    pub(crate) fn start_clock(&self, newest: u64) {
        self.clock_start.set(self.machine.sim().now().as_ps() / 1000);
        self.clock_base
            .set(self.profile.clock_base_ns.max(newest.saturating_add(1)));
    }

    pub(crate) fn journal(&self) -> Result<Journal, FsError> {
        self.journal
            .borrow()
            .clone()
            .ok_or_else(|| FsError::Unsupported("not mounted".into()))
    }

    pub(crate) fn check_writable(&self) -> Result<(), FsError> {
        if self.readonly.get() {
            Err(FsError::ReadOnly)
        } else {
            Ok(())
        }
    }

    // ---- device I/O ----

    pub(crate) fn take_page_pub(&self) -> Result<HostAddr, FsError> {
        self.take_page()
    }

    fn take_page(&self) -> Result<HostAddr, FsError> {
        if let Some(p) = self.pages.borrow_mut().pop() {
            return Ok(p);
        }
        Ok(self.machine.memory().alloc(BLOCK as u64)?)
    }

    fn put_page(&self, p: HostAddr) {
        self.pages.borrow_mut().push(p);
    }

    /// HoraeFS's ordering queue when it redirects in-place writes (a
    /// p-area): reads and unordered writes must go through it.
    fn redirecting_queue(&self) -> Option<Rc<ccnvme::horae::OrderingQueue>> {
        match &*self.journal.borrow() {
            Some(crate::journal::Journal::Jbd(j)) => j.ordering_queue().filter(|q| q.redirects()).cloned(),
            _ => None,
        }
    }

    /// Reads volume block `b` (bypassing the cache). HoraeFS reads through
    /// the ordering layer's IPU tree: the newest content of a block
    /// overwritten in place may be in the p-area (Horae 5.4 "Read").
    pub(crate) async fn read_raw(&self, ctx: Ctx, b: u64) -> Result<Box<[u8; BLOCK]>, FsError> {
        let page = self.take_page()?;
        let r = match self.redirecting_queue() {
            Some(q) => match self.vol.map(b) {
                Ok((member, lba)) => q
                    .read(self.core_of(ctx), member as u8, &Bio::read(lba, vec![page]))
                    .await
                    .map_err(FsError::from),
                Err(e) => Err(e),
            },
            None => self.vol.read(self.core_of(ctx), b, page).await,
        };
        let mut out = Box::new([0u8; BLOCK]);
        let copied = self.machine.memory().read(page, &mut out[..]);
        self.put_page(page);
        r?;
        copied?;
        Ok(out)
    }

    /// Starts writing `data` to volume block `b` with `flags` and returns
    /// its handle; the data is copied into a host page first (charged).
    pub(crate) async fn write_start(
        &self,
        ctx: Ctx,
        b: u64,
        data: &[u8; BLOCK],
        flags: BioFlags,
    ) -> Result<Submitted, FsError> {
        let page = self.take_page()?;
        let core = self.machine.core(self.core_of(ctx))?;
        core.write_mem(page, &data[..]).await?;
        let flush_members = self.profile.md_flush_members;
        match self
            .vol
            .submit_write(self.core_of(ctx), b, page, flags, flush_members)
            .await
        {
            Ok(s) => Ok(s),
            Err(e) => {
                self.put_page(page);
                Err(e)
            }
        }
    }

    /// Waits for writes started with [`Fs::write_start`] and recycles their
    /// pages.
    pub(crate) async fn write_wait(&self, ctx: Ctx, started: Vec<Submitted>) -> Result<(), FsError> {
        let mut err = None;
        for w in started {
            let s = self.vol.wait(self.core_of(ctx), w.member, &w.done).await;
            self.put_page(w.page);
            if let (Err(e), None) = (s, &err) {
                err = Some(e);
            }
        }
        match err {
            Some(e) => {
                self.readonly.set(true);
                Err(e)
            }
            None => Ok(()),
        }
    }

    /// Writes blocks and waits for all of them.
    pub(crate) async fn write_all(
        &self,
        ctx: Ctx,
        blocks: &[(u64, Box<[u8; BLOCK]>)],
        flags: BioFlags,
    ) -> Result<(), FsError> {
        let started = self.start_all(ctx, blocks, flags).await?;
        self.write_wait(ctx, started).await
    }

    /// Starts writing blocks, in order, without waiting: the handles, one
    /// per block, for [`Fs::write_wait`].
    pub(crate) async fn start_all(
        &self,
        ctx: Ctx,
        blocks: &[(u64, Box<[u8; BLOCK]>)],
        flags: BioFlags,
    ) -> Result<Vec<Submitted>, FsError> {
        // HoraeFS: a block still redirected to the p-area is committed
        // home first, or the older prepare write's commit would overwrite
        // this unordered write.
        if let Some(q) = self.redirecting_queue() {
            let mut by_member: BTreeMap<usize, Vec<u64>> = BTreeMap::new();
            for (b, _) in blocks {
                let (member, lba) = self.vol.map(*b)?;
                by_member.entry(member).or_default().push(lba);
            }
            for (member, lbas) in by_member {
                q.settle(self.core_of(ctx), member as u8, &lbas).await?;
            }
        }
        let mut started = Vec::with_capacity(blocks.len());
        for (b, data) in blocks {
            started.push(self.write_start(ctx, *b, data, flags).await?);
        }
        Ok(started)
    }

    /// Flushes the volatile cache of every device of the volume (dropped
    /// by the block layer on a device without one).
    pub(crate) async fn flush(&self, ctx: Ctx) -> Result<(), FsError> {
        self.vol.flush(self.core_of(ctx)).await
    }

    // ---- metadata blocks ----

    /// The cached metadata block `b`, read on a miss.
    pub(crate) async fn meta(&self, ctx: Ctx, b: u64) -> Result<Rc<CachedBlock>, FsError> {
        if let Some(c) = self.bufs.get(b) {
            return Ok(c);
        }
        let data = self.read_raw(ctx, b).await?;
        if let Some(c) = self.bufs.get(b) {
            return Ok(c); // filled by another thread meanwhile
        }
        let c = CachedBlock::new(data);
        self.bufs.insert(b, c.clone());
        Ok(c)
    }

    /// A metadata block that is about to be fully overwritten (a new
    /// directory or extent block): no read.
    pub(crate) fn meta_new(&self, b: u64) -> Rc<CachedBlock> {
        let c = CachedBlock::new(Box::new([0u8; BLOCK]));
        self.bufs.insert(b, c.clone());
        c
    }

    /// Records that metadata block `b` changed on behalf of `owners`.
    pub(crate) fn dirtied(&self, b: u64, owners: &[&InodeState]) {
        for o in owners {
            o.dirty_meta.insert(b);
        }
        self.note_dirty_buffer();
        if let Some(j) = self.journal.borrow().as_ref() {
            let inos: Vec<Ino> = owners.iter().map(|o| o.ino).collect();
            j.note_dirty(b, &inos);
        }
    }

    // ---- inodes ----

    /// The in-memory inode `ino`, loaded on a miss. Fails on a free or
    /// damaged inode.
    pub async fn iget(&self, ctx: Ctx, ino: Ino) -> Result<Rc<InodeState>, FsError> {
        if let Some(i) = self.inodes.borrow().get(&ino) {
            return Ok(i.clone());
        }
        let (blk, off) = self.sb.borrow().inode_location(ino)?;
        let buf = self.meta(ctx, blk).await?;
        let mut inode = Inode::decode(&buf.data()[off..off + INODE_SIZE])?;
        if inode.is_free() {
            return Err(FsError::Corrupt(format!("inode {ino} is free but referenced")));
        }
        if inode.xattr != 0 {
            self.check_block(inode.xattr)?;
        }
        self.load_tree(ctx, &mut inode.tree).await?;
        for e in &inode.tree.extents() {
            if e.len == 0
                || !self.sb.borrow().is_data_block(e.physical)
                || !self.sb.borrow().is_data_block(e.physical + e.len as u64 - 1)
                // An extent may not cross a group's bitmaps and table.
                || self.sb.borrow().group_of(e.physical) != self.sb.borrow().group_of(e.physical + e.len as u64 - 1)
            {
                return Err(FsError::Corrupt(format!(
                    "inode {ino}: extent outside the data area"
                )));
            }
        }
        if let Some(i) = self.inodes.borrow().get(&ino) {
            return Ok(i.clone());
        }
        let st = Rc::new(InodeState {
            ino,
            inode: RefCell::new(inode),
            lock: Mutex::new(()),
            pages: FilePages::default(),
            dirty_meta: DirtyMeta::new(&self.dirty_index, ino),
            size_dirty: Cell::new(false),
            new_blocks: RefCell::new(BTreeSet::new()),
            revokes: RefCell::new(BTreeSet::new()),
            unflushed: Cell::new(false),
            open: Cell::new(0),
            new_entry: Cell::new(None),
        });
        self.inodes.borrow_mut().insert(ino, st.clone());
        Ok(st)
    }

    fn check_block(&self, b: u64) -> Result<(), FsError> {
        if self.sb.borrow().is_data_block(b) {
            Ok(())
        } else {
            Err(FsError::Corrupt(format!("block {b} outside the data area")))
        }
    }

    /// Reads the blocks of `tree` (which holds its root), level by level,
    /// and checks the whole tree: a damaged tree is `Corrupt`.
    async fn load_tree(&self, ctx: Ctx, tree: &mut ExtentTree) -> Result<(), FsError> {
        loop {
            let missing = tree.missing_children()?;
            if missing.is_empty() {
                break;
            }
            for (b, depth) in missing {
                self.check_block(b)?;
                let buf = self.meta(ctx, b).await?;
                let node = decode_node(&buf.data()[..], depth)?;
                tree.attach(b, node)?;
            }
        }
        let sb = self.sb.borrow().clone();
        tree.validate(&|b| sb.is_data_block(b))
    }

    /// Writes the extent-tree blocks of `st` that changed into their
    /// buffers, marking them dirty on behalf of the inode, and frees the
    /// ones that left the tree (metadata: a journal revokes them). The tree
    /// blocks are metadata like the inode table: this is the one path by
    /// which they reach the journal or their home.
    pub(crate) async fn write_tree(&self, ctx: Ctx, st: &InodeState) -> Result<(), FsError> {
        let released = st.inode.borrow_mut().tree.take_released();
        for b in released {
            self.free_block(ctx, st, b, true).await?;
        }
        let encoded: Vec<(u64, Box<[u8; BLOCK]>)> = st
            .inode
            .borrow_mut()
            .tree
            .take_dirty()
            .into_iter()
            .map(|(b, depth, node)| (b, encode_node(node, depth)))
            .collect();
        for (b, enc) in encoded {
            // A tree block is always written whole: no read of a new one.
            let buf = match self.bufs.get(b) {
                Some(c) => c,
                None => self.meta_new(b),
            };
            {
                let _g = buf.lock.lock().await;
                buf.modify().copy_from_slice(&enc[..]);
            }
            self.dirtied(b, &[st]);
        }
        Ok(())
    }

    /// Writes the in-memory inode into its table block (and its changed
    /// extent-tree blocks), marking them dirty on behalf of the inode.
    /// Tree edits took their blocks before they changed anything
    /// ([`Fs::map_new`], `install_extents`), so this needs no new block.
    pub(crate) async fn write_inode(&self, ctx: Ctx, st: &InodeState) -> Result<(), FsError> {
        self.cycles(ctx, self.profile.cpu.inode_cycles).await;
        let (blk, off) = self.sb.borrow().inode_location(st.ino)?;
        self.write_tree(ctx, st).await?;
        let buf = self.meta(ctx, blk).await?;
        {
            let _g = buf.lock.lock().await;
            let enc = st.inode.borrow().encode();
            buf.modify()[off..off + INODE_SIZE].copy_from_slice(&enc);
        }
        self.dirtied(blk, &[st]);
        Ok(())
    }

    // ---- allocation ----

    /// Frees block `b` on behalf of `owner`. `was_meta`: it held metadata
    /// (a directory or extent block), so a journal must revoke it.
    pub(crate) async fn free_block(
        &self,
        ctx: Ctx,
        owner: &InodeState,
        b: u64,
        was_meta: bool,
    ) -> Result<(), FsError> {
        self.cycles(ctx, self.profile.cpu.alloc_cycles).await;
        let sb = self.sb.borrow().clone();
        let g = sb
            .group_of(b)
            .ok_or_else(|| FsError::Corrupt(format!("free of block {b}")))?;
        let bit = b - sb.group_start(g);
        let bm = self.meta(ctx, sb.block_bitmap(g)).await?;
        {
            let _l = bm.lock.lock().await;
            let byte = (bit / 8) as usize;
            if bm.data()[byte] & (1 << (bit % 8)) == 0 {
                return Err(FsError::Corrupt(format!("block {b} freed twice")));
            }
            bm.modify()[byte] &= !(1 << (bit % 8));
        }
        self.dirtied(sb.block_bitmap(g), &[owner]);
        if let Some(j) = self.journal.borrow().as_ref() {
            j.note_freed(b);
        }
        // A freed block with a copy in the log is revoked: metadata, and
        // under data=journal file data too (ext4_free_blocks passes
        // EXT4_FREE_BLOCKS_FORGET for journaled data).
        if was_meta {
            self.bufs.remove(b);
        }
        if was_meta || self.profile.data_journal {
            if let Some(j) = self.journal.borrow().as_ref() {
                j.note_freed_meta(b);
            }
        }
        Ok(())
    }

    /// Allocates an inode number in the group of `near` (or after).
    pub(crate) async fn alloc_ino(&self, ctx: Ctx, owner: &InodeState) -> Result<Ino, FsError> {
        self.cycles(ctx, self.profile.cpu.alloc_cycles).await;
        let sb = self.sb.borrow().clone();
        let ipg = sb.inodes_per_group;
        let start = self.next_ino.get().max(crate::layout::FIRST_INO);
        let total = sb.inodes() as u32;
        for step in 0..total {
            let ino = (start - 1 + step) % total + 1;
            if ino < crate::layout::FIRST_INO {
                continue;
            }
            let g = (ino - 1) / ipg;
            let bit = (ino - 1) % ipg;
            let bm = self.meta(ctx, sb.inode_bitmap(g)).await?;
            if bm.data()[(bit / 8) as usize] & (1 << (bit % 8)) != 0 {
                continue;
            }
            {
                let _l = bm.lock.lock().await;
                if bm.data()[(bit / 8) as usize] & (1 << (bit % 8)) != 0 {
                    continue;
                }
                bm.modify()[(bit / 8) as usize] |= 1 << (bit % 8);
            }
            self.dirtied(sb.inode_bitmap(g), &[owner]);
            self.next_ino.set(ino + 1);
            return Ok(ino);
        }
        Err(FsError::NoSpace)
    }

    /// Frees inode number `ino` on behalf of `owner`.
    pub(crate) async fn free_ino(&self, ctx: Ctx, owner: &InodeState, ino: Ino) -> Result<(), FsError> {
        self.cycles(ctx, self.profile.cpu.alloc_cycles).await;
        let sb = self.sb.borrow().clone();
        let ipg = sb.inodes_per_group;
        let g = (ino - 1) / ipg;
        let bit = (ino - 1) % ipg;
        let bm = self.meta(ctx, sb.inode_bitmap(g)).await?;
        {
            let _l = bm.lock.lock().await;
            bm.modify()[(bit / 8) as usize] &= !(1 << (bit % 8));
        }
        self.dirtied(sb.inode_bitmap(g), &[owner]);
        Ok(())
    }

    // ---- block mapping ----

    /// The device block of file block `fb`, if mapped.
    pub(crate) fn bmap(st: &InodeState, fb: u32) -> Option<u64> {
        st.inode
            .borrow()
            .tree
            .lookup(fb)
            .map(|e| e.physical + (fb - e.logical) as u64)
    }

    /// Maps file block `fb` to a newly allocated block (extending the last
    /// extent when contiguous), allocated by [`Fs::mb_new_block`] (goal and
    /// windows). A new extent that needs tree blocks (a split leaf or a
    /// deeper tree) gets them here, before anything changes: without them,
    /// the data block is freed again and the call fails with `NoSpace`, the
    /// file as it was (`write_inode` needs no block then, so a write cannot
    /// fail after it was applied).
    pub(crate) async fn map_new(&self, ctx: Ctx, st: &InodeState, fb: u32) -> Result<u64, FsError> {
        let last = st.inode.borrow().tree.last();
        let b = self.mb_new_block(ctx, st, Some(fb), 0).await?;
        let extend = last.filter(|e| Fs::extends(e, fb, b));
        let need = match extend {
            Some(_) => 0,
            None => st.inode.borrow().tree.blocks_for_insert(fb),
        };
        let mut nodes = Vec::new();
        if need > 0 {
            nodes = self.take_tree_blocks(ctx, st, b, need).await?;
        }
        let mut ino = st.inode.borrow_mut();
        ino.nblocks += 1 + need as u32;
        st.new_blocks.borrow_mut().insert(b);
        match extend {
            Some(e) => ino.tree.replace(e.logical, Extent { len: e.len + 1, ..e }),
            None => {
                let e = Extent {
                    logical: fb,
                    len: 1,
                    physical: b,
                    unwritten: false,
                };
                ino.tree.insert(e, &mut || Fs::next_taken(&mut nodes));
            }
        }
        debug_assert!(nodes.is_empty(), "blocks_for_insert is exact");
        Ok(b)
    }

    /// True if device block `b` for file block `fb` extends `e` (a written
    /// extent: `b` is mapped written).
    fn extends(e: &Extent, fb: u32, b: u64) -> bool {
        e.end() == fb as u64 && e.physical + e.len as u64 == b && e.len < MAX_EXTENT_LEN && !e.unwritten
    }

    /// The next of the blocks an edit took for the tree.
    pub(crate) fn next_taken(nodes: &mut Vec<u64>) -> u64 {
        match nodes.pop() {
            Some(b) => b,
            None => unreachable!("an edit takes exactly the blocks counted for it"),
        }
    }

    /// Takes `n` tree blocks for a new extent whose data block `b` was
    /// just allocated, near it (`ext4_ext_new_meta_block` with the goal
    /// `ext4_ext_find_goal` gives). Without them all, `b` and what was
    /// taken are freed again and the inode is unchanged.
    async fn take_tree_blocks(
        &self,
        ctx: Ctx,
        st: &InodeState,
        b: u64,
        n: usize,
    ) -> Result<Vec<u64>, FsError> {
        let mut taken = Vec::with_capacity(n);
        while taken.len() < n {
            match self.mb_new_block(ctx, st, None, b + 1).await {
                Ok(x) => taken.push(x),
                Err(e) => {
                    for x in taken.into_iter().chain([b]) {
                        self.free_block(ctx, st, x, false).await?;
                    }
                    return Err(e);
                }
            }
        }
        // Popped in allocation order.
        taken.reverse();
        Ok(taken)
    }

    /// Unmaps file blocks at and past `from`, returning the device blocks
    /// to free. Tree blocks left empty leave the tree (freed by
    /// [`Fs::write_tree`]).
    pub(crate) fn unmap_from(st: &InodeState, from: u32) -> Vec<u64> {
        let mut freed = Vec::new();
        let mut ino = st.inode.borrow_mut();
        let nodes_before = ino.tree.node_count();
        // From the end, so each removal leaves the ones before in place.
        for e in ino.tree.extents().into_iter().rev() {
            if e.end() <= from as u64 {
                break;
            }
            if e.logical >= from {
                freed.extend((0..e.len as u64).map(|i| e.physical + i));
                ino.tree.remove(e.logical);
            } else {
                let k = from - e.logical;
                freed.extend((k as u64..e.len as u64).map(|i| e.physical + i));
                ino.tree.replace(e.logical, Extent { len: k, ..e });
            }
        }
        let gone = nodes_before - ino.tree.node_count();
        ino.nblocks = ino.nblocks.saturating_sub((freed.len() + gone) as u32);
        freed
    }
}
