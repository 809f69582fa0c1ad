//! HoRAE's ordering primitives under crash exploration: the `barriers`
//! workload (fbarrier, fdatabarrier, then an fsync of another file) keeps
//! every promise in every drive mode, and in the `horae` modes a barrier's
//! promise starts only where the later fsync returns (ordered is not
//! durable), while elsewhere it starts at the barrier's own return.

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

/// Where each promise of `op` starts, and where the first `fsync /c`'s
/// does.
fn starts(mode: ModeName) -> (Vec<usize>, usize) {
    let rec = record(&workload("barriers"), &config(mode, "optane-905p")).expect("record");
    let of = |name: &str| -> Vec<usize> {
        rec.promises
            .iter()
            .filter(|p| p.op == name && p.until > p.from)
            .map(|p| p.from)
            .collect()
    };
    let fsync = of("fsync /c");
    assert_eq!(fsync.len(), 1, "{:?}", rec.promises);
    let mut barriers = of("fbarrier /d");
    barriers.extend(of("fdatabarrier /b"));
    (barriers, fsync[0])
}

#[test]
fn a_barrier_is_promised_from_the_later_fsync_in_the_horae_modes_and_at_once_elsewhere() {
    for mode in [ModeName::Horae, ModeName::Horae2] {
        let (barriers, fsync) = starts(mode);
        assert!(
            !barriers.is_empty() && barriers.iter().all(|b| *b == fsync),
            "{mode:?}: {barriers:?} {fsync}"
        );
    }
    for mode in [ModeName::Classic, ModeName::Mq] {
        let (barriers, fsync) = starts(mode);
        assert!(
            !barriers.is_empty() && barriers.iter().all(|b| *b < fsync),
            "{mode:?}: {barriers:?} {fsync}"
        );
    }
}
