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
