//! Submission and completion queue state inside the controller.

use std::cell::Cell;

use nvme_spec::SQE_BYTES;
use pcie_sim::SimTime;
use tokio::sync::Notify;

/// Where a submission queue lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SqLocation {
    /// Host memory at this bus address (fetched by DMA).
    Host(u64),
    /// The controller's PMR at this byte offset (read locally, no DMA).
    /// Vendor-specific extension (see `nvme_spec::ccnvme`).
    Pmr(u64),
}

/// A submission queue.
#[derive(Debug)]
pub struct SubmissionQueue {
    /// Queue identifier.
    pub id: u16,
    /// Where its entries are.
    pub location: SqLocation,
    /// Entries (1-based).
    pub size: u32,
    /// The completion queue it posts to.
    pub cq: u16,
    /// Next entry the controller reserves for fetching.
    pub head: u32,
    /// Entries fetched, as a head pointer: every entry before it has been
    /// read (reported in completions as SQHD).
    pub fetched_head: u32,
    /// Tail written by the host.
    pub tail: u32,
    /// PMR offset of the word that rings this queue's tail doorbell.
    pub pmr_doorbell: Option<u32>,
    /// Commands fetched from this queue and not yet completed.
    pub inflight: Cell<u32>,
    /// Doorbell writes whose entries are not all taken yet, oldest first.
    pub doorbells: std::collections::VecDeque<Rung>,
}

/// One doorbell write that took effect: the tail it set, and what its
/// entries' submission moment was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rung {
    /// The tail it set.
    pub tail: u32,
    /// The moment its entries were submitted.
    pub submitted: Submission,
}

/// The moment a command was submitted (its queue's doorbell took effect).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Submission {
    /// Write-type commands completed by then: what a Flush submitted then
    /// covers (NVMe 1.4 6.8).
    pub writes_done: u64,
    /// The trace index of the first event recorded after it: from that
    /// crash point on, the controller may have processed the command in
    /// some timing (`power.rs`, [`crate::events::SUBMITTED`]).
    pub trace_at: u64,
}

impl SubmissionQueue {
    /// The host rang the tail doorbell with `tail` at `submitted`.
    pub fn ring(&mut self, tail: u32, submitted: Submission) {
        if tail != self.tail {
            self.doorbells.push_back(Rung { tail, submitted });
        }
        self.tail = tail;
    }

    /// Takes the entry at `head` for fetching; returns its slot and when
    /// it was submitted.
    pub fn take(&mut self) -> (u32, Submission) {
        let slot = self.head;
        let submitted = self.doorbells.front().map(|d| d.submitted);
        debug_assert!(
            submitted.is_some(),
            "an entry is taken only after a doorbell covered it"
        );
        self.head = (self.head + 1) % self.size;
        if self.doorbells.front().is_some_and(|d| d.tail == self.head) {
            self.doorbells.pop_front();
        }
        (slot, submitted.unwrap_or_default())
    }

    /// Entries the host has submitted that the controller has not taken.
    pub fn pending(&self) -> u32 {
        (self.tail + self.size - self.head) % self.size
    }

    /// Address (host bus address or PMR offset) of entry `slot`.
    pub fn entry_addr(&self, slot: u32) -> u64 {
        match self.location {
            SqLocation::Host(a) | SqLocation::Pmr(a) => a + slot as u64 * SQE_BYTES,
        }
    }
}

/// A completion queue.
#[derive(Debug)]
pub struct CompletionQueue {
    /// Queue identifier.
    pub id: u16,
    /// Host bus address of entry 0.
    pub base: u64,
    /// Entries (1-based).
    pub size: u32,
    /// Head written by the host (entries before it are consumed).
    pub head: u32,
    /// Next entry the controller writes.
    pub tail: u32,
    /// Phase tag of the entries being written now.
    pub phase: bool,
    /// MSI-X vector.
    pub vector: u16,
    /// Interrupts enabled.
    pub interrupts: bool,
    /// Submission queues posting here.
    pub sqs: u32,
    /// Completions posted and not yet signalled (interrupt coalescing).
    pub unsignalled: u32,
    /// When the oldest unsignalled completion was posted.
    pub unsignalled_since: Option<SimTime>,
}

impl CompletionQueue {
    /// True if no entry is free (one slot always stays empty).
    pub fn is_full(&self) -> bool {
        (self.tail + 1) % self.size == self.head
    }

    /// True if moving the head to `new_head` consumes only posted entries.
    pub fn head_valid(&self, new_head: u32) -> bool {
        if new_head >= self.size {
            return false;
        }
        let posted = (self.tail + self.size - self.head) % self.size;
        let consumed = (new_head + self.size - self.head) % self.size;
        consumed <= posted
    }
}

/// Waiters for completion-queue space, one per CQ.
#[derive(Debug, Default)]
pub struct CqSpace {
    /// Woken when the host frees entries.
    pub notify: Notify,
}
