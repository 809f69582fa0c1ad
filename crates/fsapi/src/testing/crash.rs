//! The crash tests' thin wrappers over the crash harness ([`crate::crash`]):
//! record a fixed workload, check it under the file system's own promise,
//! stop at the first violation, and panic where a test must fail.

use std::time::Duration;

use pcie_sim::PersistenceDomain;

use super::Op;
use crate::crash::{self, CheckOptions, Enumeration, PmFs};

/// A recorded run ([`crate::crash::Recording`]).
pub type Recording<F> = crash::Recording<F>;

/// Runs `ops` on a freshly formatted file system mounted with `how`, in
/// `domain`, and records it (no setup). Panics if the run fails.
pub fn record<F: PmFs>(domain: PersistenceDomain, ops: &[Op], how: F::Mount, seed: u64) -> Recording<F> {
    let ops: Vec<crash::Op> = ops.iter().map(crash::Op::from).collect();
    crash::record::<F>(&[], &ops, how, domain, seed).expect("the workload records")
}

/// What the checker did.
#[derive(Debug, Default)]
pub struct Report {
    /// Crash points (trace entries).
    pub points: usize,
    /// Crash states checked (each a materialized image).
    pub states: u64,
    /// Distinct images mounted (the others reuse a verdict).
    pub mounts: u64,
    /// Crash points whose read-set tree the budget cut (some of their
    /// states unvisited).
    pub cut_points: usize,
    /// Allowed states the read-set enumeration's budget left unvisited (at
    /// least that many).
    pub unvisited: u64,
    /// Wall-clock time of the check.
    pub elapsed: Duration,
    /// The first violation: where, and what was wrong.
    pub violation: Option<String>,
}

impl Report {
    /// Crash states checked per second.
    pub fn per_second(&self) -> f64 {
        self.states as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// Most checks per crash point of [`check`]'s read-set enumeration
/// (crashfuzz's PM budget).
pub const READ_SET_BUDGET: usize = 1 << 15;

/// Checks every crash state of `rec` under `F`'s promise, enumerated by
/// what the checks read ([`crate::crash::check`] with
/// [`Enumeration::ReadSets`], at most [`READ_SET_BUDGET`] checks per
/// point), stopping at the first violation. Panics if the check cannot
/// run.
pub fn check<F: PmFs>(rec: &Recording<F>) -> Report {
    let opts = CheckOptions {
        enumeration: Enumeration::ReadSets {
            budget: READ_SET_BUDGET,
        },
        first_only: true,
        promise: F::PROMISE,
    };
    let r = crash::check(rec, &opts).expect("the crash states are explored");
    Report {
        points: r.points,
        states: r.states,
        mounts: r.judged,
        cut_points: r.sampled_points,
        unvisited: r.left_out,
        elapsed: r.elapsed,
        violation: r.violations.first().map(ToString::to_string),
    }
}

/// Checks `rec` ([`check`]), prints what was checked under `label`, and
/// asserts that no crash state broke the contract and none was left
/// unvisited.
pub fn must_pass<F: PmFs>(label: &str, rec: &Recording<F>) -> Report {
    let r = check(rec);
    eprintln!(
        "{label}: {} points, {} states checked ({} distinct mounts, {} states unvisited) in {:.2?}: {:.0} states/s",
        r.points,
        r.states,
        r.mounts,
        r.unvisited,
        r.elapsed,
        r.per_second()
    );
    assert_eq!(r.violation, None);
    assert_eq!(r.unvisited, 0, "{label}: every allowed state is judged");
    r
}

/// Records [`super::workload`] mounted with `how` and checks it; the
/// check must find a violation (the canary: the switched-off mechanism is
/// what the contract depends on). Returns the violation.
pub fn must_fail<F: PmFs>(how: impl Into<F::Mount>) -> String {
    let how = how.into();
    let rec = record::<F>(PersistenceDomain::Adr, &super::workload(), how.clone(), 1);
    let r = check(&rec);
    eprintln!("{how:?}: {} states in {:.2?}", r.states, r.elapsed);
    let v = r
        .violation
        .expect("the crash check finds the switched-off mechanism");
    eprintln!("  {v}");
    v
}

/// Two recordings of [`super::workload`] with the same seed are the same
/// trace, marks and trees.
pub fn recording_is_deterministic<F: PmFs>() {
    let rec = || record::<F>(PersistenceDomain::Adr, &super::workload(), F::Mount::default(), 9);
    let (a, b) = (rec(), rec());
    assert_eq!(a.trace.hash(), b.trace.hash());
    assert_eq!(a.marks, b.marks);
    assert_eq!(a.trees, b.trees);
}
