//! Write redirection for in-place updates (Horae 5.4 "Handling Dependency
//! Loops", 5.5; `docs/decisions.md` H9).
//!
//! **p-area.** The upper layer reserves an LBA range on every device of
//! the stream (the preparatory area, "a pre-reserved area of each device")
//! and gives it in [`StreamParams::p_area`](super::StreamParams::p_area);
//! the ordering layer does not invent device space. With several streams
//! the range is cut into equal slices, stream `sid` owning slice `sid`
//! (Horae Table 1: "HORAE evenly partitions the CMB area and p-area, and
//! assigns a portion to each stream"; [`PArea::slice`]). A slot is one
//! 4 KiB page of the slice.
//!
//! **Prepare write.** An in-place write ([`OrderedWrite::in_place`](super::OrderedWrite::in_place),
//! `olayer_submit_bio_ipu`) gets `len` contiguous free slots on its device
//! (first fit); their first LBA is stored in the entry's `plba`, and
//! [`OrderingQueue::submit`](super::OrderingQueue::submit) sends the data
//! there through the normal orderless path. A write of a block that a
//! prepare write still redirects is redirected as well, in place or not:
//! otherwise the older prepare write's commit would later overwrite it
//! (its entry then has `plba` but not the `ipu` bit). Redirected writes
//! never wait for an earlier write of the same block: each has its own
//! slot ("HORAE allows multiple in-progress parallel IPU on the same
//! address").
//!
//! **IPU tree.** In DRAM, `(device, home LBA of a 4 KiB block)` to the
//! LBA of the newest slot holding it. Horae uses a radix tree; this is a
//! `BTreeMap` (same lookups, deterministic iteration). It is updated when
//! the entry is reserved, under the same borrow as its sequence number, so
//! the newest entry always wins. Reads go through
//! [`OrderingQueue::read_location`](super::OrderingQueue::read_location) or
//! [`OrderingQueue::read`](super::OrderingQueue::read) ("the following
//! read operation retrieves the latest data blocks from p-area first").
//! The paper says the tree's cost is negligible ("performed in memory, and
//! its overhead is thus negligible") and gives no number: no CPU is
//! charged for it.
//!
//! **Commit write.** [`OrderingQueue::dequeue`](super::OrderingQueue::dequeue)
//! commits before it moves the head: over the durable prefix of the queue
//! (before `flushed`, or `dr` set: the prepare writes "that obey the
//! order") it merges the prepare writes block by block, newest wins
//! ([`merge`]), reads the slots and writes the blocks to their home
//! locations, all reads then all writes concurrently ([`copy_home`]), sends
//! a FLUSH to the written devices with a volatile cache, and only then
//! persists the head past them, drops the tree entries that still point at
//! those slots and frees the slots. A crash before the head moved leaves
//! the prepare writes in the queue and their slots untouched, so recovery
//! commits them again. Policies: **lazy**, after a joint FLUSH when no
//! write of the stream is in flight (the stream is idle), in a background
//! task; **eager**, when an IPU finds no free slots: the append waits,
//! dequeuing (so committing), as it does for a full queue ("When HORAE
//! runs out of p-area space, it triggers eager commit write").
//!
//! **Recovery** ([`super::recover`]) commits the durable prepare writes
//! with the same [`merge`] and [`copy_home`], and ignores a discarded one:
//! its home block keeps its old content (request atomicity through the
//! double write). The fault `horae_no_redirect_commit` makes recovery skip
//! the commit (a durable, even fsynced, in-place update is lost).
//!
//! Without a p-area (`p_area: None`) nothing is redirected and an in-place
//! write goes home with the `ipu` bit only (see [`super::layout`]).

use std::collections::BTreeMap;
use std::rc::Rc;

use super::OrderingQueue;
use crate::bio::Bio;
use crate::device::BlockDevice;
use crate::error::DriverError;

/// The preparatory area the upper layer reserved: the same LBA range on
/// every device of the stream's streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PArea {
    /// First LBA (device units; page aligned).
    pub start: u64,
    /// 4 KiB pages in the range (all streams together).
    pub pages: u64,
}

