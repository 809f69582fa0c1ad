//! The namespace system calls. Each changes only the latest view in DRAM
//! and appends a diradd or dirrem to the directory's operation list
//! (paper L198-L212): no persistent-memory write on the critical path.

use fsapi::{Ctx, Errno, Meter, Work};

use crate::error::FsError;
use crate::fs::SoupFs;
use crate::layout::{name_hash, name_lines, Kind, NAME_MAX};
use crate::state::{Dentry, Ino, Inode, OpKind, State};

/// What `stat` returns ([`fsapi::Attr`] over SoupFS's inode numbers,
/// the inode's PM offsets): a directory's link count counts its names
/// only (no `.` or `..`), and its size is 0.
pub type Attr = fsapi::Attr<Ino>;

pub(crate) fn attr(st: &State, ino: Ino) -> Result<Attr, FsError> {
    let i = st.inode(ino)?;
    Ok(Attr {
        ino,
        ftype: i.kind,
        perm: i.perm,
        links: u32::try_from(i.nlink).unwrap_or(u32::MAX),
        size: i.size,
        pages: i.blocks.iter().filter(|&&b| b != 0).count() as u64,
    })
}

fn check_name(name: &str) -> Result<(), FsError> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(FsError::Fs(Errno::Invalid("bad name")));
    }
    if name.len() > NAME_MAX {
        return Err(FsError::Fs(Errno::NameTooLong));
    }
    Ok(())
}

/// `n` free lines, or none taken if there are not enough.
fn lines(st: &mut State, n: usize) -> Result<Vec<u64>, FsError> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        match st.alloc.line() {
            Ok(l) => out.push(l),
            Err(e) => {
                for l in out {
                    st.alloc.free_line(l);
                }
                return Err(e);
            }
        }
    }
    Ok(out)
}

/// The system call a namespace change belongs to: the meter its DRAM work
/// is counted on, and its time (ns).
#[derive(Clone, Copy)]
struct Call<'a> {
    meter: &'a Meter,
    now: u64,
}

/// A new dentry for `name` -> `ino` in `dir`: lines allocated in DRAM
/// only (the persister writes them), the latest view updated, a diradd
/// queued. Returns the diradd's seq.
fn add_entry(
    st: &mut State,
    call: Call<'_>,
    dir: Ino,
    name: &str,
    ino: Ino,
    replaces: Option<Dentry>,
    after: Vec<(Ino, u64)>,
) -> Result<u64, FsError> {
    let Call { meter, now } = call;
    let mut lines = lines(st, 1 + name_lines(name.len()))?;
    // The lines, the parent's entry and mtime, the inode's link count.
    meter.count(Work {
        inodes: 2,
        allocs: lines.len() as u64,
        dirents: 1,
    });
    let addr = lines.remove(0);
    let names = lines;
    let d = Dentry {
        addr,
        names,
        ino,
        name: name.to_string(),
        hash: name_hash(name),
    };
    let parent = st.inode_mut(dir)?;
    parent.entries.insert(name.to_string(), d.clone());
    parent.mtime = now;
    let seq = st.push_op(dir, OpKind::DirAdd { d, replaces }, after)?;
    let i = st.inode_mut(ino)?;
    i.nlink += 1;
    i.adds.push((dir, seq));
    Ok(seq)
}

/// Removes `name` from `dir`'s latest view and queues the dirrem after
/// `after` and, with `c3`, after every pending diradd of the same inode
/// (rule C3: never drop the old name of a live inode before its new one
/// is persisted).
fn remove_entry(
    st: &mut State,
    call: Call<'_>,
    dir: Ino,
    name: &str,
    mut after: Vec<(Ino, u64)>,
    c3: bool,
) -> Result<Dentry, FsError> {
    let Call { meter, now } = call;
    // The parent's entry and mtime, the inode's link count.
    meter.count(Work {
        inodes: 2,
        dirents: 1,
        ..Work::default()
    });
    let parent = st.inode_mut(dir)?;
    let d = parent.entries.remove(name).ok_or(FsError::Fs(Errno::NotFound))?;
    parent.mtime = now;
    let i = st.inode_mut(d.ino)?;
    i.nlink = i.nlink.saturating_sub(1);
    if c3 {
        after.extend(i.adds.iter().copied());
    }
    st.push_op(dir, OpKind::DirRem { d: d.clone() }, after)?;
    Ok(d)
}

