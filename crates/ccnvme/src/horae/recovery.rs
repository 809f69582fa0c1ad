//! Recovery of the ordering queue after a power failure (Horae 5.5).
//!
//! The region is read through MMIO (the DRAM mirror died with the host):
//! the whole ring, as HoRAE's released module loads it, or only the slots
//! from head to tail ([`crate::RegionLoad`], `docs/decisions.md` H19).
//! Entries from head up to `flushed` are durable (a FLUSH completed after
//! their data did); from `flushed` forward, entries are durable while their
//! `dr` bit is set. The first entry with `dr` = 0 may have lost data, and
//! every entry after it may hold data that reached the media before data it
//! depends on: that entry and all the following ones violate the order, and
//! their blocks are filled with zeros, in queue order, by
//! [`HoraeRecovery::discard_and_reset`] (Horae: "discards the following data
//! blocks through filling the blocks with zeros"). Before that, the
//! prepare writes of the durable entries are committed (Horae 5.5: "HORAE
//! commits the data blocks of the p-area that obey the order", from head to
//! `flushed`, then "commits the prepare writes until it finds a non-durable
//! data block"), and a discarded prepare write is ignored: its home block
//! keeps its old content ([`super::redirect`]). So recovery never
//! zero-fills live data: neither a redirected write nor, on a stream
//! without a p-area, an in-place write going home with the `ipu` bit (its
//! block holds old or new content).
//!
//! A stream with a checkpoint region (given in [`StreamParams`], as at
//! init) has its swapped entries there: they are read first, in order,
//! and the same rules run over the whole sequence ([`super::swap`]).
//!
//! A stream over several devices ([`recover_stream`]) is one queue: the
//! scan is the same, each entry's blocks are on the device its `devid`
//! names, and the discard writes each device's blocks on that device and
//! flushes every device it wrote.
//!
//! Anything that does not make sense (pointers out of range, an entry of
//! length 0, past its device, for a device the stream does not have, with
//! reserved bits or a prepare write past its device) is [`DriverError::CorruptPsq`] with queue
//! [`super::ORDERING_QUEUE_ID`]; a region without the magic is
//! [`DriverError::NoLayout`]. Nothing is written in either case.

use std::rc::Rc;

use super::ORDERING_QUEUE;

use super::layout::{self, Geometry, RawEntry, RegionLayout};
use super::redirect::{self, PrepareWrite};
use super::StreamParams;
use super::{corrupt, persist, read_region_head, region_of, ATTR};
use crate::bio::Bio;
use crate::device::BlockDevice;
use crate::error::DriverError;
use crate::profile::RegionLoad;

/// One entry found in the queue at recovery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderingEntry {
    /// Sequence number (slot = seq % capacity).
    pub seq: u64,
    /// First logical block.
    pub lba: u64,
    /// 4 KiB blocks.
    pub len: u32,
    /// First entry of an epoch.
    pub etag: bool,
    /// `dr` bit.
    pub dr: bool,
    /// `ipu` bit: an in-place write, whose blocks a discard keeps.
    pub in_place: bool,
    /// `devid`: the entry's device, by index in the stream's device list.
    pub device: u8,
    /// `plba`: the p-area slots of a prepare write (a redirected write,
    /// [`super::redirect`]), `None` for a write that went home.
    pub plba: Option<u64>,
}

/// What [`recover`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HoraeRecovery {
    /// The region.
    pub layout: RegionLayout,
    /// Which stream, over how many devices.
    pub geometry: Geometry,
    /// Persistent head.
    pub head: u64,
    /// Persistent `flushed` pointer.
    pub flushed: u64,
    /// Persistent tail.
    pub tail: u64,
    /// Entries read from the checkpoint region (swapped, Horae 5.2; they
    /// come first in `durable` and `discard`, see [`super::swap`]).
    pub from_checkpoint: u64,
    /// Entries whose data is durable and in order, in queue order: their
    /// prepare writes are to be committed.
    pub durable: Vec<OrderingEntry>,
    /// The first entry past `flushed` with `dr` = 0 and every later entry,
    /// in queue order: they violate the order; the blocks of those neither
    /// `in_place` nor redirected are to be discarded, prepare writes are
    /// ignored.
    pub discard: Vec<OrderingEntry>,
}

impl HoraeRecovery {
    /// The `(lba, len in 4 KiB blocks)` ranges to zero-fill, in queue
    /// order: the discarded entries that are not in-place writes (of
    /// every device: see [`HoraeRecovery::discard_ranges_of`]).
    pub fn discard_ranges(&self) -> Vec<(u64, u32)> {
        self.discard
            .iter()
            .filter(|e| !e.in_place && e.plba.is_none())
            .map(|e| (e.lba, e.len))
            .collect()
    }

    /// [`HoraeRecovery::discard_ranges`] with each range's device.
    pub fn discard_ranges_of(&self) -> Vec<(u8, u64, u32)> {
        self.discard
            .iter()
            .filter(|e| !e.in_place && e.plba.is_none())
            .map(|e| (e.device, e.lba, e.len))
            .collect()
    }

