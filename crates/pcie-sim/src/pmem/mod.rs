//! Byte-addressable persistent memory on the memory bus: an NVDIMM (Intel
//! Optane DC PMem) in App Direct mode beside host DRAM, reached by the
//! cores' loads and stores through the CPU cache, not over PCIe.
//!
//! ## The store path (what a core can do)
//!
//! [`Pmem`] gives each core the x86 instructions a persistent-memory
//! program uses, at a [`PmAddr`] (an offset in the persistent memory):
//!
//! - [`Pmem::store`]: a cached store (write-back memory type) of whole
//!   8-byte-aligned words inside one 64-byte line (an 8-byte `mov` up to a
//!   64-byte vector store). The line is brought into the cache
//!   (write-allocate) and becomes dirty. An aligned 8-byte store is
//!   atomic (Intel SDM vol. 3A 8.1.1 guarantees it for a quadword aligned
//!   on a 64-bit boundary); a wider store is one 8-byte access per word,
//!   in no promised order (8.1.1: an access larger than a quadword may be
//!   carried out as several memory accesses).
//! - [`Pmem::load`]: sees the latest value stored by any core (the cache
//!   is coherent and a core's own stores forward to its loads: SDM vol. 3A
//!   8.2.3.5); a miss reads the line from the media.
//! - [`Pmem::clflush`]: writes the line back if dirty and invalidates it.
//!   It is ordered with writes, with other `clflush`es and with fences
//!   (SDM vol. 2A, CLFLUSH), so the model holds the core until the line
//!   is in the write pending queue.
//! - [`Pmem::clflushopt`] (invalidates) and [`Pmem::clwb`] (keeps the line
//!   valid, clean): ordered only with older writes to the same line,
//!   fences and locked instructions, not with other writes or flushes;
//!   software orders them with SFENCE (SDM vol. 2A CLFLUSHOPT, CLWB). The
//!   core goes on at once; the write-back completes in the background.
//! - [`Pmem::nt_store`]: a non-temporal store (`movnti`/`movntdq`) into
//!   the core's write-combining buffers ([`crate::wc::WriteCombiningBuffer`],
//!   the type the MMIO path uses; SDM vol. 2B MOVNTI: the non-temporal
//!   hint is implemented with the WC memory type protocol; vol. 3A
//!   11.3.1). A line leaves
//!   when full, evicted for room, flushed, or fenced; it bypasses the cache
//!   (a dirty cached copy of the line is written back and invalidated
//!   first: SDM vol. 1 10.4.6.2).
//! - [`Pmem::sfence`] / [`Pmem::mfence`]: drain the core's
//!   write-combining lines and wait until every earlier `clflushopt`,
//!   `clwb` and non-temporal line of the core reached the write pending
//!   queue (SDM vol. 3A 8.2.5 and 11.3.1; vol. 2A CLFLUSHOPT, CLWB: the
//!   fence orders them). They also fence the core's MMIO path
//!   ([`crate::Core::sfence`]).
//!
//! ## What persists
//!
//! With [`PersistenceDomain::Adr`] a line is persistent once it reached
//! the memory controller's write pending queue: a write-back (an eviction
//! or a flush of a dirty line) or a non-temporal line leaving its core.
//! With [`PersistenceDomain::Eadr`] the caches are in the domain too: every
//! store is persistent once it is globally visible, which in this model is
//! when it executes; non-temporal lines still need the fence. A dirty line
//! may be written back at any time (SDM vol. 3A 11.3, write-back memory
//! type): the model does it on capacity evictions and, with
//! [`PmemProfile::writeback_per_store`], at random, both chosen by the
//! machine's seeded RNG. [`Pmem::persistent_image`] is what a power
//! failure would leave *in this run*; every state the rules allow after
//! any trace entry, whatever this run's evictions did, comes from the
//! recorded [`PmTrace`] through [`PmemCursor`] (`docs/persistence.md`,
//! "Persistent memory on the memory bus").
//!
//! ## Timing and counting
//!
//! Every instruction occupies its core ([`crate::Core`]'s accounting):
//! stores and loads by the cycle, a miss for the media read latency, a
//! `clflush` of a dirty line until it is in the write pending queue, a
//! fence until the core's outstanding write-backs are. The DIMM
//! ([`PmemTiming`]) adds the write latency, the media write bandwidth per
//! XPLine and XPBuffer combining. [`PmCounters`] counts instructions by
//! kind and purpose, loads, lines that reached the write pending queue and
//! media reads and writes in XPLines.
//! [`Pmem::log_access`] logs, as the PMR does, which 64-byte lines loads
//! read before the program stored them ([`crate::observe::AccessLog`]), for
//! a crash checker's read-set reduction.
//!
//! ## Deviations from real hardware
//!
//! - No store buffer: a store is globally visible when it executes (its
//!   trace entry). A real core holds recent stores in a FIFO store buffer,
//!   so under eADR a suffix of a core's unfenced stores could still be
//!   lost; this model does not offer those states.
//! - Global visibility order is trace order, including between cores.
//! - A store that misses stalls its core for the line's read (no store
//!   buffer to hide it); the cache is one pool of
//!   [`PmemProfile::cache_lines`] lines with a seeded random victim, not
//!   the L1/L2/LLC hierarchy; only PM lines are cached.
//! - The persistent memory's write-combining buffers are a second
//!   [`crate::wc::WriteCombiningBuffer`] per core beside the MMIO one
//!   (hardware shares its fill buffers); they leave only when full,
//!   evicted for room, flushed or fenced (no idle eviction).
//! - A cached store to a line the same core holds in a write-combining
//!   buffer sends that line first; for the crash envelope it stays
//!   pending until the core's next fence, as does a non-temporal line
//!   sent by a flush.
//! - The live model writes a line back into [`Pmem::persistent_image`]
//!   when it leaves the core, not one write latency later.
//! - Loads of another core see non-temporal stores at once (real parts
//!   make them visible when their line leaves).
//! - Loads are not overlapped: each miss costs its core the full read
//!   latency (no prefetching, no memory-level parallelism), so one core
//!   reads far below the DIMM's read bandwidth; writes are limited by the
//!   media write bandwidth as on the real part.
//! - One DIMM, no interleaving; no Memory Mode.

