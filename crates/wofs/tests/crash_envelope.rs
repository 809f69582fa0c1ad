//! Crash tests over the persistent-memory envelope: after every entry of
//! a recorded workload's PM trace, every crash state x86 allows (all of
//! them up to a bound on the pending items, sampled past it) is mounted
//! and must hold the tree as it was after the last operation that
//! returned, or after the one in flight (WOFS operations are durable and
//! atomic at return). Each fault switch must make the check fail.

mod common;

use common::{check, record, workload};
use wofs::Faults;

const BOUND: u32 = 6;

#[test]
fn every_crash_state_of_the_workload_recovers_a_tree_the_run_had() {
    let rec = record(&workload(), Faults::default(), 1);
    let r = check(&rec, BOUND);
    eprintln!(
        "wofs crash check: {} points, {} states ({} distinct mounts, {} points sampled past the bound) in {:.2?}: {:.0} states/s",
        r.points,
        r.states,
        r.mounts,
        r.sampled_points,
        r.elapsed,
        r.per_second()
    );
    assert_eq!(r.violation, None);
    assert!(r.points > 100 && r.states > r.points as u64);
}
