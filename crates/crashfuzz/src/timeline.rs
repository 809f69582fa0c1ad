//! Timelines: a recorded run as Chrome trace event JSON, the format
//! Perfetto (ui.perfetto.dev) and `chrome://tracing` open, so a person can
//! see where a transaction's time goes.
//!
//! The file is `{"traceEvents": [...], "displayTimeUnit": "ns",
//! "otherData": {...}}` with complete events (`"ph": "X"`, `ts` and `dur`
//! in microseconds of simulated time, picosecond precision) and metadata
//! events (`"ph": "M"`) naming the processes and threads. The tracks:
//!
//! - **cores** (pid 1): per core, `core N` with the workload's operations
//!   (from the recording's `ops`), and `core N mmio` with what the core did
//!   on the bus: MMIO stores and write-combining stores (zero-length
//!   spans at the store) and uncached reads (from the request to the
//!   completion's arrival: the core stalls that long).
//! - **queues** (pid 2): per submission queue, `sq N`: each command from
//!   its submission (the SQ tail doorbell of a host queue, the store of its
//!   entry into a P-SQ in the PMR) to the arrival of its completion entry,
//!   paired by the attribution tag (queue id, command id) that driver and
//!   controller put on every transfer of the command. Opcode, LBA and
//!   block count come from the fetched (or stored) entry; the arguments
//!   also count the command's data bytes on the link and its blocks taken
//!   by the drive.
//! - **PCIe link** (pid 3): `host -> device` and `device -> host`, every
//!   TLP from emission to arrival (`time`..`effect` of its trace entry).
//!   TLPs of one direction, kind and purpose that are in flight together
//!   (each emitted before the previous ones all arrived: a transfer split
//!   into TLPs, a queue of completions waiting for the wire) are one span,
//!   `KIND PURPOSE xN`, from the first emission to the last arrival, with
//!   the TLP count, bytes and first and last trace entry in its arguments:
//!   one by one they would need a lane each (a 256 KiB write queues some
//!   600 TLPs on the link at once).
//! - **media** (pid 4): `media programs`, each block program ending at its
//!   MEDIA_WRITE event and lasting the profile's program time (never
//!   starting before the block's DATA_IN), and `media events` with DATA_IN
//!   and FLUSH_DONE as zero-length spans.
//!
//! Spans of one track that overlap in time (commands in flight together,
//! pipelined TLPs, media units programming in parallel) are spread over
//! lanes: extra threads named `NAME #2`, `NAME #3`..., so that the spans of
//! every thread nest properly, as the viewers require. The JSON is
//! streamed while the trace is walked once.

use std::collections::BTreeMap;
use std::io::{BufWriter, Write};
use std::path::Path;

use ccnvme::traffic::purpose_name;
use nvme_ctrl::events::{DATA_IN, FLUSH_DONE, MEDIA_WRITE, SUBMITTED};
use nvme_spec::regs::{decode_doorbell, Doorbell};
use nvme_spec::traffic;
use nvme_spec::{AdminOpcode, CompletionEntry, IoOpcode, SubmissionEntry, TxFlags};
use pcie_sim::trace::{Direction, FLAG_UR, FLAG_WC, NO_PAYLOAD};
use pcie_sim::{BarKind, EventKind, Purpose, TraceEntry};
use serde::Serialize;

use crate::error::Error;
use crate::record::Recording;
use crate::saved::SavedConfig;

const PID_CORES: u32 = 1;
const PID_QUEUES: u32 = 2;
const PID_LINK: u32 = 3;
const PID_MEDIA: u32 = 4;

/// What an export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimelineStats {
    /// Events written (spans and metadata).
    pub events: u64,
    /// Spans written (`"ph": "X"`).
    pub spans: u64,
    /// Threads (tracks and their lanes).
    pub threads: usize,
    /// End of the run in simulated picoseconds: the last trace entry's
    /// arrival or the last operation's return, whichever is later.
    pub run_end_ps: u64,
}

