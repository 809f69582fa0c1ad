//! The Horae ordering queue (Horae, OSDI'20, sections 5.2-5.5;
//! `docs/decisions.md` H4, H5, H7, H11): the baseline ccNVMe is compared with.
//!
//! An ordered write stream (HoraeFS uses one queue shared by all cores,
//! H3) keeps its ordering metadata in a circular queue in the PMR (H4;
//! layout and entry bits in [`layout`]). Several streams partition the PMR
//! evenly, each with its own queue and pointers
//! ([`OrderingQueue::init_stream`] with [`StreamParams`], Horae Table 1
//! `olayer_init_stream`), and a stream may span several devices: each
//! entry names its device (`devid`), the data goes to that device, and the
//! queue lives in the first device's PMR. The upper layer:
//!
//! 1. appends an **epoch** of writes with no order among them
//!    ([`OrderingQueue::append_epoch`]): one 16-byte entry per write, the
//!    epoch's entries stored as one persistent MMIO write (a WC burst,
//!    `clflush` of each line, `mfence`, zero-length read: Horae 5.5 "after
//!    each MMIO write, HORAE issues a non-posted MMIO read of zero byte
//!    length"; [`crate::EntryPersist`] and `docs/decisions.md` H1 say why
//!    one burst and not one write per entry, which the profile can still
//!    ask for), then the 8-byte tail pointer, persisted the same way, in
//!    epoch order.
//!    Entries of concurrent epochs are stored concurrently; tails are
//!    published one epoch after the other (Horae Figure 5). It returns once
//!    the tail is persistent: the ordering guarantee;
//! 2. submits the data writes through the normal block layer, on any core,
//!    without waiting ([`OrderingQueue::submit`], or
//!    [`crate::BlockDevice::submit`] plus [`OrderingQueue::complete`]);
//!    [`OrderingQueue::submit_bio`] and [`OrderingQueue::submit_bio_ipu`]
//!    do 1 and 2 for one bio (Horae Table 1 `olayer_submit_bio`,
//!    `olayer_submit_bio_ipu`);
//! 3. for durability calls [`OrderingQueue::flush`], the joint FLUSH
//!    (Horae 5.3, Figure 7, H7): waits until every entry appended so far
//!    has completed, sends one NVMe Flush to every device with an entry
//!    in the flushed range (the device ranges of Figure 7:
//!    [`OrderingQueue::flush_candidates`]), all at once, waits for all of
//!    them (the block layer drops a Flush to a device without a volatile
//!    cache), then persists `flushed`. [`OrderingQueue::flush_through`]
//!    flushes up to a given entry (a flush point) and waits only for the
//!    entries before it: HoraeFS's flush stage makes one transaction
//!    durable while the next one's writes are in flight
//!    (`docs/decisions.md` H10); [`OrderingQueue::flush_device`] is
//!    `olayer_blkdev_issue_flush` for one device (flush point: after its
//!    last entry).
//!
//! The append charges the ordering layer's CPU cost per write
//! ([`crate::DriverProfile::ordering_layer`], 0.7 us, Horae 6.2), the
//! submission the block layer's ([`crate::DriverProfile::block_layer`],
//! 1.0 us); the persistent MMIO writes are bus traffic on top. A stream
//! given background submitters ([`StreamParams::submitters`],
//! `submitter`, Horae 6.2's per-CPU threads) runs the block layer on
//! theirs: the caller returns once the bio is handed over. An append
//! of a write that goes to its home blocks first waits until no earlier
//! write to one of them is in flight: that is how a dependency loop is
//! refused without redirection (Horae 5.4, the classic stacks' rule; see
//! [`OrderingQueue::append_writes`]).
//!
//! **Write redirection** ([`redirect`], Horae 5.4): on a stream given a
//! p-area ([`StreamParams::p_area`]), an in-place write
//! ([`OrderedWrite::in_place`], `olayer_submit_bio_ipu`) is a prepare
//! write to p-area slots named by the entry's `plba`, recorded in the IPU
//! tree; reads go through [`OrderingQueue::read`] or
//! [`OrderingQueue::read_location`]; [`OrderingQueue::dequeue`] commits
//! the durable prepare writes home before moving the head (lazily after a
//! joint FLUSH when the stream is idle, eagerly when the p-area is full).
//! Several in-place writes of one block may be in flight together. On a
//! stream without a p-area (`p_area: None`, the default: the upper layer
//! must reserve the device space) an in-place write is not redirected: its
//! entry carries the `ipu` bit (a reserved bit of Figure 6, see
//! [`layout`]), it goes home directly, and recovery neither zero-fills nor
//! commits it (its block holds old or new content, as ext4's ordered mode
//! allows for an overwrite before fsync).

