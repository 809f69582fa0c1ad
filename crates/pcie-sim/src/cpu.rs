//! A simulated CPU core: compute time, host memory copies, and the store
//! path to devices (uncached MMIO, write-combining stores, `clflush`,
//! fences, uncached reads).
//!
//! A core runs one thing at a time: every operation that occupies it (a
//! compute burst, a store, a fence's wait, the stall of an uncached read)
//! holds the core's occupancy lock, so threads pinned to the same core
//! share its time. Waiting for I/O completion does not occupy the core.
//!
//! **CPU accounting** ([`CpuStats`]): a core adds up the time it is
//! occupied, as kernel time unless the operation says it is user code
//! ([`Core::user`]), and counts the wake-ups a stack charges to it
//! ([`Core::wake_up`]: a thread that slept on I/O or on another thread is
//! woken and switched in, one wake-up and one context switch). Of the
//! kernel time, what interrupt handlers did is counted apart too
//! ([`CpuStats::irq`]: a handler works through [`Core::in_irq`]). Busy time is
//! measured, never stated: it is the simulated time the core's occupancy
//! was held. Waiting for a semaphore or for I/O is idle time, as a thread
//! that sleeps in Linux leaves its CPU to others.
//!
//! Counting convention (ccNVMe Table 1, `docs/architecture.md` 5): an uncached
//! store is one MMIO write operation; a write-combining burst (every line
//! that leaves between two fences) is one operation however many TLPs it
//! takes; an uncached read call is one MMIO read operation.

use std::rc::Rc;

use crate::addr::{BusAddr, HostAddr};
use crate::endpoint::BarKind;
use crate::error::PcieError;
use crate::machine::{Inner, ReadDone};
use crate::time::{Cycles, SimDuration, SimTime};
use crate::trace::{EventKind, Purpose, TraceEntry, FLAG_LINE_START, FLAG_WC, NO_PAYLOAD};
use crate::wc::{WcLine, LINE};

/// Largest single uncached read the model accepts (1 MiB).
pub const MAX_MMIO_READ: usize = 1 << 20;

/// Steps of a persistent write ([`Core::persist_wc`]) to leave out: fault
/// injection only, to show a crash checker catches their absence. A correct
/// caller leaves both false.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PersistSkips {
    /// Skip the `clflush`es and the `mfence`: the lines may stay in the WC
    /// buffers (and be lost) after the read.
    pub fence: bool,
    /// Skip the zero-length read: the lines may still be on the link.
    pub read: bool,
}

/// A handle to one simulated core.
#[derive(Clone)]
pub struct Core {
    pub(crate) machine: Rc<Inner>,
    pub(crate) index: usize,
    /// Work done through this handle is an interrupt handler's
    /// ([`Core::in_irq`]).
    pub(crate) irq: bool,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").field("index", &self.index).finish()
    }
}

/// The privilege level a core's time is charged to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Kernel,
    /// Kernel code run by an interrupt handler.
    Irq,
    User,
}

/// What a core (or, summed, a machine) spent its time on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuStats {
    /// Time occupied in kernel code: the storage stack, its stores and
    /// fences, the busy wait of an uncached read.
    pub kernel: SimDuration,
    /// Of `kernel`, the time occupied by interrupt handlers (work done
    /// through a [`Core::in_irq`] handle: entry, reaping completions,
    /// what a handler writes to the device).
    pub irq: SimDuration,
    /// Time occupied in user code ([`Core::user`]).
    pub user: SimDuration,
    /// Sleeping threads woken and switched in ([`Core::wake_up`]).
    pub wakeups: u64,
    /// Context switches: one per wake-up (the woken thread is switched in).
    pub context_switches: u64,
}

impl CpuStats {
    /// The sum of two cores' (or two intervals') statistics.
    pub fn plus(self, o: CpuStats) -> CpuStats {
        CpuStats {
            kernel: self.kernel + o.kernel,
            irq: self.irq + o.irq,
            user: self.user + o.user,
            wakeups: self.wakeups + o.wakeups,
            context_switches: self.context_switches + o.context_switches,
        }
    }

