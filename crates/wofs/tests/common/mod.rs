//! WOFS's adapter to the shared test machinery ([`fsapi::testing`]): mkfs
//! with the tests' package slots, mount with [`Options`], and the
//! recording entry points the crash tests use.

#![allow(dead_code, unused_imports)] // each test binary uses a part

use fsapi::crash::PmFs;
use fsapi::testing::{self, Adapter};
use pcie_sim::{Machine, PersistenceDomain, Pmem};
use wofs::{Faults, Options, Wofs, WofsError};

pub use fsapi::testing::{check, churn, profile, workload, Op, CTX, SIZE};

/// Package slots of the tests.
pub const SLOTS: u32 = wofs::CRASH_SLOTS;

/// WOFS as the shared tests see it.
#[derive(Debug)]
pub struct W;

impl Adapter for W {
    type Fs = Wofs;
    type Mount = Options;
    type Medium = Pmem;

    /// As the crash harness formats ([`PmFs::format`]: [`SLOTS`] slots).
    async fn mkfs(m: &Machine, pm: &Pmem) -> Result<(), WofsError> {
        Wofs::format(m, pm).await
    }

    /// As the crash harness mounts ([`PmFs::recover`]).
    async fn mount(m: &Machine, pm: &Pmem, how: Options) -> Result<Wofs, WofsError> {
        Ok(Wofs::recover(m, pm, how).await?.0)
    }

    type Usage = wofs::Usage;

    async fn usage(fs: &Wofs) -> wofs::Usage {
        fs.usage()
    }
}

/// A machine with a formatted WOFS.
pub type Env = testing::Env<W>;
/// A recorded WOFS run.
pub type Recording = testing::Recording<Wofs>;

/// Records `ops` under ADR with `faults`.
pub fn record(ops: &[Op], faults: Faults, seed: u64) -> Recording {
    record_in(PersistenceDomain::Adr, ops, faults, seed)
}

/// Records `ops` in `domain` with `faults`.
pub fn record_in(domain: PersistenceDomain, ops: &[Op], faults: Faults, seed: u64) -> Recording {
    testing::record(domain, ops, faults.into(), seed)
}

/// Records `ops` in `domain` with every mount option.
pub fn record_with(domain: PersistenceDomain, ops: &[Op], options: Options, seed: u64) -> Recording {
    testing::record(domain, ops, options, seed)
}
