//! Path helpers for tests and tools: resolve "/a/b/c" and act on it.

use crate::error::FsError;
use crate::fs::{Ctx, Fs, Ino};
use crate::layout::{FileType, ROOT_INO};
use crate::ops::Attr;

/// Splits a path into its parent directory path and last name.
fn split(path: &str) -> Result<(&str, &str), FsError> {
    let p = path.trim_end_matches('/');
    match p.rfind('/') {
        Some(i) if !p[i + 1..].is_empty() => Ok((&p[..i], &p[i + 1..])),
        _ => Err(FsError::Invalid(format!("no name in {path:?}"))),
    }
}

impl Fs {
    /// The inode of an absolute path.
    pub async fn resolve(&self, ctx: Ctx, path: &str) -> Result<Ino, FsError> {
        if !path.starts_with('/') {
            return Err(FsError::Invalid(format!("not absolute: {path:?}")));
        }
        let mut ino = ROOT_INO;
        for name in path.split('/').filter(|s| !s.is_empty()) {
            let a = self.lookup(ctx, ino, name).await?;
            if a.ftype != FileType::Dir && !path.ends_with(name) {
                return Err(FsError::NotDir);
            }
            ino = a.ino;
        }
        Ok(ino)
    }

    /// Resolves the parent directory of `path` and returns it with the name.
    pub async fn resolve_parent<'p>(&self, ctx: Ctx, path: &'p str) -> Result<(Ino, &'p str), FsError> {
        let (dir, name) = split(path)?;
        let parent = if dir.is_empty() {
            ROOT_INO
        } else {
            self.resolve(ctx, dir).await?
        };
        Ok((parent, name))
    }

    /// Creates a regular file at `path`.
    pub async fn create_path(&self, ctx: Ctx, path: &str) -> Result<Attr, FsError> {
        let (p, n) = self.resolve_parent(ctx, path).await?;
        self.create(ctx, p, n, 0o644).await
    }

    /// Creates a directory at `path`.
    pub async fn mkdir_path(&self, ctx: Ctx, path: &str) -> Result<Attr, FsError> {
        let (p, n) = self.resolve_parent(ctx, path).await?;
        self.mkdir(ctx, p, n, 0o755).await
    }

    /// Writes `data` at offset `off` of the file at `path`.
    pub async fn write_path(&self, ctx: Ctx, path: &str, off: u64, data: &[u8]) -> Result<usize, FsError> {
        let ino = self.resolve(ctx, path).await?;
        self.write(ctx, ino, off, data).await
    }

    /// Reads the whole file at `path`.
    pub async fn read_path(&self, ctx: Ctx, path: &str) -> Result<Vec<u8>, FsError> {
        let ino = self.resolve(ctx, path).await?;
        let size = self.getattr(ctx, ino).await?.size;
        self.read(ctx, ino, 0, size as usize).await
    }

    /// Removes the file at `path`.
    pub async fn unlink_path(&self, ctx: Ctx, path: &str) -> Result<(), FsError> {
        let (p, n) = self.resolve_parent(ctx, path).await?;
        self.unlink(ctx, p, n).await
    }

    /// Removes the empty directory at `path`.
    pub async fn rmdir_path(&self, ctx: Ctx, path: &str) -> Result<(), FsError> {
        let (p, n) = self.resolve_parent(ctx, path).await?;
        self.rmdir(ctx, p, n).await
    }

    /// Renames `from` to `to`.
    pub async fn rename_path(&self, ctx: Ctx, from: &str, to: &str) -> Result<(), FsError> {
        let (p1, n1) = self.resolve_parent(ctx, from).await?;
        let (p2, n2) = self.resolve_parent(ctx, to).await?;
        self.rename(ctx, p1, n1, p2, n2).await
    }

    /// Links `to` to the file at `from`.
    pub async fn link_path(&self, ctx: Ctx, from: &str, to: &str) -> Result<Attr, FsError> {
        let ino = self.resolve(ctx, from).await?;
        let (p, n) = self.resolve_parent(ctx, to).await?;
        self.link(ctx, ino, p, n).await
    }

    /// fsync of the file or directory at `path`.
    pub async fn fsync_path(&self, ctx: Ctx, path: &str) -> Result<(), FsError> {
        let ino = self.resolve(ctx, path).await?;
        self.fsync(ctx, ino).await
    }
}