//! On a device without a volatile write cache (no cache, or a
//! power-loss-protected one) a write is durable when it completes, so the
//! completion path sets the entry's `dr` bit with an 8-byte persistent
//! MMIO write before the waiter is woken (Horae 5.3, H5), as an `end_io`
//! hook does in Linux. On a device with a volatile cache `dr` is never
//! set: only `flushed` makes its entries durable. In a stream over devices
//! of both kinds this is decided per entry, by its device.
//!
//! Every write to the region uses [`ORDERING_QUEUE`] (so
//! [`crate::Traffic::ordering_mmio`] counts it apart from Table 1's MMIO
//! column) and its zero-length read uses [`Purpose::FLUSH_READ`]. A DRAM
//! write-through mirror of the region serves every read: normal operation
//! issues no MMIO read but those zero-length reads (Horae 5.2
//! "Optimization"). Only [`OrderingQueue::attach`] and [`recover`] read
//! the PMR.
//!
//! **Per fsync-like sequence** (epoch {JD, D1..DN}, epoch {JC}, wait, flush)
//! on a device without a volatile cache, `ordering_mmio` is
//! 2 entry bursts + 2 tails + (N+2) `dr` words + 1 `flushed` = N+7
//! persistent writes, each with one flush read; with a volatile cache
//! there are no `dr` words: 5 (plus the NVMe Flush on the data path).
//! With [`crate::EntryPersist::PerEntry`] each of the N+2 entries is its
//! own write: 2N+7 and N+5.
//!
//! **Dequeue** ([`OrderingQueue::dequeue`]) moves the persistent head over
//! the entries whose data and all predecessors are durable (before
//! `flushed`, or `dr` set), after committing their prepare writes. It is
//! lazy: it runs when an append finds the queue or the p-area full (with a
//! volatile cache it first flushes), after a joint FLUSH that leaves the
//! stream idle with prepare writes to commit, or when called.
//!
//! **Swap** ([`swap`], Horae 5.2, `docs/decisions.md` H6): when an append
//! finds the queue full and dequeue frees nothing, a stream given a
//! checkpoint region ([`StreamParams::checkpoint`], a range the upper
//! layer reserved on its first device) blocks new appends, waits for the
//! on-going ones, copies the valid entries to the region (FUA), writes the
//! region's header (the lightweight journal record naming the
//! checkpoint's extent and the new head, FUA), then moves the head over
//! them, and appends go on: no waiting for the writes or a FLUSH. A swapped
//! entry's durability is tracked by `flushed` (its `dr` is frozen at the
//! copy); a full checkpoint is drained by a joint FLUSH. Without a
//! checkpoint region, and while the queue holds a prepare write of write
//! redirection (whose commit write must run before the head passes it), a
//! full queue waits for dequeue (with a volatile cache it first flushes).
//!
//! **Recovery** ([`recover`], [`recover_stream`] for a stream of several
//! devices or streams, or with a checkpoint region, Horae 5.5): the
//! checkpointed entries come first, then the PMR's; entries up to `flushed` are
//! durable, then from `flushed` forward while `dr` = 1; the first entry
//! with `dr` = 0 and every entry after it violate the order.
//! [`HoraeRecovery::discard_and_reset`] (`_all` for several devices)
//! commits the durable prepare writes (merged, newest wins), zero-fills the
//! blocks of the discarded entries that went home, each on its device, in
//! queue order, ignores the discarded prepare writes (their home blocks
//! keep the old content: request atomicity), flushes the devices written,
//! then empties the queue durably. It never zero-fills live data.

