//! Saved runs: a recorded run in a file, so that a run recorded elsewhere
//! (a FUSE mount of MQFS used by real programs, or a built-in workload
//! saved with `crashfuzz save`) can be explored, replayed and exported as a
//! timeline later, on any machine.
//!
//! A [`SavedRun`] is a [`Recording`] plus the [`SavedConfig`] that boots its
//! recovery machines: the bus trace with payloads, the bus layout, the PMR
//! and media images the run started from, the promises its persistence
//! points made ([`Promise`]), and, for timelines and reports, its
//! operations. `crashfuzz explore --trace FILE` explores it with the same
//! enumeration, checks and oracle as a built-in workload; its violations'
//! ids start with `@FILE` and `crashfuzz replay` replays them.
//!
//! # File format (version 2)
//!
//! ```text
//! offset  size  field
//! 0       8     magic "CFZSAVED"
//! 8       4     format version, u32 little-endian (2; version 1, before
//!               promised states carried extended attributes, is refused)
//! 12      8     body length in bytes, u64 little-endian
//! 20      4     CRC-32 (IEEE, crc32fast) of the body, u32 little-endian
//! 24      ...   body: bincode 1.x, little-endian, variable-length integers
//!               (`bincode::DefaultOptions` with varint encoding), no
//!               trailing bytes
//! ```
//!
//! The body is, in this order:
//!
//! 1. `config`: workload label (string), mode name (`mq`, `classic`, ...),
//!    fault name (option of string), drive profile name (one of
//!    `nvme_ctrl::SsdProfile::all()`), seed (u64), cores (u32), host DRAM
//!    bytes (u64). Recovery machines are
//!    [`crate::record::machine_profile`]`(cores, dram)` with a controller
//!    `ControllerConfig::new(profile)` on port 0.
//! 2. `layout`: per port, register BAR base and size, PMR BAR base and
//!    size (option).
//! 3. `pmr`: its length in bytes and its non-zero 4 KiB pages as
//!    (page index u32, 4096 bytes).
//! 4. `media`: its size in 4 KiB blocks and its non-zero blocks as (block
//!    u64, 4096 bytes). Only blocks that differ from zero are stored, in
//!    the file itself: a saved run never refers to an image file, because
//!    the image a mounted run starts from is the very file the run then
//!    writes, so only a copy of its start is a faithful base; zero blocks
//!    cost nothing, so a fresh 64 MiB image with a small file system saves
//!    in a few hundred KiB.
//! 5. `promises`, `ops`, `refused`: serde encodings of [`Promise`],
//!    [`OpRecord`] and (operation, error) pairs.
//! 6. `trace`: the entry count, then each entry: time as a signed delta
//!    from the previous entry's time, effect as a signed delta from its
//!    time (picoseconds), address, length, attribution tag, kind (an
//!    index into `EventKind::ALL`), purpose (the tag's value,
//!    `Purpose::index`), source, flags, device code, wire bytes, and its
//!    payload: none, fresh (its bytes), or the same bytes as the entry
//!    that many entries back (DATA_IN and MEDIA_WRITE of a block share one
//!    payload).
//!
//! A file that is not a saved run, is truncated, fails its checksum or
//! holds an inconsistent body is [`Error::BadSavedRun`]; another version is
//! [`Error::SavedRunVersion`]. Any change to the body (including to the
//! serde shape of `Promise`, `Expect`, `Kind` or `OpRecord`) must bump
//! [`FORMAT_VERSION`].
//!
//! # Recording a saved run elsewhere (the recipe for `mqfs mount --record`)
//!
//! 1. **Machine.** Describe it with a [`SavedConfig`]: `mode` is
//!    [`ModeName::of_fs_mode`] of the image's mode, `cores` the machine's
//!    core count (the driver makes one queue set per core, and recovery
//!    must find the same), `dram_bytes` its host memory, `seed` the
//!    executor's seed, `profile` the unmodified named drive profile. The
//!    machine must be `config.machine()` (the default `MachineProfile` with
//!    only cores and DRAM changed), recording with `TraceMode::Full` *from
//!    the start*: `Machine::new(&ex, config.machine(), TraceMode::Full)`.
//!    Never clear or switch off the trace: crash states are rebuilt by
//!    replaying it from the base images.
//! 2. **Base images.** Before attaching the controller, take the media and
//!    PMR content as they are at power-on: `base_media =
//!    Arc::new(media.freeze())` (or `Image::from_blocks`) and `base_pmr` (the
//!    PMR file's content, or `PageStore::zeroed(profile.pmr_bytes)` for a
//!    fresh image). Attach with `Controller::attach(&m,
//!    ControllerConfig::new(profile), media, Some(base_pmr.clone()))` on
//!    port 0 (the power-loss-protected write-through switch of the
//!    backend changes nothing in the trace and may be on), then probe with
//!    `mqfs::probe_options(mode)` and mount with `FsProfile::default()`:
//!    probe and mount are part of the trace and are crash points too. Call [`SavedRun::new`]`(config, m.layout(),
//!    base_pmr, base_media)`.
//! 3. **Positions.** A trace position is `m.trace().len() as usize`, the
//!    number of entries so far. Take an operation's `start` just before it
//!    is handed to the simulated file system and its `end` just after it
//!    returns, before anything else runs in the simulation.
//! 4. **Ending promises.** Before starting any operation that changes a
//!    path (create, mknod, mkdir, symlink, link and rename: both names,
//!    unlink, rmdir, write, truncate/setattr of the size, fallocate), call
//!    [`SavedRun::end_promises`]`(path, start)` for each path it changes; an
//!    operation on an inode (write, setattr) changes every name the inode
//!    has. From then on the file may be anything in between, so the older
//!    promise no longer holds.
//! 5. **fsync of a file** that returned without error after `end` entries:
//!    read the file's whole content through the file system (take `end`
//!    *before* the read: the read's own traffic is harmless), then
//!    [`SavedRun::push_promise`] with `Promise { expect: Expect::File {
//!    path, content, if_present: false }, from: end, until: usize::MAX, op:
//!    format!("fsync {path}") }`. If the inode has several names, promise
//!    the name the program synced through (its last lookup).
//! 6. **fdatasync of a file**: as fsync, with `if_present: true` when the
//!    name may not be durable: it was created, linked or renamed since its
//!    directory was last fsynced, since the file itself was last fsynced,
//!    or since the last sync. A recorder that does not track names sets
//!    `if_present: true` for every fdatasync (weaker, never a false
//!    alarm).
//! 7. **fsync of a directory** (FUSE `fsyncdir`): `Expect::Dir { path,
//!    entries, if_present: false }` with `entries` the directory's names
//!    (without `.` and `..`) mapped to [`crate::model::Kind`], listed after
//!    it returned.
//! 8. **Concurrency.** If an operation that changes the promised path
//!    was in flight at any moment while the sync ran (started before the
//!    sync returned and returned after the sync started), push no promise:
//!    what the sync persisted is then not determined.
//! 9. **Optional**: fatomic/fdataatomic (MQFS ioctls): `Expect::Atomic {
//!    path, versions }` from the *start* of the call, where `versions` holds
//!    the empty file, every content the file had at its earlier persistence
//!    points and its content at the call; a sync(2)/syncfs reaching the
//!    file system: `Expect::Tree` of the whole tree. Both are what the
//!    built-in recorder does (`record.rs`).
//! 10. **Operations** (optional, for timelines and `show`):
//!     [`SavedRun::push_op`] with an [`OpRecord`] per operation (thread =
//!     core that ran it, trace positions, simulated times).
//! 11. **Finish.** After the clean unmount (or whenever the run stops),
//!     [`SavedRun::finish`]`(m.take_trace())` and [`SavedRun::save`].
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use crashfuzz::saved::{SavedConfig, SavedRun};
//! # use crashfuzz::oracle::{Expect, Promise};
//! # use crashfuzz::ModeName;
//! # fn demo(m: &pcie_sim::Machine, base_pmr: pcie_sim::PageStore,
//! #         base_media: Arc<nvme_ctrl::Image>) -> Result<(), crashfuzz::Error> {
//! let profile = crashfuzz::RunConfig::profile_by_name("flash-vwc")?;
//! let config = SavedConfig::new("sqlite on mqfs", ModeName::of_fs_mode(mqfs::Mode::Mq), profile, 2);
//! let mut run = SavedRun::new(config, m.layout(), base_pmr, base_media);
//! // before a write to /db starts:
//! run.end_promises("/db", m.trace().len() as usize);
//! // after fsync(/db) returned with the file holding `content`:
//! let (end, content) = (m.trace().len() as usize, vec![1u8, 2, 3]);
//! run.push_promise(Promise {
//!     expect: Expect::File { path: "/db".into(), content, if_present: false },
//!     from: end,
//!     until: usize::MAX,
//!     op: "fsync /db".into(),
//! });
//! // after the unmount:
//! run.finish(m.take_trace())?;
//! run.save(std::path::Path::new("run.cfz"))?;
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::Arc;

