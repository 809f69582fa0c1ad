//! The durability path: data submission and completion (`dr` bits), the
//! joint FLUSH over the stream's devices and the `flushed` pointer, and
//! dequeue.

use std::rc::Rc;

use nvme_spec::completion::Status;

use super::layout;
use super::redirect;
use super::{EntryId, OrderingQueue, Progress, RawEntry};
use crate::bio::{Bio, BioOp, Done};
use crate::error::DriverError;
use crate::profile::FlushIssue;

impl OrderingQueue {
    /// First sequence number not known durable: entries before `flushed`
    /// are, then completed ones on devices without a volatile cache (`dr`
    /// set).
    pub(super) fn durable_point(&self) -> u64 {
        if let Some(s) = self.swapped_not_durable() {
            // A swapped entry is durable once `flushed` passes it (swap.rs).
            return s;
        }
        let (head, tail) = (self.head(), self.tail());
        let mut seq = head.max(self.flushed());
        let st = self.state.borrow();
        while seq < tail
            && st
                .entries
                .get((seq - head) as usize)
                .is_some_and(|p| p.progress == Progress::Completed && !self.volatile[p.device as usize])
        {
            seq += 1;
        }
        seq
    }

    /// Moves the persistent head over every entry whose data and all
    /// predecessors are durable (swapped ones first: they leave the
    /// checkpoint region; a swapped entry is never a prepare write, see
    /// [`super::swap`]); returns the head. The prepare writes among them
    /// are committed first (the commit write, [`super::redirect`]):
    /// merged, copied to their home blocks and flushed, then the head
    /// moves, then their tree entries and slots are released.
    pub async fn dequeue(&self, core: usize) -> Result<u64, DriverError> {
        let _g = self.head_lock.lock().await;
        self.drain_swapped();
        let c = self.home().machine().core(core)?;
        let head = self.head();
        let d = self.durable_point();
        if d > head {
            let prepare: Vec<redirect::PrepareWrite> = self
                .state
                .borrow()
                .entries
                .iter()
                .take((d - head) as usize)
                .filter_map(|p| p.plba.map(|pl| (p.device, p.lba, pl, p.len)))
                .collect();
            if !prepare.is_empty() {
                let merged = redirect::merge(&prepare, &self.devs);
                redirect::copy_home(&self.devs, core, &merged).await?;
                self.redirect.borrow_mut().committed += merged.len() as u64;
            }
            self.write(&c, layout::HEAD, &d.to_le_bytes()).await?;
            let gone: Vec<_> = self
                .state
                .borrow_mut()
                .entries
                .drain(..(d - head) as usize)
                .collect();
            self.progress.notify_waiters();
            while self.redirect.borrow().readers > 0 {
                self.progress.notified().await;
            }
            let mut rd = self.redirect.borrow_mut();
            for p in gone {
                if let Some(pl) = p.plba {
                    rd.release(p.device, p.lba, p.len, pl);
                }
            }
            drop(rd);
            self.progress.notify_waiters();
        }
        Ok(self.head())
    }

    /// The lazy commit write (Horae 5.4: "performed in background when the
    /// IO stack is idle"): after a joint FLUSH, if no write of the stream is
    /// in flight and a durable entry is a prepare write, a background task
    /// on `core` dequeues (so commits). A failure there is left for the
    /// next dequeue, which meets it again.
    fn lazy_commit(&self, core: usize) {
        let head = self.head();
        let d = self.durable_point();
        let (idle, prepared) = {
            let st = self.state.borrow();
            (
                !st.entries
                    .iter()
                    .any(|p| matches!(p.progress, Progress::Appended | Progress::Submitted)),
                // A swapped entry not yet durable holds the durable point
                // below the head (`durable_point`): then nothing in the
                // ring is durable yet.
                st.entries
                    .iter()
                    .take(d.saturating_sub(head) as usize)
                    .any(|p| p.plba.is_some()),
            )
        };
        if let (true, true, Some(me)) = (idle, prepared, self.me.upgrade()) {
            self.home().machine().sim().spawn(async move {
                let _ = me.dequeue(core).await;
            });
        }
    }

