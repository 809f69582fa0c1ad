//! What the adapter serves: a mounted file system, with the operations the
//! FUSE requests call, in MQFS's vocabulary (its attributes with owners
//! and times, its inode numbers, its errors, which carry the errno).
//!
//! MQFS serves itself (every operation is its own); a file system on
//! persistent memory is lifted into this vocabulary by
//! `crate::pm::PmServed`, which answers EOPNOTSUPP for what it lacks. So
//! one adapter ([`super::MqfsFuse`]) serves every file system, and each
//! FUSE rule (permissions, handles, the control directory) is written once.

use mqfs::{
    Attr, Cred, Ctx, FallocMode, FileType, Fs, FsError, Ino, NewInode, SetAttr, StatFs, SyncKind, XattrFlags,
};

/// A mounted file system as the FUSE adapter calls it. Each operation is
/// the one of [`mqfs::Fs`] of the same name (its doc says what it does);
/// `peek_*` read without being a system call of their own (the permission
/// checks before one).
#[allow(async_fn_in_trait)] // one single-threaded executor: no `Send` bound wanted
pub trait Served: 'static {
    /// The file system's clock: nanoseconds since 1970.
    fn now_ns(&self) -> u64;
    /// Moves the clock to at least `ns` (the host's time, while the
    /// simulation idles between requests).
    fn clock_at_least(&self, ns: u64);
    /// Attributes, read for a check.
    async fn peek_attr(&self, ctx: Ctx, ino: Ino) -> Result<Attr, FsError>;
    /// The attributes of `parent/name`, read for a check.
    async fn peek_lookup(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<Attr, FsError>;
    /// stat(2).
    async fn getattr(&self, ctx: Ctx, ino: Ino) -> Result<Attr, FsError>;
    /// The attributes of `parent/name`.
    async fn lookup(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<Attr, FsError>;
    /// chmod(2), chown(2), truncate(2), utimensat(2).
    async fn setattr(&self, ctx: Ctx, ino: Ino, set: &SetAttr) -> Result<Attr, FsError>;
    /// Makes `parent/name` owned by `cred`.
    async fn make_as(
        &self,
        ctx: Ctx,
        parent: Ino,
        name: &str,
        new: NewInode<'_>,
        perm: u16,
        cred: &Cred,
    ) -> Result<Attr, FsError>;
    /// readlink(2).
    async fn readlink(&self, ctx: Ctx, ino: Ino) -> Result<String, FsError>;
    /// link(2).
    async fn link(&self, ctx: Ctx, ino: Ino, newparent: Ino, newname: &str) -> Result<Attr, FsError>;
    /// unlink(2).
    async fn unlink(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<(), FsError>;
    /// rmdir(2).
    async fn rmdir(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<(), FsError>;
    /// rename(2).
    async fn rename(
        &self,
        ctx: Ctx,
        parent: Ino,
        name: &str,
        newparent: Ino,
        newname: &str,
    ) -> Result<(), FsError>;
    /// pread(2).
    async fn read(&self, ctx: Ctx, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>, FsError>;
    /// pwrite(2).
    async fn write(&self, ctx: Ctx, ino: Ino, off: u64, data: &[u8]) -> Result<usize, FsError>;
    /// The entries of a directory, `.` and `..` included.
    async fn readdir(&self, ctx: Ctx, ino: Ino) -> Result<Vec<(String, Ino, FileType)>, FsError>;
    /// statfs(2).
    async fn statfs(&self, ctx: Ctx) -> Result<StatFs, FsError>;
    /// fallocate(2).
    async fn fallocate(
        &self,
        ctx: Ctx,
        ino: Ino,
        mode: FallocMode,
        off: u64,
        len: u64,
    ) -> Result<(), FsError>;
    /// setxattr(2).
    async fn setxattr(
        &self,
        ctx: Ctx,
        ino: Ino,
        name: &str,
        value: &[u8],
        flags: XattrFlags,
    ) -> Result<(), FsError>;
    /// getxattr(2).
    async fn getxattr(&self, ctx: Ctx, ino: Ino, name: &str) -> Result<Vec<u8>, FsError>;
    /// listxattr(2).
    async fn listxattr(&self, ctx: Ctx, ino: Ino) -> Result<Vec<String>, FsError>;
    /// removexattr(2).
    async fn removexattr(&self, ctx: Ctx, ino: Ino, name: &str) -> Result<(), FsError>;
    /// One more open file description of `ino` (IsDir or Invalid for an
    /// inode that is not a regular file: nothing is kept for it).
    async fn open(&self, ctx: Ctx, ino: Ino) -> Result<(), FsError>;
    /// One fewer.
    async fn release(&self, ctx: Ctx, ino: Ino) -> Result<(), FsError>;
    /// fsync(2), fdatasync(2), or MQFS's atomic syncs.
    async fn sync(&self, ctx: Ctx, ino: Ino, kind: SyncKind) -> Result<(), FsError>;
    /// Makes everything durable and stops the file system's own work.
    async fn unmount(&self, ctx: Ctx) -> Result<(), FsError>;
}

impl Served for Fs {
    fn now_ns(&self) -> u64 {
        Fs::now_ns(self)
    }
    fn clock_at_least(&self, ns: u64) {
        Fs::clock_at_least(self, ns)
    }
    async fn peek_attr(&self, ctx: Ctx, ino: Ino) -> Result<Attr, FsError> {
        Fs::peek_attr(self, ctx, ino).await
    }
    async fn peek_lookup(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<Attr, FsError> {
        Fs::peek_lookup(self, ctx, parent, name).await
    }
    async fn getattr(&self, ctx: Ctx, ino: Ino) -> Result<Attr, FsError> {
        Fs::getattr(self, ctx, ino).await
    }
    async fn lookup(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<Attr, FsError> {
        Fs::lookup(self, ctx, parent, name).await
    }
    async fn setattr(&self, ctx: Ctx, ino: Ino, set: &SetAttr) -> Result<Attr, FsError> {
        Fs::setattr(self, ctx, ino, set).await
    }
    async fn make_as(
        &self,
        ctx: Ctx,
        parent: Ino,
        name: &str,
        new: NewInode<'_>,
        perm: u16,
        cred: &Cred,
    ) -> Result<Attr, FsError> {
        Fs::make_as(self, ctx, parent, name, new, perm, cred).await
    }
    async fn readlink(&self, ctx: Ctx, ino: Ino) -> Result<String, FsError> {
        Fs::readlink(self, ctx, ino).await
    }
    async fn link(&self, ctx: Ctx, ino: Ino, newparent: Ino, newname: &str) -> Result<Attr, FsError> {
        Fs::link(self, ctx, ino, newparent, newname).await
    }
    async fn unlink(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<(), FsError> {
        Fs::unlink(self, ctx, parent, name).await
    }
    async fn rmdir(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<(), FsError> {
        Fs::rmdir(self, ctx, parent, name).await
    }
    async fn rename(
        &self,
        ctx: Ctx,
        parent: Ino,
        name: &str,
        newparent: Ino,
        newname: &str,
    ) -> Result<(), FsError> {
        Fs::rename(self, ctx, parent, name, newparent, newname).await
    }
    async fn read(&self, ctx: Ctx, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>, FsError> {
        Fs::read(self, ctx, ino, off, len).await
    }
    async fn write(&self, ctx: Ctx, ino: Ino, off: u64, data: &[u8]) -> Result<usize, FsError> {
        Fs::write(self, ctx, ino, off, data).await
    }
    async fn readdir(&self, ctx: Ctx, ino: Ino) -> Result<Vec<(String, Ino, FileType)>, FsError> {
        Fs::readdir(self, ctx, ino).await
    }
    async fn statfs(&self, ctx: Ctx) -> Result<StatFs, FsError> {
        Fs::statfs(self, ctx).await
    }
    async fn fallocate(
        &self,
        ctx: Ctx,
        ino: Ino,
        mode: FallocMode,
        off: u64,
        len: u64,
    ) -> Result<(), FsError> {
        Fs::fallocate(self, ctx, ino, mode, off, len).await
    }
    async fn setxattr(
        &self,
        ctx: Ctx,
        ino: Ino,
        name: &str,
        value: &[u8],
        flags: XattrFlags,
    ) -> Result<(), FsError> {
        Fs::setxattr(self, ctx, ino, name, value, flags).await
    }
    async fn getxattr(&self, ctx: Ctx, ino: Ino, name: &str) -> Result<Vec<u8>, FsError> {
        Fs::getxattr(self, ctx, ino, name).await
    }
    async fn listxattr(&self, ctx: Ctx, ino: Ino) -> Result<Vec<String>, FsError> {
        Fs::listxattr(self, ctx, ino).await
    }
    async fn removexattr(&self, ctx: Ctx, ino: Ino, name: &str) -> Result<(), FsError> {
        Fs::removexattr(self, ctx, ino, name).await
    }
    async fn open(&self, ctx: Ctx, ino: Ino) -> Result<(), FsError> {
        Fs::open(self, ctx, ino).await
    }
    async fn release(&self, ctx: Ctx, ino: Ino) -> Result<(), FsError> {
        Fs::release(self, ctx, ino).await
    }
    async fn sync(&self, ctx: Ctx, ino: Ino, kind: SyncKind) -> Result<(), FsError> {
        match kind {
            SyncKind::Fsync => Fs::fsync(self, ctx, ino).await,
            SyncKind::Fdatasync => Fs::fdatasync(self, ctx, ino).await,
            SyncKind::Fatomic => Fs::fatomic(self, ctx, ino).await,
            SyncKind::Fdataatomic => Fs::fdataatomic(self, ctx, ino).await,
        }
    }
    async fn unmount(&self, ctx: Ctx) -> Result<(), FsError> {
        Fs::unmount(self, ctx).await
    }
}
