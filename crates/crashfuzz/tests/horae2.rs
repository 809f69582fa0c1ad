//! `horae2`: HoraeFS on a volume striped over two drives, recorded on a
//! machine with both and explored as the product of each drive's crash
//! choices, by what checks read of both drives (every state judged, none
//! left unvisited); the joint FLUSH switched off is caught and replays (also in
//! `canaries.rs`, as a self-check), ids carry one media list per drive,
//! and a two-drive run is not saved in the one-drive format.

use crashfuzz::record::Fault;
use crashfuzz::{explore, record, ModeName, SavedRun};

mod common;
use common::{caught_on_two_drives, config, opts, workload};

#[test]
fn horae_on_two_drives_keeps_every_promise_on_generic_035() {
    let w = workload("generic_035");
    for profile in ["optane-905p", "flash-vwc"] {
        let r = explore(&w, &config(ModeName::Horae2, profile), &opts(), &w.name).expect("explore");
        assert!(r.crash_points > 100 && r.states_checked > 5, "{profile}: {r:?}");
        assert_eq!(
            r.states_total,
            r.states_checked + r.states_deduplicated + r.states_by_read_set,
            "{profile}: every state checked, equal to one checked, or judged by what checks read"
        );
        assert_eq!(r.states_not_visited, 0, "{profile}: every state judged");
        assert!(
            r.reductions.iter().any(|x| x == "read-set"),
            "{profile}: {:?}",
            r.reductions
        );
        assert!(r.violations.is_empty(), "{profile}: {:?}", r.violations);
        eprintln!(
            "horae2 generic_035 {profile}: {} points, {} states, {} checked, {} not visited",
            r.crash_points, r.states_total, r.states_checked, r.states_not_visited
        );
    }
}

#[test]
fn the_recording_holds_both_drives_and_both_take_writes() {
    let w = workload("create_delete");
    let rec = record(&w, &config(ModeName::Horae2, "optane-905p")).expect("record");
    assert_eq!(rec.more_drives.len(), 1);
    // Media writes (DATA_IN) reach both ports during the run.
    let ports: std::collections::BTreeSet<u8> = rec
        .trace
        .entries()
        .iter()
        .filter(|e| e.kind == pcie_sim::EventKind::Device && e.code == nvme_ctrl::events::DATA_IN)
        .map(|e| e.source)
        .collect();
    assert_eq!(ports.into_iter().collect::<Vec<_>>(), vec![0, 1]);
    let cfg = config(ModeName::Horae2, "optane-905p");
    let saved = SavedRun::from_recording(&rec, &cfg);
    let path = std::env::temp_dir().join("crashfuzz-horae2-unsaved.run");
    let e = saved.expect("saved").save(&path).unwrap_err().to_string();
    assert!(e.contains("several drives") && !e.contains('\n'), "{e}");
    assert!(!path.exists());
}

#[test]
fn no_joint_flush_is_caught_on_two_drives_and_replays() {
    caught_on_two_drives(
        "create_delete",
        ModeName::Horae2,
        "flash-vwc",
        Fault::HoraeNoJointFlush,
        "durable-data",
    );
    // The fault does not exist on one drive.
    assert!(Fault::HoraeNoJointFlush.check_modes(&[ModeName::Horae]).is_err());
}
