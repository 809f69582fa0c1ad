//! File data: the page cache, reads and writes.

use std::rc::Rc;

use crate::cache::CachedBlock;
use crate::error::FsError;
use crate::fs::{Ctx, Fs, Ino, InodeState};
use crate::layout::{FileType, BLOCK};

/// Where a file block's bytes come from when it is read
/// ([`Fs::page_sources`]).
#[derive(Debug, Clone)]
pub enum PageSource {
    /// Its page in the page cache.
    Cached(Rc<CachedBlock>),
    /// The device block it is mapped to (written).
    Device(u64),
    /// Zeros: a hole, or a block allocated but not written.
    Zeros,
}

/// Largest file: file blocks are 32-bit, the last one `2^32 - 2` so that
/// an extent's end fits too (Ext4's `ext4_max_size` for extent files,
/// `(2^32 - 1) << blkbits`).
pub const MAX_FILE: u64 = (u32::MAX as u64) * BLOCK as u64;

impl Fs {
    /// The cached page of file block `fb`: read from its device block, or
    /// zeros for a hole.
    pub(crate) async fn data_page(
        &self,
        ctx: Ctx,
        st: &InodeState,
        fb: u32,
    ) -> Result<Rc<CachedBlock>, FsError> {
        let data = match Fs::page_source(st, fb) {
            PageSource::Cached(p) => return Ok(p),
            PageSource::Device(b) => self.read_raw(ctx, b).await?,
            PageSource::Zeros => Box::new([0u8; BLOCK]),
        };
        if let Some(p) = st.pages.get(fb) {
            return Ok(p);
        }
        let p = CachedBlock::new(data);
        st.pages.insert(fb, p.clone());
        Ok(p)
    }

    /// Where the bytes of file block `fb` come from when it is read: its
    /// cached page, its device block, or zeros (a hole or an unwritten,
    /// preallocated block). The one rule [`Fs::read`] follows.
    fn page_source(st: &InodeState, fb: u32) -> PageSource {
        if let Some(p) = st.pages.get(fb) {
            return PageSource::Cached(p);
        }
        match Fs::bmap_written(st, fb) {
            Some(b) => PageSource::Device(b),
            None => PageSource::Zeros,
        }
    }

    /// The size of file `ino` and where each of its blocks' bytes come
    /// from, as a read of the whole file would find them, without reading
    /// any data block (the inode and its extent tree are read). For a
    /// crash checker that judges data blocks one by one; a read of
    /// [`PageSource::Device`] block `b` returns what the drive holds at `b`
    /// (no layer below the page cache keeps file data).
    pub async fn page_sources(&self, ctx: Ctx, ino: Ino) -> Result<(u64, Vec<PageSource>), FsError> {
        let st = self.regular_file(ctx, ino).await?;
        let _g = st.lock.lock().await;
        let size = st.inode.borrow().size;
        let blocks = size.div_ceil(BLOCK as u64) as u32;
        Ok((size, (0..blocks).map(|fb| Fs::page_source(&st, fb)).collect()))
    }

