//! The FUSE adapter: a mounted image served through `fuser`.
//!
//! fuser 0.16 calls the [`fuser::Filesystem`] methods from the one thread
//! that reads `/dev/fuse`; each method runs its file-system operation on
//! the simulated machine to completion ([`Rig::run`]) and replies. The
//! simulation is single-threaded and nothing else touches it, so requests
//! are served one at a time, in the order the kernel sends them.
//!
//! [`MqfsFuse`] owns the mounted file system; it is unmounted cleanly (the
//! file system's `unmount`, then the image files flushed) when the session
//! ends (`destroy`) or, if the session never started, when it is dropped.
//! The outcome goes to the [`Outcome`] cell the caller keeps. With a
//! [`Recorder`] (`mount --record`), every operation is handed to it and
//! the run is saved after the unmount (see [`crate::record`]).

pub mod attr;
mod cred;
mod ops;
mod recording;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::rc::Rc;

use ccnvme::BlockDevice;
use mqfs::layout::ROOT_INO;
use mqfs::{Ctx, FileType, Fs, FsError, Ino};
use pcie_sim::Counters;

use crate::error::CliError;
use crate::image::{LockedImage, PmrFile};
use crate::record::{At, Make, Recorded, Recorder, Req};
use crate::rig::Rig;
use crate::stats::Stats;
use attr::ORPHANS_NAME;

/// What the final unmount left: the figures, and the saved run if the
/// mount recorded one.
#[derive(Clone, Debug)]
pub struct Unmounted {
    /// The figures since the mount.
    pub stats: Stats,
    /// The saved run (`mount --record`).
    pub recorded: Option<Recorded>,
}

/// Where the adapter leaves the result of the final unmount, or why the
/// unmount (or saving the recorded run) failed.
pub type Outcome = Rc<RefCell<Option<Result<Unmounted, CliError>>>>;

/// A mounted image.
struct Mounted {
    fs: Rc<Fs>,
    dev: Rc<BlockDevice>,
    pmr: Rc<PmrFile>,
    /// Counters at the mount (figures are since then).
    since: Counters,
    /// Holds the image's lock until the files are flushed.
    image: LockedImage,
    /// Records the run (`mount --record`).
    rec: Option<Recorder>,
    /// The machine (dropped after the file system).
    rig: Rig,
}

/// The file system as FUSE sees it.
pub struct MqfsFuse {
    mounted: Option<Mounted>,
    outcome: Outcome,
    queues: usize,
    requests: u64,
    /// Open files per inode (a file unlinked while open becomes an orphan).
    open: BTreeMap<Ino, u32>,
    /// Orphans waiting for their last close.
    orphans: BTreeSet<Ino>,
    /// Directory listings taken at opendir, by handle.
    dirs: BTreeMap<u64, Vec<(String, u64, fuser::FileType)>>,
    /// Stats snapshots taken at open, by handle.
    snapshots: BTreeMap<u64, Vec<u8>>,
    next_fh: u64,
    /// How long the kernel may keep a name or attributes it learned (see
    /// [`MqfsFuse::check_every_walk`]).
    ttl: std::time::Duration,
}

impl std::fmt::Debug for MqfsFuse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MqfsFuse")
            .field("mounted", &self.mounted.is_some())
            .field("requests", &self.requests)
            .finish()
    }
}

/// The errno of an error outside the file system (the simulation stopped,
/// a host file failed).
const EIO: i32 = libc::EIO;

/// The errno a request answers for `e` (an error outside the file system
/// is logged and answered with EIO).
fn errno_of(e: CliError) -> i32 {
    match e {
        CliError::Fs(e) => e.errno(),
        other => {
            eprintln!("mqfs: {}", other.one_line());
            EIO
        }
    }
}

impl MqfsFuse {
    /// Takes a file system mounted on `rig` (over `image`'s files, PMR
    /// writes going through `pmr`), removes the orphans a crash left, and
    /// reports the final unmount into `outcome`; `rec` records the run.
    pub fn new(
        (image, rig, pmr): (LockedImage, Rig, Rc<PmrFile>),
        dev: Rc<BlockDevice>,
        fs: Rc<Fs>,
        rec: Option<Recorder>,
        outcome: Outcome,
    ) -> Result<MqfsFuse, CliError> {
        let queues = image.header.queues as usize;
        let since = rig.machine.counters();
        let mut me = MqfsFuse {
            mounted: Some(Mounted {
                fs,
                dev,
                pmr,
                since,
                image,
                rec,
                rig,
            }),
            outcome,
            queues,
            requests: 0,
            open: BTreeMap::new(),
            orphans: BTreeSet::new(),
            dirs: BTreeMap::new(),
            snapshots: BTreeMap::new(),
            next_fh: 1,
            ttl: ops::TTL,
        };
        me.remove_orphans()?;
        Ok(me)
    }

