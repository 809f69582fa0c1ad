//! `classic2`: Ext4 on md RAID 0 over two drives, explored as the product
//! of each drive's crash choices; md's flush of every member for the
//! commit record's PREFLUSH switched off (`md-flush-one`) is caught and
//! replays (also in `canaries.rs`, as a self-check).

use crashfuzz::record::Fault;
use crashfuzz::{explore, ModeName};

mod common;
use common::{caught_on_two_drives, config, opts, workload};

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
    caught_on_two_drives(
        "create_delete",
        ModeName::Classic2,
        "flash-vwc",
        Fault::MdFlushOne,
        "durable-data",
    );
    // The mechanism applies to striped Ext4 only.
    assert!(Fault::MdFlushOne.applies_to(ModeName::Classic2));
    assert!(!Fault::MdFlushOne.applies_to(ModeName::Classic));
    assert!(!Fault::MdFlushOne.applies_to(ModeName::Horae2));
}
