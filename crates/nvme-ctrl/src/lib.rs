//! # nvme-ctrl: an NVMe controller with a Persistent Memory Region
//!
//! The device side of the machine: one NVMe 1.4 controller attached to a
//! `pcie-sim` port, reached only through its BARs (registers, doorbells,
//! the PMR) and reaching the host only by DMA and MSI-X, as a real
//! controller does. It speaks the structures of `nvme-spec`.
//!
//! ## What it does
//!
//! - Registers and bring-up: CAP, CC, CSTS, AQA/ASQ/ACQ, enable, reset and
//!   shutdown (NVMe 1.4 3.1, 7.6) ([`controller`]).
//! - Admin commands: Identify, queue creation and deletion, Get/Set
//!   Features, Get Log Page, Asynchronous Event Request, Abort ([`admin`]).
//! - I/O commands: Read, Write (with FUA), Flush, Write Zeroes, Dataset
//!   Management deallocate ([`io`]), with PRP lists ([`prp`]), round-robin
//!   arbitration with burst, phase tags and interrupt coalescing
//!   ([`engine`]).
//! - The PMR (NVMe 1.4 3.1.21-27) and the ccNVMe vendor extension: a
//!   submission queue placed in the PMR and rung by a write to a PMR word
//!   (P-SQDB), the paper's transaction-aware doorbell.
//! - A back end of parallel media units with an optional write cache,
//!   FLUSH, FUA and power-loss protection, timed by an [`SsdProfile`]
//!   calibrated to the ccNVMe paper's Table 3 ([`backend`], [`profile`]).
//! - Crash states of the media and of the PMR after any bus-trace entry
//!   ([`power`], [`crash`]), from device events the controller records
//!   ([`events`]).
//!
//! ## What it guarantees
//!
//! - Malformed input never panics: a bad command gets the NVMe status the
//!   specification gives (Invalid Field, Invalid Opcode, LBA Out of Range,
//!   Data Transfer Error, ...), a bad doorbell write an asynchronous event;
//!   nothing already durable is changed by a rejected command.
//! - Durability as NVMe 1.4 defines it: a completed write is durable only
//!   after FUA, a covering Flush, or at once with the cache disabled or
//!   power-loss protected; the crash model offers every state those rules
//!   allow (`docs/persistence.md`).
//! - Determinism: the same host program gives the same trace.
//!
//! ## Deviations
//!
//! - One namespace, 4 KiB media blocks (the atomic write unit); 512-byte
//!   LBAs are merged into their block.
//! - A drive without a cache, or with a power-loss protected one, makes a
//!   write durable when its data reaches the controller (the paper's
//!   Optane drives behave so); the crash envelope (`power.rs`) promises it
//!   only at the command's completion, as NVMe does.
#![deny(unsafe_code)]

pub mod admin;
pub mod backend;
pub mod block_source;
pub mod controller;
pub mod crash;
pub mod drives;
pub mod engine;
pub mod error;
pub mod events;
pub mod io;
pub mod measure;
pub mod media;
pub mod power;
pub mod profile;
pub mod prp;
pub mod queues;
pub mod testing;

#[cfg(test)]
mod reset_order;

pub use backend::Backend;
pub use controller::{Controller, ControllerConfig};
pub use drives::{attach_drives, Drive};
pub use error::CtrlError;
pub use measure::{measure, Measured};
pub use media::{Block, Image, Media, BLOCK};
pub use power::{MediaCursor, MediaState, PendingBlock};
pub use profile::{Destage, DriveFigures, SsdProfile, WriteCache};
