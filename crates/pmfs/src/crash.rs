//! PMFS in the crash harness ([`fsapi::crash`]): formatted with
//! [`CRASH_INODES`] inode slots on 512 KiB of persistent memory, mounted
//! with [`Faults`], synchronous (every operation durable and atomic at
//! return).

use fsapi::crash::{FaultSwitch, PmFs, Promise, Recovered, CTX};
use pcie_sim::{Machine, Pmem};

use crate::{Faults, Pmfs, PmfsError};

/// Inode slots of a crash-checked PMFS.
pub const CRASH_INODES: u32 = 64;

impl PmFs for Pmfs {
    type Mount = Faults;
    const NAME: &'static str = "pmfs";
    const PROMISE: Promise = Promise::Synchronous;
    const SIZE: u64 = 512 << 10;

    async fn format(m: &Machine, pm: &Pmem) -> Result<(), PmfsError> {
        Pmfs::mkfs(m, pm, CTX, CRASH_INODES).await.map(drop)
    }

    async fn recover(m: &Machine, pm: &Pmem, how: Faults) -> Result<(Pmfs, Recovered), PmfsError> {
        Ok((Pmfs::mount(m, pm, CTX, how).await?, Recovered::default()))
    }

    async fn sync_all(&self, _ctx: fsapi::Ctx) -> Result<(), PmfsError> {
        Ok(())
    }

    fn fault_switches() -> Vec<FaultSwitch<Faults>> {
        let on = |name, mount| FaultSwitch { name, mount };
        let no = Faults::default();
        vec![
            on(
                "skip-log-flush",
                Faults {
                    skip_log_flush: true,
                    ..no
                },
            ),
            on(
                "skip-log-fence",
                Faults {
                    skip_log_fence: true,
                    ..no
                },
            ),
            on(
                "skip-commit",
                Faults {
                    skip_commit: true,
                    ..no
                },
            ),
            on(
                "skip-rollback",
                Faults {
                    skip_rollback: true,
                    ..no
                },
            ),
        ]
    }
}