/// Writes the timeline of `rec` (whose machines `cfg` describes) to `out`.
pub fn export<W: Write>(rec: &Recording, cfg: &SavedConfig, out: W) -> std::io::Result<TimelineStats> {
    let mut x = Exporter::new(rec, cfg, out);
    x.w.write_all(b"{\"traceEvents\":[\n")?;
    x.ops()?;
    for (i, e) in rec.trace.entries().iter().enumerate() {
        x.entry(i, e)?;
    }
    x.finish()?;
    let (threads, run_end_ps) = (x.tracks.lanes(), x.run_end);
    let (events, spans) = (x.events, x.spans);
    write!(
        x.w,
        "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{}}}\n",
        serde_json::json!({
            "workload": cfg.workload,
            "mode": crate::record::mode_label(cfg.mode, cfg.fault),
            "profile": cfg.profile.name,
            "seed": cfg.seed,
            "trace_entries": rec.trace.entries().len(),
            "run_end_us": us(run_end_ps),
        })
    )?;
    x.w.flush()?;
    Ok(TimelineStats {
        events,
        spans,
        threads,
        run_end_ps,
    })
}

/// Writes the timeline of `rec` to the file `path`.
pub fn export_file(rec: &Recording, cfg: &SavedConfig, path: &Path) -> Result<TimelineStats, Error> {
    let io = |source: std::io::Error| Error::Io {
        path: path.display().to_string(),
        source,
    };
    let f = std::fs::File::create(path).map_err(io)?;
    export(rec, cfg, f).map_err(io)
}

/// Picoseconds to microseconds.
fn us(ps: u64) -> f64 {
    ps as f64 / 1e6
}

/// One lane of a track: a thread of the JSON.
#[derive(Debug)]
struct Lane {
    tid: u32,
    /// End of the latest span placed on it.
    busy_until: u64,
    /// A span whose end is not known yet is on it.
    open: bool,
}

/// A named track in one process, with its lanes.
#[derive(Debug)]
struct Track {
    pid: u32,
    name: String,
    sort: u32,
    lanes: Vec<Lane>,
}

/// The tracks, and which thread ids they use.
#[derive(Debug, Default)]
struct Tracks {
    tracks: Vec<Track>,
    by_name: BTreeMap<(u32, String), usize>,
    next_tid: u32,
}

impl Tracks {
    /// The track `name` of process `pid`, created if new (`sort` orders
    /// tracks within the process).
    fn get(&mut self, pid: u32, name: &str, sort: u32) -> usize {
        if let Some(&t) = self.by_name.get(&(pid, name.to_string())) {
            return t;
        }
        self.tracks.push(Track {
            pid,
            name: name.into(),
            sort,
            lanes: Vec::new(),
        });
        let t = self.tracks.len() - 1;
        self.by_name.insert((pid, name.into()), t);
        t
    }

    /// A free lane of track `t` for a span starting at `start`.
    fn free_lane(&mut self, t: usize, start: u64) -> usize {
        let track = &mut self.tracks[t];
        if let Some(l) = track.lanes.iter().position(|l| !l.open && l.busy_until <= start) {
            return l;
        }
        self.next_tid += 1;
        track.lanes.push(Lane {
            tid: self.next_tid,
            busy_until: 0,
            open: false,
        });
        track.lanes.len() - 1
    }

    /// Places the span `[start, end]` on track `t`; returns its thread.
    fn place(&mut self, t: usize, start: u64, end: u64) -> u32 {
        let l = self.free_lane(t, start);
        let lane = &mut self.tracks[t].lanes[l];
        lane.busy_until = lane.busy_until.max(end);
        lane.tid
    }

    /// Reserves a lane of track `t` for a span starting at `start` whose end
    /// comes later ([`Tracks::close`]).
    fn open(&mut self, t: usize, start: u64) -> (usize, u32) {
        let l = self.free_lane(t, start);
        let lane = &mut self.tracks[t].lanes[l];
        lane.open = true;
        lane.busy_until = lane.busy_until.max(start);
        (l, lane.tid)
    }

    /// Ends the open span on lane `l` of track `t` at `end`.
    fn close(&mut self, t: usize, l: usize, end: u64) {
        let lane = &mut self.tracks[t].lanes[l];
        lane.open = false;
        lane.busy_until = lane.busy_until.max(end);
    }

