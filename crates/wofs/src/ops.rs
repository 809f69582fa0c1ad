//! The namespace operations: create, mkdir, link, unlink, rmdir, rename.
//! Each checks its arguments against the PTL, writes one package, and,
//! once the package is persistent, updates the PTL and reclaims what the
//! package superseded or cancelled.

use crate::error::{Result, WofsError};
use crate::fs::{Attr, Ctx, Wofs};
use crate::package::{check_name, Body, Dentry, FileType, Ino};
use crate::ptl::{Entry, Inode};
use fsapi::{Errno, Work};

impl Wofs {
    /// Creates regular file `name` in `parent`.
    pub async fn create(&self, ctx: Ctx, parent: Ino, name: &str, perm: u16) -> Result<Attr> {
        self.make(ctx, parent, name, perm, FileType::File).await
    }

    /// Creates directory `name` in `parent`.
    pub async fn mkdir(&self, ctx: Ctx, parent: Ino, name: &str, perm: u16) -> Result<Attr> {
        self.make(ctx, parent, name, perm, FileType::Dir).await
    }

    async fn make(&self, ctx: Ctx, parent: Ino, name: &str, perm: u16, ftype: FileType) -> Result<Attr> {
        let _g = self.lock().await;
        let core = self.core(ctx)?;
        check_name(name).map_err(Errno::Invalid)?;
        let ino = {
            let mut p = self.ptl();
            if p.dir(parent)?.contains_key(name) {
                return Err(WofsError::Fs(Errno::Exists));
            }
            let ino = p.next_ino;
            p.next_ino += 1;
            p.count(Work {
                allocs: 1,
                ..Work::default()
            });
            ino
        };
        let d = Dentry {
            ino,
            parent,
            ftype,
            perm: perm & 0o7777,
            name: name.to_string(),
        };
        let pkg = self.commit(&core, Body::Create(d)).await?;
        {
            let mut p = self.ptl();
            p.inodes.insert(ino, Inode::new(ftype, perm & 0o7777));
            p.count(Work {
                inodes: 1,
                ..Work::default()
            });
            if ftype == FileType::Dir {
                p.dirs.insert(ino, Default::default());
            }
            p.add_entry(parent, name, Entry { ino, pkg });
        }
        self.getattr(ctx, ino).await
    }

    /// Adds entry `name` in `parent` for the existing file `ino`.
    pub async fn link(&self, ctx: Ctx, ino: Ino, parent: Ino, name: &str) -> Result<Attr> {
        let _g = self.lock().await;
        let core = self.core(ctx)?;
        check_name(name).map_err(Errno::Invalid)?;
        let d = {
            let p = self.ptl_ref();
            let i = p.inode(ino)?;
            if i.ftype == FileType::Dir {
                return Err(WofsError::Fs(Errno::Invalid("hard link to a directory")));
            }
            if p.dir(parent)?.contains_key(name) {
                return Err(WofsError::Fs(Errno::Exists));
            }
            Dentry {
                ino,
                parent,
                ftype: i.ftype,
                perm: i.perm,
                name: name.to_string(),
            }
        };
        let pkg = self.commit(&core, Body::Link(d)).await?;
        self.ptl().add_entry(parent, name, Entry { ino, pkg });
        self.getattr(ctx, ino).await
    }

    /// Removes the entry `name` (not a directory) from `parent`.
    pub async fn unlink(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<()> {
        self.remove(ctx, parent, name, FileType::File).await
    }

    /// Removes the empty directory `name` from `parent`.
    pub async fn rmdir(&self, ctx: Ctx, parent: Ino, name: &str) -> Result<()> {
        self.remove(ctx, parent, name, FileType::Dir).await
    }

    async fn remove(&self, ctx: Ctx, parent: Ino, name: &str, want: FileType) -> Result<()> {
        let _g = self.lock().await;
        let core = self.core(ctx)?;
        let e = {
            let p = self.ptl_ref();
            let e = p.entry(parent, name)?;
            let ftype = p.inode(e.ino)?.ftype;
            match (want, ftype) {
                (FileType::File, FileType::Dir) => return Err(WofsError::Fs(Errno::IsDir)),
                (FileType::Dir, FileType::File) => return Err(WofsError::Fs(Errno::NotDir)),
                (FileType::Dir, FileType::Dir) if !p.dir(e.ino)?.is_empty() => {
                    return Err(WofsError::Fs(Errno::NotEmpty))
                }
                _ => {}
            }
            e
        };
        let pkg = self
            .commit(
                &core,
                Body::Unlink {
                    ino: e.ino,
                    cancels: e.pkg,
                },
            )
            .await?;
        let mut p = self.ptl();
        p.cancel_entry(parent, name, pkg.slot);
        // The unlink package has no role but cancelling: kept only while
        // the entry package it cancels is readable.
        p.space.retire(pkg.slot);
        Ok(())
    }

    /// Renames `from_parent/from` to `to_parent/to`, replacing a file or
    /// an empty directory there: one package holds the new entry and the
    /// cancellation of the old one (and of the replaced one).
    pub async fn rename(
        &self,
        ctx: Ctx,
        from_parent: Ino,
        from: &str,
        to_parent: Ino,
        to: &str,
    ) -> Result<()> {
        let _g = self.lock().await;
        let core = self.core(ctx)?;
        check_name(to).map_err(Errno::Invalid)?;
        let (src, dst, d) = {
            let p = self.ptl_ref();
            let src = p.entry(from_parent, from)?;
            let si = p.inode(src.ino)?;
            let dst = match p.dir(to_parent)?.get(to).copied() {
                None => None,
                Some(d) if d.ino == src.ino => return Ok(()),
                Some(d) => {
                    match (si.ftype, p.inode(d.ino)?.ftype) {
                        (FileType::Dir, FileType::File) => return Err(WofsError::Fs(Errno::NotDir)),
                        (FileType::File, FileType::Dir) => return Err(WofsError::Fs(Errno::IsDir)),
                        (FileType::Dir, FileType::Dir) if !p.dir(d.ino)?.is_empty() => {
                            return Err(WofsError::Fs(Errno::NotEmpty))
                        }
                        _ => {}
                    }
                    Some(d)
                }
            };
            if si.ftype == FileType::Dir && p.is_under(to_parent, src.ino) {
                return Err(WofsError::Fs(Errno::Invalid("rename of a directory into itself")));
            }
            let d = Dentry {
                ino: src.ino,
                parent: to_parent,
                ftype: si.ftype,
                perm: si.perm,
                name: to.to_string(),
            };
            (src, dst, d)
        };
        let mut cancels = vec![src.pkg];
        cancels.extend(dst.map(|d| d.pkg));
        let pkg = self.commit(&core, Body::Rename { dentry: d, cancels }).await?;
        let mut p = self.ptl();
        if dst.is_some() {
            p.cancel_entry(to_parent, to, pkg.slot);
        }
        // Add the new entry before cancelling the old so the inode keeps a
        // link throughout.
        p.add_entry(to_parent, to, Entry { ino: src.ino, pkg });
        p.cancel_entry(from_parent, from, pkg.slot);
        Ok(())
    }
}
