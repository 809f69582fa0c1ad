//! # ccnvme: the host driver
//!
//! The host side of the machine, touching the device only through MMIO,
//! host memory that the device reads by DMA, and interrupts, as the Linux
//! NVMe driver does:
//!
//! - a small block layer: a [`Bio`] (operation, blocks, host pages, flags,
//!   transaction id) submitted on the submitting core's queue pair, with a
//!   [`Done`] handle a simulated thread awaits;
//! - plain NVMe: submission queue entries in host memory, an SQ tail
//!   doorbell per command, completion by MSI-X (or polling), completion
//!   entries consumed by phase tag, a CQ head doorbell;
//! - the ccNVMe extension (the paper's section 4): per-core persistent
//!   submission queues in the PMR, transactions stored with write-combining
//!   stores and made atomic by two persistent MMIOs, in-order completion,
//!   and recovery at probe ([`recovery`]);
//! - the Horae ordering queue, the baseline ccNVMe is compared with
//!   ([`horae`]).
//!
//! ## What it assumes of the device
//!
//! An NVMe 1.4 controller with a PMR whose reads order earlier writes
//! (PMRCAP.PMRWBM bit 0), and the vendor-specific extension that places a
//! submission queue in the PMR and rings it from a PMR word
//! (`nvme_spec::ccnvme`). The driver shares its NVMe structures with the
//! controller emulator through `nvme-spec` and does not depend on the
//! emulator.
//!
//! ## Deviations from Linux (deliberate, for exact counts)
//!
//! - The interrupt handler consumes one completion entry per interrupt
//!   (Linux drains every ready entry): with one MSI-X per entry this rings
//!   the CQ head doorbell once per command, as ccNVMe Table 1 counts.
//! - Request merging is off unless the profile turns it on.
#![deny(unsafe_code)]

pub mod bio;
pub mod command;
pub mod device;
pub mod error;
pub mod horae;
pub mod layout;
pub mod profile;
pub mod psq;
pub mod queue;
pub mod recovery;
pub mod traffic;

pub use bio::{Bio, BioFlags, BioOp, Done, Lba, TxId};
pub use device::{BlockDevice, DeviceInfo, ProbeOptions};
pub use error::DriverError;
pub use layout::PmrLayout;
/// A read-only view of a drive's logical blocks, for checkers such as a
/// file system's fsck (see [`nvme_spec::image`]).
pub use nvme_spec::BlockSource;
pub use profile::{CqReap, DriverFaults, DriverProfile, EntryPersist, FlushIssue, RegionLoad};
pub use psq::{OpenTx, PersistentSq, TxHandle};
pub use recovery::{Recovery, UnfinishedCmd, UnfinishedTx};
pub use traffic::Traffic;