    /// Number of lanes of every track.
    fn lanes(&self) -> usize {
        self.tracks.iter().map(|t| t.lanes.len()).sum()
    }
}

/// A span's arguments (absent ones are left out of the JSON).
#[derive(Debug, Default, Serialize)]
struct Args {
    #[serde(skip_serializing_if = "Option::is_none")]
    entry: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    end_entry: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    addr: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    len: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tlps: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    wire_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    purpose: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    sqid: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cid: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    slba: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    blocks: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    txid: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tx_flags: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    blocks_taken: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    block: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thread: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    unsupported: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    incomplete: bool,
}

/// A complete event.
#[derive(Serialize)]
struct Span<'a> {
    name: &'a str,
    cat: &'static str,
    ph: &'static str,
    ts: f64,
    dur: f64,
    pid: u32,
    tid: u32,
    args: &'a Args,
}

/// A metadata event.
#[derive(Serialize)]
struct Meta<'a> {
    name: &'static str,
    ph: &'static str,
    pid: u32,
    tid: u32,
    args: MetaArgs<'a>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum MetaArgs<'a> {
    Name { name: &'a str },
    Sort { sort_index: u32 },
}

/// TLPs of one direction, kind and purpose in flight together (each
/// emitted before the previous ones had all arrived): one span from the
/// first emission to the last arrival.
#[derive(Debug)]
struct Burst {
    down: bool,
    kind: EventKind,
    purpose: Purpose,
    start: u64,
    end: u64,
    first: usize,
    last: usize,
    addr: u64,
    tlps: u32,
    bytes: u64,
    wire: u64,
    /// The attribution tag, if every TLP has the same.
    attr: Option<u32>,
    unsupported: bool,
}

impl Burst {
    fn new(i: usize, e: &TraceEntry, down: bool) -> Burst {
        Burst {
            down,
            kind: e.kind,
            purpose: e.purpose,
            start: e.time.0,
            end: e.effect.0.max(e.time.0),
            first: i,
            last: i,
            addr: e.addr,
            tlps: 1,
            bytes: u64::from(e.len),
            wire: u64::from(e.wire_bytes),
            attr: Some(e.attr),
            unsupported: e.flags & FLAG_UR != 0,
        }
    }

    fn add(&mut self, i: usize, e: &TraceEntry) {
        self.end = self.end.max(e.effect.0);
        self.last = i;
        self.tlps += 1;
        self.bytes += u64::from(e.len);
        self.wire += u64::from(e.wire_bytes);
        if self.attr != Some(e.attr) {
            self.attr = None;
        }
        self.unsupported |= e.flags & FLAG_UR != 0;
    }
}

/// A command between its submission and its completion.
#[derive(Debug)]
struct Command {
    track: usize,
    lane: usize,
    tid: u32,
    start: u64,
    entry: usize,
    args: Args,
    name: Option<String>,
}

/// An uncached read waiting for its completion.
#[derive(Debug)]
struct Read {
    attr: u32,
    purpose: Purpose,
    track: usize,
    lane: usize,
    tid: u32,
    start: u64,
    entry: usize,
}

struct Exporter<'r, W: Write> {
    rec: &'r Recording,
    /// The fixed tracks: link down, link up, media programs, media events.
    down: usize,
    up: usize,
    programs: usize,
    media_events: usize,
    program_ps: u64,
    w: BufWriter<W>,
    tracks: Tracks,
    events: u64,
    spans: u64,
    run_end: u64,
    commands: BTreeMap<u32, Command>,
    reads: Vec<Read>,
    /// The TLP bursts in flight, at most one per direction, kind and
    /// purpose.
    bursts: Vec<Burst>,
    /// DATA_IN payload offset -> when the block came in.
    data_in: BTreeMap<u64, u64>,
}

