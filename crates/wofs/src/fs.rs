//! The mounted file system: mkfs, mount (recovery), the commit of one
//! package, and the read-only queries.

use fsapi::{Errno, Meter, Work};
use std::cell::RefCell;
use std::rc::Rc;

use pcie_sim::{Core, Machine, PmAddr, Pmem, Purpose};

use crate::error::{Result, WofsError};
use crate::faults::Faults;
use crate::layout::{Geometry, LINE};
use crate::options::Options;
use crate::package::{Body, FileType, Ino, Package, PkgRef, ROOT};
use crate::pmio;
use crate::ptl::Ptl;
use crate::reclaim::Usage;
use crate::recovery;

pub use fsapi::Ctx;

/// Attributes of an inode.
pub type Attr = fsapi::Attr<Ino>;

struct Inner {
    machine: Machine,
    pm: Pmem,
    geo: Geometry,
    options: Options,
    ptl: RefCell<Ptl>,
    /// Charges each call its DRAM work (counted in the [`Ptl`]).
    meter: Meter,
    /// One operation at a time: an operation's packages and PTL changes
    /// are never interleaved with another's.
    gate: tokio::sync::Mutex<()>,
}

/// A mounted WOFS. Cheap to clone (a handle).
#[derive(Clone)]
pub struct Wofs {
    inner: Rc<Inner>,
}

impl std::fmt::Debug for Wofs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wofs")
            .field("geometry", &self.inner.geo)
            .field("options", &self.inner.options)
            .finish()
    }
}

impl Wofs {
    /// Formats the persistent memory: zeroes the package slots and writes
    /// the superblock (stores, `clwb`, `sfence`), with `slots` package
    /// slots and every page after them a data page.
    pub async fn mkfs(machine: &Machine, pm: &Pmem, ctx: Ctx, slots: u32) -> Result<Geometry> {
        let core = machine.core(ctx.core)?;
        let geo = Geometry::for_size(pm.size(), slots)?;
        let zero = [0u8; LINE as usize];
        let end = geo.slot_addr(geo.slots).0;
        let mut at = geo.slot_addr(0).0;
        while at < end {
            pm.nt_store(&core, PmAddr(at), &zero, Purpose::UNTAGGED).await?;
            at += LINE;
        }
        pm.sfence(&core).await?;
        pmio::persist_package(pm, &core, PmAddr(0), &geo.encode(), &Options::default()).await?;
        Ok(geo)
    }

    /// Mounts: reads the superblock and runs the recovery scan
    /// ([`crate::recovery`]); `faults` switches mechanisms off.
    pub async fn mount(machine: &Machine, pm: &Pmem, ctx: Ctx, faults: Faults) -> Result<Wofs> {
        let options = Options {
            faults,
            ..Options::default()
        };
        Wofs::mount_with(machine, pm, ctx, options).await
    }

