//! Crash-consistency machinery, one per [`Mode`](crate::Mode):
//!
//! - `None` (Ext4-NJ): fsync writes data and metadata in place, each kind
//!   after the previous completes, then flushes;
//! - `Jbd` (Ext4 with JBD2, and HoraeFS): ordered metadata journaling in one
//!   journal area, committed by a separate commit thread;
//! - `Mq` (MQFS): multi-queue journaling on ccNVMe (see `mq`).
//!
//! Both journals write the block formats of [`format`](mod@format) in the one log
//! layout of `log`, whose scanner and replay both recoveries run.

pub mod format;
pub mod jbd;
pub(crate) mod log;
pub mod mq;

use std::rc::Rc;

use crate::fs::{Ino, InodeState};

/// The journal of a mounted file system.
#[derive(Clone)]
pub(crate) enum Journal {
    /// No journal.
    None,
    /// Classic or Horae journaling.
    Jbd(Rc<jbd::Jbd>),
    /// Multi-queue journaling.
    Mq(Rc<mq::MqJournal>),
}

impl Journal {
    /// Metadata block `b` changed on behalf of `owners`.
    pub(crate) fn note_dirty(&self, b: u64, owners: &[Ino]) {
        match self {
            Journal::None => {}
            Journal::Jbd(j) => j.note_dirty(b, owners),
            Journal::Mq(m) => m.note_dirty(b),
        }
    }

    /// Metadata block `b` was freed.
    pub(crate) fn note_freed_meta(&self, b: u64) {
        match self {
            Journal::None => {}
            Journal::Jbd(j) => j.note_freed_meta(b),
            Journal::Mq(m) => m.note_freed_meta(b),
        }
    }

    /// Block `b` was freed (data or metadata).
    pub(crate) fn note_freed(&self, b: u64) {
        match self {
            Journal::None => {}
            Journal::Jbd(j) => j.note_freed(b),
            Journal::Mq(m) => m.note_freed(b),
        }
    }

    /// Block `b` was allocated again, for `owner`.
    pub(crate) fn note_reused(&self, b: u64, owner: &InodeState) {
        if let Journal::Mq(m) = self {
            m.note_reused(b, owner);
        }
    }
}

/// Where the journal areas' logs lie (their superblocks excluded): once
/// recovery has run, nothing reads what such a block holds until a new
/// transaction overwrites it, so a checker may ignore its content when
/// comparing recovered images. A plain value, so a checker can keep it
/// past the file system it came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JournalLogArea {
    start: u64,
    area_blocks: u64,
    areas: u64,
}

impl JournalLogArea {
    /// True for a block of a journal area's log.
    pub fn contains(&self, b: u64) -> bool {
        if b < self.start || self.area_blocks == 0 {
            return false;
        }
        let off = b - self.start;
        off / self.area_blocks < self.areas && off % self.area_blocks != 0
    }
}

impl crate::fs::Fs {
    /// The counters of the classic or HoraeFS journal's pipeline (`None`
    /// in the other modes).
    pub fn pipeline_stats(&self) -> Option<jbd::PipelineStats> {
        match self.journal.borrow().as_ref() {
            Some(Journal::Jbd(j)) => Some(j.stats()),
            _ => None,
        }
    }

    /// The journal's log blocks (see [`JournalLogArea`]).
    pub fn journal_log_area(&self) -> JournalLogArea {
        let sb = self.sb.borrow();
        JournalLogArea {
            start: sb.journal_start,
            area_blocks: sb.area_blocks,
            areas: sb.journal_areas as u64,
        }
    }
}
