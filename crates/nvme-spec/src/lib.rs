//! # nvme-spec: NVMe 1.4 data structures shared by the host driver and the controller
//!
//! The contract: this crate holds pure data structures and their encode/decode, nothing else.
//! There is no controller state, no queue state machine, no timing and no simulation; the
//! controller emulator (`nvme-ctrl`) and the host driver (`ccnvme`) both build on it, so
//! neither has to compile the other to agree on a byte layout. Everything is little-endian,
//! and each layout cites the NVMe 1.4 section or figure it encodes.
//!
//! - [`regs`]: controller registers and doorbell offsets (3.1); the PMR registers are in
//!   [`pmr_regs`] and re-exported by `regs`.
//! - [`command`]: the 64-byte submission queue entry and NVM I/O fields (4.2, 6); it
//!   re-exports the opcodes of [`opcode`]. [`admin`] adds the admin command fields and
//!   constructors (5), [`ccnvme`] the ccNVMe transaction fields and the PMR submission queue
//!   extension (vendor-specific, not NVMe 1.4; see that module).
//! - [`completion`]: the 16-byte completion queue entry and status codes (4.6).
//! - [`identify`], [`log`], [`features`], [`aer`]: admin command payloads (5.15, 5.14, 5.21,
//!   5.2).
//! - [`image`]: the one interface here, [`BlockSource`], a read-only view of a namespace's
//!   logical blocks for checkers (not an NVMe structure; see that module).
//! - `traffic` (with the `pcie` feature): the simulated bus's traffic tags of NVMe
//!   transfers and their names.
//! - [`SQE_BYTES`], [`CQE_BYTES`]: the queue entry sizes (CC.IOSQES = 6, CC.IOCQES = 4;
//!   3.1.5).

mod bits;

pub mod admin;
pub mod aer;
pub mod ccnvme;
pub mod command;
pub mod completion;
pub mod features;
pub mod identify;
pub mod image;
pub mod log;
pub mod opcode;
pub mod pmr_regs;
pub mod regs;
#[cfg(feature = "pcie")]
pub mod traffic;

pub use aer::{AsyncEvent, AsyncEventType};
pub use ccnvme::TxFlags;
pub use command::{AdminOpcode, DsmRange, IoOpcode, SubmissionEntry, SQE_BYTES, SQE_SIZE};
pub use completion::{CompletionEntry, Status, CQE_BYTES, CQE_SIZE};
pub use features::{
    Arbitration, FeatureId, InterruptCoalescing, InterruptVectorConfig, NumberOfQueues, VolatileWriteCache,
};
pub use identify::{IdentifyController, IdentifyNamespace, LbaFormat};
pub use image::{BlockSource, LBA_BYTES};
pub use log::{ErrorLogEntry, SmartLog};
pub use regs::{
    Aqa, Cap, Cc, Csts, Doorbell, PmrCap, PmrCtl, PmrEbs, PmrMsc, PmrSts, PmrSwtp, ShutdownNotification,
    ShutdownStatus, Vs,
};
