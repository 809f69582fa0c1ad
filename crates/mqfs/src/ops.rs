//! The file-system operations, inode-based so that a FUSE adapter can sit
//! on them: lookup, getattr, setattr, create, mkdir, unlink, rmdir, rename,
//! link, symlink, readlink, read, write, truncate, readdir, statfs.
//!
//! Every operation runs in the calling simulated thread and charges its
//! CPU time to that thread's core. An operation holds the operation gate
//! for its whole duration, so a journal that freezes the gate to take its
//! snapshot never sees half an operation.

use std::rc::Rc;

use crate::dir::check_name;
use crate::error::FsError;
use crate::fs::{Ctx, Fs, Ino, InodeState};
use crate::layout::{DirEntry, FileType, Inode, BLOCK, FLAG_INLINE_SYMLINK, INLINE_SYMLINK, ROOT_INO};
use crate::perm::{self, Cred, NewOwner};

/// Attributes of an inode (what `stat` returns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr {
    /// Inode number.
    pub ino: Ino,
    /// File type.
    pub ftype: FileType,
    /// Permission bits.
    pub perm: u16,
    /// Hard links.
    pub links: u16,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Size in bytes.
    pub size: u64,
    /// 4 KiB blocks allocated.
    pub blocks: u64,
    /// Access time (ns since 1970, from [`Fs::now_ns`]).
    pub atime: u64,
    /// Modification time.
    pub mtime: u64,
    /// Change time.
    pub ctime: u64,
    /// A device's number (0 unless a character or block device).
    pub rdev: u32,
}

/// Changes for [`Fs::setattr`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetAttr {
    /// New permission bits.
    pub perm: Option<u16>,
    /// New owner.
    pub uid: Option<u32>,
    /// New group.
    pub gid: Option<u32>,
    /// New size (truncate or extend).
    pub size: Option<u64>,
    /// New access time.
    pub atime: Option<u64>,
    /// New modification time.
    pub mtime: Option<u64>,
}

/// File-system usage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatFs {
    /// Data blocks in all.
    pub blocks: u64,
    /// Free blocks.
    pub free_blocks: u64,
    /// Inodes in all.
    pub inodes: u64,
    /// Free inodes.
    pub free_inodes: u64,
    /// Block size.
    pub block_size: u32,
    /// Longest name.
    pub name_max: u32,
}

/// Permits of the operation gate: operations take one, a freeze takes all.
pub(crate) const GATE: u32 = 1 << 30;

fn attr_of(ino: Ino, i: &Inode) -> Result<Attr, FsError> {
    Ok(Attr {
        ino,
        ftype: i
            .file_type()
            .ok_or_else(|| FsError::Corrupt(format!("inode {ino} has no file type")))?,
        perm: i.mode & 0o7777,
        links: i.links,
        uid: i.uid,
        gid: i.gid,
        size: i.size,
        blocks: i.nblocks as u64,
        atime: i.atime,
        mtime: i.mtime,
        ctime: i.ctime,
        rdev: i.rdev,
    })
}

/// What [`Fs::make_as`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewInode<'a> {
    /// A regular file (creat(2)).
    File,
    /// A directory (mkdir(2)).
    Dir,
    /// A symbolic link to this target, 1 to 4096 bytes (symlink(2)).
    Symlink(&'a str),
    /// A special file (mknod(2)): a fifo, a socket, or a character or
    /// block device with this number. The number is kept for devices and
    /// ignored otherwise (mknod(2): "If the file type is S_IFCHR or
    /// S_IFBLK, then dev specifies the major and minor numbers ...
    /// otherwise it is ignored"); any other type is `EINVAL`.
    Special(FileType, u32),
}

/// What a new inode holds besides its type and permissions.
#[derive(Clone, Copy, Debug)]
enum Extra<'a> {
    /// Nothing (a file or directory).
    Nothing,
    /// A symlink's target.
    Target(&'a str),
    /// A special file's device number.
    Device(u32),
}

/// Locks two inodes in inode-number order (deadlock-free).
async fn lock2<'a>(
    a: &'a InodeState,
    b: &'a InodeState,
) -> (
    tokio::sync::MutexGuard<'a, ()>,
    Option<tokio::sync::MutexGuard<'a, ()>>,
) {
    if a.ino == b.ino {
        return (a.lock.lock().await, None);
    }
    if a.ino < b.ino {
        let ga = a.lock.lock().await;
        let gb = b.lock.lock().await;
        (ga, Some(gb))
    } else {
        let gb = b.lock.lock().await;
        let ga = a.lock.lock().await;
        (ga, Some(gb))
    }
}