impl PArea {
    /// Stream `stream`'s slice of the range cut into `streams` equal slices
    /// (remainder unused), given the device's LBAs per 4 KiB page.
    pub fn slice(&self, stream: u16, streams: u16, per_page: u64) -> PArea {
        let pages = self.pages / streams.max(1) as u64;
        PArea {
            start: self.start + stream as u64 * pages * per_page,
            pages,
        }
    }

    /// Checks the range fits a device of `blocks` LBAs and a 32-bit `plba`.
    pub(super) fn check(&self, blocks: u64, per_page: u64) -> Result<(), DriverError> {
        let end = self
            .pages
            .checked_mul(per_page)
            .and_then(|b| self.start.checked_add(b));
        if self.pages == 0
            || self.start % per_page != 0
            || end.is_none_or(|e| e > blocks || e > u32::MAX as u64)
        {
            return Err(DriverError::Invalid(format!(
                "p-area {}+{} pages is empty, unaligned, past the device ({blocks} blocks) or a 32-bit plba",
                self.start, self.pages
            )));
        }
        Ok(())
    }
}

/// The redirection state of a stream (DRAM only).
#[derive(Debug, Default)]
pub(super) struct Redirect {
    /// Per device: the stream's slice of the p-area and its free slots.
    pub(super) areas: Vec<(PArea, u64, Vec<bool>)>,
    /// The IPU tree: (device, home LBA of a page) -> LBA of the newest
    /// slot holding it.
    pub(super) tree: BTreeMap<(u8, u64), u64>,
    /// Reads through the tree in flight: slots are not released (so not
    /// reused) while one runs.
    pub(super) readers: u32,
    /// Home blocks the commit writes of this mount wrote (merged: a block
    /// redirected twice before its commit counts once).
    pub(super) committed: u64,
}

impl Redirect {
    /// The state for the slices `areas` (per device: its slice and LBAs
    /// per page; empty: no redirection).
    pub(super) fn new(areas: Vec<(PArea, u64)>) -> Redirect {
        Redirect {
            areas: areas
                .into_iter()
                .map(|(a, pp)| (a, pp, vec![true; a.pages as usize]))
                .collect(),
            tree: BTreeMap::new(),
            readers: 0,
            committed: 0,
        }
    }

    /// True if the stream has a p-area.
    pub(super) fn enabled(&self) -> bool {
        !self.areas.is_empty()
    }

    /// True if a page of `lba..+len` pages on `device` is in the tree.
    pub(super) fn redirects(&self, device: u8, lba: u64, len: u32) -> bool {
        let Some(&(_, pp, _)) = self.areas.get(device as usize) else {
            return false;
        };
        (0..len as u64).any(|i| self.tree.contains_key(&(device, lba + i * pp)))
    }

    /// `len` contiguous free slots on `device` (first fit): their first
    /// LBA. `Ok(None)` if none now; an error if they can never be there.
    pub(super) fn allocate(&mut self, device: u8, len: u32) -> Result<Option<u64>, DriverError> {
        let Some((area, pp, free)) = self.areas.get_mut(device as usize) else {
            return Ok(None);
        };
        let n = len as usize;
        if n > free.len() {
            return Err(DriverError::Invalid(format!(
                "an in-place write of {len} pages is larger than the stream's p-area ({} pages)",
                free.len()
            )));
        }
        let mut run = 0;
        for i in 0..free.len() {
            run = if free[i] { run + 1 } else { 0 };
            if run == n {
                let first = i + 1 - n;
                free[first..=i].iter_mut().for_each(|f| *f = false);
                return Ok(Some(area.start + first as u64 * *pp));
            }
        }
        Ok(None)
    }

    /// Frees `len` slots from `plba` on `device` (an allocation given back).
    pub(super) fn unallocate(&mut self, device: u8, len: u32, plba: u64) {
        if let Some((area, pp, free)) = self.areas.get_mut(device as usize) {
            let first = ((plba - area.start) / *pp) as usize;
            free[first..first + len as usize]
                .iter_mut()
                .for_each(|f| *f = true);
        }
    }

    /// Records `lba..+len` pages on `device` as redirected to `plba..`.
    pub(super) fn insert(&mut self, device: u8, lba: u64, len: u32, plba: u64) {
        let pp = self.areas.get(device as usize).map_or(1, |a| a.1);
        for i in 0..len as u64 {
            self.tree.insert((device, lba + i * pp), plba + i * pp);
        }
    }

