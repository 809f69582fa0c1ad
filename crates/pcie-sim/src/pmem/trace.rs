//! The persistent memory's trace and counters.
//!
//! The bus trace's [`crate::EventKind`] is matched exhaustively by the
//! layers above, so memory-bus events have a trace of their own, recorded
//! in the same simulated-time order: each entry notes the length of the bus
//! trace when it happened ([`PmEntry::bus_seq`]), which places it among the
//! bus entries. A program that never touches persistent memory records
//! nothing here and its bus trace is unchanged. Like the bus trace, the PM
//! trace keeps a rolling hash of every entry in every mode but
//! [`TraceMode::CountersOnly`].

use crate::event_log::{EventLog, LogEntry};
use crate::time::SimTime;
use crate::trace::{Purpose, TraceMode};

/// What a persistent-memory trace entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum PmEventKind {
    /// A cached store (write-back memory type). `len` bytes at `addr`,
    /// 8-byte aligned, inside one line; payload recorded.
    Store = 0,
    /// A non-temporal store (`movnti`/`movntdq`) into the core's
    /// write-combining buffers; payload recorded.
    NtStore = 1,
    /// `clflush` of the line at `addr`.
    Clflush = 2,
    /// `clflushopt` of the line at `addr`.
    Clflushopt = 3,
    /// `clwb` of the line at `addr`.
    Clwb = 4,
    /// `sfence` completed (every earlier flush and non-temporal write of
    /// the core reached the write pending queue).
    Sfence = 5,
    /// `mfence` completed (as `Sfence` for persistence).
    Mfence = 6,
    /// The cache wrote a dirty line back on its own (capacity eviction or
    /// a spontaneous write-back); `source` is [`NO_CORE`]. Not used by the
    /// crash envelope, which allows every write-back.
    Writeback = 7,
    /// A write-combining line of non-temporal stores left its core for the
    /// memory controller (filled, evicted, flushed or fenced). Not used by
    /// the crash envelope, which replays the buffers from the stores.
    NtLine = 8,
}

impl PmEventKind {
    /// Number of kinds.
    pub const COUNT: usize = 9;
    /// Every kind, in index order.
    pub const ALL: [PmEventKind; PmEventKind::COUNT] = [
        PmEventKind::Store,
        PmEventKind::NtStore,
        PmEventKind::Clflush,
        PmEventKind::Clflushopt,
        PmEventKind::Clwb,
        PmEventKind::Sfence,
        PmEventKind::Mfence,
        PmEventKind::Writeback,
        PmEventKind::NtLine,
    ];

    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            PmEventKind::Store => "pm-store",
            PmEventKind::NtStore => "pm-nt-store",
            PmEventKind::Clflush => "clflush",
            PmEventKind::Clflushopt => "clflushopt",
            PmEventKind::Clwb => "clwb",
            PmEventKind::Sfence => "sfence",
            PmEventKind::Mfence => "mfence",
            PmEventKind::Writeback => "pm-writeback",
            PmEventKind::NtLine => "pm-nt-line",
        }
    }
}

/// Source of an entry no core caused (the cache's own write-backs).
pub const NO_CORE: u8 = u8::MAX;

/// One persistent-memory trace entry; its sequence number is its index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmEntry {
    /// When it happened.
    pub time: SimTime,
    /// Length of the bus trace at that moment: the entry comes after bus
    /// entries `0..bus_seq`.
    pub bus_seq: u64,
    /// Offset in the persistent memory.
    pub addr: u64,
    /// Offset of the payload in the payload arena, or
    /// [`crate::trace::NO_PAYLOAD`].
    pub payload: u64,
    /// Bytes (stores, lines), 0 for fences.
    pub len: u32,
    /// What it is.
    pub kind: PmEventKind,
    /// Why (the caller's traffic tag).
    pub purpose: Purpose,
    /// The core, or [`NO_CORE`].
    pub source: u8,
}

/// Totals for one (kind, purpose) cell of [`PmCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PmTally {
    /// Instructions (or, for write-backs and lines, events).
    pub ops: u64,
    /// Bytes stored, loaded or written back.
    pub bytes: u64,
}

/// Memory-bus counters of the persistent memory, like the bus's
/// [`crate::Counters`]: per event kind and purpose, plus loads and the
/// media traffic. `Copy`, so an interval is `after.since(&before)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmCounters {
    cells: [[PmTally; Purpose::COUNT]; PmEventKind::COUNT],
    /// Loads (instructions) and bytes loaded.
    pub loads: PmTally,
    /// Loads that missed the cache and read the media.
    pub load_misses: u64,
    /// 64-byte lines that reached the memory controller's write pending
    /// queue (write-backs, flushes of dirty lines, non-temporal lines).
    pub wpq_lines: u64,
    /// Media writes in XPLines (256 bytes each): a line whose XPLine was
    /// not in the DIMM's XPBuffer costs one.
    pub media_writes: u64,
    /// Media reads in XPLines.
    pub media_reads: u64,
}

impl Default for PmCounters {
    fn default() -> Self {
        PmCounters {
            cells: [[PmTally::default(); Purpose::COUNT]; PmEventKind::COUNT],
            loads: PmTally::default(),
            load_misses: 0,
            wpq_lines: 0,
            media_writes: 0,
            media_reads: 0,
        }
    }
}

impl PmCounters {
    /// The tally of one cell.
    pub fn get(&self, kind: PmEventKind, purpose: Purpose) -> PmTally {
        self.cells[kind as usize][purpose.index()]
    }

