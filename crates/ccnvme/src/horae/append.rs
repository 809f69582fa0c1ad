//! The append path: reserve slots, store the entries with persistent MMIO
//! writes (concurrently across threads), publish the tail in epoch order,
//! and make room in a full queue.

use pcie_sim::Core;

use super::layout::{self, RawEntry};
use super::{Epoch, OrderingQueue, Pending, Progress};

/// What [`OrderingQueue::reserve`] did.
enum Reserve {
    /// Reserved: first sequence number, epoch id, each write's slots.
    Done(u64, u64, Vec<Option<u64>>),
    /// A write going home overlaps a write in flight: wait for progress.
    Busy,
    /// No room in the queue or the p-area: make room.
    Full,
}
use crate::error::DriverError;
use crate::profile::EntryPersist;

/// One write of an epoch: `len` 4 KiB blocks at device block `lba`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OrderedWrite {
    /// First logical block (device LBA units).
    pub lba: u64,
    /// 4 KiB blocks.
    pub len: u32,
    /// The write overwrites live data in place (an IPU, Horae 5.4: the
    /// upper layer knows, as HoraeFS does from `BH_New`). On a stream with
    /// a p-area it is redirected ([`super::redirect`]): a prepare write to
    /// p-area slots (`plba`), committed home once durable, and recovery
    /// ignores it if discarded. Without a p-area its entry only carries the
    /// `ipu` bit and recovery never zero-fills it
    /// ([`layout`](super::layout) module documentation). Without it the
    /// blocks' old content must be dead (newly allocated blocks, journal
    /// blocks cleaned before reuse): a discard zero-fills them. A write
    /// that goes home waits for an earlier write of one of its blocks in
    /// flight ([`OrderingQueue::append_writes`]: Horae 5.4, "classic IO
    /// stacks handle dependency loops by prohibiting multiple in-progress
    /// IPU on the same address"); a redirected one does not.
    pub in_place: bool,
    /// The destination device: its index in the stream's device list
    /// (Figure 6's `devid`; 0 on a single-device stream).
    pub device: u8,
}

impl OrderedWrite {
    /// A write to device 0 whose blocks' old content is dead.
    pub fn fresh(lba: u64, len: u32) -> OrderedWrite {
        OrderedWrite {
            lba,
            len,
            in_place: false,
            device: 0,
        }
    }

    /// The same write to the stream's device `device`.
    pub fn on(self, device: u8) -> OrderedWrite {
        OrderedWrite { device, ..self }
    }
}

impl OrderingQueue {
    fn check_writes(&self, writes: &[OrderedWrite]) -> Result<(), DriverError> {
        if writes.is_empty() || writes.len() as u64 > self.layout.capacity as u64 {
            return Err(DriverError::Invalid(format!(
                "an epoch holds 1..={} writes, not {}",
                self.layout.capacity,
                writes.len()
            )));
        }
        for &OrderedWrite { lba, len, device, .. } in writes {
            let Some(dev) = self.devs.get(device as usize) else {
                return Err(DriverError::Invalid(format!(
                    "ordered write {lba}+{len} to device {device} of a stream over {}",
                    self.devs.len()
                )));
            };
            let info = dev.info();
            let per_page = 4096 / info.lba_size as u64;
            let end = (len as u64)
                .checked_mul(per_page)
                .and_then(|b| lba.checked_add(b));
            if len == 0 || lba > u32::MAX as u64 || end.is_none_or(|e| e > info.blocks) {
                return Err(DriverError::Invalid(format!(
                    "ordered write {lba}+{len} is empty, outside the device or past a 32-bit lba"
                )));
            }
        }
        Ok(())
    }

    /// Appends one epoch of independent writes `(lba, len in 4 KiB blocks)`
    /// to blocks whose old content is dead ([`OrderedWrite::fresh`]); see
    /// [`OrderingQueue::append_writes`].
    pub async fn append_epoch(&self, core: usize, writes: &[(u64, u32)]) -> Result<Epoch, DriverError> {
        let writes: Vec<OrderedWrite> = writes
            .iter()
            .map(|&(lba, len)| OrderedWrite::fresh(lba, len))
            .collect();
        self.append_writes(core, &writes).await
    }

