//! The append path: reserve slots, store the entries with persistent MMIO
//! writes (concurrently across threads), publish the tail in epoch order,
//! and make room in a full queue.

use pcie_sim::Core;

use super::layout::{self, RawEntry};
use super::{Epoch, OrderingQueue, Pending, Progress, ORDERING_LAYER_COST};
use crate::error::DriverError;

impl OrderingQueue {
    fn check_writes(&self, writes: &[(u64, u32)]) -> Result<(), DriverError> {
        if writes.is_empty() || writes.len() as u64 > self.layout.capacity as u64 {
            return Err(DriverError::Invalid(format!(
                "an epoch holds 1..={} writes, not {}",
                self.layout.capacity,
                writes.len()
            )));
        }
        let info = self.dev.info();
        let per_page = 4096 / info.lba_size as u64;
        for &(lba, len) in writes {
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
    /// from a thread on `core`, and returns once its entries and the tail
    /// covering them are persistent (every earlier epoch's tail first).
    /// Charges [`ORDERING_LAYER_COST`] per write. Waits (dequeueing, and
    /// flushing on a device with a volatile cache) while the queue is full.
    pub async fn append_epoch(&self, core: usize, writes: &[(u64, u32)]) -> Result<Epoch, DriverError> {
        self.check_writes(writes)?;
        let c = self.dev.machine().core(core)?;
        let n = writes.len() as u64;
        c.busy(ORDERING_LAYER_COST * n).await;
        let (first, id) = loop {
            if let Some(why) = self.state.borrow().broken.clone() {
                return Err(DriverError::Invalid(why));
            }
            if let Some(r) = self.reserve(writes) {
                break r;
            }
            self.make_room(core).await?;
        };
        let r = self.store_epoch(&c, first, writes).await;
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

    /// Reserves slots for `writes` if they fit: (first sequence, epoch id).
    fn reserve(&self, writes: &[(u64, u32)]) -> Option<(u64, u64)> {
        let head = self.head();
        let n = writes.len() as u64;
        let mut st = self.state.borrow_mut();
        if st.reserved + n - head > self.layout.capacity as u64 {
            return None;
        }
        let first = st.reserved;
        st.reserved += n;
        let id = st.next_epoch;
        st.next_epoch += 1;
        st.entries.extend(writes.iter().map(|&(lba, len)| Pending {
            lba,
            len,
            progress: Progress::Appended,
        }));
        Some((first, id))
    }

    /// Stores the entries of an epoch, waits for its turn, persists the tail.
    async fn store_epoch(&self, c: &Core, first: u64, writes: &[(u64, u32)]) -> Result<(), DriverError> {
        for (i, &(lba, len)) in writes.iter().enumerate() {
            let e = RawEntry {
                lba: lba as u32,
                len,
                devid: 0,
                etag: i == 0,
                dr: false,
                plba: layout::NO_PLBA,
                rsvd: 0,
            };
            self.write(c, self.layout.slot(first + i as u64), &e.to_bytes())
                .await?;
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

    /// Frees room for an append: dequeue, flush on a volatile cache, or
    /// wait for progress.
    async fn make_room(&self, core: usize) -> Result<(), DriverError> {
        let head = self.head();
        if self.durable_point() > head {
            self.dequeue(core).await?;
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
        let front_completed = self
            .state
            .borrow()
            .entries
            .front()
            .is_some_and(|p| p.progress == Progress::Completed);
        if self.volatile && front_completed {
            self.flush(core).await?;
            self.dequeue(core).await?;
            return Ok(());
        }
        self.progress.notified().await;
        Ok(())
    }
}
