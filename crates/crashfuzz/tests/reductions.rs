//! The checker's reductions keep every verdict: verdicts taken from a state
//! that recovered to the same image, and recoveries reused
//! (`crashfuzz::reuse`). Explored with both, with verdicts only, and by
//! brute force (every distinct state booted, recovered and judged in
//! full), runs find the same states and the same violations, with every
//! ordering mechanism switched off in turn (so there are violations to
//! keep) and in every mode on a cached drive (where states differ in
//! blocks recovery never reads).

mod common;

use common::{bounded, config, workload};
use crashfuzz::{explore, ExploreOptions, ExploreReport, ModeName, RunConfig, Workload, SELF_CHECKS};

/// The run explored with every reduction, and by brute force; asserts
/// that with verdict reuse alone it finds what the brute force finds too.
/// All three enumerate every state up to `o`'s bounds (the read-set
/// reduction, which checks fewer states, is compared with brute force
/// state by state in `tests/read_sets.rs`).
fn both(w: &Workload, cfg: &RunConfig, o: &ExploreOptions) -> (ExploreReport, ExploreReport) {
    assert!(!o.enumeration.by_read_sets(), "compared up to the bounds");
    let with = explore(w, cfg, o, &w.name).expect("explore");
    let run = |reuse_verdicts, reuse_recovery| {
        let o = ExploreOptions {
            reuse_verdicts,
            reuse_recovery,
            ..o.clone()
        };
        explore(w, cfg, &o, &w.name).expect("explore")
    };
    let brute = run(false, false);
    assert_eq!(brute.states_recovered_alike, 0, "no verdict reuse");
    assert_same(&format!("{} verdicts only", w.name), &run(true, false), &brute);
    (with, brute)
}

/// Same states, same violations; returns the states that did not boot.
fn assert_same(what: &str, with: &ExploreReport, without: &ExploreReport) -> u64 {
    assert_eq!(without.states_recovery_reused, 0, "{what}: reuse switched off");
    assert_eq!(with.states_total, without.states_total, "{what}");
    assert_eq!(with.states_checked, without.states_checked, "{what}");
    let key = |r: &ExploreReport| -> Vec<(String, String, String)> {
        r.violations
            .iter()
            .map(|v| (v.id.clone(), v.check.clone(), v.detail.clone()))
            .collect()
    };
    assert_eq!(key(with), key(without), "{what}: violations differ");
    with.states_recovery_reused
}

#[test]
fn reuse_keeps_the_violations_of_every_mechanism_switched_off() {
    let o = bounded(6, 4);
    let mut reused = 0;
    for sc in SELF_CHECKS {
        let (w, cfg) = sc.config(true).expect("self-check");
        let (with, without) = both(&w, &cfg, &o);
        assert!(!without.violations.is_empty(), "{:?} is caught", sc.fault);
        reused += assert_same(&format!("{:?}", sc.fault), &with, &without);
    }
    assert!(
        reused > 0,
        "no state reused a recovery: the comparison compared nothing"
    );
}

#[test]
fn reuse_keeps_every_verdict_on_a_cached_drive() {
    let mut reused = 0;
    for name in ["generic_035", "generic_106"] {
        let w = workload(name);
        for mode in [
            ModeName::None,
            ModeName::Classic,
            ModeName::Horae,
            ModeName::Mq,
            ModeName::MqAtomic,
        ] {
            let (with, without) = both(&w, &config(mode, "flash-vwc"), &bounded(4, 4));
            reused += assert_same(&format!("{name} {mode:?}"), &with, &without);
        }
    }
    assert!(
        reused > 0,
        "no state reused a recovery: the comparison compared nothing"
    );
}

#[test]
fn reuse_keeps_every_verdict_on_two_drives() {
    // HoraeFS striped over two cached drives: the recovery memo branches
    // on blocks of both drives and the verdict key hashes both.
    let mut reused = 0;
    for name in ["generic_035", "generic_106"] {
        let w = workload(name);
        let (with, without) = both(&w, &config(ModeName::Horae2, "flash-vwc"), &bounded(4, 4));
        reused += assert_same(&format!("{name} horae2"), &with, &without);
        assert!(
            with.states_recovered_alike > 0,
            "{name}: no verdict reused on two drives"
        );
    }
    assert!(
        reused > 0,
        "no state of two drives reused a recovery: the comparison compared nothing"
    );
}
