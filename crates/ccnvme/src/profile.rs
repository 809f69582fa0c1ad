//! Software costs of the host I/O stack, charged in simulated time on the
//! core that runs the code. Sources beside each number.

use pcie_sim::{Cycles, PersistSkips, SimDuration};

/// Costs of the block layer and the driver.
#[derive(Clone, Debug, PartialEq)]
pub struct DriverProfile {
    /// Block layer per request: bio to request, tag allocation, merge
    /// checks. 1.0 us (Horae, OSDI'20, 6.2, 4 KB IO path breakdown: "about
    /// 1.0 us is spent on block layer, which performs request merging and
    /// bio-to-request transmission").
    pub block_layer: SimDuration,
    /// Ordering layer per ordered write (Horae only): building its
    /// ordering metadata and appending it to the ordering queue, the
    /// persistent MMIO writes aside (those are bus traffic, charged by the
    /// machine). 0.7 us (Horae, OSDI'20, 6.2, 4 KB IO path breakdown:
    /// "the ordering layer processes and writes ordering metadata within
    /// 0.7 us").
    pub ordering_layer: SimDuration,
    /// How the Horae ordering layer persists an epoch's entries
    /// (`docs/decisions.md` H1): [`EntryPersist::PerEpoch`] by default.
    pub horae_entry_persist: EntryPersist,
    /// How the Horae ordering layer sends the FLUSHes of a joint FLUSH to
    /// its candidate devices: [`FlushIssue::Joint`] by default (HoRAE 5.3);
    /// [`FlushIssue::Serialized`] is the paper's HFS-SF of Figure 10(c).
    pub horae_flush: FlushIssue,
    /// What Horae's recovery reads of an ordering queue's region:
    /// [`RegionLoad::Whole`] by default (HoRAE's released module).
    pub horae_recovery_load: RegionLoad,
    /// Bios the Horae background submitter's ring holds (HoRAE's released
    /// ordering-layer module, `MAX_BIO_SQES`); a caller that finds it full
    /// submits the bio itself. Used only by a stream given a submitter
    /// ([`crate::horae::StreamParams::submitters`]).
    pub horae_submitter_ring: u32,
    /// Driver work to build and place one command in a queue.
    pub submit_cycles: Cycles,
    /// Interrupt entry and handler overhead per MSI-X (Linux
    /// irq entry + nvme_irq + exit; ~1 us on Haswell-era servers).
    pub irq_handler: SimDuration,
    /// Per completion entry processed in the handler.
    pub cqe_cycles: Cycles,
    /// How many completion entries an interrupt handler consumes:
    /// [`CqReap::Drain`] (Linux) by default.
    pub cq_reap: CqReap,
    /// Waking a thread that sleeps on a completion and switching to it
    /// (`docs/decisions.md` H8 suggests 2-5 us; 2 us, a fast context switch).
    pub wakeup: SimDuration,
    /// Poll instead of taking interrupts (the handler checks its CQ every
    /// `poll_interval` instead of sleeping until an MSI-X).
    pub polling: bool,
    /// Interval between two polls of a completion queue (Linux io_poll
    /// spins; 200 ns keeps the simulation from spinning every cycle).
    pub poll_interval: SimDuration,
    /// Entries per I/O submission and completion queue.
    pub queue_entries: u32,
    /// Slots per persistent submission queue (bounded by the PMR).
    pub psq_slots: u32,
    /// Ordering mechanisms switched off, to show a crash checker catches
    /// their absence (all off by default: the driver is correct).
    pub faults: DriverFaults,
}

/// How the Horae ordering layer persists the 16-byte entries of an epoch
/// (checklist H1; `docs/decisions.md` H1). Horae 5.5: "after each MMIO
/// write, HORAE issues a non-posted MMIO read of zero byte length"; what
/// one MMIO write is, the paper does not say. The tail pointer is
/// persisted after the entries either way, one epoch after the other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EntryPersist {
    /// One write-combined burst of an epoch's entries (its contiguous
    /// slots; two bursts where the ring wraps), then one `clflush` per
    /// line, `mfence` and one zero-length read: the MMIO write is the
    /// burst, as this simulator counts MMIO operations (README, counting
    /// convention). The default: Horae 6.2 measures the ordering layer at
    /// 0.7 us per 4 KB write including "writes ordering metadata", and a
    /// zero-length read alone costs 0.9 us (Horae 5.2's own 8-byte read),
    /// so an epoch of several writes cannot pay one read per entry.
    #[default]
    PerEpoch,
    /// Every entry its own persistent write and zero-length read (the
    /// paper-literal reading of each entry as one MMIO write).
    PerEntry,
}

/// What Horae's recovery ([`crate::horae::recover_stream`]) reads of a
/// stream's region in the PMR before it classifies the entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RegionLoad {
    /// The header, the pointers and every slot of the ring, into a DRAM
    /// copy: HoRAE 6.5, "HORAE loads the pointers and the ordering
    /// metadata into host DRAM", which its released module does as one
    /// read of the stream's whole metadata region (`olayer_crash_recovery`:
    /// `cmb_read(&ci, s, 0, s->ometa_size)`), and which rebuilds the
    /// DRAM mirror of the whole region (HoRAE 5.2, "Optimization").
    #[default]
    Whole,
    /// The header, the pointers and only the slots from head to tail.
    /// Recovery reads no other slot in either case, so both find the same
    /// entries and make the same decisions; only the time differs. For
    /// crash exploration, which recovers thousands of crash states and
    /// judges what recovery decides, not how long it takes
    /// (`tests/horae_recovery_load.rs` compares the two over random queue
    /// states).
    Live,
}

