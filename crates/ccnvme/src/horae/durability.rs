//! The durability path: data submission and completion (`dr` bits), the
//! joint FLUSH and the `flushed` pointer, and dequeue.

use std::rc::Rc;

use nvme_spec::completion::Status;

use super::layout;
use super::{EntryId, OrderingQueue, Progress, RawEntry};
use crate::bio::{Bio, BioOp, Done};
use crate::error::DriverError;

impl OrderingQueue {
    /// First sequence number not known durable: entries before `flushed`
    /// are, then (without a volatile cache) completed ones (`dr` set).
    pub(super) fn durable_point(&self) -> u64 {
        let (head, tail) = (self.head(), self.tail());
        let mut seq = head.max(self.flushed());
        if !self.volatile {
            let st = self.state.borrow();
            while seq < tail
                && st
                    .entries
                    .get((seq - head) as usize)
                    .is_some_and(|p| p.progress == Progress::Completed)
            {
                seq += 1;
            }
        }
        seq
    }

    /// Moves the persistent head over every entry whose data and all
    /// predecessors are durable; returns the head.
    pub async fn dequeue(&self, core: usize) -> Result<u64, DriverError> {
        let _g = self.head_lock.lock().await;
        let c = self.dev.machine().core(core)?;
        let head = self.head();
        let d = self.durable_point();
        if d > head {
            self.write(&c, layout::HEAD, &d.to_le_bytes()).await?;
            self.state.borrow_mut().entries.drain(..(d - head) as usize);
            self.progress.notify_waiters();
        }
        Ok(self.head())
    }

    /// Index of `id` in the entries, if it is appended and not dequeued.
    fn index(&self, id: EntryId) -> Result<usize, DriverError> {
        let head = self.head();
        if id.0 < head || id.0 >= self.tail() {
            return Err(DriverError::Invalid(format!(
                "entry {} is not in the queue",
                id.0
            )));
        }
        Ok((id.0 - head) as usize)
    }

    /// Submits the data write of entry `id` on `core`'s queue (it must
    /// write exactly the entry's blocks). The returned handle completes
    /// after [`OrderingQueue::complete`] ran for it (so, without a volatile
    /// cache, after its `dr` bit is persistent); wait for it with
    /// [`crate::BlockDevice::wait`].
    pub async fn submit(self: &Rc<Self>, core: usize, id: EntryId, bio: &Bio) -> Result<Done, DriverError> {
        {
            let i = self.index(id)?;
            let mut st = self.state.borrow_mut();
            let p = &mut st.entries[i];
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
        }
        let inner = match self.dev.submit(core, bio).await {
            Ok(d) => d,
            Err(e) => {
                if let Ok(i) = self.index(id) {
                    self.state.borrow_mut().entries[i].progress = Progress::Appended;
                }
                return Err(e);
            }
        };
        let outer = Done::new();
        let irq_core = self.dev.queue(core).core.index();
        let me = self.clone();
        let out = outer.clone();
        self.dev.machine().sim().spawn(async move {
            let s = inner.wait_raw().await;
            let s = match me.complete(irq_core, id, s).await {
                Ok(()) => s,
                Err(_) => Status::INTERNAL_ERROR,
            };
            out.complete(s);
        });
        Ok(outer)
    }

    /// Reports the completion of entry `id`'s data write, on the core that
    /// handles it. Without a volatile cache a successful write is durable:
    /// its `dr` bit is set with a persistent 8-byte MMIO write first.
    pub async fn complete(&self, core: usize, id: EntryId, status: Status) -> Result<(), DriverError> {
        let i = self.index(id)?;
        let p = self.state.borrow().entries[i].progress;
        if !matches!(p, Progress::Appended | Progress::Submitted) {
            return Err(DriverError::Invalid(format!("entry {} already completed", id.0)));
        }
        let progress = if !status.is_success() {
            Progress::Failed(status)
        } else {
            if !self.volatile {
                let c = self.dev.machine().core(core)?;
                let e = RawEntry {
                    dr: true,
                    ..self.entry(id)
                };
                self.write(&c, self.layout.slot(id.0) + 8, &e.high_word()).await?;
            }
            Progress::Completed
        };
        let i = self.index(id)?;
        self.state.borrow_mut().entries[i].progress = progress;
        self.progress.notify_waiters();
        Ok(())
    }

    /// The joint FLUSH (one device, H7): waits until every entry appended
    /// so far has completed, sends one Flush through the block layer
    /// (dropped there without a volatile cache: Horae's sync flush on PLP
    /// devices), then persists `flushed` at the tail it saw. A failed
    /// write in the range gives its status and moves nothing.
    pub async fn flush(&self, core: usize) -> Result<(), DriverError> {
        self.flush_through(core, self.tail()).await
    }

    /// The joint FLUSH up to sequence number `end` (exclusive; at most the
    /// tail): as [`OrderingQueue::flush`], but it waits only for the
    /// entries before `end`, so a flush stage that makes one transaction
    /// durable does not wait for the writes of the transactions dispatched
    /// after it (Horae 5.3: the flush point). Nothing to do when `flushed`
    /// is already past `end`.
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
            let mut waiting = false;
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
        self.dev.submit_wait(core, &Bio::flush()).await?;
        let c = self.dev.machine().core(core)?;
        self.write(&c, layout::FLUSHED, &target.to_le_bytes()).await?;
        self.progress.notify_waiters();
        Ok(())
    }
}