    /// Index of `id` in the entries, if it is appended and not dequeued
    /// (nor swapped).
    pub(super) fn index(&self, id: EntryId) -> Result<usize, DriverError> {
        let head = self.head();
        if id.0 < head || id.0 >= self.tail() {
            return Err(DriverError::Invalid(format!(
                "entry {} is not in the queue",
                id.0
            )));
        }
        Ok((id.0 - head) as usize)
    }

    /// Submits the data write of entry `id` (it must write exactly the
    /// entry's blocks). With background submitters
    /// ([`super::StreamParams::submitters`], Horae 6.2) the bio is handed
    /// to the one of `core` and this returns at once; otherwise, or when the submitter's
    /// ring is full, it goes through the block layer here, on `core`'s
    /// queue of the entry's device (Horae's data path: any hardware queue
    /// of any device). The returned handle completes after
    /// [`OrderingQueue::complete`] ran for it (so, without a volatile
    /// cache, after its `dr` bit is persistent); wait for it with
    /// [`crate::BlockDevice::wait`]. A write the submitter fails to send
    /// completes its handle with the error's status (the entry is then
    /// failed, as one the device failed).
    /// A redirected entry's bio goes to its p-area slots instead (the
    /// prepare write, [`super::redirect`]).
    pub async fn submit(self: &Rc<Self>, core: usize, id: EntryId, bio: &Bio) -> Result<Done, DriverError> {
        let (device, plba) = self.with_pending(id, |p| {
            if bio.op != BioOp::Write || bio.lba.0 != p.lba || bio.blocks() != p.len as u64 {
                return Err(DriverError::Invalid(format!(
                    "bio does not write entry {}'s blocks {}+{}",
                    id.0, p.lba, p.len
                )));
            }
            if p.progress != Progress::Appended {
                return Err(DriverError::Invalid(format!(
                    "entry {} was already submitted",
                    id.0
                )));
            }
            p.progress = Progress::Submitted;
            Ok((p.device as usize, p.plba))
        })??;
        let redirected = plba.map(|pl| Bio {
            lba: crate::bio::Lba(pl),
            ..bio.clone()
        });
        let Some(which) = core
            .checked_rem(self.submitters.len())
            .filter(|&i| self.submitters[i].enqueue())
        else {
            return self
                .dispatch(core, id, device, redirected.as_ref().unwrap_or(bio))
                .await;
        };
        // The submitter owns the bio it sends later.
        let bio = redirected.unwrap_or_else(|| bio.clone());
        let outer = Done::new();
        let (me, out, sub_core) = (self.clone(), outer.clone(), self.submitters[which].core);
        self.home().machine().sim().spawn(async move {
            let sent = {
                let sub = &me.submitters[which];
                let _busy = sub.turn().await;
                sub.leave();
                me.dispatch(sub_core, id, device, &bio).await
            };
            let s = match sent {
                Ok(d) => d.wait_raw().await,
                Err(e) => {
                    let s = match e {
                        DriverError::Command(s) => s,
                        _ => Status::INTERNAL_ERROR,
                    };
                    // Back to Appended by `dispatch`: fail it as the device
                    // would have.
                    let _ = me.complete(sub_core, id, s).await;
                    s
                }
            };
            out.complete(s);
        });
        Ok(outer)
    }