/// What one run of a completion queue's interrupt handler consumes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CqReap {
    /// Every entry whose phase tag is current, then one CQ head doorbell:
    /// Linux's `nvme_irq`, which loops while `nvme_cqe_pending`
    /// (drivers/nvme/host/pci.c). The messages that arrived meanwhile are
    /// one more run, as the local APIC collapses them
    /// ([`pcie_sim::InterruptController::end_of_interrupt`]); a run that
    /// finds nothing costs its entry and exit, and rings no doorbell.
    #[default]
    Drain,
    /// One entry per MSI-X message and one CQ head doorbell per entry:
    /// the counting model of ccNVMe Table 1 ("(N+2) interrupt requests",
    /// "2 x (N+2) MMIOs": a doorbell and a CQ doorbell per request), a
    /// precondition of `ccnvme-bench`'s Table 1, not Linux.
    OnePerInterrupt,
}

/// How a joint FLUSH sends its FLUSH commands (HoRAE 5.3, 6.3).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlushIssue {
    /// To every candidate device at once, then wait for all (HoRAE 5.3:
    /// "HORAE sends FLUSH commands to the candidate devices (A and B)
    /// simultaneously").
    #[default]
    Joint,
    /// To one candidate device after another, each waited for before the
    /// next is sent: the legacy FLUSH, "always performed in a serialized
    /// and synchronous fashion" (HoRAE 5.3), which Figure 10(c) runs as
    /// HFS-SF against the joint FLUSH (HFS-PF). The same devices are
    /// flushed and `flushed` moves the same way: a slower variant, not a
    /// fault.
    Serialized,
}

/// Ordering mechanisms of the ccNVMe path and the Horae ordering queue that can be switched off for
/// fault injection. Each one breaks crash consistency when absent; a
/// crash explorer must report a violation for each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DriverFaults {
    /// Skip the zero-length read that ends a persistent MMIO write: after
    /// flushing P-SQ entries and pointers (the entries may still be in
    /// flight when the doorbell lands), and after each write of the Horae
    /// ordering queue (its entries, tail, `flushed` and `dr` words may
    /// still be in flight when a caller is told they are durable). The
    /// latter is what HoRAE's released ordering-layer module does: its
    /// `cmb_flush` ends with `memcpy_fromio` of 0 bytes, which on x86
    /// Linux makes no access (`docs/decisions.md` H18).
    pub no_flush_read: bool,
    /// Skip the clflush + mfence before the zero-length read of a
    /// persistent MMIO write, ccNVMe's or Horae's (the lines may still sit
    /// in write-combining buffers).
    pub no_fence: bool,
    /// Skip only the fence between a transaction's P-SQ entries and its
    /// P-SQDB store (the entries' lines may leave after the doorbell's:
    /// Intel SDM vol. 3A 11.3.1); the doorbell itself is still persisted
    /// with its fence and read.
    pub no_entry_fence: bool,
    /// Do not set FUA on a transaction's commit command on a drive with a
    /// volatile cache.
    pub no_commit_fua: bool,
    /// Finish transactions as their own commands complete, not in queue
    /// order (P-SQ-head may pass an unfinished earlier transaction).
    pub out_of_order_completion: bool,
    /// Horae: the joint FLUSH of a stream over several devices flushes
    /// only the device of the last entry before the flush point (a
    /// per-device FLUSH), then moves `flushed` over the other devices'
    /// entries too.
    pub horae_no_joint_flush: bool,
    /// Horae: set an entry's `dr` bit when its write is submitted, not
    /// when it completes (on a device without a volatile cache).
    pub horae_early_dr: bool,
    /// Horae: a swap writes the checkpoint region without FUA, so the head
    /// moves over the swapped entries while their copy may still sit in
    /// the drive's volatile cache.
    pub horae_swap_no_fua: bool,
    /// Horae: recovery does not commit the durable prepare writes of
    /// redirected in-place updates (it empties the queue with their home
    /// blocks still holding the old content).
    pub horae_no_redirect_commit: bool,
}

impl DriverFaults {
    /// The steps of a persistent MMIO write ([`pcie_sim::Core::persist_wc`])
    /// these switches leave out: the fence with `no_fence`, the read with
    /// `no_flush_read`. Every persistent write of the driver, ccNVMe's
    /// P-SQ and Horae's ordering queue, takes its steps from here.
    pub fn persist_skips(&self) -> PersistSkips {
        PersistSkips {
            fence: self.no_fence,
            read: self.no_flush_read,
        }
    }
}

impl DriverProfile {
    /// The default profile with one completion per interrupt
    /// ([`CqReap::OnePerInterrupt`]): the counting model of ccNVMe Table 1,
    /// which the Table 1 benchmark and tests take as a precondition.
    pub fn per_request_interrupts() -> Self {
        DriverProfile {
            cq_reap: CqReap::OnePerInterrupt,
            ..DriverProfile::default()
        }
    }
}

impl Default for DriverProfile {
    fn default() -> Self {
        DriverProfile {
            block_layer: SimDuration::from_ns(1_000),
            ordering_layer: SimDuration::from_ns(700),
            horae_entry_persist: EntryPersist::PerEpoch,
            horae_flush: FlushIssue::Joint,
            horae_recovery_load: RegionLoad::Whole,
            horae_submitter_ring: 1024,
            submit_cycles: Cycles(500),
            irq_handler: SimDuration::from_ns(1_000),
            cqe_cycles: Cycles(100),
            cq_reap: CqReap::Drain,
            wakeup: SimDuration::from_ns(2_000),
            polling: false,
            poll_interval: SimDuration::from_ns(200),
            queue_entries: 1024,
            psq_slots: 256,
            faults: DriverFaults::default(),
        }
    }
}