//! Fault switches ([`crate::DriverFaults`]): `horae_no_joint_flush` flushes
//! only the device of the last entry before the flush point;
//! `horae_early_dr` sets `dr` when the write is submitted. The two-device
//! crash test (`tests/horae_devices.rs`) catches both. `horae_swap_no_fua`
//! writes the checkpoint without FUA (the head moves while the copy may
//! sit in a volatile cache); `tests/horae_swap.rs` catches it.
//! `horae_no_redirect_commit` makes recovery skip the commit of durable
//! prepare writes; `tests/horae_redirect.rs` catches it. `no_flush_read`
//! leaves out the zero-length read after each ordering-queue write, as
//! HoRAE's released module does (`docs/decisions.md` H18); crashfuzz's
//! self-check `create_delete:horae+no-flush-read` catches it.
//!
//! The joint FLUSH sends its FLUSHes at once; `DriverProfile::horae_flush`
//! = [`crate::FlushIssue::Serialized`] sends them one after another, the
//! legacy FLUSH of HoRAE 6.3's HFS-SF (a slower variant, not a fault).
//!
//! ## Out of scope
//!
//! - libaio's `io_setup` / `io_submit_order` (HoRAE Table 1). The paper
//!   gives them one user: "Libaio provides wrapper functions for async IO
//!   system calls, which are used for some systems (e.g., BlueStore and
//!   KVell) ... We further show the usage of these interfaces in boosting
//!   BlueStore in §5.6.3" (5.6.1), and §5.6.3's HoraeStore is "a set of
//!   modifications of BlueStore, an object store engine of Ceph", a
//!   user-space system this simulator does not have. `io_submit_order`
//!   "bears the same semantics of `fdatabarrier`": in-kernel callers have
//!   it as [`OrderingQueue::submit_bio`] (an epoch's entries persistent,
//!   then the bio submitted without waiting for it), file-system callers
//!   as `fdatabarrier`.
//!
//! Usage rule: submit an epoch's writes before appending the next epoch
//! from the same task; a full queue without a checkpoint region, a full
//! p-area, and an append of a block with a write in flight, wait for their
//! completion.

mod append;
mod durability;
pub mod layout;
pub mod recovery;
pub mod redirect;
mod stream;
mod submitter;
pub mod swap;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::{Rc, Weak};

use nvme_spec::completion::Status;
use pcie_sim::{BusAddr, Core, Purpose};
use tokio::sync::{Mutex, Notify};

use crate::device::BlockDevice;
use crate::error::DriverError;
use crate::profile::DriverFaults;

pub use append::OrderedWrite;
pub use layout::{Geometry, RawEntry, RegionLayout};
pub use recovery::{recover, recover_stream, HoraeRecovery, OrderingEntry};
pub use redirect::PArea;
pub use stream::StreamParams;
pub use submitter::Submitters;
pub use swap::CheckpointRegion;

/// The queue number reported in [`DriverError::CorruptPsq`] for the
/// ordering queue (the ccNVMe queues use their index).
pub const ORDERING_QUEUE_ID: u16 = u16::MAX;

/// The traffic tag of every write to the ordering queue's region and its
/// pointers (Horae's own; the machine and `nvme_spec::traffic` leave value
/// 8 to it). [`crate::Traffic::ordering_mmio`] counts it apart from
/// Table 1's MMIO column.
pub const ORDERING_QUEUE: Purpose = Purpose::new(8);

/// Attribution tag of ordering-queue bus traffic ("OQ" in the top half).
const ATTR: u32 = 0x4F51_0000;

pub(crate) fn corrupt(reason: impl Into<String>) -> DriverError {
    DriverError::CorruptPsq {
        queue: ORDERING_QUEUE_ID,
        reason: format!("Horae ordering queue: {}", reason.into()),
    }
}

/// One entry of the queue: its sequence number (slot = seq % capacity).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntryId(pub u64);

/// An appended epoch: entries `first .. first + len`, in the order of the
/// writes given to [`OrderingQueue::append_epoch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Epoch {
    /// Epoch number since attach, in queue order.
    pub id: u64,
    /// Sequence number of its first entry.
    pub first: u64,
    /// Number of entries.
    pub len: u32,
}

