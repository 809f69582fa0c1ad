//! HoRAE's ordering primitives under crash exploration: the `barriers`
//! workload (fbarrier, fdatabarrier, then an fsync of another file) keeps
//! every promise in every drive mode, and in the `horae` modes a barrier's
//! promise starts only where the later fsync returns (ordered is not
//! durable) and, before that, binds the states where a name made after
//! the barrier exists; elsewhere it starts at the barrier's own return.

use crashfuzz::oracle::Expect;
use crashfuzz::{explore, record, ModeName};

mod common;
use common::{config, opts, workload};

#[test]
fn barriers_keep_every_promise_in_every_mode() {
    let w = workload("barriers");
    for mode in [ModeName::Classic, ModeName::Horae, ModeName::Horae2, ModeName::Mq] {
        for profile in ["optane-905p", "flash-vwc"] {
            let r = explore(&w, &config(mode, profile), &opts(), &w.name).expect("explore");
            assert_eq!(r.states_not_visited, 0, "{mode:?} {profile}");
            assert!(r.violations.is_empty(), "{mode:?} {profile}: {:?}", r.violations);
        }
    }
}

/// Where the barriers' promises start (`fbarrier /d`, `fdatabarrier /b`):
/// the durable ones, and the orders (in force where the marker `/d`,
/// made after both, exists); and where `fsync /c`'s starts.
fn starts(mode: ModeName) -> (Vec<usize>, Vec<usize>, usize) {
    let rec = record(&workload("barriers"), &config(mode, "optane-905p")).expect("record");
    let of = |names: &[&str], ordered: bool| -> Vec<usize> {
        rec.promises
            .iter()
            .filter(|p| names.contains(&p.op.as_str()) && p.until > p.from)
            .filter(|p| matches!(p.expect, Expect::Ordered { .. }) == ordered)
            .map(|p| p.from)
            .collect()
    };
    let fsync = of(&["fsync /c"], false);
    assert_eq!(fsync.len(), 1, "{:?}", rec.promises);
    let barriers = ["fbarrier /d", "fdatabarrier /b"];
    (
        of(&barriers, false),
        of(&["fbarrier /a", "fdatabarrier /b"], true),
        fsync[0],
    )
}

#[test]
fn a_barrier_is_promised_from_the_later_fsync_in_the_horae_modes_and_at_once_elsewhere() {
    for mode in [ModeName::Horae, ModeName::Horae2] {
        let (durable, ordered, fsync) = starts(mode);
        assert!(
            !durable.is_empty() && durable.iter().all(|b| *b == fsync),
            "{mode:?}: {durable:?} {fsync}"
        );
        // Ordered from `create /d` on, before the fsync makes them durable
        // (and widened copies after a later write of /a).
        assert!(
            ordered.iter().filter(|b| **b < fsync).count() >= 2,
            "{mode:?}: {ordered:?} {fsync}"
        );
    }
    for mode in [ModeName::Classic, ModeName::Mq] {
        let (durable, ordered, fsync) = starts(mode);
        assert!(
            !durable.is_empty() && durable.iter().all(|b| *b < fsync),
            "{mode:?}: {durable:?} {fsync}"
        );
        assert!(
            ordered.is_empty(),
            "{mode:?}: barriers are syncs here, nothing waits"
        );
    }
}

/// The markers of a recorded run's orders.
fn markers(text: &str) -> Vec<String> {
    let w = crashfuzz::parse("markers", text).expect("parse");
    let rec = record(&w, &config(ModeName::Horae, "optane-905p")).expect("record");
    let mut m: Vec<String> = rec
        .promises
        .iter()
        .filter_map(|p| match &p.expect {
            Expect::Ordered { marker, .. } => Some(marker.clone()),
            _ => None,
        })
        .collect();
    m.dedup();
    m
}

#[test]
fn only_a_name_the_run_never_had_marks_an_order() {
    // /y/f existed before the barrier (moved there with its directory)
    // and /s in the setup: made again, neither marks; /n, new, does.
    let text = "\
setup mkdir /x
setup create /x/f
setup create /s
setup create /a
rename /x /y
unlink /s
write /a 0 4096 3
fbarrier /a
unlink /y/f
create /y/f
create /s
create /n
";
    assert_eq!(markers(text), vec!["/n".to_string()]);
}
