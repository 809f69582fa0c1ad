//! HoRAE's background submitter (Horae 6.2): "The ordering layer
//! delegates the submission of orderless block IO to per-CPU background
//! submitter threads, so as to hide the overhead of block layer for
//! foreground ordering calls."
//!
//! An ordered write's caller pays the ordering layer (its entry and the
//! tail, made persistent) and hands the data bio to the submitter; the
//! submitter thread, on a core of its own, takes the bios off its ring in
//! the order they were put there and sends each through the block layer
//! on its core's hardware queue ([`crate::BlockDevice::submit`], so the
//! block layer's CPU time is charged there, and the completion interrupt,
//! with the `dr` write it triggers, comes back to that core). The handle
//! the caller holds completes as before, once the write completed (and,
//! without a volatile cache, its `dr` bit is persistent).
//!
//! As in HoRAE's released ordering-layer module (`submitter.c`): the ring
//! holds [`DriverProfile::horae_submitter_ring`](crate::DriverProfile::horae_submitter_ring)
//! bios (its `MAX_BIO_SQES`, 1024), and a caller that finds it full submits
//! the bio itself (`delegate_bio`'s "do by myself"); the thread polls its
//! ring and sleeps only after 5 s without work (`DELEGATOR_IDEL_TIMEOUT`),
//! which no measured window reaches, so handing a bio over costs the caller
//! no wake-up and is counted in the ordering layer's 0.7 us.
//!
//! Which thread takes a bio: the paper's threads are per CPU; a stream is
//! given the cores they run on ([`Submitters`],
//! [`super::StreamParams::submitters`]), and the caller on core `c` hands
//! its bios to submitter `c mod count`, so callers on different cores do
//! not share a ring when there are as many submitters as callers. Each
//! runs on a core of its own, as the scheduler places a busy kernel thread
//! on an idle core (the paper's 24-core server had idle cores in every
//! experiment below 24 threads). Deviation: the released module's default
//! is one submitter per NUMA node, shared by every stream; the paper's
//! text says per CPU, which is what is modelled.

use std::cell::Cell;

use tokio::sync::Mutex;

/// The cores of a stream's background submitter threads: `count` cores
/// from `first` on, one thread each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Submitters {
    /// The first thread's core.
    pub first: usize,
    /// Threads (and cores); at least one.
    pub count: usize,
}

/// A stream's background submitter: its core and its ring.
#[derive(Debug)]
pub(super) struct Submitter {
    /// The core the submitter thread runs on.
    pub(super) core: usize,
    /// Bios the ring holds at most.
    capacity: u32,
    /// Bios in the ring (handed over, not yet through the block layer).
    queued: Cell<u32>,
    /// The thread takes one bio at a time, in the order they were put in
    /// (tokio's mutex is fair: waiters are served first come, first
    /// served).
    turn: Mutex<()>,
}

impl Submitter {
    /// A submitter on `core` with a ring of `capacity` bios.
    pub(super) fn new(core: usize, capacity: u32) -> Submitter {
        Submitter {
            core,
            capacity,
            queued: Cell::new(0),
            turn: Mutex::new(()),
        }
    }

    /// Puts a bio in the ring; false if it is full (the caller then
    /// submits the bio itself).
    pub(super) fn enqueue(&self) -> bool {
        let q = self.queued.get();
        if q >= self.capacity {
            return false;
        }
        self.queued.set(q + 1);
        true
    }

    /// A bio left the ring (the thread took it).
    pub(super) fn leave(&self) {
        let q = self.queued.get();
        debug_assert!(q > 0, "a bio left an empty ring");
        self.queued.set(q.saturating_sub(1));
    }

    /// Waits for the thread to reach this bio (every bio put in before it
    /// has gone through the block layer); the thread is busy with it until
    /// the guard is dropped.
    pub(super) async fn turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.turn.lock().await
    }
}

#[cfg(test)]
mod tests {
    use super::Submitter;

    #[test]
    fn a_full_ring_refuses_a_bio_until_one_leaves() {
        let s = Submitter::new(1, 2);
        assert!(s.enqueue(), "room for the first");
        assert!(s.enqueue(), "room for the second");
        assert!(!s.enqueue(), "a ring of two holds two");
        s.leave();
        assert!(s.enqueue(), "a bio that left frees its place");
    }
}
