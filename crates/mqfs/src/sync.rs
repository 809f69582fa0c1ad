//! Durability and ordering primitives: fsync, fdatasync, sync, fatomic,
//! fdataatomic, and HoRAE's fbarrier and fdatabarrier, per mode.

use std::collections::BTreeSet;
use std::rc::Rc;

use ccnvme::BioFlags;

use crate::error::FsError;
use crate::fs::{Ctx, Fs, Ino, InodeState};
use crate::journal::mq::SyncKind;
use crate::journal::Journal;
use crate::layout::{FileType, BLOCK};

impl Fs {
    /// Makes `ino`'s data and metadata, and the directory entries that
    /// reach it, durable.
    pub async fn fsync(&self, ctx: Ctx, ino: Ino) -> Result<(), FsError> {
        self.sync_file(ctx, ino, false).await
    }

    /// Like fsync, but skips the inode when only timestamps changed.
    pub async fn fdatasync(&self, ctx: Ctx, ino: Ino) -> Result<(), FsError> {
        self.sync_file(ctx, ino, true).await
    }

    /// MQFS's fatomic (ccNVMe 5.1): the same blocks as fsync, returning
    /// once they are atomic (in the `mq` mode; the other modes have no
    /// weaker primitive and give fsync's guarantee).
    pub async fn fatomic(&self, ctx: Ctx, ino: Ino) -> Result<(), FsError> {
        self.sync_kind(ctx, ino, SyncKind::Fatomic).await
    }

    /// MQFS's fdataatomic: fatomic without the inode when only timestamps
    /// changed.
    pub async fn fdataatomic(&self, ctx: Ctx, ino: Ino) -> Result<(), FsError> {
        self.sync_kind(ctx, ino, SyncKind::Fdataatomic).await
    }

    /// `fbarrier` (HoRAE Table 1 and 5.6.1, BarrierFS's `fbarrier`): the
    /// file's data and the journaled metadata written in order, returning
    /// without durability. In the `horae` mode (HoraeFS) the caller
    /// dispatches its data as an epoch of ordered writes, as fsync does,
    /// asks the commit thread for the running transaction and returns once
    /// that transaction's submit stage has dispatched it through the
    /// ordering layer ({D, JM} <= JC fixed against every later write); the
    /// flush stage makes it durable later, and the next fsync or sync
    /// waits for that. The other modes have no barrier primitive and give
    /// fsync's guarantee (ext4's ordering variant in HoRAE 6.1 is fsync on
    /// a `nobarrier` mount, [`crate::FsProfile::barrier`]).
    pub async fn fbarrier(&self, ctx: Ctx, ino: Ino) -> Result<(), FsError> {
        self.barrier(ctx, ino, false).await
    }

    /// `fdatabarrier` (HoRAE Table 1, BarrierFS): the file's data blocks
    /// in order and nothing else: in the `horae` mode the caller
    /// dispatches them as an epoch of ordered writes and returns, with no
    /// commit (a later transaction's epochs come after them). The other
    /// modes give fdatasync's guarantee.
    pub async fn fdatabarrier(&self, ctx: Ctx, ino: Ino) -> Result<(), FsError> {
        self.barrier(ctx, ino, true).await
    }

    async fn barrier(&self, ctx: Ctx, ino: Ino, data_only: bool) -> Result<(), FsError> {
        let j = match self.journal()? {
            Journal::Jbd(j) if j.is_horae() => j,
            _ => return self.sync_file(ctx, ino, data_only).await,
        };
        self.cpu(ctx, self.profile.cpu.syscall).await;
        self.check_writable()?;
        let st = self.iget(ctx, ino).await?;
        let _g = st.lock.lock().await;
        if self.profile.data_journal {
            // The data are ordered by the journal they go to: both
            // barriers dispatch the running transaction, which took the
            // pages when they were dirtied.
            j.barrier_and_wait(self, ctx).await?;
            st.size_dirty.set(false);
            st.dirty_meta.clear();
            return Ok(());
        }
        if let Some(d) = j.dispatch_data(self, ctx, &st).await? {
            j.defer_data(d);
        }
        if !data_only {
            j.barrier_and_wait(self, ctx).await?;
            st.size_dirty.set(false);
            st.dirty_meta.clear();
        }
        Ok(())
    }

