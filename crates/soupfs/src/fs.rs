//! The file-system handle: its profile, its lock over the DRAM state, the
//! background persister task, and `mkfs`.

use std::cell::Cell;
use std::rc::Rc;

use fsapi::{CpuCosts, Ctx, Meter};
use pcie_sim::{Core, JoinHandle, Machine, Pmem, Sim, SimDuration};
use tokio::sync::{Mutex, MutexGuard};

use crate::alloc::Alloc;
use fsapi::Errno;

use crate::error::FsError;
use crate::layout::{
    bitmap_pages, bitmap_word, first_free_page, InodeLine, Kind, BITMAP_START, LINE, PAGE, SB_MAGIC, SB_ROOT,
    SB_SIZE,
};
use crate::pm::{Batch, Faults};
use crate::state::{Ino, Inode, PersistStats, State};

/// How SoupFS runs. Every number is a named field with its source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SoupProfile {
    /// How often the background persister wakes up: the bound on how long
    /// a change stays only in the latest view. The paper sets it at mount
    /// time and gives no default (L214-L215: "the wake-up frequency can
    /// be specified at mount time as the bound of persistence"); 1 ms of
    /// simulated time here, so that a test's operations span several
    /// rounds (Linux's periodic write-back, the disk soft-updates analogue,
    /// is 5 s: `vm.dirty_writeback_centisecs` = 500).
    pub persister_interval: SimDuration,
    /// What the DRAM work of a system call costs on its core (the
    /// persister's work is not charged: it runs on a core of its own).
    pub cpu: CpuCosts,
}

impl Default for SoupProfile {
    fn default() -> Self {
        SoupProfile {
            persister_interval: SimDuration::from_us(1_000),
            cpu: CpuCosts::default(),
        }
    }
}

pub(crate) struct Inner {
    /// The machine: the core a [`Ctx`] names.
    pub machine: Machine,
    pub pmem: Pmem,
    pub sim: Sim,
    /// The root directory (fixed at mkfs).
    pub root: Ino,
    pub profile: SoupProfile,
    pub faults: Faults,
    pub state: Mutex<State>,
    pub stop: Cell<bool>,
    /// Charges each system call its DRAM work.
    pub meter: Meter,
}

/// A mounted SoupFS. Cheap to clone (a handle).
#[derive(Clone)]
pub struct SoupFs {
    pub(crate) inner: Rc<Inner>,
}

impl std::fmt::Debug for SoupFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SoupFs")
            .field("profile", &self.inner.profile)
            .field("faults", &self.inner.faults)
            .finish()
    }
}

impl SoupFs {
    pub(crate) fn new(
        machine: &Machine,
        pmem: Pmem,
        profile: SoupProfile,
        faults: Faults,
        state: State,
    ) -> SoupFs {
        SoupFs {
            inner: Rc::new(Inner {
                meter: Meter::new(machine, profile.cpu),
                machine: machine.clone(),
                pmem,
                sim: machine.sim(),
                root: state.root,
                profile,
                faults,
                state: Mutex::new(state),
                stop: Cell::new(false),
            }),
        }
    }

    /// The meter of the system calls' DRAM work.
    pub(crate) fn meter(&self) -> &Meter {
        &self.inner.meter
    }

    /// The core `ctx` names.
    pub(crate) fn core(&self, ctx: Ctx) -> Result<Core, FsError> {
        Ok(self.inner.machine.core(ctx.core)?)
    }