use bincode::Options;
use nvme_ctrl::{Image, SsdProfile, BLOCK};
use pcie_sim::trace::NO_PAYLOAD;
use pcie_sim::{
    BusAddr, BusLayout, BusTrace, EventKind, MachineProfile, PageStore, PortLayout, Purpose, SimTime,
    TraceEntry, TraceMode,
};
use serde::de::{self, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::Error;
use crate::oracle::Promise;
use crate::record::{machine_profile, mode_label, Fault, ModeName, OpRecord, Recording, RunConfig};
use crate::workload::Workload;

/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 2;

const MAGIC: [u8; 8] = *b"CFZSAVED";
const HEADER: usize = 24;
const PAGE: usize = 4096;
/// Largest PMR a file may describe (the profiles have 2 MiB).
const MAX_PMR_BYTES: u64 = 1 << 30;

impl ModeName {
    /// The mode of a run on a file system in `mode` with the default
    /// [`mqfs::FsProfile`] (what a recorder of a mounted image records).
    pub fn of_fs_mode(mode: mqfs::Mode) -> ModeName {
        match mode {
            mqfs::Mode::None => ModeName::None,
            mqfs::Mode::Classic => ModeName::Classic,
            mqfs::Mode::Horae => ModeName::Horae,
            mqfs::Mode::Mq => ModeName::Mq,
        }
    }
}

/// What boots the recovery machines of a recorded run, and names it.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedConfig {
    /// A label for reports (a workload name, or what a recorder ran).
    pub workload: String,
    /// Consistency configuration (the file system mode, and for the MQFS
    /// modes the recovery rule).
    pub mode: ModeName,
    /// An ordering mechanism switched off, if any.
    pub fault: Option<Fault>,
    /// Drive profile: one of `SsdProfile::all()`, unmodified.
    pub profile: SsdProfile,
    /// Simulation seed of the run (replay ids carry it).
    pub seed: u64,
    /// Cores of the machine (the driver makes one queue set per core).
    pub cores: usize,
    /// Host DRAM in bytes.
    pub dram_bytes: u64,
}

