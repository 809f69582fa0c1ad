//! Swap of a full ordering queue to a checkpoint region on the SSD
//! (Horae 5.2 "Swap", 5.5; `docs/decisions.md` H6).
//!
//! Horae: "The ordering layer blocks the threads issuing ordered writes,
//! and then invokes swap operation, when the total size of the valid
//! ordering metadata exceeds the queue capacity. It moves the valid
//! ordering metadata to a checkpoint region with larger capacity, e.g., a
//! portion of flash storage. It first waits for the on-going append
//! operations on the ordering queue to complete. Next, it copies the whole
//! valid ordering metadata to the checkpoint region. Finally, it updates
//! the head and tail pointers atomically with a lightweight journal."
//!
//! ## The checkpoint region
//!
//! The upper layer reserves it ([`StreamParams::checkpoint`](super::StreamParams::checkpoint):
//! the ordering layer invents no device space): `pages` 4 KiB pages at
//! `lba` of the stream's first device (Horae does not say where the region
//! is; its artifact reserves 10 MB on the same SSD: H6). Integers are
//! little-endian.
//!
//! ```text
//! page 0 (header, the swap's journal record):
//!   0   magic "HORAECP1" (u64)     8  version 1 (u32)   12 pages (u32)
//!   16  first (u64): first entry the checkpoint holds
//!   24  end (u64): the entry after its last one (the head the swap sets)
//!   32  devices (u8), zero (u8), stream (u16), streams (u16)
//!   38  zeros                      60 CRC-32 (IEEE) of bytes 0..60 (u32)
//! pages 1..pages (entries):
//!   0..4080     255 entries of 16 bytes, Figure 6 bit-exact ([`RawEntry`])
//!   4080 base (u64): sequence number of slot 0
//!   4088 "HCPE" (u32)              4092 CRC-32 of bytes 0..4092 (u32)
//! ```
//!
//! Entry `seq` lives in slot `seq % 255` of entry page
//! `1 + (seq / 255) % (pages - 1)`: the entry pages are a ring, as the PMR
//! ring is.
//!
//! ## Swap
//!
//! When an append finds the ring full and dequeue frees nothing
//! ([`OrderingQueue::append_writes`]), the swap:
//! 1. blocks new appends (they wait until it is done) and takes the head
//!    lock (no dequeue meanwhile);
//! 2. waits until every append that reserved slots has published its tail;
//! 3. writes the entry pages holding `[head, tail)` (with the entries
//!    swapped earlier and still live in those pages, from their in-memory
//!    copy) with FUA, and waits for them: durable when they complete;
//! 4. writes the header `{first, end = tail}` with FUA and waits: the
//!    journal record naming the checkpoint's extent and the new head;
//! 5. persists head := tail in the PMR (one 8-byte persistent MMIO write,
//!    [`Core::persistent_write`](pcie_sim::Core::persistent_write)): the
//!    commit. The pointers are sequence numbers, so moving the head over
//!    the swapped entries is the whole atomic pointer update (the tail does
//!    not change; Horae's ring offsets would both reset);
//! 6. waits for the `dr` writes that started before the head moved (they
//!    target slots now free), then lets the appends go on.
//!
//! FUA, not a FLUSH: the checkpoint must be durable before the head moves,
//! but a FLUSH would also wait for every data write in the cache, which is
//! the waiting the swap exists to avoid. The fault switch
//! [`crate::DriverFaults::horae_swap_no_fua`] writes the checkpoint without
//! FUA (the head moves while it may still sit in a volatile cache).
//!
//! ## `dr` and `flushed` of a swapped entry
//!
//! A swapped entry's slot in the PMR is reused, so its `dr` bit cannot be
//! set any more: its durability is tracked by `flushed` alone (a joint
//! FLUSH through it waits for its completion, as for any entry). The `dr`
//! bit copied with it is frozen: set if it was set when copied. In memory
//! a swapped entry is durable when its sequence number is below `flushed`
//! (so dequeue passes it, and drains it from the checkpoint, only then);
//! recovery also trusts a frozen `dr` = 1. An entry completed after its
//! swap and not yet flushed is treated as not durable: recovery may
//! discard it and what follows (a consistent prefix, conservative).
//!
//! ## Recovery
//!
//! [`read_checkpoint`] gives recovery the entries `[max(first, flushed),
//! min(end, head))` of the header, in order, before the PMR's
//! `[head, tail)`; entries below `first` and below `flushed` are durable
//! (drained or dequeued only when durable). Why every crash point
//! recovers one consistent queue, with `H` the persistent head:
//! - before step 4 lands: the old header's extent ends at or before `H`
//!   and its live pages were rewritten with the same bytes (a page is
//!   rewritten whole, and a 4 KiB write lands whole), so the checkpoint
//!   plus the PMR give the queue as before the swap;
//! - after 4, before 5: the header's `end` is past `H`; `[first, H)` come
//!   from the checkpoint and `[H, tail)` from the PMR (which also holds
//!   `[H, end)`, with `dr` bits possibly fresher): the same queue;
//! - after 5: `[first, end)` from the checkpoint, `[end, tail)` (empty
//!   until new appends) from the PMR.
//!
//! A page is reused only for entries below `flushed`, which recovery never
//! reads, and [`OrderingQueue::init_stream`] writes an empty header at the
//! tail before it writes the queue's pointers (formatting or attaching),
//! so a header left by an earlier life of the region names nothing.
//! A header or a page that does not check (magic, version, CRC, base,
//! extent) is [`DriverError::CorruptPsq`]; a region with no header magic
//! holds no entries.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use super::layout::{Geometry, RawEntry};
use super::{corrupt, EntryId, OrderingQueue, Pending, Progress};
use crate::bio::{Bio, BioFlags, Done};
use crate::device::BlockDevice;
use crate::error::DriverError;

