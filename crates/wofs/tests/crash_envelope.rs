//! Crash tests over the persistent-memory envelope: after every entry of
//! a recorded workload's PM trace, every crash state x86 allows
//! (enumerated by what the checks read, none left unvisited) is mounted
//! and must hold the tree as it was after the last operation that
//! returned, or after the one in flight (WOFS operations are durable and
//! atomic at return). Each fault switch must make the check fail.

mod common;

use fsapi::testing;

use common::{check, churn, record, record_in, record_with, workload};
use pcie_sim::{PersistenceDomain, PmEventKind};
use wofs::{Faults, Options, PackageWrite};

#[test]
fn every_crash_state_of_the_workload_recovers_a_tree_the_run_had() {
    let r = testing::must_pass("wofs crash check", &record(&workload(), Faults::default(), 1));
    assert!(r.points > 100 && r.states > r.points as u64);
}

#[test]
fn every_crash_state_of_namespace_churn_recovers_a_tree_the_run_had() {
    testing::must_pass("wofs churn check", &record(&churn(), Faults::default(), 2));
}

#[test]
fn reclaiming_early_under_churn_resurrects_an_entry() {
    let faults = Faults {
        early_unlink_reclaim: true,
        ..Faults::default()
    };
    let r = check(&record(&churn(), faults, 2));
    let v = r.violation.expect("the causal rule is what prevents it");
    eprintln!("churn, early reclaim: {v}");
}

/// The shared canary ([`testing::must_fail`]) with `faults`.
fn must_fail(faults: Faults) -> String {
    testing::must_fail::<wofs::Wofs>(faults)
}

#[test]
fn without_the_clwb_a_returned_operation_may_be_lost() {
    must_fail(Faults {
        skip_clwb: true,
        ..Faults::default()
    });
}

#[test]
fn without_the_package_sfence_a_returned_operation_may_be_lost() {
    must_fail(Faults {
        skip_package_fence: true,
        ..Faults::default()
    });
}

#[test]
fn without_the_data_sfence_a_package_may_persist_without_its_data() {
    let v = must_fail(Faults {
        skip_data_fence: true,
        ..Faults::default()
    });
    assert!(v.contains("nonzero"), "{v}");
}

#[test]
fn without_the_checksum_check_a_torn_package_is_accepted() {
    must_fail(Faults {
        skip_crc_check: true,
        ..Faults::default()
    });
}

#[test]
fn reclaiming_an_unlink_package_early_resurrects_the_file() {
    must_fail(Faults {
        early_unlink_reclaim: true,
        ..Faults::default()
    });
}

#[test]
fn a_metadata_operation_has_one_ordering_point_and_a_write_two() {
    let ops = workload();
    let rec = record(&ops, Faults::default(), 1);
    let mut from = 0;
    eprintln!("op | stores | clwb | nt stores | sfence");
    for (op, &to) in ops.iter().zip(&rec.marks) {
        let entries = &rec.trace.entries()[from..to];
        let count = |k: PmEventKind| entries.iter().filter(|e| e.kind == k).count();
        let (stores, clwbs, nt, fences) = (
            count(PmEventKind::Store),
            count(PmEventKind::Clwb),
            count(PmEventKind::NtStore),
            count(PmEventKind::Sfence),
        );
        eprintln!("{op:?} | {stores} | {clwbs} | {nt} | {fences}");
        // The package: one to four lines, one clwb each, one sfence; the
        // data pages a write fills: 64 non-temporal stores each, one
        // sfence before the package.
        assert!((1..=4).contains(&clwbs) && stores == clwbs, "{op:?}");
        assert_eq!(fences, 1 + usize::from(nt > 0), "{op:?}");
        assert_eq!(nt % 64, 0, "{op:?}");
        if matches!(op, common::Op::Write(..)) {
            assert!(nt > 0, "{op:?}");
        }
        from = to;
    }
}

#[test]
fn under_eadr_the_clwb_is_not_needed_and_the_check_passes_without_it() {
    let faults = Faults {
        skip_clwb: true,
        ..Faults::default()
    };
    let rec = record_in(PersistenceDomain::Eadr, &workload(), faults, 1);
    // Under eADR only the data pages' non-temporal lines are ever pending.
    let r = check(&rec);
    assert_eq!(r.violation, None);
}

#[test]
fn packages_written_with_non_temporal_stores_pass_and_need_their_sfence() {
    let nt = |faults| Options {
        package_write: PackageWrite::NonTemporal,
        faults,
        ..Options::default()
    };
    let rec = record_with(PersistenceDomain::Adr, &churn(), nt(Faults::default()), 3);
    assert!(rec.trace.entries().iter().all(|e| e.kind != PmEventKind::Clwb));
    let r = check(&rec);
    eprintln!("non-temporal packages: {} points, {} states", r.points, r.states);
    assert_eq!(r.violation, None);
    assert!(r.points > 50);
    let no_fence = Faults {
        skip_package_fence: true,
        ..Faults::default()
    };
    let rec = record_with(PersistenceDomain::Adr, &churn(), nt(no_fence), 3);
    assert!(check(&rec).violation.is_some());
}

#[test]
fn a_recording_is_deterministic() {
    testing::recording_is_deterministic::<wofs::Wofs>();
}