    /// After a commit: drops the tree entries of `lba..+len` that still
    /// point at the slots `plba..` (a newer prepare write keeps its own)
    /// and frees the slots.
    pub(super) fn release(&mut self, device: u8, lba: u64, len: u32, plba: u64) {
        let Some((area, pp, free)) = self.areas.get_mut(device as usize) else {
            return;
        };
        for i in 0..len as u64 {
            let (home, slot) = (lba + i * *pp, plba + i * *pp);
            if self.tree.get(&(device, home)) == Some(&slot) {
                self.tree.remove(&(device, home));
            }
            if let Some(f) = free.get_mut(((slot - area.start) / *pp) as usize) {
                *f = true;
            }
        }
    }

    /// Slots of the stream's slice on `device` (0 without a p-area).
    pub(super) fn slots(&self, device: u8) -> usize {
        self.areas.get(device as usize).map_or(0, |a| a.2.len())
    }

    /// Free slots on `device`.
    pub(super) fn free_slots(&self, device: u8) -> usize {
        self.areas
            .get(device as usize)
            .map_or(0, |a| a.2.iter().filter(|f| **f).count())
    }
}

/// One prepare write to commit: (device, home LBA, slot LBA, pages).
pub type PrepareWrite = (u8, u64, u64, u32);

/// Merges prepare writes given in queue order, page by page, the newest
/// winning ("merges the overlapping data blocks of the p-area"): `(device,
/// home LBA of a page) -> slot LBA holding its newest content`.
pub fn merge(writes: &[PrepareWrite], devs: &[Rc<BlockDevice>]) -> BTreeMap<(u8, u64), u64> {
    let mut out = BTreeMap::new();
    for &(d, lba, plba, len) in writes {
        let pp = devs
            .get(d as usize)
            .map_or(1, |dev| (4096 / dev.info().lba_size.max(1)) as u64);
        for i in 0..len as u64 {
            out.insert((d, lba + i * pp), plba + i * pp);
        }
    }
    out
}

/// The commit write of `merged` ([`merge`]): reads every slot, then writes
/// every page to its home location, each phase submitted at once and
/// waited for together (Horae: "writes the merged data blocks back to
/// their original destination concurrently"), then flushes the devices
/// written (the block layer drops the flush without a volatile cache).
/// On `core`'s queues.
pub async fn copy_home(
    devs: &[Rc<BlockDevice>],
    core: usize,
    merged: &BTreeMap<(u8, u64), u64>,
) -> Result<(), DriverError> {
    let Some(home) = devs.first() else {
        return Ok(());
    };
    if merged.is_empty() {
        return Ok(());
    }
    let mem = home.machine().memory();
    let mut pages = Vec::with_capacity(merged.len());
    for _ in 0..merged.len() {
        pages.push(mem.alloc(4096)?);
    }
    let r = copy_with(devs, core, merged, &pages).await;
    for p in pages {
        mem.free(p)?;
    }
    r
}

async fn copy_with(
    devs: &[Rc<BlockDevice>],
    core: usize,
    merged: &BTreeMap<(u8, u64), u64>,
    pages: &[pcie_sim::HostAddr],
) -> Result<(), DriverError> {
    let dev = |d: u8| {
        devs.get(d as usize)
            .ok_or_else(|| DriverError::Invalid(format!("no device {d} in the stream")))
    };
    for write in [false, true] {
        let mut sent = Vec::with_capacity(merged.len());
        for (((d, lba), plba), &p) in merged.iter().zip(pages) {
            let bio = if write {
                Bio::write(*lba, vec![p])
            } else {
                Bio::read(*plba, vec![p])
            };
            let dv = dev(*d)?;
            sent.push((dv, dv.submit(core, &bio).await?));
        }
        for (dv, done) in &sent {
            let s = dv.wait(core, done).await;
            if !s.is_success() {
                return Err(DriverError::Command(s));
            }
        }
    }
    let written: std::collections::BTreeSet<u8> = merged.keys().map(|(d, _)| *d).collect();
    for d in written {
        let dv = dev(d)?;
        if dv.info().volatile_cache {
            dv.submit_wait(core, &Bio::flush()).await?;
        }
    }
    Ok(())
}

