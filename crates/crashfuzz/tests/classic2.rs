//! `classic2`: Ext4 on md RAID 0 over two drives, explored as the product
//! of each drive's crash choices; md's flush of every member for the
//! commit record's PREFLUSH switched off (`md-flush-one`) is caught and
//! replays (also in `canaries.rs`, as a self-check).

use crashfuzz::record::Fault;
use crashfuzz::replay::{replay, ReplayId};
use crashfuzz::{explore, ModeName, RunConfig};

mod common;
use common::{config, opts, workload};

#[test]
fn ext4_on_two_drives_keeps_every_promise_on_generic_035() {
    let w = workload("generic_035");
    for profile in ["optane-905p", "flash-vwc"] {
        let r = explore(&w, &config(ModeName::Classic2, profile), &opts(), &w.name).expect("explore");
        assert!(r.crash_points > 100 && r.states_checked > 5, "{profile}: {r:?}");
        assert_eq!(r.states_not_visited, 0, "{profile}: every state judged");
        assert!(r.violations.is_empty(), "{profile}: {:?}", r.violations);
    }
}

#[test]
fn md_flush_one_is_caught_on_two_drives_and_replays() {
    let w = workload("create_delete");
    let cfg = RunConfig {
        fault: Some(Fault::MdFlushOne),
        ..config(ModeName::Classic2, "flash-vwc")
    };
    let r = explore(&w, &cfg, &opts(), &w.name).expect("explore");
    let v = r
        .violations
        .iter()
        .find(|v| v.check == "durable-data")
        .unwrap_or_else(|| panic!("not caught: {:?}", r.violations));
    let id = ReplayId::parse(&v.id).expect("id");
    assert_eq!(id.devices.as_ref().map(|d| d.media.len()), Some(2), "{}", v.id);
    let out = replay(&v.id, 1).expect("replay");
    assert!(
        out.failures.iter().any(|f| f.check == v.check),
        "{:?}",
        out.failures
    );
    // The mechanism applies to striped Ext4 only.
    assert!(Fault::MdFlushOne.applies_to(ModeName::Classic2));
    assert!(!Fault::MdFlushOne.applies_to(ModeName::Classic));
    assert!(!Fault::MdFlushOne.applies_to(ModeName::Horae2));
}