    /// The durable prepare writes to commit, in queue order: (device, home
    /// LBA, slot LBA, pages) (Horae 5.5: "commits the data blocks of the
    /// p-area that obey the order").
    pub fn commits(&self) -> Vec<PrepareWrite> {
        self.durable
            .iter()
            .filter_map(|e| e.plba.map(|p| (e.device, e.lba, p, e.len)))
            .collect()
    }

    /// Sequence number of the first violated entry (the tail if none).
    pub fn durable_point(&self) -> u64 {
        self.discard.first().map_or(self.tail, |e| e.seq)
    }

    /// Commits the durable prepare writes ([`HoraeRecovery::commits`],
    /// merged newest first and copied home with the runtime commit's
    /// [`redirect::merge`] and [`redirect::copy_home`], which flushes),
    /// then zero-fills the [`HoraeRecovery::discard_ranges`] through the
    /// block device on `core`, one write at a time in queue order (split
    /// at the maximum transfer), flushes (dropped without a volatile
    /// cache), then empties the queue durably: head := tail (one
    /// persistent write makes it empty), then `flushed` := tail. Running it
    /// again after a crash half-way is safe: until the head moves, the
    /// queue and the p-area slots are as they were, and the commit and
    /// the zero-fill write the same blocks again. The fault
    /// `horae_no_redirect_commit` (of the first device's profile) skips
    /// the commit.
    /// For the single stream of one device; [`HoraeRecovery::discard_and_reset_all`]
    /// for a stream of several.
    pub async fn discard_and_reset(&self, dev: &Rc<BlockDevice>, core: usize) -> Result<(), DriverError> {
        self.discard_and_reset_all(std::slice::from_ref(dev), core).await
    }

    /// [`HoraeRecovery::discard_and_reset`] for the stream over `devs` (the
    /// list [`recover_stream`] read it with): each range is zero-filled on
    /// its device, then every device written is flushed, then the queue
    /// on the first device is emptied.
    pub async fn discard_and_reset_all(
        &self,
        devs: &[Rc<BlockDevice>],
        core: usize,
    ) -> Result<(), DriverError> {
        let home = devs
            .first()
            .ok_or_else(|| DriverError::Invalid("recovery without a device".into()))?;
        let (pmr, free) = region_of(home)?;
        let slice = RegionLayout::for_stream(
            free,
            home.info().pmr_bytes,
            self.geometry.stream,
            self.geometry.streams,
            None,
        );
        if slice.map(|l| l.start) != Some(self.layout.start) || devs.len() != self.geometry.devices as usize {
            return Err(DriverError::Invalid("recovery of another region".into()));
        }
        let start = self.layout.start;
        if !home.profile().faults.horae_no_redirect_commit {
            redirect::copy_home(devs, core, &redirect::merge(&self.commits(), devs)).await?;
        }
        let ranges = self.discard_ranges_of();
        if !ranges.is_empty() {
            let mem = home.machine().memory();
            let zero = mem.alloc(4096)?;
            mem.fill(zero, 4096, 0)?;
            let mut written = vec![false; devs.len()];
            let mut r = Ok(());
            'all: for &(d, lba, len) in &ranges {
                let dev = &devs[d as usize];
                written[d as usize] = true;
                let per_page = 4096 / dev.info().lba_size as u64;
                let chunk = (dev.info().max_transfer / 4096).clamp(1, 1 << 16);
                let mut off = 0u64;
                while off < len as u64 {
                    let k = chunk.min(len as u64 - off);
                    let bio = Bio::write(lba + off * per_page, vec![zero; k as usize]);
                    r = dev.submit_wait(core, &bio).await;
                    if r.is_err() {
                        break 'all;
                    }
                    off += k;
                }
            }
            for (dev, _) in devs.iter().zip(&written).filter(|(_, w)| **w) {
                if r.is_ok() {
                    r = dev.submit_wait(core, &Bio::flush()).await;
                }
            }
            mem.free(zero)?;
            r?;
        }
        let c = home.machine().core(core)?;
        let faults = &home.profile().faults;
        persist(&c, pmr, start + layout::HEAD, &self.tail.to_le_bytes(), faults).await?;
        persist(&c, pmr, start + layout::FLUSHED, &self.tail.to_le_bytes(), faults).await?;
        Ok(())
    }
}

/// Reads the ordering queue of `dev` (probed with `horae: true`) and
/// classifies its entries; writes nothing. The single stream of one
/// device: [`recover_stream`] with stream 0 of 1 on `dev`.
pub async fn recover(dev: &Rc<BlockDevice>) -> Result<HoraeRecovery, DriverError> {
    recover_stream(std::slice::from_ref(dev), StreamParams::SINGLE).await
}