impl<'r, W: Write> Exporter<'r, W> {
    fn new(rec: &'r Recording, cfg: &SavedConfig, out: W) -> Self {
        let entries_end = rec
            .trace
            .entries()
            .iter()
            .map(|e| e.effect.0.max(e.time.0))
            .max()
            .unwrap_or(0);
        let ops_end = rec.ops.iter().map(|o| o.end_ps).max().unwrap_or(0);
        let mut tracks = Tracks::default();
        // Fixed tracks first, in display order.
        for c in 0..cfg.cores {
            tracks.get(PID_CORES, &format!("core {c}"), 2 * c as u32);
            tracks.get(PID_CORES, &format!("core {c} mmio"), 2 * c as u32 + 1);
        }
        let down = tracks.get(PID_LINK, "host -> device", 0);
        let up = tracks.get(PID_LINK, "device -> host", 1);
        let programs = tracks.get(PID_MEDIA, "media programs", 0);
        let media_events = tracks.get(PID_MEDIA, "media events", 1);
        Exporter {
            rec,
            down,
            up,
            programs,
            media_events,
            program_ps: cfg.profile.program_time.as_ps(),
            w: BufWriter::with_capacity(1 << 20, out),
            tracks,
            events: 0,
            spans: 0,
            run_end: entries_end.max(ops_end),
            commands: BTreeMap::new(),
            reads: Vec::new(),
            bursts: Vec::new(),
            data_in: BTreeMap::new(),
        }
    }

