//! `classic-cc`: Ext4 whose JBD2 commits each transaction as one ccNVMe
//! transaction (`mqfs::JbdCommit::CcNvmeTransaction`, ccNVMe 7.5.1's
//! +ccNVMe). It keeps every promise on workloads of both drive kinds, and
//! its recovery's use of the driver's report of unfinished transactions
//! shows when switched off (`replay-unfinished`): a crash inside a commit
//! is then taken for a damaged journal.

mod common;

use common::{config, opts, workload};
use crashfuzz::record::Fault;
use crashfuzz::{explore, ModeName};

#[test]
fn classic_cc_passes_on_both_drive_kinds() {
    for name in ["generic_035", "create_delete", "random-1-3x6"] {
        let w = workload(name);
        for profile in ["optane-905p", "flash-vwc"] {
            let r = explore(&w, &config(ModeName::ClassicCc, profile), &opts(), &w.name).expect("explore");
            assert!(r.states_checked > 0, "{name} {profile}");
            assert!(r.violations.is_empty(), "{name} {profile}: {:?}", r.violations);
        }
    }
}

#[test]
fn recovery_without_the_drivers_verdict_reports_a_torn_commit_as_damage() {
    let w = workload("generic_035");
    let mut cfg = config(ModeName::ClassicCc, "flash-vwc");
    cfg.fault = Some(Fault::ReplayUnfinished);
    let off = explore(&w, &cfg, &opts(), &w.name).expect("explore");
    assert!(
        !off.violations.is_empty(),
        "not caught in {} states",
        off.states_checked
    );
    assert!(
        off.violations
            .iter()
            .all(|v| v.check == "fsck" && v.detail.contains("JournalDamaged")),
        "{:?}",
        off.violations
    );
    // The same states with the verdict: nothing.
    let on = explore(&w, &config(ModeName::ClassicCc, "flash-vwc"), &opts(), &w.name).expect("explore");
    assert!(on.violations.is_empty(), "{:?}", on.violations);
    assert!(Fault::ReplayUnfinished.applies_to(ModeName::ClassicCc));
    assert!(!Fault::ReplayUnfinished.applies_to(ModeName::Classic));
    assert!(!Fault::NoRevoke.applies_to(ModeName::ClassicCc));
}