    /// Sends entry `id`'s data bio (on `device`, its blocks or p-area
    /// slots) through the block layer on `core`'s queue, and completes the
    /// entry when the write does; on an error the entry is back to
    /// appended.
    async fn dispatch(
        self: &Rc<Self>,
        core: usize,
        id: EntryId,
        device: usize,
        bio: &Bio,
    ) -> Result<Done, DriverError> {
        let dev = &self.devs[device];
        if self.home().profile().faults.horae_early_dr && !self.volatile[device] {
            // Fault: the `dr` bit says durable before the write completed.
            let c = self.home().machine().core(core)?;
            self.set_dr(&c, id).await?;
        }
        let inner = match dev.submit(core, bio).await {
            Ok(d) => d,
            Err(e) => {
                let _ = self.with_pending(id, |p| p.progress = Progress::Appended);
                return Err(e);
            }
        };
        let outer = Done::new();
        let irq_core = dev.queue(core).core.index();
        let me = self.clone();
        let out = outer.clone();
        dev.machine().sim().spawn(async move {
            let s = inner.wait_raw().await;
            let s = match me.complete(irq_core, id, s).await {
                Ok(()) => s,
                Err(_) => Status::INTERNAL_ERROR,
            };
            out.complete(s);
        });
        Ok(outer)
    }

    /// Sets entry `id`'s `dr` bit with a persistent 8-byte MMIO write;
    /// nothing for a swapped entry (its slot may hold another entry: its
    /// durability is `flushed`'s, see swap.rs).
    async fn set_dr(&self, c: &pcie_sim::Core, id: EntryId) -> Result<(), DriverError> {
        if !self.dr_write_begin(id.0) {
            return Ok(());
        }
        let e = RawEntry {
            dr: true,
            ..self.entry(id)
        };
        let r = self.write(c, self.layout.slot(id.0) + 8, &e.high_word()).await;
        self.dr_write_end();
        r
    }

    /// Reports the completion of entry `id`'s data write, on the core that
    /// handles it. On a device without a volatile cache a successful write
    /// is durable: its `dr` bit is set with a persistent 8-byte MMIO write
    /// first.
    pub async fn complete(&self, core: usize, id: EntryId, status: Status) -> Result<(), DriverError> {
        let (p, device) = self.with_pending(id, |p| (p.progress, p.device as usize))?;
        if !matches!(p, Progress::Appended | Progress::Submitted) {
            return Err(DriverError::Invalid(format!("entry {} already completed", id.0)));
        }
        let progress = if !status.is_success() {
            Progress::Failed(status)
        } else {
            if !self.volatile[device] && !self.entry(id).dr {
                let c = self.home().machine().core(core)?;
                self.set_dr(&c, id).await?;
            }
            Progress::Completed
        };
        self.with_pending(id, |p| p.progress = progress)?;
        self.progress.notify_waiters();
        Ok(())
    }

    /// The joint FLUSH of everything appended so far (Horae 5.3,
    /// `docs/decisions.md` H7): [`OrderingQueue::flush_through`] the tail.
    pub async fn flush(&self, core: usize) -> Result<(), DriverError> {
        self.flush_through(core, self.tail()).await
    }

    /// `olayer_blkdev_issue_flush(bdev, .., sid)` (Horae Table 1, Figure
    /// 7): the joint FLUSH asked for device `device` of the stream. The
    /// flush point is the position after the device's last entry not yet
    /// flushed; [`OrderingQueue::flush_through`] it. Nothing to do if the
    /// device has no such entry.
    pub async fn flush_device(&self, core: usize, device: u8) -> Result<(), DriverError> {
        let range = *self
            .state
            .borrow()
            .ranges
            .get(device as usize)
            .ok_or_else(|| DriverError::Invalid(format!("no device {device} in the stream")))?;
        match range {
            Some((_, last)) => self.flush_through(core, last + 1).await,
            None => Ok(()),
        }
    }

