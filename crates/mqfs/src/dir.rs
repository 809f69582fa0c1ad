//! Directories: Ext4 directory blocks read through the buffer cache,
//! linear while a directory fits in one block, then hash-indexed
//! ([`crate::htree`], the index operations in `dir_index`).
//! Every change of a directory block is made under its page lock and
//! recorded on behalf of the directory and of the entry's inode, so that
//! an fsync of either persists it (ccNVMe 5.3's path snapshots).

use crate::error::FsError;
use crate::fs::{Ctx, Fs, Ino, InodeState};
use crate::htree::{decode_dx_root, encode_dx_root, name_hash};
use crate::layout::{
    decode_dir_block, dir_bytes, dirent_len, encode_dir_block, DirEntry, FileType, BLOCK, DIR_SPACE,
    FLAG_INDEX, NAME_MAX,
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

    /// Every entry of `dir`, with the block holding it: a linear scan of
    /// every block in file order (an indexed directory's root and nodes
    /// read as blocks holding only "." and ".." or nothing, see
    /// [`crate::htree`]).
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
            let entries = self.read_entries(ctx, b).await?;
            out.extend(entries.into_iter().map(|e| (b, e)));
        }
        Ok(out)
    }

    /// The entries of directory block `b`, charging `dirent_cycles` per
    /// entry scanned.
    async fn read_entries(&self, ctx: Ctx, b: u64) -> Result<Vec<DirEntry>, FsError> {
        let buf = self.meta(ctx, b).await?;
        let entries = decode_dir_block(&buf.data()[..])?;
        self.cycles(ctx, self.profile.cpu.dirent_cycles * entries.len().max(1) as u64)
            .await;
        Ok(entries)
    }

    /// True if `dir` is indexed ([`crate::htree`]).
    fn is_indexed(dir: &InodeState) -> bool {
        dir.inode.borrow().flags & FLAG_INDEX != 0
    }

    /// The device block of the directory's logical block `fb`.
    pub(crate) fn dir_block(dir: &InodeState, fb: u32) -> Result<u64, FsError> {
        let n = dir.inode.borrow().size / BLOCK as u64;
        if fb as u64 >= n {
            return Err(FsError::Corrupt(format!(
                "directory index of {} points at block {fb} of {n}",
                dir.ino
            )));
        }
        Fs::bmap(dir, fb).ok_or_else(|| FsError::Corrupt(format!("directory {} has a hole", dir.ino)))
    }

    /// The blocks a lookup of `name` reads entries from: every block of a
    /// linear directory; of an indexed one, the leaf its hash leads to and
    /// the leaves a collision continues into ("." and ".." are in the root).
    async fn candidate_blocks(&self, ctx: Ctx, dir: &InodeState, name: &[u8]) -> Result<Vec<u64>, FsError> {
        if dir.inode.borrow().file_type() != Some(FileType::Dir) {
            return Err(FsError::NotDir);
        }
        if !Fs::is_indexed(dir) {
            return Fs::dir_blocks(dir);
        }
        if name == b"." || name == b".." {
            return Ok(vec![Fs::dir_block(dir, 0)?]);
        }
        let hash = name_hash(self.sb.borrow().hash_seed, name);
        let mut probe = self.dx_probe(ctx, dir, hash).await?;
        let mut out = vec![Fs::dir_block(dir, probe.leaf)?];
        while self.dx_next(ctx, dir, &mut probe, hash).await? {
            out.push(Fs::dir_block(dir, probe.leaf)?);
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
        for b in self.candidate_blocks(ctx, dir, name.as_bytes()).await? {
            if let Some(e) = self
                .read_entries(ctx, b)
                .await?
                .into_iter()
                .find(|e| e.name == name.as_bytes())
            {
                return Ok(Some((e.ino, e.ftype)));
            }
        }
        Ok(None)
    }

    /// Adds `name -> ino` to `dir` (the caller checked it is absent). A
    /// linear directory whose one block is full becomes indexed
    /// (`make_indexed_dir`); an indexed one splits the full leaf. The
    /// child (`ino`'s state) then has a new entry in `dir`, which an
    /// Ext4-NJ fsync of it also syncs (Linux fs/ext4/namei.c
    /// `ext4_add_entry` sets `EXT4_STATE_NEWENTRY`; see [`crate::sync`]).
    pub(crate) async fn dir_add(
        &self,
        ctx: Ctx,
        dir: &InodeState,
        name: &str,
        ino: Ino,
        ftype: FileType,
        child: Option<&InodeState>,
    ) -> Result<(), FsError> {
        self.dir_add_entry(ctx, dir, name, ino, ftype, child).await?;
        if let Some(c) = child.filter(|c| c.ino == ino && c.ino != dir.ino) {
            c.new_entry.set(Some(dir.ino));
        }
        Ok(())
    }

    async fn dir_add_entry(
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
        // A split leaves room for any entry in the half the new one goes
        // to; a second round is for a concurrent change of the index.
        for _ in 0..4 {
            let (blocks, probe) = if Fs::is_indexed(dir) {
                let hash = name_hash(self.sb.borrow().hash_seed, &entry.name);
                let probe = self.dx_probe(ctx, dir, hash).await?;
                (vec![Fs::dir_block(dir, probe.leaf)?], Some(probe))
            } else {
                (Fs::dir_blocks(dir)?, None)
            };
            for b in blocks {
                if self.insert_into(ctx, b, &entry).await? {
                    self.dirtied_dir(b, dir, child);
                    return Ok(());
                }
            }
            match probe {
                Some(p) => self.dx_split(ctx, dir, &p, child).await?,
                None if dir.inode.borrow().size == BLOCK as u64 => self.make_indexed(ctx, dir, child).await?,
                None => return self.dir_append_block(ctx, dir, &entry, child).await,
            }
        }
        Err(FsError::Corrupt(format!(
            "directory {}: no room after splits",
            dir.ino
        )))
    }

    /// Adds `entry` to block `b` if it fits (under the page lock).
    async fn insert_into(&self, ctx: Ctx, b: u64, entry: &DirEntry) -> Result<bool, FsError> {
        let buf = self.meta(ctx, b).await?;
        let _g = buf.lock.lock().await;
        let mut entries = decode_dir_block(&buf.data()[..])?;
        if dir_bytes(&entries) + dirent_len(entry.name.len()) > DIR_SPACE {
            return Ok(false);
        }
        entries.push(entry.clone());
        let enc = encode_dir_block(&entries)?;
        buf.modify().copy_from_slice(&enc[..]);
        Ok(true)
    }

    /// A linear directory of several blocks (left by a conversion that
    /// ran out of space) grows by one block holding `entry`.
    async fn dir_append_block(
        &self,
        ctx: Ctx,
        dir: &InodeState,
        entry: &DirEntry,
        child: Option<&InodeState>,
    ) -> Result<(), FsError> {
        let fb = (dir.inode.borrow().size / BLOCK as u64) as u32;
        let b = self.map_new(ctx, dir, fb).await?;
        let buf = self.meta_new(b);
        {
            let _g = buf.lock.lock().await;
            let enc = encode_dir_block(std::slice::from_ref(entry))?;
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
        for b in self.candidate_blocks(ctx, dir, name.as_bytes()).await? {
            if let Some(e) = self.change_entry(ctx, b, name, None).await? {
                self.dirtied_dir(b, dir, child);
                return Ok((e.ino, e.ftype));
            }
        }
        Err(FsError::NotFound)
    }

    /// Points `name` in `dir` at `ino` (rename over an existing entry, or
    /// a moved directory's "..").
    pub(crate) async fn dir_replace(
        &self,
        ctx: Ctx,
        dir: &InodeState,
        name: &str,
        ino: Ino,
        ftype: FileType,
        child: Option<&InodeState>,
    ) -> Result<(), FsError> {
        if name == ".." && Fs::is_indexed(dir) {
            // In the dx_root: re-encoding it as a linear block would drop
            // the index.
            let b = Fs::dir_block(dir, 0)?;
            let buf = self.meta(ctx, b).await?;
            {
                let _g = buf.lock.lock().await;
                let mut root = decode_dx_root(&buf.data()[..])?;
                root.dotdot = ino;
                buf.modify().copy_from_slice(&encode_dx_root(&root)[..]);
            }
            self.dirtied_dir(b, dir, child);
            return Ok(());
        }
        for b in self.candidate_blocks(ctx, dir, name.as_bytes()).await? {
            if self
                .change_entry(ctx, b, name, Some((ino, ftype)))
                .await?
                .is_some()
            {
                self.dirtied_dir(b, dir, child);
                return Ok(());
            }
        }
        Err(FsError::NotFound)
    }

    /// Under block `b`'s page lock: removes the entry `name` (`to` None)
    /// or points it at `to`. Returns the entry as it was, None if `b`
    /// does not hold it.
    async fn change_entry(
        &self,
        ctx: Ctx,
        b: u64,
        name: &str,
        to: Option<(Ino, FileType)>,
    ) -> Result<Option<DirEntry>, FsError> {
        let buf = self.meta(ctx, b).await?;
        let _g = buf.lock.lock().await;
        let mut entries = decode_dir_block(&buf.data()[..])?;
        let Some(pos) = entries.iter().position(|e| e.name == name.as_bytes()) else {
            return Ok(None);
        };
        let old = match to {
            None => entries.remove(pos),
            Some((ino, ftype)) => {
                let old = entries[pos].clone();
                entries[pos].ino = ino;
                entries[pos].ftype = ftype;
                old
            }
        };
        let enc = encode_dir_block(&entries)?;
        buf.modify().copy_from_slice(&enc[..]);
        Ok(Some(old))
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
    /// entry's inode, so syncing the inode persists the whole path to it
    /// (ccNVMe 5.3's path snapshot, `docs/decisions.md` M11; see
    /// [`Fs::inherit_dir_meta`]).
    pub(crate) fn dirtied_dir(&self, b: u64, dir: &InodeState, child: Option<&InodeState>) {
        match child {
            Some(c) => {
                self.dirtied(b, &[dir, c]);
                self.inherit_dir_meta(c, dir);
            }
            None => self.dirtied(b, &[dir]),
        }
    }

    /// `child` inherits what `dir` has not synced (M11's path snapshot)
    /// where its own fsync writes only its own set: in `none` mode. In
    /// `mq` nothing is copied: the entanglement closure reaches `dir`
    /// through the entry block both own and takes `dir`'s whole set (and,
    /// the same way, its ancestors'), so a copy only made the sets of a
    /// directory's children grow with the directory (quadratic in its
    /// unsynced creates). JBD2's modes commit every dirty block and use
    /// no per-inode set.
    pub(crate) fn inherit_dir_meta(&self, child: &InodeState, dir: &InodeState) {
        if child.ino != dir.ino && self.mode() == crate::layout::Mode::None {
            child.dirty_meta.absorb(&dir.dirty_meta);
        }
    }
}