mod cache;
pub mod classes;
pub mod envelope;
pub mod explore;
pub mod profile;
pub mod trace;

use std::cell::{Ref, RefCell};
use std::rc::Rc;

use rand::Rng;

use crate::cpu::Core;
use crate::error::PcieError;
use crate::executor::Sim;
use crate::machine::{Inner, Machine};
use crate::observe::AccessLog;
use crate::pmr::PageStore;
use crate::time::{SimDuration, SimTime};
use crate::trace::{Purpose, NO_PAYLOAD};
use crate::wc::{WcLine, WriteCombiningBuffer, LINE};

use self::cache::{Cache, Media};
pub use self::classes::{PmClasses, PmConstraint};
pub use self::envelope::{PmChoice, PmItem, PmPending, PmemCursor};
pub use self::explore::{explore, explore_read_sets, PmExploreReport, PmViolation};
pub use self::profile::{PersistenceDomain, PmemProfile, PmemTiming};
pub use self::trace::{PmCounters, PmEntry, PmEventKind, PmTally, PmTrace, NO_CORE};

/// An offset in the persistent memory (its physical address less the
/// region's base).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PmAddr(pub u64);

impl std::ops::Add<u64> for PmAddr {
    type Output = PmAddr;
    fn add(self, rhs: u64) -> PmAddr {
        PmAddr(self.0 + rhs)
    }
}

/// Largest single load the model accepts (1 MiB).
pub const MAX_PM_LOAD: usize = 1 << 20;

/// Which flush instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flush {
    Clflush,
    Clflushopt,
    Clwb,
}

