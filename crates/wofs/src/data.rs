//! File data: read, write, truncate, setattr.
//!
//! Data pages are copy-on-write: a write fills fresh pages (the old
//! content of a partly written page copied in), persists them with
//! non-temporal stores and an `sfence`, and only then writes the
//! attribute package that maps them (the file's size, permissions and
//! whole page map), so a package never names data that may not have
//! persisted. The pages it replaces and the old attribute package are
//! freed once the new package is persistent. Bytes past the end of the
//! file are always zero in the pages of a package: a page that holds the
//! old end of file is copied with them zeroed when the file grows.

use fsapi::{Errno, Work};
use pcie_sim::Core;

use crate::error::{Result, WofsError};
use crate::fs::{Attr, Ctx, Wofs};
use crate::layout::PAGE;
use crate::package::{AttrBody, Body, FileType, Ino, MAX_PAGES};
use crate::pmio;
use crate::ptl::Inode;

/// The largest file.
pub const MAX_SIZE: u64 = MAX_PAGES as u64 * PAGE;

/// Changes for [`Wofs::setattr`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// New permission bits.
    pub perm: Option<u16>,
    /// New size (truncate or extend).
    pub size: Option<u64>,
}

impl Wofs {
    /// Reads up to `len` bytes at `off` of file `ino`.
    pub async fn read(&self, ctx: Ctx, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>> {
        let _g = self.lock().await;
        let core = self.core(ctx)?;
        let i = self.file(ino)?;
        let end = i.size.min(off.saturating_add(len as u64));
        let mut out = Vec::with_capacity(end.saturating_sub(off) as usize);
        let mut at = off;
        while at < end {
            let fp = (at / PAGE) as usize;
            let in_page = at % PAGE;
            let n = (PAGE - in_page).min(end - at);
            match i.pages.get(fp).copied().unwrap_or(0) {
                0 => out.resize(out.len() + n as usize, 0),
                pg => {
                    let addr = self.geometry().page_addr(pg) + in_page;
                    out.extend(pmio::load(self.pm(), &core, addr, n as usize).await?);
                }
            }
            at += n;
        }
        Ok(out)
    }

    fn file(&self, ino: Ino) -> Result<Inode> {
        let p = self.ptl_ref();
        let i = p.inode(ino)?;
        if i.ftype == FileType::Dir {
            return Err(WofsError::Fs(Errno::IsDir));
        }
        Ok(i.clone())
    }

    /// Writes `data` at `off` of file `ino`; returns the bytes written.
    pub async fn write(&self, ctx: Ctx, ino: Ino, off: u64, data: &[u8]) -> Result<usize> {
        let _g = self.lock().await;
        let core = self.core(ctx)?;
        let i = self.file(ino)?;
        if data.is_empty() {
            return Ok(0);
        }
        let end = off.saturating_add(data.len() as u64);
        if end > MAX_SIZE {
            return Err(WofsError::Fs(Errno::TooLarge {
                size: end,
                max: MAX_SIZE,
            }));
        }
        let size = i.size.max(end);
        let first = off / PAGE;
        let mut touched: Vec<u64> = (first..end.div_ceil(PAGE)).collect();
        if size > i.size && i.size % PAGE != 0 && i.size / PAGE < first {
            touched.insert(0, i.size / PAGE);
        }
        let mut fills = Vec::with_capacity(touched.len());
        for fp in touched {
            let mut page = self.page_below(&core, &i, fp).await?;
            let lo = off.max(fp * PAGE);
            let hi = end.min((fp + 1) * PAGE);
            if lo < hi {
                let src = &data[(lo - off) as usize..(hi - off) as usize];
                page[(lo - fp * PAGE) as usize..(hi - fp * PAGE) as usize].copy_from_slice(src);
            }
            fills.push((fp as usize, page));
        }
        self.commit_attr(&core, ino, &i, size, i.perm, fills).await?;
        Ok(data.len())
    }

    /// The content of file page `fp` as the file has it: zero past the end
    /// of file and in holes.
    async fn page_below(&self, core: &Core, i: &Inode, fp: u64) -> Result<Vec<u8>> {
        let mut page = match i.pages.get(fp as usize).copied().unwrap_or(0) {
            0 => vec![0u8; PAGE as usize],
            pg => pmio::load(self.pm(), core, self.geometry().page_addr(pg), PAGE as usize).await?,
        };
        let valid = i.size.saturating_sub(fp * PAGE).min(PAGE) as usize;
        page[valid..].fill(0);
        Ok(page)
    }

    /// Fills fresh pages with `fills` (file page, content), persists them,
    /// then writes the attribute package for `size`, `perm` and the new
    /// map; frees what it replaced.
    async fn commit_attr(
        &self,
        core: &Core,
        ino: Ino,
        old: &Inode,
        size: u64,
        perm: u16,
        fills: Vec<(usize, Vec<u8>)>,
    ) -> Result<()> {
        let mut fresh = Vec::with_capacity(fills.len());
        let mut writes = Vec::with_capacity(fills.len());
        for (fp, content) in fills {
            let pg = match self.ptl().space.alloc_page() {
                Ok(pg) => pg,
                Err(e) => {
                    self.free_pages(fresh.iter().map(|f: &(usize, u32)| f.1));
                    return Err(e);
                }
            };
            writes.push((self.geometry().page_addr(pg), content));
            fresh.push((fp, pg));
        }
        let mut pages = old.pages.clone();
        pages.resize(size.div_ceil(PAGE) as usize, 0);
        let mut dropped: Vec<u32> = old.pages.iter().skip(pages.len()).copied().collect();
        for &(fp, pg) in &fresh {
            if let Some(slot) = pages.get_mut(fp) {
                dropped.push(std::mem::replace(slot, pg));
            }
        }
        let body = Body::Attr(AttrBody {
            ino,
            size,
            perm,
            pages: pages.clone(),
        });
        let done = async {
            pmio::persist_pages(self.pm(), core, &writes, self.faults()).await?;
            self.commit(core, body).await
        };
        let pkg = match done.await {
            Ok(pkg) => pkg,
            Err(e) => {
                self.free_pages(fresh.iter().map(|f| f.1));
                return Err(e);
            }
        };
        let mut p = self.ptl();
        if let Some(old_attr) = old.attr {
            p.space.retire(old_attr.slot);
        }
        for pg in dropped {
            p.space.free_page(pg);
        }
        p.count(Work {
            inodes: 1,
            ..Work::default()
        });
        if let Some(i) = p.inodes.get_mut(&ino) {
            i.size = size;
            i.perm = perm;
            i.pages = pages;
            i.attr = Some(pkg);
        }
        Ok(())
    }

    fn free_pages(&self, pages: impl Iterator<Item = u32>) {
        let mut p = self.ptl();
        for pg in pages {
            p.space.free_page(pg);
        }
    }

    /// Changes permissions and size (one attribute package).
    pub async fn setattr(&self, ctx: Ctx, ino: Ino, set: &SetAttr) -> Result<Attr> {
        {
            let _g = self.lock().await;
            let core = self.core(ctx)?;
            let i = self.ptl_ref().inode(ino)?.clone();
            let perm = set.perm.map_or(i.perm, |p| p & 0o7777);
            let mut fills = Vec::new();
            let size = match set.size {
                None => i.size,
                Some(_) if i.ftype == FileType::Dir => return Err(WofsError::Fs(Errno::IsDir)),
                Some(s) if s > MAX_SIZE => {
                    return Err(WofsError::Fs(Errno::TooLarge {
                        size: s,
                        max: MAX_SIZE,
                    }))
                }
                Some(s) => {
                    let fp = i.size / PAGE;
                    let mapped = i.pages.get(fp as usize).is_some_and(|&p| p != 0);
                    if s > i.size && i.size % PAGE != 0 && mapped {
                        // The old end of file's page, its tail zeroed.
                        fills.push((fp as usize, self.page_below(&core, &i, fp).await?));
                    }
                    s
                }
            };
            if size != i.size || perm != i.perm {
                self.commit_attr(&core, ino, &i, size, perm, fills).await?;
            }
        }
        self.getattr(ctx, ino).await
    }

    /// Sets the size of file `ino`.
    pub async fn truncate(&self, ctx: Ctx, ino: Ino, size: u64) -> Result<()> {
        self.setattr(
            ctx,
            ino,
            &SetAttr {
                size: Some(size),
                ..SetAttr::default()
            },
        )
        .await
        .map(|_| ())
    }
}