impl Epoch {
    /// The `i`-th entry of the epoch.
    pub fn entry(&self, i: u32) -> Option<EntryId> {
        (i < self.len).then_some(EntryId(self.first + i as u64))
    }

    /// Every entry of the epoch.
    pub fn entries(&self) -> impl Iterator<Item = EntryId> {
        (self.first..self.first + self.len as u64).map(EntryId)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Progress {
    Appended,
    Submitted,
    /// Data written (and, without a volatile cache, `dr` persistent).
    Completed,
    Failed(Status),
}

#[derive(Debug)]
struct Pending {
    lba: u64,
    len: u32,
    /// Index of the destination device in the stream's device list.
    device: u8,
    /// The p-area slots of a redirected write (its prepare write).
    plba: Option<u64>,
    progress: Progress,
}

#[derive(Debug)]
struct State {
    /// Next sequence number to reserve.
    reserved: u64,
    next_epoch: u64,
    /// Entries `head .. reserved`, by sequence number.
    entries: VecDeque<Pending>,
    /// Set when an append failed half-way: later epochs cannot publish.
    broken: Option<String>,
    /// Per device, the first and last sequence number of its entries not
    /// yet covered by a joint FLUSH (Horae Figure 7's device ranges).
    ranges: Vec<Option<(u64, u64)>>,
}

/// A region's bytes, all zero but for those written, held only up to the
/// last byte written: a queue of a large capacity mounted for a recovery
/// or a short run touches its first entries only, and zeroing the whole
/// ring for each mount cost more than the mount itself.
#[derive(Debug)]
struct Mirror {
    /// The region's length in bytes.
    len: usize,
    /// Its first bytes (those after them are zero).
    bytes: Vec<u8>,
}

impl Mirror {
    /// A region of `len` zero bytes.
    fn zeroed(len: usize) -> Mirror {
        Mirror {
            len,
            bytes: Vec::new(),
        }
    }

    /// Copies the bytes at `at..at + out.len()` into `out`.
    ///
    /// # Panics
    ///
    /// If the range is not inside the region (as indexing a slice of it).
    fn read(&self, at: usize, out: &mut [u8]) {
        let end = at + out.len();
        assert!(
            end <= self.len,
            "mirror read {at}..{end} past its {} bytes",
            self.len
        );
        // Bytes `at..held` are held; those after them are zero.
        let held = self.bytes.len().clamp(at, end);
        let (kept, zero) = out.split_at_mut(held - at);
        if let Some(src) = self.bytes.get(at..held) {
            kept.copy_from_slice(src);
        }
        zero.fill(0);
    }

    /// Writes `src` at `at`.
    ///
    /// # Panics
    ///
    /// If the range is not inside the region (as indexing a slice of it).
    fn write(&mut self, at: usize, src: &[u8]) {
        let end = at + src.len();
        assert!(
            end <= self.len,
            "mirror write {at}..{end} past its {} bytes",
            self.len
        );
        if self.bytes.len() < end {
            self.bytes.resize(end, 0);
        }
        self.bytes[at..end].copy_from_slice(src);
    }
}

/// The ordering queue of one stream, over one or several devices.
pub struct OrderingQueue {
    /// The stream's devices; entries name them by index (`devid`). The
    /// queue's region is in the first one's PMR.
    devs: Vec<Rc<BlockDevice>>,
    pmr: BusAddr,
    layout: RegionLayout,
    geometry: Geometry,
    /// Per device: it has a volatile write cache (no `dr` bits, only
    /// `flushed` makes its entries durable).
    volatile: Vec<bool>,
    /// The write-through DRAM copy of the region (what is persistent).
    mirror: RefCell<Mirror>,
    state: RefCell<State>,
    /// Woken when the tail moves or an append breaks.
    published: Notify,
    /// Woken on completions, flushes and dequeues.
    progress: Notify,
    flush_lock: Mutex<()>,
    head_lock: Mutex<()>,
    /// Per core: one persistent write at a time (its store, flush and read
    /// run as one critical section, as with local interrupts off), so a
    /// completion's `dr` write never joins the WC burst of an append on the
    /// same core and every persistent write is its own MMIO operation.
    write_locks: Vec<Mutex<()>>,
    /// Swap to the checkpoint region ([`swap`]).
    swap: swap::Swap,
    /// Write redirection: p-area slots and the IPU tree ([`redirect`]).
    redirect: RefCell<redirect::Redirect>,
    /// The background submitters, if the stream has them ([`submitter`]),
    /// by core.
    submitters: Vec<submitter::Submitter>,
    /// The queue itself, for the background (lazy) commit.
    me: Weak<OrderingQueue>,
}

impl std::fmt::Debug for OrderingQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrderingQueue")
            .field("layout", &self.layout)
            .field("head", &self.head())
            .field("flushed", &self.flushed())
            .field("tail", &self.tail())
            .finish()
    }
}

