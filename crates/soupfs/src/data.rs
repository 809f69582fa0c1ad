//! File data: write, read, truncate. Data blocks and index entries are
//! stored in place with cached stores (the shared nodes of both views,
//! paper L176-L181: data is not protected, as in soft updates); the new
//! size lives only in the DRAM inode until the persister's sizechg
//! (L204-L207). Bytes between the old end and a write past it are
//! zeroed, so every slot inside a size points to a block.

use pcie_sim::{Core, PmAddr, Pmem, Purpose};

use fsapi::{Ctx, Errno, Work};

use crate::error::FsError;
use crate::fs::SoupFs;
use crate::layout::{Kind, INDEX_SLOTS, LINE, PAGE};
use crate::state::{Ino, Inode, OpKind, State};

/// Stores `src` (or zeros) over `[off, off + len)` of the file's blocks,
/// allocating and attaching blocks as needed.
async fn fill(
    pmem: &Pmem,
    core: &Core,
    st: &mut State,
    ino: Ino,
    off: u64,
    len: u64,
    src: Option<&[u8]>,
) -> Result<(), FsError> {
    let mut pos = off;
    let end = off + len;
    while pos < end {
        let slot = pos / PAGE;
        let block = block_for(pmem, core, st, ino, slot).await?;
        let i = st.inode_mut(ino)?;
        let line_off = pos % LINE;
        let line = block + (pos % PAGE) - line_off;
        let n = (LINE - line_off).min(end - pos);
        let mut buf = [0u8; 64];
        if n < LINE {
            pmem.load(core, PmAddr(line), &mut buf).await?;
        }
        let dst = &mut buf[line_off as usize..(line_off + n) as usize];
        match src {
            Some(s) => {
                let from = (pos - off) as usize;
                dst.copy_from_slice(&s[from..from + n as usize]);
            }
            None => dst.fill(0),
        }
        pmem.store(core, PmAddr(line), &buf, Purpose::UNTAGGED).await?;
        i.dirty_lines.insert(line);
        pos += n;
    }
    Ok(())
}

/// The block at `slot`, attaching a new one (and the index page) if the
/// file has none there yet. A new block is not zeroed: only bytes inside
/// the size are ever read, and a growth zero-fills what it exposes.
async fn block_for(pmem: &Pmem, core: &Core, st: &mut State, ino: Ino, slot: u64) -> Result<u64, FsError> {
    if let Some(&b) = st.inode(ino)?.blocks.get(slot as usize) {
        return Ok(b);
    }
    if st.inode(ino)?.root == 0 {
        let p = st.alloc.page()?;
        st.inode_mut(ino)?.root = p;
    }
    let b = st.alloc.page()?;
    let i: &mut Inode = st.inode_mut(ino)?;
    let entry = i.root + 8 * i.blocks.len() as u64;
    pmem.store(core, PmAddr(entry), &b.to_le_bytes(), Purpose::UNTAGGED)
        .await?;
    i.dirty_lines.insert(entry & !(LINE - 1));
    i.blocks.push(b);
    Ok(b)
}

fn file(st: &State, ino: Ino) -> Result<&Inode, FsError> {
    let i = st.inode(ino)?;
    if i.kind == Kind::Dir {
        return Err(FsError::Fs(Errno::IsDir));
    }
    Ok(i)
}

/// Sets the latest size to `size`: zero-fills a growth, queues a sizechg.
async fn resize(fs: &SoupFs, core: &Core, st: &mut State, ino: Ino, size: u64) -> Result<(), FsError> {
    let old = file(st, ino)?.size;
    if size > old {
        fill(fs.pmem(), core, st, ino, old, size - old, None).await?;
    }
    let now = fs.now_ns();
    let i = st.inode_mut(ino)?;
    i.size = size;
    i.mtime = now;
    st.push_op(ino, OpKind::SizeChg, Vec::new())?;
    Ok(())
}

/// EFBIG past what one index page maps.
fn too_large(size: u64) -> Result<(), FsError> {
    let max = INDEX_SLOTS * PAGE;
    if size > max {
        return Err(Errno::TooLarge { size, max }.into());
    }
    Ok(())
}

impl SoupFs {
    /// Writes `data` at `off`; returns the bytes written.
    pub async fn write(&self, ctx: Ctx, ino: Ino, off: u64, data: &[u8]) -> Result<usize, FsError> {
        let core = &self.core(ctx)?;
        let end = off.saturating_add(data.len() as u64);
        too_large(end)?;
        let mut st = self.lock().await;
        let size = file(&st, ino)?.size;
        let blocks = file(&st, ino)?.blocks.len();
        if off > size {
            resize(self, core, &mut st, ino, off).await?;
        }
        fill(
            self.pmem(),
            core,
            &mut st,
            ino,
            off,
            data.len() as u64,
            Some(data),
        )
        .await?;
        let now = self.now_ns();
        let i = st.inode_mut(ino)?;
        // The inode, and the blocks the write attached.
        self.meter().count(Work {
            inodes: 1,
            allocs: (i.blocks.len() - blocks) as u64,
            ..Work::default()
        });
        i.size = i.size.max(end);
        i.mtime = now;
        st.push_op(ino, OpKind::SizeChg, Vec::new())?;
        Ok(data.len())
    }

    /// Reads up to `len` bytes at `off` (short at the end of the file).
    pub async fn read(&self, ctx: Ctx, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>, FsError> {
        let core = &self.core(ctx)?;
        let st = self.lock().await;
        let i = file(&st, ino)?;
        let end = i.size.min(off.saturating_add(len as u64));
        let mut out = Vec::with_capacity(end.saturating_sub(off) as usize);
        let mut pos = off;
        while pos < end {
            let block = *i.blocks.get((pos / PAGE) as usize).ok_or(FsError::Corrupt {
                addr: ino,
                what: "no block inside the size",
            })?;
            let n = (PAGE - pos % PAGE).min(end - pos) as usize;
            let mut buf = vec![0u8; n];
            self.pmem()
                .load(core, PmAddr(block + pos % PAGE), &mut buf)
                .await?;
            out.extend_from_slice(&buf);
            pos += n as u64;
        }
        Ok(out)
    }

    /// Sets the size: a growth reads as zeros; a shrink's blocks are
    /// reclaimed only after the persister persisted the smaller size
    /// (L148-L149).
    pub async fn truncate(&self, ctx: Ctx, ino: Ino, size: u64) -> Result<(), FsError> {
        let core = &self.core(ctx)?;
        too_large(size)?;
        let mut st = self.lock().await;
        self.meter().count(Work {
            inodes: 1,
            ..Work::default()
        });
        resize(self, core, &mut st, ino, size).await
    }
}
