//! Data written to the device outside a sync: O_DIRECT writes
//! ([`Fs::write_direct`]), sync_file_range ([`Fs::sync_file_range`]), and
//! stores through a shared mapping ([`Fs::write_mapped`]).
//!
//! None of them makes anything durable: they write data blocks home and
//! wait for the writes to complete, with no FLUSH (the data may sit in the
//! drive's volatile cache) and no metadata (a block they allocated is not
//! reachable after a crash until a sync commits its mapping). The inode
//! remembers that data went out unflushed ([`InodeState::unflushed`]), so
//! its next fsync flushes even if it finds nothing dirty, as
//! `ext4_sync_file` does (fs/ext4/fsync.c).
//!
//! Deviation, as ext4 with `data=journal` (which falls back to buffered
//! I/O for O_DIRECT, fs/ext4/inode.c `ext4_should_journal_data`): in the
//! `mq` mode a block whose new content must go through the journal (a
//! copy of it is in a log, or it was reused before its freeing became
//! durable, ccNVMe 5.4) is not written in place; its page stays dirty for
//! the next transaction. With `data=journal` itself
//! ([`crate::FsProfile::data_journal`]) nothing is written in place: the
//! pages join the running transaction (ext4's `__ext4_journalled_writepage`
//! files them with the transaction) and go to the log when it commits.

use ccnvme::BioFlags;

use crate::error::FsError;
use crate::fs::{Ctx, Fs, Ino, InodeState};
use crate::journal::Journal;
use crate::layout::BLOCK;

impl Fs {
    /// A write through a descriptor opened with `O_DIRECT` (open(2)):
    /// `off` and the length must be multiples of the block size (EINVAL
    /// otherwise, as Linux requires logical-block alignment). The data
    /// goes through the page cache (so cached pages stay coherent, as
    /// the kernel's invalidation after a direct write achieves) and is
    /// written home before the call returns; size and allocation change
    /// as a buffered write's and become durable with the next fsync.
    pub async fn write_direct(&self, ctx: Ctx, ino: Ino, off: u64, data: &[u8]) -> Result<usize, FsError> {
        let b = BLOCK as u64;
        if off % b != 0 || data.len() as u64 % b != 0 {
            return Err(FsError::Invalid(format!(
                "O_DIRECT needs block-aligned offset and length ({off}, {})",
                data.len()
            )));
        }
        let n = self.write_pages(ctx, ino, off, data, false).await?;
        self.writeback(ctx, ino, off, n as u64).await?;
        Ok(n)
    }

    /// A store of `data` at `off` through a `MAP_SHARED` mapping: changes
    /// the page cache as [`Fs::write`] does; refused (EINVAL, for the
    /// SIGBUS of mmap(2)) unless it lies within the file's size.
    pub async fn write_mapped(&self, ctx: Ctx, ino: Ino, off: u64, data: &[u8]) -> Result<usize, FsError> {
        self.write_pages(ctx, ino, off, data, true).await
    }

    /// sync_file_range(2) with `SYNC_FILE_RANGE_WAIT_BEFORE | WRITE |
    /// WAIT_AFTER` over `len` bytes at `off` (`len` 0: to the end of the
    /// file): writes the range's dirty pages home and waits. No metadata,
    /// no FLUSH: it promises nothing.
    pub async fn sync_file_range(&self, ctx: Ctx, ino: Ino, off: u64, len: u64) -> Result<(), FsError> {
        self.cpu(ctx, self.profile.cpu.syscall).await;
        self.writeback(ctx, ino, off, len).await
    }

    /// Writes the dirty pages of `ino` in `len` bytes at `off` (`len` 0: to
    /// the end) home and waits (see the module docs for what it skips).
    pub(crate) async fn writeback(&self, ctx: Ctx, ino: Ino, off: u64, len: u64) -> Result<(), FsError> {
        self.check_writable()?;
        let st = self.iget(ctx, ino).await?;
        let _g = st.lock.lock().await;
        if self.profile.data_journal && matches!(self.journal()?, Journal::Jbd(_)) {
            // The pages joined the running transaction when they were
            // dirtied ([`Fs::note_dirty_pages`]); its commit writes them.
            return Ok(());
        }
        let first = off / BLOCK as u64;
        let end = if len == 0 {
            u64::MAX
        } else {
            off.saturating_add(len).div_ceil(BLOCK as u64)
        };
        let data = self.take_dirty_range(ctx, &st, first, end).await?;
        if data.is_empty() {
            return Ok(());
        }
        self.write_all(ctx, &data, BioFlags::NONE).await?;
        st.unflushed.set(true);
        Ok(())
    }

    /// Snapshots and cleans the dirty pages of file blocks `first..end`
    /// that may be written in place: (home block, bytes).
    async fn take_dirty_range(
        &self,
        ctx: Ctx,
        st: &InodeState,
        first: u64,
        end: u64,
    ) -> Result<Vec<(u64, Box<[u8; BLOCK]>)>, FsError> {
        let journal = self.journal()?;
        let mut out = Vec::new();
        for (fb, page) in st.pages.dirty() {
            if u64::from(fb) < first || u64::from(fb) >= end {
                continue;
            }
            let Some(home) = Fs::bmap(st, fb) else {
                continue;
            };
            if let Journal::Mq(m) = &journal {
                if !m.may_write_home(home) {
                    continue;
                }
            }
            self.prepare_pages(ctx, 1).await;
            out.push((home, page.snapshot()));
            page.set_dirty(false);
        }
        Ok(out)
    }
}
