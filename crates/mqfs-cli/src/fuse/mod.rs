//! The FUSE adapter: a mounted image served through `fuser`.
//!
//! fuser 0.16 calls the [`fuser::Filesystem`] methods from the one thread
//! that reads `/dev/fuse`; each method runs its file-system operation on
//! the simulated machine to completion ([`Rig::run`]) and replies. The
//! simulation is single-threaded and nothing else touches it, so requests
//! are served one at a time, in the order the kernel sends them.
//!
//! [`MqfsFuse`] owns the mounted file system, any that is [`Served`] (MQFS
//! itself, or one on persistent memory through `crate::pm::PmServed`);
//! it is unmounted cleanly (the file system's `unmount`, then the image
//! files flushed) when the session ends (`destroy`) or, if the session
//! never started, when it is dropped.
//! The outcome goes to the [`Outcome`] cell the caller keeps. With a
//! [`Recorder`] (`mount --record`), every operation is handed to it and
//! the run is saved after the unmount (see [`crate::record`]).

pub mod attr;
mod cred;
mod ops;
mod recording;
mod served;

pub use served::Served;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::rc::Rc;

use ccnvme::BlockDevice;
use mqfs::{Ctx, Fs, FsError, Ino};

use crate::error::CliError;
use crate::image::{LockedImage, WriteThrough};
use crate::record::{At, Recorded, Recorder, Req};
use crate::rig::Rig;
use crate::stats::{Since, Stats};

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
struct Mounted<S> {
    fs: Rc<S>,
    /// The block device under MQFS (none on persistent memory).
    dev: Option<Rc<BlockDevice>>,
    /// The file the PMR, or the persistent memory, writes through to.
    through: Rc<WriteThrough>,
    /// Counters at the mount (figures are since then).
    since: Since,
    /// Holds the image's lock until the files are flushed.
    image: LockedImage,
    /// Records the run (`mount --record`).
    rec: Option<Recorder>,
    /// The machine (dropped after the file system).
    rig: Rig,
}

/// The file system as FUSE sees it.
pub struct MqfsFuse<S: Served = Fs> {
    mounted: Option<Mounted<S>>,
    outcome: Outcome,
    queues: usize,
    requests: u64,
    /// Regular files opened in the file system, and how many times (a
    /// file unlinked while open lives on mqfs's orphan list until its
    /// last release, [`mqfs::orphan`]).
    open: BTreeMap<Ino, u32>,
    /// Directory listings taken at opendir, by handle.
    dirs: BTreeMap<u64, Vec<(String, u64, fuser::FileType)>>,
    /// Stats snapshots taken at open, by handle.
    snapshots: BTreeMap<u64, Vec<u8>>,
    next_fh: u64,
    /// How long the kernel may keep a name or attributes it learned (see
    /// [`MqfsFuse::check_every_walk`]).
    ttl: std::time::Duration,
}

impl<S: Served> std::fmt::Debug for MqfsFuse<S> {
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

impl<S: Served> MqfsFuse<S> {
    /// Takes a file system mounted on `rig` (over `image`'s files, the
    /// PMR's or the persistent memory's writes going through `through`;
    /// the mount freed the orphans a crash left), on block device `dev`
    /// (MQFS), and reports the final unmount into `outcome`; `rec` records
    /// the run.
    pub fn new(
        (image, rig, through): (LockedImage, Rig, Rc<WriteThrough>),
        dev: Option<Rc<BlockDevice>>,
        fs: Rc<S>,
        rec: Option<Recorder>,
        outcome: Outcome,
    ) -> Result<MqfsFuse<S>, CliError> {
        let queues = image.header.queues as usize;
        let since = Since::now(&rig);
        Ok(MqfsFuse {
            mounted: Some(Mounted {
                fs,
                dev,
                through,
                since,
                image,
                rec,
                rig,
            }),
            outcome,
            queues,
            requests: 0,
            open: BTreeMap::new(),
            dirs: BTreeMap::new(),
            snapshots: BTreeMap::new(),
            next_fh: 1,
            ttl: ops::TTL,
        })
    }