    /// The simulated thread of a request from process `pid`.
    fn ctx(&self, pid: u32) -> Ctx {
        Ctx::on(pid as usize % self.queues.max(1))
    }

    /// Runs a file-system operation, `req` on `ctx`'s core, to completion
    /// (handing it to the recorder, if any).
    fn run<T, Fut>(&mut self, ctx: Ctx, req: Req, op: impl FnOnce(Rc<Fs>) -> Fut) -> Result<T, CliError>
    where
        T: 'static,
        Fut: Future<Output = Result<T, FsError>> + 'static,
    {
        let m = self
            .mounted
            .as_mut()
            .ok_or_else(|| CliError::Fs(FsError::Unsupported("not mounted".into())))?;
        let machine = &m.rig.machine;
        let begun = m
            .rec
            .as_mut()
            .and_then(|r| r.begin(req, ctx.core, At::of(machine)));
        let r = m.rig.run_fs(op(m.fs.clone()));
        if let (Some(rec), Some(b)) = (m.rec.as_mut(), begun) {
            rec.end(b, At::of(machine), r.as_ref().err().map(CliError::one_line));
        }
        m.pmr.check()?;
        r
    }

    /// Runs a file-system operation for a request; `Err` is the errno.
    fn call<T, Fut>(&mut self, ctx: Ctx, req: Req, op: impl FnOnce(Rc<Fs>) -> Fut) -> Result<T, i32>
    where
        T: 'static,
        Fut: Future<Output = Result<T, FsError>> + 'static,
    {
        self.requests += 1;
        self.run(ctx, req, op).map_err(errno_of)
    }

    fn new_fh(&mut self) -> u64 {
        self.next_fh += 1;
        self.next_fh
    }

    /// The current figures.
    fn stats(&self) -> Option<Stats> {
        let m = self.mounted.as_ref()?;
        Some(Stats::read(&m.rig.machine, &m.since, self.requests))
    }

