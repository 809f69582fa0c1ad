//! Shared set-up: a machine with persistent memory and SoupFS on it.

#![allow(dead_code)]

use std::future::Future;

use fsapi::crash::PmFs;
use fsapi::testing::CTX;
use fsapi::Ctx;
use pcie_sim::{Executor, Machine, MachineProfile, Pmem, PmemProfile, TraceMode};
use soupfs::{Faults, FsError, SoupFs, SoupProfile};

/// 1 MiB of persistent memory: 256 pages.
pub const PM_SIZE: u64 = 1 << 20;

pub mod crash;
pub mod model;

/// SoupFS as the shared tests ([`fsapi::testing`]) see it: mkfs and mount
/// on core 0, no persister (the calls serve the latest view; nothing the
/// shared checks read needs it persisted).
#[derive(Debug)]
pub struct S;

impl fsapi::testing::Adapter for S {
    type Fs = SoupFs;
    type Mount = Faults;
    type Medium = Pmem;

    /// As the crash harness formats ([`PmFs::format`]).
    async fn mkfs(m: &Machine, pm: &Pmem) -> Result<(), FsError> {
        SoupFs::format(m, pm).await
    }

    /// As the crash harness mounts ([`PmFs::recover`]; no persister).
    async fn mount(m: &Machine, pm: &Pmem, faults: Faults) -> Result<SoupFs, FsError> {
        Ok(SoupFs::recover(m, pm, faults).await?.0)
    }

    /// A sync: the calls are not durable at return (the persister is not
    /// running), so a remount sees what a sync persisted.
    async fn unmount(fs: SoupFs) -> Result<(), FsError> {
        fs.sync(CTX).await
    }

    /// Free (pages, lines).
    type Usage = (usize, usize);

    async fn usage(fs: &SoupFs) -> (usize, usize) {
        fs.try_free_space()
            .expect("no persister holds the state between calls")
    }
}

pub fn pm_profile() -> PmemProfile {
    PmemProfile {
        size: PM_SIZE,
        ..PmemProfile::default()
    }
}

/// Formats a fresh machine's PM and runs `body` with the file system and
/// core 0; the persister runs on core 1 unless `persister` is false.
pub fn run<F, Fut, T>(seed: u64, faults: Faults, persister: bool, body: F) -> (Pmem, T)
where
    F: FnOnce(SoupFs, Ctx) -> Fut + 'static,
    Fut: Future<Output = Result<T, FsError>> + 'static,
    T: 'static,
{
    let ex = Executor::new(seed);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let pm = Pmem::attach(&m, pm_profile()).expect("attach");
    let core = Ctx::on(0);
    let pcore = Ctx::on(1);
    let pmc = pm.clone();
    let out = ex
        .block_on(async move {
            let fs = SoupFs::mkfs(&m, pmc, core, SoupProfile::default(), faults).await?;
            if persister {
                fs.start_persister(pcore)?;
            }
            let out = body(fs.clone(), core).await;
            fs.stop_persister();
            out
        })
        .expect("simulation")
        .expect("workload");
    (pm, out)
}
