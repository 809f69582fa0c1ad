//! The machine: host memory, cores, one PCIe link per attached device, the
//! bus trace, and the bus engine that applies every request at the time the
//! link and the device ingress say it takes effect.
//!
//! A request is timed when it is emitted: it waits for the transmitter (and
//! a posted credit, for host writes to a device), crosses the link, and is
//! served by the device's ingress in order. All of that is FIFO, so the
//! times can be computed at emission; the effect itself (a register write,
//! PMR bytes, a completion waking a core) is queued as a bus action and
//! applied by the bus engine task at its time.

use std::cell::{Cell, Ref, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use crate::addr::BusAddr;
use crate::endpoint::{BarKind, BarLayout, Endpoint};
use crate::error::PcieError;
use crate::executor::{EventSink, Executor, Sim, SinkId};
use crate::host_mem::HostMemory;
use crate::irq::{InterruptController, MSI_ADDRESS};
use crate::link::{Serializer, TlpKind};
use crate::pmr::PageStore;
use crate::port::DevicePort;
use crate::profile::MachineProfile;
use crate::time::SimTime;
use crate::trace::{
    BusTrace, Counters, EventKind, Purpose, TraceEntry, TraceMode, FLAG_PMR, FLAG_UR, NO_PAYLOAD,
};
use crate::wc::WriteCombiningBuffer;

mod fabric;

/// First bus address handed to device BARs (the PCI hole below 4 GiB).
pub const BAR_WINDOW_BASE: u64 = 0xC000_0000;

/// Where each device's BARs sit on the bus.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BusLayout {
    /// Per port: (BAR0 base, BAR0 size, PMR base and size if any).
    pub ports: Vec<PortLayout>,
}

/// The BAR placement of one device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortLayout {
    /// Base of the register BAR.
    pub regs_base: BusAddr,
    /// Size of the register BAR.
    pub regs_size: u64,
    /// Base and size of the PMR BAR.
    pub pmr: Option<(BusAddr, u64)>,
}

impl BusLayout {
    /// Decodes a bus address: (port, BAR, offset), if any BAR claims
    /// `[addr, addr + len)` entirely.
    pub fn decode(&self, addr: u64, len: u64) -> Option<(u8, BarKind, u64)> {
        let end = addr.checked_add(len.max(1))?;
        for (i, p) in self.ports.iter().enumerate() {
            let rb = p.regs_base.0;
            if addr >= rb && end <= rb + p.regs_size {
                return Some((i as u8, BarKind::Registers, addr - rb));
            }
            if let Some((pb, ps)) = p.pmr {
                if addr >= pb.0 && end <= pb.0 + ps {
                    return Some((i as u8, BarKind::Pmr, addr - pb.0));
                }
            }
        }
        None
    }
}

/// Bytes a [`Payload`] carries inline (one WC line, a queue entry).
pub(crate) const INLINE_PAYLOAD: usize = 64;

/// Bytes carried by a bus action (inline up to [`INLINE_PAYLOAD`]).
#[derive(Debug)]
pub(crate) enum Payload {
    Inline(u8, [u8; INLINE_PAYLOAD]),
    Heap(Vec<u8>),
    /// A range of a page the sender shares (a device's stored block sent
    /// by DMA without a copy); the page is never written while shared.
    Shared(SharedPage, std::ops::Range<usize>),
}

/// A 4 KiB page shared read-only between a device and a bus action.
pub type SharedPage = std::sync::Arc<[u8; crate::host_mem::PAGE_SIZE as usize]>;

impl Payload {
    pub(crate) fn new(data: &[u8]) -> Self {
        if data.len() <= INLINE_PAYLOAD {
            let mut b = [0u8; INLINE_PAYLOAD];
            b[..data.len()].copy_from_slice(data);
            Payload::Inline(data.len() as u8, b)
        } else {
            Payload::Heap(data.to_vec())
        }
    }
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            Payload::Inline(n, b) => &b[..*n as usize],
            Payload::Heap(v) => v,
            Payload::Shared(p, r) => &p[r.clone()],
        }
    }
}