impl SoupFs {
    fn call(&self, now: u64) -> Call<'_> {
        Call {
            meter: self.meter(),
            now,
        }
    }

    /// The attributes of `ino`.
    pub async fn getattr(&self, _ctx: Ctx, ino: Ino) -> Result<Attr, FsError> {
        attr(&*self.lock().await, ino)
    }

    /// The inode `name` names in `parent`.
    pub async fn lookup(&self, _ctx: Ctx, parent: Ino, name: &str) -> Result<Attr, FsError> {
        let st = self.lock().await;
        self.meter().count(Work::dirents(1));
        let ino = st.entry(parent, name)?.ino;
        attr(&st, ino)
    }

    /// The persistent memory's pages, and the free pages of the latest
    /// view (the free cache lines of pages partly used for inodes and
    /// entries are not counted); inodes come from that space (0 and 0).
    pub async fn statfs(&self, _ctx: Ctx) -> Result<fsapi::StatFs, FsError> {
        let (pages, _lines) = self.lock().await.alloc.free_space();
        Ok(fsapi::StatFs {
            pages: self.pmem().size() / crate::layout::PAGE,
            free_pages: pages as u64,
            inodes: 0,
            free_inodes: 0,
            name_max: crate::layout::NAME_MAX as u32,
        })
    }

    /// The entries of directory `ino`, by name.
    pub async fn readdir(&self, _ctx: Ctx, ino: Ino) -> Result<Vec<(String, Ino, Kind)>, FsError> {
        let st = self.lock().await;
        let d = st.dir(ino)?;
        self.meter().count(Work::dirents(d.entries.len() as u64));
        d.entries
            .iter()
            .map(|(n, e)| Ok((n.clone(), e.ino, st.inode(e.ino)?.kind)))
            .collect()
    }

    async fn make(&self, parent: Ino, name: &str, perm: u16, kind: Kind) -> Result<Attr, FsError> {
        check_name(name)?;
        let now = self.now_ns();
        let mut st = self.lock().await;
        self.meter().count(Work::dirents(1));
        if st.dir(parent)?.entries.contains_key(name) {
            return Err(FsError::Fs(Errno::Exists));
        }
        let ino = st.alloc.line()?;
        let root = match kind {
            Kind::Dir => st.alloc.page().inspect_err(|_| st.alloc.free_line(ino))?,
            // (`create` is the only other caller.)
            Kind::File | Kind::Symlink | Kind::Special => 0,
        };
        // The inode's line (and a directory's bucket page), the inode.
        self.meter().count(Work {
            inodes: 1,
            allocs: 1 + u64::from(root != 0),
            ..Work::default()
        });
        let mut inode = Inode::new(kind, perm & 0o7777, parent, root, now);
        inode.cons.root = root;
        st.inodes.insert(ino, inode);
        if let Err(e) = add_entry(&mut st, self.call(now), parent, name, ino, None, Vec::new()) {
            st.inodes.remove(&ino);
            st.alloc.free_line(ino);
            if root != 0 {
                st.alloc.free_page(root);
            }
            return Err(e);
        }
        attr(&st, ino)
    }

    /// Creates an empty file (Fig. 5: inode, name, dentry allocated; the
    /// diradd persists them before the dentry is published).
    pub async fn create(&self, _ctx: Ctx, parent: Ino, name: &str, perm: u16) -> Result<Attr, FsError> {
        self.make(parent, name, perm, Kind::File).await
    }

    /// Creates an empty directory (plus its bucket page, L135-L142).
    pub async fn mkdir(&self, _ctx: Ctx, parent: Ino, name: &str, perm: u16) -> Result<Attr, FsError> {
        self.make(parent, name, perm, Kind::Dir).await
    }

    /// Removes a file's name (Fig. 6).
    pub async fn unlink(&self, _ctx: Ctx, parent: Ino, name: &str) -> Result<(), FsError> {
        // `.` and `..` may not be removed (EINVAL, not ENOENT).
        check_name(name)?;
        let now = self.now_ns();
        let mut st = self.lock().await;
        self.meter().count(Work::dirents(1));
        let e = st.entry(parent, name)?;
        if st.inode(e.ino)?.kind == Kind::Dir {
            return Err(FsError::Fs(Errno::IsDir));
        }
        remove_entry(&mut st, self.call(now), parent, name, Vec::new(), true)?;
        Ok(())
    }

    /// Removes an empty directory: its dirrem follows every pending
    /// operation of the directory itself, so its bucket page is empty in
    /// the consistent view when it is freed.
    pub async fn rmdir(&self, _ctx: Ctx, parent: Ino, name: &str) -> Result<(), FsError> {
        check_name(name)?;
        let now = self.now_ns();
        let mut st = self.lock().await;
        self.meter().count(Work::dirents(1));
        let ino = st.entry(parent, name)?.ino;
        let d = st.dir(ino)?;
        if !d.entries.is_empty() {
            return Err(FsError::Fs(Errno::NotEmpty));
        }
        let after = d.ops.back().map(|o| vec![(ino, o.seq)]).unwrap_or_default();
        remove_entry(&mut st, self.call(now), parent, name, after, true)?;
        Ok(())
    }

    /// A new name for file `ino`.
    pub async fn link(&self, _ctx: Ctx, ino: Ino, newparent: Ino, newname: &str) -> Result<Attr, FsError> {
        check_name(newname)?;
        let now = self.now_ns();
        let mut st = self.lock().await;
        if st.inode(ino)?.kind == Kind::Dir {
            return Err(FsError::Fs(Errno::Invalid("hard link to a directory")));
        }
        self.meter().count(Work::dirents(1));
        if st.dir(newparent)?.entries.contains_key(newname) {
            return Err(FsError::Fs(Errno::Exists));
        }
        add_entry(&mut st, self.call(now), newparent, newname, ino, None, Vec::new())?;
        st.inode_mut(ino)?.parent = newparent;
        attr(&st, ino)
    }

    /// Renames `parent/name` to `newparent/newname`, replacing a file (or
    /// an empty directory) of that name: a diradd in the destination
    /// (which swaps the old dentry out with one pointer) and a dirrem in
    /// the source that follows it (L203-L212).
    pub async fn rename(
        &self,
        _ctx: Ctx,
        parent: Ino,
        name: &str,
        newparent: Ino,
        newname: &str,
    ) -> Result<(), FsError> {
        check_name(name)?;
        check_name(newname)?;
        let now = self.now_ns();
        let mut st = self.lock().await;
        self.meter().count(Work::dirents(2));
        let ino = st.entry(parent, name)?.ino;
        let kind = st.inode(ino)?.kind;
        let target = st.dir(newparent)?.entries.get(newname).cloned();
        if kind == Kind::Dir {
            let mut a = newparent;
            loop {
                if a == ino {
                    return Err(FsError::Fs(Errno::Invalid("a directory moved into itself")));
                }
                if a == st.root {
                    break;
                }
                a = st.inode(a)?.parent;
            }
        }
        let mut after = Vec::new();
        if let Some(t) = &target {
            if t.ino == ino {
                return Ok(());
            }
            let ti = st.inode(t.ino)?;
            match (kind, ti.kind) {
                (Kind::Dir, Kind::File) => return Err(FsError::Fs(Errno::NotDir)),
                (Kind::File, Kind::Dir) => return Err(FsError::Fs(Errno::IsDir)),
                _ => {}
            }
            if !ti.entries.is_empty() {
                return Err(FsError::Fs(Errno::NotEmpty));
            }
            if let Some(o) = ti.ops.back() {
                after.push((t.ino, o.seq));
            }
            after.extend(ti.adds.iter().copied());
        }
        let seq = add_entry(
            &mut st,
            self.call(now),
            newparent,
            newname,
            ino,
            target.clone(),
            after,
        )?;
        if let Some(t) = &target {
            let ti = st.inode_mut(t.ino)?;
            ti.nlink = ti.nlink.saturating_sub(1);
        }
        if self.inner.faults.rename_remove_first {
            remove_entry(&mut st, self.call(now), parent, name, Vec::new(), false)?;
        } else {
            remove_entry(
                &mut st,
                self.call(now),
                parent,
                name,
                vec![(newparent, seq)],
                true,
            )?;
        }
        st.inode_mut(ino)?.parent = newparent;
        Ok(())
    }

    /// Changes the permission bits (an attrchg).
    pub async fn chmod(&self, _ctx: Ctx, ino: Ino, perm: u16) -> Result<Attr, FsError> {
        let now = self.now_ns();
        let mut st = self.lock().await;
        self.meter().count(Work {
            inodes: 1,
            ..Work::default()
        });
        let i = st.inode_mut(ino)?;
        i.perm = perm & 0o7777;
        i.mtime = now;
        st.push_op(ino, OpKind::AttrChg, Vec::new())?;
        attr(&st, ino)
    }
}
