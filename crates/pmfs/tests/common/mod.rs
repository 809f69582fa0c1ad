//! PMFS's adapter to the shared test machinery ([`fsapi::testing`]): mkfs
//! with the tests' inode slots, mount with [`Faults`], and the recording
//! entry points the crash tests use.

#![allow(dead_code, unused_imports)] // each test binary uses a part

use fsapi::crash::PmFs;
use fsapi::testing::{self, Adapter};
use pcie_sim::{Machine, PersistenceDomain, Pmem};
use pmfs::{Faults, Pmfs, PmfsError};

pub use fsapi::testing::{check, churn, profile, workload, Op, CTX, SIZE};

/// Inode slots of the tests.
pub const INODES: u32 = pmfs::CRASH_INODES;

/// PMFS as the shared tests see it.
#[derive(Debug)]
pub struct P;

impl Adapter for P {
    type Fs = Pmfs;
    type Mount = Faults;
    type Medium = Pmem;

    /// As the crash harness formats ([`PmFs::format`]: [`INODES`] slots).
    async fn mkfs(m: &Machine, pm: &Pmem) -> Result<(), PmfsError> {
        Pmfs::format(m, pm).await
    }

    /// As the crash harness mounts ([`PmFs::recover`]).
    async fn mount(m: &Machine, pm: &Pmem, how: Faults) -> Result<Pmfs, PmfsError> {
        Ok(Pmfs::recover(m, pm, how).await?.0)
    }

    type Usage = pmfs::Usage;

    async fn usage(fs: &Pmfs) -> pmfs::Usage {
        fs.usage()
    }
}

/// A machine with a formatted PMFS.
pub type Env = testing::Env<P>;
/// A recorded PMFS run.
pub type Recording = testing::Recording<Pmfs>;

/// Records `ops` under ADR with `faults`.
pub fn record(ops: &[Op], faults: Faults, seed: u64) -> Recording {
    record_in(PersistenceDomain::Adr, ops, faults, seed)
}

/// Records `ops` in `domain` with `faults`.
pub fn record_in(domain: PersistenceDomain, ops: &[Op], faults: Faults, seed: u64) -> Recording {
    testing::record(domain, ops, faults, seed)
}