/// An effect waiting for its time.
#[derive(Debug)]
pub(crate) enum Action {
    /// A posted write reaches a device register.
    RegWrite { port: u8, offset: u64, data: Payload },
    /// A posted write lands in a device's PMR.
    PmrWrite { port: u8, offset: u64, data: Payload },
    /// A device finished serving a read request; send the completion.
    DeviceRead {
        port: u8,
        bar: BarKind,
        offset: u64,
        len: u32,
        tag: u32,
        attr: u32,
        purpose: Purpose,
        ur: bool,
    },
    /// A completion for a core's read arrives at the root complex.
    MmioCompletion {
        tag: u32,
        data: Payload,
        ur: bool,
        covers: u32,
    },
    /// The root complex serves a device's DMA read request.
    ServeDmaRead {
        port: u8,
        addr: u64,
        len: u32,
        tag: u32,
        offset: u32,
        purpose: Purpose,
        attr: u32,
    },
    /// The last completion of a device's DMA read arrives at the device:
    /// the read is done. Its bytes are in the reader's buffer already:
    /// they were sampled into it when each request was served (see
    /// `serve_dma_read`), and a request refused then marked the read
    /// failed.
    DmaCompletion { tag: u32 },
    /// A DMA write arrives in host memory.
    HostWrite { addr: u64, data: Payload },
    /// An MSI-X message arrives.
    Msix { vector: u16 },
}

/// Outstanding non-posted reads, by tag.
#[derive(Default)]
pub(crate) struct ReadTable {
    slots: Vec<Option<ReadWait>>,
    free: Vec<u32>,
    /// Buffers of finished reads, reused by the next ones: a DMA read per
    /// command would otherwise allocate (and page in) a fresh buffer.
    spare: Vec<Vec<u8>>,
}

/// Read buffers [`ReadTable`] keeps for reuse (reads in flight at once are
/// few: one per outstanding DMA or MMIO read).
const SPARE_READ_BUFFERS: usize = 32;

pub(crate) struct ReadWait {
    /// The bytes read, each at its offset (a DMA read's sampled when its
    /// request is served, an MMIO read's when its completion arrives).
    pub(crate) buf: Vec<u8>,
    /// Bytes the read asks for.
    pub(crate) len: usize,
    pub(crate) remaining: u64,
    /// A DMA read's bytes whose requests the root complex has not served
    /// yet (the one that serves the last schedules the read's completion).
    pub(crate) unserved: u64,
    pub(crate) failed: bool,
    pub(crate) waker: Option<Waker>,
}

impl ReadTable {
    pub(crate) fn open(&mut self, len: usize, expected: u64) -> u32 {
        // Empty: the bytes are appended in order (no zero-fill first).
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        let w = ReadWait {
            buf,
            len,
            remaining: expected,
            unserved: expected,
            failed: false,
            waker: None,
        };
        match self.free.pop() {
            Some(t) => {
                self.slots[t as usize] = Some(w);
                t
            }
            None => {
                self.slots.push(Some(w));
                (self.slots.len() - 1) as u32
            }
        }
    }
    fn get(&mut self, tag: u32) -> Option<&mut ReadWait> {
        self.slots.get_mut(tag as usize).and_then(|s| s.as_mut())
    }
    /// Bytes `at..at + len` of open read `tag`'s buffer.
    pub(crate) fn sampled(&self, tag: u32, at: usize, len: usize) -> Option<&[u8]> {
        self.slots.get(tag as usize)?.as_ref()?.buf.get(at..at + len)
    }
    /// Gives a finished read's buffer back for the next read to reuse.
    pub(crate) fn recycle(&mut self, buf: Vec<u8>) {
        if self.spare.len() < SPARE_READ_BUFFERS {
            self.spare.push(buf);
        }
    }
    fn close(&mut self, tag: u32) -> Option<ReadWait> {
        let w = self.slots.get_mut(tag as usize)?.take();
        if w.is_some() {
            self.free.push(tag);
        }
        w
    }
}

/// Future resolving when every completion of a read tag has arrived.
pub(crate) struct ReadDone {
    pub(crate) machine: Rc<Inner>,
    pub(crate) tag: u32,
}