/// One core's persistent-memory state.
struct CorePm {
    /// Non-temporal lines not yet sent.
    wc: WriteCombiningBuffer,
    /// When the core's latest weakly ordered write-back (clflushopt, clwb,
    /// non-temporal line) reaches the write pending queue.
    outstanding: SimTime,
}

/// The live model.
struct State {
    /// What loads see: the latest value of every byte.
    visible: PageStore,
    /// What a power failure now would leave in this run.
    domain: PageStore,
    cache: Cache,
    media: Media,
    cores: Vec<CorePm>,
    trace: PmTrace,
    /// What programs read before writing, by 64-byte line (`None`: not
    /// logging; see [`Pmem::log_access`]).
    access: Option<AccessLog>,
    /// Sees every write into the persistence domain ([`Pmem::set_persist_hook`]).
    persist_hook: Option<PersistHook>,
}

/// Sees every write into the persistence domain as it happens: the address
/// and the bytes the domain now holds there (see [`Pmem::set_persist_hook`]).
pub type PersistHook = Rc<dyn Fn(u64, &[u8])>;

struct PmemInner {
    machine: Rc<Inner>,
    profile: PmemProfile,
    state: RefCell<State>,
}

/// Persistent memory on a machine's memory bus. Cheap to clone (a handle).
#[derive(Clone)]
pub struct Pmem {
    inner: Rc<PmemInner>,
}

impl std::fmt::Debug for Pmem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pmem")
            .field("size", &self.inner.profile.size)
            .field("domain", &self.inner.profile.domain)
            .finish()
    }
}

/// What the current instruction is, for the trace.
struct Op {
    now: SimTime,
    bus_seq: u64,
    core: u8,
}

impl State {
    /// Writes `data` at `addr` into the persistence domain.
    fn persist(&mut self, addr: u64, data: &[u8]) {
        self.domain.write(addr, data);
        if let Some(hook) = &self.persist_hook {
            hook(addr, data);
        }
    }

    fn record(&mut self, op: &Op, kind: PmEventKind, addr: u64, len: u32, purpose: Purpose, payload: &[u8]) {
        self.trace.record(
            PmEntry {
                time: op.now,
                bus_seq: op.bus_seq,
                addr,
                payload: NO_PAYLOAD,
                len,
                kind,
                purpose,
                source: op.core,
            },
            payload,
        );
    }

    /// Writes the cached line `line` back (its latest bytes); returns when
    /// it is in the write pending queue. `source` is recorded as a
    /// [`PmEventKind::Writeback`] entry unless `None` (a flush, whose own
    /// entry stands for it).
    fn write_back(&mut self, p: &PmemProfile, op: &Op, line: u64, source: Option<u8>) -> SimTime {
        let mut bytes = [0u8; LINE];
        self.visible.read(line, &mut bytes);
        self.persist(line, &bytes);
        let w = self.media.write_line(op.now, line, &p.timing);
        let c = self.trace.counters_mut();
        c.wpq_lines += 1;
        c.media_writes += u64::from(w.media_write);
        if let Some(src) = source {
            let at = Op {
                core: src,
                now: op.now,
                bus_seq: op.bus_seq,
            };
            self.record(
                &at,
                PmEventKind::Writeback,
                line,
                LINE as u32,
                Purpose::UNTAGGED,
                &[],
            );
        }
        w.done
    }

    /// A non-temporal line leaves core `op.core` for the memory controller.
    fn nt_line_out(&mut self, p: &PmemProfile, op: &Op, l: &WcLine) {
        self.domain.write_masked(l.addr, &l.data, l.mask);
        if let Some(hook) = &self.persist_hook {
            let mut bytes = [0u8; LINE];
            self.domain.read(l.addr, &mut bytes);
            hook(l.addr, &bytes);
        }
        let w = self.media.write_line(op.now, l.addr, &p.timing);
        let c = self.trace.counters_mut();
        c.wpq_lines += 1;
        c.media_writes += u64::from(w.media_write);
        self.record(
            op,
            PmEventKind::NtLine,
            l.addr,
            l.mask.count_ones(),
            l.purpose,
            &[],
        );
        let core = &mut self.cores[op.core as usize];
        core.outstanding = core.outstanding.max(w.done);
    }