/// Magic of the checkpoint header ("HORAECP1").
pub const MAGIC: u64 = u64::from_le_bytes(*b"HORAECP1");
/// Checkpoint format version.
pub const VERSION: u32 = 1;
/// Magic of an entry page's trailer ("HCPE").
pub const PAGE_MAGIC: u32 = u32::from_le_bytes(*b"HCPE");
/// Entries per entry page (4 KiB minus a 16-byte trailer).
pub const ENTRIES_PER_PAGE: u64 = 255;
const PAGE: usize = 4096;
const TRAILER: usize = (ENTRIES_PER_PAGE * 16) as usize;

/// The checkpoint region of a stream: `pages` 4 KiB pages from device
/// block `lba` (device LBA units) of the stream's first device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointRegion {
    /// First logical block (device LBA units, page aligned).
    pub lba: u64,
    /// 4 KiB pages: the header and `pages - 1` entry pages.
    pub pages: u32,
}

impl CheckpointRegion {
    /// Entry pages.
    fn entry_pages(&self) -> u64 {
        (self.pages as u64).saturating_sub(1)
    }

    /// Index in the region of the page holding entry `seq`.
    pub fn page_of(&self, seq: u64) -> u64 {
        1 + (seq / ENTRIES_PER_PAGE) % self.entry_pages().max(1)
    }

    /// True if entries `first .. end` fit the entry pages at once (each
    /// page holds one base).
    pub fn fits(&self, first: u64, end: u64) -> bool {
        end <= first || (end - 1) / ENTRIES_PER_PAGE - first / ENTRIES_PER_PAGE < self.entry_pages()
    }

    /// The largest ring the region takes (a whole ring plus a page, what
    /// a swap checks before it writes); 0 under 3 pages.
    pub fn ring_limit(&self) -> u32 {
        let pages = (self.pages as u64).saturating_sub(2);
        (pages * ENTRIES_PER_PAGE).saturating_sub(1).min(u32::MAX as u64) as u32
    }

