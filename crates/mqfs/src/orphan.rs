//! Open files and orphans. A file open through [`Fs::open`] keeps its
//! inode and data when its last name goes (unlink(2): "If the name was
//! the last link to a file but any processes still have the file open,
//! the file will remain in existence until the last file descriptor
//! referring to it is closed"); the last [`Fs::release`] frees it.
//!
//! So that a crash in between leaks nothing, such an inode is listed in
//! the orphan table (reserved inode slot [`ORPHAN_INO`], in the same
//! inode-table block as the root) in the same transaction as the unlink
//! that orphaned it, and removed from it in the same transaction as its
//! freeing. Mount frees every inode the table lists with no link left
//! and empties the table, making that durable (`Fs::cleanup_orphans`),
//! as ext4's orphan processing at mount (fs/ext4/orphan.c,
//! `ext4_orphan_cleanup`); fsck accepts a listed inode with no link, as
//! e2fsck releases orphans without calling them damage.
//!
//! Deviations: the table is one inode slot ([`ORPHAN_SLOTS`] entries, as
//! ext4's orphan file is a fixed set of blocks); an orphan beyond that
//! stays in memory only and a crash leaks it (fsck then reports an
//! unreachable inode). Only regular files are opened.

use crate::error::FsError;
use crate::fs::{Ctx, Fs, Ino, InodeState};
use crate::layout::{
    decode_orphans, encode_orphans, FileType, FIRST_INO, INODE_SIZE, ORPHAN_INO, ORPHAN_SLOTS, ROOT_INO,
};

impl Fs {
    /// Opens the regular file `ino` (one more open file description):
    /// it survives the loss of its last name until [`Fs::release`].
    pub async fn open(&self, ctx: Ctx, ino: Ino) -> Result<(), FsError> {
        let _op = self.begin(ctx).await?;
        let st = self.iget(ctx, ino).await?;
        let _g = st.lock.lock().await;
        match st.inode.borrow().file_type() {
            Some(FileType::File) => {}
            Some(FileType::Dir) => return Err(FsError::IsDir),
            _ => return Err(FsError::Invalid("only regular files are opened".into())),
        }
        if st.inode.borrow().links == 0 {
            return Err(FsError::NotFound);
        }
        st.open.set(st.open.get() + 1);
        Ok(())
    }

    /// Closes one open file description of `ino`; the last close of an
    /// inode with no name left frees it.
    pub async fn release(&self, ctx: Ctx, ino: Ino) -> Result<(), FsError> {
        let _op = self.begin(ctx).await?;
        let st = self
            .inodes
            .borrow()
            .get(&ino)
            .cloned()
            .ok_or_else(|| FsError::Invalid(format!("inode {ino} is not open")))?;
        let _g = st.lock.lock().await;
        let n = st.open.get();
        if n == 0 {
            return Err(FsError::Invalid(format!("inode {ino} is not open")));
        }
        st.open.set(n - 1);
        if n == 1 {
            // ext4_release_file: the last close discards the file's
            // preallocations (mqfs does not track the access mode, so any
            // last close does; Linux asks for the last writer's).
            self.discard_preallocations(&st);
        }
        if n == 1 && st.inode.borrow().links == 0 {
            self.check_writable()?;
            self.orphan_remove(ctx, &st).await?;
            let root = self.iget(ctx, ROOT_INO).await?;
            self.free_inode(ctx, &st, false, &root).await?;
        }
        Ok(())
    }

    /// Rewrites the orphan table with `change` applied, on behalf of
    /// `owner`.
    async fn orphan_edit(
        &self,
        ctx: Ctx,
        owner: &InodeState,
        change: impl FnOnce(&mut Vec<u32>),
    ) -> Result<(), FsError> {
        let (blk, off) = self.sb.borrow().inode_location(ORPHAN_INO)?;
        let buf = self.meta(ctx, blk).await?;
        {
            let _l = buf.lock.lock().await;
            let mut list = decode_orphans(&buf.data()[off..off + INODE_SIZE]);
            change(&mut list);
            list.truncate(ORPHAN_SLOTS);
            buf.modify()[off..off + INODE_SIZE].copy_from_slice(&encode_orphans(&list));
        }
        self.dirtied(blk, &[owner]);
        Ok(())
    }

    /// Lists `st` (no name left, still open) as an orphan.
    pub(crate) async fn orphan_add(&self, ctx: Ctx, st: &InodeState) -> Result<(), FsError> {
        let ino = st.ino;
        self.orphan_edit(ctx, st, |l| {
            if l.len() < ORPHAN_SLOTS && !l.contains(&ino) {
                l.push(ino);
            }
        })
        .await
    }

    async fn orphan_remove(&self, ctx: Ctx, st: &InodeState) -> Result<(), FsError> {
        let ino = st.ino;
        self.orphan_edit(ctx, st, |l| l.retain(|i| *i != ino)).await
    }

    /// At mount, after recovery: frees every listed inode with no link
    /// left, empties the table and makes that durable. Entries that name
    /// no such inode (damage, or an inode linked again) are dropped.
    pub(crate) async fn cleanup_orphans(&self, ctx: Ctx) -> Result<(), FsError> {
        let (blk, off) = self.sb.borrow().inode_location(ORPHAN_INO)?;
        let list = decode_orphans(&self.meta(ctx, blk).await?.data()[off..off + INODE_SIZE]);
        if list.is_empty() {
            return Ok(());
        }
        let root = self.iget(ctx, ROOT_INO).await?;
        let inodes = self.sb.borrow().inodes();
        for ino in list {
            if ino < FIRST_INO || u64::from(ino) > inodes {
                continue;
            }
            let st = match self.iget(ctx, ino).await {
                Ok(st) => st,
                Err(FsError::Corrupt(_)) => continue,
                Err(e) => return Err(e),
            };
            let orphan =
                st.inode.borrow().links == 0 && st.inode.borrow().file_type() == Some(FileType::File);
            if orphan {
                self.free_inode(ctx, &st, false, &root).await?;
            }
        }
        self.orphan_edit(ctx, &root, |l| l.clear()).await?;
        self.sync(ctx).await
    }
}
