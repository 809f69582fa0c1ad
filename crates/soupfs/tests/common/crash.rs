//! SoupFS's own crash workloads, run through the shared crash harness
//! ([`fsapi::crash`], under SoupFS's promise: durable at fsync).

use fsapi::crash::{self, CheckOptions, Enumeration, Op, Recording, Report};
use pcie_sim::PersistenceDomain;
use rand::{Rng, SeedableRng};
use soupfs::{Faults, SoupFs};

fn s(p: &str) -> String {
    p.to_string()
}

/// The workload: creates, writes, fsyncs, links, renames (over an
/// existing name too), truncates, removes, with the persister running
/// between some of them.
pub fn workload() -> Vec<Op> {
    use Op::*;
    vec![
        Mkdir(s("/d")),
        Create(s("/d/a")),
        Write(s("/d/a"), 0, b"alpha, fsynced first".to_vec()),
        Fsync(s("/d/a")),
        Create(s("/b")),
        Write(s("/b"), 0, b"bee".to_vec()),
        Link(s("/b"), s("/d/b2")),
        Sleep(1_500),
        Mkdir(s("/e")),
        Create(s("/e/f")),
        Write(s("/e/f"), 0, b"eff, fsynced second, in a new directory".to_vec()),
        Fsync(s("/e/f")),
        Unlink(s("/b")),
        Create(s("/e/old")),
        Rename(s("/d/b2"), s("/e/old")),
        Truncate(s("/e/old"), 1),
        Create(s("/big")),
        Write(s("/big"), 100, vec![0xb1; 5000]),
        Write(s("/big"), 4000, b"overwritten across a block edge".to_vec()),
        Fsync(s("/big")),
        Sleep(1_500),
        Mkdir(s("/e/sub")),
        Rename(s("/e/sub"), s("/d/sub2")),
        Rmdir(s("/d/sub2")),
        Create(s(
            "/long-name-that-needs-two-name-lines-because-it-is-over-56-bytes",
        )),
        Unlink(s("/e/old")),
        // A rename of a file fsynced before: after any crash the old name
        // or the new one holds it (rule C3). After a sync, /d's older
        // diradd puts /d first in the persister's next round, so only the
        // rename's edge orders /e's diradd before /d's dirrem.
        Sync,
        Create(s("/d/tmp")),
        Rename(s("/d/a"), s("/e/a2")),
        Create(s("/z")),
        Write(s("/z"), 0, b"zz".to_vec()),
        Truncate(s("/z"), 0),
        Sleep(1_500),
    ]
}

/// `steps` random operations of the shared model test
/// ([`fsapi::testing::random_op`]), an fsync of a random path before some
/// of them and a pause (the persister runs) after some.
pub fn random_workload(seed: u64, steps: usize) -> Vec<Op> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut ops = Vec::new();
    for _ in 0..steps {
        if rng.gen_bool(0.25) {
            let p = fsapi::testing::PATHS[rng.gen_range(0..fsapi::testing::PATHS.len())];
            ops.push(Op::Fsync(p.into()));
        }
        ops.push(Op::from(&fsapi::testing::random_op(&mut rng)));
        if rng.gen_bool(0.15) {
            ops.push(Op::Sleep(rng.gen_range(200..1500)));
        }
    }
    ops
}

/// Records `ops` with `faults` in `domain`.
pub fn record(ops: &[Op], faults: Faults, domain: PersistenceDomain, seed: u64) -> Recording<SoupFs> {
    crash::record::<SoupFs>(&[], ops, faults, domain, seed).expect("the workload records")
}

/// Checks every crash state, enumerated by what the checks read
/// ([`Enumeration::ReadSets`], the shared harness's budget per point:
/// [`fsapi::testing::READ_SET_BUDGET`]); stops at the first violation if
/// `first_only`.
pub fn check(rec: &Recording<SoupFs>, first_only: bool) -> Report {
    let opts = CheckOptions {
        enumeration: Enumeration::ReadSets {
            budget: fsapi::testing::READ_SET_BUDGET,
        },
        first_only,
        promise: crash::Promise::Fsync,
    };
    crash::check(rec, &opts).expect("the crash states are explored")
}
