//! The [`FileSystem`] trait: the primitive operations each file system
//! implements, and the path helpers and the snapshot walk provided over
//! them.

use std::fmt::Debug;

use crate::errno::Errno;
use crate::tree::{FileType, Node, Tree};

/// The calling thread: the core its instructions run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ctx {
    /// Core index.
    pub core: usize,
}

impl Ctx {
    /// A thread on `core`.
    pub fn on(core: usize) -> Ctx {
        Ctx { core }
    }
}

/// Attributes of an inode whose number is an `I`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attr<I> {
    /// Inode number.
    pub ino: I,
    /// Type.
    pub ftype: FileType,
    /// Permission bits.
    pub perm: u16,
    /// Hard links (a directory: 2 plus its subdirectories).
    pub links: u32,
    /// Size in bytes.
    pub size: u64,
    /// Data pages mapped.
    pub pages: u64,
}

/// What statfs(2) tells of a file system: its data space in 4 KiB pages
/// and its inodes (or metadata slots), in all and free, and the longest
/// name it stores. A file system that does not count inodes apart (it
/// allocates them from the data space) says 0 for both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatFs {
    /// Data pages of 4 KiB in all.
    pub pages: u64,
    /// Free data pages.
    pub free_pages: u64,
    /// Inodes in all.
    pub inodes: u64,
    /// Free inodes.
    pub free_inodes: u64,
    /// The longest name (bytes).
    pub name_max: u32,
}

/// The errno-like kind of a file system's error: what POSIX callers (and
/// the shared tests) tell apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// No such file or directory (ENOENT).
    NotFound,
    /// The name exists (EEXIST).
    Exists,
    /// A directory was expected (ENOTDIR).
    NotDir,
    /// A non-directory was expected (EISDIR).
    IsDir,
    /// The directory is not empty (ENOTEMPTY).
    NotEmpty,
    /// A bad argument (EINVAL, EPERM).
    Invalid,
    /// A name longer than the file system stores (ENAMETOOLONG).
    NameTooLong,
    /// The file would be too large (EFBIG).
    TooLarge,
    /// No space left (ENOSPC).
    NoSpace,
    /// Too many links to one inode (EMLINK).
    TooManyLinks,
    /// A POSIX refusal the shared tests do not tell apart (EACCES, EROFS,
    /// EOPNOTSUPP, ENODATA, ERANGE, E2BIG, ENODEV).
    Other,
    /// The medium failed (the persistent memory or the drive refused an
    /// access), or the image is not one this file system mounts or is
    /// damaged (EIO, EUCLEAN).
    Io,
}

/// What a file system's one error type gives the trait: it is made from
/// the shared [`Errno`] (the path helpers refuse with it too), and tells
/// its kind. A file system whose enum wraps an [`Errno`] also tells that
/// ([`FsError::errno`]); one with its own POSIX variants tells only the
/// kind.
pub trait FsError: std::error::Error + From<Errno> {
    /// The errno-like kind.
    fn kind(&self) -> ErrorKind;

    /// The shared POSIX refusal this error wraps, if it wraps one (by
    /// default none: the file system has its own variants).
    fn errno(&self) -> Option<&Errno> {
        None
    }
}

/// A mounted file system's primitive inode operations (absolute paths,
/// `/`-separated, are resolved by the provided `*_path` methods). Every
/// operation runs on the core `ctx` names.
#[allow(async_fn_in_trait)] // one single-threaded executor: no `Send` bound wanted
pub trait FileSystem {
    /// Inode numbers.
    type Ino: Copy + Debug + Eq;
    /// The file system's one error type.
    type Error: FsError;