impl Future for ReadDone {
    type Output = ReadWait;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ReadWait> {
        let mut reads = self.machine.reads.borrow_mut();
        // The tag is this reader's until it closes it below.
        let done = match reads.get(self.tag) {
            None => unreachable!("read tag {} closed before its reader saw it done", self.tag),
            Some(w) if w.remaining == 0 => true,
            Some(w) => {
                w.waker = Some(cx.waker().clone());
                false
            }
        };
        if done {
            let Some(w) = reads.close(self.tag) else {
                unreachable!("read tag {} was open a moment ago", self.tag);
            };
            return Poll::Ready(w);
        }
        Poll::Pending
    }
}

/// Sees every write to a device's PMR when it takes effect: the PMR offset
/// and the bytes written (see [`Machine::set_pmr_write_hook`]).
pub type PmrWriteHook = Rc<dyn Fn(u64, &[u8])>;

/// Per-device link and ingress state.
pub(crate) struct PortState {
    pub(crate) layout: BarLayout,
    pub(crate) pmr: PageStore,
    /// Called after every write lands in `pmr`.
    pub(crate) pmr_hook: Option<PmrWriteHook>,
    /// What the machine's programs read of the PMR before writing it
    /// (`None`: not logging; see [`Machine::log_pmr_access`]).
    pub(crate) pmr_access: Option<crate::observe::AccessLog>,
    pub(crate) down: Serializer,
    pub(crate) up: Serializer,
    /// When the device ingress finishes the last request queued to it.
    pub(crate) ingress_free_at: SimTime,
    /// Release times of posted credits in use (monotonic).
    pub(crate) credits: VecDeque<SimTime>,
    /// Transmission start times of the last posted writes queued in the
    /// root port (monotonic); bounds the root port's posted buffer.
    pub(crate) rc_queue: VecDeque<SimTime>,
}

pub(crate) struct CoreState {
    pub(crate) wc: RefCell<WriteCombiningBuffer>,
    pub(crate) occupancy: crate::occupancy::CoreLock,
    /// A WC burst has started leaving since the last fence.
    pub(crate) burst_open: Cell<bool>,
    /// WC lines left this core since its last [`crate::trace::EventKind::Fence`]
    /// marker: the next drain records one.
    pub(crate) unfenced: Cell<bool>,
    /// When the root port accepted the latest of this core's posted writes.
    pub(crate) last_accepted: Cell<SimTime>,
    /// Earliest time the next write-combining line may leave this core.
    pub(crate) next_line: Cell<SimTime>,
    /// Reused buffer for lines leaving the WC buffers.
    pub(crate) scratch: Cell<Vec<crate::wc::WcLine>>,
    /// Lines that left the WC buffers (filled, or evicted for room) and
    /// wait for their slots: the idle evictor takes no line from the
    /// buffers before they are sent (`Core::drain_wc`).
    pub(crate) leaving: Cell<usize>,
    /// WC stores so far (the idle evictor watches it).
    pub(crate) wc_stores: Cell<u64>,
    /// An idle evictor is waiting.
    pub(crate) evictor: Cell<bool>,
    /// Busy time, wake-ups and context switches so far.
    pub(crate) stats: Cell<crate::cpu::CpuStats>,
}

/// Actions waiting for their time, by slot; the executor holds the timing.
#[derive(Default)]
struct BusQueue {
    actions: Vec<Option<Action>>,
    free: Vec<u32>,
}

pub(crate) struct Inner {
    pub(crate) sim: Sim,
    pub(crate) profile: MachineProfile,
    pub(crate) mem: HostMemory,
    pub(crate) trace: RefCell<BusTrace>,
    pub(crate) cores: Vec<CoreState>,
    pub(crate) ports: RefCell<Vec<PortState>>,
    pub(crate) endpoints: RefCell<Vec<Option<Rc<dyn Endpoint>>>>,
    pub(crate) layout: RefCell<BusLayout>,
    pub(crate) irq: InterruptController,
    pub(crate) reads: RefCell<ReadTable>,
    bus: RefCell<BusQueue>,
    bus_sink: Cell<Option<SinkId>>,
    next_bar: Cell<u64>,
}

