//! The crate's error type. Every variant is a one-line message the CLI
//! prints as is.

use crate::workload::ParseError;

/// Why crashfuzz cannot do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The setup or the recorded run failed in a way that is not the
    /// workload's (the simulated machine or drive refused).
    #[error("{0}")]
    Failed(String),
    /// No built-in workload and no file has this name.
    #[error("unknown workload `{0}` (see `crashfuzz list`, or give a workload file)")]
    UnknownWorkload(String),
    /// No mode has this name.
    #[error("unknown mode `{0}` (one of: none, classic, classic-cc, horae, mq, mq-atomic, mq-literal, horae2, classic2, classic-dj, horae-dj; PM: wofs, soupfs, pmfs)")]
    UnknownMode(String),
    /// No fault has this name.
    #[error("unknown fault `{0}` (one of: no-flush-read, no-fence, no-entry-fence, no-commit-fua, out-of-order, no-revoke, no-data-flush, horae-early-ack, horae-no-redirect-commit, horae-no-joint-flush, horae-early-dr, replay-unfinished; or a PM mode's switch, MODE-SWITCH: see `crashfuzz list`)")]
    UnknownFault(String),
    /// A fault that switches off a mechanism the mode does not have: the
    /// run would test nothing.
    #[error("fault `{fault}` does not apply to mode `{mode}` (the mechanism it switches off is not there)")]
    FaultNotApplicable {
        /// The fault as named.
        fault: String,
        /// The mode it does not apply to.
        mode: String,
    },
    /// A bound (`--bound`, `--bound-lines`, `--bound-blocks`, `--pm-bound`,
    /// as named) given without `--bounded` or `--brute-force`: the states
    /// are enumerated by what the checks read, and no bound applies.
    #[error("{0} applies only with --bounded or --brute-force (by default states are enumerated by what the checks read)")]
    BoundWithoutBounded(String),
    /// `--budget` given with `--bounded` or `--brute-force` (as named):
    /// the states are enumerated up to the bounds, and no budget applies.
    #[error("--budget applies only when states are enumerated by what the checks read (the default), not with {0}")]
    BudgetWhenBounded(String),
    /// No drive profile has this name.
    #[error("unknown drive profile `{0}` (one of: {1})")]
    UnknownProfile(String, String),
    /// A replay id that does not name a state.
    #[error("bad replay id `{id}`: {why}")]
    BadReplayId {
        /// The id as given.
        id: String,
        /// What is wrong with it.
        why: String,
    },
    /// A shard that is not `I/N` with `I < N` (`I` may be `env`).
    #[error("bad shard `{0}`: {1}")]
    BadShard(String, String),
    /// A report file that is not one `--json` wrote.
    #[error("{0}: not a crashfuzz report: {1}")]
    BadReport(String, String),
    /// Report files that do not make one campaign's shards.
    #[error("cannot merge: {0}")]
    BadMerge(String),
    /// A workload file that cannot be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// A saved run that cannot be used: not a saved run, truncated,
    /// corrupt (checksum), or inconsistent (see [`crate::saved`]).
    #[error("{path}: not a usable saved run: {why}")]
    BadSavedRun {
        /// The file.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// A saved run written in a format version this build does not read.
    #[error("{path}: saved-run format version {found}, this crashfuzz reads version {supported}")]
    SavedRunVersion {
        /// The file.
        path: String,
        /// The version in the file.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// A workload file that does not parse.
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: String,
        /// Where and why.
        source: ParseError,
    },
    /// The controller's crash model refused the recorded run.
    #[error("crash model: {0}")]
    Crash(#[from] nvme_ctrl::CtrlError),
    /// A workload the PM modes cannot run as it is (`crate::pm`).
    #[error("workload `{workload}` is refused for the PM modes: {why}")]
    PmRefused {
        /// The workload.
        workload: String,
        /// What they lack.
        why: String,
    },
    /// A PM run could not be recorded or checked ([`fsapi::crash`]).
    #[error("PM: {0}")]
    Pm(#[from] fsapi::crash::CrashError),
    /// A report could not be written as JSON.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
}
