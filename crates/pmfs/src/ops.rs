//! Namespace operations, each one transaction: create, mkdir, link,
//! unlink, rmdir, rename.

use fsapi::Errno;
use pcie_sim::{PmAddr, Purpose};

use crate::error::{PmfsError, Result};
use crate::fs::{Attr, Ctx, Pmfs};
use crate::journal::{DirOp, Tx};
use crate::layout::{check_name, encode_dentry, FileType, Ino, Inode, LINE, MAX_PAGES, PAGE};

impl Pmfs {
    /// Creates file `name` in `parent` with permissions `perm`.
    pub async fn create(&self, ctx: Ctx, parent: Ino, name: &str, perm: u16) -> Result<Attr> {
        self.make(ctx, parent, name, perm, FileType::File).await
    }

    /// Creates directory `name` in `parent`.
    pub async fn mkdir(&self, ctx: Ctx, parent: Ino, name: &str, perm: u16) -> Result<Attr> {
        self.make(ctx, parent, name, perm, FileType::Dir).await
    }

    async fn make(&self, ctx: Ctx, parent: Ino, name: &str, perm: u16, ftype: FileType) -> Result<Attr> {
        check_name(name)?;
        let core = self.core(ctx)?;
        let _g = self.lock().await;
        let mut tx = self.tx(&core);
        let r = self.make_in(&mut tx, parent, name, perm, ftype).await;
        self.finish(tx, r).await
    }

    async fn make_in(
        &self,
        tx: &mut Tx<'_>,
        parent: Ino,
        name: &str,
        perm: u16,
        ftype: FileType,
    ) -> Result<Attr> {
        let mut dir = tx.dir_inode(parent).await?;
        if self.find(tx, parent, name).await.is_ok() {
            return Err(PmfsError::Fs(Errno::Exists));
        }
        let ino = self.alloc_ino(tx)?;
        let inode = Inode::new(ftype, perm & 0o7777);
        tx.put_inode(ino, &inode);
        self.add_entry(tx, parent, &mut dir, ino, name).await?;
        if ftype == FileType::Dir {
            dir.links += 1;
            tx.dir_ops.push(DirOp::NewDir(ino));
        }
        tx.put_inode(parent, &dir);
        Ok(crate::fs::attr_of(ino, &inode))
    }

    /// Writes entry (`ino`, `name`) into a free slot of directory
    /// `parent`, inode `dir` (which the caller stages afterwards), adding a
    /// zeroed directory block if every slot is taken. The free slots come
    /// from the dentry cache: no block is read.
    async fn add_entry(
        &self,
        tx: &mut Tx<'_>,
        parent: Ino,
        dir: &mut Inode,
        ino: Ino,
        name: &str,
    ) -> Result<()> {
        let used: std::collections::BTreeSet<u64> = self.entries(parent).iter().map(|e| e.1 .0).collect();
        tx.dir_ops
            .push(DirOp::Add(parent, name.to_string(), PmAddr(0), ino));
        for &p in dir.ptrs.iter().filter(|&&p| p != 0) {
            if p > tx.geo.pages {
                return Err(PmfsError::Corrupt {
                    at: 0,
                    reason: "directory block pointer out of range",
                });
            }
            let at = tx.geo.page_addr(p - 1);
            // PMFS's linear directory: the slots are examined in order
            // until a free one (SoupFS 4.2: its "cost of directory lookup
            // grows linearly with the increasing number of directory
            // entries").
            let free = (0..PAGE / LINE)
                .map(|k| at + k * LINE)
                .position(|s| !used.contains(&s.0));
            tx.work.dirents += free.map_or(PAGE / LINE, |k| k as u64 + 1);
            if let Some(slot) = free.map(|k| at + k as u64 * LINE) {
                tx.put_line(slot, &encode_dentry(ino, name));
                Self::set_added_slot(tx, slot);
                return Ok(());
            }
        }
        let Some(k) = dir.ptrs.iter().position(|&p| p == 0) else {
            return Err(PmfsError::Fs(Errno::NoSpace("directory full")));
        };
        // A new directory block: zeroed and made persistent before the
        // transaction that maps it (a data dependency).
        let page = self.alloc_page(tx)?;
        let at = tx.geo.page_addr(page);
        let zero = [0u8; LINE as usize];
        for l in 0..PAGE / LINE {
            self.pm()
                .nt_store(tx.core, at + l * LINE, &zero, Purpose::UNTAGGED)
                .await?;
        }
        self.pm().sfence(tx.core).await?;
        tx.set_bit(page, true).await?;
        dir.ptrs[k] = page + 1;
        tx.put_line(at, &encode_dentry(ino, name));
        Self::set_added_slot(tx, at);
        Ok(())
    }