impl SavedConfig {
    /// A configuration with seed 1, no fault and the default DRAM.
    pub fn new(workload: &str, mode: ModeName, profile: SsdProfile, cores: usize) -> SavedConfig {
        SavedConfig {
            workload: workload.into(),
            mode,
            fault: None,
            profile,
            seed: 1,
            cores,
            dram_bytes: RunConfig::DRAM_BYTES,
        }
    }

    /// The configuration of built-in workload `w` run under `cfg`.
    pub fn of_run(w: &Workload, cfg: &RunConfig) -> SavedConfig {
        SavedConfig {
            workload: w.name.clone(),
            mode: cfg.mode,
            fault: cfg.fault,
            profile: cfg.profile.clone(),
            seed: cfg.seed,
            cores: cfg.cores(w),
            dram_bytes: RunConfig::DRAM_BYTES,
        }
    }

    /// The machine profile of the run and of every recovery.
    pub fn machine(&self) -> MachineProfile {
        machine_profile(self.cores, self.dram_bytes)
    }
}

/// A recorded run with what boots its recovery machines; see the module
/// docs for the file format and for how to record one.
#[derive(Clone, Debug)]
pub struct SavedRun {
    /// How the run's machines are built.
    pub config: SavedConfig,
    /// The run: trace, layout, base images, promises, operations.
    pub recording: Recording,
}

