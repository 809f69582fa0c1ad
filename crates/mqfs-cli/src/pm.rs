//! The file systems on persistent memory (WOFS, SoupFS and the PMFS-style
//! baseline) behind the same FUSE adapter as MQFS: [`PmServed`] lifts a
//! file system of the shared API (`fsapi::crash::PmFs`, the one crashfuzz
//! and the crash tests drive) into the adapter's vocabulary
//! ([`crate::fuse::Served`]).
//!
//! What these file systems do not keep, the adapter cannot serve; each
//! deviation from what MQFS serves, and so from POSIX:
//!
//! - **Owners and times.** They store neither: every inode is owned by the
//!   user who mounted (chown to anyone else is EOPNOTSUPP), and its three
//!   times are the host's time at the mount. A time change (utimensat(2),
//!   `touch`) succeeds and changes nothing.
//! - **Permission bits** are stored at creation; chmod(2) is EOPNOTSUPP.
//! - **Only regular files and directories**: mknod(2) of anything else,
//!   symlink(2), fallocate(2), extended attributes (but an empty
//!   listxattr(2)) and MQFS's atomic syncs are EOPNOTSUPP.
//! - **No orphans**: a file unlinked while open is gone at once, so later
//!   reads through the open descriptor fail with ENOENT.
//! - **File sizes** are the file systems' own limits: a WOFS file maps at
//!   most 48 pages (192 KiB, `wofs::MAX_SIZE`: one attribute package
//!   holds the map), a baseline file 12 (48 KiB, `pmfs::MAX_SIZE`: direct
//!   pointers only); a write past them is EFBIG. SoupFS's files grow until
//!   the memory is full.
//! - **Permission checks cost a call**: the shared API has no read that
//!   is not a system call, so the `peek_*` reads of a check are
//!   `getattr`/`lookup`, each charged a system call's CPU time (MQFS's
//!   are free); `.mqfs/stats`' simulated time includes them.
//! - **`..`** in a directory listing names the root (the shared API does
//!   not give a directory's parent); the kernel resolves `..` itself.
//!
//! Inode numbers: the adapter's are handed out as the file system's are
//! first seen (its root is MQFS's root number), and kept for the mount.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

use crashfuzz::pm::PmMode;
use fsapi::crash::PmFs;
use fsapi::ErrorKind;
use mqfs::layout::ROOT_INO;
use mqfs::{
    Attr, Cred, Ctx, FallocMode, FileType, FsError, Ino, NewInode, SetAttr, StatFs, SyncKind, XattrFlags,
};
use pcie_sim::Machine;

use crate::error::CliError;
use crate::fuse::Served;
use crate::rig::Rig;

/// Bytes of persistent memory per inode slot (WOFS: per package slot, one
/// per live metadata object) that `mqfs mkfs` makes: 16 KiB, mke2fs's
/// default `inode_ratio` (mke2fs.conf(5)). (The crash harness formats
/// with far fewer, for short traces.)
pub const BYTES_PER_INODE: u64 = 16 << 10;

/// Formats `rig`'s persistent memory with `fs`, sized for it (see
/// [`BYTES_PER_INODE`]); returns a summary.
pub fn format(rig: &Rig, fs: PmMode) -> Result<String, CliError> {
    let pm = rig.pmem()?.clone();
    let m = rig.machine.clone();
    let slots = u32::try_from(pm.size() / BYTES_PER_INODE)
        .unwrap_or(u32::MAX)
        .max(2);
    let ctx = Ctx::on(0);
    Ok(match fs {
        PmMode::Wofs => {
            let g = rig.run(async move { wofs::Wofs::mkfs(&m, &pm, ctx, slots).await })?;
            let g = g.map_err(lift_error)?;
            format!("{} package slots, {} data pages of 4 KiB", g.slots, g.pages)
        }
        PmMode::Pmfs => {
            let g = rig.run(async move { pmfs::Pmfs::mkfs(&m, &pm, ctx, slots).await })?;
            g.map_err(lift_error)?;
            format!("{slots} inode slots")
        }
        PmMode::Soupfs => {
            let (profile, faults) = (soupfs::SoupProfile::default(), soupfs::Faults::default());
            let fs = rig.run(async move { soupfs::SoupFs::mkfs(&m, pm, ctx, profile, faults).await })?;
            drop(fs.map_err(lift_error)?);
            "inodes and pages allocated as needed".to_string()
        }
    })
}