/// The simulated machine. Cheap to clone (a handle).
#[derive(Clone)]
pub struct Machine {
    pub(crate) inner: Rc<Inner>,
}

impl std::fmt::Debug for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Machine")
            .field("cores", &self.inner.cores.len())
            .field("ports", &self.inner.ports.borrow().len())
            .finish()
    }
}

impl Machine {
    /// Builds a machine on `executor` and starts its bus engine.
    pub fn new(executor: &Executor, profile: MachineProfile, trace_mode: TraceMode) -> Machine {
        let cores = (0..profile.cpu.cores)
            .map(|_| CoreState {
                wc: RefCell::new(WriteCombiningBuffer::new(profile.cpu.wc_buffers)),
                occupancy: crate::occupancy::CoreLock::default(),
                burst_open: Cell::new(false),
                unfenced: Cell::new(false),
                last_accepted: Cell::new(SimTime::ZERO),
                next_line: Cell::new(SimTime::ZERO),
                scratch: Cell::new(Vec::with_capacity(profile.cpu.wc_buffers + 2)),
                leaving: Cell::new(0),
                wc_stores: Cell::new(0),
                evictor: Cell::new(false),
                stats: Cell::new(crate::cpu::CpuStats::default()),
            })
            .collect();
        let inner = Rc::new(Inner {
            sim: executor.sim(),
            mem: HostMemory::new(profile.host.dram_bytes),
            profile,
            trace: RefCell::new(BusTrace::new(trace_mode)),
            cores,
            ports: RefCell::new(Vec::new()),
            endpoints: RefCell::new(Vec::new()),
            layout: RefCell::new(BusLayout::default()),
            irq: InterruptController::default(),
            reads: RefCell::new(ReadTable::default()),
            bus: RefCell::new(BusQueue::default()),
            bus_sink: Cell::new(None),
            next_bar: Cell::new(BAR_WINDOW_BASE),
        });
        let sink = executor.sim().register_sink(inner.clone());
        inner.bus_sink.set(Some(sink));
        Machine { inner }
    }

    /// The simulation this machine runs in.
    pub fn sim(&self) -> Sim {
        self.inner.sim.clone()
    }

    /// The profile the machine was built with.
    pub fn profile(&self) -> &MachineProfile {
        &self.inner.profile
    }

    /// Host DRAM.
    pub fn memory(&self) -> &HostMemory {
        &self.inner.mem
    }

    /// The interrupt controller.
    pub fn interrupts(&self) -> &InterruptController {
        &self.inner.irq
    }

    /// True when nothing is on its way anywhere on the bus: no core holds a
    /// write-combining line and no transaction waits to take effect (no
    /// posted write in flight, no read outstanding, no DMA under way).
    pub fn bus_quiescent(&self) -> bool {
        self.inner.cores.iter().all(|c| c.wc.borrow().is_empty())
            && self.inner.bus.borrow().actions.iter().all(Option::is_none)
    }

    /// Waits (in simulated time, polling every `poll`) until the bus is
    /// quiescent ([`Machine::bus_quiescent`]). Idle write-combining lines
    /// leave on their own after the CPU profile's idle-eviction time.
    pub async fn quiesce(&self, poll: crate::time::SimDuration) {
        while !self.bus_quiescent() {
            self.inner.sim.sleep(poll).await;
        }
    }

    /// Number of cores.
    pub fn core_count(&self) -> usize {
        self.inner.cores.len()
    }

    /// What all cores together have spent their time on so far
    /// ([`crate::cpu::CpuStats`]); take two snapshots for an interval.
    pub fn cpu_stats(&self) -> crate::cpu::CpuStats {
        self.inner
            .cores
            .iter()
            .fold(crate::cpu::CpuStats::default(), |sum, c| sum.plus(c.stats.get()))
    }

