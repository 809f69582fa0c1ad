//! A campaign: many workloads times many modes and drive profiles. Runs
//! are spread over the worker threads when there are more runs than
//! workers (each run then checks its states on one thread); a single run
//! checks its states on all of them.

use std::sync::Mutex;

use nvme_ctrl::SsdProfile;

use crate::error::Error;
use crate::explore::{explore, ExploreOptions, ExploreReport};
use crate::record::{ModeName, RunConfig};
use crate::workload::Workload;

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

    /// Runs every run; `done` is called after each with its report. The
    /// reports come back in campaign order (workload, mode, profile),
    /// whatever order they finished in.
    pub fn run(
        &self,
        opts: &ExploreOptions,
        done: &(dyn Fn(&ExploreReport) + Sync),
    ) -> Result<Vec<ExploreReport>, Error> {
        let n = self.runs();
        let jobs = opts.jobs.max(1);
        if n < jobs * 2 {
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                let (w, cfg) = self.run_at(i);
                let r = explore(w, &cfg, opts, &w.name)?;
                done(&r);
                out.push(r);
            }
            return Ok(out);
        }
        let inner = ExploreOptions {
            jobs: 1,
            ..opts.clone()
        };
        let next = Mutex::new(0usize);
        let results: Mutex<Vec<Option<Result<ExploreReport, Error>>>> =
            Mutex::new((0..n).map(|_| None).collect());
        std::thread::scope(|s| {
            for _ in 0..jobs {
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
                    let (w, cfg) = self.run_at(i);
                    let r = explore(w, &cfg, &inner, &w.name);
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
}