    /// Fills in the slot of the [`DirOp::Add`] that `add_entry` pushed.
    fn set_added_slot(tx: &mut Tx<'_>, at: PmAddr) {
        if let Some(DirOp::Add(_, _, slot, _)) = tx.dir_ops.last_mut() {
            *slot = at;
        }
    }

    /// Drops one link of `ino` (a file), freeing it and its pages at zero.
    async fn drop_link(&self, tx: &mut Tx<'_>, ino: Ino) -> Result<()> {
        let mut i = tx.live_inode(ino).await?;
        i.links = i.links.saturating_sub(1);
        if i.links == 0 {
            self.free_inode(tx, ino, &i).await?;
        } else {
            tx.put_inode(ino, &i);
        }
        Ok(())
    }

    /// Frees inode `ino` and its pages.
    async fn free_inode(&self, tx: &mut Tx<'_>, ino: Ino, i: &Inode) -> Result<()> {
        for &p in i.ptrs.iter().filter(|&&p| p != 0) {
            tx.set_bit(p - 1, false).await?;
            tx.free_pages.push(p - 1);
        }
        tx.put_inode(ino, &Inode::default());
        tx.free_inos.push(ino);
        Ok(())
    }

    /// Links file `ino` as `name` in `parent`.
    pub async fn link(&self, ctx: Ctx, ino: Ino, parent: Ino, name: &str) -> Result<Attr> {
        check_name(name)?;
        let core = self.core(ctx)?;
        let _g = self.lock().await;
        let mut tx = self.tx(&core);
        let r = self.link_in(&mut tx, ino, parent, name).await;
        self.finish(tx, r).await
    }

    async fn link_in(&self, tx: &mut Tx<'_>, ino: Ino, parent: Ino, name: &str) -> Result<Attr> {
        let mut i = tx.live_inode(ino).await?;
        if i.ftype == Some(FileType::Dir) {
            return Err(PmfsError::Fs(Errno::Invalid("hard link to a directory")));
        }
        let mut dir = tx.dir_inode(parent).await?;
        if self.find(tx, parent, name).await.is_ok() {
            return Err(PmfsError::Fs(Errno::Exists));
        }
        i.links = i
            .links
            .checked_add(1)
            .ok_or(PmfsError::Fs(Errno::Invalid("too many links")))?;
        tx.put_inode(ino, &i);
        self.add_entry(tx, parent, &mut dir, ino, name).await?;
        tx.put_inode(parent, &dir);
        Ok(crate::fs::attr_of(ino, &i))
    }

