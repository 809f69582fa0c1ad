//! crashfuzz: explores every crash state a workload can produce on the
//! simulated machine, at bus-transaction granularity, recovers each one
//! (driver recovery, file-system recovery, fsck) and checks it against a
//! semantic oracle (`docs/architecture.md` 6).
//!
//! The pipeline:
//!
//! 1. [`mod@record`]: run the workload once with a full bus trace, noting what
//!    every completed persistence point promised ([`oracle::Promise`], made
//!    by the [`PromiseBuilder`]).
//! 2. [`mod@explore`]: walk the trace point by point; at each, enumerate the
//!    states the persistence model allows (pending write-combining lines,
//!    in-flight posted writes, volatile-cache blocks), skip states whose
//!    content was already checked, and check the rest on all cores.
//! 3. [`check`]: boot a fresh machine over one state, recover, fsck, and
//!    check the promises in force there.
//! 4. [`replay`]: rebuild one state from its id and show the recovery and
//!    the bus transactions around its crash point.
//!
//! Modes `horae2` and `classic2` run on a machine with two drives
//! (HoraeFS, or Ext4, striped over both): [`devices`] checks their states, the product of each drive's
//! choices, enumerated by the same read-set reduction ([`observe`]) over
//! the units of both drives. What the two explorers share (their options
//! and report, the checker jobs, the crash-space trait both implement,
//! bounded enumeration, violations with replay ids) is one module below
//! both, `pipeline`.
//!
//! The PM modes ([`pm`]: `wofs`, `soupfs`, `pmfs`, with the PM profiles
//! `pm-adr` and `pm-eadr`) run the same workloads on the file systems on
//! persistent memory through their crash harness (`fsapi::crash`), and
//! report into the same [`ExploreReport`]s.
//!
//! A recording can be kept in a file ([`saved`]: a built-in workload's, or
//! one recorded elsewhere, e.g. by a FUSE mount of MQFS) and explored or
//! replayed from it, and exported as a Chrome/Perfetto timeline
//! ([`timeline`]).
//!
//! # The API for recorders elsewhere
//!
//! A program that records a run of its own (`mqfs mount --record` does,
//! for what real programs do through FUSE) uses only these items,
//! re-exported here; the modules behind them are crashfuzz's own:
//!
//! - [`SavedConfig`], [`SavedRun`] and [`machine_profile`]: the machine a
//!   run boots, and the run as a file (`SavedRun::push_op`,
//!   `SavedRun::push_promise`, `SavedRun::finish`, `SavedRun::save`; the
//!   recipe is in [`saved`]); [`ModeName`] and [`RunConfig`] name its mode
//!   and drive profile;
//! - [`PromiseBuilder`] (with [`OpId`] and [`Durable`]): what every
//!   persistence point promises and until when, the same rules the
//!   built-in recorder follows; its [`Promise`]s ([`Expect`], with
//!   [`Kind`]) go into the run;
//! - [`OpRecord`]: one operation, for timelines and reports;
//! - [`explore_saved`], [`explore_recording`], [`ExploreOptions`] (with
//!   [`DriveEnumeration`]),
//!   [`ExploreReport`] and [`Error`]: exploring what was recorded.

pub mod blockwise;
pub mod builtin;
pub mod campaign;
pub mod check;
mod checkers;
pub mod content;
pub mod devices;
pub mod error;
pub mod explore;
pub mod model;
pub mod observe;
pub mod oracle;
mod pipeline;
pub mod pm;
pub mod promises;
pub mod record;
pub mod replay;
pub mod reuse;
pub mod saved;
pub mod shard;
pub mod timeline;
pub mod workload;

pub use campaign::{Campaign, CaughtBy, SelfCheck, SELF_CHECKS};
pub use error::Error;
pub use explore::{
    explore, explore_recording, explore_saved, DriveEnumeration, ExploreOptions, ExploreReport, Violation,
};
pub use model::Kind;
pub use oracle::{Expect, Promise};
pub use promises::{Durable, OpId, PromiseBuilder};
pub use record::{machine_profile, record, ModeName, OpRecord, Recording, RunConfig};
pub use saved::{SavedConfig, SavedRun};
pub use workload::{parse, Op, Workload};
