//! # pcie-sim: the simulated machine
//!
//! A deterministic, cycle-approximate model of the parts of a host that a
//! crash-consistent storage stack depends on: simulated time and an
//! executor, host DRAM, the CPU store path (uncached stores, write-combining
//! buffers, `clflush`, fences, uncached reads), a PCIe link with posted and
//! non-posted ordering and TLP-level accounting, device BARs including a
//! Persistent Memory Region, MSI-X, a bus trace, and the power-failure
//! model that turns the trace into crash states. Beside host DRAM on the
//! memory bus, byte-addressable persistent memory ([`pmem`]: an Optane
//! DC PMem in App Direct mode, with the CPU cache, `clflush`,
//! `clflushopt`, `clwb`, non-temporal stores, fences, ADR or eADR, its own
//! trace and crash envelope).
//!
//! ## What it guarantees
//!
//! - **Determinism.** Tasks run in `(time, sequence)` order on one thread;
//!   the only randomness is the seeded RNG of the [`Executor`]. The same
//!   program and seed give the same trace, bit for bit
//!   ([`BusTrace::hash`]).
//! - **PCIe ordering** with Relaxed Ordering off (PCIe 3.0 Table 2-39): each
//!   direction of a link is a FIFO, so a posted write never passes a posted
//!   write, a read request never passes a posted write, and a completion
//!   never passes a posted write. A device serves its BAR requests in
//!   arrival order, so the completion of a read (even a zero-length one)
//!   proves that every posted write sent before it has taken effect.
//! - **Persistence.** A posted write to a PMR is persistent when it takes
//!   effect at the device; nothing else in this crate persists. The crash
//!   states allowed after any trace entry are computed by [`CrashCursor`]
//!   from the same entries the machine recorded (see [`power`]).
//!   Persistent memory on the memory bus persists by its own rules (a
//!   line written back to the memory controller under ADR, every executed
//!   store under eADR), and [`PmemCursor`] computes its crash states from
//!   its own trace ([`pmem::envelope`]).
//! - **Timing.** A TLP occupies its direction of the link for its wire
//!   size (payload in whole DWs, header and framing) divided by the link
//!   bandwidth, then arrives one link latency later; host posted writes to
//!   a device also wait for a posted credit, freed when the device has
//!   served the write. Costs on the CPU are charged in cycles.
//!
//! ## What it assumes of a device
//!
//! A device implements [`Endpoint`]: it is called when a register write or
//! read takes effect, and it reaches the host only through the
//! [`DevicePort`] it was given (DMA, MSI-X, its own PMR, device events in
//! the trace). It never touches host memory directly.
//!
//! ## Counting convention
//!
//! Counters are kept per [`EventKind`] and [`Purpose`] in operations, TLPs,
//! wire bytes and payload bytes ([`Counters`]). An operation is what the
//! initiator asked for: one uncached store; one write-combining burst (all
//! lines that leave between two fences), however many TLPs; one uncached
//! read call; one DMA read or write call; one MSI-X message.
//!
//! ## Deviations from real hardware (documented, deliberate)
//!
//! - One root port per device, no switches, no IOMMU; host DRAM is
//!   identity-mapped at bus address 0.
//! - Data-link overhead beyond per-TLP framing (ACK and flow-control DLLPs,
//!   SKP ordered sets) is not modelled: it costs a few percent of raw
//!   bandwidth on real links.
//! - A DMA write to an address outside host memory is refused to the device
//!   (a real root complex would drop it and log an error).
//! - `clflush` of a WC line makes it leave at once; fences drain every line.
//! - Persistent memory: see the deviations in [`pmem`] (no store buffer,
//!   one cache pool, its own write-combining buffers per core).

#![forbid(unsafe_code)]

pub mod addr;
pub mod calibration;
pub mod content_hash;
pub mod cpu;
pub mod endpoint;
pub mod error;
mod event_log;
pub mod executor;
pub mod host_mem;
pub mod irq;
pub mod link;
pub mod machine;
pub mod observe;
mod occupancy;
pub mod pmem;
pub mod pmr;
pub mod port;
pub mod power;
pub mod profile;
pub mod readset;
pub mod subsets;
pub mod testing;
pub mod time;
pub mod trace;
pub mod wc;

pub use addr::{BusAddr, HostAddr, PmrOffset};
pub use cpu::{Core, CpuStats, PersistSkips};
pub use endpoint::{BarKind, BarLayout, Endpoint, PmrBar, RegisterAccess, Unsupported};
pub use error::PcieError;
pub use executor::{join_all, Executor, JoinHandle, RunError, Sim};
pub use host_mem::{HostMemory, PAGE_SIZE};
pub use irq::InterruptController;
pub use link::{Encoding, LinkProfile};
pub use machine::{BusLayout, Machine, PmrWriteHook, PortLayout, SharedPage};
pub use observe::AccessLog;
pub use pmem::{
    PersistenceDomain, PmAddr, PmChoice, PmCounters, PmEntry, PmEventKind, PmItem, PmPending, PmTally,
    PmTrace, Pmem, PmemCursor, PmemProfile, PmemTiming,
};
pub use pmr::{PageStore, PmrTiming};
pub use port::DevicePort;
pub use power::{CrashChoice, CrashCursor, ItemConstraint, ItemUnits, Pending, PendingLine};
pub use profile::{CpuProfile, HostProfile, MachineProfile};
pub use time::{Bandwidth, Cycles, Frequency, SimDuration, SimTime};
pub use trace::{BusTrace, Counters, EventKind, Purpose, Tally, TraceEntry, TraceMode};