    /// A FLUSH that ext4's `nobarrier` mount leaves out (fsync's and a
    /// checkpoint's; [`crate::FsProfile::barrier`], which only the
    /// `classic` and `none` modes take).
    pub(crate) async fn barrier_flush(&self, ctx: Ctx) -> Result<(), FsError> {
        if self.profile.barrier || !matches!(self.mode(), crate::Mode::Classic | crate::Mode::None) {
            self.flush(ctx).await
        } else {
            Ok(())
        }
    }

    async fn sync_file(&self, ctx: Ctx, ino: Ino, datasync: bool) -> Result<(), FsError> {
        let kind = if datasync {
            SyncKind::Fdatasync
        } else {
            SyncKind::Fsync
        };
        self.sync_kind(ctx, ino, kind).await
    }

    async fn sync_kind(&self, ctx: Ctx, ino: Ino, kind: SyncKind) -> Result<(), FsError> {
        self.cpu(ctx, self.profile.cpu.syscall).await;
        self.check_writable()?;
        let st = self.iget(ctx, ino).await?;
        let _g = st.lock.lock().await;
        let datasync = matches!(kind, SyncKind::Fdatasync | SyncKind::Fdataatomic);
        match self.journal()? {
            Journal::Mq(m) => {
                // Data written home outside a sync (O_DIRECT,
                // sync_file_range) is durable only after a FLUSH, which a
                // transaction with nothing left to journal does not send
                // (ext4_sync_file ends with blkdev_issue_flush).
                let unflushed =
                    !kind.atomic_only() && st.unflushed.replace(false) && self.profile.flush_unflushed_data;
                let r = m.sync_inode(self, ctx, &st, kind).await;
                if unflushed {
                    match &r {
                        Ok(()) => self.flush(ctx).await?,
                        Err(_) => st.unflushed.set(true),
                    }
                }
                return r;
            }
            // Ext4-NJ's fsync always ends with a flush.
            Journal::None => {
                st.unflushed.set(false);
                self.sync_in_place(ctx, &st, datasync).await?
            }
            Journal::Jbd(j) => {
                // As in the mq mode: a commit with nothing to journal
                // sends no FLUSH for data written home earlier.
                let unflushed = st.unflushed.replace(false);
                let horae = j.is_horae();
                // data=journal: ext4_sync_file forces a commit of the
                // running transaction, which took the file's pages when
                // they were dirtied (`ext4_force_commit`); fdatasync too.
                let journal_data = self.profile.data_journal;
                // The caller writes its own data: classic waits for it;
                // HoraeFS dispatches it as ordered writes, ahead of the
                // transaction's epochs, and does not wait.
                let dispatched = if journal_data {
                    None
                } else if horae {
                    j.dispatch_data(self, ctx, &st).await?
                } else {
                    let data = self.take_dirty_data(ctx, &st).await?;
                    self.write_all(ctx, &data, BioFlags::NONE).await?;
                    None
                };
                // ext4_sync_file: the data are written; if the transaction
                // that last changed the inode already sent its flush (its
                // commit, or a later one, got there first), the commit
                // waited for below does not cover them (`needs_barrier`).
                // Data written home outside a sync are not covered either.
                // One FLUSH after the commit for both (the fault switch
                // `flush_unflushed_data` leaves it out).
                let uncovered = unflushed || (!horae && !journal_data && !j.will_flush_for(st.ino));
                let mut flush = uncovered && self.profile.flush_unflushed_data;
                if journal_data {
                    j.commit_and_wait(self, ctx).await?;
                } else if datasync && !st.size_dirty.get() && !horae {
                    // Nothing to commit for an fdatasync: just the FLUSH.
                    flush = true;
                } else {
                    j.commit_and_wait(self, ctx).await?;
                }
                // Usually already durable with the transaction; else (no
                // metadata to commit) one joint FLUSH through the data.
                if let Some(d) = dispatched {
                    j.data_durable(self, ctx, d).await?;
                }
                if flush {
                    self.barrier_flush(ctx).await?;
                }
            }
        }
        st.size_dirty.set(false);
        st.dirty_meta.clear();
        Ok(())
    }

