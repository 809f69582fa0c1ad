//! What the crashfuzz integration tests share: built-in workloads by
//! name, run configurations, the exploration options (by read sets, or
//! with small bounds that keep `cargo test` fast), and what a read-set comparison with brute force saw
//! ([`Compared`]).
#![allow(dead_code)]

use crashfuzz::builtin::by_name;
use crashfuzz::record::Fault;
use crashfuzz::replay::{replay, ReplayId};
use crashfuzz::{explore, DriveEnumeration, ExploreOptions, ModeName, RunConfig, Workload};

/// The built-in workload `name` (its first, for a family).
pub fn workload(name: &str) -> Workload {
    by_name(name).expect("built-in").remove(0)
}

/// The crash-consistent modes of the default run, which must keep every
/// promise.
pub const SAFE_MODES: [ModeName; 4] = [
    ModeName::Classic,
    ModeName::Horae,
    ModeName::Mq,
    ModeName::MqAtomic,
];

/// `mode` on the drive profile named `profile`, seed 1.
pub fn config(mode: ModeName, profile: &str) -> RunConfig {
    RunConfig::new(mode, RunConfig::profile_by_name(profile).expect("profile"), 1)
}

/// The default exploration (by what the checks read), on two jobs.
pub fn opts() -> ExploreOptions {
    ExploreOptions {
        jobs: 2,
        ..ExploreOptions::default()
    }
}

/// Explores the built-in workload `name` with `fault` in `mode` on two
/// drives of `profile`: a `check` violation must be found, its id must
/// name both drives' media, and its replay must fail the same check.
pub fn caught_on_two_drives(name: &str, mode: ModeName, profile: &str, fault: Fault, check: &str) {
    let w = workload(name);
    let cfg = RunConfig {
        fault: Some(fault),
        ..config(mode, profile)
    };
    let r = explore(&w, &cfg, &opts(), &w.name).expect("explore");
    let v = r
        .violations
        .iter()
        .find(|v| v.check == check)
        .unwrap_or_else(|| panic!("not caught: {:?}", r.violations));
    let id = ReplayId::parse(&v.id).expect("id");
    assert_eq!(id.devices.as_ref().map(|d| d.media.len()), Some(2), "{}", v.id);
    let out = replay(&v.id, 1).expect("replay");
    assert!(
        out.failures.iter().any(|f| f.check == v.check),
        "{:?}",
        out.failures
    );
}

/// [`opts`] with every state up to 2^`lines` line and 2^`blocks` block
/// subsets per crash point built and checked instead.
pub fn bounded(lines: u32, blocks: u32) -> ExploreOptions {
    ExploreOptions {
        enumeration: DriveEnumeration::Bounded { lines, blocks },
        ..opts()
    }
}

/// What a comparison of the read-set enumeration with brute force saw:
/// every state of the compared points judged in full against its leaf's
/// verdict (`tests/read_sets.rs` on the drives, `tests/pm_read_sets.rs`
/// on persistent memory).
#[derive(Debug, Default)]
pub struct Compared {
    /// Points compared.
    pub points: usize,
    /// States compared.
    pub states: usize,
    /// Checks the trees made.
    pub checks: usize,
    /// States compared whose full verdict failed.
    pub failing: usize,
    /// What went wrong: states in no leaf or several, or judged unlike
    /// their leaf.
    pub wrong: Vec<String>,
}