/// Mounts `rig`'s persistent memory with `F`, its recovery included, and
/// starts its background work; served as owned by `owner` with the clock
/// at `now_ns`. Returns the space the recovery found leaked (in the file
/// system's unit), if any.
pub fn mount<F: PmFs>(rig: &Rig, owner: (u32, u32), now_ns: u64) -> Result<(PmServed<F>, u64), CliError>
where
    F::Ino: Ord,
{
    let pm = rig.pmem()?.clone();
    let m = rig.machine.clone();
    let (fs, recovered) = rig
        .run(async move { F::recover(&m, &pm, F::Mount::default()).await })?
        .map_err(lift_error)?;
    fs.start().map_err(lift_error)?;
    Ok((PmServed::new(fs, &rig.machine, owner, now_ns), recovered.leaked))
}

/// The file system's error as the adapter's: a shared POSIX refusal it
/// wraps through MQFS's own mapping (`From<fsapi::Errno>`), anything else
/// by its kind.
fn lift_error<E: fsapi::FsError>(e: E) -> FsError {
    if let Some(errno) = e.errno() {
        return (*errno).into();
    }
    match e.kind() {
        ErrorKind::NotFound => FsError::NotFound,
        ErrorKind::Exists => FsError::Exists,
        ErrorKind::NotDir => FsError::NotDir,
        ErrorKind::IsDir => FsError::IsDir,
        ErrorKind::NotEmpty => FsError::NotEmpty,
        ErrorKind::Invalid => FsError::Invalid(e.to_string()),
        ErrorKind::NameTooLong => FsError::NameTooLong,
        ErrorKind::TooLarge => FsError::TooBig,
        ErrorKind::NoSpace => FsError::NoSpace,
        ErrorKind::TooManyLinks => FsError::TooManyLinks,
        ErrorKind::Other => FsError::Unsupported(e.to_string()),
        ErrorKind::Io => FsError::Io(e.to_string()),
    }
}

/// A shared file type as MQFS's (the shared API makes only files and
/// directories; the others are named for completeness).
fn lift_type(t: fsapi::FileType) -> FileType {
    match t {
        fsapi::FileType::File => FileType::File,
        fsapi::FileType::Dir => FileType::Dir,
        fsapi::FileType::Symlink => FileType::Symlink,
        fsapi::FileType::Special => FileType::Fifo,
    }
}

/// Both ways between the file system's inode numbers and the adapter's.
struct Inos<I> {
    ours: BTreeMap<I, Ino>,
    theirs: Vec<I>,
}

impl<I: Copy + Ord> Inos<I> {
    fn new(root: I) -> Inos<I> {
        Inos {
            ours: BTreeMap::from([(root, ROOT_INO)]),
            theirs: vec![root],
        }
    }

    /// The adapter's number of `i`, handed out now if it is new.
    fn ours(&mut self, i: I) -> Result<Ino, FsError> {
        if let Some(&n) = self.ours.get(&i) {
            return Ok(n);
        }
        let n = Ino::try_from(self.theirs.len())
            .ok()
            .and_then(|k| k.checked_add(ROOT_INO))
            .ok_or_else(|| FsError::Unsupported("more inodes than one mount numbers".into()))?;
        self.ours.insert(i, n);
        self.theirs.push(i);
        Ok(n)
    }

    /// The file system's number of `n` (NotFound for one never handed out).
    fn theirs(&self, n: Ino) -> Result<I, FsError> {
        n.checked_sub(ROOT_INO)
            .and_then(|k| self.theirs.get(k as usize))
            .copied()
            .ok_or(FsError::NotFound)
    }
}

/// A file system on persistent memory, mounted, as the adapter serves it.
pub struct PmServed<F: PmFs> {
    fs: F,
    machine: Machine,
    inos: RefCell<Inos<F::Ino>>,
    /// Owner and group of every inode: the user who mounted.
    owner: (u32, u32),
    /// Every inode's times: the host's time at the mount.
    mounted_ns: u64,
    /// The clock: `base` plus the simulated time since `start` (ns).
    clock_base: Cell<u64>,
    clock_start: u64,
}

impl<F: PmFs> std::fmt::Debug for PmServed<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PmServed").field("fs", &F::NAME).finish()
    }
}

impl<F: PmFs> PmServed<F>
where
    F::Ino: Ord,
{
    /// Serves `fs` (mounted on `machine`'s persistent memory) as owned by
    /// `owner`, with the clock at `now_ns`.
    pub fn new(fs: F, machine: &Machine, owner: (u32, u32), now_ns: u64) -> PmServed<F> {
        let root = fs.root();
        PmServed {
            fs,
            machine: machine.clone(),
            inos: RefCell::new(Inos::new(root)),
            owner,
            mounted_ns: now_ns,
            clock_base: Cell::new(now_ns),
            clock_start: machine.sim().now().as_ps() / 1000,
        }
    }

    fn theirs(&self, n: Ino) -> Result<F::Ino, FsError> {
        self.inos.borrow().theirs(n)
    }

    fn attr(&self, a: fsapi::Attr<F::Ino>) -> Result<Attr, FsError> {
        Ok(Attr {
            ino: self.inos.borrow_mut().ours(a.ino)?,
            ftype: lift_type(a.ftype),
            perm: a.perm,
            links: u16::try_from(a.links).unwrap_or(u16::MAX),
            uid: self.owner.0,
            gid: self.owner.1,
            size: a.size,
            blocks: a.pages,
            atime: self.mounted_ns,
            mtime: self.mounted_ns,
            ctime: self.mounted_ns,
            rdev: 0,
        })
    }

    fn unsupported(&self, what: &str) -> FsError {
        FsError::Unsupported(format!("{} has no {what}", F::NAME))
    }
}