    pub(crate) async fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().await
    }

    pub(crate) fn now_ns(&self) -> u64 {
        self.inner.sim.now().0 / 1000
    }

    /// The simulation it runs in.
    pub fn sim(&self) -> Sim {
        self.inner.sim.clone()
    }

    /// Its profile.
    pub fn profile(&self) -> &SoupProfile {
        &self.inner.profile
    }

    /// The persistent memory it runs on.
    pub fn pmem(&self) -> &Pmem {
        &self.inner.pmem
    }

    /// The root directory.
    pub fn root(&self) -> Ino {
        self.inner.root
    }

    /// The persister's counts so far.
    pub async fn persist_stats(&self) -> PersistStats {
        self.lock().await.stats
    }

    /// Free (pages, lines) in the latest view.
    pub async fn free_space(&self) -> (usize, usize) {
        self.lock().await.alloc.free_space()
    }

    /// Free (pages, lines) in the latest view, if no call or persister
    /// step holds the DRAM state now (a caller between calls, with no
    /// persister running, always gets them).
    pub fn try_free_space(&self) -> Option<(usize, usize)> {
        Some(self.inner.state.try_lock().ok()?.alloc.free_space())
    }

    /// Operations waiting for the persister.
    pub async fn pending_ops(&self) -> usize {
        self.lock().await.inodes.values().map(|i| i.ops.len()).sum()
    }

    /// Formats `pmem` and mounts it: the bitmap (reserved pages marked),
    /// the root directory (inode and zeroed bucket page), then the
    /// superblock, whose magic word is stored last and persisted on its
    /// own (an image is formatted once that word is persistent).
    pub async fn mkfs(
        machine: &Machine,
        pmem: Pmem,
        ctx: Ctx,
        profile: SoupProfile,
        faults: Faults,
    ) -> Result<SoupFs, FsError> {
        let core = &machine.core(ctx.core)?;
        let size = pmem.size();
        let first = first_free_page(size);
        if size % PAGE != 0 || size / PAGE <= first + 2 {
            return Err(FsError::Fs(Errno::Invalid("PM too small or not whole pages")));
        }
        let pages = size / PAGE;
        let mut b = Batch::new(&pmem, core, Faults::default());
        // The bitmap: reserved pages allocated, the rest free.
        let mut words = vec![0u64; pages as usize];
        for w in words.iter_mut().take(first as usize) {
            *w = u64::MAX;
        }
        let mut alloc = Alloc::from_bitmap(&words, first);
        let root = alloc.line()?;
        let bucket = alloc.page()?;
        alloc.mark(root, false, true);
        alloc.mark(bucket, true, true);
        words[(root / PAGE) as usize] |= 1 << ((root % PAGE) / LINE);
        words[(bucket / PAGE) as usize] = u64::MAX;
        let bm_bytes = bitmap_pages(size) * PAGE;
        let mut line = [0u8; 64];
        let mut off = 0;
        while off < bm_bytes {
            for (i, chunk) in line.chunks_exact_mut(8).enumerate() {
                let p = (off / 8) as usize + i;
                chunk.copy_from_slice(&words.get(p).copied().unwrap_or(0).to_le_bytes());
            }
            b.store(BITMAP_START + off, &line).await?;
            off += LINE;
        }
        debug_assert_eq!(bitmap_word(0), BITMAP_START);
        let zero = [0u8; 64];
        for l in 0..PAGE / LINE {
            b.store(bucket + l * LINE, &zero).await?;
        }
        let mtime = machine.sim().now().0 / 1000;
        let inode = InodeLine {
            kind: Kind::Dir,
            perm: 0o755,
            nlink: 1,
            size: 0,
            root: bucket,
            parent: root,
            mtime,
        };
        b.store(root, &inode.encode()).await?;
        b.store_word(SB_ROOT, root).await?;
        b.store_word(SB_SIZE, size).await?;
        b.persist().await?;
        b.publish(0, SB_MAGIC).await?;
        let mut dir = Inode::new(Kind::Dir, 0o755, root, bucket, mtime);
        dir.nlink = 1;
        dir.cons.init = true;
        dir.cons.nlink = 1;
        dir.cons.root = bucket;
        let mut state = State {
            inodes: Default::default(),
            alloc,
            seq: 0,
            root,
            dirty: Default::default(),
            stats: PersistStats::default(),
        };
        state.inodes.insert(root, dir);
        Ok(SoupFs::new(machine, pmem, profile, faults, state))
    }

    /// Starts the background persister on `core` (the paper runs one per
    /// NUMA node, L222-L223; the simulated machine is one node): it wakes
    /// every [`SoupProfile::persister_interval`] and persists every
    /// pending operation, until [`SoupFs::stop_persister`].
    pub fn start_persister(&self, ctx: Ctx) -> Result<JoinHandle<Result<(), FsError>>, FsError> {
        let core = self.core(ctx)?;
        let fs = self.clone();
        Ok(self.inner.sim.spawn(async move {
            loop {
                fs.inner.sim.sleep(fs.inner.profile.persister_interval).await;
                if fs.inner.stop.get() {
                    return Ok(());
                }
                fs.persist_round(&core).await?;
            }
        }))
    }

    /// Asks the persister to stop at its next wake-up.
    pub fn stop_persister(&self) {
        self.inner.stop.set(true);
    }
}