    /// The devices a joint FLUSH up to `end` must flush (Horae 5.3: "a
    /// device should be flushed if it has requests prior to the flush
    /// point"): those whose device range intersects `[flushed, end)`.
    pub fn flush_candidates(&self, end: u64) -> Vec<u8> {
        let from = self.flushed();
        let st = self.state.borrow();
        st.ranges
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_some_and(|(a, b)| a < end && b >= from))
            .map(|(d, _)| d as u8)
            .collect()
    }

    /// The joint FLUSH up to sequence number `end` (exclusive; at most the
    /// tail; Horae 5.3, Figure 7). It waits until every entry before `end`
    /// has completed (a failed one gives its status and moves nothing),
    /// picks the candidate devices ([`OrderingQueue::flush_candidates`]),
    /// submits one NVMe Flush to each of them at once and waits for all
    /// (one after another with [`crate::FlushIssue::Serialized`])
    /// (the block layer completes it at once on a device without a
    /// volatile cache: Horae's sync flush on PLP devices), then persists
    /// `flushed` := `end` and trims the device ranges to what lies past
    /// `end`. A flush stage that makes one transaction durable thus does
    /// not wait for the writes of the transactions dispatched after it
    /// (the flush point; `docs/decisions.md` H10). Nothing to do when
    /// `flushed` is already past `end`.
    pub async fn flush_through(&self, core: usize, end: u64) -> Result<(), DriverError> {
        let _g = self.flush_lock.lock().await;
        if end > self.tail() {
            return Err(DriverError::Invalid(format!(
                "flush point {end} is past the tail {}",
                self.tail()
            )));
        }
        let target = end;
        if target <= self.flushed() {
            return Ok(());
        }
        loop {
            let head = self.head();
            let from = head.max(self.flushed());
            let mut waiting = self.swapped_in_flight(target)?;
            {
                let st = self.state.borrow();
                for seq in from..target {
                    match st.entries.get((seq - head) as usize).map(|p| p.progress) {
                        Some(Progress::Failed(s)) => return Err(DriverError::Command(s)),
                        Some(Progress::Completed) | None => {}
                        Some(_) => waiting = true,
                    }
                }
            }
            if !waiting {
                break;
            }
            self.progress.notified().await;
        }
        let mut candidates = self.flush_candidates(target);
        if self.home().profile().faults.horae_no_joint_flush && candidates.len() > 1 {
            // Fault: flush only the device of the last entry before the
            // flush point, as a per-device FLUSH would.
            let last = self.last_device_before(target);
            candidates.retain(|&d| Some(d) == last);
        }
        match self.home().profile().horae_flush {
            FlushIssue::Joint => {
                let mut sent = Vec::with_capacity(candidates.len());
                for &d in &candidates {
                    let dev = &self.devs[d as usize];
                    sent.push((dev, dev.submit(core, &Bio::flush()).await?));
                }
                for (dev, done) in &sent {
                    let s = dev.wait(core, done).await;
                    if !s.is_success() {
                        return Err(DriverError::Command(s));
                    }
                }
            }
            FlushIssue::Serialized => {
                for &d in &candidates {
                    self.devs[d as usize].submit_wait(core, &Bio::flush()).await?;
                }
            }
        }
        let c = self.home().machine().core(core)?;
        self.write(&c, layout::FLUSHED, &target.to_le_bytes()).await?;
        self.trim_ranges(target);
        self.progress.notify_waiters();
        self.lazy_commit(core);
        Ok(())
    }

    /// After a joint FLUSH up to `target`: each device range keeps only
    /// the entries at or past `target` (its first one found in the queue),
    /// or is reset if it has none (Horae Figure 7b).
    fn trim_ranges(&self, target: u64) {
        let head = self.head();
        let mut st = self.state.borrow_mut();
        let first_from = |st: &super::State, d: usize| {
            let skip = target.saturating_sub(head) as usize;
            self.swapped_first_of(d, target).or_else(|| {
                st.entries
                    .iter()
                    .skip(skip)
                    .position(|p| p.device as usize == d)
                    .map(|i| head.max(target) + i as u64)
            })
        };
        for d in 0..st.ranges.len() {
            st.ranges[d] = match st.ranges[d] {
                Some((a, b)) if b >= target => Some((first_from(&st, d).unwrap_or(a.max(target)), b)),
                _ => None,
            };
        }
    }

    /// The device of the entry just before `end`, if it is still queued.
    fn last_device_before(&self, end: u64) -> Option<u8> {
        let head = self.head();
        let seq = end.checked_sub(1)?;
        if seq < head {
            return self.swapped_device(seq);
        }
        self.state
            .borrow()
            .entries
            .get((seq - head) as usize)
            .map(|p| p.device)
    }
}
