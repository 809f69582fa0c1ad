//! The crate's error type (for the host side of the crate: building a
//! controller, opening media). Errors a host causes through the NVMe
//! interface are NVMe status codes in completions, never Rust errors.

/// What can go wrong building or running a controller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CtrlError {
    /// An I/O error on an image file.
    #[error("{0}: {1}")]
    Io(String, String),
    /// A configuration the controller cannot take.
    #[error("invalid controller configuration: {0}")]
    Config(String),
    /// A bus error in the machine model.
    #[error(transparent)]
    Bus(#[from] pcie_sim::PcieError),
    /// A trace cannot be used for crash states.
    #[error("crash model: {0}")]
    Crash(String),
}
