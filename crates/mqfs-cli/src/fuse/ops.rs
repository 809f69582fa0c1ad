//! The FUSE requests, each mapped to the file system's operation.

use std::ffi::OsStr;
use std::path::Path;
use std::rc::Rc;
use std::time::{Duration, SystemTime};

use fuser::consts::FOPEN_DIRECT_IO;
use fuser::{
    FileAttr, Filesystem, KernelConfig, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyIoctl, ReplyOpen, ReplyStatfs, ReplyWrite, ReplyXattr, Request, TimeOrNow, FUSE_ROOT_ID,
};
use libc::{EINVAL, ENODATA, ENOENT, ENOTTY, EOPNOTSUPP, EPERM, ERANGE};
use mqfs::perm::{self, MAY_EXEC, MAY_READ};
use mqfs::{Attr, Cred, Ctx, FallocMode, FsError, Ino, NewInode, SetAttr, SyncKind, XattrFlags};

use super::attr::{
    control_attr, file_attr, from_fuse, is_control, kind, ns_of, reserved, to_fuse, CONTROL_DIR,
    CONTROL_NAME, STATS_FILE, STATS_NAME,
};
use super::cred::cred_of;
use super::{errno_of, MqfsFuse, Served};
use crate::ioctl::{FATOMIC, FDATAATOMIC};
use crate::record::{Make, Req};

/// How long the kernel may cache attributes and names: every change goes
/// through the kernel, so it never holds a stale one.
pub(super) const TTL: Duration = Duration::from_secs(1);

/// `FUSE_HANDLE_KILLPRIV` of the FUSE protocol (include/uapi/linux/fuse.h,
/// protocol 7.26; fuser names it only with its `abi-7-26` feature): the
/// file system, not the kernel, clears the set-user-ID and set-group-ID
/// bits on write, truncate and chown. Without it the kernel clears them
/// with a chmod sent as the writer, which the chmod rule refuses to a
/// writer who is not the owner.
const FUSE_HANDLE_KILLPRIV: u64 = 1 << 19;

/// The caller of a request.
fn cred(req: &Request<'_>) -> Cred {
    cred_of(req.uid(), req.gid(), req.pid())
}

/// Clears the set-ID bits of `ino` if `cred` writing to it or changing its
/// size clears them ([`perm::mode_after_write`]).
async fn drop_privs<S: Served>(fs: &S, ctx: Ctx, ino: Ino, cred: &Cred) -> Result<(), FsError> {
    if cred.is_root() {
        return Ok(());
    }
    let a = fs.peek_attr(ctx, ino).await?;
    if let Some(p) = perm::mode_after_write(&a, cred) {
        let set = SetAttr {
            perm: Some(p),
            ..SetAttr::default()
        };
        fs.setattr(ctx, ino, &set).await?;
    }
    Ok(())
}

/// `set` as `cred` may make it on `a`, or the errno of the first rule it
/// breaks (`by_fd`: a size change through an open file, ftruncate(2);
/// `touch`: both times set to now, utimensat(2) with NULL times): chown
/// ([`perm::chown_allowed`], then the set-ID bits it clears), chmod
/// ([`perm::chmod_allowed`], [`perm::mode_after_chmod`]), truncate
/// ([`perm::may_truncate`], then the bits a write clears), and times
/// ([`perm::utimes_allowed`]; the times a truncate sets with the size are
/// its own). Linux `setattr_prepare` and `notify_change`.
fn checked_setattr(
    a: &Attr,
    c: &Cred,
    mut set: SetAttr,
    by_fd: bool,
    touch: bool,
) -> Result<SetAttr, FsError> {
    let mut mode = a.clone();
    if set.uid.is_some() || set.gid.is_some() {
        perm::chown_allowed(a, c, set.uid, set.gid)?;
        mode.perm = perm::mode_after_chown(a, c);
    }
    if let Some(p) = set.perm {
        perm::chmod_allowed(a, c)?;
        mode.perm = perm::mode_after_chmod(a, c, p);
    }
    if set.size.is_some() {
        perm::may_truncate(a, c, by_fd)?;
        mode.perm = perm::mode_after_write(&mode, c).unwrap_or(mode.perm);
    } else if set.atime.is_some() || set.mtime.is_some() {
        perm::utimes_allowed(a, c, touch)?;
    }
    if mode.perm != a.perm || set.perm.is_some() {
        set.perm = Some(mode.perm);
    }
    Ok(set)
}