    /// Simulated cores (hardware queues on a drive).
    pub fn queues(&self) -> usize {
        self.queues
    }

    /// The simulated thread of a request from process `pid`.
    fn ctx(&self, pid: u32) -> Ctx {
        Ctx::on(pid as usize % self.queues.max(1))
    }

    /// Runs a file-system operation, `req` on `ctx`'s core, to completion
    /// (handing it to the recorder, if any).
    fn run<T, Fut>(&mut self, ctx: Ctx, req: Req, op: impl FnOnce(Rc<S>) -> Fut) -> Result<T, CliError>
    where
        T: 'static,
        Fut: Future<Output = Result<T, FsError>> + 'static,
    {
        let m = self
            .mounted
            .as_mut()
            .ok_or_else(|| CliError::Fs(FsError::Unsupported("not mounted".into())))?;
        // The clock runs with the host's while the simulation idles.
        m.fs.clock_at_least(crate::rig::host_time_ns());
        let machine = &m.rig.machine;
        let begun = m
            .rec
            .as_mut()
            .and_then(|r| r.begin(req, ctx.core, At::of(machine)));
        let r = m.rig.run_fs(op(m.fs.clone()));
        if let (Some(rec), Some(b)) = (m.rec.as_mut(), begun) {
            rec.end(b, At::of(machine), r.as_ref().err().map(CliError::one_line));
        }
        m.through.check()?;
        r
    }

    /// Runs a file-system operation for a request; `Err` is the errno.
    fn call<T, Fut>(&mut self, ctx: Ctx, req: Req, op: impl FnOnce(Rc<S>) -> Fut) -> Result<T, i32>
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
        Some(Stats::read(&m.rig, &m.since, self.requests))
    }

    /// One more open file description of `ino`. A regular file is opened
    /// in the file system too ([`Served::open`]; MQFS's `Fs::open`), so that an unlink or a rename
    /// over it while open keeps it alive on mqfs's orphan list with no
    /// link (`fstat` gives `st_nlink` 0, as on Linux: `vfs_unlink` drops
    /// the last link) until its last release (unlink(2)); other types need
    /// nothing kept.
    fn opened(&mut self, ctx: Ctx, ino: Ino) -> Result<(), i32> {
        let is_file = self.call(ctx, Req::Query, move |fs| async move {
            match fs.open(ctx, ino).await {
                Ok(()) => Ok(true),
                Err(FsError::IsDir | FsError::Invalid(_)) => Ok(false),
                Err(e) => Err(e),
            }
        })?;
        if is_file {
            *self.open.entry(ino).or_insert(0) += 1;
        }
        Ok(())
    }

    /// One release of `ino`: the file system frees a file with no link
    /// left at its last ([`Served::release`]).
    fn closed(&mut self, ctx: Ctx, ino: Ino) {
        let Some(n) = self.open.get_mut(&ino) else { return };
        *n -= 1;
        if *n == 0 {
            self.open.remove(&ino);
        }
        let released = self.run(
            ctx,
            Req::Query,
            move |fs| async move { fs.release(ctx, ino).await },
        );
        if let Err(e) = released {
            eprintln!("mqfs: releasing inode {ino}: {}", e.one_line());
        }
    }

    /// Releases every file still open (at unmount: the kernel has gone, so
    /// no release will come), which frees those unlinked meanwhile.
    fn release_all(&mut self) {
        while let Some(&ino) = self.open.keys().next() {
            self.closed(Ctx::on(0), ino);
        }
    }

    /// Unmounts the file system and flushes the image files, once; the
    /// result goes to the outcome cell.
    fn shutdown(&mut self) {
        if self.mounted.is_none() {
            return;
        }
        self.release_all();
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
            .and_then(|()| m.rig.sync_files())
            .and_then(|()| m.through.sync())
            .map(|()| Stats::read(&m.rig, &m.since, requests));
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

impl<S: Served> Drop for MqfsFuse<S> {
    fn drop(&mut self) {
        self.shutdown();
    }
}