impl SavedRun {
    /// An empty run over these base images (step 2 of the recipe): no
    /// trace yet, no promises.
    pub fn new(
        config: SavedConfig,
        layout: BusLayout,
        base_pmr: PageStore,
        base_media: Arc<Image>,
    ) -> SavedRun {
        let recording = Recording {
            workload: config.workload.clone(),
            machine: config.machine(),
            trace: BusTrace::new(TraceMode::Full),
            layout,
            base_pmr,
            base_media,
            more_drives: Vec::new(),
            promises: Vec::new(),
            refused: Vec::new(),
            ops: Vec::new(),
        };
        SavedRun { config, recording }
    }

    /// Adds a promise (steps 5 to 9 of the recipe).
    pub fn push_promise(&mut self, p: Promise) {
        self.recording.promises.push(p);
    }

    /// An operation changing `path` starts after `at` trace entries: every
    /// promise still in force about a path it can change stops holding
    /// from the state after `at + 1` entries on (step 4; see
    /// [`Promise::until`]).
    pub fn end_promises(&mut self, path: &str, at: usize) {
        crate::promises::end_promises(&mut self.recording.promises, path, at);
    }

    /// Adds an operation (for timelines and reports); one that failed is
    /// also counted as refused.
    pub fn push_op(&mut self, op: OpRecord) {
        if let Some(e) = &op.error {
            self.recording.refused.push((op.op.clone(), e.clone()));
        }
        self.recording.ops.push(op);
    }

    /// Sets the run's trace (step 11): it must have been recorded in `Full`
    /// mode from power-on, and every promise must start within it.
    pub fn finish(&mut self, trace: BusTrace) -> Result<(), Error> {
        if trace.mode() != TraceMode::Full || trace.entries().len() as u64 != trace.len() {
            return Err(Error::Failed(
                "saved run: the trace must be recorded in Full mode from power-on".into(),
            ));
        }
        let n = trace.entries().len();
        if let Some(p) = self.recording.promises.iter().find(|p| p.from > n) {
            return Err(Error::Failed(format!(
                "saved run: promise of `{}` starts at entry {} of a {n}-entry trace",
                p.op, p.from
            )));
        }
        self.recording.trace = trace;
        Ok(())
    }

    /// A built-in workload's recording under `cfg`, ready to save. The
    /// drive profile must be a named one, unmodified.
    pub fn from_recording(rec: &Recording, cfg: &RunConfig) -> Result<SavedRun, Error> {
        let cores = rec.machine.cpu.cores;
        let dram = rec.machine.host.dram_bytes;
        if machine_profile(cores, dram) != rec.machine {
            return Err(Error::Failed(
                "saved run: the machine profile differs from the default in more than cores and DRAM".into(),
            ));
        }
        if RunConfig::profile_by_name(cfg.profile.name)? != cfg.profile {
            return Err(Error::Failed(format!(
                "saved run: drive profile `{}` is modified; a saved run names an unmodified one",
                cfg.profile.name
            )));
        }
        Ok(SavedRun {
            config: SavedConfig {
                workload: rec.workload.clone(),
                mode: cfg.mode,
                fault: cfg.fault,
                profile: cfg.profile.clone(),
                seed: cfg.seed,
                cores,
                dram_bytes: dram,
            },
            recording: rec.clone(),
        })
    }

