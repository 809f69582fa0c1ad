//! What the crashfuzz integration tests share: built-in workloads by
//! name, run configurations, the reduced exploration bounds that keep
//! `cargo test` fast, and what a read-set comparison with brute force saw
//! ([`Compared`]).
#![allow(dead_code)]

use crashfuzz::builtin::by_name;
use crashfuzz::{ExploreOptions, ModeName, RunConfig, Workload};

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

/// Exploration bounded to 2^4 subsets per crash point, on two jobs.
pub fn opts() -> ExploreOptions {
    ExploreOptions {
        bound_lines: 4,
        bound_blocks: 4,
        jobs: 2,
        ..ExploreOptions::default()
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
