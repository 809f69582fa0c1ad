//! The bus trace and the traffic counters.
//!
//! Every TLP, every write-combining store and every device-internal
//! persistence event is an entry with a sequence number (its index), the
//! simulated time it happened, the time it takes effect, its kind, address,
//! length, purpose and an opaque attribution tag. A crash point is "after
//! entry k": entries are appended in simulated-time order, so entries 0..=k
//! are exactly what had happened when the power failed.
//!
//! Recording is cheap: an entry is a fixed-size `Copy` struct pushed onto a
//! `Vec`, payloads go to one growing byte arena, and a 64-bit rolling hash of
//! every entry is kept even when recording is off (for determinism checks).
//! Counters are plain arrays indexed by kind and purpose.

use crate::event_log::{EventLog, LogEntry};
use crate::time::SimTime;

/// What a trace entry is. The direction of a TLP follows from its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum EventKind {
    /// Host-to-device posted memory write (MWr) from a CPU core.
    MmioWrite = 0,
    /// Host-to-device non-posted memory read request (MRd) from a CPU core.
    MmioRead = 1,
    /// Device-to-host completion (CplD) answering an [`EventKind::MmioRead`].
    MmioReadCompletion = 2,
    /// Device-to-host memory read request (DMA read).
    DmaRead = 3,
    /// Host-to-device completion (CplD) answering a [`EventKind::DmaRead`].
    DmaReadCompletion = 4,
    /// Device-to-host posted memory write (DMA write).
    DmaWrite = 5,
    /// Device-to-host MSI-X message (a posted write to the interrupt address).
    Msix = 6,
    /// A CPU store into a write-combining buffer (not a bus transaction; it
    /// is recorded so that crash states can rebuild the WC buffers).
    WcStore = 7,
    /// A device-internal event that changes what is persistent (media
    /// program, destage, flush completion...). `code` is the device's own.
    Device = 8,
    /// A core's write-combining lines sent so far are ordered before
    /// everything it sends after: an `sfence`/`mfence` completed, or an
    /// uncached access drained the buffers (Intel SDM vol. 3A 11.3.1).
    /// Recorded only when the core sent WC lines since its previous one;
    /// not a bus transaction. `source` is the core.
    Fence = 9,
    /// Bytes of a PMR were read: by its device (internally), or for a host
    /// read request when the device served it. Not a bus transaction; the
    /// crash model holds every write the reader saw as landed. `source` is
    /// the port, `addr` the PMR offset, `len` the length.
    PmrRead = 10,
}

impl EventKind {
    /// Number of kinds (for counter arrays).
    pub const COUNT: usize = 11;
    /// Every kind, in index order.
    pub const ALL: [EventKind; EventKind::COUNT] = [
        EventKind::MmioWrite,
        EventKind::MmioRead,
        EventKind::MmioReadCompletion,
        EventKind::DmaRead,
        EventKind::DmaReadCompletion,
        EventKind::DmaWrite,
        EventKind::Msix,
        EventKind::WcStore,
        EventKind::Device,
        EventKind::Fence,
        EventKind::PmrRead,
    ];

    /// The direction of this kind of event.
    pub fn direction(self) -> Direction {
        match self {
            EventKind::MmioWrite | EventKind::MmioRead | EventKind::DmaReadCompletion => {
                Direction::Downstream
            }
            EventKind::MmioReadCompletion | EventKind::DmaRead | EventKind::DmaWrite | EventKind::Msix => {
                Direction::Upstream
            }
            EventKind::WcStore | EventKind::Fence => Direction::Cpu,
            EventKind::Device | EventKind::PmrRead => Direction::Device,
        }
    }

    /// True for events that are TLPs on the link.
    pub fn is_tlp(self) -> bool {
        matches!(self.direction(), Direction::Downstream | Direction::Upstream)
    }

    /// Short name for tables.
    pub fn name(self) -> &'static str {
        match self {
            EventKind::MmioWrite => "mmio-write",
            EventKind::MmioRead => "mmio-read",
            EventKind::MmioReadCompletion => "mmio-read-cpl",
            EventKind::DmaRead => "dma-read",
            EventKind::DmaReadCompletion => "dma-read-cpl",
            EventKind::DmaWrite => "dma-write",
            EventKind::Msix => "msix",
            EventKind::WcStore => "wc-store",
            EventKind::Device => "device",
            EventKind::Fence => "fence",
            EventKind::PmrRead => "pmr-read",
        }
    }
}

/// Where an event happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Root complex to device.
    Downstream,
    /// Device to root complex.
    Upstream,
    /// Inside a CPU core.
    Cpu,
    /// Inside the device.
    Device,
}

