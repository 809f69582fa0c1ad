//! Directories: Ext4 linear directory blocks read through the buffer cache.
//! Every change of a directory block is made under its page lock and
//! recorded on behalf of the directory and of the entry's inode, so that
//! an fsync of either persists it (ccNVMe 5.3's path snapshots).

use crate::error::FsError;
use crate::fs::{Ctx, Fs, Ino, InodeState};
use crate::layout::{
    decode_dir_block, dir_bytes, dirent_len, encode_dir_block, DirEntry, FileType, BLOCK, DIR_SPACE, NAME_MAX,
};

/// Checks a name for a directory entry.
pub fn check_name(name: &str) -> Result<(), FsError> {
    if name.len() > NAME_MAX {
        return Err(FsError::NameTooLong);
    }
    if name.is_empty() || name.contains('/') || name.contains('\0') {
        return Err(FsError::Invalid(format!("bad name {name:?}")));
    }
    Ok(())
}

impl Fs {
    /// Device blocks of a directory, in file order.
    fn dir_blocks(dir: &InodeState) -> Result<Vec<u64>, FsError> {
        let ino = dir.inode.borrow();
        if ino.size % BLOCK as u64 != 0 {
            return Err(FsError::Corrupt(format!(
                "directory {} has size {}",
                dir.ino, ino.size
            )));
        }
        let n = (ino.size / BLOCK as u64) as u32;
        drop(ino);
        (0..n)
            .map(|fb| {
                Fs::bmap(dir, fb).ok_or_else(|| FsError::Corrupt(format!("directory {} has a hole", dir.ino)))
            })
            .collect()
    }

    /// Every entry of `dir`, with the block holding it.
    pub(crate) async fn dir_entries(
        &self,
        ctx: Ctx,
        dir: &InodeState,
    ) -> Result<Vec<(u64, DirEntry)>, FsError> {
        if dir.inode.borrow().file_type() != Some(FileType::Dir) {
            return Err(FsError::NotDir);
        }
        let mut out = Vec::new();
        for b in Fs::dir_blocks(dir)? {
            let buf = self.meta(ctx, b).await?;
            let entries = decode_dir_block(&buf.data()[..])?;
            self.cycles(ctx, self.profile.dirent_cycles * entries.len().max(1) as u64)
                .await;
            out.extend(entries.into_iter().map(|e| (b, e)));
        }
        Ok(out)
    }

    /// The entry `name` of `dir`.
    pub(crate) async fn dir_lookup(
        &self,
        ctx: Ctx,
        dir: &InodeState,
        name: &str,
    ) -> Result<Option<(Ino, FileType)>, FsError> {
        Ok(self
            .dir_entries(ctx, dir)
            .await?
            .into_iter()
            .find(|(_, e)| e.name == name.as_bytes())
            .map(|(_, e)| (e.ino, e.ftype)))
    }

    /// Adds `name -> ino` to `dir` (the caller checked it is absent).
    pub(crate) async fn dir_add(
        &self,
        ctx: Ctx,
        dir: &InodeState,
        name: &str,
        ino: Ino,
        ftype: FileType,
        child: Option<&InodeState>,
    ) -> Result<(), FsError> {
        let entry = DirEntry {
            ino,
            ftype,
            name: name.as_bytes().to_vec(),
        };
        let need = dirent_len(entry.name.len());
        for b in Fs::dir_blocks(dir)? {
            let buf = self.meta(ctx, b).await?;
            let _g = buf.lock.lock().await;
            let mut entries = decode_dir_block(&buf.data()[..])?;
            if dir_bytes(&entries) + need <= DIR_SPACE {
                entries.push(entry);
                let enc = encode_dir_block(&entries)?;
                buf.modify().copy_from_slice(&enc[..]);
                drop(_g);
                self.dirtied_dir(b, dir, child);
                return Ok(());
            }
        }
        // No room: a new block at the end of the directory.
        let fb = (dir.inode.borrow().size / BLOCK as u64) as u32;
        let b = self.map_new(ctx, dir, fb).await?;
        let buf = self.meta_new(b);
        {
            let _g = buf.lock.lock().await;
            let enc = encode_dir_block(&[entry])?;
            buf.modify().copy_from_slice(&enc[..]);
        }
        dir.inode.borrow_mut().size += BLOCK as u64;
        self.dirtied_dir(b, dir, child);
        self.write_inode(ctx, dir).await
    }

    /// Removes `name` from `dir`; returns what it pointed to.
    pub(crate) async fn dir_remove(
        &self,
        ctx: Ctx,
        dir: &InodeState,
        name: &str,
        child: Option<&InodeState>,
    ) -> Result<(Ino, FileType), FsError> {
        for b in Fs::dir_blocks(dir)? {
            let buf = self.meta(ctx, b).await?;
            let _g = buf.lock.lock().await;
            let mut entries = decode_dir_block(&buf.data()[..])?;
            if let Some(pos) = entries.iter().position(|e| e.name == name.as_bytes()) {
                let e = entries.remove(pos);
                let enc = encode_dir_block(&entries)?;
                buf.modify().copy_from_slice(&enc[..]);
                drop(_g);
                self.dirtied_dir(b, dir, child);
                return Ok((e.ino, e.ftype));
            }
        }
        Err(FsError::NotFound)
    }

    /// Points `name` in `dir` at `ino` (rename over an existing entry).
    pub(crate) async fn dir_replace(
        &self,
        ctx: Ctx,
        dir: &InodeState,
        name: &str,
        ino: Ino,
        ftype: FileType,
        child: Option<&InodeState>,
    ) -> Result<(), FsError> {
        for b in Fs::dir_blocks(dir)? {
            let buf = self.meta(ctx, b).await?;
            let _g = buf.lock.lock().await;
            let mut entries = decode_dir_block(&buf.data()[..])?;
            if let Some(e) = entries.iter_mut().find(|e| e.name == name.as_bytes()) {
                e.ino = ino;
                e.ftype = ftype;
                let enc = encode_dir_block(&entries)?;
                buf.modify().copy_from_slice(&enc[..]);
                drop(_g);
                self.dirtied_dir(b, dir, child);
                return Ok(());
            }
        }
        Err(FsError::NotFound)
    }

    /// True if `dir` holds only "." and "..".
    pub(crate) async fn dir_is_empty(&self, ctx: Ctx, dir: &InodeState) -> Result<bool, FsError> {
        Ok(self
            .dir_entries(ctx, dir)
            .await?
            .iter()
            .all(|(_, e)| e.name == b"." || e.name == b".."))
    }

    /// Records a directory block change on behalf of the directory and the
    /// entry's inode. The inode also inherits what the directory has not
    /// synced yet (its ancestors' changes come with it transitively), so
    /// syncing the inode persists the whole path to it (ccNVMe 5.3's path
    /// snapshot, `docs/decisions.md` M11).
    fn dirtied_dir(&self, b: u64, dir: &InodeState, child: Option<&InodeState>) {
        match child {
            Some(c) => {
                self.dirtied(b, &[dir, c]);
                if c.ino != dir.ino {
                    c.dirty_meta
                        .borrow_mut()
                        .extend(dir.dirty_meta.borrow().iter().copied());
                }
            }
            None => self.dirtied(b, &[dir]),
        }
    }
}