    /// Brings `line` into the cache (a miss reads it); returns the read
    /// latency (zero on a hit).
    fn fill(&mut self, p: &PmemProfile, sim: &Sim, op: &Op, line: u64, dirty: bool) -> SimDuration {
        if self.cache.contains(line) {
            if dirty {
                self.cache.insert(line, true, |_| 0);
            }
            return SimDuration::ZERO;
        }
        let (lat, media_read) = self.media.read_line(line, &p.timing);
        self.trace.counters_mut().media_reads += u64::from(media_read);
        let victim = self
            .cache
            .insert(line, dirty, |n| sim.with_rng(|r| r.gen_range(0..n)));
        if let Some((v, true)) = victim {
            self.write_back(p, op, v, Some(NO_CORE));
        }
        lat
    }

    /// The cache writes back a random dirty line on its own, with the
    /// profile's chance per store.
    fn maybe_write_back(&mut self, p: &PmemProfile, sim: &Sim, op: &Op) {
        if p.writeback_per_store <= 0.0 || !sim.with_rng(|r| r.gen_bool(p.writeback_per_store)) {
            return;
        }
        let n = self.cache.dirty_count();
        if n == 0 {
            return;
        }
        let Some(line) = self.cache.nth_dirty(sim.with_rng(|r| r.gen_range(0..n))) else {
            return;
        };
        self.cache.clean(line);
        self.write_back(p, op, line, Some(NO_CORE));
    }
}

impl Pmem {
    /// Puts zeroed persistent memory on `machine`'s memory bus.
    pub fn attach(machine: &Machine, profile: PmemProfile) -> Result<Pmem, PcieError> {
        let image = PageStore::zeroed(profile.size);
        Pmem::attach_with_image(machine, profile, image)
    }

    /// Puts persistent memory holding `image` on `machine`'s memory bus
    /// (after a power failure: a crash state from [`PmemCursor`]). The
    /// trace records in the machine's trace mode at this moment.
    pub fn attach_with_image(
        machine: &Machine,
        profile: PmemProfile,
        image: PageStore,
    ) -> Result<Pmem, PcieError> {
        if profile.size == 0 || profile.size % LINE as u64 != 0 {
            return Err(PcieError::BadPmemProfile(
                "size must be a non-zero multiple of 64 bytes",
            ));
        }
        if image.len() != profile.size {
            return Err(PcieError::BadPmemProfile("the image is not the profile's size"));
        }
        if !(0.0..=1.0).contains(&profile.writeback_per_store) {
            return Err(PcieError::BadPmemProfile("writeback_per_store must be in 0..=1"));
        }
        let m = machine.inner.clone();
        let cores = (0..m.cores.len())
            .map(|_| CorePm {
                wc: WriteCombiningBuffer::new(m.profile.cpu.wc_buffers),
                outstanding: SimTime::ZERO,
            })
            .collect();
        let mode = m.trace.borrow().mode();
        let state = State {
            visible: image.clone(),
            domain: image,
            cache: Cache::new(profile.cache_lines),
            media: Media::default(),
            cores,
            trace: PmTrace::new(mode),
            access: None,
            persist_hook: None,
        };
        Ok(Pmem {
            inner: Rc::new(PmemInner {
                machine: m,
                profile,
                state: RefCell::new(state),
            }),
        })
    }

    /// The profile it was built with.
    pub fn profile(&self) -> &PmemProfile {
        &self.inner.profile
    }

    /// Bytes of persistent memory.
    pub fn size(&self) -> u64 {
        self.inner.profile.size
    }