    /// The root directory's inode number.
    fn root(&self) -> Self::Ino;
    /// The attributes of `ino`.
    async fn getattr(&self, ctx: Ctx, ino: Self::Ino) -> Result<Attr<Self::Ino>, Self::Error>;
    /// The attributes of entry `name` in `parent`.
    async fn lookup(&self, ctx: Ctx, parent: Self::Ino, name: &str) -> Result<Attr<Self::Ino>, Self::Error>;
    /// The inode of entry `name` in `parent` (what path resolution uses;
    /// by default [`FileSystem::lookup`]'s, a file system overrides it when
    /// it can find the entry without reading the inode).
    async fn lookup_ino(&self, ctx: Ctx, parent: Self::Ino, name: &str) -> Result<Self::Ino, Self::Error> {
        Ok(self.lookup(ctx, parent, name).await?.ino)
    }
    /// Creates file `name` in `parent` with permissions `perm`.
    async fn create(
        &self,
        ctx: Ctx,
        parent: Self::Ino,
        name: &str,
        perm: u16,
    ) -> Result<Attr<Self::Ino>, Self::Error>;
    /// Creates directory `name` in `parent` with permissions `perm`.
    async fn mkdir(
        &self,
        ctx: Ctx,
        parent: Self::Ino,
        name: &str,
        perm: u16,
    ) -> Result<Attr<Self::Ino>, Self::Error>;
    /// Links file `ino` as `name` in `parent`.
    async fn link(
        &self,
        ctx: Ctx,
        ino: Self::Ino,
        parent: Self::Ino,
        name: &str,
    ) -> Result<Attr<Self::Ino>, Self::Error>;
    /// Removes file entry `name` from `parent`.
    async fn unlink(&self, ctx: Ctx, parent: Self::Ino, name: &str) -> Result<(), Self::Error>;
    /// Removes the empty directory `name` from `parent`.
    async fn rmdir(&self, ctx: Ctx, parent: Self::Ino, name: &str) -> Result<(), Self::Error>;
    /// Renames `from`/`from_name` to `to`/`to_name`.
    async fn rename(
        &self,
        ctx: Ctx,
        from: Self::Ino,
        from_name: &str,
        to: Self::Ino,
        to_name: &str,
    ) -> Result<(), Self::Error>;
    /// Up to `len` bytes of file `ino` from `off`.
    async fn read(&self, ctx: Ctx, ino: Self::Ino, off: u64, len: usize) -> Result<Vec<u8>, Self::Error>;
    /// Writes `data` at `off` of file `ino`; the bytes written.
    async fn write(&self, ctx: Ctx, ino: Self::Ino, off: u64, data: &[u8]) -> Result<usize, Self::Error>;
    /// Sets the size of file `ino`.
    async fn truncate(&self, ctx: Ctx, ino: Self::Ino, size: u64) -> Result<(), Self::Error>;
    /// `fsync` of `ino`.
    async fn fsync(&self, ctx: Ctx, ino: Self::Ino) -> Result<(), Self::Error>;
    /// The entries of directory `ino` (without `.` and `..`), by name.
    async fn readdir(
        &self,
        ctx: Ctx,
        ino: Self::Ino,
    ) -> Result<Vec<(String, Self::Ino, FileType)>, Self::Error>;
    /// statfs(2): space and inodes in all and free.
    async fn statfs(&self, ctx: Ctx) -> Result<StatFs, Self::Error>;

    /// The inode at `path`.
    async fn resolve(&self, ctx: Ctx, path: &str) -> Result<Self::Ino, Self::Error> {
        let mut ino = self.root();
        for part in path.split('/').filter(|s| !s.is_empty()) {
            ino = self.lookup_ino(ctx, ino, part).await?;
        }
        Ok(ino)
    }

