//! MQFS behind the shared file-system interface ([`fsapi::FileSystem`]):
//! each primitive is the inherent operation of the same name, with the
//! attributes and types as the interface has them; readdir leaves out `.`
//! and `..` and sorts by name, as the interface asks. What the interface
//! has no call for (symlinks, devices, extended attributes, fallocate,
//! fatomic...) stays on [`Fs`].
//!
//! Where the trait is in scope, a call on an `Rc<Fs>` (what a mount hands
//! out) finds the trait's method first, as `fsapi` implements the trait
//! for `Rc<T>`: its `readdir` then lists no dot entries. Call
//! `Fs::readdir` (or deref the `Rc`) for MQFS's own.

use crate::error::FsError;
use crate::fs::{Ctx, Fs, Ino};
use crate::layout::{FileType, ROOT_INO};
use crate::ops::Attr;

/// The interface's type of `t`: fifos, devices and sockets are
/// [`fsapi::FileType::Special`].
pub fn file_type(t: FileType) -> fsapi::FileType {
    match t {
        FileType::File => fsapi::FileType::File,
        FileType::Dir => fsapi::FileType::Dir,
        FileType::Symlink => fsapi::FileType::Symlink,
        FileType::Fifo | FileType::CharDev | FileType::BlockDev | FileType::Socket => {
            fsapi::FileType::Special
        }
    }
}

/// The interface's attributes of `a`: its pages are the 4 KiB blocks the
/// inode holds (data, and extent-tree blocks past the eight extents the
/// inode maps itself).
pub fn attr(a: Attr) -> fsapi::Attr<Ino> {
    fsapi::Attr {
        ino: a.ino,
        ftype: file_type(a.ftype),
        perm: a.perm,
        links: u32::from(a.links),
        size: a.size,
        pages: a.blocks,
    }
}

impl fsapi::FileSystem for Fs {
    type Ino = Ino;
    type Error = FsError;

    fn root(&self) -> Ino {
        ROOT_INO
    }

    async fn getattr(&self, ctx: Ctx, ino: Ino) -> Result<fsapi::Attr<Ino>, FsError> {
        Fs::getattr(self, ctx, ino).await.map(attr)
    }

    async fn lookup(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<fsapi::Attr<Ino>, FsError> {
        Fs::lookup(self, ctx, parent, name).await.map(attr)
    }

    async fn create(
        &self,
        ctx: Ctx,
        parent: Ino,
        name: &str,
        perm: u16,
    ) -> Result<fsapi::Attr<Ino>, FsError> {
        Fs::create(self, ctx, parent, name, perm).await.map(attr)
    }

    async fn mkdir(&self, ctx: Ctx, parent: Ino, name: &str, perm: u16) -> Result<fsapi::Attr<Ino>, FsError> {
        Fs::mkdir(self, ctx, parent, name, perm).await.map(attr)
    }

    async fn link(&self, ctx: Ctx, ino: Ino, parent: Ino, name: &str) -> Result<fsapi::Attr<Ino>, FsError> {
        Fs::link(self, ctx, ino, parent, name).await.map(attr)
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
        from: Ino,
        from_name: &str,
        to: Ino,
        to_name: &str,
    ) -> Result<(), FsError> {
        Fs::rename(self, ctx, from, from_name, to, to_name).await
    }

    async fn read(&self, ctx: Ctx, ino: Ino, off: u64, len: usize) -> Result<Vec<u8>, FsError> {
        Fs::read(self, ctx, ino, off, len).await
    }

    async fn write(&self, ctx: Ctx, ino: Ino, off: u64, data: &[u8]) -> Result<usize, FsError> {
        Fs::write(self, ctx, ino, off, data).await
    }

    async fn truncate(&self, ctx: Ctx, ino: Ino, size: u64) -> Result<(), FsError> {
        Fs::truncate(self, ctx, ino, size).await
    }

    async fn fsync(&self, ctx: Ctx, ino: Ino) -> Result<(), FsError> {
        Fs::fsync(self, ctx, ino).await
    }

    async fn statfs(&self, ctx: Ctx) -> Result<fsapi::StatFs, FsError> {
        let s = Fs::statfs(self, ctx).await?;
        debug_assert_eq!(s.block_size, 4096, "MQFS's blocks are the shared API's pages");
        Ok(fsapi::StatFs {
            pages: s.blocks,
            free_pages: s.free_blocks,
            inodes: s.inodes,
            free_inodes: s.free_inodes,
            name_max: s.name_max,
        })
    }

    async fn readdir(&self, ctx: Ctx, ino: Ino) -> Result<Vec<(String, Ino, fsapi::FileType)>, FsError> {
        let mut v: Vec<(String, Ino, fsapi::FileType)> = Fs::readdir(self, ctx, ino)
            .await?
            .into_iter()
            .filter(|(n, _, _)| n != "." && n != "..")
            .map(|(n, i, t)| (n, i, file_type(t)))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(v)
    }
}
