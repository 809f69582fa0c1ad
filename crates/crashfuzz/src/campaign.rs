//! A campaign: many workloads times many modes and drive profiles. Runs
//! are spread over the worker threads when there are more runs than
//! workers, and every run checks its states on all of them (a run much
//! larger than the others then does not run alone on one thread at the
//! end).

use std::sync::Mutex;

use nvme_ctrl::SsdProfile;

use crate::builtin::by_name;
use crate::error::Error;
use crate::explore::explore;
pub use crate::pipeline::CaughtBy;
use crate::pipeline::{ExploreOptions, ExploreReport};
use crate::record::{Fault, ModeName, RunConfig};
use crate::shard::Shard;
use crate::workload::Workload;

/// One check of the explorer itself: an ordering mechanism switched off
/// (`fault`) on a workload, mode and drive where that must break a
/// promise. A campaign whose explorer, recorder or oracle silently lost
/// its teeth would pass these runs; the default campaign fails then.
#[derive(Debug, Clone, Copy)]
pub struct SelfCheck {
    /// The mechanism switched off.
    pub fault: Fault,
    /// A built-in workload that needs it.
    pub workload: &'static str,
    /// The mode.
    pub mode: ModeName,
    /// The drive profile's name.
    pub profile: &'static str,
    /// How its absence must show.
    pub caught_by: CaughtBy,
}

/// The self-checks: one per fault switch a built-in workload shows by a
/// broken promise, `no-flush-read` once per mechanism it takes away
/// (ccNVMe's P-SQ under MQFS and under `classic-cc`, Horae's ordering
/// queue). `replay-unfinished` has none: no built-in workload breaks a
/// promise without it (`docs/decisions.md` E7).
pub const SELF_CHECKS: &[SelfCheck] = &[
    SelfCheck {
        fault: Fault::NoFlushRead,
        workload: "generic_035",
        mode: ModeName::Mq,
        profile: "optane-905p",
        caught_by: CaughtBy::Promise,
    },
    SelfCheck {
        fault: Fault::NoFence,
        workload: "generic_035",
        mode: ModeName::Mq,
        profile: "optane-905p",
        caught_by: CaughtBy::Promise,
    },
    SelfCheck {
        fault: Fault::NoEntryFence,
        workload: "generic_035",
        mode: ModeName::Mq,
        profile: "optane-905p",
        caught_by: CaughtBy::PromiseOrRefusal,
    },
    SelfCheck {
        fault: Fault::NoCommitFua,
        workload: "generic_035",
        mode: ModeName::Classic,
        profile: "flash-vwc",
        caught_by: CaughtBy::Promise,
    },
    SelfCheck {
        fault: Fault::OutOfOrder,
        workload: "canary_out_of_order",
        mode: ModeName::Mq,
        profile: "optane-905p",
        caught_by: CaughtBy::Promise,
    },
    SelfCheck {
        fault: Fault::NoRevoke,
        workload: "canary_block_reuse",
        mode: ModeName::Mq,
        profile: "optane-905p",
        caught_by: CaughtBy::Promise,
    },
    SelfCheck {
        fault: Fault::NoDataFlush,
        workload: "sfr_writeback",
        mode: ModeName::Mq,
        profile: "flash-vwc",
        caught_by: CaughtBy::Promise,
    },
    SelfCheck {
        fault: Fault::NoDataFlush,
        workload: "m9_cross_queue",
        mode: ModeName::Classic,
        profile: "flash-vwc",
        caught_by: CaughtBy::Promise,
    },
    SelfCheck {
        fault: Fault::HoraeEarlyAck,
        workload: "generic_035",
        mode: ModeName::Horae,
        profile: "flash-vwc",
        caught_by: CaughtBy::Promise,
    },
    SelfCheck {
        fault: Fault::HoraeNoRedirectCommit,
        workload: "stress_scattered",
        mode: ModeName::Horae,
        profile: "optane-905p",
        caught_by: CaughtBy::Promise,
    },
    // Horae's ordering queue without the read after each persistent
    // write (HoRAE's released module): an fsync returns while the tail
    // that commits its transaction may still be on the link.
    SelfCheck {
        fault: Fault::NoFlushRead,
        workload: "create_delete",
        mode: ModeName::Horae,
        profile: "optane-905p",
        caught_by: CaughtBy::Promise,
    },
    // JBD2 committing through ccNVMe: the P-SQ doorbell is its commit
    // record, so without the read after it an fsync returns while the
    // doorbell that commits its transaction may still be on the link.
    SelfCheck {
        fault: Fault::NoFlushRead,
        workload: "generic_035",
        mode: ModeName::ClassicCc,
        profile: "optane-905p",
        caught_by: CaughtBy::Promise,
    },
    // A joint FLUSH that flushes one drive of two: a file's data in the
    // other drive's cache is lost under its committed inode.
    SelfCheck {
        fault: Fault::HoraeNoJointFlush,
        workload: "create_delete",
        mode: ModeName::Horae2,
        profile: "flash-vwc",
        caught_by: CaughtBy::Promise,
    },
    // Ext4 on md RAID 0 whose commit record's PREFLUSH flushes only its
    // own drive: the file's data, fsynced, is lost from the other
    // drive's cache under the committed inode.
    SelfCheck {
        fault: Fault::MdFlushOne,
        workload: "create_delete",
        mode: ModeName::Classic2,
        profile: "flash-vwc",
        caught_by: CaughtBy::Promise,
    },
    // Horae's `dr` bit set at submission instead of at the data's
    // durability: on a drive without a cache an uncompleted write may not
    // have landed (NVMe 1.4 6.3) while a later commit did, and recovery
    // keeps the transaction over the stale block.
    SelfCheck {
        fault: Fault::HoraeEarlyDr,
        workload: "ace1-04-0",
        mode: ModeName::Horae,
        profile: "optane-905p",
        caught_by: CaughtBy::Promise,
    },
];

