//! Crash tests with the PM envelope: after every trace entry of a
//! workload, every crash state x86 allows (enumerated by what the checks
//! read, none left unvisited) mounts to a valid tree with only leaks, and
//! keeps every file fsynced before the crash; with each mechanism
//! switched off, some state does not.

mod common;

use common::crash::{check, random_workload, record, workload};
use pcie_sim::PersistenceDomain;
use soupfs::Faults;

#[test]
fn every_crash_state_mounts_to_a_valid_tree_with_only_leaks() {
    let rec = record(&workload(), Faults::default(), PersistenceDomain::Adr, 1);
    let out = check(&rec, false);
    eprintln!(
        "soupfs crash: {} points, {} states checked, {} distinct images mounted ({} states with leaks; {} allowed states unvisited), {:.2?}, {:.0} states/s",
        out.points,
        out.states,
        out.judged,
        out.leaked_states,
        out.left_out,
        out.elapsed,
        out.per_second()
    );
    assert!(
        out.violations.is_empty(),
        "{:#?}",
        &out.violations[..out.violations.len().min(5)]
    );
    assert_eq!(out.left_out, 0, "every allowed state is judged");
    assert!(
        out.leaked_states > 0,
        "some crash states leak (and the collector frees them)"
    );
    assert_eq!(rec.synced.len(), 3);
    let renamed = rec
        .synced
        .iter()
        .find(|s| s.path == "/d/a")
        .expect("/d/a fsynced");
    assert_eq!(renamed.alts, ["/e/a2"], "the rename is followed");
    assert_eq!(renamed.until, usize::MAX);
}

fn caught(faults: Faults) -> String {
    let rec = record(&workload(), faults, PersistenceDomain::Adr, 1);
    let out = check(&rec, true);
    eprintln!("{faults:?}: {} states to the first violation", out.states);
    out.violations
        .into_iter()
        .next()
        .map(|v| v.to_string())
        .unwrap_or_default()
}

#[test]
fn a_missing_clwb_is_caught() {
    let v = caught(Faults {
        skip_clwb: true,
        ..Faults::default()
    });
    assert!(!v.is_empty(), "no violation found");
    eprintln!("{v}");
}

#[test]
fn a_missing_sfence_is_caught() {
    let v = caught(Faults {
        skip_sfence: true,
        ..Faults::default()
    });
    assert!(!v.is_empty(), "no violation found");
    eprintln!("{v}");
}

#[test]
fn publishing_the_dentry_before_the_inode_is_caught() {
    let v = caught(Faults {
        publish_before_init: true,
        ..Faults::default()
    });
    // The dentry reaches an inode, name or dentry not yet written, or
    // not yet allocated in the persistent bitmap.
    assert!(
        v.contains("uninitialized") || v.contains("free in the bitmap"),
        "{v}"
    );
}

#[test]
fn freeing_before_the_unpublish_is_caught() {
    let v = caught(Faults {
        free_before_unpublish: true,
        ..Faults::default()
    });
    assert!(v.contains("free in the bitmap"), "{v}");
}

#[test]
fn random_workloads_leave_only_valid_trees() {
    // Seeds: `SOUPFS_CRASH_SEEDS` (default 1 in a debug build, 3
    // optimized), 30 operations each.
    let default = if cfg!(debug_assertions) { 1 } else { 3 };
    let seeds: u64 = std::env::var("SOUPFS_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    for seed in 0..seeds {
        let rec = record(
            &random_workload(seed, 30),
            Faults::default(),
            PersistenceDomain::Adr,
            seed,
        );
        let out = check(&rec, false);
        eprintln!(
            "random seed {seed}: {} points, {} states checked, {} fsyncs, {} refused, {:.0} states/s",
            out.points,
            out.states,
            rec.synced.len(),
            rec.refused.len(),
            out.per_second()
        );
        assert!(
            out.violations.is_empty(),
            "seed {seed}: {:#?}",
            &out.violations[..out.violations.len().min(5)]
        );
        assert_eq!(out.left_out, 0, "seed {seed}: every allowed state is judged");
    }
}

#[test]
fn under_eadr_a_missing_clwb_is_harmless_and_a_dropped_edge_is_not() {
    // The caches are in the persistence domain: every store persists when
    // it executes, in order, so no crash state lacks a flushed line...
    let skip = Faults {
        skip_clwb: true,
        ..Faults::default()
    };
    let rec = record(&workload(), skip, PersistenceDomain::Eadr, 1);
    let out = check(&rec, true);
    assert!(out.violations.is_empty(), "{:?}", out.violations);
    // ...but an edge dropped from the order is still a bug.
    let early = Faults {
        publish_before_init: true,
        ..Faults::default()
    };
    let rec = record(&workload(), early, PersistenceDomain::Eadr, 1);
    let out = check(&rec, true);
    assert!(
        !out.violations.is_empty(),
        "the early publish is caught under eADR too"
    );
}

#[test]
fn removing_the_old_name_before_the_new_one_is_persisted_is_caught() {
    let v = caught(Faults {
        rename_remove_first: true,
        ..Faults::default()
    });
    assert!(v.contains("/d/a lost"), "{v}");
}
