//! Every ordering mechanism matters: switched off in turn, each lets
//! crashfuzz find a violation that its replay id reproduces, on a workload
//! that passes with the mechanism on.

use crashfuzz::builtin::by_name;
use crashfuzz::record::Fault;
use crashfuzz::replay::replay;
use crashfuzz::{explore, ExploreOptions, ModeName, RunConfig};

/// (fault, workload, mode, drive) that exposes it.
const CASES: [(Fault, &str, ModeName, &str); 5] = [
    (Fault::NoFlushRead, "generic_035", ModeName::Mq, "optane-905p"),
    (Fault::NoFence, "generic_035", ModeName::Mq, "optane-905p"),
    (Fault::NoCommitFua, "generic_035", ModeName::Classic, "flash-vwc"),
    (
        Fault::OutOfOrder,
        "canary_out_of_order",
        ModeName::Mq,
        "optane-905p",
    ),
    (Fault::NoRevoke, "canary_block_reuse", ModeName::Mq, "optane-905p"),
];

#[test]
fn each_ordering_mechanism_switched_off_is_caught_and_replays() {
    let opts = ExploreOptions {
        bound_lines: 6,
        bound_blocks: 4,
        jobs: 2,
        ..ExploreOptions::default()
    };
    for (fault, name, mode, drive) in CASES {
        let w = by_name(name).expect("built-in").remove(0);
        let profile = RunConfig::profile_by_name(drive).expect("profile");
        let on = RunConfig::new(mode, profile.clone(), 1);
        let r = explore(&w, &on, &opts, &w.name).expect("explore");
        assert!(
            r.violations.is_empty(),
            "{name} with every mechanism: {:?}",
            r.violations
        );
        let off = RunConfig {
            fault: Some(fault),
            ..on
        };
        let r = explore(&w, &off, &opts, &w.name).expect("explore");
        let v = r
            .violations
            .first()
            .unwrap_or_else(|| panic!("{fault:?} on {name}: no violation in {} states", r.states_checked));
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