/// The PMR address of the device and where the region starts.
pub(crate) fn region_of(dev: &BlockDevice) -> Result<(BusAddr, u64), DriverError> {
    let pmr = dev
        .pmr_base()
        .ok_or_else(|| DriverError::Unsupported("no PMR: probe with ProbeOptions { horae: true }".into()))?;
    Ok((pmr, dev.pmr_free_start()))
}

/// A persistent MMIO write (H1) of `bytes` at PMR offset `at`: the shared
/// [`Core::persistent_write`] (WC store, `clflush` of each line, `mfence`,
/// then a zero-length read through the WC mapping that cannot pass the
/// write), with the steps the fault switches leave out
/// ([`DriverFaults::persist_skips`]; without the read it is what HoRAE's
/// released module does, H18).
pub(crate) async fn persist(
    core: &Core,
    pmr: BusAddr,
    at: u64,
    bytes: &[u8],
    faults: &DriverFaults,
) -> Result<(), DriverError> {
    core.persistent_write(pmr + at, bytes, ORDERING_QUEUE, ATTR, faults.persist_skips())
        .await?;
    Ok(())
}

/// Reads the header line and the pointer lines (attach and recovery only).
pub(crate) async fn read_region_head(
    core: &Core,
    pmr: BusAddr,
    start: u64,
    pmr_bytes: u64,
) -> Result<Option<(RegionLayout, Geometry, [u64; 3])>, DriverError> {
    if start + layout::RING > pmr_bytes {
        return Err(DriverError::Unsupported(
            "no room for the ordering queue in the PMR".into(),
        ));
    }
    let mut h = [0u8; 64];
    core.mmio_read(pmr + start, &mut h, ORDERING_QUEUE, ATTR).await?;
    let Some(l) = RegionLayout::parse_header(&h, start, pmr_bytes).map_err(corrupt)? else {
        return Ok(None);
    };
    let g = RegionLayout::parse_geometry(&h).map_err(corrupt)?;
    let mut p = [0u8; (layout::RING - layout::HEAD) as usize];
    core.mmio_read(pmr + start + layout::HEAD, &mut p, ORDERING_QUEUE, ATTR)
        .await?;
    let at = |o: u64| u64::from_le_bytes(layout::le8(&p[(o - layout::HEAD) as usize..]));
    let ptrs = [at(layout::HEAD), at(layout::FLUSHED), at(layout::TAIL)];
    let [head, flushed, tail] = ptrs;
    if head > tail || flushed > tail || tail - head > l.capacity as u64 {
        return Err(corrupt(format!(
            "pointers out of range: head {head}, flushed {flushed}, tail {tail}, capacity {}",
            l.capacity
        )));
    }
    Ok(Some((l, g, ptrs)))
}

impl OrderingQueue {
    /// Attaches to the region at [`BlockDevice::pmr_free_start`] with the
    /// largest ring that fits (see [`OrderingQueue::attach_with`]).
    pub async fn attach(dev: &Rc<BlockDevice>) -> Result<Rc<OrderingQueue>, DriverError> {
        Self::attach_with(dev, None).await
    }