impl OrderingQueue {
    /// Where the newest content of the 4 KiB page at `lba` of the stream's
    /// device `device` is: the p-area slot a prepare write redirected it to
    /// while the IPU tree holds it, else `lba` itself (Horae 5.4 "Read":
    /// "HORAE searches the IPU tree for the plba").
    pub fn read_location(&self, device: u8, lba: u64) -> u64 {
        self.redirect
            .borrow()
            .tree
            .get(&(device, lba))
            .copied()
            .unwrap_or(lba)
    }

    /// True if the stream redirects in-place writes (it has a p-area).
    pub fn redirects(&self) -> bool {
        self.redirect.borrow().enabled()
    }

    /// The p-area slots of the stream on `device` (its slice; 0 without a
    /// p-area): an epoch's in-place writes must fit them.
    pub fn p_area_slots(&self, device: u8) -> usize {
        self.redirect
            .borrow()
            .areas
            .get(device as usize)
            .map_or(0, |a| a.2.len())
    }

    /// Free p-area slots of the stream on `device` (0 without a p-area).
    pub fn free_slots(&self, device: u8) -> usize {
        self.redirect.borrow().free_slots(device)
    }

    /// Makes the home locations of the pages at `lbas` on the stream's
    /// device `device` current before the upper layer writes them outside
    /// the queue (a write that is not ordered cannot be redirected, and an
    /// older prepare write's commit would overwrite it): while the IPU tree
    /// holds one of them, a joint FLUSH of everything appended and a
    /// dequeue, which commits. Nothing (no IO, no MMIO) when none is
    /// redirected.
    pub async fn settle(&self, core: usize, device: u8, lbas: &[u64]) -> Result<(), DriverError> {
        loop {
            let held = {
                let rd = self.redirect.borrow();
                lbas.iter().any(|l| rd.tree.contains_key(&(device, *l)))
            };
            if !held {
                return Ok(());
            }
            self.flush(core).await?;
            self.dequeue(core).await?;
        }
    }

    /// Home blocks the commit writes of this mount wrote so far (eager and
    /// lazy alike; recovery's commits are [`super::HoraeRecovery`]'s).
    pub fn committed_blocks(&self) -> u64 {
        self.redirect.borrow().committed
    }

    /// Commits every prepare write: a joint FLUSH of everything appended,
    /// then a dequeue (before a clean shutdown, so that the home blocks
    /// hold everything without a recovery).
    pub async fn commit_all(&self, core: usize) -> Result<(), DriverError> {
        self.flush(core).await?;
        self.dequeue(core).await?;
        Ok(())
    }

    /// Reads `bio` (a read of whole pages) from the stream's device
    /// `device` through the IPU tree: each run of pages that sit together
    /// ([`OrderingQueue::read_location`]) is one read, all submitted, then
    /// waited for, on `core`'s queue. No slot is released while it runs.
    pub async fn read(&self, core: usize, device: u8, bio: &Bio) -> Result<(), DriverError> {
        let dev = self
            .devs
            .get(device as usize)
            .ok_or_else(|| DriverError::Invalid(format!("no device {device} in the stream")))?
            .clone();
        if bio.op != crate::BioOp::Read {
            return Err(DriverError::Invalid("OrderingQueue::read takes a read".into()));
        }
        let pp = (4096 / dev.info().lba_size.max(1)) as u64;
        let mut runs: Vec<(u64, Vec<pcie_sim::HostAddr>)> = Vec::new();
        for (i, &page) in bio.pages.iter().enumerate() {
            let at = self.read_location(device, bio.lba.0 + i as u64 * pp);
            match runs.last_mut() {
                Some((start, pages)) if *start + pages.len() as u64 * pp == at => pages.push(page),
                _ => runs.push((at, vec![page])),
            }
        }
        self.redirect.borrow_mut().readers += 1;
        let r = async {
            let mut sent = Vec::with_capacity(runs.len());
            for (lba, pages) in runs {
                sent.push(dev.submit(core, &Bio::read(lba, pages)).await?);
            }
            for done in &sent {
                let s = dev.wait(core, done).await;
                if !s.is_success() {
                    return Err(DriverError::Command(s));
                }
            }
            Ok(())
        }
        .await;
        self.redirect.borrow_mut().readers -= 1;
        self.progress.notify_waiters();
        r
    }
}