    /// Checks the region against the device and a ring of `ring` entries
    /// (a whole queue must fit with a page to spare); returns the device's
    /// LBAs per 4 KiB page.
    pub(super) fn check(&self, dev: &BlockDevice, ring: u32) -> Result<u64, DriverError> {
        let info = dev.info();
        let pp = (4096 / info.lba_size.max(1)) as u64;
        let end = (self.pages as u64)
            .checked_mul(pp)
            .and_then(|b| self.lba.checked_add(b));
        let need = ring as u64 / ENTRIES_PER_PAGE + 3;
        if self.lba % pp != 0 || end.is_none_or(|e| e > info.blocks) || (self.pages as u64) < need {
            return Err(DriverError::Invalid(format!(
                "checkpoint region {}+{} pages: not page aligned, past the device ({} blocks), \
                 or under the {need} pages a ring of {ring} entries needs",
                self.lba, self.pages, info.blocks
            )));
        }
        Ok(pp)
    }
}

/// The checkpoint header (page 0): the swap's journal record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointHeader {
    /// The region's pages.
    pub pages: u32,
    /// The stream.
    pub geometry: Geometry,
    /// First entry the checkpoint holds.
    pub first: u64,
    /// The entry after the last one (the head the swap sets).
    pub end: u64,
}