    /// Reads up to `len` bytes at `off`.
    pub async fn read(&self, ctx: Ctx, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>, FsError> {
        self.cpu(ctx, self.profile.cpu.syscall).await;
        let st = self.regular_file(ctx, ino).await?;
        let _g = st.lock.lock().await;
        self.read_inner(ctx, &st, off, len).await
    }

    /// The in-memory state of `ino`, which must be a regular file to be
    /// read (read(2): EISDIR for a directory).
    async fn regular_file(&self, ctx: Ctx, ino: Ino) -> Result<Rc<InodeState>, FsError> {
        let st = self.iget(ctx, ino).await?;
        let ftype = st.inode.borrow().file_type();
        match ftype {
            Some(FileType::Dir) => Err(FsError::IsDir),
            Some(FileType::File) => Ok(st),
            _ => Err(FsError::Invalid("read of a non-file".into())),
        }
    }

    pub(crate) async fn read_inner(
        &self,
        ctx: Ctx,
        st: &InodeState,
        off: u64,
        len: usize,
    ) -> Result<Vec<u8>, FsError> {
        let size = st.inode.borrow().size;
        if off >= size {
            return Ok(Vec::new());
        }
        let end = (off + len as u64).min(size);
        let mut out = Vec::with_capacity((end - off) as usize);
        let mut pos = off;
        while pos < end {
            let fb = (pos / BLOCK as u64) as u32;
            let in_blk = (pos % BLOCK as u64) as usize;
            let n = (BLOCK - in_blk).min((end - pos) as usize);
            let page = self.data_page(ctx, st, fb).await?;
            out.extend_from_slice(&page.data()[in_blk..in_blk + n]);
            pos += n as u64;
        }
        let core = self.machine.core(ctx.core % self.machine.core_count().max(1))?;
        core.compute(core.copy_cycles(out.len())).await;
        Ok(out)
    }

    /// Writes `data` at `off` into the page cache, allocating blocks for
    /// holes (on behalf of the file). Returns the bytes written.
    pub async fn write(&self, ctx: Ctx, ino: Ino, off: u64, data: &[u8]) -> Result<usize, FsError> {
        self.write_pages(ctx, ino, off, data, false).await
    }

    /// [`Fs::write`], or with `within_size` a store through a shared
    /// mapping: refused (EINVAL, standing for the SIGBUS of mmap(2)) unless
    /// the whole range lies within the file's size, checked under the
    /// inode lock; it never changes the size.
    pub(crate) async fn write_pages(
        &self,
        ctx: Ctx,
        ino: Ino,
        off: u64,
        data: &[u8],
        within_size: bool,
    ) -> Result<usize, FsError> {
        self.check_writable()?;
        let end = off.checked_add(data.len() as u64).ok_or(FsError::TooBig)?;
        if end > MAX_FILE {
            return Err(FsError::TooBig);
        }
        let dj = match self.journal()? {
            crate::journal::Journal::Jbd(j) if self.profile.data_journal && !data.is_empty() => j,
            _ => {
                let _op = self.begin(ctx).await?;
                return self.write_pages_in(ctx, ino, off, data, within_size).await;
            }
        };
        // data=journal: the pages join the running transaction, which
        // holds at most a quarter of the log; ext4 writes page by page,
        // each page in its own handle (`ext4_write_begin`, `ext4_journalled_
        // write_end`), and a handle that finds the transaction full waits
        // for its commit to start (`start_this_handle`). Here one handle
        // takes as many pages as the transaction has room for.
        let mut done = 0usize;
        let mut syscall = true;
        while done < data.len() {
            let op = if syscall {
                syscall = false;
                self.begin(ctx).await?
            } else {
                self.enter_gate().await
            };
            let pos = off + done as u64;
            let first = pos / BLOCK as u64;
            let pages = (end.div_ceil(BLOCK as u64) - first).max(1);
            let meta = self.write_meta_credits(pages);
            let got = dj.start_handle(pages, meta);
            if got == 0 {
                drop(op);
                dj.wait_for_commit_start(self, ctx).await?;
                continue;
            }
            let upto = ((first + got) * BLOCK as u64).min(end);
            let chunk = &data[done..(upto - off) as usize];
            let r = self.write_pages_in(ctx, ino, pos, chunk, within_size).await;
            dj.stop_handle(meta);
            drop(op);
            // As `generic_perform_write`: an error after some pages were
            // written is a short write of those.
            let n = match r {
                Ok(n) => n,
                Err(_) if done > 0 => break,
                Err(e) => return Err(e),
            };
            done += n;
            if n < chunk.len() {
                break;
            }
        }
        Ok(done)
    }

    /// The metadata blocks a write of `pages` pages may dirty, its
    /// handle's credits beyond the data (as ext4's
    /// `ext4_meta_trans_blocks`, fs/ext4/inode.c, counts them): the path
    /// through the extent tree and a split at each level, a block bitmap
    /// and a group-descriptor block per group the allocations span, the
    /// inode's table block and the superblock.
    fn write_meta_credits(&self, pages: u64) -> u64 {
        let per_group = u64::from(self.sb.borrow().blocks_per_group.max(1));
        let groups = pages.div_ceil(per_group) + 1;
        2 * (u64::from(crate::extent_tree::MAX_DEPTH) + 1) + 2 * groups + 2
    }

    /// [`Fs::write_pages`] within an operation the caller holds.
    async fn write_pages_in(
        &self,
        ctx: Ctx,
        ino: Ino,
        off: u64,
        data: &[u8],
        within_size: bool,
    ) -> Result<usize, FsError> {
        let end = off + data.len() as u64;
        let st = self.iget(ctx, ino).await?;
        match st.inode.borrow().file_type() {
            Some(FileType::Dir) => return Err(FsError::IsDir),
            Some(FileType::File) => {}
            _ => return Err(FsError::Invalid("write to a non-file".into())),
        }
        if data.is_empty() {
            // POSIX: zero bytes to a regular file "shall return zero and
            // have no other results" (no size change).
            return Ok(0);
        }
        let _g = st.lock.lock().await;
        if within_size && end > st.inode.borrow().size {
            return Err(FsError::Invalid(format!(
                "a store at {off}..{end} past the end of a mapped file of {} bytes (SIGBUS)",
                st.inode.borrow().size
            )));
        }
        let mut pos = off;
        let mut src = 0usize;
        let mut allocated = false;
        while src < data.len() {
            let fb = (pos / BLOCK as u64) as u32;
            let in_blk = (pos % BLOCK as u64) as usize;
            let n = (BLOCK - in_blk).min(data.len() - src);
            let page = self.data_page(ctx, &st, fb).await?;
            if Fs::bmap_written(&st, fb).is_none() {
                match self.map_for_write(ctx, &st, fb).await {
                    Ok(_) => allocated = true,
                    // Out of room part-way: a short write of what fitted
                    // (POSIX), not an error with the prefix changed.
                    Err(FsError::NoSpace | FsError::TooBig) if src > 0 => break,
                    Err(e) => return Err(e),
                }
            }
            {
                let _l = page.lock.lock().await;
                page.modify()[in_blk..in_blk + n].copy_from_slice(&data[src..src + n]);
            }
            pos += n as u64;
            src += n;
        }
        self.note_dirty_pages(st.ino);
        let core = self.machine.core(ctx.core % self.machine.core_count().max(1))?;
        core.compute(core.copy_cycles(src)).await;
        // Linux's `file_update_time` (fs/inode.c): the times change only
        // if the coarse clock moved since they were last set, and the inode
        // is dirtied only if something changed (times, size, mapping).
        let now = self.current_time();
        let changed = {
            let mut i = st.inode.borrow_mut();
            let grew = pos > i.size;
            if grew {
                i.size = pos;
                st.size_dirty.set(true);
            }
            let touched = i.mtime != now || i.ctime != now;
            i.mtime = now;
            i.ctime = now;
            grew || touched || allocated
        };
        if allocated {
            st.size_dirty.set(true);
        }
        if changed {
            self.write_inode(ctx, &st).await?;
        }
        Ok(src)
    }
}
