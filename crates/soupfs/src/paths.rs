//! Path helpers over the inode-based calls (absolute paths, `/`-separated).

use pcie_sim::Core;

use crate::error::FsError;
use crate::fs::SoupFs;
use crate::ops::Attr;
use crate::state::Ino;

impl SoupFs {
    /// The inode at `path`.
    pub async fn resolve(&self, core: &Core, path: &str) -> Result<Ino, FsError> {
        let mut at = self.root().await;
        for part in path.split('/').filter(|p| !p.is_empty()) {
            at = self.lookup(core, at, part).await?.ino;
        }
        Ok(at)
    }

    /// The parent directory of `path` and the last component.
    pub async fn resolve_parent<'p>(&self, core: &Core, path: &'p str) -> Result<(Ino, &'p str), FsError> {
        let trimmed = path.trim_end_matches('/');
        let (dir, name) = trimmed.rsplit_once('/').unwrap_or(("", trimmed));
        if name.is_empty() {
            return Err(FsError::Invalid("no name in path"));
        }
        Ok((self.resolve(core, dir).await?, name))
    }

    /// `create` by path (mode 0644).
    pub async fn create_path(&self, core: &Core, path: &str) -> Result<Attr, FsError> {
        let (dir, name) = self.resolve_parent(core, path).await?;
        self.create(core, dir, name, 0o644).await
    }

    /// `mkdir` by path (mode 0755).
    pub async fn mkdir_path(&self, core: &Core, path: &str) -> Result<Attr, FsError> {
        let (dir, name) = self.resolve_parent(core, path).await?;
        self.mkdir(core, dir, name, 0o755).await
    }

    /// `write` by path.
    pub async fn write_path(&self, core: &Core, path: &str, off: u64, data: &[u8]) -> Result<usize, FsError> {
        let ino = self.resolve(core, path).await?;
        self.write(core, ino, off, data).await
    }

    /// The whole file at `path`.
    pub async fn read_path(&self, core: &Core, path: &str) -> Result<Vec<u8>, FsError> {
        let ino = self.resolve(core, path).await?;
        let size = self.getattr(core, ino).await?.size;
        self.read(core, ino, 0, size as usize).await
    }

    /// `unlink` by path.
    pub async fn unlink_path(&self, core: &Core, path: &str) -> Result<(), FsError> {
        let (dir, name) = self.resolve_parent(core, path).await?;
        self.unlink(core, dir, name).await
    }

    /// `rmdir` by path.
    pub async fn rmdir_path(&self, core: &Core, path: &str) -> Result<(), FsError> {
        let (dir, name) = self.resolve_parent(core, path).await?;
        self.rmdir(core, dir, name).await
    }

    /// `rename` by paths.
    pub async fn rename_path(&self, core: &Core, from: &str, to: &str) -> Result<(), FsError> {
        let (sd, sn) = self.resolve_parent(core, from).await?;
        let (dd, dn) = self.resolve_parent(core, to).await?;
        self.rename(core, sd, sn, dd, dn).await
    }

    /// `link` by paths.
    pub async fn link_path(&self, core: &Core, from: &str, to: &str) -> Result<Attr, FsError> {
        let ino = self.resolve(core, from).await?;
        let (dd, dn) = self.resolve_parent(core, to).await?;
        self.link(core, ino, dd, dn).await
    }

    /// `truncate` by path.
    pub async fn truncate_path(&self, core: &Core, path: &str, size: u64) -> Result<(), FsError> {
        let ino = self.resolve(core, path).await?;
        self.truncate(core, ino, size).await
    }

    /// `fsync` by path.
    pub async fn fsync_path(&self, core: &Core, path: &str) -> Result<(), FsError> {
        let ino = self.resolve(core, path).await?;
        self.fsync(core, ino).await
    }
}
