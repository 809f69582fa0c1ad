//! File data: read, write (copy-on-write pages), truncate.
//!
//! A write fills fresh pages (the old content merged with the new bytes)
//! with non-temporal stores and one `sfence`, then one transaction maps
//! them, sets the size and moves the bitmap bits; the old pages are free
//! once it commits. Bytes past a file's size in its last page are always
//! zero, so growing a file shows zeros.

use fsapi::Errno;
use pcie_sim::Purpose;

use crate::error::{PmfsError, Result};
use crate::fs::{Ctx, Pmfs};
use crate::journal::Tx;
use crate::layout::{FileType, Ino, Inode, LINE, MAX_PAGES, MAX_SIZE, PAGE};

impl Pmfs {
    async fn file_inode(tx: &Tx<'_>, ino: Ino) -> Result<Inode> {
        let i = tx.live_inode(ino).await?;
        if i.ftype == Some(FileType::Dir) {
            return Err(PmfsError::Fs(Errno::IsDir));
        }
        Ok(i)
    }

    /// The content of page index `k` of `i` (zeros for a hole).
    async fn page_of(tx: &Tx<'_>, i: &Inode, k: usize) -> Result<Vec<u8>> {
        match i.ptrs.get(k).copied().unwrap_or(0) {
            0 => Ok(vec![0u8; PAGE as usize]),
            p if p - 1 < tx.geo.pages => tx.load(tx.geo.page_addr(p - 1), PAGE as usize).await,
            _ => Err(PmfsError::Corrupt {
                at: 0,
                reason: "page pointer out of range",
            }),
        }
    }

    /// Up to `len` bytes of file `ino` from `off` (fewer at the end).
    pub async fn read(&self, ctx: Ctx, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>> {
        let core = self.core(ctx)?;
        let tx = self.tx(&core);
        let r = Self::read_in(&tx, ino, off, len).await;
        self.count(&tx);
        r
    }

    async fn read_in(tx: &Tx<'_>, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>> {
        let i = Self::file_inode(tx, ino).await?;
        let end = off.saturating_add(len as u64).min(i.size);
        let mut out = Vec::new();
        let mut at = off;
        while at < end {
            let k = (at / PAGE) as usize;
            let page = Self::page_of(tx, &i, k).await?;
            let from = (at % PAGE) as usize;
            let to = ((end - k as u64 * PAGE).min(PAGE)) as usize;
            out.extend_from_slice(&page[from..to]);
            at = (k as u64 + 1) * PAGE;
        }
        Ok(out)
    }

    /// Writes a fresh page with non-temporal stores (the caller fences).
    async fn fill_page(&self, tx: &mut Tx<'_>, content: &[u8]) -> Result<u32> {
        let page = self.alloc_page(tx)?;
        let at = tx.geo.page_addr(page);
        for (l, chunk) in content.chunks(LINE as usize).enumerate() {
            self.pm()
                .nt_store(tx.core, at + l as u64 * LINE, chunk, Purpose::UNTAGGED)
                .await?;
        }
        Ok(page)
    }

    /// Maps `page` at index `k` of `i` in `tx`, freeing the page it replaces.
    async fn remap(tx: &mut Tx<'_>, i: &mut Inode, k: usize, page: Option<u32>) -> Result<()> {
        let old = i.ptrs[k];
        if old != 0 {
            tx.set_bit(old - 1, false).await?;
            tx.free_pages.push(old - 1);
        }
        i.ptrs[k] = match page {
            Some(p) => {
                tx.set_bit(p, true).await?;
                p + 1
            }
            None => 0,
        };
        Ok(())
    }

    /// Writes `data` at `off` of file `ino`; returns the bytes written.
    pub async fn write(&self, ctx: Ctx, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        let core = self.core(ctx)?;
        let _g = self.lock().await;
        let mut tx = self.tx(&core);
        let r = self.write_in(&mut tx, ino, off, data).await;
        self.finish(tx, r).await
    }

    async fn write_in(&self, tx: &mut Tx<'_>, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        let mut i = Self::file_inode(tx, ino).await?;
        if data.is_empty() {
            return Ok(0);
        }
        let end = off.saturating_add(data.len() as u64);
        if end > MAX_SIZE {
            return Err(PmfsError::Fs(Errno::TooLarge {
                size: end,
                max: MAX_SIZE,
            }));
        }
        let mut fresh = Vec::new();
        for k in (off / PAGE) as usize..=((end - 1) / PAGE) as usize {
            let mut page = Self::page_of(tx, &i, k).await?;
            let base = k as u64 * PAGE;
            let from = off.max(base);
            let to = end.min(base + PAGE);
            page[(from - base) as usize..(to - base) as usize]
                .copy_from_slice(&data[(from - off) as usize..(to - off) as usize]);
            fresh.push((k, self.fill_page(tx, &page).await?));
        }
        // The data dependency: the pages are persistent before the
        // transaction that maps them.
        self.pm().sfence(tx.core).await?;
        for (k, p) in fresh {
            Self::remap(tx, &mut i, k, Some(p)).await?;
        }
        i.size = i.size.max(end);
        tx.put_inode(ino, &i);
        Ok(data.len())
    }

    /// Sets the size of file `ino` (a shorter file loses its pages past
    /// the end; a longer one reads zeros).
    pub async fn truncate(&self, ctx: Ctx, ino: Ino, size: u64) -> Result<()> {
        let core = self.core(ctx)?;
        let _g = self.lock().await;
        let mut tx = self.tx(&core);
        let r = self.truncate_in(&mut tx, ino, size).await;
        self.finish(tx, r).await
    }

    async fn truncate_in(&self, tx: &mut Tx<'_>, ino: Ino, size: u64) -> Result<()> {
        let mut i = Self::file_inode(tx, ino).await?;
        if size > MAX_SIZE {
            return Err(PmfsError::Fs(Errno::TooLarge { size, max: MAX_SIZE }));
        }
        if size < i.size {
            let keep = size.div_ceil(PAGE) as usize;
            for k in keep..MAX_PAGES {
                if i.ptrs[k] != 0 {
                    Self::remap(tx, &mut i, k, None).await?;
                }
            }
            // The new last page keeps zeros past the end (copy-on-write).
            let k = (size / PAGE) as usize;
            if size % PAGE != 0 && i.ptrs[k] != 0 {
                let mut page = Self::page_of(tx, &i, k).await?;
                page[(size % PAGE) as usize..].fill(0);
                let p = self.fill_page(tx, &page).await?;
                self.pm().sfence(tx.core).await?;
                Self::remap(tx, &mut i, k, Some(p)).await?;
            }
        }
        i.size = size;
        tx.put_inode(ino, &i);
        Ok(())
    }
}
