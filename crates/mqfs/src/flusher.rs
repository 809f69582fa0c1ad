//! The flusher: Linux's periodic writeback (the `wb_workfn` kernel
//! worker, fs/fs-writeback.c `wb_check_old_data_flush`), in every mode.
//!
//! While anything it writes is dirty, the flusher wakes every
//! [`FsProfile::dirty_writeback_interval`](crate::FsProfile::dirty_writeback_interval)
//! (`vm.dirty_writeback_centisecs`, 5 s) and writes home each "inode" whose
//! oldest dirtying is older than
//! [`FsProfile::dirty_expire`](crate::FsProfile::dirty_expire)
//! (`vm.dirty_expire_centisecs`, 30 s), as `wb_writeback` does for
//! kupdate-style writeback (`older_than_this`): all of that inode's dirty
//! pages, not only the old ones. With nothing dirty it sleeps until
//! something is dirtied (`wb_wakeup_delayed`), so an idle file system
//! schedules no wake-up.
//!
//! What it writes:
//!
//! - **File data**, in every mode, by the path of `sync_file_range`
//!   ([`crate::direct`]): the pages go home without a FLUSH and the inode
//!   remembers it, so the next fsync flushes. In `mq` a page whose block
//!   must go through the journal stays dirty for the next transaction.
//! - **Metadata buffers, in mode `none` only.** Linux keeps them in the
//!   block device's page cache, one more inode to the flusher (the
//!   bdev inode, whose `dirtied_when` is its first dirtying): block and
//!   inode bitmaps, inode-table blocks, directory and extent blocks. They
//!   are written together when that inode expires. This is how Ext4-NJ's
//!   bitmaps reach their home: its fsync does not write them
//!   ([`crate::sync`]). In the journaled modes metadata goes home by the
//!   journal's checkpoint; the flusher leaves it (deviation: Linux's
//!   flusher may also write a committed JBD2 buffer home before the
//!   checkpoint does, which changes the timing of a checkpoint, not what
//!   it writes).
//!
//! The flusher runs on the commit core ([`crate::FsProfile::commit_core`]),
//! where the kernel's other background threads run in the model.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::{Rc, Weak};

use pcie_sim::SimTime;
use tokio::sync::Notify;

use crate::error::FsError;
use crate::fs::{Ctx, Fs, Ino};
use crate::layout::Mode;

/// What the flusher knows: when each inode's pages and the metadata
/// buffers were first dirtied since they were last all clean (Linux's
/// `inode->dirtied_when`).
#[derive(Debug, Default)]
pub(crate) struct Flusher {
    /// Wakes the flusher when something is dirtied while it sleeps.
    wake: Rc<Notify>,
    /// Set at unmount: the flusher ends.
    stopped: Cell<bool>,
    /// Inodes with dirty pages, by number: their first dirtying.
    data: RefCell<BTreeMap<Ino, SimTime>>,
    /// The metadata buffers' first dirtying (mode `none` only).
    meta: Cell<Option<SimTime>>,
    /// Writes the flusher issued (data pages and metadata blocks).
    written: Cell<u64>,
}

impl Flusher {
    /// True if nothing is waiting for the flusher.
    fn idle(&self) -> bool {
        self.data.borrow().is_empty() && self.meta.get().is_none()
    }
}

impl Fs {
    /// Starts the flusher (unless the profile switches periodic writeback
    /// off). It holds the file system weakly and ends at unmount.
    pub(crate) fn start_flusher(self: &Rc<Self>) {
        let Some(interval) = self.profile.dirty_writeback_interval else {
            return;
        };
        let (fs, wake) = (Rc::downgrade(self), self.flusher.wake.clone());
        self.machine
            .sim()
            .spawn(async move { flusher_loop(fs, wake, interval).await });
    }

    /// Stops the flusher (unmount).
    pub(crate) fn stop_flusher(&self) {
        self.flusher.stopped.set(true);
        self.flusher.wake.notify_one();
    }

