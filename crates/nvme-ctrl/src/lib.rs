//! # nvme-ctrl: an NVMe controller with a Persistent Memory Region
#![deny(unsafe_code)]

pub mod admin;
pub mod backend;
pub mod controller;
pub mod crash;
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
pub mod spec;
pub mod testing;

#[cfg(test)]
mod reset_order;

pub use backend::Backend;
pub use controller::{Controller, ControllerConfig};
pub use error::CtrlError;
pub use measure::{measure, Measured};
pub use media::{Block, Image, Media, BLOCK};
pub use power::{MediaCursor, PendingBlock};
pub use profile::{DriveFigures, SsdProfile, WriteCache};