    /// Attaches the single stream of `dev` ([`OrderingQueue::init_stream`]
    /// with stream 0 of 1 on `dev` alone). Without a valid header (no
    /// magic) it formats one with `capacity` entries (default: all that
    /// fit): pointers zero, header last. With a header, the queue must be
    /// empty (head = tail): otherwise [`DriverError::RecoveryPending`]
    /// until [`recover`] and [`HoraeRecovery::discard_and_reset`] ran;
    /// `capacity` is then ignored. A corrupt header or pointers give
    /// [`DriverError::CorruptPsq`] and nothing is written.
    pub async fn attach_with(
        dev: &Rc<BlockDevice>,
        capacity: Option<u32>,
    ) -> Result<Rc<OrderingQueue>, DriverError> {
        Self::init_stream(
            std::slice::from_ref(dev),
            StreamParams {
                capacity,
                ..StreamParams::SINGLE
            },
        )
        .await
    }

    /// Registers an ordered write stream (Horae Table 1,
    /// `olayer_init_stream(sid, param)`): stream `params.stream` of
    /// `params.streams`, whose writes go to `devices` (entries name them by
    /// index, the `devid` of Figure 6) and whose queue is its slice of the
    /// first device's PMR ([`RegionLayout::for_stream`]). Formats the
    /// slice or attaches to it as [`OrderingQueue::attach_with`] says; a
    /// header of another geometry (other device count, stream or stream
    /// count) is [`DriverError::Invalid`].
    pub async fn init_stream(
        devices: &[Rc<BlockDevice>],
        params: StreamParams,
    ) -> Result<Rc<OrderingQueue>, DriverError> {
        let (dev, geometry) = params.check(devices)?;
        let areas = params.p_area_slices(devices)?;
        let (pmr, free) = region_of(dev)?;
        let pmr_bytes = dev.info().pmr_bytes;
        let slice = RegionLayout::for_stream(free, pmr_bytes, params.stream, params.streams, None)
            .ok_or_else(|| DriverError::Unsupported("no room for the ordering queue".into()))?;
        let start = slice.start;
        let core = dev.machine().core(0)?;
        let faults = &dev.profile().faults;
        let found = read_region_head(&core, pmr, start, pmr_bytes).await?;
        let (layout, ptrs, format) = match found {
            Some((_, g, _)) if g != geometry => {
                return Err(DriverError::Invalid(format!(
                    "the region holds stream geometry {g:?}, not {geometry:?}"
                )))
            }
            Some((l, _, _)) if l.capacity > slice.capacity => {
                return Err(corrupt(format!(
                    "capacity {} overflows the stream's slice ({})",
                    l.capacity, slice.capacity
                )))
            }
            Some((_, _, p)) if p[0] != p[2] => return Err(DriverError::RecoveryPending),
            Some((l, _, p)) => (l, p, false),
            None => {
                let l =
                    RegionLayout::for_stream(free, pmr_bytes, params.stream, params.streams, params.capacity)
                        .ok_or_else(|| {
                            DriverError::Invalid(format!(
                            "an ordering queue of {:?} entries does not fit the stream's slice of the PMR",
                            params.capacity
                        ))
                        })?;
                (l, [0; 3], true)
            }
        };
        let swap = swap::Swap::new(params.checkpoint, dev, layout.capacity)?;
        // Before the pointers are (re)written: a checkpoint header of an
        // earlier life then never names entries past them.
        swap.reset(dev, geometry, ptrs[2]).await?;
        let mut mirror = Mirror::zeroed(layout.bytes() as usize);
        mirror.write(0, &layout.header_bytes_of(geometry));
        for (o, v) in [layout::HEAD, layout::FLUSHED, layout::TAIL].iter().zip(ptrs) {
            mirror.write(*o as usize, &v.to_le_bytes());
        }
        if format {
            for o in [layout::HEAD, layout::FLUSHED, layout::TAIL] {
                persist(&core, pmr, start + o, &0u64.to_le_bytes(), faults).await?;
            }
            persist(&core, pmr, start, &layout.header_bytes_of(geometry), faults).await?;
        }
        let q = Rc::new_cyclic(|me| OrderingQueue {
            devs: devices.to_vec(),
            pmr,
            layout,
            geometry,
            volatile: devices.iter().map(|d| d.info().volatile_cache).collect(),
            mirror: RefCell::new(mirror),
            state: RefCell::new(State {
                reserved: ptrs[2],
                next_epoch: 0,
                entries: VecDeque::new(),
                broken: None,
                ranges: vec![None; devices.len()],
            }),
            published: Notify::new(),
            progress: Notify::new(),
            flush_lock: Mutex::new(()),
            head_lock: Mutex::new(()),
            write_locks: (0..dev.machine().core_count()).map(|_| Mutex::new(())).collect(),
            swap,
            redirect: RefCell::new(redirect::Redirect::new(areas)),
            submitters: params.submitters.map_or_else(Vec::new, |s| {
                (s.first..s.first + s.count)
                    .map(|c| submitter::Submitter::new(c, dev.profile().horae_submitter_ring))
                    .collect()
            }),
            me: me.clone(),
        });
        Ok(q)
    }