    /// The directory holding `path`'s last component, and that component.
    async fn resolve_parent<'p>(&self, ctx: Ctx, path: &'p str) -> Result<(Self::Ino, &'p str), Self::Error> {
        let trimmed = path.trim_end_matches('/');
        let (dir, name) = trimmed.rsplit_once('/').unwrap_or(("", trimmed));
        if name.is_empty() {
            return Err(Errno::Invalid("the path names the root").into());
        }
        Ok((self.resolve(ctx, dir).await?, name))
    }

    /// Creates the file at `path` (mode 0644).
    async fn create_path(&self, ctx: Ctx, path: &str) -> Result<Attr<Self::Ino>, Self::Error> {
        let (d, n) = self.resolve_parent(ctx, path).await?;
        self.create(ctx, d, n, 0o644).await
    }

    /// Creates the directory at `path` (mode 0755).
    async fn mkdir_path(&self, ctx: Ctx, path: &str) -> Result<Attr<Self::Ino>, Self::Error> {
        let (d, n) = self.resolve_parent(ctx, path).await?;
        self.mkdir(ctx, d, n, 0o755).await
    }

    /// Writes `data` at `off` of the file at `path`.
    async fn write_path(&self, ctx: Ctx, path: &str, off: u64, data: &[u8]) -> Result<usize, Self::Error> {
        let ino = self.resolve(ctx, path).await?;
        self.write(ctx, ino, off, data).await
    }

    /// The whole content of the file at `path`.
    async fn read_path(&self, ctx: Ctx, path: &str) -> Result<Vec<u8>, Self::Error> {
        let ino = self.resolve(ctx, path).await?;
        let size = self.getattr(ctx, ino).await?.size;
        self.read(ctx, ino, 0, size as usize).await
    }

    /// Removes the file at `path`.
    async fn unlink_path(&self, ctx: Ctx, path: &str) -> Result<(), Self::Error> {
        let (d, n) = self.resolve_parent(ctx, path).await?;
        self.unlink(ctx, d, n).await
    }

    /// Removes the empty directory at `path`.
    async fn rmdir_path(&self, ctx: Ctx, path: &str) -> Result<(), Self::Error> {
        let (d, n) = self.resolve_parent(ctx, path).await?;
        self.rmdir(ctx, d, n).await
    }

    /// Renames `from` to `to`.
    async fn rename_path(&self, ctx: Ctx, from: &str, to: &str) -> Result<(), Self::Error> {
        let (fd, fnm) = self.resolve_parent(ctx, from).await?;
        let (td, tnm) = self.resolve_parent(ctx, to).await?;
        self.rename(ctx, fd, fnm, td, tnm).await
    }

    /// Links the file at `from` as `to`.
    async fn link_path(&self, ctx: Ctx, from: &str, to: &str) -> Result<Attr<Self::Ino>, Self::Error> {
        let ino = self.resolve(ctx, from).await?;
        let (td, tnm) = self.resolve_parent(ctx, to).await?;
        self.link(ctx, ino, td, tnm).await
    }

    /// Sets the size of the file at `path`.
    async fn truncate_path(&self, ctx: Ctx, path: &str, size: u64) -> Result<(), Self::Error> {
        let ino = self.resolve(ctx, path).await?;
        self.truncate(ctx, ino, size).await
    }

    /// `fsync` of the file at `path`.
    async fn fsync_path(&self, ctx: Ctx, path: &str) -> Result<(), Self::Error> {
        let ino = self.resolve(ctx, path).await?;
        self.fsync(ctx, ino).await
    }

    /// The names in the directory at `path`.
    async fn readdir_path(
        &self,
        ctx: Ctx,
        path: &str,
    ) -> Result<Vec<(String, Self::Ino, FileType)>, Self::Error> {
        let ino = self.resolve(ctx, path).await?;
        self.readdir(ctx, ino).await
    }

    /// The tree, read through the file system (data loaded from its
    /// medium).
    async fn snapshot(&self, ctx: Ctx) -> Result<Tree, Self::Error> {
        let mut out = Tree::new();
        let mut todo = vec![(self.root(), String::new())];
        while let Some((dir, path)) = todo.pop() {
            for (name, ino, ftype) in self.readdir(ctx, dir).await? {
                let p = format!("{path}/{name}");
                let a = self.getattr(ctx, ino).await?;
                let data = match ftype {
                    FileType::File => self.read(ctx, ino, 0, a.size as usize).await?,
                    FileType::Dir => {
                        todo.push((ino, p.clone()));
                        Vec::new()
                    }
                    // No content the trait reads.
                    FileType::Symlink | FileType::Special => Vec::new(),
                };
                out.insert(
                    p,
                    Node {
                        ftype,
                        perm: a.perm,
                        links: a.links,
                        data,
                    },
                );
            }
        }
        Ok(out)
    }
}

