//! The crate's error type (for the host side of the crate: building a
//! controller, opening media). Errors a host causes through the NVMe
//! interface are NVMe status codes in completions, never Rust errors.

use std::sync::Arc;

/// What can go wrong building or running a controller.
///
/// Equality compares an [`CtrlError::Io`] by path and error kind (an
/// `std::io::Error` has no equality of its own).
#[derive(Debug, Clone, thiserror::Error)]
pub enum CtrlError {
    /// An I/O error on an image file (shared so the error stays `Clone`).
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What the host file system said.
        #[source]
        source: Arc<std::io::Error>,
    },
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

impl CtrlError {
    /// An I/O error on the file at `path`.
    pub fn io(path: impl Into<String>, source: std::io::Error) -> CtrlError {
        CtrlError::Io {
            path: path.into(),
            source: Arc::new(source),
        }
    }
}

impl PartialEq for CtrlError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (CtrlError::Io { path: a, source: x }, CtrlError::Io { path: b, source: y }) => {
                a == b && x.kind() == y.kind()
            }
            (CtrlError::Config(a), CtrlError::Config(b)) | (CtrlError::Crash(a), CtrlError::Crash(b)) => {
                a == b
            }
            (CtrlError::Bus(a), CtrlError::Bus(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for CtrlError {}