    /// The trace so far.
    pub fn trace(&self) -> Ref<'_, PmTrace> {
        Ref::map(self.inner.state.borrow(), |s| &s.trace)
    }

    /// Changes how much of the trace is kept from now on (it starts in the
    /// machine's mode at attach time).
    pub fn set_trace_mode(&self, mode: crate::trace::TraceMode) {
        let mut st = self.inner.state.borrow_mut();
        let t = std::mem::take(&mut st.trace);
        st.trace = t.with_mode(mode);
    }

    /// Starts logging what loads read of the persistent memory before the
    /// program stored it ([`crate::observe`], by 64-byte line): a crash
    /// checker learns which lines its verdict depends on.
    pub fn log_access(&self) {
        self.inner.state.borrow_mut().access = Some(AccessLog::default());
    }

    /// The access log since [`Pmem::log_access`] or the last take; logging
    /// goes on with a fresh log. `None` if not logging.
    pub fn take_access(&self) -> Option<AccessLog> {
        self.inner.state.borrow_mut().access.as_mut().map(std::mem::take)
    }

    /// Shows `hook` every write into the persistence domain from now on
    /// (a line written back or flushed into the write pending queue, a
    /// non-temporal line leaving its write-combining buffer, and under
    /// eADR every store), so that a file behind the persistent memory holds
    /// what a power failure would leave at every instant; `None` removes
    /// it.
    pub fn set_persist_hook(&self, hook: Option<PersistHook>) {
        self.inner.state.borrow_mut().persist_hook = hook;
    }

    /// The counters so far.
    pub fn counters(&self) -> PmCounters {
        self.inner.state.borrow().trace.counters()
    }

    /// What a power failure now would leave in this run (the media and
    /// write pending queue; under eADR also the cache).
    pub fn persistent_image(&self) -> PageStore {
        self.inner.state.borrow().domain.clone()
    }

    /// The non-temporal lines core `core` still buffers (for tests).
    pub fn buffered_nt_lines(&self, core: usize) -> Vec<WcLine> {
        self.inner
            .state
            .borrow()
            .cores
            .get(core)
            .map_or_else(Vec::new, |c| c.wc.lines().to_vec())
    }

    fn check_core(&self, core: &Core) -> Result<(), PcieError> {
        if Rc::ptr_eq(&core.machine, &self.inner.machine) {
            Ok(())
        } else {
            Err(PcieError::ForeignCore(core.index))
        }
    }

    fn check_range(&self, addr: PmAddr, len: u64) -> Result<(), PcieError> {
        let size = self.size();
        match addr.0.checked_add(len.max(1)) {
            Some(end) if end <= size => Ok(()),
            _ => Err(PcieError::PmOutOfRange {
                addr: addr.0,
                len,
                size,
            }),
        }
    }

    fn check_store(&self, core: &Core, addr: PmAddr, len: usize) -> Result<(), PcieError> {
        self.check_core(core)?;
        let l = len as u64;
        let line = addr.0 & !(LINE as u64 - 1);
        if addr.0 % 8 != 0 || l % 8 != 0 || l == 0 || addr.0.saturating_add(l) > line + LINE as u64 {
            return Err(PcieError::PmMisaligned { addr: addr.0, len: l });
        }
        self.check_range(addr, l)
    }

    fn op(&self, core: &Core) -> Op {
        let m = &self.inner.machine;
        Op {
            now: m.sim.now(),
            bus_seq: m.trace.borrow().len(),
            core: core.index as u8,
        }
    }

    /// A cached store of `data` (whole 8-byte words, 8-byte aligned,
    /// inside one line) at `addr`. It is visible at once and persistent
    /// only once its line is written back (ADR) or at once (eADR).
    pub async fn store(
        &self,
        core: &Core,
        addr: PmAddr,
        data: &[u8],
        purpose: Purpose,
    ) -> Result<(), PcieError> {
        self.check_store(core, addr, data.len())?;
        let _g = core.occupy().await;
        let p = &self.inner.profile;
        let sim = &self.inner.machine.sim;
        let op = self.op(core);
        let line = addr.0 & !(LINE as u64 - 1);
        let miss = {
            let mut st = self.inner.state.borrow_mut();
            let st = &mut *st;
            if let Some(l) = st.cores[core.index].wc.take_line(line) {
                st.nt_line_out(p, &op, &l);
            }
            let miss = st.fill(p, sim, &op, line, true);
            st.visible.write(addr.0, data);
            if p.domain == PersistenceDomain::Eadr {
                st.persist(addr.0, data);
            }
            st.record(&op, PmEventKind::Store, addr.0, data.len() as u32, purpose, data);
            if let Some(log) = st.access.as_mut() {
                log.write_bytes(addr.0, data.len() as u64);
            }
            st.maybe_write_back(p, sim, &op);
            miss
        };
        let words = (data.len() as u64).div_ceil(8);
        sim.sleep(core.time_of(p.store_cycles * words) + miss).await;
        Ok(())
    }

    /// A non-temporal store of `data` (whole 8-byte words, 8-byte aligned,
    /// inside one line) at `addr`, into the core's write-combining buffers.
    pub async fn nt_store(
        &self,
        core: &Core,
        addr: PmAddr,
        data: &[u8],
        purpose: Purpose,
    ) -> Result<(), PcieError> {
        self.check_store(core, addr, data.len())?;
        let _g = core.occupy().await;
        let p = &self.inner.profile;
        let sim = &self.inner.machine.sim;
        let op = self.op(core);
        let line = addr.0 & !(LINE as u64 - 1);
        let until = {
            let mut st = self.inner.state.borrow_mut();
            let st = &mut *st;
            let mut until = op.now;
            if st.cache.contains(line) && st.cache.remove(line) {
                until = st.write_back(p, &op, line, Some(op.core));
            }
            st.visible.write(addr.0, data);
            st.record(
                &op,
                PmEventKind::NtStore,
                addr.0,
                data.len() as u32,
                purpose,
                data,
            );
            if let Some(log) = st.access.as_mut() {
                log.write_bytes(addr.0, data.len() as u64);
            }
            let mut out = Vec::new();
            st.cores[core.index].wc.store(addr.0, data, purpose, 0, &mut out);
            for l in &out {
                st.nt_line_out(p, &op, l);
            }
            until
        };
        let words = (data.len() as u64).div_ceil(8);
        let cost = core.time_of(self.inner.machine.profile.cpu.wc_store_cycles * words);
        sim.sleep_until((op.now + cost).max(until)).await;
        Ok(())
    }

    /// Loads `buf.len()` bytes at `addr` (any alignment): the latest
    /// values. Each line that misses is read from the media.
    pub async fn load(&self, core: &Core, addr: PmAddr, buf: &mut [u8]) -> Result<(), PcieError> {
        self.check_core(core)?;
        if buf.len() > MAX_PM_LOAD {
            return Err(PcieError::TooLarge {
                len: buf.len() as u64,
                max: MAX_PM_LOAD as u64,
            });
        }
        self.check_range(addr, buf.len() as u64)?;
        let _g = core.occupy().await;
        let p = &self.inner.profile;
        let sim = &self.inner.machine.sim;
        let op = self.op(core);
        let cost = {
            let mut st = self.inner.state.borrow_mut();
            let mut cost = SimDuration::ZERO;
            let hit = core.time_of(p.load_hit_cycles);
            let first = addr.0 & !(LINE as u64 - 1);
            let end = addr.0 + buf.len().max(1) as u64;
            let mut line = first;
            while line < end {
                let miss = st.fill(p, sim, &op, line, false);
                if miss == SimDuration::ZERO {
                    cost += hit;
                } else {
                    cost += miss;
                    st.trace.counters_mut().load_misses += 1;
                }
                line += LINE as u64;
            }
            st.visible.read(addr.0, buf);
            if let Some(log) = st.access.as_mut() {
                log.read_bytes(addr.0, buf.len() as u64);
            }
            let c = st.trace.counters_mut();
            c.loads.ops += 1;
            c.loads.bytes += buf.len() as u64;
            cost
        };
        sim.sleep(cost).await;
        Ok(())
    }

    /// `clflush` of the line holding `addr`: written back if dirty and
    /// invalidated; the core waits until the line is in the write pending
    /// queue (the instruction is ordered with later writes).
    pub async fn clflush(&self, core: &Core, addr: PmAddr) -> Result<(), PcieError> {
        self.flush(core, addr, Flush::Clflush).await
    }

    /// `clflushopt` of the line holding `addr`: written back if dirty and
    /// invalidated, in the background; only a later fence waits for it.
    pub async fn clflushopt(&self, core: &Core, addr: PmAddr) -> Result<(), PcieError> {
        self.flush(core, addr, Flush::Clflushopt).await
    }

    /// `clwb` of the line holding `addr`: written back if dirty, kept
    /// valid and clean, in the background; only a later fence waits for it.
    pub async fn clwb(&self, core: &Core, addr: PmAddr) -> Result<(), PcieError> {
        self.flush(core, addr, Flush::Clwb).await
    }

    async fn flush(&self, core: &Core, addr: PmAddr, kind: Flush) -> Result<(), PcieError> {
        self.check_core(core)?;
        self.check_range(addr, 1)?;
        let _g = core.occupy().await;
        let p = &self.inner.profile;
        let op = self.op(core);
        let line = addr.0 & !(LINE as u64 - 1);
        let until = {
            let mut st = self.inner.state.borrow_mut();
            let st = &mut *st;
            let entry = match kind {
                Flush::Clflush => PmEventKind::Clflush,
                Flush::Clflushopt => PmEventKind::Clflushopt,
                Flush::Clwb => PmEventKind::Clwb,
            };
            st.record(&op, entry, line, 0, Purpose::UNTAGGED, &[]);
            if let Some(l) = st.cores[core.index].wc.take_line(line) {
                st.nt_line_out(p, &op, &l);
            }
            let dirty = match kind {
                Flush::Clwb => st.cache.clean(line),
                Flush::Clflush | Flush::Clflushopt => st.cache.remove(line),
            };
            let mut until = op.now;
            if dirty {
                let done = st.write_back(p, &op, line, None);
                if kind == Flush::Clflush {
                    until = done;
                } else {
                    let c = &mut st.cores[core.index];
                    c.outstanding = c.outstanding.max(done);
                }
            }
            until
        };
        let cost = core.time_of(self.inner.machine.profile.cpu.clflush_cycles);
        self.inner
            .machine
            .sim
            .sleep_until((op.now + cost).max(until))
            .await;
        Ok(())
    }

    /// `sfence`: fences the core's MMIO path ([`Core::sfence`]), sends its
    /// non-temporal lines and waits until every earlier `clflushopt`,
    /// `clwb` and non-temporal line of the core is in the write pending
    /// queue (persistent under ADR).
    pub async fn sfence(&self, core: &Core) -> Result<(), PcieError> {
        self.fence(core, PmEventKind::Sfence).await
    }

    /// `mfence`: as [`Pmem::sfence`] (loads are not reordered in this
    /// model, so the two differ in nothing it shows).
    pub async fn mfence(&self, core: &Core) -> Result<(), PcieError> {
        self.fence(core, PmEventKind::Mfence).await
    }

    async fn fence(&self, core: &Core, kind: PmEventKind) -> Result<(), PcieError> {
        self.check_core(core)?;
        core.sfence().await?;
        let _g = core.occupy().await;
        let p = &self.inner.profile;
        let op = self.op(core);
        let until = {
            let mut st = self.inner.state.borrow_mut();
            while let Some(l) = st.cores[core.index].wc.pop_oldest() {
                st.nt_line_out(p, &op, &l);
            }
            st.cores[core.index].outstanding
        };
        let sim = &self.inner.machine.sim;
        sim.sleep_until(until.max(op.now)).await;
        let done = self.op(core);
        self.inner
            .state
            .borrow_mut()
            .record(&done, kind, 0, 0, Purpose::UNTAGGED, &[]);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
