//! WOFS in the crash harness ([`fsapi::crash`]): formatted with
//! [`CRASH_SLOTS`] package slots on 512 KiB of persistent memory, mounted
//! with [`Options`], synchronous (every operation durable and atomic at
//! return).

use fsapi::crash::{FaultSwitch, PmFs, Promise, Recovered, CTX};
use pcie_sim::{Machine, Pmem};

use crate::{Faults, Options, Wofs, WofsError};

/// Package slots of a crash-checked WOFS.
pub const CRASH_SLOTS: u32 = 64;

impl PmFs for Wofs {
    type Mount = Options;
    const NAME: &'static str = "wofs";
    const PROMISE: Promise = Promise::Synchronous;
    const SIZE: u64 = 512 << 10;

    async fn format(m: &Machine, pm: &Pmem) -> Result<(), WofsError> {
        Wofs::mkfs(m, pm, CTX, CRASH_SLOTS).await.map(drop)
    }

    async fn recover(m: &Machine, pm: &Pmem, how: Options) -> Result<(Wofs, Recovered), WofsError> {
        Ok((Wofs::mount_with(m, pm, CTX, how).await?, Recovered::default()))
    }

    async fn sync_all(&self, _ctx: fsapi::Ctx) -> Result<(), WofsError> {
        Ok(())
    }

    fn fault_switches() -> Vec<FaultSwitch<Options>> {
        let on = |name, faults: Faults| FaultSwitch {
            name,
            mount: faults.into(),
        };
        let no = Faults::default();
        vec![
            on(
                "skip-clwb",
                Faults {
                    skip_clwb: true,
                    ..no
                },
            ),
            on(
                "skip-package-fence",
                Faults {
                    skip_package_fence: true,
                    ..no
                },
            ),
            on(
                "skip-data-fence",
                Faults {
                    skip_data_fence: true,
                    ..no
                },
            ),
            on(
                "skip-crc-check",
                Faults {
                    skip_crc_check: true,
                    ..no
                },
            ),
            on(
                "early-unlink-reclaim",
                Faults {
                    early_unlink_reclaim: true,
                    ..no
                },
            ),
        ]
    }
}