impl Fs {
    /// Enters an operation: charges the system call and holds the gate.
    pub(crate) async fn begin(&self, ctx: Ctx) -> Result<crate::fs::OpGuard<'_>, FsError> {
        self.cpu(ctx, self.profile.cpu.syscall).await;
        Ok(self.enter_gate().await)
    }

    /// Holds one permit of the operation gate (no journal snapshot until
    /// it is dropped), without the system call.
    pub(crate) async fn enter_gate(&self) -> crate::fs::OpGuard<'_> {
        match self.gate.acquire().await {
            Ok(permit) => crate::fs::OpGuard { _permit: permit },
            Err(_) => unreachable!("the operation gate is never closed"),
        }
    }

    /// Attributes of `ino`.
    pub async fn getattr(&self, ctx: Ctx, ino: Ino) -> Result<Attr, FsError> {
        self.cpu(ctx, self.profile.cpu.syscall).await;
        self.peek_attr(ctx, ino).await
    }

    /// Looks `name` up in directory `parent`.
    pub async fn lookup(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<Attr, FsError> {
        self.cpu(ctx, self.profile.cpu.syscall).await;
        self.peek_lookup(ctx, parent, name).await
    }

    /// Attributes of `ino` without charging a system call: for the
    /// permission checks a front end makes as part of another operation
    /// (Linux checks the in-memory inode the path walk already holds).
    pub async fn peek_attr(&self, ctx: Ctx, ino: Ino) -> Result<Attr, FsError> {
        let st = self.iget(ctx, ino).await?;
        let i = st.inode.borrow();
        attr_of(ino, &i)
    }

    /// [`Fs::lookup`] without charging a system call (see
    /// [`Fs::peek_attr`]).
    pub async fn peek_lookup(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<Attr, FsError> {
        check_name(name)?;
        let dir = self.iget(ctx, parent).await?;
        match self.dir_lookup(ctx, &dir, name).await? {
            Some((ino, _)) => self.peek_attr(ctx, ino).await,
            None => Err(FsError::NotFound),
        }
    }

    /// Creates a regular file (owned by root: [`Fs::make_as`] makes one
    /// for another caller).
    pub async fn create(&self, ctx: Ctx, parent: Ino, name: &str, perm: u16) -> Result<Attr, FsError> {
        self.make_as(ctx, parent, name, NewInode::File, perm, &Cred::root())
            .await
    }

    /// Creates a directory (owned by root).
    pub async fn mkdir(&self, ctx: Ctx, parent: Ino, name: &str, perm: u16) -> Result<Attr, FsError> {
        self.make_as(ctx, parent, name, NewInode::Dir, perm, &Cred::root())
            .await
    }

    /// Creates a symbolic link to `target` (owned by root).
    pub async fn symlink(&self, ctx: Ctx, parent: Ino, name: &str, target: &str) -> Result<Attr, FsError> {
        self.make_as(ctx, parent, name, NewInode::Symlink(target), 0o777, &Cred::root())
            .await
    }

    /// Creates the special file `parent/name` of type `ftype` (a fifo, a
    /// character or block device with number `rdev`, or a socket), as
    /// mknod(2) does, owned by root (see [`NewInode::Special`]).
    pub async fn mknod(
        &self,
        ctx: Ctx,
        parent: Ino,
        name: &str,
        ftype: FileType,
        perm: u16,
        rdev: u32,
    ) -> Result<Attr, FsError> {
        self.make_as(
            ctx,
            parent,
            name,
            NewInode::Special(ftype, rdev),
            perm,
            &Cred::root(),
        )
        .await
    }

    /// Creates `parent/name`, a `new` with permission bits `perm`, on
    /// behalf of `cred`: the caller needs write and search permission on
    /// `parent` ([`perm::may_create`], `EACCES`), and the new inode's
    /// owner, group and set-group-ID bit follow [`perm::inherit_owner`]
    /// (the caller's, or a set-group-ID directory's group), decided under
    /// the directory's lock with the inode made, so no crash separates a
    /// new inode from its owner.
    pub async fn make_as(
        &self,
        ctx: Ctx,
        parent: Ino,
        name: &str,
        new: NewInode<'_>,
        perm: u16,
        cred: &Cred,
    ) -> Result<Attr, FsError> {
        let (ftype, extra) = match new {
            NewInode::File => (FileType::File, Extra::Nothing),
            NewInode::Dir => (FileType::Dir, Extra::Nothing),
            NewInode::Symlink(target) => {
                if target.is_empty() || target.len() > 4096 {
                    return Err(FsError::Invalid("symlink target length".into()));
                }
                (FileType::Symlink, Extra::Target(target))
            }
            NewInode::Special(ftype, rdev) => {
                if !ftype.is_special() {
                    return Err(FsError::Invalid(format!("mknod of a {ftype:?}")));
                }
                let rdev = if matches!(ftype, FileType::CharDev | FileType::BlockDev) {
                    rdev
                } else {
                    0
                };
                (ftype, Extra::Device(rdev))
            }
        };
        self.make(ctx, (parent, name), ftype, perm, extra, cred).await
    }

    /// Creates `parent/name`: a file, a directory, a symlink to `target`,
    /// or a special file with device number `rdev`.
    /// Everything that can fail for want of space (the inode number, the
    /// block of a directory or long symlink, a new block of `parent`) is
    /// had before the new inode is filled in; a failure undoes it whole
    /// (see [`Fs::unmake`]), so nothing leaks.
    async fn make(
        &self,
        ctx: Ctx,
        (parent, name): (Ino, &str),
        ftype: FileType,
        perm: u16,
        extra: Extra<'_>,
        cred: &Cred,
    ) -> Result<Attr, FsError> {
        let (target, rdev) = match extra {
            Extra::Nothing => (None, 0),
            Extra::Target(t) => (Some(t), 0),
            Extra::Device(d) => (None, d),
        };
        check_name(name)?;
        self.check_writable()?;
        let _op = self.begin(ctx).await?;
        let dir = self.iget(ctx, parent).await?;
        let _g = dir.lock.lock().await;
        if dir.inode.borrow().file_type() != Some(FileType::Dir) {
            return Err(FsError::NotDir);
        }
        if dir.inode.borrow().links == 0 {
            return Err(FsError::NotFound);
        }
        // Search, then EEXIST, then write, in Linux's order (the path walk
        // of `filename_create`, then `may_create`).
        let d = attr_of(parent, &dir.inode.borrow())?;
        perm::may(&d, cred, perm::MAY_EXEC)?;
        if self.dir_lookup(ctx, &dir, name).await?.is_some() {
            return Err(FsError::Exists);
        }
        perm::may_create(&d, cred)?;
        let owner = perm::inherit_owner(&d, cred, ftype, perm);
        if ftype == FileType::Dir && dir.inode.borrow().links >= u16::MAX - 1 {
            return Err(FsError::TooManyLinks);
        }
        let needs_block = match ftype {
            FileType::Dir => true,
            FileType::Symlink => target.map_or(0, str::len) > INLINE_SYMLINK,
            FileType::File | FileType::Fifo | FileType::CharDev | FileType::BlockDev | FileType::Socket => {
                false
            }
        };
        let ino = self.alloc_ino(ctx, &dir).await?;
        let made = match self.new_inode(ctx, &dir, ino, ftype, owner).await {
            Ok(st) => self
                .make_named(ctx, &dir, &st, name, ftype, needs_block)
                .await
                .map(|b| (st, b)),
            Err(e) => Err(e),
        };
        let (st, block) = match made {
            Ok(m) => m,
            Err(e) => {
                self.unmake(ctx, &dir, ino).await?;
                return Err(e);
            }
        };
        self.fill_new(&st, parent, ftype, target, block).await?;
        st.inode.borrow_mut().rdev = rdev;
        self.write_inode(ctx, &st).await?;
        let now = st.inode.borrow().ctime;
        {
            let mut d = dir.inode.borrow_mut();
            if ftype == FileType::Dir {
                d.links += 1;
            }
            d.mtime = now;
            d.ctime = now;
        }
        self.write_inode(ctx, &dir).await?;
        self.inherit_dir_meta(&st, &dir);
        let i = st.inode.borrow();
        attr_of(ino, &i)
    }

    /// The in-memory inode of a new `ftype` with `owner`'s uid, gid and
    /// permission bits under `dir`, number `ino` (just allocated on behalf
    /// of `dir`), cached. Its table slot is not written yet.
    async fn new_inode(
        &self,
        ctx: Ctx,
        dir: &InodeState,
        ino: Ino,
        ftype: FileType,
        owner: NewOwner,
    ) -> Result<Rc<InodeState>, FsError> {
        let now = self.current_time();
        let (blk, off) = self.sb.borrow().inode_location(ino)?;
        let generation = {
            let buf = self.meta(ctx, blk).await?;
            let old = Inode::decode(&buf.data()[off..off + crate::layout::INODE_SIZE]).unwrap_or_default();
            old.generation.wrapping_add(1)
        };
        let inode = Inode {
            mode: ftype.mode_bits() | (owner.perm & 0o7777),
            uid: owner.uid,
            gid: owner.gid,
            links: if ftype == FileType::Dir { 2 } else { 1 },
            atime: now,
            mtime: now,
            ctime: now,
            generation,
            ..Default::default()
        };
        let st = Rc::new(InodeState {
            ino,
            inode: std::cell::RefCell::new(inode),
            lock: tokio::sync::Mutex::new(()),
            pages: Default::default(),
            dirty_meta: crate::dirty::DirtyMeta::new(&self.dirty_index, ino),
            size_dirty: std::cell::Cell::new(true),
            new_blocks: Default::default(),
            revokes: Default::default(),
            unflushed: Default::default(),
            open: Default::default(),
            new_entry: Default::default(),
        });
        self.inodes.borrow_mut().insert(ino, st.clone());
        // The allocation was made on behalf of the directory; the new inode
        // owns it too.
        self.inherit_dir_meta(&st, dir);
        Ok(st)
    }

    /// The steps of `make` that can fail for want of space, once the new
    /// inode `st` exists: its block when `needs_block` (a directory's or a
    /// long symlink's, allocated but not filled, so that an undo frees a
    /// plain block) and the entry `name` in `dir`, which may grow `dir`
    /// (and changes nothing when it cannot). Returns the block.
    async fn make_named(
        &self,
        ctx: Ctx,
        dir: &InodeState,
        st: &InodeState,
        name: &str,
        ftype: FileType,
        needs_block: bool,
    ) -> Result<Option<u64>, FsError> {
        let block = if needs_block {
            Some(self.map_new(ctx, st, 0).await?)
        } else {
            None
        };
        self.dir_add(ctx, dir, name, st.ino, ftype, Some(st)).await?;
        Ok(block)
    }

    /// Undoes a `make` that failed after allocating inode `ino` on behalf
    /// of `dir`: frees the blocks the new inode got and its number and
    /// drops it from the cache (its table slot was never written). `dir`
    /// inherits what the undo dirtied and the inode's revokes, as the heir
    /// of [`Fs::drop_link`] does, so syncing it persists the undo.
    async fn unmake(&self, ctx: Ctx, dir: &InodeState, ino: Ino) -> Result<(), FsError> {
        let st = self.inodes.borrow_mut().remove(&ino);
        if let Some(st) = st {
            self.discard_preallocations(&st);
            for b in Fs::unmap_from(&st, 0) {
                self.free_block(ctx, &st, b, false).await?;
            }
            self.write_tree(ctx, &st).await?;
            st.pages.truncate(0);
            dir.dirty_meta.absorb(&st.dirty_meta);
            dir.revokes
                .borrow_mut()
                .extend(st.revokes.borrow().iter().copied());
        }
        self.free_ino(ctx, dir, ino).await
    }

    /// Fills in the new `ftype` inode `st` that `make` put under `parent`:
    /// a directory's "." and ".." in its `block`, a symlink's `target`
    /// (inline, or in the page of its `block`). Needs no new block.
    async fn fill_new(
        &self,
        st: &InodeState,
        parent: Ino,
        ftype: FileType,
        target: Option<&str>,
        block: Option<u64>,
    ) -> Result<(), FsError> {
        let t = target.unwrap_or("").as_bytes();
        match (ftype, block) {
            (FileType::Dir, Some(b)) => {
                let buf = self.meta_new(b);
                {
                    let _l = buf.lock.lock().await;
                    let enc = crate::layout::encode_dir_block(&[
                        DirEntry {
                            ino: st.ino,
                            ftype: FileType::Dir,
                            name: b".".to_vec(),
                        },
                        DirEntry {
                            ino: parent,
                            ftype: FileType::Dir,
                            name: b"..".to_vec(),
                        },
                    ])?;
                    buf.modify().copy_from_slice(&enc[..]);
                }
                self.dirtied(b, &[st]);
                st.inode.borrow_mut().size = BLOCK as u64;
            }
            (FileType::Symlink, None) => {
                let mut i = st.inode.borrow_mut();
                i.flags |= FLAG_INLINE_SYMLINK;
                i.inline = t.to_vec();
                i.size = t.len() as u64;
            }
            (FileType::Symlink, Some(_)) => {
                let page = crate::cache::CachedBlock::new(Box::new([0u8; BLOCK]));
                page.modify()[..t.len()].copy_from_slice(t);
                st.pages.insert(0, page);
                self.note_dirty_pages(st.ino);
                st.inode.borrow_mut().size = t.len() as u64;
            }
            _ => {}
        }
        Ok(())
    }

    /// Adds a hard link `newparent/newname` to `ino` (not a directory).
    pub async fn link(&self, ctx: Ctx, ino: Ino, newparent: Ino, newname: &str) -> Result<Attr, FsError> {
        check_name(newname)?;
        self.check_writable()?;
        let _op = self.begin(ctx).await?;
        let st = self.iget(ctx, ino).await?;
        let dir = self.iget(ctx, newparent).await?;
        let (_g1, _g2) = lock2(&dir, &st).await;
        if st.inode.borrow().file_type() == Some(FileType::Dir) {
            return Err(FsError::IsDir);
        }
        if dir.inode.borrow().file_type() != Some(FileType::Dir) {
            return Err(FsError::NotDir);
        }
        if st.inode.borrow().links == 0 || dir.inode.borrow().links == 0 {
            return Err(FsError::NotFound);
        }
        if st.inode.borrow().links == u16::MAX {
            return Err(FsError::TooManyLinks);
        }
        if self.dir_lookup(ctx, &dir, newname).await?.is_some() {
            return Err(FsError::Exists);
        }
        let ftype = st.inode.borrow().file_type().unwrap_or(FileType::File);
        self.dir_add(ctx, &dir, newname, ino, ftype, Some(&st)).await?;
        let now = self.current_time();
        {
            let mut i = st.inode.borrow_mut();
            i.links += 1;
            i.ctime = now;
        }
        st.size_dirty.set(true);
        self.write_inode(ctx, &st).await?;
        {
            let mut d = dir.inode.borrow_mut();
            d.mtime = now;
            d.ctime = now;
        }
        self.write_inode(ctx, &dir).await?;
        self.inherit_dir_meta(&st, &dir);
        let i = st.inode.borrow();
        attr_of(ino, &i)
    }

    /// Removes `name` (not a directory) from `parent`.
    pub async fn unlink(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<(), FsError> {
        self.remove(ctx, parent, name, false).await
    }

    /// Removes the empty directory `name` from `parent`.
    pub async fn rmdir(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<(), FsError> {
        self.remove(ctx, parent, name, true).await
    }

    async fn remove(&self, ctx: Ctx, parent: Ino, name: &str, want_dir: bool) -> Result<(), FsError> {
        check_name(name)?;
        if name == "." || name == ".." {
            return Err(FsError::Invalid("cannot remove . or ..".into()));
        }
        self.check_writable()?;
        let _op = self.begin(ctx).await?;
        let dir = self.iget(ctx, parent).await?;
        let (ino, ftype) = {
            let _g = dir.lock.lock().await;
            self.dir_lookup(ctx, &dir, name).await?.ok_or(FsError::NotFound)?
        };
        let st = self.iget(ctx, ino).await?;
        let (_g1, _g2) = lock2(&dir, &st).await;
        // Re-check under both locks.
        if self.dir_lookup(ctx, &dir, name).await? != Some((ino, ftype)) {
            return Err(FsError::NotFound);
        }
        match (want_dir, ftype == FileType::Dir) {
            (true, false) => return Err(FsError::NotDir),
            (false, true) => return Err(FsError::IsDir),
            _ => {}
        }
        if want_dir && !self.dir_is_empty(ctx, &st).await? {
            return Err(FsError::NotEmpty);
        }
        self.dir_remove(ctx, &dir, name, Some(&st)).await?;
        let now = self.current_time();
        {
            let mut d = dir.inode.borrow_mut();
            d.mtime = now;
            d.ctime = now;
            if want_dir {
                d.links = d.links.saturating_sub(1);
            }
        }
        self.write_inode(ctx, &dir).await?;
        self.drop_link(ctx, &st, want_dir, &dir).await
    }

    /// Removes one link of `st`; frees it when none is left, unless it is
    /// open (then an orphan until its last close, [`crate::orphan`]). `heir` (the
    /// directory that held the last link) inherits the metadata the freeing
    /// dirtied, so syncing it makes the removal durable and consistent.
    async fn drop_link(
        &self,
        ctx: Ctx,
        st: &InodeState,
        is_dir: bool,
        heir: &InodeState,
    ) -> Result<(), FsError> {
        let gone = {
            let mut i = st.inode.borrow_mut();
            i.links = if is_dir { 0 } else { i.links.saturating_sub(1) };
            i.ctime = self.current_time();
            i.links == 0
        };
        st.size_dirty.set(true);
        if !gone {
            return self.write_inode(ctx, st).await;
        }
        if !is_dir && st.open.get() > 0 {
            // Still open: an orphan until the last close (unlink(2)).
            self.orphan_add(ctx, st).await?;
            return self.write_inode(ctx, st).await;
        }
        self.free_inode(ctx, st, is_dir, heir).await
    }

    /// Frees `st` (no link left, not open): its blocks, then its slot.
    /// `heir` inherits the metadata the freeing dirtied.
    pub(crate) async fn free_inode(
        &self,
        ctx: Ctx,
        st: &InodeState,
        is_dir: bool,
        heir: &InodeState,
    ) -> Result<(), FsError> {
        // ext4_evict_inode truncates, discarding the preallocations.
        self.discard_preallocations(st);
        let blocks = Fs::unmap_from(st, 0);
        for b in blocks {
            self.free_block(ctx, st, b, is_dir).await?;
        }
        self.write_tree(ctx, st).await?;
        self.free_xattrs(ctx, st).await?;
        st.pages.truncate(0);
        {
            let generation = st.inode.borrow().generation;
            *st.inode.borrow_mut() = Inode {
                generation,
                ..Default::default()
            };
        }
        let generation = st.inode.borrow().generation;
        self.write_free_slot(ctx, st.ino, generation, st).await?;
        self.free_ino(ctx, st, st.ino).await?;
        heir.dirty_meta.absorb(&st.dirty_meta);
        heir.revokes
            .borrow_mut()
            .extend(st.revokes.borrow().iter().copied());
        self.inodes.borrow_mut().remove(&st.ino);
        Ok(())
    }

    /// Writes inode `ino`'s slot as a free one on behalf of `owner`. A free
    /// slot keeps only its generation (`generation`, 0 for an all-zero
    /// slot), so a reused number gets a new one.
    pub(crate) async fn write_free_slot(
        &self,
        ctx: Ctx,
        ino: Ino,
        generation: u32,
        owner: &InodeState,
    ) -> Result<(), FsError> {
        let (blk, off) = self.sb.borrow().inode_location(ino)?;
        let buf = self.meta(ctx, blk).await?;
        {
            let _l = buf.lock.lock().await;
            let keep = Inode {
                generation,
                ..Default::default()
            };
            let enc = if generation == 0 {
                [0u8; crate::layout::INODE_SIZE]
            } else {
                keep.encode()
            };
            buf.modify()[off..off + crate::layout::INODE_SIZE].copy_from_slice(&enc);
        }
        self.dirtied(blk, &[owner]);
        Ok(())
    }

    /// Renames `parent/name` to `newparent/newname`, replacing a compatible
    /// target (an empty directory by a directory, a non-directory by a
    /// non-directory). Atomic: one operation, one transaction.
    pub async fn rename(
        &self,
        ctx: Ctx,
        parent: Ino,
        name: &str,
        newparent: Ino,
        newname: &str,
    ) -> Result<(), FsError> {
        check_name(name)?;
        check_name(newname)?;
        if [name, newname].iter().any(|n| *n == "." || *n == "..") {
            return Err(FsError::Invalid("cannot rename . or ..".into()));
        }
        self.check_writable()?;
        let _op = self.begin(ctx).await?;
        let _rl = self.rename_lock.lock().await;
        let src_dir = self.iget(ctx, parent).await?;
        let dst_dir = self.iget(ctx, newparent).await?;
        if dst_dir.inode.borrow().file_type() != Some(FileType::Dir) {
            return Err(FsError::NotDir);
        }
        let (ino, ftype) = self
            .dir_lookup(ctx, &src_dir, name)
            .await?
            .ok_or(FsError::NotFound)?;
        if parent == newparent && name == newname {
            return Ok(());
        }
        let st = self.iget(ctx, ino).await?;
        if ftype == FileType::Dir && self.is_ancestor(ctx, ino, newparent).await? {
            return Err(FsError::Invalid("cannot move a directory into itself".into()));
        }
        let target = self.dir_lookup(ctx, &dst_dir, newname).await?;
        if let Some((tino, tt)) = target {
            if tino == ino {
                // Two links of one file: POSIX says do nothing.
                return Ok(());
            }
            match (ftype == FileType::Dir, tt == FileType::Dir) {
                (true, false) => return Err(FsError::NotDir),
                (false, true) => return Err(FsError::IsDir),
                _ => {}
            }
            if tt == FileType::Dir {
                let tst = self.iget(ctx, tino).await?;
                if !self.dir_is_empty(ctx, &tst).await? {
                    return Err(FsError::NotEmpty);
                }
            }
        }
        let now = self.current_time();
        match target {
            Some((tino, tt)) => {
                let tst = self.iget(ctx, tino).await?;
                self.dir_replace(ctx, &dst_dir, newname, ino, ftype, Some(&st))
                    .await?;
                // The replaced inode owns the entry block too.
                tst.dirty_meta.absorb(&st.dirty_meta);
                if tt == FileType::Dir {
                    dst_dir.inode.borrow_mut().links -= 1;
                }
                self.drop_link(ctx, &tst, tt == FileType::Dir, &dst_dir).await?;
            }
            None => {
                self.dir_add(ctx, &dst_dir, newname, ino, ftype, Some(&st))
                    .await?
            }
        }
        self.dir_remove(ctx, &src_dir, name, Some(&st)).await?;
        if ftype == FileType::Dir && parent != newparent {
            self.dir_replace(ctx, &st, "..", newparent, FileType::Dir, Some(&st))
                .await?;
            src_dir.inode.borrow_mut().links -= 1;
            dst_dir.inode.borrow_mut().links += 1;
        }
        for d in [&src_dir, &dst_dir] {
            let mut i = d.inode.borrow_mut();
            i.mtime = now;
            i.ctime = now;
        }
        st.inode.borrow_mut().ctime = now;
        self.write_inode(ctx, &src_dir).await?;
        if parent != newparent {
            self.write_inode(ctx, &dst_dir).await?;
        }
        self.write_inode(ctx, &st).await?;
        // The moved inode and both directories carry all the rename's
        // changes: syncing any of them persists the rename whole (atomic).
        let all: Vec<u64> = [&src_dir, &dst_dir, &st]
            .iter()
            .flat_map(|d| d.dirty_meta.blocks().iter().copied().collect::<Vec<_>>())
            .collect();
        for d in [&src_dir, &dst_dir, &st] {
            d.dirty_meta.extend(all.iter().copied());
        }
        Ok(())
    }

    /// True if `anc` is `ino` or one of its ancestors.
    async fn is_ancestor(&self, ctx: Ctx, anc: Ino, mut ino: Ino) -> Result<bool, FsError> {
        for _ in 0..4096 {
            if ino == anc {
                return Ok(true);
            }
            if ino == ROOT_INO {
                return Ok(false);
            }
            let st = self.iget(ctx, ino).await?;
            ino = self
                .dir_lookup(ctx, &st, "..")
                .await?
                .ok_or_else(|| FsError::Corrupt("no ..".into()))?
                .0;
        }
        Err(FsError::Corrupt("directory loop".into()))
    }

    /// The target of a symbolic link.
    pub async fn readlink(&self, ctx: Ctx, ino: Ino) -> Result<String, FsError> {
        self.cpu(ctx, self.profile.cpu.syscall).await;
        let st = self.iget(ctx, ino).await?;
        if st.inode.borrow().file_type() != Some(FileType::Symlink) {
            return Err(FsError::Invalid("not a symlink".into()));
        }
        let bytes = if st.inode.borrow().flags & FLAG_INLINE_SYMLINK != 0 {
            st.inode.borrow().inline.clone()
        } else {
            let n = usize::try_from(st.inode.borrow().size)
                .ok()
                .filter(|n| *n <= BLOCK)
                .ok_or_else(|| FsError::Corrupt("symlink size".into()))?;
            self.read_inner(ctx, &st, 0, n).await?
        };
        String::from_utf8(bytes).map_err(|_| FsError::Corrupt("symlink target".into()))
    }

    /// The entries of a directory: (name, inode, type), "." and ".." first.
    pub async fn readdir(&self, ctx: Ctx, ino: Ino) -> Result<Vec<(String, Ino, FileType)>, FsError> {
        self.cpu(ctx, self.profile.cpu.syscall).await;
        let st = self.iget(ctx, ino).await?;
        let _g = st.lock.lock().await;
        let mut v: Vec<(String, Ino, FileType)> = self
            .dir_entries(ctx, &st)
            .await?
            .into_iter()
            .map(|(_, e)| (String::from_utf8_lossy(&e.name).into_owned(), e.ino, e.ftype))
            .collect();
        v.sort_by_key(|(n, _, _)| match n.as_str() {
            "." => 0,
            ".." => 1,
            _ => 2,
        });
        Ok(v)
    }

    /// Usage counts, from the bitmaps.
    pub async fn statfs(&self, ctx: Ctx) -> Result<StatFs, FsError> {
        self.cpu(ctx, self.profile.cpu.syscall).await;
        let sb = self.sb.borrow().clone();
        let mut blocks = 0;
        let mut free_blocks = 0;
        let mut free_inodes = 0;
        for g in 0..sb.groups {
            let bm = self.meta(ctx, sb.block_bitmap(g)).await?;
            let first = sb.first_data(g) - sb.group_start(g);
            for bit in first..sb.group_blocks(g) {
                blocks += 1;
                if bm.data()[(bit / 8) as usize] & (1 << (bit % 8)) == 0 {
                    free_blocks += 1;
                }
            }
            let im = self.meta(ctx, sb.inode_bitmap(g)).await?;
            for bit in 0..sb.inodes_per_group {
                if im.data()[(bit / 8) as usize] & (1 << (bit % 8)) == 0 {
                    free_inodes += 1;
                }
            }
        }
        Ok(StatFs {
            blocks,
            free_blocks,
            inodes: sb.inodes(),
            free_inodes,
            block_size: BLOCK as u32,
            name_max: crate::layout::NAME_MAX as u32,
        })
    }

    /// Changes attributes; a new size truncates or extends the file.
    pub async fn setattr(&self, ctx: Ctx, ino: Ino, set: &SetAttr) -> Result<Attr, FsError> {
        self.check_writable()?;
        let _op = self.begin(ctx).await?;
        let st = self.iget(ctx, ino).await?;
        let _g = st.lock.lock().await;
        if let Some(size) = set.size {
            if st.inode.borrow().file_type() != Some(FileType::File) {
                return Err(if st.inode.borrow().file_type() == Some(FileType::Dir) {
                    FsError::IsDir
                } else {
                    FsError::Invalid("truncate of a non-file".into())
                });
            }
            self.truncate_inner(ctx, &st, size).await?;
        }
        let now = self.current_time();
        {
            let mut i = st.inode.borrow_mut();
            if let Some(p) = set.perm {
                i.mode = (i.mode & 0o170000) | (p & 0o7777);
            }
            if let Some(u) = set.uid {
                i.uid = u;
            }
            if let Some(g) = set.gid {
                i.gid = g;
            }
            if let Some(a) = set.atime {
                i.atime = a;
            }
            if let Some(m) = set.mtime {
                i.mtime = m;
            }
            i.ctime = now;
        }
        self.write_inode(ctx, &st).await?;
        let i = st.inode.borrow();
        attr_of(ino, &i)
    }

    /// Truncates (or extends) a file to `size` bytes.
    pub async fn truncate(&self, ctx: Ctx, ino: Ino, size: u64) -> Result<(), FsError> {
        self.setattr(
            ctx,
            ino,
            &SetAttr {
                size: Some(size),
                ..Default::default()
            },
        )
        .await
        .map(|_| ())
    }

    pub(crate) async fn truncate_inner(&self, ctx: Ctx, st: &InodeState, size: u64) -> Result<(), FsError> {
        let old = st.inode.borrow().size;
        if size > crate::data::MAX_FILE {
            return Err(FsError::TooBig);
        }
        // ext4_truncate discards the file's preallocations
        // (ext4_discard_preallocations), also when the file grows.
        self.discard_preallocations(st);
        if size < old {
            let keep = size.div_ceil(BLOCK as u64) as u32;
            for b in Fs::unmap_from(st, keep) {
                self.free_block(ctx, st, b, false).await?;
            }
            st.pages.truncate(keep);
            // Zero the tail of the last partial block.
            let tail = (size % BLOCK as u64) as usize;
            if tail != 0 {
                let fb = (size / BLOCK as u64) as u32;
                if Fs::bmap(st, fb).is_some() {
                    let page = self.data_page(ctx, st, fb).await?;
                    page.modify()[tail..].fill(0);
                    self.note_dirty_pages(st.ino);
                }
            }
        }
        let now = self.current_time();
        let mut i = st.inode.borrow_mut();
        i.size = size;
        i.mtime = now;
        st.size_dirty.set(true);
        Ok(())
    }
}