impl CheckpointHeader {
    /// The header page.
    pub fn to_page(&self) -> Vec<u8> {
        let mut b = vec![0u8; PAGE];
        b[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.pages.to_le_bytes());
        b[16..24].copy_from_slice(&self.first.to_le_bytes());
        b[24..32].copy_from_slice(&self.end.to_le_bytes());
        b[32] = self.geometry.devices;
        b[34..36].copy_from_slice(&self.geometry.stream.to_le_bytes());
        b[36..38].copy_from_slice(&self.geometry.streams.to_le_bytes());
        let crc = crc32fast::hash(&b[0..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses a header page: `Ok(None)` without the magic (no checkpoint
    /// written), an error if the rest does not check.
    pub fn parse(b: &[u8]) -> Result<Option<CheckpointHeader>, String> {
        if b.len() < 64 || u64::from_le_bytes(le8(&b[0..8])) != MAGIC {
            return Ok(None);
        }
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let crc = u32_at(60);
        if crc32fast::hash(&b[0..60]) != crc {
            return Err("checkpoint header: checksum mismatch".into());
        }
        let version = u32_at(8);
        if version != VERSION {
            return Err(format!("checkpoint header: unknown version {version}"));
        }
        Ok(Some(CheckpointHeader {
            pages: u32_at(12),
            first: u64::from_le_bytes(le8(&b[16..24])),
            end: u64::from_le_bytes(le8(&b[24..32])),
            geometry: Geometry {
                devices: b[32],
                stream: u16::from_le_bytes([b[34], b[35]]),
                streams: u16::from_le_bytes([b[36], b[37]]),
            },
        }))
    }
}

fn le8(b: &[u8]) -> [u8; 8] {
    super::layout::le8(b)
}

/// An entry page: the slots (`None`: zeros) of base `base`, and its
/// trailer.
fn entry_page(base: u64, slot: impl Fn(u64) -> Option<[u8; 16]>) -> Vec<u8> {
    let mut b = vec![0u8; PAGE];
    for j in 0..ENTRIES_PER_PAGE {
        if let Some(e) = slot(base + j) {
            let at = j as usize * 16;
            b[at..at + 16].copy_from_slice(&e);
        }
    }
    b[TRAILER..TRAILER + 8].copy_from_slice(&base.to_le_bytes());
    b[TRAILER + 8..TRAILER + 12].copy_from_slice(&PAGE_MAGIC.to_le_bytes());
    let crc = crc32fast::hash(&b[0..PAGE - 4]);
    b[PAGE - 4..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Checks an entry page read back for entries of base `base`.
fn check_page(b: &[u8], base: u64) -> Result<(), String> {
    let magic = u32::from_le_bytes([b[TRAILER + 8], b[TRAILER + 9], b[TRAILER + 10], b[TRAILER + 11]]);
    if magic != PAGE_MAGIC {
        return Err("no entry page magic".into());
    }
    let crc = u32::from_le_bytes([b[PAGE - 4], b[PAGE - 3], b[PAGE - 2], b[PAGE - 1]]);
    if crc32fast::hash(&b[0..PAGE - 4]) != crc {
        return Err("checksum mismatch".into());
    }
    let got = u64::from_le_bytes(le8(&b[TRAILER..TRAILER + 8]));
    if got != base {
        return Err(format!("holds entries from {got}, not {base}"));
    }
    Ok(())
}

/// The swap state of a queue.
#[derive(Debug, Default)]
pub(super) struct Swap {
    /// The checkpoint region, if the upper layer gave one.
    region: Option<CheckpointRegion>,
    /// The first device's LBAs per 4 KiB page.
    per_page: u64,
    /// Swapped entries not yet drained: sequence numbers
    /// `head - len .. head`, with the bytes the checkpoint holds.
    swapped: RefCell<VecDeque<(Pending, [u8; 16])>>,
    /// A swap is running: appends wait.
    swapping: Cell<bool>,
    /// `dr` writes in flight (a swap waits for them before appends reuse
    /// the slots).
    dr_writes: Cell<u32>,
    /// Swaps since attach.
    swaps: Cell<u64>,
}

impl Swap {
    /// The swap state for `region` on `dev` with a ring of `ring` entries.
    pub(super) fn new(
        region: Option<CheckpointRegion>,
        dev: &BlockDevice,
        ring: u32,
    ) -> Result<Swap, DriverError> {
        let per_page = match region {
            Some(r) => r.check(dev, ring)?,
            None => 1,
        };
        Ok(Swap {
            region,
            per_page,
            ..Default::default()
        })
    }
}

impl Swap {
    /// Writes an empty header at `tail` (init, before the queue's pointers
    /// are written: a header of an earlier life of the region then names
    /// nothing).
    pub(super) async fn reset(
        &self,
        dev: &BlockDevice,
        geometry: Geometry,
        tail: u64,
    ) -> Result<(), DriverError> {
        let Some(region) = self.region else {
            return Ok(());
        };
        let h = CheckpointHeader {
            pages: region.pages,
            geometry,
            first: tail,
            end: tail,
        };
        let sent = vec![submit_page(dev, 0, region, self.per_page, 0, &h.to_page(), true).await?];
        wait_pages(dev, 0, sent).await
    }
}

/// Writes one 4 KiB page at region page `page` (returns its handle).
async fn submit_page(
    dev: &BlockDevice,
    core: usize,
    region: CheckpointRegion,
    per_page: u64,
    page: u64,
    bytes: &[u8],
    fua: bool,
) -> Result<(Done, pcie_sim::HostAddr), DriverError> {
    let mem = dev.machine().memory();
    let buf = mem.alloc(4096)?;
    mem.write(buf, bytes)?;
    let mut bio = Bio::write(region.lba + page * per_page, vec![buf]);
    if fua {
        bio = bio.with(BioFlags::FUA);
    }
    match dev.submit(core, &bio).await {
        Ok(d) => Ok((d, buf)),
        Err(e) => {
            mem.free(buf)?;
            Err(e)
        }
    }
}

/// Waits for page writes and frees their buffers.
async fn wait_pages(
    dev: &BlockDevice,
    core: usize,
    sent: Vec<(Done, pcie_sim::HostAddr)>,
) -> Result<(), DriverError> {
    let mut r = Ok(());
    for (d, buf) in sent {
        let s = dev.wait(core, &d).await;
        if r.is_ok() && !s.is_success() {
            r = Err(DriverError::Command(s));
        }
        dev.machine().memory().free(buf)?;
    }
    r
}

impl OrderingQueue {
    /// Swaps since attach (Horae 5.2).
    pub fn swaps(&self) -> u64 {
        self.swap.swaps.get()
    }

    /// Entries swapped to the checkpoint region and not yet drained.
    pub fn swapped(&self) -> u64 {
        self.swap.swapped.borrow().len() as u64
    }

    /// True while a swap blocks appends.
    pub(super) fn swapping(&self) -> bool {
        self.swap.swapping.get()
    }

    /// True if an entry in the queue is a prepare write of write
    /// redirection ([`super::redirect`]). Such a queue is not swapped: the
    /// commit write of a prepare write runs when dequeue moves the head
    /// over it, and a swap moves the head before its entries are durable,
    /// so a swapped prepare write would lose its commit. A full queue
    /// holding one waits for dequeue instead, which commits it once it is
    /// durable (the eager commit).
    fn holds_prepare_writes(&self) -> bool {
        self.state.borrow().entries.iter().any(|p| p.plba.is_some())
    }

    /// Looks up the pending entry `id` (in the ring or swapped) and applies
    /// `f` to it.
    pub(super) fn with_pending<R>(
        &self,
        id: EntryId,
        f: impl FnOnce(&mut Pending) -> R,
    ) -> Result<R, DriverError> {
        let head = self.head();
        if id.0 >= head {
            let i = self.index(id)?;
            return Ok(f(&mut self.state.borrow_mut().entries[i]));
        }
        let mut sw = self.swap.swapped.borrow_mut();
        let first = head - sw.len() as u64;
        if id.0 < first {
            return Err(DriverError::Invalid(format!(
                "entry {} is not in the queue",
                id.0
            )));
        }
        Ok(f(&mut sw[(id.0 - first) as usize].0))
    }

    /// The first swapped entry not known durable (at or past `flushed`).
    pub(super) fn swapped_not_durable(&self) -> Option<u64> {
        let sw = self.swap.swapped.borrow();
        let first = self.head() - sw.len() as u64;
        let f = self.flushed();
        // With nothing swapped, no swapped entry holds the durable point
        // back, even where dequeue took the head past `flushed` (`dr` bits).
        (!sw.is_empty() && first + (sw.len() as u64) > f).then(|| first.max(f))
    }

    /// For a joint FLUSH up to `end`: the status of a failed swapped entry
    /// before it, else whether one is still in flight.
    pub(super) fn swapped_in_flight(&self, end: u64) -> Result<bool, DriverError> {
        let sw = self.swap.swapped.borrow();
        let first = self.head() - sw.len() as u64;
        let from = self.flushed();
        let mut waiting = false;
        for (i, (p, _)) in sw.iter().enumerate() {
            let seq = first + i as u64;
            if seq < from || seq >= end {
                continue;
            }
            match p.progress {
                Progress::Failed(s) => return Err(DriverError::Command(s)),
                Progress::Completed => {}
                _ => waiting = true,
            }
        }
        Ok(waiting)
    }

    /// The first swapped entry at or past `from` on device `d`.
    pub(super) fn swapped_first_of(&self, d: usize, from: u64) -> Option<u64> {
        let sw = self.swap.swapped.borrow();
        let first = self.head() - sw.len() as u64;
        sw.iter()
            .enumerate()
            .map(|(i, (p, _))| (first + i as u64, p.device as usize))
            .find(|&(s, dev)| s >= from && dev == d)
            .map(|(s, _)| s)
    }

    /// The device of swapped entry `seq`, if it is swapped.
    pub(super) fn swapped_device(&self, seq: u64) -> Option<u8> {
        let sw = self.swap.swapped.borrow();
        let first = self.head() - sw.len() as u64;
        (seq >= first && seq < self.head()).then(|| sw[(seq - first) as usize].0.device)
    }

    /// Drops the swapped entries below `flushed` (durable: their room in
    /// the checkpoint may be reused).
    pub(super) fn drain_swapped(&self) {
        let f = self.flushed();
        let head = self.head();
        let mut sw = self.swap.swapped.borrow_mut();
        let first = head - sw.len() as u64;
        let n = f.saturating_sub(first).min(sw.len() as u64) as usize;
        if n > 0 {
            sw.drain(..n);
            drop(sw);
            self.progress.notify_waiters();
        }
    }

    /// Begins a `dr` write for entry `seq`: false if it is swapped (its
    /// slot may hold another entry; its durability is `flushed`'s).
    pub(super) fn dr_write_begin(&self, seq: u64) -> bool {
        if seq < self.head() {
            return false;
        }
        self.swap.dr_writes.set(self.swap.dr_writes.get() + 1);
        true
    }

    /// Ends a `dr` write.
    pub(super) fn dr_write_end(&self) {
        self.swap
            .dr_writes
            .set(self.swap.dr_writes.get().saturating_sub(1));
        self.progress.notify_waiters();
    }

    /// Makes room for an append by a swap (Horae 5.2), or, with the
    /// checkpoint full, by a joint FLUSH of the swapped entries and a
    /// dequeue. False if the stream has no checkpoint region (the caller
    /// waits for dequeue instead).
    pub(super) async fn swap_for_room(&self, core: usize) -> Result<bool, DriverError> {
        if self.swap.region.is_none() || self.holds_prepare_writes() {
            return Ok(false);
        }
        if self.swap.swapping.get() {
            self.progress.notified().await;
            return Ok(true);
        }
        self.swap.swapping.set(true);
        let r = self.swap_out(core).await;
        self.swap.swapping.set(false);
        self.progress.notify_waiters();
        self.published.notify_waiters();
        r.map(|_| true)
    }

    async fn swap_out(&self, core: usize) -> Result<(), DriverError> {
        let Some(region) = self.swap.region else {
            return Ok(());
        };
        let g = self.head_lock.lock().await;
        // Wait for the on-going appends: every reserved epoch published.
        loop {
            if let Some(why) = self.state.borrow().broken.clone() {
                return Err(DriverError::Invalid(why));
            }
            if self.tail() == self.state.borrow().reserved {
                break;
            }
            self.published.notified().await;
        }
        self.drain_swapped();
        let (head, tail) = (self.head(), self.tail());
        if self.durable_point() > head || tail == head || self.holds_prepare_writes() {
            // Dequeue frees room now (the caller retries).
            return Ok(());
        }
        let first = head - self.swap.swapped.borrow().len() as u64;
        if !region.fits(first, tail) {
            // The checkpoint is full: make its entries durable, drain them.
            drop(g);
            self.flush_through(core, head).await?;
            self.dequeue(core).await?;
            return Ok(());
        }
        let raws: Vec<[u8; 16]> = (head..tail).map(|s| self.entry(EntryId(s)).to_bytes()).collect();
        let fua = !self.home().profile().faults.horae_swap_no_fua;
        let dev = self.home();
        let pp = self.swap.per_page;
        let slot = |seq: u64| -> Option<[u8; 16]> {
            if seq >= head && seq < tail {
                Some(raws[(seq - head) as usize])
            } else if seq >= first && seq < head {
                self.swap
                    .swapped
                    .borrow()
                    .get((seq - first) as usize)
                    .map(|(_, r)| *r)
            } else {
                None
            }
        };
        let mut sent = Vec::new();
        let mut base = head - head % ENTRIES_PER_PAGE;
        let mut r = Ok(());
        while base < tail {
            let page = entry_page(base, slot);
            match submit_page(dev, core, region, pp, region.page_of(base), &page, fua).await {
                Ok(s) => sent.push(s),
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
            base += ENTRIES_PER_PAGE;
        }
        let w = wait_pages(dev, core, sent).await;
        r?;
        w?;
        let hdr = CheckpointHeader {
            pages: region.pages,
            geometry: self.geometry,
            first,
            end: tail,
        };
        let sent = vec![submit_page(dev, core, region, pp, 0, &hdr.to_page(), fua).await?];
        wait_pages(dev, core, sent).await?;
        // The commit: the head moves over the swapped entries.
        let c = dev.machine().core(core)?;
        self.write(&c, super::layout::HEAD, &tail.to_le_bytes()).await?;
        {
            let mut st = self.state.borrow_mut();
            let mut sw = self.swap.swapped.borrow_mut();
            for (p, raw) in st.entries.drain(..(tail - head) as usize).zip(raws) {
                sw.push_back((p, raw));
            }
        }
        self.swap.swaps.set(self.swap.swaps.get() + 1);
        while self.swap.dr_writes.get() > 0 {
            self.progress.notified().await;
        }
        drop(g);
        Ok(())
    }
}

/// Reads the checkpointed entries recovery needs, in order: the header's
/// `[max(first, flushed), min(end, head))` (see the module
/// documentation), from the checkpoint `region` of the stream `geometry`
/// on `dev` (its first device). Nothing without a header magic; a header
/// or page that does not check, or a header naming entries past the tail,
/// is [`DriverError::CorruptPsq`].
pub async fn read_checkpoint(
    dev: &BlockDevice,
    region: CheckpointRegion,
    geometry: Geometry,
    head: u64,
    flushed: u64,
    tail: u64,
) -> Result<Vec<(u64, RawEntry)>, DriverError> {
    let info = dev.info();
    let pp = (4096 / info.lba_size.max(1)) as u64;
    let end_lba = (region.pages as u64)
        .checked_mul(pp)
        .and_then(|b| region.lba.checked_add(b));
    if region.pages < 2 || region.lba % pp != 0 || end_lba.is_none_or(|e| e > info.blocks) {
        return Err(DriverError::Invalid(format!(
            "checkpoint region {}+{} pages does not fit the device",
            region.lba, region.pages
        )));
    }
    let mem = dev.machine().memory();
    let buf = mem.alloc(4096)?;
    let mut page = vec![0u8; PAGE];
    let r = async {
        let read = |p: u64| {
            let bio = Bio::read(region.lba + p * pp, vec![buf]);
            async move { dev.submit_wait(0, &bio).await }
        };
        read(0).await?;
        mem.read(buf, &mut page)?;
        let Some(h) = CheckpointHeader::parse(&page).map_err(corrupt)? else {
            return Ok(Vec::new());
        };
        if h.pages != region.pages || h.geometry != geometry {
            return Err(corrupt(format!(
                "checkpoint header of {} pages for {:?}, not {} pages for {geometry:?}",
                h.pages, h.geometry, region.pages
            )));
        }
        if h.first > h.end || h.end > tail || !region.fits(h.first, h.end) {
            return Err(corrupt(format!(
                "checkpoint extent {}..{} impossible (tail {tail}, {} pages)",
                h.first, h.end, region.pages
            )));
        }
        let (from, to) = (h.first.max(flushed), h.end.min(head));
        let mut out = Vec::new();
        let mut loaded = None;
        for seq in from..to {
            let base = seq - seq % ENTRIES_PER_PAGE;
            if loaded != Some(base) {
                let p = region.page_of(seq);
                read(p).await?;
                mem.read(buf, &mut page)?;
                check_page(&page, base)
                    .map_err(|why| corrupt(format!("checkpoint page {p} (entry {seq}): {why}")))?;
                loaded = Some(base);
            }
            let at = (seq % ENTRIES_PER_PAGE) as usize * 16;
            let mut b = [0u8; 16];
            b.copy_from_slice(&page[at..at + 16]);
            out.push((seq, RawEntry::from_bytes(&b)));
        }
        Ok(out)
    }
    .await;
    mem.free(buf)?;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_pages_round_trip_and_detect_damage() {
        let h = CheckpointHeader {
            pages: 9,
            geometry: Geometry::SINGLE,
            first: 300,
            end: 777,
        };
        let p = h.to_page();
        assert_eq!(CheckpointHeader::parse(&p), Ok(Some(h)));
        assert_eq!(CheckpointHeader::parse(&[0u8; PAGE]), Ok(None));
        let mut bad = p.clone();
        bad[17] ^= 1;
        assert!(CheckpointHeader::parse(&bad).unwrap_err().contains("checksum"));
        let e = RawEntry {
            lba: 7,
            len: 2,
            devid: 0,
            etag: true,
            dr: true,
            plba: super::super::layout::NO_PLBA,
            ipu: false,
            rsvd: 0,
        }
        .to_bytes();
        let page = entry_page(510, |s| (s == 512).then_some(e));
        assert_eq!(check_page(&page, 510), Ok(()));
        assert_eq!(&page[32..48], &e);
        assert!(check_page(&page, 255).unwrap_err().contains("510"));
        let mut torn = page.clone();
        torn[40] ^= 4;
        assert!(check_page(&torn, 510).unwrap_err().contains("checksum"));
        let r = CheckpointRegion { lba: 0, pages: 3 };
        assert_eq!((r.page_of(0), r.page_of(255), r.page_of(510)), (1, 2, 1));
        assert!(r.fits(100, 510) && !r.fits(100, 511) && r.fits(0, 0));
    }
}