    /// The orphan directory's inode, made if `create`.
    fn orphan_dir(&mut self, create: bool) -> Result<Option<Ino>, CliError> {
        let ctx = Ctx::on(0);
        let found = self.run(ctx, Req::Query, move |fs| async move {
            match fs.lookup(ctx, ROOT_INO, ORPHANS_NAME).await {
                Ok(a) => Ok(Some(a)),
                Err(FsError::NotFound) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        let made = match found {
            Some(a) => Some((a, true)),
            None if create => {
                let req = Req::Make(Make::Dir, ROOT_INO, ORPHANS_NAME.into());
                let a = self.run(ctx, req, move |fs| async move {
                    fs.mkdir(ctx, ROOT_INO, ORPHANS_NAME, 0o700).await
                })?;
                Some((a, false))
            }
            None => None,
        };
        Ok(made.map(|(a, looked_up)| {
            self.learned(ROOT_INO, ORPHANS_NAME, &a, looked_up);
            a.ino
        }))
    }

    /// The FUSE attributes of `a` as a program sees them: a file unlinked
    /// while open (kept under the orphan directory until its last close)
    /// has no link left (`fstat` of an unlinked open file gives
    /// `st_nlink` 0, as on Linux: `vfs_unlink` drops the last link).
    fn attr_of(&self, a: &mqfs::Attr) -> fuser::FileAttr {
        let mut attr = attr::file_attr(a);
        if self.orphans.contains(&a.ino) {
            attr.nlink = 0;
        }
        attr
    }

    /// If `parent/name` is a file whose last link this removal would drop
    /// while it is open, moves it to the orphan directory instead and
    /// returns true.
    fn orphan_if_open(&mut self, ctx: Ctx, parent: Ino, name: &str) -> Result<bool, i32> {
        let n = name.to_string();
        let found = self.call(ctx, Req::Query, move |fs| async move {
            match fs.lookup(ctx, parent, &n).await {
                Ok(a) => Ok(Some(a)),
                Err(FsError::NotFound) => Ok(None),
                Err(e) => Err(e),
            }
        })?;
        let Some(a) = found else { return Ok(false) };
        self.learned(parent, name, &a, true);
        if a.ftype != FileType::File || a.links != 1 || !self.open.contains_key(&a.ino) {
            return Ok(false);
        }
        let dir = match self.orphan_dir(true) {
            Ok(Some(d)) => d,
            Ok(None) => return Err(EIO),
            Err(CliError::Fs(e)) => return Err(e.errno()),
            Err(_) => return Err(EIO),
        };
        let (n, ino) = (name.to_string(), a.ino);
        let req = Req::Rename(parent, n.clone(), dir, ino.to_string());
        self.call(ctx, req, move |fs| async move {
            fs.rename(ctx, parent, &n, dir, &ino.to_string()).await
        })?;
        self.orphans.insert(ino);
        Ok(true)
    }

    /// One close of `ino`; removes it if it was an orphan and this was its
    /// last open.
    fn closed(&mut self, ino: Ino) {
        let left = match self.open.get_mut(&ino) {
            Some(n) => {
                *n = n.saturating_sub(1);
                *n
            }
            None => 0,
        };
        if left > 0 {
            return;
        }
        self.open.remove(&ino);
        if self.orphans.remove(&ino) {
            let gone = self.orphan_dir(false).and_then(|dir| match dir {
                Some(dir) => self.run(
                    Ctx::on(0),
                    Req::Unlink(dir, ino.to_string()),
                    move |fs| async move { fs.unlink(Ctx::on(0), dir, &ino.to_string()).await },
                ),
                None => Ok(()),
            });
            if let Err(e) = gone {
                eprintln!("mqfs: removing orphan inode {ino}: {}", e.one_line());
            }
        }
    }

    /// Removes every orphan and the orphan directory (at mount: what a
    /// crash left; at unmount: files still open).
    fn remove_orphans(&mut self) -> Result<(), CliError> {
        let Some(dir) = self.orphan_dir(false)? else {
            return Ok(());
        };
        let ctx = Ctx::on(0);
        self.run(
            ctx,
            Req::Rmdir(ROOT_INO, ORPHANS_NAME.into()),
            move |fs| async move {
                for (name, _, _) in fs.readdir(ctx, dir).await? {
                    if name != "." && name != ".." {
                        fs.unlink(ctx, dir, &name).await?;
                    }
                }
                fs.rmdir(ctx, ROOT_INO, ORPHANS_NAME).await
            },
        )?;
        self.orphans.clear();
        Ok(())
    }

    /// Unmounts the file system and flushes the image files, once; the
    /// result goes to the outcome cell.
    fn shutdown(&mut self) {
        if self.mounted.is_none() {
            return;
        }
        if let Err(e) = self.remove_orphans() {
            eprintln!("mqfs: removing orphans at unmount: {}", e.one_line());
        }
        let requests = self.requests;
        let Some(mut m) = self.mounted.take() else { return };
        let fs = m.fs.clone();
        let machine = &m.rig.machine;
        let begun = m
            .rec
            .as_mut()
            .and_then(|r| r.begin(Req::Unmount, 0, At::of(machine)));
        let unmounted = m.rig.run_fs(async move { fs.unmount(Ctx::on(0)).await });
        if let (Some(rec), Some(b)) = (m.rec.as_mut(), begun) {
            rec.end(
                b,
                At::of(machine),
                unmounted.as_ref().err().map(CliError::one_line),
            );
        }
        let result = unmounted
            .and_then(|()| Ok(m.rig.ctrl.backend().sync()?))
            .and_then(|()| m.pmr.sync())
            .map(|()| Stats::read(&m.rig.machine, &m.since, requests));
        // The run is saved even if the unmount failed: its crash states are
        // still worth exploring.
        let recorded = m.rec.take().map(|r| r.finish(m.rig.machine.take_trace()));
        let result = match (result, recorded) {
            (Err(e), _) | (Ok(_), Some(Err(e))) => Err(e),
            (Ok(stats), recorded) => Ok(Unmounted {
                stats,
                recorded: recorded.and_then(Result::ok),
            }),
        };
        let Mounted {
            fs, dev, image, rig, ..
        } = m;
        drop((fs, dev));
        // The files are flushed: let the image go, then the machine.
        drop(image);
        drop(rig);
        *self.outcome.borrow_mut() = Some(result);
    }
}

impl Drop for MqfsFuse {
    fn drop(&mut self) {
        self.shutdown();
    }
}