/// Reads the ordering queue of stream `params` over `devs` (each probed
/// with `horae: true`; the queue is in the first one's PMR) and classifies
/// its entries; writes nothing. A header of another geometry (device
/// count, stream, stream count) is [`DriverError::Invalid`].
pub async fn recover_stream(
    devs: &[Rc<BlockDevice>],
    params: StreamParams,
) -> Result<HoraeRecovery, DriverError> {
    let (dev, geometry) = params.check(devs)?;
    let (pmr, free) = region_of(dev)?;
    let info = dev.info();
    let start = RegionLayout::for_stream(free, info.pmr_bytes, params.stream, params.streams, None)
        .ok_or(DriverError::NoLayout)?
        .start;
    let core = dev.machine().core(0)?;
    let (l, g, [head, flushed, tail]) = read_region_head(&core, pmr, start, info.pmr_bytes)
        .await?
        .ok_or(DriverError::NoLayout)?;
    if g != geometry {
        return Err(DriverError::Invalid(format!(
            "the region holds stream geometry {g:?}, not {geometry:?}"
        )));
    }
    let mut out = HoraeRecovery {
        layout: l,
        geometry,
        head,
        flushed,
        tail,
        from_checkpoint: 0,
        durable: Vec::new(),
        discard: Vec::new(),
    };
    if let Some(region) = params.checkpoint {
        // The swapped entries come first, in order (Horae 5.2, 5.5).
        let swapped = super::swap::read_checkpoint(dev, region, geometry, head, flushed, tail).await?;
        out.from_checkpoint = swapped.len() as u64;
        for (seq, e) in swapped {
            admit(&mut out, devs, seq, e)?;
        }
    }
    // The whole ring into a DRAM copy (HoRAE's released module), or, for
    // crash exploration, only the live slots ([`RegionLoad`]).
    let ring = match dev.profile().horae_recovery_load {
        RegionLoad::Whole => {
            let mut ring = vec![0u8; (l.capacity as u64 * layout::ENTRY_BYTES) as usize];
            for (k, chunk) in ring.chunks_mut(4096).enumerate() {
                core.mmio_read(
                    pmr + start + l.slot(0) + k as u64 * 4096,
                    chunk,
                    ORDERING_QUEUE,
                    ATTR,
                )
                .await?;
            }
            Some(ring)
        }
        RegionLoad::Live => None,
    };
    let mut seq = head;
    let mut buf = vec![0u8; 4096];
    while seq < tail {
        // A run of contiguous slots, at most 4 KiB per read.
        let first_slot = seq % l.capacity as u64;
        let n = (tail - seq)
            .min(l.capacity as u64 - first_slot)
            .min(4096 / layout::ENTRY_BYTES);
        let len = (n * layout::ENTRY_BYTES) as usize;
        let bytes: &[u8] = match &ring {
            Some(ring) => {
                let at = (first_slot * layout::ENTRY_BYTES) as usize;
                &ring[at..at + len]
            }
            None => {
                let bytes = &mut buf[..len];
                core.mmio_read(pmr + start + l.slot(seq), bytes, ORDERING_QUEUE, ATTR)
                    .await?;
                bytes
            }
        };
        for raw in bytes.chunks_exact(layout::ENTRY_BYTES as usize) {
            let mut b = [0u8; 16];
            b.copy_from_slice(raw);
            admit(&mut out, devs, seq, RawEntry::from_bytes(&b))?;
            seq += 1;
        }
    }
    Ok(out)
}

/// Checks entry `seq` and classifies it (Horae 5.5): durable while every
/// entry so far is (before `flushed`, or `dr` set), else to discard.
fn admit(
    out: &mut HoraeRecovery,
    devs: &[Rc<BlockDevice>],
    seq: u64,
    e: RawEntry,
) -> Result<(), DriverError> {
    let flushed = out.flushed;
    let target = devs.get(e.devid as usize).map(|d| d.info());
    let slots_past = target.filter(|t| {
        e.plba != layout::NO_PLBA && e.plba as u64 + e.len as u64 * (4096 / t.lba_size as u64) > t.blocks
    });
    let bad = if e.len == 0 {
        Some("length 0".to_string())
    } else if let Some(t) =
        target.filter(|t| e.lba as u64 + e.len as u64 * (4096 / t.lba_size as u64) > t.blocks)
    {
        Some(format!(
            "blocks {}+{} past the device ({}: {} blocks)",
            e.lba, e.len, e.devid, t.blocks
        ))
    } else if target.is_none() {
        Some(format!("device {} unknown", e.devid))
    } else if e.rsvd != 0 {
        Some("reserved bits set".to_string())
    } else {
        slots_past.map(|t| {
            format!(
                "prepare write at {}+{} past the device ({} blocks)",
                e.plba, e.len, t.blocks
            )
        })
    };
    if let Some(why) = bad {
        return Err(corrupt(format!("entry {seq}: {why}")));
    }
    let entry = OrderingEntry {
        seq,
        lba: e.lba as u64,
        len: e.len,
        etag: e.etag,
        dr: e.dr,
        in_place: e.ipu,
        device: e.devid,
        plba: (e.plba != layout::NO_PLBA).then_some(e.plba as u64),
    };
    if out.discard.is_empty() && (seq < flushed || e.dr) {
        out.durable.push(entry);
    } else {
        out.discard.push(entry);
    }
    Ok(())
}