/// A setattr that changes nothing, as `c` sends it on `a`: with
/// `FUSE_HANDLE_KILLPRIV` the kernel leaves the set-ID bits to the file
/// system and `fuse_setattr` drops `ATTR_KILL_SUID`, `ATTR_KILL_SGID` and
/// the mode they made, so what reaches here is a request to clear them
/// from one of two calls it cannot tell apart (utimensat(2) with both
/// times `UTIME_OMIT` returns before reaching the file system): chown(2)
/// with owner and group both -1 (fchown, lchown too; Linux `chown_common`,
/// fs/open.c, asks for the removal on every chown of a non-directory) and
/// the `file_remove_privs` (fs/inode.c) before a write by a caller
/// without `CAP_FSETID`, which is never root. Root's is a chown: the bits
/// [`perm::mode_after_chown`] keeps. Anyone else's is cleared by the rule
/// both share, with no permission check (`ATTR_FORCE`): `S_ISUID`, and
/// `S_ISGID` when group execute is set. Deviation: a chown -1 -1 by a
/// caller outside the file's group keeps an `S_ISGID` without group
/// execute, which Linux `setattr_should_drop_sgid` would drop (chown(2)
/// leaves what -1 -1 does to the bits unspecified).
fn chown_unchanged(a: &Attr, c: &Cred) -> Result<SetAttr, FsError> {
    let perm = if c.is_root() {
        perm::mode_after_chown(a, c)
    } else {
        // As a member of the file's group: only the shared rule.
        let member = Cred {
            groups: vec![a.gid],
            ..c.clone()
        };
        perm::mode_after_chown(a, &member)
    };
    if perm == a.perm {
        return Ok(SetAttr::default());
    }
    Ok(SetAttr {
        perm: Some(perm),
        ..SetAttr::default()
    })
}

/// `S_IFMT` of `st_mode`: the file type bits.
const S_IFMT: u32 = 0o170000;

fn name_of(name: &OsStr) -> Result<String, i32> {
    name.to_str().map(str::to_string).ok_or(EINVAL)
}

fn ino_of(ino: u64) -> Result<Ino, i32> {
    from_fuse(ino).ok_or(ENOENT)
}

impl<S: Served> MqfsFuse<S> {
    fn control(&self, ino: u64, req: &Request<'_>) -> FileAttr {
        control_attr(ino, req.uid(), req.gid(), SystemTime::now())
    }

    /// Lets the kernel keep no name or attributes it learned, so that
    /// every path walk looks each name up here and [`Filesystem::lookup`]
    /// checks search permission for the walking caller, and every stat
    /// sees the mode another user's write just changed: for a mount other
    /// users reach (`allow_other`) without the kernel's own checks
    /// (`default_permissions`). A cached name would be walked by anyone
    /// for its time to live.
    pub fn check_every_walk(&mut self) {
        self.ttl = Duration::ZERO;
    }

    /// Runs `check` (a permission check, reading attributes only) for a
    /// request, neither counted as a request nor recorded; `Err` is the
    /// errno.
    fn permitted<T, Fut>(&mut self, ctx: Ctx, check: impl FnOnce(Rc<S>) -> Fut) -> Result<T, i32>
    where
        T: 'static,
        Fut: std::future::Future<Output = Result<T, FsError>> + 'static,
    {
        self.run(ctx, Req::Query, check).map_err(errno_of)
    }

    /// Makes `parent/name` (a `what`) with `make`, given the caller.
    fn make<F, Fut>(
        &mut self,
        req: &Request<'_>,
        (parent, name): (u64, &OsStr),
        what: Make,
        make: F,
    ) -> Result<FileAttr, i32>
    where
        F: FnOnce(Rc<S>, Ctx, Ino, String, Cred) -> Fut + 'static,
        Fut: std::future::Future<Output = Result<Attr, FsError>> + 'static,
    {
        let name = name_of(name)?;
        if reserved(parent, &name) {
            return Err(EPERM);
        }
        let (p, ctx, c) = (ino_of(parent)?, self.ctx(req.pid()), cred(req));
        let n = name.clone();
        let a = self.call(ctx, Req::Make(what, p, name.clone()), move |fs| {
            make(fs, ctx, p, n, c)
        })?;
        self.learned(p, &name, &a, false);
        Ok(file_attr(&a))
    }