/// A shared handle is the file system it shares (a file system whose
/// mount hands out an `Rc`, as MQFS's does).
impl<T: FileSystem> FileSystem for std::rc::Rc<T> {
    type Ino = T::Ino;
    type Error = T::Error;
    fn root(&self) -> T::Ino {
        (**self).root()
    }
    async fn getattr(&self, ctx: Ctx, ino: T::Ino) -> Result<Attr<T::Ino>, T::Error> {
        (**self).getattr(ctx, ino).await
    }
    async fn lookup(&self, ctx: Ctx, parent: T::Ino, name: &str) -> Result<Attr<T::Ino>, T::Error> {
        (**self).lookup(ctx, parent, name).await
    }
    async fn lookup_ino(&self, ctx: Ctx, parent: T::Ino, name: &str) -> Result<T::Ino, T::Error> {
        (**self).lookup_ino(ctx, parent, name).await
    }
    async fn create(
        &self,
        ctx: Ctx,
        parent: T::Ino,
        name: &str,
        perm: u16,
    ) -> Result<Attr<T::Ino>, T::Error> {
        (**self).create(ctx, parent, name, perm).await
    }
    async fn mkdir(&self, ctx: Ctx, parent: T::Ino, name: &str, perm: u16) -> Result<Attr<T::Ino>, T::Error> {
        (**self).mkdir(ctx, parent, name, perm).await
    }
    async fn link(
        &self,
        ctx: Ctx,
        ino: T::Ino,
        parent: T::Ino,
        name: &str,
    ) -> Result<Attr<T::Ino>, T::Error> {
        (**self).link(ctx, ino, parent, name).await
    }
    async fn unlink(&self, ctx: Ctx, parent: T::Ino, name: &str) -> Result<(), T::Error> {
        (**self).unlink(ctx, parent, name).await
    }
    async fn rmdir(&self, ctx: Ctx, parent: T::Ino, name: &str) -> Result<(), T::Error> {
        (**self).rmdir(ctx, parent, name).await
    }
    async fn rename(
        &self,
        ctx: Ctx,
        from: T::Ino,
        from_name: &str,
        to: T::Ino,
        to_name: &str,
    ) -> Result<(), T::Error> {
        (**self).rename(ctx, from, from_name, to, to_name).await
    }
    async fn read(&self, ctx: Ctx, ino: T::Ino, off: u64, len: usize) -> Result<Vec<u8>, T::Error> {
        (**self).read(ctx, ino, off, len).await
    }
    async fn write(&self, ctx: Ctx, ino: T::Ino, off: u64, data: &[u8]) -> Result<usize, T::Error> {
        (**self).write(ctx, ino, off, data).await
    }
    async fn truncate(&self, ctx: Ctx, ino: T::Ino, size: u64) -> Result<(), T::Error> {
        (**self).truncate(ctx, ino, size).await
    }
    async fn fsync(&self, ctx: Ctx, ino: T::Ino) -> Result<(), T::Error> {
        (**self).fsync(ctx, ino).await
    }
    async fn readdir(&self, ctx: Ctx, ino: T::Ino) -> Result<Vec<(String, T::Ino, FileType)>, T::Error> {
        (**self).readdir(ctx, ino).await
    }
    async fn statfs(&self, ctx: Ctx) -> Result<StatFs, T::Error> {
        (**self).statfs(ctx).await
    }
}

