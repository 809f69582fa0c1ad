//! The driver's error type.

use nvme_spec::completion::Status;

/// What can go wrong in the driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DriverError {
    /// A bus error (an access the machine refused).
    #[error(transparent)]
    Bus(#[from] pcie_sim::PcieError),
    /// The controller completed a command with an error status.
    #[error("command failed: {0}")]
    Command(Status),
    /// The controller did not become ready or reported a fatal status.
    #[error("controller not ready: {0}")]
    NotReady(String),
    /// The device lacks something the driver needs.
    #[error("unsupported device: {0}")]
    Unsupported(String),
    /// A request the driver refuses (bad range, oversized transaction...).
    #[error("invalid request: {0}")]
    Invalid(String),
    /// The persistent submission queue found at probe is corrupt; nothing
    /// from it is replayed.
    #[error("corrupt persistent queue {queue}: {reason}")]
    CorruptPsq {
        /// The queue index.
        queue: u16,
        /// What is wrong.
        reason: String,
    },
    /// The PMR header is neither empty nor a valid ccNVMe layout: it is not
    /// formatted over (that could lose unfinished transactions); use a
    /// fresh PMR to start over.
    #[error("PMR header is corrupt: {0}")]
    CorruptLayout(String),
    /// The PMR holds no ccNVMe layout (a fresh device, or one formatted
    /// for another use).
    #[error("PMR holds no ccNVMe layout")]
    NoLayout,
    /// Recovery information was not acknowledged before use.
    #[error("recovery not acknowledged")]
    RecoveryPending,
    /// The simulation could not finish the operation (deadlock or time
    /// limit).
    #[error("simulation: {0}")]
    Sim(#[from] pcie_sim::RunError),
}