/// Why a transfer happens: a small traffic tag set by the driver or device
/// that starts it, kept in every trace entry and used to index the
/// [`Counters`].
///
/// The machine gives tags no meaning. It names only the ones that are its
/// own ([`Purpose::UNTAGGED`], [`Purpose::INTERRUPT`],
/// [`Purpose::FLUSH_READ`]); the layers above own the others and their
/// names (the NVMe ones are in `nvme_spec::traffic`, the Horae ordering
/// queue's in `ccnvme::horae`), and whoever prints a tag asks the layer that
/// owns it (`ccnvme::traffic::purpose_name`). Table 1 of the ccNVMe paper
/// counts by tag: queue entries (DMA(Q)), 4 KiB data blocks (Block I/O),
/// doorbells and PMR queue writes (MMIO).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Purpose(u8);

impl Purpose {
    /// Number of tag values, the fixed size of counter arrays: tags are
    /// `0..COUNT`.
    pub const COUNT: usize = 16;
    /// Untagged traffic.
    pub const UNTAGGED: Purpose = Purpose(0);
    /// An interrupt message (MSI-X, PCIe 3.0 6.1.4), tagged by the port.
    pub const INTERRUPT: Purpose = Purpose(6);
    /// A flush read: the zero-length read that proves earlier posted writes
    /// landed (PCIe 3.0 2.2.5: a read of length 1 DW with no byte enables).
    pub const FLUSH_READ: Purpose = Purpose(9);

    /// The tag `tag`, for the constants of the layers that own tags. Fails
    /// to compile in a constant (and panics elsewhere) if `tag` is not
    /// below [`Purpose::COUNT`].
    pub const fn new(tag: u8) -> Purpose {
        assert!(
            (tag as usize) < Purpose::COUNT,
            "traffic tags are below Purpose::COUNT"
        );
        Purpose(tag)
    }

    /// The tag at counter index `i`, or `None` if `i` is not below
    /// [`Purpose::COUNT`] (for decoders of saved traces).
    pub const fn from_index(i: usize) -> Option<Purpose> {
        if i < Purpose::COUNT {
            Some(Purpose(i as u8))
        } else {
            None
        }
    }

    /// Every tag value, in index order.
    pub fn all() -> impl Iterator<Item = Purpose> {
        (0..Purpose::COUNT as u8).map(Purpose)
    }

    /// The tag's value (its counter index).
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// The machine's name for its own tags; `None` for the tags that upper
    /// layers own.
    pub const fn pcie_name(self) -> Option<&'static str> {
        match self {
            Purpose::UNTAGGED => Some("other"),
            Purpose::INTERRUPT => Some("interrupt"),
            Purpose::FLUSH_READ => Some("flush-read"),
            _ => None,
        }
    }
}

/// Entry flag: the completer rejected the request (Unsupported Request).
pub const FLAG_UR: u8 = 1;
/// Entry flag: a TLP emitted from a write-combining buffer.
pub const FLAG_WC: u8 = 2;
/// Entry flag: the TLP targets the PMR BAR (else the register BAR).
pub const FLAG_PMR: u8 = 4;
/// Entry flag: the TLP is the first of a write-combining line emission.
pub const FLAG_LINE_START: u8 = 8;

/// Sentinel for "no payload recorded".
pub const NO_PAYLOAD: u64 = u64::MAX;

/// One trace entry. Its sequence number is its index in the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    /// When it happened (emission of a TLP; the store; the device event).
    pub time: SimTime,
    /// When it takes effect: a posted write to a device is applied (and, for
    /// the PMR, persistent) then; a completion or DMA write arrives then.
    pub effect: SimTime,
    /// Bus address (TLPs, stores) or a device-defined address (LBA).
    pub addr: u64,
    /// Offset of the payload in the payload arena, or [`NO_PAYLOAD`].
    pub payload: u64,
    /// Payload length in bytes (0 for reads and zero-length requests).
    pub len: u32,
    /// Opaque attribution tag set by whoever started the transfer.
    pub attr: u32,
    /// What the entry is.
    pub kind: EventKind,
    /// Why the transfer happened.
    pub purpose: Purpose,
    /// Core index (host-initiated), port index (device-initiated).
    pub source: u8,
    /// `FLAG_*` bits.
    pub flags: u8,
    /// Device-defined event code for [`EventKind::Device`], else 0.
    pub code: u16,
    /// Bytes on the wire, headers and framing included (0 if not a TLP).
    pub wire_bytes: u16,
}

