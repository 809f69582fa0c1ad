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

pub(crate) mod cc;
pub mod format;
pub mod jbd;
pub(crate) mod log;
pub mod mq;

use std::rc::Rc;

use crate::fs::{Ino, InodeState};

/// Which block of a damaged transaction failed its checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DamageKind {
    /// A descriptor (MQFS: possibly its JH): its magic and sequence number
    /// are right, its checksum is not.
    Descriptor,
    /// The journaled copy of home block `home`: it does not match the
    /// checksum its (intact) descriptor tag gives, while the transaction's
    /// end is in the log.
    Copy {
        /// The copy's home block.
        home: u64,
    },
    /// A revoke block.
    Revoke,
    /// The commit block (classic and HoraeFS).
    Commit,
}

/// A transaction recovery found written whole but damaged (a block failing
/// its checksum) and did not replay, nor anything logged after it: replay
/// stops at the last intact transaction (see `docs/decisions.md` E4 for how
/// this follows JBD2, Linux `fs/jbd2/recovery.c`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JournalDamage {
    /// Journal area.
    pub area: u32,
    /// Sequence number of the transaction in its area.
    pub seq: u64,
    /// Its global id, when an intact descriptor gave it (classic: `seq`).
    pub txid: Option<u64>,
    /// Offset in the area of the damaged block.
    pub offset: u64,
    /// Which block.
    pub kind: DamageKind,
}

impl std::fmt::Display for JournalDamage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "journal area {} transaction seq {} (id {}) not replayed: {:?} block at offset {} fails its checksum",
            self.area,
            self.seq,
            self.txid.map_or_else(|| "unknown".to_string(), |t| t.to_string()),
            self.kind,
            self.offset
        )
    }
}

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

    /// HoraeFS's ordering queue (`None` in the other modes), for reading
    /// its counters (swaps, capacity) and state.
    pub fn ordering_queue(&self) -> Option<Rc<ccnvme::horae::OrderingQueue>> {
        match self.journal.borrow().as_ref() {
            Some(Journal::Jbd(j)) => j.ordering_queue().cloned(),
            _ => None,
        }
    }

    /// The damaged transactions this mount's recovery found and did not
    /// replay (empty after a clean mount or an intact log).
    pub fn journal_damage(&self) -> Vec<JournalDamage> {
        self.journal_damage.borrow().clone()
    }

    /// Records `d`, found by recovery: kept for [`Fs::journal_damage`]
    /// (whose `Display` is the log line, as JBD2 logs "JBD2: Invalid
    /// checksum recovering ...", Linux `fs/jbd2/recovery.c`; the CLI prints
    /// it) and counted in the superblock (`journal_damage`, written by
    /// mount).
    pub(crate) fn note_journal_damage(&self, d: JournalDamage) {
        self.sb.borrow_mut().journal_damage += 1;
        self.journal_damage.borrow_mut().push(d);
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
