//! Path helpers over the inode operations (absolute paths, `/`-separated).

use crate::error::{PmfsError, Result};
use crate::fs::{Attr, Ctx, Pmfs};
use crate::layout::{FileType, Ino, ROOT};

impl Pmfs {
    /// The inode at `path`.
    pub async fn resolve(&self, ctx: Ctx, path: &str) -> Result<Ino> {
        let core = self.core(ctx)?;
        let tx = self.tx(&core);
        let mut ino = ROOT;
        for part in path.split('/').filter(|s| !s.is_empty()) {
            ino = self.find(&tx, ino, part).await?.1;
        }
        Ok(ino)
    }

    /// The directory holding `path`'s last component, and that component.
    pub async fn resolve_parent<'p>(&self, ctx: Ctx, path: &'p str) -> Result<(Ino, &'p str)> {
        let trimmed = path.trim_end_matches('/');
        let (dir, name) = trimmed.rsplit_once('/').unwrap_or(("", trimmed));
        if name.is_empty() {
            return Err(PmfsError::Invalid("the path names the root"));
        }
        Ok((self.resolve(ctx, dir).await?, name))
    }

    /// Creates the file at `path` (mode 0644).
    pub async fn create_path(&self, ctx: Ctx, path: &str) -> Result<Attr> {
        let (d, n) = self.resolve_parent(ctx, path).await?;
        self.create(ctx, d, n, 0o644).await
    }

    /// Creates the directory at `path` (mode 0755).
    pub async fn mkdir_path(&self, ctx: Ctx, path: &str) -> Result<Attr> {
        let (d, n) = self.resolve_parent(ctx, path).await?;
        self.mkdir(ctx, d, n, 0o755).await
    }

    /// Writes `data` at `off` of the file at `path`.
    pub async fn write_path(&self, ctx: Ctx, path: &str, off: u64, data: &[u8]) -> Result<usize> {
        let ino = self.resolve(ctx, path).await?;
        self.write(ctx, ino, off, data).await
    }

    /// The whole content of the file at `path`.
    pub async fn read_path(&self, ctx: Ctx, path: &str) -> Result<Vec<u8>> {
        let ino = self.resolve(ctx, path).await?;
        let size = self.getattr(ctx, ino).await?.size;
        self.read(ctx, ino, 0, size as usize).await
    }

    /// Removes the file at `path`.
    pub async fn unlink_path(&self, ctx: Ctx, path: &str) -> Result<()> {
        let (d, n) = self.resolve_parent(ctx, path).await?;
        self.unlink(ctx, d, n).await
    }

    /// Removes the empty directory at `path`.
    pub async fn rmdir_path(&self, ctx: Ctx, path: &str) -> Result<()> {
        let (d, n) = self.resolve_parent(ctx, path).await?;
        self.rmdir(ctx, d, n).await
    }

    /// Renames `from` to `to`.
    pub async fn rename_path(&self, ctx: Ctx, from: &str, to: &str) -> Result<()> {
        let (fd, fnm) = self.resolve_parent(ctx, from).await?;
        let (td, tnm) = self.resolve_parent(ctx, to).await?;
        self.rename(ctx, fd, fnm, td, tnm).await
    }

    /// Links the file at `from` as `to`.
    pub async fn link_path(&self, ctx: Ctx, from: &str, to: &str) -> Result<Attr> {
        let ino = self.resolve(ctx, from).await?;
        let (td, tnm) = self.resolve_parent(ctx, to).await?;
        self.link(ctx, ino, td, tnm).await
    }

    /// Sets the size of the file at `path`.
    pub async fn truncate_path(&self, ctx: Ctx, path: &str, size: u64) -> Result<()> {
        let ino = self.resolve(ctx, path).await?;
        self.truncate(ctx, ino, size).await
    }

    /// `fsync` of the file at `path` (a no-op that checks it exists).
    pub async fn fsync_path(&self, ctx: Ctx, path: &str) -> Result<()> {
        let ino = self.resolve(ctx, path).await?;
        self.fsync(ctx, ino).await
    }

    /// The names in the directory at `path`.
    pub async fn readdir_path(&self, ctx: Ctx, path: &str) -> Result<Vec<(String, Ino, FileType)>> {
        let ino = self.resolve(ctx, path).await?;
        self.readdir(ctx, ino).await
    }
}