/// How much of the trace to keep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TraceMode {
    /// Counters and the rolling hash only.
    #[default]
    Off,
    /// Every entry, without payloads.
    Events,
    /// Every entry with its payload (needed for crash exploration).
    Full,
    /// Counters only, without the rolling hash: for machines whose traces
    /// are never compared (the crash checker boots one per crash state,
    /// and hashing every payload byte was a tenth of its time).
    CountersOnly,
}

/// Totals for one (kind, purpose) cell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Logical operations (see the crate docs for the counting convention).
    pub ops: u64,
    /// TLPs.
    pub tlps: u64,
    /// Bytes on the wire, headers and framing included.
    pub wire_bytes: u64,
    /// Payload bytes.
    pub payload_bytes: u64,
}

impl Tally {
    fn add(&mut self, o: &Tally) {
        self.ops += o.ops;
        self.tlps += o.tlps;
        self.wire_bytes += o.wire_bytes;
        self.payload_bytes += o.payload_bytes;
    }
    fn sub(&self, o: &Tally) -> Tally {
        Tally {
            ops: self.ops - o.ops,
            tlps: self.tlps - o.tlps,
            wire_bytes: self.wire_bytes - o.wire_bytes,
            payload_bytes: self.payload_bytes - o.payload_bytes,
        }
    }
}

/// Traffic counters by kind and purpose. `Copy`, so a snapshot is a copy and
/// the traffic of an interval is `after.since(&before)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counters {
    cells: [[Tally; Purpose::COUNT]; EventKind::COUNT],
    /// Requests the completer rejected (Unsupported Request).
    pub unsupported_requests: u64,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            cells: [[Tally::default(); Purpose::COUNT]; EventKind::COUNT],
            unsupported_requests: 0,
        }
    }
}

impl Counters {
    /// The tally of one cell.
    pub fn get(&self, kind: EventKind, purpose: Purpose) -> Tally {
        self.cells[kind as usize][purpose.index()]
    }
    /// The tally of a kind over all purposes.
    pub fn kind(&self, kind: EventKind) -> Tally {
        let mut t = Tally::default();
        for c in &self.cells[kind as usize] {
            t.add(c);
        }
        t
    }
    /// The tally of a purpose over all kinds.
    pub fn purpose(&self, purpose: Purpose) -> Tally {
        let mut t = Tally::default();
        for row in &self.cells {
            t.add(&row[purpose.index()]);
        }
        t
    }
    /// Totals over every TLP kind.
    pub fn link_total(&self) -> Tally {
        let mut t = Tally::default();
        for k in EventKind::ALL.iter().filter(|k| k.is_tlp()) {
            t.add(&self.kind(*k));
        }
        t
    }
    /// What was counted since `earlier`.
    pub fn since(&self, earlier: &Counters) -> Counters {
        let mut out = Counters::default();
        for k in 0..EventKind::COUNT {
            for p in 0..Purpose::COUNT {
                out.cells[k][p] = self.cells[k][p].sub(&earlier.cells[k][p]);
            }
        }
        out.unsupported_requests = self.unsupported_requests - earlier.unsupported_requests;
        out
    }
    /// Adds one logical operation to a cell.
    pub fn add_op(&mut self, kind: EventKind, purpose: Purpose) {
        self.cells[kind as usize][purpose.index()].ops += 1;
    }
    fn add_tlp(&mut self, kind: EventKind, purpose: Purpose, wire: u64, payload: u64) {
        let c = &mut self.cells[kind as usize][purpose.index()];
        c.tlps += 1;
        c.wire_bytes += wire;
        c.payload_bytes += payload;
    }
    /// Every non-empty cell, for reports.
    pub fn nonzero(&self) -> Vec<(EventKind, Purpose, Tally)> {
        let mut v = Vec::new();
        for k in EventKind::ALL {
            for p in Purpose::all() {
                let t = self.get(k, p);
                if t != Tally::default() {
                    v.push((k, p, t));
                }
            }
        }
        v
    }
}

/// The bus trace: entries, payloads and the rolling hash
/// (`crate::event_log`, the one record every trace keeps), and the bus
/// counters.
#[derive(Debug, Default, Clone)]
pub struct BusTrace {
    log: EventLog<TraceEntry>,
    counters: Counters,
}

impl LogEntry for TraceEntry {
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

impl BusTrace {
    /// An empty trace that keeps `mode` detail.
    pub fn new(mode: TraceMode) -> Self {
        BusTrace {
            log: EventLog::new(mode),
            counters: Counters::default(),
        }
    }

    /// The recording mode.
    pub fn mode(&self) -> TraceMode {
        self.log.mode()
    }

    /// Forgets everything recorded, keeping the allocations for reuse.
    pub fn clear(&mut self) {
        self.log.clear();
        self.counters = Counters::default();
    }