    /// A handle to core `index`.
    pub fn core(&self, index: usize) -> Result<crate::cpu::Core, PcieError> {
        if index >= self.inner.cores.len() {
            return Err(PcieError::NoSuchCore(index));
        }
        Ok(crate::cpu::Core {
            machine: self.inner.clone(),
            index,
            irq: false,
        })
    }

    /// Plugs in a device with these BARs. `pmr_image` is the content its
    /// PMR starts with (after a power failure: the crashed image); `None`
    /// starts it zeroed. Connect the device's [`Endpoint`] with
    /// [`Machine::connect`] before the host touches it.
    pub fn add_device(&self, layout: BarLayout, pmr_image: Option<PageStore>) -> DevicePort {
        let align = |v: u64, a: u64| v.div_ceil(a) * a;
        let regs_base = align(self.inner.next_bar.get(), layout.regs_size.max(4096));
        let mut next = regs_base + layout.regs_size;
        let pmr = layout.pmr.as_ref().map(|p| {
            let base = align(next, p.size.next_power_of_two().max(4096));
            next = base + p.size;
            (BusAddr(base), p.size)
        });
        self.inner.next_bar.set(next);
        let placement = PortLayout {
            regs_base: BusAddr(regs_base),
            regs_size: layout.regs_size,
            pmr,
        };
        let pmr_size = layout.pmr.as_ref().map_or(0, |p| p.size);
        let store = match pmr_image {
            Some(img) if img.len() == pmr_size => img,
            _ => PageStore::zeroed(pmr_size),
        };
        let mut ports = self.inner.ports.borrow_mut();
        ports.push(PortState {
            layout,
            pmr: store,
            pmr_hook: None,
            pmr_access: None,
            down: Serializer::default(),
            up: Serializer::default(),
            ingress_free_at: SimTime::ZERO,
            credits: VecDeque::new(),
            rc_queue: VecDeque::new(),
        });
        self.inner.endpoints.borrow_mut().push(None);
        self.inner.layout.borrow_mut().ports.push(placement);
        DevicePort {
            machine: self.inner.clone(),
            port: (ports.len() - 1) as u8,
        }
    }

    /// Connects the device behind `port`.
    pub fn connect(&self, port: &DevicePort, endpoint: Rc<dyn Endpoint>) {
        self.inner.endpoints.borrow_mut()[port.index() as usize] = Some(endpoint);
    }

    /// Where every BAR sits.
    pub fn layout(&self) -> BusLayout {
        self.inner.layout.borrow().clone()
    }

    /// Base address of a device's BAR.
    pub fn bar(&self, port: u8, bar: BarKind) -> Option<BusAddr> {
        let l = self.inner.layout.borrow();
        let p = l.ports.get(port as usize)?;
        match bar {
            BarKind::Registers => Some(p.regs_base),
            BarKind::Pmr => p.pmr.map(|(b, _)| b),
        }
    }

    /// The traffic counters so far.
    pub fn counters(&self) -> Counters {
        self.inner.trace.borrow().counters()
    }