    /// The stream's first device: its PMR holds the queue, its machine
    /// runs the stream.
    fn home(&self) -> &Rc<BlockDevice> {
        &self.devs[0]
    }

    /// The stream's devices, by `devid`.
    pub fn devices(&self) -> &[Rc<BlockDevice>] {
        &self.devs
    }

    /// Which stream this is and over how many devices.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Where the region sits.
    pub fn layout(&self) -> RegionLayout {
        self.layout
    }

    /// Entries the ring holds.
    pub fn capacity(&self) -> u32 {
        self.layout.capacity
    }

    fn pointer(&self, off: u64) -> u64 {
        let mut b = [0u8; 8];
        self.mirror.borrow().read(off as usize, &mut b);
        u64::from_le_bytes(b)
    }

    /// The persistent head (from the mirror).
    pub fn head(&self) -> u64 {
        self.pointer(layout::HEAD)
    }

    /// The persistent `flushed` pointer (from the mirror).
    pub fn flushed(&self) -> u64 {
        self.pointer(layout::FLUSHED)
    }

    /// The persistent tail (from the mirror): entries before it are
    /// appended.
    pub fn tail(&self) -> u64 {
        self.pointer(layout::TAIL)
    }

    /// The entry `seq` as the mirror holds it.
    pub fn entry(&self, id: EntryId) -> RawEntry {
        let at = self.layout.slot(id.0) as usize;
        let mut b = [0u8; 16];
        self.mirror.borrow().read(at, &mut b);
        RawEntry::from_bytes(&b)
    }

    /// Writes `bytes` at region offset `off` persistently on `core`, then
    /// into the mirror (so the mirror holds what is persistent).
    async fn write(&self, core: &Core, off: u64, bytes: &[u8]) -> Result<(), DriverError> {
        let _g = match self.write_locks.get(core.index()) {
            Some(l) => Some(l.lock().await),
            None => None,
        };
        let faults = &self.home().profile().faults;
        persist(core, self.pmr, self.layout.start + off, bytes, faults).await?;
        self.mirror.borrow_mut().write(off as usize, bytes);
        Ok(())
    }
}

#[cfg(test)]
mod mirror_tests {
    use super::Mirror;

    #[test]
    fn a_mirror_reads_zero_where_nothing_was_written() {
        let mut m = Mirror::zeroed(64);
        let mut b = [0xffu8; 8];
        m.read(56, &mut b);
        assert_eq!(b, [0; 8]);
        m.write(8, &[1, 2, 3]);
        let mut b = [0xffu8; 6];
        m.read(6, &mut b);
        assert_eq!(b, [0, 0, 1, 2, 3, 0]);
        m.write(60, &[9; 4]);
        let mut b = [0xffu8; 8];
        m.read(56, &mut b);
        assert_eq!(b, [0, 0, 0, 0, 9, 9, 9, 9]);
        m.read(8, &mut b[..3]);
        assert_eq!(&b[..3], &[1, 2, 3]);
    }

    #[test]
    #[should_panic(expected = "past its 64 bytes")]
    fn a_mirror_refuses_a_write_past_its_region() {
        Mirror::zeroed(64).write(62, &[0; 4]);
    }
}