impl SelfCheck {
    /// The run with the mechanism on (`fault: false`) or off.
    pub fn config(&self, fault: bool) -> Result<(Workload, RunConfig), Error> {
        let w = by_name(self.workload)
            .and_then(|mut ws| if ws.is_empty() { None } else { Some(ws.remove(0)) })
            .ok_or_else(|| Error::UnknownWorkload(self.workload.into()))?;
        let cfg = RunConfig {
            fault: fault.then_some(self.fault),
            ..RunConfig::new(self.mode, RunConfig::profile_by_name(self.profile)?, 1)
        };
        Ok((w, cfg))
    }

    /// Explores the run with the mechanism off; returns its report and the
    /// first violation that counts ([`SelfCheck::caught_by`]), if any.
    pub fn run(&self, opts: &ExploreOptions) -> Result<(ExploreReport, Option<usize>), Error> {
        let (w, cfg) = self.config(true)?;
        // One violation that counts is the catch: the run stops there.
        let opts = ExploreOptions {
            stop_when_caught: Some(self.caught_by),
            ..opts.clone()
        };
        let r = explore(&w, &cfg, &opts, &w.name)?;
        let caught = r.violations.iter().position(|v| self.caught_by.counts(&v.check));
        Ok((r, caught))
    }
}

/// What to explore.
#[derive(Debug, Clone)]
pub struct Campaign {
    /// Workloads.
    pub workloads: Vec<Workload>,
    /// Modes, each run on every workload.
    pub modes: Vec<ModeName>,
    /// Drive profiles, each run on every workload and mode.
    pub profiles: Vec<SsdProfile>,
    /// Simulation seed.
    pub seed: u64,
    /// An ordering mechanism switched off in every run, if any.
    pub fault: Option<crate::record::Fault>,
}

impl Campaign {
    /// Number of runs (workload x mode x profile).
    pub fn runs(&self) -> usize {
        self.workloads.len() * self.modes.len() * self.profiles.len()
    }

    fn run_at(&self, i: usize) -> (&Workload, RunConfig) {
        let per_w = self.modes.len() * self.profiles.len();
        let w = &self.workloads[i / per_w];
        let mode = self.modes[(i % per_w) / self.profiles.len()];
        let profile = self.profiles[i % self.profiles.len()].clone();
        let cfg = RunConfig {
            fault: self.fault,
            ..RunConfig::new(mode, profile, self.seed)
        };
        (w, cfg)
    }

    /// Runs every run, or the runs `shard` takes when the campaign's runs
    /// are numbered from `first` ([`crate::shard`]); `done` is called after
    /// each with its report. The reports come back in campaign order
    /// (workload, mode, profile), whatever order they finished in, each
    /// with its number.
    pub fn run(
        &self,
        opts: &ExploreOptions,
        first: usize,
        shard: Option<Shard>,
        done: &(dyn Fn(&ExploreReport) + Sync),
    ) -> Result<Vec<ExploreReport>, Error> {
        let mine: Vec<usize> = (0..self.runs())
            .filter(|i| shard.is_none_or(|s| s.takes(first + i)))
            .collect();
        let explore_at = |k: usize| -> Result<ExploreReport, Error> {
            let (w, cfg) = self.run_at(mine[k]);
            let r = explore(w, &cfg, opts, &w.name)?;
            Ok(ExploreReport {
                run: first + mine[k],
                ..r
            })
        };
        let n = mine.len();
        let jobs = opts.jobs.max(1);
        if n < jobs * 2 {
            let mut out = Vec::with_capacity(n);
            for k in 0..n {
                let r = explore_at(k)?;
                done(&r);
                out.push(r);
            }
            return Ok(out);
        }
        // Each run checks its states on every thread too: one run can
        // hold most of a campaign's states (create_delete mq-atomic on a
        // cached drive: 0.6 M of 1.06 M), and on one thread it alone
        // would set the wall time. Runs in flight share the cores.
        let out = on_workers(n, jobs, explore_at, done)?;
        Ok(out)
    }
}

/// Runs `run(0..n)` on `jobs` worker threads, each taking the next index
/// as it finishes one; `done` sees each report as it is made. The reports
/// come back in index order. After a failure no new run starts (the
/// others finish theirs) and the first failure by index is returned.
/// The runs of a campaign, of the PM campaign and the self-checks
/// (`T`: a report and what it caught) all go through it.
pub fn on_workers<T: Send>(
    n: usize,
    jobs: usize,
    run: impl Fn(usize) -> Result<T, Error> + Sync,
    done: impl Fn(&T) + Sync,
) -> Result<Vec<T>, Error> {
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<Option<Result<T, Error>>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, n.max(1)) {
            s.spawn(|| loop {
                let i = {
                    let mut g = next.lock().unwrap_or_else(|p| p.into_inner());
                    let i = *g;
                    *g += 1;
                    i
                };
                if i >= n {
                    return;
                }
                let r = run(i);
                if let Ok(r) = &r {
                    done(r);
                }
                let failed = r.is_err();
                results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(r);
                if failed {
                    // Let the other workers finish their runs; no new ones.
                    *next.lock().unwrap_or_else(|p| p.into_inner()) = n;
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|p| p.into_inner());
    let mut out = Vec::with_capacity(n);
    for r in results.into_iter().flatten() {
        out.push(r?);
    }
    Ok(out)
}