    /// The bus trace so far.
    pub fn trace(&self) -> Ref<'_, BusTrace> {
        self.inner.trace.borrow()
    }

    /// Changes how much of the trace is kept from now on.
    pub fn set_trace_mode(&self, mode: TraceMode) {
        self.inner.trace.borrow_mut().set_mode(mode);
    }

    /// Takes the recorded trace, leaving an empty one in the same mode.
    pub fn take_trace(&self) -> BusTrace {
        let mut t = self.inner.trace.borrow_mut();
        let mode = t.mode();
        std::mem::replace(&mut *t, BusTrace::new(mode))
    }

    /// Sets (or with `None` removes) the hook that sees every write to the
    /// PMR of `port` at the moment it lands there, which is the moment it
    /// becomes persistent: after the bytes are in the PMR store and before
    /// the device is told. A write-through for tools that keep a PMR image
    /// in a file, so that a process killed at any point leaves in the file
    /// exactly what the simulated PMR holds. It changes no timing and no
    /// trace; the hook must not call back into the machine. Returns false
    /// if there is no such port.
    pub fn set_pmr_write_hook(&self, port: u8, hook: Option<PmrWriteHook>) -> bool {
        match self.inner.ports.borrow_mut().get_mut(port as usize) {
            Some(p) => {
                p.pmr_hook = hook;
                true
            }
            None => false,
        }
    }

    /// Starts logging what the host and the device read of the PMR of
    /// `port` before writing it ([`crate::observe`]): a crash checker learns
    /// which PMR lines its verdict depends on. Returns false if there is no
    /// such port.
    pub fn log_pmr_access(&self, port: u8) -> bool {
        match self.inner.ports.borrow_mut().get_mut(port as usize) {
            Some(p) => {
                p.pmr_access = Some(Default::default());
                true
            }
            None => false,
        }
    }

    /// The PMR access log of `port` since [`Machine::log_pmr_access`] or
    /// the last take; logging goes on with a fresh log (so a checker can
    /// log its phases apart). `None` if not logging.
    pub fn take_pmr_access(&self, port: u8) -> Option<crate::observe::AccessLog> {
        let mut ports = self.inner.ports.borrow_mut();
        let p = ports.get_mut(port as usize)?;
        p.pmr_access.as_mut().map(std::mem::take)
    }

    /// The current content of a device's PMR (writes that have taken
    /// effect; writes still on the link are not in it).
    pub fn pmr_image(&self, port: u8) -> Option<PageStore> {
        self.inner
            .ports
            .borrow()
            .get(port as usize)
            .map(|p| p.pmr.clone())
    }
}

/// The MSI-X message address, for devices.
pub const fn msi_address() -> u64 {
    MSI_ADDRESS
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::RegisterFile;

    /// Stores to the PMR from two cores, with and without a hook; returns
    /// the trace hash, the PMR image and what the hook mirrored.
    fn run(hooked: bool) -> (u64, Vec<u8>, Vec<u8>, usize) {
        let ex = Executor::new(7);
        let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
        let _dev = RegisterFile::attach(&m, Some(64 << 10), None);
        let mirror = Rc::new(RefCell::new(vec![0u8; 64 << 10]));
        let calls = Rc::new(Cell::new(0usize));
        if hooked {
            let (mirror, calls) = (mirror.clone(), calls.clone());
            let hook: PmrWriteHook = Rc::new(move |off, data| {
                let off = off as usize;
                mirror.borrow_mut()[off..off + data.len()].copy_from_slice(data);
                calls.set(calls.get() + 1);
            });
            assert!(m.set_pmr_write_hook(0, Some(hook)));
        }
        assert!(!m.set_pmr_write_hook(9, None));
        let pmr = m.bar(0, BarKind::Pmr).unwrap();
        for c in 0..2usize {
            let core = m.core(c).unwrap();
            m.sim().spawn(async move {
                for i in 0..20u64 {
                    let addr = pmr + (c as u64 * 0x4000 + i * 100);
                    core.wc_store(addr, &[i as u8 + 1; 70], Purpose::UNTAGGED, 0)
                        .await
                        .unwrap();
                    if i % 3 == 0 {
                        core.mmio_write(addr + 8000, &[0xab; 8], Purpose::UNTAGGED, 0)
                            .await
                            .unwrap();
                    }
                }
                core.mfence().await.unwrap();
                core.mmio_read(pmr, &mut [], Purpose::FLUSH_READ, 0)
                    .await
                    .unwrap();
            });
        }
        ex.run();
        let image = m.pmr_image(0).unwrap().to_vec();
        let hash = m.trace().hash();
        let mirrored = mirror.borrow().clone();
        (hash, image, mirrored, calls.get())
    }

    #[test]
    fn pmr_write_hook_mirrors_every_landed_write_without_changing_the_run() {
        let (plain_hash, plain_image, _, none) = run(false);
        let (hash, image, mirrored, calls) = run(true);
        assert_eq!(none, 0);
        assert!(calls > 0);
        assert_eq!(hash, plain_hash, "the hook must not change timing or the trace");
        assert_eq!(image, plain_image);
        assert_eq!(mirrored, image, "the hook saw exactly what landed");
        assert!(image.iter().any(|b| *b != 0));
    }
}
