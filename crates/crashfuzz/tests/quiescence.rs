//! Recording runs until the machine is quiescent, not until the last
//! operation returns: fatomic returns once its transaction is atomic in the
//! PMR, before the drive has executed it, and that I/O must be in the
//! recorded trace to be crash-tested.

use crashfuzz::{record, ModeName};
use nvme_ctrl::events;
use pcie_sim::EventKind;

mod common;
use common::{config, workload};

#[test]
fn the_drive_work_of_the_last_fatomic_is_recorded() {
    let w = workload("generic_035");
    for profile in ["optane-905p", "flash-vwc"] {
        let rec = record(&w, &config(ModeName::MqAtomic, profile)).expect("record");
        let last_return = rec.ops.iter().map(|o| o.end).max().expect("operations ran");
        let entries = rec.trace.entries();
        // The drive took the last transaction's blocks after the last
        // operation returned: a trace cut at the return would lack them.
        let data_in_after = entries[last_return..]
            .iter()
            .filter(|e| e.kind == EventKind::Device && e.code == events::DATA_IN)
            .count();
        assert!(
            data_in_after > 0,
            "{profile}: no block reached the drive after the last fatomic returned"
        );
        // And the run ends with every write command completed.
        let completions_after = entries[last_return..]
            .iter()
            .filter(|e| {
                e.kind == EventKind::Device
                    && matches!(e.code, events::WRITE_DONE | events::WRITE_DONE_DURABLE)
            })
            .count();
        assert!(
            completions_after > 0,
            "{profile}: no write completed after the last return"
        );
    }
}

#[test]
fn a_durable_mode_run_ends_with_nothing_in_flight() {
    // fsync returns only when its I/O is done, so the quiescence wait adds
    // no drive work there: no block arrives after the last return.
    let w = workload("generic_035");
    let rec = record(&w, &config(ModeName::Mq, "optane-905p")).expect("record");
    let last_return = rec.ops.iter().map(|o| o.end).max().expect("operations ran");
    let data_in_after = rec.trace.entries()[last_return..]
        .iter()
        .filter(|e| e.kind == EventKind::Device && e.code == events::DATA_IN)
        .count();
    assert_eq!(data_in_after, 0);
}