    /// The tally of a kind over all purposes.
    pub fn kind(&self, kind: PmEventKind) -> PmTally {
        self.cells[kind as usize]
            .iter()
            .fold(PmTally::default(), |a, c| PmTally {
                ops: a.ops + c.ops,
                bytes: a.bytes + c.bytes,
            })
    }

    /// Media bytes written (whole XPLines).
    pub fn media_write_bytes(&self, xpline: u64) -> u64 {
        self.media_writes * xpline
    }

    /// What was counted since `earlier`.
    pub fn since(&self, earlier: &PmCounters) -> PmCounters {
        let mut out = *self;
        for (row, old) in out.cells.iter_mut().zip(&earlier.cells) {
            for (c, o) in row.iter_mut().zip(old) {
                c.ops -= o.ops;
                c.bytes -= o.bytes;
            }
        }
        out.loads.ops -= earlier.loads.ops;
        out.loads.bytes -= earlier.loads.bytes;
        out.load_misses -= earlier.load_misses;
        out.wpq_lines -= earlier.wpq_lines;
        out.media_writes -= earlier.media_writes;
        out.media_reads -= earlier.media_reads;
        out
    }

    fn add(&mut self, kind: PmEventKind, purpose: Purpose, bytes: u64) {
        let c = &mut self.cells[kind as usize][purpose.index()];
        c.ops += 1;
        c.bytes += bytes;
    }
}

/// The persistent memory's trace: entries, payloads and the rolling hash
/// (`crate::event_log`, the record every trace keeps), and the
/// persistent-memory counters.
#[derive(Clone, Debug, Default)]
pub struct PmTrace {
    log: EventLog<PmEntry>,
    counters: PmCounters,
}

impl LogEntry for PmEntry {
    fn payload_len(&self) -> u32 {
        self.len
    }

    fn payload_at(&self) -> u64 {
        self.payload
    }

    fn set_payload_at(&mut self, at: u64) {
        self.payload = at;
    }
}

impl PmTrace {
    /// An empty trace keeping `mode` detail.
    pub fn new(mode: TraceMode) -> Self {
        PmTrace {
            log: EventLog::new(mode),
            counters: PmCounters::default(),
        }
    }

    /// The same trace, keeping `mode` detail from now on.
    pub fn with_mode(mut self, mode: TraceMode) -> Self {
        self.log.set_mode(mode);
        self
    }

    /// The recording mode.
    pub fn mode(&self) -> TraceMode {
        self.log.mode()
    }

    /// Records an entry (with its payload in `Full` mode) and counts it.
    pub fn record(&mut self, e: PmEntry, payload: &[u8]) -> u64 {
        self.counters.add(e.kind, e.purpose, u64::from(e.len));
        let words = |e: &PmEntry| {
            [
                e.time.0,
                e.bus_seq,
                e.addr,
                u64::from(e.len)
                    | (e.kind as u64) << 32
                    | (e.purpose.index() as u64) << 40
                    | u64::from(e.source) << 48,
            ]
        };
        self.log.record(e, words, payload)
    }

    /// Counts loads, load misses and media traffic (no entry).
    pub(crate) fn counters_mut(&mut self) -> &mut PmCounters {
        &mut self.counters
    }

    /// The counters so far.
    pub fn counters(&self) -> PmCounters {
        self.counters
    }

    /// Events so far (recorded or not).
    pub fn len(&self) -> u64 {
        self.log.len()
    }

    /// True if nothing happened yet.
    pub fn is_empty(&self) -> bool {
        self.log.len() == 0
    }

    /// The stored entries.
    pub fn entries(&self) -> &[PmEntry] {
        self.log.entries()
    }

    /// The payload of an entry (empty unless recorded in `Full` mode).
    pub fn payload(&self, e: &PmEntry) -> &[u8] {
        self.log.payload(e)
    }

    /// Rolling hash of every entry so far.
    pub fn hash(&self) -> u64 {
        self.log.hash()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::NO_PAYLOAD;

    fn entry(kind: PmEventKind, len: u32) -> PmEntry {
        PmEntry {
            time: SimTime(5),
            bus_seq: 0,
            addr: 64,
            payload: NO_PAYLOAD,
            len,
            kind,
            purpose: Purpose::new(1),
            source: 0,
        }
    }

    #[test]
    fn entries_are_counted_and_hashed_in_every_mode() {
        let mut off = PmTrace::new(TraceMode::Off);
        let mut full = PmTrace::new(TraceMode::Full);
        for t in [&mut off, &mut full] {
            t.record(entry(PmEventKind::Store, 8), &[1; 8]);
            t.record(entry(PmEventKind::Clwb, 0), &[]);
        }
        assert_eq!(off.hash(), full.hash());
        assert!(off.entries().is_empty());
        assert_eq!(full.payload(&full.entries()[0]), &[1; 8]);
        let c = full.counters();
        assert_eq!(
            c.get(PmEventKind::Store, Purpose::new(1)),
            PmTally { ops: 1, bytes: 8 }
        );
        assert_eq!(c.kind(PmEventKind::Clwb).ops, 1);
        let before = c;
        full.record(entry(PmEventKind::Store, 16), &[2; 16]);
        assert_eq!(full.counters().since(&before).kind(PmEventKind::Store).bytes, 16);
        assert_ne!(off.hash(), full.hash());
    }
}