    /// Writes the run to `path` (through a temporary file beside it, renamed
    /// at the end). Returns the file's size in bytes.
    pub fn save(&self, path: &Path) -> Result<u64, Error> {
        if !self.recording.more_drives.is_empty() {
            return Err(Error::Failed(format!(
                "{}: a run on several drives (`{}`) cannot be saved (the format holds one drive)",
                path.display(),
                self.config.mode.name()
            )));
        }
        let io = |source: std::io::Error| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".partial");
        let tmp = std::path::PathBuf::from(tmp);
        let file = File::create(&tmp).map_err(io)?;
        let mut w = BufWriter::new(file);
        w.write_all(&[0u8; HEADER]).map_err(io)?;
        let mut cw = CrcWriter {
            inner: &mut w,
            crc: crc32fast::Hasher::new(),
            n: 0,
        };
        let body = self.body_out();
        options().serialize_into(&mut cw, &body).map_err(|e| match *e {
            bincode::ErrorKind::Io(source) => io(source),
            other => Error::Failed(format!("saving {}: {other}", path.display())),
        })?;
        let (n, crc) = (cw.n, cw.crc.finalize());
        let mut file = w.into_inner().map_err(|e| io(e.into_error()))?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(&header(n, crc)).map_err(io)?;
        file.sync_all().map_err(io)?;
        drop(file);
        std::fs::rename(&tmp, path).map_err(io)?;
        Ok(HEADER as u64 + n)
    }

    /// Reads a run written by [`SavedRun::save`].
    pub fn load(path: &Path) -> Result<SavedRun, Error> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })?;
        SavedRun::decode(&bytes, &path.display().to_string())
    }

    /// Decodes a saved run from its bytes; `label` names it in errors.
    pub fn decode(bytes: &[u8], label: &str) -> Result<SavedRun, Error> {
        let bad = |why: String| Error::BadSavedRun {
            path: label.into(),
            why,
        };
        if bytes.len() >= MAGIC.len() && bytes[..MAGIC.len()] != MAGIC
            || bytes.len() < MAGIC.len() && !MAGIC.starts_with(bytes)
        {
            return Err(bad("not a crashfuzz saved run (no CFZSAVED header)".into()));
        }
        if bytes.len() < HEADER {
            return Err(bad(format!(
                "truncated: {} bytes, the header alone is {HEADER}",
                bytes.len()
            )));
        }
        let version = u32::from_le_bytes(field(bytes, 8));
        if version != FORMAT_VERSION {
            return Err(Error::SavedRunVersion {
                path: label.into(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        let len = u64::from_le_bytes(field(bytes, 12));
        let crc = u32::from_le_bytes(field(bytes, 20));
        let body = &bytes[HEADER..];
        if (body.len() as u64) < len {
            return Err(bad(format!("truncated: {} of {len} body bytes", body.len())));
        }
        if body.len() as u64 > len {
            return Err(bad(format!(
                "{} bytes past the end of the body",
                body.len() as u64 - len
            )));
        }
        if crc32fast::hash(body) != crc {
            return Err(bad("corrupt: the body does not match its checksum".into()));
        }
        let b: BodyIn<'_> = options()
            .with_limit(len.max(1))
            .deserialize(body)
            .map_err(|e| bad(format!("corrupt body: {e}")))?;
        b.into_run().map_err(bad)
    }

    fn body_out(&self) -> BodyOut<'_> {
        let c = &self.config;
        let r = &self.recording;
        BodyOut {
            config: ConfigV1 {
                workload: c.workload.clone(),
                mode: c.mode.name().into(),
                fault: c.fault.map(|f| f.name().into()),
                profile: c.profile.name.into(),
                seed: c.seed,
                cores: c.cores as u32,
                dram_bytes: c.dram_bytes,
            },
            layout: r
                .layout
                .ports
                .iter()
                .map(|p| PortV1 {
                    regs_base: p.regs_base.0,
                    regs_size: p.regs_size,
                    pmr: p.pmr.map(|(b, s)| (b.0, s)),
                })
                .collect(),
            pmr: PmrOut(&r.base_pmr),
            media: MediaOut::new(&r.base_media),
            promises: &r.promises,
            ops: &r.ops,
            refused: &r.refused,
            trace: TraceOut(&r.trace),
        }
    }

    /// The mode field of the run's replay ids (`mode` or `mode+fault`).
    pub fn mode_label(&self) -> String {
        mode_label(self.config.mode, self.config.fault)
    }
}

fn field<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&bytes[at..at + N]);
    out
}

