//! The checker threads of one run's exploration, over any [`CrashSpace`]
//! (one drive, [`crate::explore`]; several, [`crate::devices`]): states
//! enumerated by what their checks read ([`crate::observe`]) or up to the
//! bounds ([`crate::pipeline`]), each checked by the explorer's own check.

use std::sync::Arc;
use std::time::Instant;

use nvme_ctrl::Image;

use crate::check::{CheckContext, CheckOutcome};
use crate::error::Error;
use crate::oracle::Failure;
use crate::pipeline::{
    enumerate_bounded, Checked, CrashSpace, DriveEnumeration, ExploreOptions, ExploreReport, Job,
};

/// A failing state: its crash point, its choice, the failed checks.
pub(crate) type Found<C> = Vec<(usize, C, Vec<Failure>)>;

/// Checks every crash state of `explorer` (one drive or several) on
/// `opts.jobs` checker threads, each running `check` on the states sent
/// to it, enumerated as `enumeration` says (`opts.enumeration`, with the
/// block bound per drive): by what the checks read ([`crate::observe`];
/// `bases`: each drive's starting image) or up to the bounds. Counts into `report` and names the reductions that applied
/// (those of `cx` included); returns the failing states.
pub(crate) fn check_all<S: CrashSpace>(
    explorer: &mut S,
    cx: &CheckContext,
    bases: &[Arc<Image>],
    enumeration: DriveEnumeration,
    opts: &ExploreOptions,
    report: &mut ExploreReport,
    check: impl Fn(&S::State) -> CheckOutcome + Sync,
) -> Result<Found<S::Choice>, Error> {
    report.crash_points = explorer.points();
    let (tx, rx) = crossbeam::channel::bounded::<Job<S::State>>(256);
    let (rtx, rrx) = crossbeam::channel::unbounded::<Checked<S::Choice>>();
    let mut found = Vec::new();
    let mut enum_err = None;
    // A violation `opts.stop_when_caught` counts was tallied (on this
    // thread: the read-set enumeration tallies each point's checks before
    // it moves on).
    let caught = std::cell::Cell::new(false);
    // One job checked into its result, on a checker thread or, for a
    // wave of one state, on the enumerating thread itself.
    let run = |job: Job<S::State>| -> Checked<S::Choice> {
        let t = Instant::now();
        let out = check(&job.state);
        let (point, choice) = S::place(job.state);
        Checked {
            tag: job.tag,
            point,
            choice,
            failures: out.failures,
            seconds: t.elapsed().as_secs_f64(),
            recovered_alike: out.recovered_alike,
            recovery_reused: out.recovery_reused,
            reads: out.reads,
            judgements: out.judgements,
        }
    };
    std::thread::scope(|s| {
        for _ in 0..opts.jobs.max(1) {
            let (rx, rtx, run) = (rx.clone(), rtx.clone(), &run);
            s.spawn(move || {
                for job in rx.iter() {
                    if rtx.send(run(job)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(rx);
        drop(rtx);
        let mut tally = |r: Checked<S::Choice>, report: &mut ExploreReport| {
            report.check_seconds += r.seconds;
            report.states_recovered_alike += u64::from(r.recovered_alike);
            report.states_recovery_reused += u64::from(r.recovery_reused);
            if opts
                .stop_when_caught
                .is_some_and(|by| r.failures.iter().any(|f| by.counts(&f.check)))
            {
                caught.set(true);
            }
            if !r.failures.is_empty() {
                found.push((r.point, r.choice, r.failures));
            }
        };
        let t_enum = Instant::now();
        let res = match enumeration {
            DriveEnumeration::ReadSets { budget } => crate::observe::enumerate(
                explorer,
                &cx.promises,
                bases,
                budget,
                &tx,
                &rrx,
                &run,
                &|| caught.get(),
                report,
                &mut tally,
            ),
            DriveEnumeration::Bounded { lines, blocks } => {
                enumerate_bounded(explorer, &cx.promises, lines, blocks, &tx, report)
            }
        };
        let waiting = match res {
            Ok(w) => w,
            Err(e) => {
                enum_err = Some(e);
                0.0
            }
        };
        report.enumerate_seconds = t_enum.elapsed().as_secs_f64() - waiting;
        drop(tx);
        for r in rrx.iter() {
            tally(r, report);
        }
    });
    if let Some(e) = enum_err {
        return Err(Error::Failed(e));
    }
    report.reductions = [
        (true, "equal-content"),
        (enumeration.by_read_sets(), "read-set"),
        (enumeration.by_read_sets(), "block-judgement"),
        (cx.verdicts.is_some(), "recovered-alike"),
        (cx.recoveries.is_some(), "recovery-reuse"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, name)| name.to_string())
    .collect();
    Ok(found)
}
