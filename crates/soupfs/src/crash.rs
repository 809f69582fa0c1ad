//! SoupFS in the crash harness ([`fsapi::crash`]): formatted on 1 MiB of
//! persistent memory, mounted with [`Faults`] (the leak collector's
//! report is what the mount recovered), the persister on core 1 while a
//! run lasts. Durable at `fsync` only ([`Promise::Fsync`]).

use fsapi::crash::{FaultSwitch, PmFs, Promise, Recovered, CTX};
use fsapi::Ctx;
use pcie_sim::{Machine, Pmem, SimDuration};

use crate::{Faults, FsError, SoupFs, SoupProfile};

/// What a run lets pass at its end before the persister stops: more than
/// a persister interval, so that it persists what is pending.
const SETTLE: SimDuration = SimDuration::from_us(1_500);

impl PmFs for SoupFs {
    type Mount = Faults;
    const NAME: &'static str = "soupfs";
    const PROMISE: Promise = Promise::Fsync;
    const SIZE: u64 = 1 << 20;

    async fn format(m: &Machine, pm: &Pmem) -> Result<(), FsError> {
        SoupFs::mkfs(m, pm.clone(), CTX, SoupProfile::default(), Faults::default())
            .await
            .map(drop)
    }

    async fn recover(m: &Machine, pm: &Pmem, how: Faults) -> Result<(SoupFs, Recovered), FsError> {
        let (fs, rep) = SoupFs::mount(m, pm.clone(), CTX, SoupProfile::default(), how).await?;
        let recovered = Recovered {
            leaked: rep.leaked_lines,
            reachable: rep.reachable_lines,
        };
        Ok((fs, recovered))
    }

    /// The persister runs on core 1, beside the calls on core 0; on a
    /// machine of one core it shares core 0 with them (a kernel thread on
    /// the same CPU).
    fn start(&self) -> Result<(), FsError> {
        let core = 1.min(self.inner.machine.profile().cpu.cores.saturating_sub(1));
        self.start_persister(Ctx::on(core)).map(drop)
    }

    async fn finish(&self, m: &Machine) -> Result<(), FsError> {
        m.sim().sleep(SETTLE).await;
        self.stop_persister();
        Ok(())
    }

    async fn sync_all(&self, ctx: Ctx) -> Result<(), FsError> {
        SoupFs::sync(self, ctx).await
    }

    fn fault_switches() -> Vec<FaultSwitch<Faults>> {
        let on = |name, mount| FaultSwitch { name, mount };
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
                "skip-sfence",
                Faults {
                    skip_sfence: true,
                    ..no
                },
            ),
            on(
                "publish-before-init",
                Faults {
                    publish_before_init: true,
                    ..no
                },
            ),
            on(
                "free-before-unpublish",
                Faults {
                    free_before_unpublish: true,
                    ..no
                },
            ),
            on(
                "rename-remove-first",
                Faults {
                    rename_remove_first: true,
                    ..no
                },
            ),
        ]
    }
}