fn header(len: u64, crc: u32) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    h[..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[12..20].copy_from_slice(&len.to_le_bytes());
    h[20..24].copy_from_slice(&crc.to_le_bytes());
    h
}

fn options() -> impl Options {
    bincode::DefaultOptions::new()
        .with_varint_encoding()
        .with_little_endian()
        .reject_trailing_bytes()
}

/// Counts and checksums what passes through.
struct CrcWriter<'a, W: Write> {
    inner: &'a mut W,
    crc: crc32fast::Hasher,
    n: u64,
}

impl<W: Write> Write for CrcWriter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let k = self.inner.write(buf)?;
        self.crc.update(&buf[..k]);
        self.n += k as u64;
        Ok(k)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[derive(Serialize, Deserialize)]
struct ConfigV1 {
    workload: String,
    mode: String,
    fault: Option<String>,
    profile: String,
    seed: u64,
    cores: u32,
    dram_bytes: u64,
}

#[derive(Serialize, Deserialize)]
struct PortV1 {
    regs_base: u64,
    regs_size: u64,
    pmr: Option<(u64, u64)>,
}

/// Bytes serialized as one byte string (not a sequence of numbers).
struct Bytes<'a>(&'a [u8]);

impl Serialize for Bytes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

#[derive(Serialize)]
struct BodyOut<'a> {
    config: ConfigV1,
    layout: Vec<PortV1>,
    pmr: PmrOut<'a>,
    media: MediaOut<'a>,
    promises: &'a [Promise],
    ops: &'a [OpRecord],
    refused: &'a [(String, String)],
    trace: TraceOut<'a>,
}

#[derive(Deserialize)]
struct BodyIn<'a> {
    config: ConfigV1,
    layout: Vec<PortV1>,
    #[serde(borrow)]
    pmr: PmrIn<'a>,
    #[serde(borrow)]
    media: MediaIn<'a>,
    promises: Vec<Promise>,
    ops: Vec<OpRecord>,
    refused: Vec<(String, String)>,
    trace: TraceIn,
}

/// The PMR image: length, then its non-zero pages.
struct PmrOut<'a>(&'a PageStore);

impl Serialize for PmrOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes = self.0.to_vec();
        let pages: Vec<(u32, Bytes<'_>)> = bytes
            .chunks(PAGE)
            .enumerate()
            .filter(|(_, p)| p.iter().any(|b| *b != 0))
            .map(|(i, p)| (i as u32, Bytes(p)))
            .collect();
        (self.0.len(), pages).serialize(s)
    }
}

#[derive(Deserialize)]
struct PmrIn<'a> {
    len: u64,
    #[serde(borrow)]
    pages: Vec<(u32, &'a [u8])>,
}

/// The media image: size in blocks, then its non-zero blocks.
struct MediaOut<'a> {
    image: &'a Image,
    nonzero: Vec<u64>,
}

impl<'a> MediaOut<'a> {
    fn new(image: &'a Image) -> MediaOut<'a> {
        let mut buf = [0u8; BLOCK];
        let nonzero = (0..image.blocks())
            .filter(|&b| {
                image.read(b, &mut buf);
                buf.iter().any(|x| *x != 0)
            })
            .collect();
        MediaOut { image, nonzero }
    }
}

impl Serialize for MediaOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (self.image.blocks(), NonZeroBlocks(self)).serialize(s)
    }
}