    /// [`Wofs::mount`] with every option.
    pub async fn mount_with(machine: &Machine, pm: &Pmem, ctx: Ctx, options: Options) -> Result<Wofs> {
        let core = machine.core(ctx.core)?;
        let mut sb = [0u8; LINE as usize];
        pm.load(&core, PmAddr(0), &mut sb).await?;
        let geo = Geometry::decode(&sb, pm.size())?;
        let f = &options.faults;
        let ptl = recovery::recover(pm, &core, &geo, !f.skip_crc_check, f.early_unlink_reclaim).await?;
        Ok(Wofs {
            inner: Rc::new(Inner {
                machine: machine.clone(),
                pm: pm.clone(),
                geo,
                options,
                ptl: RefCell::new(ptl),
                meter: Meter::new(machine, options.cpu),
                gate: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// The geometry.
    pub fn geometry(&self) -> Geometry {
        self.inner.geo
    }

    /// How the slots and pages are used.
    pub fn usage(&self) -> Usage {
        self.inner.ptl.borrow().space.usage()
    }

    pub(crate) fn core(&self, ctx: Ctx) -> Result<Core> {
        Ok(self.inner.machine.core(ctx.core)?)
    }

    pub(crate) fn pm(&self) -> &Pmem {
        &self.inner.pm
    }

    pub(crate) fn faults(&self) -> &Faults {
        &self.inner.options.faults
    }

    pub(crate) fn ptl(&self) -> std::cell::RefMut<'_, Ptl> {
        self.inner.ptl.borrow_mut()
    }

    /// The meter, with the work the table counted since the last call
    /// moved into it.
    pub(crate) fn meter(&self) -> &Meter {
        let work = self.ptl().take_work();
        self.inner.meter.count(work);
        &self.inner.meter
    }

    pub(crate) fn ptl_ref(&self) -> std::cell::Ref<'_, Ptl> {
        self.inner.ptl.borrow()
    }

    pub(crate) async fn lock(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.inner.gate.lock().await
    }

    /// Writes `body` as one package into a free slot, with its single
    /// ordering point; returns its reference once it is persistent (the
    /// slot's old content is then reclaimed).
    pub(crate) async fn commit(&self, core: &Core, body: Body) -> Result<PkgRef> {
        let (slot, seq) = {
            let mut p = self.ptl();
            let slot = p.space.alloc_slot()?;
            (slot, p.seq())
        };
        let pkg = Package { seq, body };
        let Some(bytes) = pkg.encode() else {
            self.ptl().space.unalloc_slot(slot);
            return Err(WofsError::Fs(Errno::Invalid("package larger than a slot")));
        };
        let at = self.inner.geo.slot_addr(slot);
        if let Err(e) = pmio::persist_package(&self.inner.pm, core, at, &bytes, &self.inner.options).await {
            self.ptl().space.unalloc_slot(slot);
            return Err(e);
        }
        self.ptl().space.overwritten(slot);
        Ok(PkgRef { slot, seq })
    }

    fn attr_of(p: &Ptl, ino: Ino) -> Result<Attr> {
        let i = p.inode(ino)?;
        let links = match i.ftype {
            // (No symlink or special file is ever made here.)
            FileType::File | FileType::Symlink | FileType::Special => i.links.len() as u32,
            FileType::Dir => {
                let subdirs = p.dirs.get(&ino).map_or(0, |d| {
                    d.values()
                        .filter(|e| p.inodes.get(&e.ino).is_some_and(|c| c.ftype == FileType::Dir))
                        .count()
                });
                2 + subdirs as u32
            }
        };
        Ok(Attr {
            ino,
            ftype: i.ftype,
            perm: i.perm,
            links,
            size: i.size,
            pages: i.pages.iter().filter(|&&p| p != 0).count() as u64,
        })
    }

    /// The attributes of `ino`.
    pub async fn getattr(&self, _ctx: Ctx, ino: Ino) -> Result<Attr> {
        Self::attr_of(&self.ptl_ref(), ino)
    }

    /// The attributes of entry `name` in `parent`.
    pub async fn lookup(&self, _ctx: Ctx, parent: Ino, name: &str) -> Result<Attr> {
        let p = self.ptl_ref();
        let e = p.entry(parent, name)?;
        Self::attr_of(&p, e.ino)
    }

    /// The entries of directory `ino` (without `.` and `..`), by name.
    pub async fn readdir(&self, _ctx: Ctx, ino: Ino) -> Result<Vec<(String, Ino, FileType)>> {
        let p = self.ptl_ref();
        let d = p.dir(ino)?;
        p.count(Work::dirents(d.len() as u64));
        Ok(d.iter()
            .map(|(n, e)| {
                (
                    n.clone(),
                    e.ino,
                    p.inodes.get(&e.ino).map_or(FileType::File, |i| i.ftype),
                )
            })
            .collect())
    }

    /// `fsync`: nothing to do, every operation is durable when it returns
    /// (synchronous crash consistency); checks that `ino` exists.
    pub async fn fsync(&self, _ctx: Ctx, ino: Ino) -> Result<()> {
        self.ptl_ref().inode(ino).map(|_| ())
    }

    /// The root directory's inode number.
    pub fn root(&self) -> Ino {
        ROOT
    }

    /// Data pages and package slots (the metadata space, one per live
    /// inode or entry), in all and free.
    pub async fn statfs(&self, _ctx: Ctx) -> Result<fsapi::StatFs> {
        let (geo, usage) = (self.geometry(), self.usage());
        Ok(fsapi::StatFs {
            pages: u64::from(geo.pages),
            free_pages: usage.free_pages as u64,
            inodes: u64::from(geo.slots),
            free_inodes: usage.free_slots as u64,
            name_max: crate::package::NAME_MAX as u32,
        })
    }
}

fsapi::delegate_file_system!(Wofs, Ino, WofsError);