    /// Appends one epoch of independent writes from a thread on `core`,
    /// and returns once its entries and the tail covering them are
    /// persistent (every earlier epoch's tail first). Charges
    /// [`DriverProfile::ordering_layer`](crate::DriverProfile::ordering_layer)
    /// per write. While the queue is full it dequeues, or swaps the queue
    /// to the stream's checkpoint region ([`super::swap`], Horae 5.2),
    /// or without one waits (flushing on a device with a volatile cache).
    ///
    /// A write that goes to its home blocks first waits until no earlier
    /// write to any of the same blocks that went home is in flight
    /// (appended or submitted, not completed). Without write redirection
    /// this is how a dependency loop is kept out (Horae 5.4: "classic IO
    /// stacks handle dependency loops by prohibiting multiple in-progress
    /// IPU on the same address"; Linux waits for a page's writeback before
    /// writing it again, `folio_wait_writeback`): two writes of one block
    /// in flight together could complete in either order and leave the
    /// older content on the device. A redirected write (on a stream with a
    /// p-area: an in-place write, or any write of a block the IPU tree
    /// holds) waits for nothing but free slots: it has slots of its own,
    /// and when the p-area is full the append dequeues, which commits
    /// (the eager commit write; [`super::redirect`]).
    pub async fn append_writes(&self, core: usize, writes: &[OrderedWrite]) -> Result<Epoch, DriverError> {
        self.check_writes(writes)?;
        let c = self.home().machine().core(core)?;
        let n = writes.len() as u64;
        c.busy(self.home().profile().ordering_layer * n).await;
        let (first, id, plbas) = loop {
            if let Some(why) = self.state.borrow().broken.clone() {
                return Err(DriverError::Invalid(why));
            }
            match self.reserve(writes)? {
                Reserve::Done(first, id, plbas) => break (first, id, plbas),
                Reserve::Busy => self.progress.notified().await,
                Reserve::Full => self.make_room(core).await?,
            }
        };
        let r = self.store_epoch(&c, first, writes, &plbas).await;
        if let Err(e) = r {
            self.state.borrow_mut().broken = Some(format!("an append failed: {e}"));
            self.published.notify_waiters();
            return Err(e);
        }
        Ok(Epoch {
            id,
            first,
            len: writes.len() as u32,
        })
    }

    /// True if a write in flight (appended or submitted, not completed or
    /// failed) and not redirected covers a block of the same device one of
    /// `writes` covers.
    fn overlaps_in_flight(&self, writes: &[&OrderedWrite]) -> bool {
        let span = |device: u8, lba: u64, len: u32| {
            let per_page = self
                .devs
                .get(device as usize)
                .map_or(1, |d| (4096 / d.info().lba_size.max(1)) as u64);
            (lba, lba + len as u64 * per_page)
        };
        let st = self.state.borrow();
        st.entries
            .iter()
            .filter(|p| matches!(p.progress, Progress::Appended | Progress::Submitted) && p.plba.is_none())
            .any(|p| {
                let (a0, a1) = span(p.device, p.lba, p.len);
                writes.iter().filter(|w| w.device == p.device).any(|w| {
                    let (b0, b1) = span(w.device, w.lba, w.len);
                    a0 < b1 && b0 < a1
                })
            })
    }

    /// Reserves queue slots for `writes`, and p-area slots for those
    /// redirected (an in-place write, or a write of a block the IPU tree
    /// holds, on a stream with a p-area: [`super::redirect`]), and records
    /// them in the IPU tree; all or nothing. [`Reserve::Busy`] if a write
    /// that goes home overlaps one in flight, [`Reserve::Full`] if the
    /// queue or the p-area has no room.
    fn reserve(&self, writes: &[OrderedWrite]) -> Result<Reserve, DriverError> {
        let mut rd = self.redirect.borrow_mut();
        let redirected: Vec<bool> = writes
            .iter()
            .map(|w| rd.enabled() && (w.in_place || rd.redirects(w.device, w.lba, w.len)))
            .collect();
        let home: Vec<&OrderedWrite> = writes
            .iter()
            .zip(&redirected)
            .filter(|(_, r)| !**r)
            .map(|(w, _)| w)
            .collect();
        if self.overlaps_in_flight(&home) {
            return Ok(Reserve::Busy);
        }
        let head = self.head();
        let n = writes.len() as u64;
        if self.swapping() {
            return Ok(Reserve::Full);
        }
        if self.state.borrow().reserved + n - head > self.layout.capacity as u64 {
            return Ok(Reserve::Full);
        }
        for d in 0..self.devs.len() as u8 {
            let need: u64 = writes
                .iter()
                .zip(&redirected)
                .filter(|(w, r)| **r && w.device == d)
                .map(|(w, _)| w.len as u64)
                .sum();
            if need > rd.slots(d) as u64 {
                return Err(DriverError::Invalid(format!(
                    "an epoch redirects {need} pages to device {d}, more than the stream's p-area ({} pages): split it",
                    rd.slots(d)
                )));
            }
        }
        let mut plbas: Vec<Option<u64>> = Vec::with_capacity(writes.len());
        for (w, r) in writes.iter().zip(&redirected) {
            let got = if *r {
                rd.allocate(w.device, w.len)
            } else {
                Ok(None)
            };
            match got {
                Ok(Some(p)) => plbas.push(Some(p)),
                Ok(None) if !*r => plbas.push(None),
                res => {
                    // Give back what this epoch took.
                    for (w, p) in writes.iter().zip(&plbas) {
                        if let Some(p) = p {
                            rd.unallocate(w.device, w.len, *p);
                        }
                    }
                    return res.map(|_| Reserve::Full);
                }
            }
        }
        for (w, p) in writes.iter().zip(&plbas) {
            if let Some(p) = p {
                rd.insert(w.device, w.lba, w.len, *p);
            }
        }
        let mut st = self.state.borrow_mut();
        let first = st.reserved;
        st.reserved += n;
        let id = st.next_epoch;
        st.next_epoch += 1;
        st.entries.extend(writes.iter().zip(&plbas).map(|(w, p)| Pending {
            lba: w.lba,
            len: w.len,
            device: w.device,
            plba: *p,
            progress: Progress::Appended,
        }));
        for (i, w) in writes.iter().enumerate() {
            let seq = first + i as u64;
            let r = &mut st.ranges[w.device as usize];
            *r = Some(r.map_or((seq, seq), |(a, _)| (a, seq)));
        }
        Ok(Reserve::Done(first, id, plbas))
    }