    /// Changes the recording mode from now on.
    pub fn set_mode(&mut self, mode: TraceMode) {
        self.log.set_mode(mode);
    }

    /// Records an entry (and its payload in `Full` mode); counts it as a TLP
    /// if it is one. Returns its sequence number.
    #[inline]
    pub fn record(&mut self, e: TraceEntry, payload: &[u8]) -> u64 {
        if e.kind.is_tlp() {
            self.counters
                .add_tlp(e.kind, e.purpose, e.wire_bytes as u64, e.len as u64);
        }
        let words = |e: &TraceEntry| {
            [
                e.time.0,
                e.effect.0,
                e.addr,
                ((e.len as u64) << 32) | e.attr as u64,
                (e.kind as u64)
                    | (e.purpose.index() as u64) << 8
                    | (e.source as u64) << 16
                    | (e.flags as u64) << 24
                    | (e.code as u64) << 32,
            ]
        };
        self.log.record(e, words, payload)
    }

    /// Records an entry whose payload is the payload of earlier entry
    /// `same_as` (stored once). Falls back to recording `payload` if that
    /// entry is not stored.
    pub fn record_sharing(&mut self, e: TraceEntry, same_as: u64, payload: &[u8]) -> u64 {
        let words = [
            e.time.0,
            e.addr,
            same_as,
            (e.kind as u64) | (e.code as u64) << 8 | (e.len as u64) << 24,
        ];
        match self.log.record_sharing(e, same_as, &words) {
            Some(seq) => seq,
            None => self.record(e, payload),
        }
    }

    /// Counts a logical operation (see the crate docs).
    #[inline]
    pub fn count_op(&mut self, kind: EventKind, purpose: Purpose) {
        self.counters.add_op(kind, purpose);
    }

    /// Counts a request rejected by its completer.
    pub fn count_unsupported(&mut self) {
        self.counters.unsupported_requests += 1;
    }

    /// The counters so far.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Number of events recorded so far (recorded or not, in any mode).
    pub fn len(&self) -> u64 {
        self.log.len()
    }

    /// True if nothing happened yet.
    pub fn is_empty(&self) -> bool {
        self.log.len() == 0
    }

    /// The stored entries (empty in `Off` mode).
    pub fn entries(&self) -> &[TraceEntry] {
        self.log.entries()
    }

    /// The payload of an entry (empty unless recorded in `Full` mode).
    pub fn payload(&self, e: &TraceEntry) -> &[u8] {
        self.log.payload(e)
    }

    /// Rolling hash of every event so far: equal traces have equal hashes
    /// (not kept in [`TraceMode::CountersOnly`]).
    pub fn hash(&self) -> u64 {
        self.log.hash()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(kind: EventKind, len: u32) -> TraceEntry {
        TraceEntry {
            time: SimTime(1),
            effect: SimTime(2),
            addr: 0x1000,
            payload: NO_PAYLOAD,
            len,
            attr: 0,
            kind,
            purpose: Purpose::new(2),
            source: 0,
            flags: 0,
            code: 0,
            wire_bytes: (len + 20) as u16,
        }
    }

    #[test]
    fn counters_count_tlps_and_diff() {
        let mut t = BusTrace::new(TraceMode::Full);
        let before = t.counters();
        t.count_op(EventKind::DmaWrite, Purpose::new(2));
        t.record(entry(EventKind::DmaWrite, 4), &[1, 2, 3, 4]);
        t.record(entry(EventKind::WcStore, 4), &[5, 6, 7, 8]);
        let d = t.counters().since(&before);
        let tally = d.get(EventKind::DmaWrite, Purpose::new(2));
        assert_eq!(
            tally,
            Tally {
                ops: 1,
                tlps: 1,
                wire_bytes: 24,
                payload_bytes: 4
            }
        );
        assert_eq!(d.kind(EventKind::WcStore).tlps, 0, "stores are not TLPs");
        assert_eq!(t.payload(&t.entries()[1]), &[5, 6, 7, 8]);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn hash_is_kept_in_every_mode_and_depends_on_content() {
        let mut a = BusTrace::new(TraceMode::Off);
        let mut b = BusTrace::new(TraceMode::Full);
        a.record(entry(EventKind::MmioWrite, 4), &[0; 4]);
        b.record(entry(EventKind::MmioWrite, 4), &[0; 4]);
        assert_eq!(a.hash(), b.hash());
        assert!(a.entries().is_empty());
        let mut c = BusTrace::new(TraceMode::Off);
        c.record(entry(EventKind::MmioWrite, 8), &[0; 8]);
        assert_ne!(a.hash(), c.hash());
    }
}
