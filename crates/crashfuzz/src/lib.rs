//! crashfuzz: explores every crash state a workload can produce on the
//! simulated machine, at bus-transaction granularity, recovers each one
//! (driver recovery, file-system recovery, fsck) and checks it against a
//! semantic oracle (ARCHITECTURE.md 6).
//!
//! The pipeline:
//!
//! 1. [`mod@record`]: run the workload once with a full bus trace, noting what
//!    every completed persistence point promised ([`oracle::Promise`]).
//! 2. [`mod@explore`]: walk the trace point by point; at each, enumerate the
//!    states the persistence model allows (pending write-combining lines,
//!    in-flight posted writes, volatile-cache blocks), skip states whose
//!    content was already checked, and check the rest on all cores.
//! 3. [`check`]: boot a fresh machine over one state, recover, fsck, and
//!    check the promises in force there.
//! 4. [`replay`]: rebuild one state from its id and show the recovery and
//!    the bus transactions around its crash point.
//!
//! A recording can be kept in a file ([`saved`]: a built-in workload's, or
//! one recorded elsewhere, e.g. by a FUSE mount of MQFS) and explored or
//! replayed from it, and exported as a Chrome/Perfetto timeline
//! ([`timeline`]).

pub mod builtin;
pub mod campaign;
pub mod check;
pub mod error;
pub mod explore;
pub mod model;
pub mod oracle;
pub mod record;
pub mod replay;
pub mod saved;
pub mod timeline;
pub mod workload;

pub use campaign::Campaign;
pub use error::Error;
pub use explore::{explore, explore_recording, explore_saved, ExploreOptions, ExploreReport, Violation};
pub use record::{record, ModeName, Recording, RunConfig};
pub use saved::{SavedConfig, SavedRun};
pub use workload::{parse, Op, Workload};