    /// Snapshots and cleans `st`'s dirty data pages: (home block, bytes).
    pub(crate) async fn take_dirty_data(
        &self,
        ctx: Ctx,
        st: &InodeState,
    ) -> Result<Vec<(u64, Box<[u8; BLOCK]>)>, FsError> {
        let mut out = Vec::new();
        for (fb, page) in st.pages.dirty() {
            let Some(home) = Fs::bmap(st, fb) else {
                continue;
            };
            self.prepare_pages(ctx, 1).await;
            out.push((home, page.snapshot()));
            page.set_dirty(false);
        }
        Ok(out)
    }

    /// Charges the caller's core for preparing `pages` data pages for I/O
    /// (`FsProfile::page_prep` each): every mode's writeback of a file's
    /// pages pays it, wherever it takes them.
    pub(crate) async fn prepare_pages(&self, ctx: Ctx, pages: usize) {
        self.cpu(ctx, self.profile.page_prep * pages as u64).await;
    }

    /// Ext4-NJ's fsync, as Linux's `ext4_sync_file` without a journal
    /// (fs/ext4/fsync.c: `__generic_file_fsync`, then `ext4_sync_parent`,
    /// then `blkdev_issue_flush` with barriers on). Each step waits for
    /// its writes before the next starts:
    ///
    /// 1. the file's dirty pages (`file_write_and_wait_range`);
    /// 2. the metadata buffers ext4 dirtied naming the inode
    ///    (`sync_mapping_buffers`; fs/ext4/ext4_jbd2.c
    ///    `__ext4_handle_dirty_metadata` without a journal calls
    ///    `mark_buffer_dirty_inode`): its extent-tree blocks, its xattr
    ///    block, a directory's own blocks ([`Fs::inode_buffers`]);
    /// 3. its inode-table block (`sync_inode_metadata` ->
    ///    fs/ext4/inode.c `ext4_write_inode` -> `sync_dirty_buffer`),
    ///    skipped by fdatasync when only timestamps changed;
    /// 4. if a directory got an entry naming the inode since its last sync
    ///    ([`InodeState::new_entry`]), steps 2 and 3 for that directory,
    ///    and on up while the directory's own entry is new;
    /// 5. a FLUSH.
    ///
    /// Block and inode bitmaps and the table blocks of other inodes are
    /// dirtied naming no inode (fs/ext4/mballoc.c
    /// `ext4_mb_mark_diskspace_used`, fs/ext4/ialloc.c `__ext4_new_inode`):
    /// fsync leaves them to the flusher ([`crate::flusher`]), so after a
    /// crash the bitmaps may lag the inodes (e2fsck's "block bitmap
    /// differences"; `docs/decisions.md` E3).
    async fn sync_in_place(&self, ctx: Ctx, st: &InodeState, datasync: bool) -> Result<(), FsError> {
        let data = self.take_dirty_data(ctx, st).await?;
        if !data.is_empty() {
            self.write_all(ctx, &data, BioFlags::NONE).await?;
        }
        self.write_meta_home(ctx, &self.inode_buffers(st)).await?;
        if !datasync || st.size_dirty.get() {
            let (iblk, _) = self.sb.borrow().inode_location(st.ino)?;
            self.write_meta_home(ctx, &[iblk]).await?;
        }
        let mut parent = st.new_entry.take();
        while let Some(p) = parent {
            // Only a cached directory can have had an entry added; one
            // evicted since is clean.
            let Some(dir) = self.inodes.borrow().get(&p).cloned() else {
                break;
            };
            self.write_meta_home(ctx, &self.inode_buffers(&dir)).await?;
            let (iblk, _) = self.sb.borrow().inode_location(dir.ino)?;
            self.write_meta_home(ctx, &[iblk]).await?;
            parent = dir.new_entry.take();
        }
        self.barrier_flush(ctx).await
    }

    /// The metadata blocks of `st`'s dirty set that belong to `st` itself
    /// (Linux's buffers associated with the inode's mapping): its
    /// extent-tree blocks, its xattr block, and a directory's blocks.
    pub(crate) fn inode_buffers(&self, st: &InodeState) -> Vec<u64> {
        let ino = st.inode.borrow();
        let dir = ino.file_type() == Some(FileType::Dir);
        let extents = if dir { ino.tree.extents() } else { Vec::new() };
        st.dirty_meta
            .blocks()
            .iter()
            .copied()
            .filter(|b| {
                ino.tree.nodes().contains_key(b)
                    || (ino.xattr != 0 && ino.xattr == *b)
                    || extents
                        .iter()
                        .any(|e| *b >= e.physical && *b < e.physical + u64::from(e.len))
            })
            .collect()
    }