struct NonZeroBlocks<'m, 'a>(&'m MediaOut<'a>);

impl Serialize for NonZeroBlocks<'_, '_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.nonzero.len()))?;
        let mut buf = [0u8; BLOCK];
        for &b in &self.0.nonzero {
            self.0.image.read(b, &mut buf);
            seq.serialize_element(&(b, Bytes(&buf)))?;
        }
        seq.end()
    }
}

#[derive(Deserialize)]
struct MediaIn<'a> {
    blocks: u64,
    #[serde(borrow)]
    nonzero: Vec<(u64, &'a [u8])>,
}

/// One trace entry on disk (see the module docs).
#[derive(Serialize, Deserialize)]
struct EntryV1<P> {
    dt: i64,
    de: i64,
    addr: u64,
    len: u32,
    attr: u32,
    kind: u8,
    purpose: u8,
    source: u8,
    flags: u8,
    code: u16,
    wire: u16,
    payload: P,
}

/// An entry's payload on disk.
#[derive(Serialize, Deserialize)]
enum PayloadV1<B> {
    /// None stored.
    None,
    /// Its own bytes.
    Fresh(B),
    /// The payload of the entry this many entries back.
    Same(u64),
}

/// The trace, streamed entry by entry.
struct TraceOut<'a>(&'a BusTrace);

impl Serialize for TraceOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        let entries = t.entries();
        let mut seq = s.serialize_seq(Some(entries.len()))?;
        // Payload offset -> the first entry that holds it.
        let mut holder: BTreeMap<u64, usize> = BTreeMap::new();
        let mut prev = 0u64;
        for (i, e) in entries.iter().enumerate() {
            let payload = if e.payload == NO_PAYLOAD {
                PayloadV1::None
            } else {
                match holder.get(&e.payload) {
                    Some(&j) if entries[j].len == e.len => PayloadV1::Same((i - j) as u64),
                    _ => {
                        holder.insert(e.payload, i);
                        PayloadV1::Fresh(Bytes(t.payload(e)))
                    }
                }
            };
            seq.serialize_element(&EntryV1 {
                dt: e.time.0.wrapping_sub(prev) as i64,
                de: e.effect.0.wrapping_sub(e.time.0) as i64,
                addr: e.addr,
                len: e.len,
                attr: e.attr,
                kind: e.kind as u8,
                purpose: e.purpose.index() as u8,
                source: e.source,
                flags: e.flags,
                code: e.code,
                wire: e.wire_bytes,
                payload,
            })?;
            prev = e.time.0;
        }
        seq.end()
    }
}

/// The trace, rebuilt entry by entry as it is decoded.
struct TraceIn(BusTrace);

impl<'de> Deserialize<'de> for TraceIn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<TraceIn, D::Error> {
        d.deserialize_seq(TraceVisitor)
    }
}

struct TraceVisitor;

