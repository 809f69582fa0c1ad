//! NVMe 1.4 data structures: pure encodings with no controller state.
//!
//! Everything is little-endian. Each layout cites the NVMe 1.4 section or figure it encodes.
//!
//! - [`regs`]: controller registers and doorbell offsets (3.1); the PMR registers are in
//!   [`pmr_regs`] and re-exported by `regs`.
//! - [`command`]: the 64-byte submission queue entry and NVM I/O fields (4.2, 6); it
//!   re-exports the opcodes of [`opcode`]. [`admin`] adds the admin command fields and
//!   constructors (5), [`ccnvme`] the ccNVMe transaction fields and the PMR submission queue
//!   extension.
//! - [`completion`]: the 16-byte completion queue entry and status codes (4.6).
//! - [`identify`], [`log`], [`features`], [`aer`]: admin command payloads (5.15, 5.14, 5.21,
//!   5.2).

mod bits;

pub mod admin;
pub mod aer;
pub mod ccnvme;
pub mod command;
pub mod completion;
pub mod features;
pub mod identify;
pub mod log;
pub mod opcode;
pub mod pmr_regs;
pub mod regs;

pub use aer::{AsyncEvent, AsyncEventType};
pub use ccnvme::TxFlags;
pub use command::{AdminOpcode, DsmRange, IoOpcode, SubmissionEntry};
pub use completion::{CompletionEntry, Status};
pub use features::{
    Arbitration, FeatureId, InterruptCoalescing, InterruptVectorConfig, NumberOfQueues, VolatileWriteCache,
};
pub use identify::{IdentifyController, IdentifyNamespace, LbaFormat};
pub use log::{ErrorLogEntry, SmartLog};
pub use regs::{
    Aqa, Cap, Cc, Csts, Doorbell, PmrCap, PmrCtl, PmrEbs, PmrMsc, PmrSts, PmrSwtp, ShutdownNotification,
    ShutdownStatus, Vs,
};
