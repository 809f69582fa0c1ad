//! The CPU time of a file system's work in DRAM, charged to the calling
//! core: the system call itself, and the in-memory inodes, allocations and
//! directory entries a call touches. One table of costs for every file
//! system here, so that a comparison between them measures their designs
//! and not different guesses of what a CPU costs.

use std::cell::Cell;

use pcie_sim::{Core, Cycles, Machine, SimDuration};

use crate::Ctx;

/// What a file system's DRAM work costs on a core, one table for every
/// file system of the workspace (`mqfs::FsProfile::cpu` is one too): the
/// ccNVMe paper's 2.5 GHz Haswell (`pcie_sim::CpuProfile::clock`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuCosts {
    /// System call entry, VFS and exit, once per call (~0.5 us on a
    /// 2.5 GHz Haswell with the mitigations of the ccNVMe paper's era).
    pub syscall: SimDuration,
    /// Examining one directory entry: one probe of an index in DRAM (a
    /// hash bucket, a tree node) or one entry of a linear scan.
    pub dirent_cycles: Cycles,
    /// Creating or updating one in-memory inode.
    pub inode_cycles: Cycles,
    /// Allocating or freeing one page, inode or slot in an in-memory free
    /// set. Estimate, not measured.
    pub alloc_cycles: Cycles,
}

impl Default for CpuCosts {
    fn default() -> Self {
        CpuCosts {
            syscall: SimDuration::from_ns(500),
            dirent_cycles: Cycles(20),
            inode_cycles: Cycles(300),
            alloc_cycles: Cycles(300),
        }
    }
}

/// The DRAM work of one call, counted by the file system as it does it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// In-memory inodes created or changed.
    pub inodes: u64,
    /// Pages, inodes or slots allocated or freed.
    pub allocs: u64,
    /// Directory entries examined or changed.
    pub dirents: u64,
}

impl Work {
    /// A call that examines `dirents` directory entries and changes
    /// nothing else.
    pub fn dirents(dirents: u64) -> Work {
        Work {
            dirents,
            ..Work::default()
        }
    }
}

impl std::ops::Add for Work {
    type Output = Work;
    fn add(self, o: Work) -> Work {
        Work {
            inodes: self.inodes + o.inodes,
            allocs: self.allocs + o.allocs,
            dirents: self.dirents + o.dirents,
        }
    }
}

impl CpuCosts {
    /// No CPU time at all: what a call costs is its persistent-memory
    /// (or device) part alone (for tests that isolate that part).
    pub fn none() -> CpuCosts {
        CpuCosts {
            syscall: SimDuration::ZERO,
            dirent_cycles: Cycles(0),
            inode_cycles: Cycles(0),
            alloc_cycles: Cycles(0),
        }
    }

    /// The cycles of `work` (the system call not included).
    pub fn cycles(&self, work: Work) -> Cycles {
        Cycles(
            self.inode_cycles.0 * work.inodes
                + self.alloc_cycles.0 * work.allocs
                + self.dirent_cycles.0 * work.dirents,
        )
    }

    /// Charges one call that did `work` to `core`: the system call and
    /// the cycles, as one stretch of the core's time.
    /// A call that costs nothing (the table zeroed) takes no event: the
    /// side experiments and crash checks with [`CpuCosts::none`] run as
    /// fast as before the table existed.
    pub async fn charge(&self, core: &Core, work: Work) {
        let d = self.syscall + core.time_of(self.cycles(work));
        if d > SimDuration::ZERO {
            core.busy(d).await;
        }
    }
}

/// A file system's meter of DRAM work: the work is counted where it is
/// done ([`Meter::count`]) and charged, with the system call, when the
/// call returns through the [`crate::FileSystem`] trait
/// ([`crate::delegate_file_system!`] calls [`Meter::charge`] after every
/// operation), so that a call made of other calls pays one system call.
///
/// The count is the file system's, not the caller's: work counted by one
/// call while another is suspended inside the file system is charged to
/// whichever returns first. The file systems here serialize their
/// updates, so only a read that overlaps an update (on another core) can
/// take some of the update's work.
#[derive(Debug)]
pub struct Meter {
    machine: Machine,
    costs: CpuCosts,
    work: Cell<Work>,
    /// Calls charged so far.
    calls: Cell<u64>,
}

impl Meter {
    /// A meter charging `costs` to the cores of `machine`.
    pub fn new(machine: &Machine, costs: CpuCosts) -> Meter {
        Meter {
            machine: machine.clone(),
            costs,
            work: Cell::new(Work::default()),
            calls: Cell::new(0),
        }
    }

    /// The costs it charges.
    pub fn costs(&self) -> &CpuCosts {
        &self.costs
    }

    /// Counts `work` done by the call in progress.
    pub fn count(&self, work: Work) {
        self.work.set(self.work.get() + work);
    }

    /// Calls charged so far.
    pub fn calls(&self) -> u64 {
        self.calls.get()
    }

    /// Charges the call that returns now on `ctx`'s core: one system call
    /// and the work counted since the last charge. A core the machine
    /// does not have was refused by the call itself; nothing is charged.
    pub async fn charge(&self, ctx: Ctx) {
        let work = self.work.take();
        if let Ok(core) = self.machine.core(ctx.core) {
            self.calls.set(self.calls.get() + 1);
            self.costs.charge(&core, work).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cycles_of_a_call_are_its_work_at_the_table_s_costs() {
        let c = CpuCosts::default();
        assert_eq!(c.cycles(Work::default()), Cycles(0));
        let w = Work {
            inodes: 2,
            allocs: 1,
            dirents: 3,
        };
        assert_eq!(c.cycles(w), Cycles(2 * 300 + 300 + 3 * 20));
        assert_eq!(w + Work::dirents(1), Work { dirents: 4, ..w });
    }

    #[test]
    fn a_charge_occupies_the_core_for_the_call_and_the_work_counted_since_the_last() {
        use pcie_sim::{Executor, MachineProfile, TraceMode};
        let ex = Executor::new(1);
        let m = Machine::new(&ex, MachineProfile::default(), TraceMode::CountersOnly);
        let meter = Meter::new(&m, CpuCosts::default());
        let sim = ex.sim();
        let took = ex
            .block_on(async move {
                let t0 = sim.now();
                meter.count(Work {
                    inodes: 1,
                    ..Work::default()
                });
                meter.count(Work::dirents(5));
                meter.charge(Ctx::on(0)).await;
                let first = sim.now().since(t0);
                let t1 = sim.now();
                meter.charge(Ctx::on(0)).await;
                // A core the machine lacks: not charged.
                meter.charge(Ctx::on(999)).await;
                (first, sim.now().since(t1), meter.calls())
            })
            .unwrap();
        // 2.5 GHz: 300 + 5 * 20 cycles = 160 ns after the 500 ns call.
        assert_eq!(took.0, SimDuration::from_ns(660));
        assert_eq!(took.1, SimDuration::from_ns(500));
        assert_eq!(took.2, 2);
    }
}