    /// What happened since `earlier`, a snapshot of the same counters.
    pub fn since(self, earlier: CpuStats) -> CpuStats {
        CpuStats {
            kernel: self.kernel - earlier.kernel,
            irq: self.irq - earlier.irq,
            user: self.user - earlier.user,
            wakeups: self.wakeups - earlier.wakeups,
            context_switches: self.context_switches - earlier.context_switches,
        }
    }

    /// Kernel and user utilization of `cores` cores over `elapsed`, each a
    /// fraction of the cores' time (0 when `elapsed` or `cores` is 0).
    pub fn utilization(&self, elapsed: SimDuration, cores: usize) -> (f64, f64) {
        let total = elapsed.as_ps() as f64 * cores as f64;
        if total == 0.0 {
            return (0.0, 0.0);
        }
        (
            self.kernel.as_ps() as f64 / total,
            self.user.as_ps() as f64 / total,
        )
    }
}

/// Holds the core for the duration of an operation (the core's one
/// occupancy permit, returned when dropped) and charges the time held.
pub(crate) struct Occupied<'a> {
    _permit: crate::occupancy::CorePermit<'a>,
    core: &'a Core,
    since: SimTime,
    mode: Mode,
}

impl Drop for Occupied<'_> {
    fn drop(&mut self) {
        let held = self.core.machine.sim.now().since(self.since);
        let cell = &self.core.state().stats;
        let mut st = cell.get();
        match self.mode {
            Mode::Kernel => st.kernel += held,
            Mode::Irq => {
                st.kernel += held;
                st.irq += held;
            }
            Mode::User => st.user += held,
        }
        cell.set(st);
    }
}

impl Core {
    /// This core's index.
    pub fn index(&self) -> usize {
        self.index
    }

    fn state(&self) -> &crate::machine::CoreState {
        &self.machine.cores[self.index]
    }