    /// A setattr of `set` on `ino` by the caller of `req`, checked by
    /// [`checked_setattr`].
    fn do_setattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        set: SetAttr,
        (by_fd, touch): (bool, bool),
    ) -> Result<FileAttr, i32> {
        let (i, ctx, c) = (ino_of(ino)?, self.ctx(req.pid()), cred(req));
        let set = self.permitted(ctx, move |fs| async move {
            let a = fs.peek_attr(ctx, i).await?;
            if set == SetAttr::default() {
                return chown_unchanged(&a, &c);
            }
            checked_setattr(&a, &c, set, by_fd, touch)
        })?;
        if set == SetAttr::default() {
            let a = self.call(ctx, Req::Query, move |fs| async move { fs.getattr(ctx, i).await })?;
            return Ok(file_attr(&a));
        }
        let a = self.call(ctx, Req::Setattr(i, set.size), move |fs| async move {
            fs.setattr(ctx, i, &set).await
        })?;
        Ok(file_attr(&a))
    }

    /// May the caller remove `parent/name` ([`perm::may_delete`])?
    fn may_delete(&mut self, req: &Request<'_>, parent: Ino, name: &str) -> Result<(), i32> {
        let (ctx, c, n) = (self.ctx(req.pid()), cred(req), name.to_string());
        self.permitted(ctx, move |fs| async move {
            let dir = fs.peek_attr(ctx, parent).await?;
            let victim = fs.peek_lookup(ctx, parent, &n).await?;
            perm::may_delete(&dir, &victim, &c)
        })
    }

    fn do_rename(
        &mut self,
        req: &Request<'_>,
        from: (u64, &OsStr),
        to: (u64, &OsStr),
        flags: u32,
    ) -> Result<(), i32> {
        let (name, newname) = (name_of(from.1)?, name_of(to.1)?);
        if reserved(from.0, &name) || reserved(to.0, &newname) {
            return Err(EPERM);
        }
        let (p, np, ctx) = (ino_of(from.0)?, ino_of(to.0)?, self.ctx(req.pid()));
        if flags & libc::RENAME_NOREPLACE != 0 {
            let n = newname.clone();
            let exists = self.call(ctx, Req::Query, move |fs| async move {
                match fs.lookup(ctx, np, &n).await {
                    Ok(_) => Ok(true),
                    Err(FsError::NotFound) => Ok(false),
                    Err(e) => Err(e),
                }
            })?;
            if exists {
                return Err(libc::EEXIST);
            }
        } else if flags != 0 {
            return Err(EINVAL);
        }
        let (c, n, nn) = (cred(req), name.clone(), newname.clone());
        self.permitted(ctx, move |fs| async move {
            let src_dir = fs.peek_attr(ctx, p).await?;
            let src = fs.peek_lookup(ctx, p, &n).await?;
            let dst_dir = fs.peek_attr(ctx, np).await?;
            let dst = match fs.peek_lookup(ctx, np, &nn).await {
                Ok(a) => Some(a),
                Err(FsError::NotFound) => None,
                Err(e) => return Err(e),
            };
            perm::may_rename((&src_dir, &src), (&dst_dir, dst.as_ref()), &c)
        })?;
        let r = Req::Rename(p, name.clone(), np, newname.clone());
        self.call(ctx, r, move |fs| async move {
            fs.rename(ctx, p, &name, np, &newname).await
        })
    }
}

impl<S: Served> Filesystem for MqfsFuse<S> {
    /// Asks the kernel for `FUSE_ATOMIC_O_TRUNC` (open gets `O_TRUNC`, so
    /// the truncation is checked with the open, [`perm::open_mask`]) and
    /// `FUSE_HANDLE_KILLPRIV`.
    fn init(&mut self, _req: &Request<'_>, config: &mut KernelConfig) -> Result<(), libc::c_int> {
        for (cap, name) in [
            (fuser::consts::FUSE_ATOMIC_O_TRUNC, "FUSE_ATOMIC_O_TRUNC"),
            (FUSE_HANDLE_KILLPRIV, "FUSE_HANDLE_KILLPRIV"),
        ] {
            if config.add_capabilities(cap).is_err() {
                eprintln!("mqfs: the kernel lacks {name}: permission checks are incomplete");
            }
        }
        Ok(())
    }

    fn destroy(&mut self) {
        self.shutdown();
    }

    fn lookup(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let r = (|| {
            let name = name_of(name)?;
            match (parent, name.as_str()) {
                (CONTROL_DIR, STATS_NAME) => return Ok(self.control(STATS_FILE, req)),
                (CONTROL_DIR, _) => return Err(ENOENT),
                (FUSE_ROOT_ID, CONTROL_NAME) => return Ok(self.control(CONTROL_DIR, req)),
                _ if reserved(parent, &name) => return Err(ENOENT),
                _ => {}
            }
            let (p, ctx, n, c) = (ino_of(parent)?, self.ctx(req.pid()), name.clone(), cred(req));
            let a = self.call(ctx, Req::Query, move |fs| async move {
                // Search permission on the directory (path_resolution(7)).
                perm::may(&fs.peek_attr(ctx, p).await?, &c, MAY_EXEC)?;
                fs.lookup(ctx, p, &n).await
            })?;
            self.learned(p, &name, &a, true);
            Ok(file_attr(&a))
        })();
        match r {
            Ok(a) => reply.entry(&self.ttl, &a, 0),
            Err(e) => reply.error(e),
        }
    }