    fn write_event(&mut self, ev: &impl Serialize) -> std::io::Result<()> {
        if self.events > 0 {
            self.w.write_all(b",\n")?;
        }
        serde_json::to_writer(&mut self.w, ev)?;
        self.events += 1;
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn span(
        &mut self,
        name: &str,
        cat: &'static str,
        pid: u32,
        tid: u32,
        start: u64,
        end: u64,
        args: &Args,
    ) -> std::io::Result<()> {
        let end = end.max(start);
        self.spans += 1;
        self.write_event(&Span {
            name,
            cat,
            ph: "X",
            ts: us(start),
            dur: us(end - start),
            pid,
            tid,
            args,
        })
    }

    /// Places a span on track `t` and writes it.
    fn placed(
        &mut self,
        t: usize,
        name: &str,
        cat: &'static str,
        start: u64,
        end: u64,
        args: &Args,
    ) -> std::io::Result<()> {
        let end = end.max(start);
        let tid = self.tracks.place(t, start, end);
        let pid = self.tracks.tracks[t].pid;
        self.span(name, cat, pid, tid, start, end, args)
    }

    /// The workload's operations on their cores.
    fn ops(&mut self) -> std::io::Result<()> {
        let rec = self.rec;
        for o in &rec.ops {
            let t = self
                .tracks
                .get(PID_CORES, &format!("core {}", o.thread), 2 * o.thread as u32);
            let args = Args {
                entry: Some(o.start),
                end_entry: Some(o.end),
                thread: Some(o.thread),
                error: o.error.clone(),
                ..Args::default()
            };
            self.placed(t, &o.op, "op", o.start_ps, o.end_ps, &args)?;
        }
        Ok(())
    }

    fn core_mmio(&mut self, core: u8) -> usize {
        self.tracks
            .get(PID_CORES, &format!("core {core} mmio"), 2 * core as u32 + 1)
    }

    fn store_args(i: usize, e: &TraceEntry) -> Args {
        Args {
            entry: Some(i),
            addr: Some(format!("{:#x}", e.addr)),
            len: Some(e.len),
            purpose: Some(purpose_name(e.purpose)),
            sqid: (e.attr != 0).then_some((e.attr >> 16) as u16),
            cid: (e.attr != 0).then_some(e.attr as u16),
            unsupported: e.flags & FLAG_UR != 0,
            ..Args::default()
        }
    }

    fn entry(&mut self, i: usize, e: &TraceEntry) -> std::io::Result<()> {
        let (t, eff) = (e.time.0, e.effect.0.max(e.time.0));
        if e.kind.is_tlp() {
            self.tlp(i, e)?;
        }
        match e.kind {
            EventKind::WcStore => {
                let track = self.core_mmio(e.source);
                let name = format!("wc-store {}", purpose_name(e.purpose));
                self.placed(track, &name, "cpu", t, t, &Self::store_args(i, e))?;
                if e.purpose == traffic::QUEUE_ENTRY && e.len == 64 {
                    // An entry stored into a P-SQ in the PMR: submitted.
                    self.open_command(e.attr, i, t);
                    self.describe_entries(e.attr >> 16, self.rec.trace.payload(e));
                }
            }
            EventKind::MmioWrite => {
                let track = self.core_mmio(e.source);
                let wc = if e.flags & FLAG_WC != 0 { " (wc line)" } else { "" };
                let name = format!("mmio-write {}{wc}", purpose_name(e.purpose));
                self.placed(track, &name, "cpu", t, t, &Self::store_args(i, e))?;
                if e.purpose == traffic::DOORBELL && self.is_sq_tail(e.addr) {
                    self.open_command(e.attr, i, t);
                }
            }
            EventKind::Fence => {
                let track = self.core_mmio(e.source);
                self.placed(
                    track,
                    "fence (wc lines ordered)",
                    "cpu",
                    t,
                    t,
                    &Self::store_args(i, e),
                )?;
            }
            EventKind::PmrRead => {}
            EventKind::MmioRead => {
                let track = self.core_mmio(e.source);
                let (lane, tid) = self.tracks.open(track, t);
                self.reads.push(Read {
                    attr: e.attr,
                    purpose: e.purpose,
                    track,
                    lane,
                    tid,
                    start: t,
                    entry: i,
                });
            }
            EventKind::MmioReadCompletion => {
                let k = self
                    .reads
                    .iter()
                    .position(|r| r.attr == e.attr && r.purpose == e.purpose)
                    .or(if self.reads.is_empty() { None } else { Some(0) });
                if let Some(k) = k {
                    let r = self.reads.remove(k);
                    self.close_read(r, eff, Some(i))?;
                }
            }
            EventKind::DmaReadCompletion if e.purpose == traffic::QUEUE_ENTRY => {
                // Fetched submission entries: their opcodes name commands.
                self.describe_entries(e.attr >> 16, self.rec.trace.payload(e));
            }
            EventKind::DmaReadCompletion | EventKind::DmaWrite if e.purpose == traffic::DATA_BLOCK => {
                self.count_data(e.attr, e.len);
            }
            EventKind::DmaWrite if e.purpose == traffic::QUEUE_ENTRY => {
                // A completion entry: the command is done when it arrives.
                self.close_command(e, i, eff)?;
            }
            EventKind::DmaReadCompletion | EventKind::DmaWrite | EventKind::DmaRead | EventKind::Msix => {}
            EventKind::Device => self.device(i, e)?,
        }
        Ok(())
    }

    /// Adds a TLP to the burst of its direction, kind and purpose if it
    /// was emitted while that burst was in flight; else writes that burst
    /// and starts a new one.
    fn tlp(&mut self, i: usize, e: &TraceEntry) -> std::io::Result<()> {
        let down = e.kind.direction() == Direction::Downstream;
        let k = self
            .bursts
            .iter()
            .position(|b| b.down == down && b.kind == e.kind && b.purpose == e.purpose);
        if let Some(k) = k {
            if e.time.0 <= self.bursts[k].end {
                self.bursts[k].add(i, e);
                return Ok(());
            }
            let b = self.bursts.swap_remove(k);
            self.write_burst(b)?;
        }
        self.bursts.push(Burst::new(i, e, down));
        Ok(())
    }

    /// Writes one burst of TLPs as a span on its direction's track.
    fn write_burst(&mut self, b: Burst) -> std::io::Result<()> {
        let track = if b.down { self.down } else { self.up };
        let name = if b.tlps == 1 {
            format!("{} {}", b.kind.name(), purpose_name(b.purpose))
        } else {
            format!("{} {} x{}", b.kind.name(), purpose_name(b.purpose), b.tlps)
        };
        let tag = b.attr.filter(|a| *a != 0);
        let args = Args {
            entry: Some(b.first),
            end_entry: (b.last != b.first).then_some(b.last),
            addr: Some(format!("{:#x}", b.addr)),
            tlps: Some(b.tlps),
            data_bytes: Some(b.bytes),
            wire_bytes: Some(b.wire),
            purpose: Some(purpose_name(b.purpose)),
            sqid: tag.map(|a| (a >> 16) as u16),
            cid: tag.map(|a| a as u16),
            unsupported: b.unsupported,
            ..Args::default()
        };
        self.placed(track, &name, "tlp", b.start, b.end, &args)
    }

    fn is_sq_tail(&self, addr: u64) -> bool {
        match self.rec.layout.decode(addr, 4) {
            Some((_, BarKind::Registers, off)) => {
                matches!(decode_doorbell(off, 0), Some(Doorbell::SqTail(_)))
            }
            _ => false,
        }
    }

    fn open_command(&mut self, attr: u32, i: usize, t: u64) {
        if self.commands.contains_key(&attr) {
            return;
        }
        let sqid = (attr >> 16) as u16;
        let track = self
            .tracks
            .get(PID_QUEUES, &format!("sq {sqid}"), u32::from(sqid));
        let (lane, tid) = self.tracks.open(track, t);
        self.commands.insert(
            attr,
            Command {
                track,
                lane,
                tid,
                start: t,
                entry: i,
                args: Args {
                    entry: Some(i),
                    sqid: Some(sqid),
                    cid: Some(attr as u16),
                    ..Args::default()
                },
                name: None,
            },
        );
    }

    /// Names the open commands whose entries `payload` holds (64-byte
    /// submission entries of queue `sqid`).
    fn describe_entries(&mut self, sqid: u32, payload: &[u8]) {
        for raw in payload.chunks_exact(64) {
            let mut b = [0u8; 64];
            b.copy_from_slice(raw);
            let sqe = SubmissionEntry::from_bytes(&b);
            let attr = (sqid << 16) | u32::from(sqe.cid());
            let Some(c) = self.commands.get_mut(&attr) else {
                continue;
            };
            let op = sqe.opcode();
            c.name = Some(if sqid == 0 {
                AdminOpcode::try_from(op).map_or_else(|o| format!("admin {o:#04x}"), |a| format!("{a:?}"))
            } else {
                match IoOpcode::try_from(op) {
                    Ok(IoOpcode::Flush) => "flush".into(),
                    Ok(IoOpcode::Write) => "write".into(),
                    Ok(IoOpcode::Read) => "read".into(),
                    Ok(IoOpcode::WriteZeroes) => "write-zeroes".into(),
                    Ok(IoOpcode::DatasetManagement) => "dataset-management".into(),
                    Err(o) => format!("io {o:#04x}"),
                }
            });
            if sqid != 0 && matches!(IoOpcode::try_from(op), Ok(IoOpcode::Write | IoOpcode::Read)) {
                c.args.slba = Some(sqe.slba());
                c.args.blocks = Some(u32::from(sqe.nlb()) + 1);
            }
            let flags = sqe.tx_flags();
            if sqe.txid() != 0 || flags != TxFlags::NONE {
                c.args.txid = Some(sqe.txid());
                let names: Vec<&str> = [
                    (TxFlags::TX, "tx"),
                    (TxFlags::BEGIN, "begin"),
                    (TxFlags::COMMIT, "commit"),
                ]
                .iter()
                .filter(|(f, _)| flags.contains(*f))
                .map(|(_, n)| *n)
                .collect();
                c.args.tx_flags = Some(names.join("+"));
            }
        }
    }

    fn count_data(&mut self, attr: u32, len: u32) {
        if let Some(c) = self.commands.get_mut(&attr) {
            *c.args.data_bytes.get_or_insert(0) += u64::from(len);
        }
    }

    fn close_command(&mut self, e: &TraceEntry, i: usize, end: u64) -> std::io::Result<()> {
        let Some(mut c) = self.commands.remove(&e.attr) else {
            return Ok(());
        };
        let payload = self.rec.trace.payload(e);
        if let Ok(raw) = <[u8; 16]>::try_from(payload) {
            let cqe = CompletionEntry::from_bytes(&raw);
            if cqe.status.sct != 0 || cqe.status.sc != 0 {
                c.args.status = Some(cqe.status.to_string());
            }
        }
        c.args.end_entry = Some(i);
        self.finish_command(c, end)
    }

    fn finish_command(&mut self, c: Command, end: u64) -> std::io::Result<()> {
        self.tracks.close(c.track, c.lane, end);
        let name = c.name.unwrap_or_else(|| "command".into());
        self.span(&name, "command", PID_QUEUES, c.tid, c.start, end, &c.args)
    }

    fn close_read(&mut self, r: Read, end: u64, completion: Option<usize>) -> std::io::Result<()> {
        self.tracks.close(r.track, r.lane, end);
        let args = Args {
            entry: Some(r.entry),
            end_entry: completion,
            purpose: Some(purpose_name(r.purpose)),
            incomplete: completion.is_none(),
            ..Args::default()
        };
        let name = format!("mmio-read {}", purpose_name(r.purpose));
        self.span(&name, "cpu", PID_CORES, r.tid, r.start, end, &args)
    }

    fn device(&mut self, i: usize, e: &TraceEntry) -> std::io::Result<()> {
        let t = e.time.0;
        let events = self.media_events;
        let args = Args {
            entry: Some(i),
            block: Some(e.addr),
            sqid: (e.attr != 0).then_some((e.attr >> 16) as u16),
            cid: (e.attr != 0).then_some(e.attr as u16),
            ..Args::default()
        };
        match e.code {
            DATA_IN => {
                if e.payload != NO_PAYLOAD {
                    self.data_in.insert(e.payload, t);
                }
                if let Some(c) = self.commands.get_mut(&e.attr) {
                    *c.args.blocks_taken.get_or_insert(0) += 1;
                }
                self.placed(events, &format!("data-in blk {}", e.addr), "media", t, t, &args)
            }
            MEDIA_WRITE => {
                let came = self.data_in.remove(&e.payload).unwrap_or(0);
                let start = t.saturating_sub(self.program_ps).max(came.min(t));
                self.placed(
                    self.programs,
                    &format!("program blk {}", e.addr),
                    "media",
                    start,
                    t,
                    &args,
                )
            }
            FLUSH_DONE => self.placed(events, "flush-done", "media", t, t, &args),
            // For the crash model only (its `addr` is a trace position, not
            // a block): the command's span on its queue starts at its
            // submission already.
            SUBMITTED => Ok(()),
            code => self.placed(events, &format!("device event {code}"), "media", t, t, &args),
        }
    }

    /// Ends what never ended at the end of the run, and names the tracks.
    fn finish(&mut self) -> std::io::Result<()> {
        let mut bursts = std::mem::take(&mut self.bursts);
        bursts.sort_by_key(|b| b.first);
        for b in bursts {
            self.write_burst(b)?;
        }
        let end = self.run_end;
        let mut open: Vec<Command> = std::mem::take(&mut self.commands).into_values().collect();
        open.sort_by_key(|c| c.entry);
        for mut c in open {
            c.args.incomplete = true;
            self.finish_command(c, end)?;
        }
        for r in std::mem::take(&mut self.reads) {
            self.close_read(r, end, None)?;
        }
        for (pid, name) in [
            (PID_CORES, "cores"),
            (PID_QUEUES, "NVMe queues"),
            (PID_LINK, "PCIe link"),
            (PID_MEDIA, "media"),
        ] {
            self.write_event(&Meta {
                name: "process_name",
                ph: "M",
                pid,
                tid: 0,
                args: MetaArgs::Name { name },
            })?;
            self.write_event(&Meta {
                name: "process_sort_index",
                ph: "M",
                pid,
                tid: 0,
                args: MetaArgs::Sort { sort_index: pid },
            })?;
        }
        let mut threads = Vec::new();
        for t in &self.tracks.tracks {
            for (k, l) in t.lanes.iter().enumerate() {
                let name = if k == 0 {
                    t.name.clone()
                } else {
                    format!("{} #{}", t.name, k + 1)
                };
                threads.push((t.pid, l.tid, name, t.sort * 1000 + k as u32));
            }
        }
        for (pid, tid, name, sort) in threads {
            self.write_event(&Meta {
                name: "thread_name",
                ph: "M",
                pid,
                tid,
                args: MetaArgs::Name { name: &name },
            })?;
            self.write_event(&Meta {
                name: "thread_sort_index",
                ph: "M",
                pid,
                tid,
                args: MetaArgs::Sort { sort_index: sort },
            })?;
        }
        Ok(())
    }
}