    /// Holds this core until the guard drops, charging the time to kernel
    /// code (also for the persistent-memory instructions, [`crate::pmem`]).
    pub(crate) async fn occupy(&self) -> Occupied<'_> {
        self.occupy_as(if self.irq { Mode::Irq } else { Mode::Kernel })
            .await
    }

    /// The same core, for an interrupt handler's work: what is done
    /// through the returned handle is kernel time counted as
    /// [`CpuStats::irq`] too.
    pub fn in_irq(&self) -> Core {
        Core {
            irq: true,
            ..self.clone()
        }
    }

    async fn occupy_as(&self, mode: Mode) -> Occupied<'_> {
        let permit = self.state().occupancy.acquire().await;
        Occupied {
            _permit: permit,
            core: self,
            since: self.machine.sim.now(),
            mode,
        }
    }

    /// What this core has spent its time on so far.
    pub fn stats(&self) -> CpuStats {
        self.state().stats.get()
    }

    /// Simulated time of `c` cycles of this core.
    pub fn time_of(&self, c: Cycles) -> SimDuration {
        self.machine.profile.cpu.clock.time_of(c)
    }

    /// Occupies the core for `cycles` of computation.
    pub async fn compute(&self, cycles: Cycles) {
        let _g = self.occupy().await;
        self.machine.sim.sleep(self.time_of(cycles)).await;
    }

    /// Occupies the core for a span of time (for costs given in time).
    pub async fn busy(&self, d: SimDuration) {
        let _g = self.occupy().await;
        self.machine.sim.sleep(d).await;
    }

    /// Occupies the core for a span of user code (an application's own
    /// work between system calls), charged to [`CpuStats::user`].
    pub async fn user(&self, d: SimDuration) {
        let _g = self.occupy_as(Mode::User).await;
        self.machine.sim.sleep(d).await;
    }

    /// A thread that slept on this core is woken and switched in: counts
    /// one wake-up and one context switch, and occupies the core for
    /// `cost` (the scheduler's work, a profile field of the caller: Linux
    /// `try_to_wake_up` and `__schedule`).
    pub async fn wake_up(&self, cost: SimDuration) {
        let cell = &self.state().stats;
        let mut st = cell.get();
        st.wakeups += 1;
        st.context_switches += 1;
        cell.set(st);
        self.busy(cost).await;
    }

    /// Copies `data` into host DRAM, charging the copy to this core.
    pub async fn write_mem(&self, addr: HostAddr, data: &[u8]) -> Result<(), PcieError> {
        self.machine.mem.write(addr, data)?;
        self.compute(self.copy_cycles(data.len())).await;
        Ok(())
    }

    /// Copies host DRAM into `buf`, charging the copy to this core.
    pub async fn read_mem(&self, addr: HostAddr, buf: &mut [u8]) -> Result<(), PcieError> {
        self.machine.mem.read(addr, buf)?;
        self.compute(self.copy_cycles(buf.len())).await;
        Ok(())
    }

    /// Cycles to copy `bytes` in DRAM.
    pub fn copy_cycles(&self, bytes: usize) -> Cycles {
        let per = self.machine.profile.cpu.memcpy_bytes_per_cycle.max(1) as u64;
        Cycles((bytes as u64).div_ceil(per).max(1))
    }

    /// An uncached store (a doorbell or register write): drains the WC
    /// buffers first, then sends one posted write. Returns once the store
    /// retired (the root complex accepted it).
    pub async fn mmio_write(
        &self,
        addr: BusAddr,
        data: &[u8],
        purpose: Purpose,
        attr: u32,
    ) -> Result<(), PcieError> {
        let _g = self.occupy().await;
        self.drain_wc().await?;
        self.mark_fence();
        let st = self.machine.now();
        let end =
            self.machine
                .emit_host_write(self.index, addr.0, data, purpose, attr, 0, SimDuration::ZERO)?;
        self.machine
            .trace
            .borrow_mut()
            .count_op(EventKind::MmioWrite, purpose);
        let retire = (st + self.time_of(self.machine.profile.cpu.uc_store_cycles)).max(end);
        self.machine.sim.sleep_until(retire).await;
        Ok(())
    }

    /// Stores `data` into the write-combining buffers. The target must be a
    /// WC-mapped BAR (a PMR). Lines that fill or are evicted leave at once.
    pub async fn wc_store(
        &self,
        addr: BusAddr,
        data: &[u8],
        purpose: Purpose,
        attr: u32,
    ) -> Result<(), PcieError> {
        let layout = self.machine.layout.borrow().decode(addr.0, data.len() as u64);
        match layout {
            Some((_, BarKind::Pmr, _)) => {}
            _ => return Err(PcieError::NotWriteCombining { addr: addr.0 }),
        }
        let _g = self.occupy().await;
        let now = self.machine.now();
        self.machine.trace.borrow_mut().record(
            TraceEntry {
                time: now,
                effect: now,
                addr: addr.0,
                payload: NO_PAYLOAD,
                len: data.len() as u32,
                attr,
                kind: EventKind::WcStore,
                purpose,
                source: self.index as u8,
                flags: 0,
                code: 0,
                wire_bytes: 0,
            },
            data,
        );
        let mut out = self.state().scratch.take();
        self.state()
            .wc
            .borrow_mut()
            .store(addr.0, data, purpose, attr, &mut out);
        let r = self.emit_lines(&out).await;
        out.clear();
        self.state().scratch.replace(out);
        r?;
        let st = self.state();
        st.wc_stores.set(st.wc_stores.get() + 1);
        if !st.wc.borrow().is_empty() && !st.evictor.replace(true) {
            let core = self.clone();
            self.machine
                .sim
                .spawn(async move { core.evict_when_idle().await });
        }
        let stores = (data.len() as u64).div_ceil(8);
        let c = self.machine.profile.cpu.wc_store_cycles * stores;
        self.machine.sim.sleep(self.time_of(c)).await;
        Ok(())
    }

    /// `clflush` of the line holding `addr`: a buffered WC line leaves.
    pub async fn clflush(&self, addr: BusAddr) -> Result<(), PcieError> {
        let _g = self.occupy().await;
        let line = addr.0 & !(LINE as u64 - 1);
        if self.state().wc.borrow().lines().iter().any(|l| l.addr == line) {
            // The line leaves the buffer when its slot comes, so the buffer
            // and the trace agree at every point (the crash model replays
            // the departure at the line's first TLP).
            self.line_slot().await;
            let taken = self.state().wc.borrow_mut().take_line(line);
            if let Some(l) = taken {
                self.emit_line(&l)?;
            }
        }
        let c = self.machine.profile.cpu.clflush_cycles;
        self.machine.sim.sleep(self.time_of(c)).await;
        Ok(())
    }

    /// `sfence`: drains every WC buffer and waits until the lines that left
    /// since the last fence are globally visible at the root complex.
    pub async fn sfence(&self) -> Result<(), PcieError> {
        self.fence().await
    }

    /// `mfence`: as [`Core::sfence`] for the store path this model has.
    pub async fn mfence(&self) -> Result<(), PcieError> {
        self.fence().await
    }

    async fn fence(&self) -> Result<(), PcieError> {
        let _g = self.occupy().await;
        self.drain_wc().await?;
        let cpu = &self.machine.profile.cpu;
        let mut until = self.machine.now() + self.time_of(cpu.fence_cycles);
        let st = self.state();
        if st.burst_open.replace(false) {
            // Globally visible: the last line reached the root port (its
            // acceptance time includes the uncore crossing); it is then on
            // the link, not yet at the device.
            until = until.max(st.last_accepted.get());
        }
        self.machine.sim.sleep_until(until).await;
        self.mark_fence();
        Ok(())
    }

    /// Records that every WC line this core sent so far is ordered before
    /// whatever it sends next (a fence completed, or an uncached access
    /// drained the buffers): the crash model's rule W ends the lines'
    /// freedom to leave in any order here (`docs/persistence.md` 1). Only
    /// when lines left since the last marker, so a core that never
    /// touches WC memory adds nothing to the trace.
    fn mark_fence(&self) {
        if self.state().unfenced.replace(false) {
            self.machine
                .record_marker(EventKind::Fence, self.index as u8, 0, 0);
        }
    }

    /// An uncached read of `buf.len()` bytes at `addr` (0 bytes: a
    /// zero-length read, which PCIe orders behind every earlier posted
    /// write, so its completion proves they reached the device). Drains
    /// the WC buffers first; each load of up to `mmio_read_chunk` bytes is
    /// one non-posted request and the core stalls until its completion.
    pub async fn mmio_read(
        &self,
        addr: BusAddr,
        buf: &mut [u8],
        purpose: Purpose,
        attr: u32,
    ) -> Result<(), PcieError> {
        self.read(addr, buf, purpose, attr, true).await
    }

    /// A read through a write-combining mapping (as ccNVMe maps the PMR).
    /// Like [`Core::mmio_read`], but it does not drain the WC buffers: per
    /// the Intel SDM (Vol. 3, 11.3.1) only a fence, a serializing
    /// instruction or an access to *uncached* memory evicts them, so lines
    /// still buffered are not ordered before this read. A zero-length
    /// WC read therefore proves the arrival of what earlier fences sent,
    /// not of what is still in the buffers.
    pub async fn wc_read(
        &self,
        addr: BusAddr,
        buf: &mut [u8],
        purpose: Purpose,
        attr: u32,
    ) -> Result<(), PcieError> {
        self.read(addr, buf, purpose, attr, false).await
    }

    /// A persistent MMIO write: stores `data` at `addr` through the
    /// write-combining mapping, then makes it persistent as
    /// [`Core::persist_wc`] does (reading at the line of `addr`). At return
    /// the bytes are in the device (for a PMR: persistent).
    pub async fn persistent_write(
        &self,
        addr: BusAddr,
        data: &[u8],
        purpose: Purpose,
        attr: u32,
        skip: PersistSkips,
    ) -> Result<(), PcieError> {
        self.wc_store(addr, data, purpose, attr).await?;
        let read_at = BusAddr(addr.0 & !(LINE as u64 - 1));
        self.persist_wc(&[(addr, data.len() as u64)], read_at, attr, skip)
            .await
    }

    /// Makes earlier WC stores to `ranges` (bus address, length) persistent:
    /// `clflush` of every line the ranges touch, `mfence`, then a
    /// zero-length read at `read_at` (a WC-mapped address of the same
    /// device), counted as one [`Purpose::FLUSH_READ`] MMIO read.
    ///
    /// Why each step (ccNVMe 4.3, Figure 4(a); Horae's persistent MMIO):
    /// - `clflush` + `mfence` empty the WC buffers and wait until the
    ///   lines are globally visible, that is posted writes in the root
    ///   port (Intel SDM Vol. 3A 11.3.1 and Vol. 2A CLFLUSH: the fence
    ///   orders the flushes). Visible is not arrived: the writes may still
    ///   be on the link.
    /// - The zero-length read goes out behind them and a read request may
    ///   not pass a posted write (PCIe 3.0 2.4.1, Table 2-39, row B column
    ///   2), so its completion proves the writes reached the device.
    ///
    /// The read is a read through the *WC mapping* ([`Core::wc_read`]), as
    /// the drivers map the PMR, not an uncached read: per the SDM a WC read
    /// does not drain the WC buffers, so the fence is what sends the lines
    /// and the read only proves their arrival. An uncached read
    /// ([`Core::mmio_read`]) would drain the buffers itself and hide a
    /// missing fence, which fault injection must be able to show.
    ///
    /// `skip` leaves steps out (fault injection; a correct caller passes
    /// [`PersistSkips::default`]).
    pub async fn persist_wc(
        &self,
        ranges: &[(BusAddr, u64)],
        read_at: BusAddr,
        attr: u32,
        skip: PersistSkips,
    ) -> Result<(), PcieError> {
        if !skip.fence {
            for &(addr, len) in ranges {
                let first = addr.0 & !(LINE as u64 - 1);
                let end = addr.0 + len.max(1);
                let mut line = first;
                while line < end {
                    self.clflush(BusAddr(line)).await?;
                    line += LINE as u64;
                }
            }
            self.mfence().await?;
        }
        if !skip.read {
            self.wc_read(read_at, &mut [], Purpose::FLUSH_READ, attr).await?;
        }
        Ok(())
    }

    async fn read(
        &self,
        addr: BusAddr,
        buf: &mut [u8],
        purpose: Purpose,
        attr: u32,
        drain: bool,
    ) -> Result<(), PcieError> {
        if buf.len() > MAX_MMIO_READ {
            return Err(PcieError::TooLarge {
                len: buf.len() as u64,
                max: MAX_MMIO_READ as u64,
            });
        }
        let _g = self.occupy().await;
        if drain {
            self.drain_wc().await?;
            self.mark_fence();
        }
        self.machine
            .trace
            .borrow_mut()
            .count_op(EventKind::MmioRead, purpose);
        let chunk = self.machine.profile.cpu.mmio_read_chunk.max(1) as usize;
        let load = self.time_of(self.machine.profile.cpu.uc_load_cycles);
        let mut off = 0usize;
        loop {
            let n = chunk.min(buf.len() - off);
            self.machine.sim.sleep(load).await;
            let tag =
                self.machine
                    .emit_host_read(self.index, addr.0 + off as u64, n as u32, purpose, attr)?;
            let w = ReadDone {
                machine: self.machine.clone(),
                tag,
            }
            .await;
            let failed = w.failed;
            if !failed {
                buf[off..off + n].copy_from_slice(&w.buf[..n]);
            }
            self.machine.reads.borrow_mut().recycle(w.buf);
            if failed {
                return Err(PcieError::UnsupportedRequest {
                    addr: addr.0 + off as u64,
                    what: "read rejected by the completer",
                });
            }
            off += n;
            if off >= buf.len() {
                return Ok(());
            }
        }
    }

    /// Waits until the core has stored nothing to WC memory for
    /// `wc_idle_evict`, then sends what is still buffered (hardware
    /// eviction: it does not occupy the core).
    async fn evict_when_idle(&self) {
        let idle = self.machine.profile.cpu.wc_idle_evict;
        let mut seen = self.state().wc_stores.get();
        loop {
            self.machine.sim.sleep(idle).await;
            if self.state().wc.borrow().is_empty() {
                break;
            }
            let now = self.state().wc_stores.get();
            if now != seen {
                seen = now;
                continue;
            }
            // The lines were stored to a PMR mapping that decoded at store
            // time; a failure here (the BAR moved) drops them, as hardware
            // would.
            let _ = self.drain_wc().await;
            // Lines stored while the drain waited for its slots stay
            // buffered; they get their own idle period.
            seen = self.state().wc_stores.get();
        }
        self.state().evictor.set(false);
    }

    /// Sends every buffered WC line (before an uncached access or a fence),
    /// oldest first. Each line leaves the buffer when its slot comes (not
    /// all at once), so the buffer holds exactly the lines whose first TLP
    /// is not in the trace yet: a store that arrives while a drain waits
    /// for a slot combines into a line still buffered, and the crash model
    /// ([`crate::CrashCursor`]) replaying the trace sees the same buffer.
    /// Lines allocated after the drain began (possible only while the idle
    /// evictor drains, which does not occupy the core) stay buffered.
    ///
    /// A core's lines leave in the order they left its buffers: lines a
    /// store filled or evicted for room are out of the buffers already and
    /// wait for their slots (`CoreState::leaving`), so a drain that runs
    /// beside that store (the idle evictor) lets them have the slot first.
    /// Otherwise a line buffered again at the address of an evicted one
    /// could reach the device before it, and the older bytes overwrite the
    /// newer: a core's stores to one address arrive in program order
    /// (Intel SDM Vol. 3A 8.2.2, "writes by a single processor are
    /// observed in the same order by all processors"; a line is sent
    /// before its buffer is reused, 11.3.1).
    async fn drain_wc(&self) -> Result<(), PcieError> {
        let count = self.state().wc.borrow().lines().len();
        for _ in 0..count {
            loop {
                self.line_slot().await;
                if self.state().leaving.get() == 0 {
                    break;
                }
                // The store sending them waits for this very slot; it runs
                // first, and this drain waits for the slot after.
                self.machine.sim.yield_now().await;
            }
            let line = self.state().wc.borrow_mut().pop_oldest();
            match line {
                Some(l) => self.emit_line(&l)?,
                None => break,
            }
        }
        Ok(())
    }

    /// Sends lines that already left the WC buffers (filled, or evicted for
    /// room), in order, each in its slot.
    async fn emit_lines(&self, lines: &[WcLine]) -> Result<(), PcieError> {
        let st = self.state();
        st.leaving.set(st.leaving.get() + lines.len());
        let mut r = Ok(());
        for (i, line) in lines.iter().enumerate() {
            self.line_slot().await;
            st.leaving.set(st.leaving.get() - 1);
            r = self.emit_line(line);
            if r.is_err() {
                // The rest are dropped with the error: none is waiting.
                st.leaving.set(st.leaving.get() - (lines.len() - 1 - i));
                break;
            }
        }
        r
    }

    /// Waits for this core's next line slot: lines leave one core at most
    /// one per `wc_line_interval` (the core's write-combining path to the
    /// uncore).
    async fn line_slot(&self) {
        loop {
            let slot = self.state().next_line.get();
            if slot <= self.machine.now() {
                return;
            }
            self.machine.sim.sleep_until(slot).await;
        }
    }

    /// Sends one line now, in the slot [`Core::line_slot`] waited for: one
    /// posted write per run of valid bytes, the first flagged
    /// `FLAG_LINE_START`. The first line of a burst counts one MMIO
    /// operation.
    fn emit_line(&self, line: &WcLine) -> Result<(), PcieError> {
        let st = self.state();
        st.unfenced.set(true);
        st.next_line
            .set(self.machine.now() + self.machine.profile.cpu.wc_line_interval);
        if !st.burst_open.replace(true) {
            self.machine
                .trace
                .borrow_mut()
                .count_op(EventKind::MmioWrite, line.purpose);
        }
        let mut first = true;
        for (off, len) in line.runs() {
            let flags = FLAG_WC | if first { FLAG_LINE_START } else { 0 };
            first = false;
            let accepted = self.machine.emit_host_write(
                self.index,
                line.addr + off as u64,
                &line.data[off..off + len],
                line.purpose,
                line.attr,
                flags,
                self.machine.profile.cpu.wc_drain_latency,
            )?;
            st.last_accepted.set(st.last_accepted.get().max(accepted));
        }
        Ok(())
    }

    /// The WC lines this core holds now (for tests and the crash model).
    pub fn buffered_lines(&self) -> Vec<WcLine> {
        self.state().wc.borrow().lines().to_vec()
    }

    /// The simulated time now.
    pub fn now(&self) -> SimTime {
        self.machine.now()
    }
}