    fn getattr(&mut self, req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        if is_control(ino) {
            return reply.attr(&TTL, &self.control(ino, req));
        }
        let r = ino_of(ino).and_then(|i| {
            let ctx = self.ctx(req.pid());
            self.call(ctx, Req::Query, move |fs| async move { fs.getattr(ctx, i).await })
        });
        match r {
            Ok(a) => reply.attr(&self.ttl, &file_attr(&a)),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        if is_control(ino) {
            return reply.error(EPERM);
        }
        // UTIME_NOW (utimensat(2)): the file system's clock, as the
        // timestamps it stamps itself.
        let now = self.mounted.as_ref().map_or(0, |m| m.fs.now_ns());
        let time = |t: TimeOrNow| match t {
            TimeOrNow::SpecificTime(t) => ns_of(t),
            TimeOrNow::Now => now,
        };
        let touch = matches!((atime, mtime), (Some(TimeOrNow::Now), Some(TimeOrNow::Now)));
        let set = SetAttr {
            perm: mode.map(|m| (m & 0o7777) as u16),
            uid,
            gid,
            size,
            atime: atime.map(time),
            mtime: mtime.map(time),
        };
        match self.do_setattr(req, ino, set, (fh.is_some(), touch)) {
            Ok(a) => reply.attr(&self.ttl, &a),
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&mut self, req: &Request<'_>, ino: u64, reply: ReplyData) {
        let r = ino_of(ino).and_then(|i| {
            let ctx = self.ctx(req.pid());
            self.call(
                ctx,
                Req::Query,
                move |fs| async move { fs.readlink(ctx, i).await },
            )
        });
        match r {
            Ok(t) => reply.data(t.as_bytes()),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        let perm = (mode & !umask & 0o7777) as u16;
        // mknod(2): S_IFREG (or 0) makes a regular file; S_IFCHR, S_IFBLK,
        // S_IFIFO and S_IFSOCK a special file; anything else is EINVAL.
        let ftype = match mode & S_IFMT {
            0 => mqfs::FileType::File,
            t => match mqfs::FileType::from_mode(t as u16) {
                Some(t) if t != mqfs::FileType::Dir && t != mqfs::FileType::Symlink => t,
                _ => return reply.error(EINVAL),
            },
        };
        let new = if ftype == mqfs::FileType::File {
            NewInode::File
        } else {
            NewInode::Special(ftype, rdev)
        };
        let made = self.make(
            req,
            (parent, name),
            Make::File,
            move |fs, ctx, p, n, c| async move { fs.make_as(ctx, p, &n, new, perm, &c).await },
        );
        match made {
            Ok(a) => reply.entry(&self.ttl, &a, 0),
            Err(e) => reply.error(e),
        }
    }

    fn mkdir(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let perm = (mode & !umask & 0o7777) as u16;
        match self.make(
            req,
            (parent, name),
            Make::Dir,
            move |fs, ctx, p, n, c| async move { fs.make_as(ctx, p, &n, NewInode::Dir, perm, &c).await },
        ) {
            Ok(a) => reply.entry(&self.ttl, &a, 0),
            Err(e) => reply.error(e),
        }
    }

    fn unlink(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let r = (|| {
            let name = name_of(name)?;
            if reserved(parent, &name) {
                return Err(EPERM);
            }
            let (p, ctx) = (ino_of(parent)?, self.ctx(req.pid()));
            self.may_delete(req, p, &name)?;
            let r = Req::Unlink(p, name.clone());
            self.call(ctx, r, move |fs| async move { fs.unlink(ctx, p, &name).await })
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn rmdir(&mut self, req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let r = name_of(name).and_then(|name| {
            if reserved(parent, &name) {
                return Err(EPERM);
            }
            let (p, ctx) = (ino_of(parent)?, self.ctx(req.pid()));
            self.may_delete(req, p, &name)?;
            let r = Req::Rmdir(p, name.clone());
            self.call(ctx, r, move |fs| async move { fs.rmdir(ctx, p, &name).await })
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn symlink(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        let Some(target) = target.to_str().map(str::to_string) else {
            return reply.error(EINVAL);
        };
        match self.make(
            req,
            (parent, link_name),
            Make::Symlink,
            move |fs, ctx, p, n, c| async move {
                let new = NewInode::Symlink(&target);
                fs.make_as(ctx, p, &n, new, 0o777, &c).await
            },
        ) {
            Ok(a) => reply.entry(&self.ttl, &a, 0),
            Err(e) => reply.error(e),
        }
    }

    fn rename(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        match self.do_rename(req, (parent, name), (newparent, newname), flags) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn link(&mut self, req: &Request<'_>, ino: u64, newparent: u64, newname: &OsStr, reply: ReplyEntry) {
        let r = ino_of(ino).and_then(|i| {
            self.make(
                req,
                (newparent, newname),
                Make::Link(i),
                move |fs, ctx, p, n, c| async move {
                    perm::may_create(&fs.peek_attr(ctx, p).await?, &c)?;
                    fs.link(ctx, i, p, &n).await
                },
            )
        });
        match r {
            Ok(a) => reply.entry(&self.ttl, &a, 0),
            Err(e) => reply.error(e),
        }
    }

    /// open(2): the access the flags ask ([`perm::open_mask`]), then
    /// `O_TRUNC` truncates a regular file (as an ftruncate: its write
    /// permission was just checked).
    fn open(&mut self, req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        if is_control(ino) && flags & libc::O_ACCMODE != libc::O_RDONLY {
            return reply.error(libc::EACCES);
        }
        if ino == STATS_FILE {
            let text = self.stats().map(|s| s.render()).unwrap_or_default();
            let fh = self.new_fh();
            self.snapshots.insert(fh, text.into_bytes());
            return reply.opened(fh, FOPEN_DIRECT_IO);
        }
        let r = ino_of(ino).and_then(|i| {
            let (ctx, c) = (self.ctx(req.pid()), cred(req));
            let a = self.permitted(ctx, move |fs| async move {
                let a = fs.peek_attr(ctx, i).await?;
                perm::may(&a, &c, perm::open_mask(flags))?;
                Ok(a)
            })?;
            if flags & perm::O_TRUNC != 0 && a.ftype == mqfs::FileType::File {
                let set = SetAttr {
                    size: Some(0),
                    ..SetAttr::default()
                };
                self.do_setattr(req, ino, set, (true, false))?;
            }
            self.opened(ctx, i)
        });
        match r {
            Ok(()) => reply.opened(0, 0),
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        let off = u64::try_from(offset).map_err(|_| EINVAL);
        if ino == STATS_FILE {
            let snap = self.snapshots.get(&fh).map(Vec::as_slice).unwrap_or_default();
            let start = off.map_or(snap.len(), |o| (o as usize).min(snap.len()));
            let end = (start + size as usize).min(snap.len());
            return reply.data(&snap[start..end]);
        }
        let r = off.and_then(|off| {
            let (i, ctx) = (ino_of(ino)?, self.ctx(req.pid()));
            self.call(ctx, Req::Query, move |fs| async move {
                fs.read(ctx, i, off, size as usize).await
            })
        });
        match r {
            Ok(d) => reply.data(&d),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        if is_control(ino) {
            return reply.error(libc::EBADF);
        }
        let r = u64::try_from(offset).map_err(|_| EINVAL).and_then(|off| {
            let (i, ctx, data) = (ino_of(ino)?, self.ctx(req.pid()), data.to_vec());
            let (r, c) = (Req::Write(i, off, data.len()), cred(req));
            self.call(ctx, r, move |fs| async move {
                drop_privs(&*fs, ctx, i, &c).await?;
                fs.write(ctx, i, off, &data).await
            })
        });
        match r {
            Ok(n) => reply.written(n as u32),
            Err(e) => reply.error(e),
        }
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _lock_owner: u64, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        if ino == STATS_FILE {
            self.snapshots.remove(&fh);
        } else if let Ok(i) = ino_of(ino) {
            let ctx = self.ctx(req.pid());
            self.closed(ctx, i);
        }
        reply.ok();
    }

    fn fsync(&mut self, req: &Request<'_>, ino: u64, _fh: u64, datasync: bool, reply: ReplyEmpty) {
        if is_control(ino) {
            return reply.ok();
        }
        let kind = if datasync {
            SyncKind::Fdatasync
        } else {
            SyncKind::Fsync
        };
        let ctx = self.ctx(req.pid());
        match ino_of(ino).and_then(|i| self.sync(ctx, i, kind)) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn opendir(&mut self, req: &Request<'_>, ino: u64, _flags: i32, reply: ReplyOpen) {
        let r = if ino == CONTROL_DIR {
            Ok(vec![
                (".".to_string(), CONTROL_DIR, fuser::FileType::Directory),
                ("..".to_string(), FUSE_ROOT_ID, fuser::FileType::Directory),
                (STATS_NAME.to_string(), STATS_FILE, fuser::FileType::RegularFile),
            ])
        } else {
            ino_of(ino).and_then(|i| {
                let (ctx, c) = (self.ctx(req.pid()), cred(req));
                let list = self.call(ctx, Req::Query, move |fs| async move {
                    perm::may(&fs.peek_attr(ctx, i).await?, &c, MAY_READ)?;
                    fs.readdir(ctx, i).await
                })?;
                Ok(list
                    .into_iter()
                    .filter(|(n, _, _)| !reserved(ino, n))
                    .map(|(n, i, t)| (n, to_fuse(i), kind(t)))
                    .collect())
            })
        };
        match r {
            Ok(list) => {
                let fh = self.new_fh();
                self.dirs.insert(fh, list);
                reply.opened(fh, 0);
            }
            Err(e) => reply.error(e),
        }
    }

    fn readdir(&mut self, _req: &Request<'_>, _ino: u64, fh: u64, offset: i64, mut reply: ReplyDirectory) {
        let Some(list) = self.dirs.get(&fh) else {
            return reply.error(libc::EBADF);
        };
        let skip = usize::try_from(offset).unwrap_or(0);
        for (i, (name, ino, kind)) in list.iter().enumerate().skip(skip) {
            if reply.add(*ino, (i + 1) as i64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn releasedir(&mut self, _req: &Request<'_>, _ino: u64, fh: u64, _flags: i32, reply: ReplyEmpty) {
        self.dirs.remove(&fh);
        reply.ok();
    }

    fn fsyncdir(&mut self, req: &Request<'_>, ino: u64, fh: u64, datasync: bool, reply: ReplyEmpty) {
        self.fsync(req, ino, fh, datasync, reply);
    }

    fn statfs(&mut self, req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        let ctx = self.ctx(req.pid());
        match self.call(ctx, Req::Query, move |fs| async move { fs.statfs(ctx).await }) {
            Ok(s) => reply.statfs(
                s.blocks,
                s.free_blocks,
                s.free_blocks,
                s.inodes,
                s.free_inodes,
                s.block_size,
                s.name_max,
                s.block_size,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &mut self,
        req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        let perm = (mode & !umask & 0o7777) as u16;
        match self.make(
            req,
            (parent, name),
            Make::File,
            move |fs, ctx, p, n, c| async move { fs.make_as(ctx, p, &n, NewInode::File, perm, &c).await },
        ) {
            Ok(a) => {
                let ctx = self.ctx(req.pid());
                match from_fuse(a.ino).map_or(Ok(()), |i| self.opened(ctx, i)) {
                    Ok(()) => reply.created(&self.ttl, &a, 0, 0, 0),
                    Err(e) => reply.error(e),
                }
            }
            Err(e) => reply.error(e),
        }
    }

    /// access(2) and chdir(2) (the kernel asks for both when it does not
    /// check permissions itself): `F_OK` for an inode that exists, else
    /// [`perm::may`] for the caller (whose real uid and gid the kernel
    /// puts in the request for access(2)).
    fn access(&mut self, req: &Request<'_>, ino: u64, mask: i32, reply: ReplyEmpty) {
        let mask = (mask & 0o7) as u8;
        if is_control(ino) {
            let attr = self.control(ino, req);
            let denied = mask & !((attr.perm & 0o7) as u8) != 0;
            return if denied {
                reply.error(libc::EACCES)
            } else {
                reply.ok()
            };
        }
        let (ctx, c) = (self.ctx(req.pid()), cred(req));
        let r = ino_of(ino).and_then(|i| {
            self.permitted(ctx, move |fs| async move {
                let a = fs.peek_attr(ctx, i).await?;
                perm::may(&a, &c, mask)
            })
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn ioctl(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        _fh: u64,
        _flags: u32,
        cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: ReplyIoctl,
    ) {
        let kind = match cmd {
            FATOMIC => SyncKind::Fatomic,
            FDATAATOMIC => SyncKind::Fdataatomic,
            _ => return reply.error(ENOTTY),
        };
        let ctx = self.ctx(req.pid());
        match ino_of(ino).and_then(|i| self.sync(ctx, i, kind)) {
            Ok(()) => reply.ioctl(0, &[]),
            Err(e) => reply.error(e),
        }
    }

    /// fallocate(2), its mode bits mapped by `falloc_mode`. While
    /// recording, a preallocation is recorded as the truncate it amounts
    /// to (or as an attribute change), and the modes that change bytes
    /// (punch hole, zero range) are refused with EOPNOTSUPP: the recorder
    /// has no operation for them yet.
    fn fallocate(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        length: i64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if is_control(ino) {
            return reply.error(EPERM);
        }
        let r = ino_of(ino).and_then(|i| {
            let m = falloc_mode(mode)?;
            let (off, len) = match (u64::try_from(offset), u64::try_from(length)) {
                (Ok(o), Ok(l)) => (o, l),
                _ => return Err(EINVAL),
            };
            let ctx = self.ctx(req.pid());
            let recording = self.mounted.as_ref().is_some_and(|m| m.rec.is_some());
            let r = match m {
                FallocMode::Allocate if recording => {
                    let size = self.call(ctx, Req::Query, move |fs| async move {
                        Ok(fs.getattr(ctx, i).await?.size)
                    })?;
                    let end = off.saturating_add(len);
                    Req::Setattr(i, (end > size).then_some(end))
                }
                FallocMode::Allocate | FallocMode::KeepSize => Req::Setattr(i, None),
                _ if recording => return Err(EOPNOTSUPP),
                _ => Req::Setattr(i, None),
            };
            let c = cred(req);
            self.call(ctx, r, move |fs| async move {
                // Linux `vfs_fallocate` calls `file_modified`, which clears
                // set-ID bits as a write does.
                drop_privs(&*fs, ctx, i, &c).await?;
                fs.fallocate(ctx, i, m, off, len).await
            })
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    /// setxattr(2); `XATTR_CREATE` and `XATTR_REPLACE` as [`XattrFlags`].
    /// Attributes are not part of crash promises, so a recorder sees an
    /// attribute change.
    fn setxattr(
        &mut self,
        req: &Request<'_>,
        ino: u64,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        position: u32,
        reply: ReplyEmpty,
    ) {
        if is_control(ino) {
            return reply.error(EPERM);
        }
        let r = (|| {
            let i = ino_of(ino)?;
            let n = name_of(name)?;
            let f = xattr_flags(flags)?;
            if position != 0 {
                return Err(EINVAL);
            }
            let (v, c) = (value.to_vec(), cred(req));
            let ctx = self.ctx(req.pid());
            self.call(ctx, Req::Setattr(i, None), move |fs| async move {
                perm::xattr_allowed(&fs.peek_attr(ctx, i).await?, &c, &n, true)?;
                fs.setxattr(ctx, i, &n, &v, f).await
            })
        })();
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn getxattr(&mut self, req: &Request<'_>, ino: u64, name: &OsStr, size: u32, reply: ReplyXattr) {
        if is_control(ino) {
            return reply.error(ENODATA);
        }
        let r = ino_of(ino).and_then(|i| {
            let (n, c) = (name_of(name)?, cred(req));
            let ctx = self.ctx(req.pid());
            self.call(ctx, Req::Query, move |fs| async move {
                perm::xattr_allowed(&fs.peek_attr(ctx, i).await?, &c, &n, false)?;
                fs.getxattr(ctx, i, &n).await
            })
        });
        send_xattr(r, size, reply);
    }

    fn listxattr(&mut self, req: &Request<'_>, ino: u64, size: u32, reply: ReplyXattr) {
        if is_control(ino) {
            return send_xattr(Ok(Vec::new()), size, reply);
        }
        let r = ino_of(ino).and_then(|i| {
            let (ctx, c) = (self.ctx(req.pid()), cred(req));
            self.call(ctx, Req::Query, move |fs| async move {
                let mut names = fs.listxattr(ctx, i).await?;
                names.retain(|n| perm::xattr_listed(n, &c));
                Ok(names)
            })
        });
        send_xattr(r.map(|names| list_bytes(&names)), size, reply);
    }

    fn removexattr(&mut self, req: &Request<'_>, ino: u64, name: &OsStr, reply: ReplyEmpty) {
        if is_control(ino) {
            return reply.error(EPERM);
        }
        let r = ino_of(ino).and_then(|i| {
            let (n, c) = (name_of(name)?, cred(req));
            let ctx = self.ctx(req.pid());
            self.call(ctx, Req::Setattr(i, None), move |fs| async move {
                perm::xattr_allowed(&fs.peek_attr(ctx, i).await?, &c, &n, true)?;
                fs.removexattr(ctx, i, &n).await
            })
        });
        match r {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }
}

/// fallocate(2) mode bits as a [`FallocMode`]: 0, `KEEP_SIZE`,
/// `PUNCH_HOLE | KEEP_SIZE`, `ZERO_RANGE` and `ZERO_RANGE | KEEP_SIZE`.
/// Anything else (punch without keep-size, collapse, insert, unshare) is
/// EOPNOTSUPP, as Linux `vfs_fallocate` and ext4 answer.
pub(crate) fn falloc_mode(mode: i32) -> Result<FallocMode, i32> {
    const KEEP: i32 = libc::FALLOC_FL_KEEP_SIZE;
    const PUNCH: i32 = libc::FALLOC_FL_PUNCH_HOLE;
    const ZERO: i32 = libc::FALLOC_FL_ZERO_RANGE;
    match mode {
        0 => Ok(FallocMode::Allocate),
        m if m == KEEP => Ok(FallocMode::KeepSize),
        m if m == PUNCH | KEEP => Ok(FallocMode::PunchHole),
        m if m == ZERO => Ok(FallocMode::ZeroRange),
        m if m == ZERO | KEEP => Ok(FallocMode::ZeroRangeKeepSize),
        _ => Err(EOPNOTSUPP),
    }
}

/// setxattr(2) flags as [`XattrFlags`]; both flags, or others, are EINVAL.
pub(crate) fn xattr_flags(flags: i32) -> Result<XattrFlags, i32> {
    match flags {
        0 => Ok(XattrFlags::Any),
        libc::XATTR_CREATE => Ok(XattrFlags::Create),
        libc::XATTR_REPLACE => Ok(XattrFlags::Replace),
        _ => Err(EINVAL),
    }
}

/// listxattr(2)'s buffer: each name followed by a NUL.
pub(crate) fn list_bytes(names: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for n in names {
        out.extend_from_slice(n.as_bytes());
        out.push(0);
    }
    out
}

/// What a getxattr or listxattr of a caller's buffer of `size` bytes
/// answers (the size-probe protocol of getxattr(2)): size 0 asks for the
/// length, a buffer too small is ERANGE, else the bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum XattrAnswer<'a> {
    /// The length the caller needs.
    Size(u32),
    /// The bytes.
    Data(&'a [u8]),
}

/// The answer for `bytes` to a buffer of `size` (see [`XattrAnswer`]).
pub(crate) fn xattr_answer(bytes: &[u8], size: u32) -> Result<XattrAnswer<'_>, i32> {
    let len = u32::try_from(bytes.len()).map_err(|_| libc::E2BIG)?;
    if size == 0 {
        Ok(XattrAnswer::Size(len))
    } else if len > size {
        Err(ERANGE)
    } else {
        Ok(XattrAnswer::Data(bytes))
    }
}

fn send_xattr(r: Result<Vec<u8>, i32>, size: u32, reply: ReplyXattr) {
    match r.and_then(|b| match xattr_answer(&b, size)? {
        XattrAnswer::Size(n) => Ok(Err(n)),
        XattrAnswer::Data(_) => Ok(Ok(b)),
    }) {
        Ok(Err(n)) => reply.size(n),
        Ok(Ok(b)) => reply.data(&b),
        Err(e) => reply.error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xattr_size_probe_protocol() {
        assert_eq!(xattr_answer(b"abc", 0), Ok(XattrAnswer::Size(3)));
        assert_eq!(xattr_answer(b"abc", 2), Err(ERANGE));
        assert_eq!(xattr_answer(b"abc", 3), Ok(XattrAnswer::Data(b"abc")));
        assert_eq!(xattr_answer(b"", 0), Ok(XattrAnswer::Size(0)));
        let names = vec!["user.a".to_string(), "user.bb".to_string()];
        assert_eq!(list_bytes(&names), b"user.a\0user.bb\0");
    }

    #[test]
    fn fallocate_modes_and_xattr_flags_map_as_linux() {
        assert_eq!(falloc_mode(0), Ok(FallocMode::Allocate));
        assert_eq!(falloc_mode(libc::FALLOC_FL_KEEP_SIZE), Ok(FallocMode::KeepSize));
        let punch = libc::FALLOC_FL_PUNCH_HOLE;
        assert_eq!(
            falloc_mode(punch | libc::FALLOC_FL_KEEP_SIZE),
            Ok(FallocMode::PunchHole)
        );
        assert_eq!(falloc_mode(punch), Err(EOPNOTSUPP), "punch needs keep-size");
        assert_eq!(falloc_mode(libc::FALLOC_FL_ZERO_RANGE), Ok(FallocMode::ZeroRange));
        assert_eq!(
            falloc_mode(libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE),
            Ok(FallocMode::ZeroRangeKeepSize)
        );
        assert_eq!(falloc_mode(libc::FALLOC_FL_COLLAPSE_RANGE), Err(EOPNOTSUPP));
        assert_eq!(xattr_flags(0), Ok(XattrFlags::Any));
        assert_eq!(xattr_flags(libc::XATTR_CREATE), Ok(XattrFlags::Create));
        assert_eq!(xattr_flags(libc::XATTR_REPLACE), Ok(XattrFlags::Replace));
        assert_eq!(xattr_flags(libc::XATTR_CREATE | libc::XATTR_REPLACE), Err(EINVAL));
    }
}