    /// Records that `ino` has a dirty page (Linux `__mark_inode_dirty`
    /// with `I_DIRTY_PAGES`): its first dirtying starts its expiry.
    pub(crate) fn note_dirty_pages(&self, ino: Ino) {
        // data=journal: the pages join the running transaction as they are
        // dirtied (ext4_journalled_write_end, ext4_block_zero_page_range:
        // `ext4_dirty_journalled_data`), so it commits them with whatever
        // change of the file's metadata exposes them.
        if self.profile.data_journal {
            if let Some(crate::journal::Journal::Jbd(j)) = self.journal.borrow().as_ref() {
                j.order_data(ino);
            }
        }
        let now = self.machine.sim().now();
        let first = self.flusher.idle();
        self.flusher.data.borrow_mut().entry(ino).or_insert(now);
        if first {
            self.flusher.wake.notify_one();
        }
    }

    /// Records that a metadata buffer was dirtied; only mode `none` writes
    /// them by the flusher.
    pub(crate) fn note_dirty_buffer(&self) {
        if self.mode() != Mode::None {
            return;
        }
        let first = self.flusher.idle();
        if self.flusher.meta.get().is_none() {
            self.flusher.meta.set(Some(self.machine.sim().now()));
        }
        if first {
            self.flusher.wake.notify_one();
        }
    }

    /// Blocks the flusher has written since mount.
    pub fn flusher_writes(&self) -> u64 {
        self.flusher.written.get()
    }

    /// One pass (`wb_check_old_data_flush`): writes what expired at `now`.
    async fn flush_expired(&self, now: SimTime) -> Result<(), FsError> {
        let ctx = Ctx::on(self.profile.commit_core);
        let expire = self.profile.dirty_expire;
        let due = |since: SimTime| since.0.saturating_add(expire.as_ps()) <= now.0;
        let inos: Vec<Ino> = self
            .flusher
            .data
            .borrow()
            .iter()
            .filter(|(_, since)| due(**since))
            .map(|(ino, _)| *ino)
            .collect();
        for ino in inos {
            // Forget it first: a page dirtied while the pages go out
            // starts a new expiry, and one the writeback must leave
            // (an `mq` block bound to the journal) waits for the next
            // dirtying or the next fsync.
            self.flusher.data.borrow_mut().remove(&ino);
            let st = self.inodes.borrow().get(&ino).cloned();
            let Some(st) = st else { continue };
            let before = st.pages.dirty().len();
            if let (true, crate::journal::Journal::Jbd(j)) = (self.profile.data_journal, self.journal()?) {
                // data=journal: the pages, in the running transaction since
                // they were dirtied, go to the log with its commit, as
                // JBD2's commit timer would have made it by now
                // (`commit=5` s, JBD2_DEFAULT_MAX_COMMIT_AGE).
                j.commit_and_wait(self, ctx).await?;
            } else {
                self.writeback(ctx, ino, 0, 0).await?;
            }
            let after = st.pages.dirty().len();
            self.flusher
                .written
                .set(self.flusher.written.get() + before.saturating_sub(after) as u64);
        }
        if let Some(since) = self.flusher.meta.get() {
            if due(since) {
                self.flusher.meta.set(None);
                let blocks: Vec<u64> = self.bufs.dirty().into_iter().map(|(b, _)| b).collect();
                let n = self.write_meta_home(ctx, &blocks).await?;
                self.flusher.written.set(self.flusher.written.get() + n as u64);
            }
        }
        Ok(())
    }
}

/// The flusher's life: sleep while nothing is dirty, else wake every
/// `interval` and write what expired; end at unmount, when the file
/// system is gone, or when a write fails (the file system is then
/// read-only, as ext4 turns on an I/O error).
async fn flusher_loop(fs: Weak<Fs>, wake: Rc<Notify>, interval: pcie_sim::SimDuration) {
    loop {
        let (idle, sim) = match fs.upgrade() {
            Some(f) if !f.flusher.stopped.get() => (f.flusher.idle(), f.machine.sim()),
            _ => return,
        };
        if idle {
            // A notify_one stored before this wait (something dirtied
            // meanwhile) wakes it at once.
            wake.notified().await;
            continue;
        }
        sim.sleep(interval).await;
        let Some(f) = fs.upgrade() else { return };
        if f.flusher.stopped.get() || f.flush_expired(sim.now()).await.is_err() {
            return;
        }
    }
}
