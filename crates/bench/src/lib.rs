//! Evaluation benches for the ccNVMe simulator: Table 1 (bus-event counts of
//! one transaction) and the paper's performance figures, in simulated time.
//!
//! The bench binaries under `benches/` are thin drivers; the logic they share
//! lives in the modules here so tests can exercise it too.

pub mod figures;
pub mod fsync_loop;
pub mod table1;

/// What a bench helper can fail with (the crate's one error type).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file-system operation failed.
    #[error("file system: {0}")]
    Fs(#[from] mqfs::FsError),
    /// The simulation could not finish the awaited task.
    #[error("simulation: {0}")]
    Run(#[from] pcie_sim::RunError),
    /// Writing a result file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Encoding a result as JSON failed.
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
    /// A measurement broke a condition it relies on.
    #[error("{0}")]
    Invalid(String),
    /// Writing a figure's output failed.
    #[error("output: {0}")]
    Output(#[from] std::io::Error),
    /// Drawing a plot failed.
    #[error("plot: {0}")]
    Plot(String),
    /// Writing a CSV table failed.
    #[error("csv: {0}")]
    Csv(#[from] csv::Error),
    /// The block driver failed (the driver-level Figure 10).
    #[error("driver: {0}")]
    Driver(#[from] ccnvme::error::DriverError),
    /// The controller refused its configuration.
    #[error("controller: {0}")]
    Controller(#[from] nvme_ctrl::CtrlError),
    /// The machine refused an access (the PMR measurement of Figure 5).
    #[error("machine: {0}")]
    Machine(#[from] pcie_sim::PcieError),
}

/// The directory results go to: `$CARGO_TARGET_DIR` if set (a relative
/// value is taken from the workspace root, where cargo is usually run),
/// else the workspace's `target/`.
pub fn target_dir() -> std::path::PathBuf {
    let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    // This crate lives at `<workspace>/crates/bench`.
    let root = manifest.ancestors().nth(2).unwrap_or(manifest);
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) if std::path::Path::new(&d).is_absolute() => d.into(),
        Some(d) => root.join(d),
        None => root.join("target"),
    }
}