impl<F: PmFs> Served for PmServed<F>
where
    F::Ino: Ord,
{
    fn now_ns(&self) -> u64 {
        let since = (self.machine.sim().now().as_ps() / 1000).saturating_sub(self.clock_start);
        self.clock_base.get().saturating_add(since)
    }
    fn clock_at_least(&self, ns: u64) {
        let now = self.now_ns();
        if ns > now {
            self.clock_base.set(self.clock_base.get() + (ns - now));
        }
    }
    async fn peek_attr(&self, ctx: Ctx, ino: Ino) -> Result<Attr, FsError> {
        self.getattr(ctx, ino).await
    }
    async fn peek_lookup(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<Attr, FsError> {
        self.lookup(ctx, parent, name).await
    }
    async fn getattr(&self, ctx: Ctx, ino: Ino) -> Result<Attr, FsError> {
        let a = self
            .fs
            .getattr(ctx, self.theirs(ino)?)
            .await
            .map_err(lift_error)?;
        self.attr(a)
    }
    async fn lookup(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<Attr, FsError> {
        let a = self
            .fs
            .lookup(ctx, self.theirs(parent)?, name)
            .await
            .map_err(lift_error)?;
        self.attr(a)
    }
    /// A size is a truncate; times are not kept (the change succeeds); an
    /// owner other than the mounter's, or other permission bits, are
    /// EOPNOTSUPP.
    async fn setattr(&self, ctx: Ctx, ino: Ino, set: &SetAttr) -> Result<Attr, FsError> {
        let a = self.getattr(ctx, ino).await?;
        if set.uid.is_some_and(|u| u != a.uid) || set.gid.is_some_and(|g| g != a.gid) {
            return Err(self.unsupported("owners"));
        }
        if set.perm.is_some_and(|p| p != a.perm) {
            return Err(self.unsupported("chmod"));
        }
        match set.size {
            Some(size) => {
                let i = self.theirs(ino)?;
                self.fs.truncate(ctx, i, size).await.map_err(lift_error)?;
                self.getattr(ctx, ino).await
            }
            None => Ok(a),
        }
    }
    async fn make_as(
        &self,
        ctx: Ctx,
        parent: Ino,
        name: &str,
        new: NewInode<'_>,
        perm: u16,
        _cred: &Cred,
    ) -> Result<Attr, FsError> {
        let p = self.theirs(parent)?;
        let a = match new {
            NewInode::File => self.fs.create(ctx, p, name, perm).await,
            NewInode::Dir => self.fs.mkdir(ctx, p, name, perm).await,
            NewInode::Symlink(_) => return Err(self.unsupported("symbolic links")),
            NewInode::Special(..) => return Err(self.unsupported("special files")),
        };
        self.attr(a.map_err(lift_error)?)
    }
    /// No inode is a symbolic link: EINVAL, as readlink(2) answers for one
    /// that is not.
    async fn readlink(&self, _ctx: Ctx, _ino: Ino) -> Result<String, FsError> {
        Err(FsError::Invalid("not a symbolic link".into()))
    }
    async fn link(&self, ctx: Ctx, ino: Ino, newparent: Ino, newname: &str) -> Result<Attr, FsError> {
        let (i, p) = (self.theirs(ino)?, self.theirs(newparent)?);
        let a = self.fs.link(ctx, i, p, newname).await.map_err(lift_error)?;
        self.attr(a)
    }
    async fn unlink(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<(), FsError> {
        let p = self.theirs(parent)?;
        self.fs.unlink(ctx, p, name).await.map_err(lift_error)
    }
    async fn rmdir(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<(), FsError> {
        let p = self.theirs(parent)?;
        self.fs.rmdir(ctx, p, name).await.map_err(lift_error)
    }
    async fn rename(
        &self,
        ctx: Ctx,
        parent: Ino,
        name: &str,
        newparent: Ino,
        newname: &str,
    ) -> Result<(), FsError> {
        let (p, np) = (self.theirs(parent)?, self.theirs(newparent)?);
        self.fs
            .rename(ctx, p, name, np, newname)
            .await
            .map_err(lift_error)
    }
    async fn read(&self, ctx: Ctx, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>, FsError> {
        let i = self.theirs(ino)?;
        self.fs.read(ctx, i, off, len).await.map_err(lift_error)
    }
    async fn write(&self, ctx: Ctx, ino: Ino, off: u64, data: &[u8]) -> Result<usize, FsError> {
        let i = self.theirs(ino)?;
        self.fs.write(ctx, i, off, data).await.map_err(lift_error)
    }
    async fn readdir(&self, ctx: Ctx, ino: Ino) -> Result<Vec<(String, Ino, FileType)>, FsError> {
        let i = self.theirs(ino)?;
        let entries = self.fs.readdir(ctx, i).await.map_err(lift_error)?;
        let mut out = vec![
            (".".to_string(), ino, FileType::Dir),
            ("..".to_string(), ROOT_INO, FileType::Dir),
        ];
        let mut inos = self.inos.borrow_mut();
        for (name, i, t) in entries {
            out.push((name, inos.ours(i)?, lift_type(t)));
        }
        Ok(out)
    }
    async fn statfs(&self, ctx: Ctx) -> Result<StatFs, FsError> {
        let s = self.fs.statfs(ctx).await.map_err(lift_error)?;
        Ok(StatFs {
            blocks: s.pages,
            free_blocks: s.free_pages,
            inodes: s.inodes,
            free_inodes: s.free_inodes,
            block_size: 4096,
            name_max: s.name_max,
        })
    }
    async fn fallocate(&self, _: Ctx, _: Ino, _: FallocMode, _: u64, _: u64) -> Result<(), FsError> {
        Err(self.unsupported("fallocate"))
    }
    async fn setxattr(&self, _: Ctx, _: Ino, _: &str, _: &[u8], _: XattrFlags) -> Result<(), FsError> {
        Err(self.unsupported("extended attributes"))
    }
    async fn getxattr(&self, _: Ctx, _: Ino, _: &str) -> Result<Vec<u8>, FsError> {
        Err(self.unsupported("extended attributes"))
    }
    async fn listxattr(&self, _: Ctx, _: Ino) -> Result<Vec<String>, FsError> {
        Ok(Vec::new())
    }
    async fn removexattr(&self, _: Ctx, _: Ino, _: &str) -> Result<(), FsError> {
        Err(self.unsupported("extended attributes"))
    }
    /// Nothing is kept for an open file (no orphans).
    async fn open(&self, _ctx: Ctx, _ino: Ino) -> Result<(), FsError> {
        Ok(())
    }
    async fn release(&self, _ctx: Ctx, _ino: Ino) -> Result<(), FsError> {
        Ok(())
    }
    async fn sync(&self, ctx: Ctx, ino: Ino, kind: SyncKind) -> Result<(), FsError> {
        match kind {
            SyncKind::Fsync | SyncKind::Fdatasync => {
                let i = self.theirs(ino)?;
                self.fs.fsync(ctx, i).await.map_err(lift_error)
            }
            SyncKind::Fatomic | SyncKind::Fdataatomic => Err(self.unsupported("atomic syncs")),
        }
    }
    async fn unmount(&self, ctx: Ctx) -> Result<(), FsError> {
        self.fs.sync_all(ctx).await.map_err(lift_error)?;
        self.fs.finish(&self.machine).await.map_err(lift_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inode_numbers_go_both_ways_and_unknown_ones_are_not_found() {
        let mut inos = Inos::new(7u64);
        assert_eq!(inos.ours(7), Ok(ROOT_INO));
        let a = inos.ours(100).unwrap();
        let b = inos.ours(3).unwrap();
        assert_eq!((a, b), (ROOT_INO + 1, ROOT_INO + 2));
        assert_eq!(inos.ours(100), Ok(a), "a number is handed out once");
        assert_eq!(inos.theirs(b), Ok(3));
        assert_eq!(inos.theirs(ROOT_INO), Ok(7));
        assert_eq!(inos.theirs(ROOT_INO + 3), Err(FsError::NotFound));
        assert_eq!(inos.theirs(0), Err(FsError::NotFound));
    }

    #[test]
    fn errors_keep_their_errno() {
        let cases = [
            (fsapi::Errno::NotFound, libc::ENOENT),
            (fsapi::Errno::NotEmpty, libc::ENOTEMPTY),
            (fsapi::Errno::NameTooLong, libc::ENAMETOOLONG),
            (fsapi::Errno::NoSpace("blocks"), libc::ENOSPC),
            (fsapi::Errno::TooLarge { size: 2, max: 1 }, libc::EFBIG),
        ];
        for (e, errno) in cases {
            let e: wofs::WofsError = e.into();
            assert_eq!(lift_error(e).errno(), errno);
        }
    }
}