    /// Removes file entry `name` from `parent`.
    pub async fn unlink(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<()> {
        self.remove(ctx, parent, name, FileType::File).await
    }

    /// Removes the empty directory `name` from `parent`.
    pub async fn rmdir(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<()> {
        self.remove(ctx, parent, name, FileType::Dir).await
    }

    async fn remove(&self, ctx: Ctx, parent: Ino, name: &str, want: FileType) -> Result<()> {
        check_name(name)?;
        let core = self.core(ctx)?;
        let _g = self.lock().await;
        let mut tx = self.tx(&core);
        let r = self.remove_in(&mut tx, parent, name, want).await;
        self.finish(tx, r).await
    }

    async fn remove_in(&self, tx: &mut Tx<'_>, parent: Ino, name: &str, want: FileType) -> Result<()> {
        let (slot, ino) = self.find(tx, parent, name).await?;
        let i = tx.live_inode(ino).await?;
        match (want, i.ftype) {
            (FileType::File, Some(FileType::Dir)) => return Err(PmfsError::Fs(Errno::IsDir)),
            (FileType::Dir, Some(FileType::File)) => return Err(PmfsError::Fs(Errno::NotDir)),
            _ => {}
        }
        if want == FileType::Dir && !self.entries(ino).is_empty() {
            return Err(PmfsError::Fs(Errno::NotEmpty));
        }
        tx.put_word(slot, 0);
        tx.dir_ops.push(DirOp::Remove(parent, name.to_string()));
        if want == FileType::Dir {
            tx.dir_ops.push(DirOp::DropDir(ino));
            self.free_inode(tx, ino, &i).await?;
            let mut dir = tx.dir_inode(parent).await?;
            dir.links = dir.links.saturating_sub(1);
            tx.put_inode(parent, &dir);
        } else {
            self.drop_link(tx, ino).await?;
        }
        Ok(())
    }

    /// Renames `from_name` in `from` to `to_name` in `to`, replacing a
    /// file, or an empty directory if the source is a directory.
    pub async fn rename(&self, ctx: Ctx, from: Ino, from_name: &str, to: Ino, to_name: &str) -> Result<()> {
        check_name(from_name)?;
        check_name(to_name)?;
        let core = self.core(ctx)?;
        let _g = self.lock().await;
        let mut tx = self.tx(&core);
        let r = self.rename_in(&mut tx, from, from_name, to, to_name).await;
        self.finish(tx, r).await
    }

    /// True if directory `ino` is `dir` or below it (a walk of the
    /// dentry cache).
    fn is_under(&self, ino: Ino, dir: Ino) -> Result<bool> {
        let mut todo = vec![dir];
        let mut seen = 0usize;
        while let Some(d) = todo.pop() {
            if d == ino {
                return Ok(true);
            }
            seen += 1;
            if seen > self.geometry().inodes as usize {
                return Err(PmfsError::Corrupt {
                    at: 0,
                    reason: "directory cycle",
                });
            }
            todo.extend(
                self.entries(d)
                    .into_iter()
                    .map(|e| e.2)
                    .filter(|&c| self.is_cached_dir(c)),
            );
        }
        Ok(false)
    }

    async fn rename_in(&self, tx: &mut Tx<'_>, from: Ino, fname: &str, to: Ino, tname: &str) -> Result<()> {
        let (src_slot, ino) = self.find(tx, from, fname).await?;
        let src = tx.live_inode(ino).await?;
        let src_dir = src.ftype == Some(FileType::Dir);
        tx.dir_inode(to).await?;
        if src_dir && self.is_under(to, ino)? {
            return Err(PmfsError::Fs(Errno::Invalid("rename of a directory into itself")));
        }
        let dst = self.find(tx, to, tname).await.ok();
        if let Some((dst_slot, old)) = dst {
            if old == ino {
                return Ok(());
            }
            let o = tx.live_inode(old).await?;
            match (src_dir, o.ftype == Some(FileType::Dir)) {
                (false, true) => return Err(PmfsError::Fs(Errno::IsDir)),
                (true, false) => return Err(PmfsError::Fs(Errno::NotDir)),
                (true, true) => {
                    if !self.entries(old).is_empty() {
                        return Err(PmfsError::Fs(Errno::NotEmpty));
                    }
                    self.free_inode(tx, old, &o).await?;
                    tx.dir_ops.push(DirOp::DropDir(old));
                    let mut t = tx.dir_inode(to).await?;
                    t.links = t.links.saturating_sub(1);
                    tx.put_inode(to, &t);
                }
                (false, false) => self.drop_link(tx, old).await?,
            }
            tx.put_word(src_slot, 0);
            tx.put_line(dst_slot, &encode_dentry(ino, tname));
            tx.dir_ops.push(DirOp::Remove(from, fname.to_string()));
            tx.dir_ops.push(DirOp::Add(to, tname.to_string(), dst_slot, ino));
        } else {
            tx.put_word(src_slot, 0);
            tx.dir_ops.push(DirOp::Remove(from, fname.to_string()));
            let mut t = tx.dir_inode(to).await?;
            self.add_entry(tx, to, &mut t, ino, tname).await?;
            tx.put_inode(to, &t);
        }
        if src_dir && from != to {
            let mut f = tx.dir_inode(from).await?;
            f.links = f.links.saturating_sub(1);
            tx.put_inode(from, &f);
            let mut t = tx.dir_inode(to).await?;
            t.links += 1;
            tx.put_inode(to, &t);
        }
        Ok(())
    }
}

/// The largest directory: its blocks' entries.
pub const MAX_DIR_ENTRIES: u64 = MAX_PAGES as u64 * PAGE / LINE;