impl<'de> Visitor<'de> for TraceVisitor {
    type Value = TraceIn;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a sequence of trace entries")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<TraceIn, A::Error> {
        let mut t = BusTrace::new(TraceMode::Full);
        let mut prev = 0u64;
        let mut i = 0usize;
        while let Some(x) = seq.next_element::<EntryV1<PayloadV1<&'de [u8]>>>()? {
            let time = prev.wrapping_add(x.dt as u64);
            let e = TraceEntry {
                time: SimTime(time),
                effect: SimTime(time.wrapping_add(x.de as u64)),
                addr: x.addr,
                payload: NO_PAYLOAD,
                len: x.len,
                attr: x.attr,
                kind: *EventKind::ALL
                    .get(x.kind as usize)
                    .ok_or_else(|| de::Error::custom(format!("entry {i}: kind {}", x.kind)))?,
                purpose: Purpose::from_index(x.purpose as usize)
                    .ok_or_else(|| de::Error::custom(format!("entry {i}: purpose {}", x.purpose)))?,
                source: x.source,
                flags: x.flags,
                code: x.code,
                wire_bytes: x.wire,
            };
            match x.payload {
                PayloadV1::None => {
                    t.record(e, &[]);
                }
                PayloadV1::Fresh(b) => {
                    if b.len() != e.len as usize || b.is_empty() {
                        return Err(de::Error::custom(format!(
                            "entry {i}: {} payload bytes for length {}",
                            b.len(),
                            e.len
                        )));
                    }
                    t.record(e, b);
                }
                PayloadV1::Same(back) => {
                    if back == 0 || back > i as u64 {
                        return Err(de::Error::custom(format!(
                            "entry {i}: payload {back} entries back"
                        )));
                    }
                    let j = i - back as usize;
                    let held = t.entries()[j];
                    if held.payload == NO_PAYLOAD || held.len != e.len {
                        return Err(de::Error::custom(format!(
                            "entry {i}: shares the payload of entry {j}, which has none of its length"
                        )));
                    }
                    t.record_sharing(e, j as u64, &[]);
                }
            }
            prev = time;
            i += 1;
        }
        Ok(TraceIn(t))
    }
}

impl BodyIn<'_> {
    fn into_run(self) -> Result<SavedRun, String> {
        let c = self.config;
        let mode = ModeName::parse(&c.mode).map_err(|e| e.to_string())?;
        let fault = c
            .fault
            .as_deref()
            .map(Fault::parse)
            .transpose()
            .map_err(|e| e.to_string())?;
        let profile = RunConfig::profile_by_name(&c.profile).map_err(|e| e.to_string())?;
        if c.cores == 0 {
            return Err("a machine with no cores".into());
        }
        let config = SavedConfig {
            workload: c.workload,
            mode,
            fault,
            profile,
            seed: c.seed,
            cores: c.cores as usize,
            dram_bytes: c.dram_bytes,
        };
        if self.layout.is_empty() {
            return Err("a bus with no device".into());
        }
        let layout = BusLayout {
            ports: self
                .layout
                .iter()
                .map(|p| PortLayout {
                    regs_base: BusAddr(p.regs_base),
                    regs_size: p.regs_size,
                    pmr: p.pmr.map(|(b, s)| (BusAddr(b), s)),
                })
                .collect(),
        };
        if self.pmr.len > MAX_PMR_BYTES || config.cores > 256 {
            return Err(format!(
                "a {}-byte PMR on {} cores is past what a saved run can hold",
                self.pmr.len, config.cores
            ));
        }
        let pages = self.pmr.len.div_ceil(PAGE as u64);
        let mut pmr = PageStore::zeroed(self.pmr.len);
        for (i, page) in self.pmr.pages {
            if u64::from(i) >= pages || page.len() != PAGE {
                return Err(format!("PMR page {i} ({} bytes) outside the PMR", page.len()));
            }
            pmr.write(u64::from(i) * PAGE as u64, page);
        }
        let mut blocks = std::collections::BTreeMap::new();
        for (b, data) in self.media.nonzero {
            let data: [u8; BLOCK] = data
                .try_into()
                .map_err(|_| format!("media block {b} is {} bytes", data.len()))?;
            if b >= self.media.blocks {
                return Err(format!("media block {b} past the end ({})", self.media.blocks));
            }
            blocks.insert(b, Arc::new(data));
        }
        let trace = self.trace.0;
        let n = trace.entries().len();
        if let Some(p) = self.promises.iter().find(|p| p.from > n) {
            return Err(format!("promise of `{}` starts past the trace", p.op));
        }
        let recording = Recording {
            workload: config.workload.clone(),
            machine: config.machine(),
            trace,
            layout,
            base_pmr: pmr,
            base_media: Arc::new(Image::from_blocks(self.media.blocks, blocks)),
            more_drives: Vec::new(),
            promises: self.promises,
            refused: self.refused,
            ops: self.ops,
        };
        Ok(SavedRun { config, recording })
    }
}
