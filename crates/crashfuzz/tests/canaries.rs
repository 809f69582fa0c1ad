//! Every ordering mechanism matters: switched off in turn, each lets
//! crashfuzz find a violation that breaks a promise and that its replay id
//! reproduces, on a workload that passes with the mechanism on. The cases
//! are the default campaign's self-checks (`crashfuzz::SELF_CHECKS`).

use crashfuzz::replay::replay;
use crashfuzz::{explore, ExploreOptions, SELF_CHECKS};

#[test]
fn each_ordering_mechanism_switched_off_is_caught_and_replays() {
    let opts = ExploreOptions {
        jobs: 2,
        ..ExploreOptions::default()
    };
    for sc in SELF_CHECKS {
        let (w, on) = sc.config(false).expect("self-check");
        let r = explore(&w, &on, &opts, &w.name).expect("explore");
        assert!(
            r.violations.is_empty(),
            "{} with every mechanism: {:?}",
            sc.workload,
            r.violations
        );
        let (r, caught) = sc.run(&opts).expect("explore");
        let fault = sc.fault;
        let v = &r.violations[caught.unwrap_or_else(|| {
            panic!(
                "{fault:?} on {}: not caught in {} states ({:?})",
                sc.workload, r.states_checked, r.violations
            )
        })];
        assert!(sc.caught_by.counts(&v.check));
        assert!(v.id.contains(&format!("+{}", fault.name())), "{}", v.id);
        let out = replay(&v.id, 1).expect("replay");
        assert!(
            out.failures.iter().any(|f| f.check == v.check),
            "{fault:?}: replay of {} found {:?}",
            v.id,
            out.failures
        );
    }
}

/// A self-check stops after the first wave of checks with a counted
/// violation: what it reports as caught is a counted violation of the full
/// run at the full run's first crash point with one, the same on every
/// run, and it checks fewer states than the full run.
#[test]
fn a_self_check_stops_at_its_first_catch_and_finds_the_full_runs_first() {
    let opts = ExploreOptions {
        jobs: 2,
        ..ExploreOptions::default()
    };
    let sc = SELF_CHECKS
        .iter()
        .find(|sc| sc.fault.name() == "no-flush-read" && sc.workload == "generic_035")
        .expect("self-check");
    let (w, off) = sc.config(true).expect("self-check");
    let full = explore(&w, &off, &opts, &w.name).expect("explore");
    assert!(!full.stopped_early);
    let first = full
        .violations
        .iter()
        .find(|v| sc.caught_by.counts(&v.check))
        .expect("caught");
    let (r, caught) = sc.run(&opts).expect("explore");
    assert!(r.stopped_early);
    let v = &r.violations[caught.expect("caught")];
    assert!(sc.caught_by.counts(&v.check));
    assert_eq!(v.crash_point, first.crash_point);
    let (again, caught_again) = sc.run(&opts).expect("explore");
    assert_eq!(again.violations[caught_again.expect("caught")].id, v.id);
    assert!(
        r.states_checked < full.states_checked,
        "{} vs {}",
        r.states_checked,
        full.states_checked
    );
    // Every violation the stopped run found is one the full run found.
    assert!(r.violations.iter().all(|v| full.violations.contains(v)));
}