/// Implements [`FileSystem`] for `$fs` by delegating every primitive to
/// the inherent method of the same name (inherent methods win a path
/// lookup on the type), with `$ino` its inode numbers and `$err` its error;
/// a trailing `lookup_ino` delegates that one too. After each call the
/// file system's [`crate::Meter`] (its inherent `meter()`) charges the
/// call's CPU time: one system call and the DRAM work counted.
#[macro_export]
macro_rules! delegate_file_system {
    ($fs:ty, $ino:ty, $err:ty $(, $lookup_ino:ident)?) => {
        impl $crate::FileSystem for $fs {
            type Ino = $ino;
            type Error = $err;
            fn root(&self) -> $ino {
                <$fs>::root(self)
            }
            async fn getattr(&self, ctx: $crate::Ctx, ino: $ino) -> ::core::result::Result<$crate::Attr<$ino>, $err> {
                { let r = <$fs>::getattr(self, ctx, ino).await; <$fs>::meter(self).charge(ctx).await; r }
            }
            async fn lookup(&self, ctx: $crate::Ctx, parent: $ino, name: &str) -> ::core::result::Result<$crate::Attr<$ino>, $err> {
                { let r = <$fs>::lookup(self, ctx, parent, name).await; <$fs>::meter(self).charge(ctx).await; r }
            }
            $(
                async fn $lookup_ino(&self, ctx: $crate::Ctx, parent: $ino, name: &str) -> ::core::result::Result<$ino, $err> {
                    { let r = <$fs>::$lookup_ino(self, ctx, parent, name).await; <$fs>::meter(self).charge(ctx).await; r }
                }
            )?
            async fn create(&self, ctx: $crate::Ctx, parent: $ino, name: &str, perm: u16) -> ::core::result::Result<$crate::Attr<$ino>, $err> {
                { let r = <$fs>::create(self, ctx, parent, name, perm).await; <$fs>::meter(self).charge(ctx).await; r }
            }
            async fn mkdir(&self, ctx: $crate::Ctx, parent: $ino, name: &str, perm: u16) -> ::core::result::Result<$crate::Attr<$ino>, $err> {
                { let r = <$fs>::mkdir(self, ctx, parent, name, perm).await; <$fs>::meter(self).charge(ctx).await; r }
            }
            async fn link(&self, ctx: $crate::Ctx, ino: $ino, parent: $ino, name: &str) -> ::core::result::Result<$crate::Attr<$ino>, $err> {
                { let r = <$fs>::link(self, ctx, ino, parent, name).await; <$fs>::meter(self).charge(ctx).await; r }
            }
            async fn unlink(&self, ctx: $crate::Ctx, parent: $ino, name: &str) -> ::core::result::Result<(), $err> {
                { let r = <$fs>::unlink(self, ctx, parent, name).await; <$fs>::meter(self).charge(ctx).await; r }
            }
            async fn rmdir(&self, ctx: $crate::Ctx, parent: $ino, name: &str) -> ::core::result::Result<(), $err> {
                { let r = <$fs>::rmdir(self, ctx, parent, name).await; <$fs>::meter(self).charge(ctx).await; r }
            }
            async fn rename(&self, ctx: $crate::Ctx, from: $ino, from_name: &str, to: $ino, to_name: &str) -> ::core::result::Result<(), $err> {
                { let r = <$fs>::rename(self, ctx, from, from_name, to, to_name).await; <$fs>::meter(self).charge(ctx).await; r }
            }
            async fn read(&self, ctx: $crate::Ctx, ino: $ino, off: u64, len: usize) -> ::core::result::Result<Vec<u8>, $err> {
                { let r = <$fs>::read(self, ctx, ino, off, len).await; <$fs>::meter(self).charge(ctx).await; r }
            }
            async fn write(&self, ctx: $crate::Ctx, ino: $ino, off: u64, data: &[u8]) -> ::core::result::Result<usize, $err> {
                { let r = <$fs>::write(self, ctx, ino, off, data).await; <$fs>::meter(self).charge(ctx).await; r }
            }
            async fn truncate(&self, ctx: $crate::Ctx, ino: $ino, size: u64) -> ::core::result::Result<(), $err> {
                { let r = <$fs>::truncate(self, ctx, ino, size).await; <$fs>::meter(self).charge(ctx).await; r }
            }
            async fn fsync(&self, ctx: $crate::Ctx, ino: $ino) -> ::core::result::Result<(), $err> {
                { let r = <$fs>::fsync(self, ctx, ino).await; <$fs>::meter(self).charge(ctx).await; r }
            }
            async fn readdir(&self, ctx: $crate::Ctx, ino: $ino) -> ::core::result::Result<Vec<(String, $ino, $crate::FileType)>, $err> {
                { let r = <$fs>::readdir(self, ctx, ino).await; <$fs>::meter(self).charge(ctx).await; r }
            }
            async fn statfs(&self, ctx: $crate::Ctx) -> ::core::result::Result<$crate::StatFs, $err> {
                { let r = <$fs>::statfs(self, ctx).await; <$fs>::meter(self).charge(ctx).await; r }
            }
        }
    };
}