    /// Writes the current content of metadata blocks home and waits, as
    /// Linux's `sync_dirty_buffer` / `write_dirty_buffer` (fs/buffer.c) do
    /// each: take the block's write lock, and write it only if it is still
    /// dirty (a write this one waited for may have carried its change);
    /// the lock is released when the write completed. `blocks` in
    /// ascending order (every caller's), so writers never wait on each
    /// other in a cycle. Returns how many blocks it wrote.
    pub(crate) async fn write_meta_home(&self, ctx: Ctx, blocks: &[u64]) -> Result<usize, FsError> {
        debug_assert!(
            blocks.windows(2).all(|w| w[0] < w[1]),
            "write_meta_home takes blocks in order"
        );
        let mut writes = Vec::new();
        let mut cached = Vec::new();
        let mut held = Vec::new();
        for b in blocks {
            let Some(c) = self.bufs.get(*b) else { continue };
            if !c.is_dirty() {
                continue;
            }
            let g = c.write_lock.clone().lock_owned().await;
            if c.is_dirty() {
                writes.push((*b, c.snapshot()));
                cached.push((c.clone(), c.version()));
                held.push(g);
            }
        }
        if writes.is_empty() {
            return Ok(0);
        }
        self.write_all(ctx, &writes, BioFlags::NONE).await?;
        for (c, v) in cached {
            if c.version() == v {
                c.set_dirty(false);
            }
        }
        drop(held);
        Ok(writes.len())
    }

    /// Makes everything durable (and, with a journal, checkpointed).
    pub async fn sync(&self, ctx: Ctx) -> Result<(), FsError> {
        self.cpu(ctx, self.profile.cpu.syscall).await;
        self.check_writable()?;
        // In inode order: the transactions sync issues are deterministic.
        let mut inodes: Vec<Rc<InodeState>> = self.inodes.borrow().values().cloned().collect();
        inodes.sort_by_key(|st| st.ino);
        // Data written home outside a sync needs a FLUSH of its own in
        // the journaled modes (see `sync_kind`); Ext4-NJ's sync flushes.
        // Every flag is cleared, so no short-circuit.
        let unflushed = inodes.iter().filter(|st| st.unflushed.replace(false)).count() > 0;
        match self.journal()? {
            Journal::None => {
                let mut data = Vec::new();
                for st in &inodes {
                    data.extend(self.take_dirty_data(ctx, st).await?);
                }
                if !data.is_empty() {
                    self.write_all(ctx, &data, BioFlags::NONE).await?;
                }
                let meta: BTreeSet<u64> = self.bufs.dirty().into_iter().map(|(b, _)| b).collect();
                let meta: Vec<u64> = meta.into_iter().collect();
                self.write_meta_home(ctx, &meta).await?;
                self.flush(ctx).await?;
            }
            Journal::Jbd(j) => {
                for st in &inodes {
                    if !st.pages.dirty().is_empty() {
                        j.order_data(st.ino);
                    }
                }
                j.sync_all(self, ctx).await?;
            }
            Journal::Mq(m) => {
                for st in &inodes {
                    let _g = st.lock.lock().await;
                    m.sync_inode(self, ctx, st, SyncKind::Fsync).await?;
                }
                // Metadata no live inode carries (freed inodes' blocks).
                let left: Vec<u64> = self
                    .bufs
                    .dirty()
                    .into_iter()
                    .filter(|(_, c)| c.needs_journal())
                    .map(|(b, _)| b)
                    .collect();
                if !left.is_empty() {
                    let root = self.iget(ctx, crate::layout::ROOT_INO).await?;
                    let _g = root.lock.lock().await;
                    root.dirty_meta.extend(left);
                    m.sync_inode(self, ctx, &root, SyncKind::Fsync).await?;
                }
            }
        }
        if unflushed && self.profile.flush_unflushed_data && !matches!(self.journal()?, Journal::None) {
            self.flush(ctx).await?;
        }
        for st in &inodes {
            st.size_dirty.set(false);
            st.dirty_meta.clear();
        }
        Ok(())
    }
}