    /// Stores the entries of an epoch, waits for its turn, persists the tail.
    async fn store_epoch(
        &self,
        c: &Core,
        first: u64,
        writes: &[OrderedWrite],
        plbas: &[Option<u64>],
    ) -> Result<(), DriverError> {
        let entries: Vec<[u8; 16]> = writes
            .iter()
            .zip(plbas)
            .enumerate()
            .map(|(i, (w, p))| {
                RawEntry {
                    lba: w.lba as u32,
                    len: w.len,
                    devid: w.device,
                    etag: i == 0,
                    dr: false,
                    plba: p.map_or(layout::NO_PLBA, |p| p as u32),
                    ipu: w.in_place,
                    rsvd: 0,
                }
                .to_bytes()
            })
            .collect();
        match self.home().profile().horae_entry_persist {
            EntryPersist::PerEntry => {
                for (i, e) in entries.iter().enumerate() {
                    self.write(c, self.layout.slot(first + i as u64), e).await?;
                }
            }
            EntryPersist::PerEpoch => {
                // Contiguous slots as one burst; the ring wraps at most once
                // (an epoch holds at most `capacity` entries).
                let cap = self.layout.capacity as u64;
                let mut i = 0;
                while i < entries.len() {
                    let seq = first + i as u64;
                    let run = ((cap - seq % cap) as usize).min(entries.len() - i);
                    self.write(c, self.layout.slot(seq), &entries[i..i + run].concat())
                        .await?;
                    i += run;
                }
            }
        }
        loop {
            if self.tail() == first {
                break;
            }
            if let Some(why) = self.state.borrow().broken.clone() {
                return Err(DriverError::Invalid(why));
            }
            self.published.notified().await;
        }
        let end = first + writes.len() as u64;
        self.write(c, layout::TAIL, &end.to_le_bytes()).await?;
        self.published.notify_waiters();
        self.progress.notify_waiters();
        Ok(())
    }

    /// Frees room for an append: dequeue, swap to the checkpoint region
    /// (Horae 5.2, [`super::swap`]), or without one flush on a volatile
    /// cache or wait for progress.
    async fn make_room(&self, core: usize) -> Result<(), DriverError> {
        let head = self.head();
        if self.durable_point() > head {
            self.dequeue(core).await?;
            return Ok(());
        }
        if self.swap_for_room(core).await? {
            return Ok(());
        }
        // A failed write never becomes durable: the queue cannot drain.
        let stuck = self.state.borrow().entries.iter().find_map(|p| match p.progress {
            Progress::Failed(s) => Some(s),
            _ => None,
        });
        if let Some(s) = stuck {
            return Err(DriverError::Command(s));
        }
        let front_completed_volatile = self
            .state
            .borrow()
            .entries
            .front()
            .is_some_and(|p| p.progress == Progress::Completed && self.volatile[p.device as usize]);
        if front_completed_volatile {
            self.flush(core).await?;
            self.dequeue(core).await?;
            return Ok(());
        }
        self.progress.notified().await;
        Ok(())
    }
}
