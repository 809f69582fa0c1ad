//! The read-set enumeration of persistent-memory crash states
//! ([`pcie_sim::pmem::explore_read_sets`], over the one read-set tree
//! [`pcie_sim::readset`]) against brute force: on the PM canary run of WOFS,
//! SoupFS and PMFS, under ADR and eADR, with and without a fault switch,
//! at every crash point with few pending items, every state the envelope
//! allows is built and judged in full; it must lie in exactly one leaf of
//! the point's tree and get that leaf's verdict. And a tree that ignores
//! what the checks read takes wrong verdicts on the same runs: the
//! comparison can fail.

mod common;

use common::Compared;
use fsapi::crash::{self, judge_state, Op, PmFs, Recording};
use pcie_sim::pmem::{PmClasses, PmConstraint};
use pcie_sim::readset::ReadSetTree;
use pcie_sim::{PersistenceDomain, PmemCursor};
use pmfs::Pmfs;
use soupfs::SoupFs;
use wofs::Wofs;

/// Points with more pending items than this are not compared (2^N states
/// judged in full each).
const MOST_ITEMS: usize = 9;

/// The run: crashfuzz's PM canary (every operation the PM file systems
/// have, fsyncs, a rename of an fsynced file after a sync, pauses for
/// SoupFS's persister), the workload of the PM self-checks.
fn ops() -> (Vec<Op>, Vec<Op>) {
    let w = crashfuzz::builtin::pm_canary();
    crashfuzz::pm::translate(&w).expect("the canary translates")
}

fn recording<F: PmFs>(domain: PersistenceDomain, fault: Option<&str>) -> Recording<F> {
    let how = match fault {
        None => F::Mount::default(),
        Some(name) => {
            F::fault_switches()
                .into_iter()
                .find(|s| s.name == name)
                .expect("a fault switch of the file system")
                .mount
        }
    };
    let (setup, ops) = ops();
    crash::record::<F>(&setup, &ops, how, domain, 1).expect("the run records")
}

/// Walks every point of `rec` with few pending items: the tree (split by
/// what each check read, or by nothing if `ignore_reads`), then every
/// allowed state judged in full against its leaf.
fn compare<F: PmFs>(rec: &Recording<F>, ignore_reads: bool) -> Compared {
    let mut out = Compared::default();
    let promise = F::PROMISE;
    let mut cur = PmemCursor::new(&rec.trace, rec.base.clone(), rec.domain, 10).expect("cursor");
    for k in 0..cur.len() {
        cur.advance_past(k).expect("advance");
        let items = cur.pending();
        if items.items.len() > MOST_ITEMS {
            continue;
        }
        out.points += 1;
        let mut certain = cur.certain_of();
        certain.content_hash();
        let space = PmClasses::new(&cur, &items, &certain);
        let mut tree = ReadSetTree::<PmClasses<'_, '_>>::new();
        let mut leaves: Vec<(PmConstraint, Result<(), String>)> = Vec::new();
        while let Some((id, choice)) = tree.next_node(&space) {
            let img = cur.materialize(&choice).expect("a node's state is allowed");
            let (verdict, reads) = judge_state(rec, promise, k, img);
            out.checks += 1;
            let reads = if ignore_reads { Vec::new() } else { reads };
            let leaf = tree.read(&space, id, &reads).expect("no witnesses here");
            leaves.push((leaf, verdict.map(drop)));
        }
        let (all, left) = cur.choices(items.items.len() as u32, 0);
        assert_eq!(left, 0);
        assert_eq!(
            all.len() as u64,
            space.allowed(),
            "point {k}: the count of allowed states"
        );
        for choice in all {
            out.states += 1;
            let img = cur.materialize(&choice).expect("allowed");
            let full = judge_state(rec, promise, k, img).0.map(drop);
            out.failing += usize::from(full.is_err());
            let mine: Vec<&Result<(), String>> = leaves
                .iter()
                .filter(|(leaf, _)| space.meets(leaf, &choice))
                .map(|(_, v)| v)
                .collect();
            if mine.len() != 1 {
                out.wrong
                    .push(format!("point {k} {choice:?}: in {} leaves", mine.len()));
            } else if *mine[0] != full {
                out.wrong.push(format!(
                    "point {k} {choice:?}: leaf {:?}, in full {full:?}",
                    mine[0]
                ));
            }
        }
    }
    out
}

/// Every state gets its leaf's verdict on `F`'s runs in both domains,
/// correct and with `fault` on (which must make some states fail); and a
/// tree split by nothing gets some wrong with the fault on.
fn every_state_gets_its_leafs_verdict<F: PmFs>(fault: &str) {
    for domain in [PersistenceDomain::Adr, PersistenceDomain::Eadr] {
        for sw in [None, Some(fault)] {
            let rec = recording::<F>(domain, sw);
            let c = compare(&rec, false);
            eprintln!(
                "{} {domain:?} {sw:?}: {} points, {} states, {} checks, {} failing",
                F::NAME,
                c.points,
                c.states,
                c.checks,
                c.failing
            );
            assert!(
                c.wrong.is_empty(),
                "{} {domain:?} {sw:?}:\n{}",
                F::NAME,
                c.wrong.join("\n")
            );
            assert!(c.points > 10 && c.states >= c.checks, "{c:?}");
            if domain == PersistenceDomain::Adr {
                assert!(
                    c.states > c.checks,
                    "the tree checks fewer states than it judges: {c:?}"
                );
            }
            if sw.is_none() {
                assert_eq!(c.failing, 0, "the correct file system passes");
            }
        }
    }
    // Under ADR the switch leaves failing states among passing ones at
    // some point: a tree that does not split takes a wrong verdict there.
    let rec = recording::<F>(PersistenceDomain::Adr, Some(fault));
    let c = compare(&rec, false);
    assert!(c.failing > 0, "{} with {fault}: no state fails", F::NAME);
    let blind = compare(&rec, true);
    assert!(
        !blind.wrong.is_empty(),
        "{} with {fault}: a tree that ignores the reads got every verdict right",
        F::NAME
    );
}

#[test]
fn every_wofs_state_gets_its_leafs_verdict() {
    every_state_gets_its_leafs_verdict::<Wofs>("skip-crc-check");
}

#[test]
fn every_soupfs_state_gets_its_leafs_verdict() {
    every_state_gets_its_leafs_verdict::<SoupFs>("publish-before-init");
}

#[test]
fn every_pmfs_state_gets_its_leafs_verdict() {
    every_state_gets_its_leafs_verdict::<Pmfs>("skip-rollback");
}
