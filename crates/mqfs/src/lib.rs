//! # MQFS
#![deny(unsafe_code)]

pub mod error;
pub mod layout;

pub use error::FsError;
pub use layout::Mode;
