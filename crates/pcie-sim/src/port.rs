//! A device's side of its link: DMA to host memory, MSI-X, its own PMR,
//! and device-internal trace events.

use std::rc::Rc;

use crate::addr::{BusAddr, HostAddr};
use crate::error::PcieError;
use crate::executor::Sim;
use crate::host_mem::PAGE_SIZE;
use crate::irq::MSI_ADDRESS;
use crate::link::TlpKind;
use crate::machine::{Action, Inner, Payload, ReadDone, ReadWait, SharedPage};
use crate::time::SimTime;
use crate::trace::{EventKind, Purpose, TraceEntry, TraceMode, NO_PAYLOAD};

/// What a device holds to reach the host.
#[derive(Clone)]
pub struct DevicePort {
    pub(crate) machine: Rc<Inner>,
    pub(crate) port: u8,
}

impl std::fmt::Debug for DevicePort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevicePort").field("port", &self.port).finish()
    }
}

impl DevicePort {
    /// Index of this device's port.
    pub fn index(&self) -> u8 {
        self.port
    }

    /// The simulation.
    pub fn sim(&self) -> Sim {
        self.machine.sim.clone()
    }

    /// The simulated time now.
    pub fn now(&self) -> SimTime {
        self.machine.now()
    }

    /// How much of the trace the machine keeps (a device records payloads
    /// of its persistence events only when it is `Full`).
    pub fn trace_mode(&self) -> TraceMode {
        self.machine.trace.borrow().mode()
    }

    /// Reads `buf.len()` bytes of host memory at `addr` by DMA: read
    /// requests split by Max_Read_Request_Size, completions split on the
    /// Read Completion Boundary. An address outside host memory gets an
    /// Unsupported Request completion and the read fails.
    pub async fn dma_read(
        &self,
        addr: BusAddr,
        buf: &mut [u8],
        purpose: Purpose,
        attr: u32,
    ) -> Result<(), PcieError> {
        if buf.is_empty() {
            return Ok(());
        }
        let w = self.read_request(addr, buf.len(), purpose, attr).await?;
        debug_assert_eq!(w.buf.len(), buf.len(), "completions covered the whole read");
        buf.copy_from_slice(&w.buf);
        self.machine.reads.borrow_mut().recycle(w.buf);
        Ok(())
    }

    /// Reads the 4 KiB page of host memory at page-aligned `addr` by DMA,
    /// as [`DevicePort::dma_read`] does (same requests, completions, trace
    /// and timing), into a page of its own: one copy of the bytes that
    /// arrived, where a caller of `dma_read` would zero a page first and
    /// copy into it (a device storing a whole block keeps the page).
    pub async fn dma_read_page(
        &self,
        addr: BusAddr,
        purpose: Purpose,
        attr: u32,
    ) -> Result<SharedPage, PcieError> {
        debug_assert_eq!(
            addr.0 % PAGE_SIZE,
            0,
            "dma_read_page takes a page-aligned address"
        );
        let w = self.read_request(addr, PAGE_SIZE as usize, purpose, attr).await?;
        let page = match SharedPage::try_from(std::sync::Arc::<[u8]>::from(&w.buf[..])) {
            Ok(page) => page,
            Err(_) => unreachable!("the completions of a page read fill PAGE_SIZE bytes"),
        };
        self.machine.reads.borrow_mut().recycle(w.buf);
        Ok(page)
    }

    /// Sends the read requests for `len` (> 0) bytes at `addr` and waits
    /// for every completion: the finished read, or the error of a failed
    /// one (its buffer given back).
    async fn read_request(
        &self,
        addr: BusAddr,
        len: usize,
        purpose: Purpose,
        attr: u32,
    ) -> Result<ReadWait, PcieError> {
        debug_assert!(len > 0, "a DMA read of no bytes sends no request");
        if addr.0.checked_add(len as u64).is_none() {
            return Err(PcieError::OutsideHostMemory {
                addr: addr.0,
                len: len as u64,
            });
        }
        let m = &self.machine;
        let now = m.now();
        let link = &m.profile.link;
        m.trace.borrow_mut().count_op(EventKind::DmaRead, purpose);
        let tag = m.reads.borrow_mut().open(len, len as u64);
        for (a, l) in link.split_read_request(addr.0, len as u64) {
            let wire = link.wire_bytes(TlpKind::Request, a, 0);
            let tx = m.ports.borrow_mut()[self.port as usize]
                .up
                .transmit(link, now, wire);
            let serve_at = tx.arrival + m.profile.host.dma_read_latency;
            m.trace.borrow_mut().record(
                TraceEntry {
                    time: now,
                    effect: serve_at,
                    addr: a,
                    payload: NO_PAYLOAD,
                    len: 0,
                    attr,
                    kind: EventKind::DmaRead,
                    purpose,
                    source: self.port,
                    flags: 0,
                    code: 0,
                    wire_bytes: wire as u16,
                },
                &[],
            );
            m.schedule(
                serve_at,
                Action::ServeDmaRead {
                    port: self.port,
                    addr: a,
                    len: l,
                    tag,
                    offset: (a - addr.0) as u32,
                    purpose,
                    attr,
                },
            );
        }
        let w = ReadDone {
            machine: m.clone(),
            tag,
        }
        .await;
        if w.failed {
            m.reads.borrow_mut().recycle(w.buf);
            return Err(PcieError::OutsideHostMemory {
                addr: addr.0,
                len: len as u64,
            });
        }
        Ok(w)
    }

    /// Writes `data` to host memory at `addr` by DMA (posted; returns at
    /// once with the time the last byte arrives). Split by Max_Payload_Size
    /// and 4 KiB boundaries into TLPs for timing, counting and the trace;
    /// the bytes are applied when the last TLP arrives. A target outside host memory is refused here
    /// (on real hardware the root complex would drop it and log an error;
    /// the model tells the device so it can fail the command).
    pub fn dma_write(
        &self,
        addr: BusAddr,
        data: &[u8],
        purpose: Purpose,
        attr: u32,
    ) -> Result<SimTime, PcieError> {
        self.dma_write_with(addr, data, purpose, attr, || Payload::new(data))
    }

    /// [`DevicePort::dma_write`] of bytes `range` of a page the device
    /// keeps and never writes in place (a stored media block): the same
    /// TLPs, trace and effect, but the bytes wait for their arrival in the
    /// shared page instead of a copy of it.
    pub fn dma_write_shared(
        &self,
        addr: BusAddr,
        page: &SharedPage,
        range: std::ops::Range<usize>,
        purpose: Purpose,
        attr: u32,
    ) -> Result<SimTime, PcieError> {
        let Some(data) = page.get(range.clone()) else {
            return Err(PcieError::TooLarge {
                len: range.end as u64,
                max: page.len() as u64,
            });
        };
        self.dma_write_with(addr, data, purpose, attr, || Payload::Shared(page.clone(), range))
    }

    /// [`DevicePort::dma_write`] of `data`, carried to its arrival as
    /// `payload` makes it.
    fn dma_write_with(
        &self,
        addr: BusAddr,
        data: &[u8],
        purpose: Purpose,
        attr: u32,
        payload: impl FnOnce() -> Payload,
    ) -> Result<SimTime, PcieError> {
        let m = &self.machine;
        if !m.mem.contains(HostAddr(addr.0), data.len() as u64) {
            m.trace.borrow_mut().count_unsupported();
            return Err(PcieError::OutsideHostMemory {
                addr: addr.0,
                len: data.len() as u64,
            });
        }
        let now = m.now();
        let link = &m.profile.link;
        m.trace.borrow_mut().count_op(EventKind::DmaWrite, purpose);
        let mut last = now;
        for (a, l) in link.split_write(addr.0, data.len() as u64) {
            let rel = (a - addr.0) as usize;
            let chunk = &data[rel..rel + l as usize];
            let wire = link.wire_bytes(TlpKind::Request, a, l);
            let tx = m.ports.borrow_mut()[self.port as usize]
                .up
                .transmit(link, now, wire);
            m.trace.borrow_mut().record(
                TraceEntry {
                    time: now,
                    effect: tx.arrival,
                    addr: a,
                    payload: NO_PAYLOAD,
                    len: l,
                    attr,
                    kind: EventKind::DmaWrite,
                    purpose,
                    source: self.port,
                    flags: 0,
                    code: 0,
                    wire_bytes: wire as u16,
                },
                chunk,
            );
            last = tx.arrival;
        }
        // The bytes land in host memory when the last TLP arrives: one event
        // for the whole transfer. Posted writes arrive in order and nothing
        // on the host reads a DMA buffer before the completion or interrupt
        // that follows it on the same link, so no host-visible behaviour
        // differs from applying each TLP at its own arrival.
        m.schedule(
            last,
            Action::HostWrite {
                addr: addr.0,
                data: payload(),
            },
        );
        Ok(last)
    }

    /// Sends an MSI-X message for table entry `vector` (a posted 4-byte
    /// write to the interrupt address; it cannot pass the DMA writes sent
    /// before it). It arrives on host vector
    /// [`crate::irq::host_vector`]`(port, vector)`.
    pub fn msix(&self, vector: u16, attr: u32) -> SimTime {
        let m = &self.machine;
        let now = m.now();
        let link = &m.profile.link;
        let wire = link.wire_bytes(TlpKind::Request, MSI_ADDRESS, 4);
        let tx = m.ports.borrow_mut()[self.port as usize]
            .up
            .transmit(link, now, wire);
        {
            let mut t = m.trace.borrow_mut();
            t.count_op(EventKind::Msix, Purpose::INTERRUPT);
            t.record(
                TraceEntry {
                    time: now,
                    effect: tx.arrival,
                    addr: MSI_ADDRESS,
                    payload: NO_PAYLOAD,
                    len: 4,
                    attr,
                    kind: EventKind::Msix,
                    purpose: Purpose::INTERRUPT,
                    source: self.port,
                    flags: 0,
                    code: vector,
                    wire_bytes: wire as u16,
                },
                &(vector as u32).to_le_bytes(),
            );
        }
        m.schedule(
            tx.arrival,
            Action::Msix {
                vector: crate::irq::host_vector(self.port, vector),
            },
        );
        tx.arrival
    }

    /// The trace index the next recorded event will take (every event
    /// counts, kept or not): a device notes it to point back at a moment
    /// from a later event (`nvme-ctrl`'s submission of a command).
    pub fn trace_position(&self) -> u64 {
        self.machine.trace.borrow().len()
    }

    /// Like [`DevicePort::record`], with the payload of the earlier event
    /// `same_as` (stored once in the trace). `payload` is used only if that
    /// event was not stored.
    pub fn record_sharing(
        &self,
        code: u16,
        addr: u64,
        len: u32,
        same_as: u64,
        payload: &[u8],
        attr: u32,
    ) -> u64 {
        let now = self.machine.now();
        self.machine.trace.borrow_mut().record_sharing(
            TraceEntry {
                time: now,
                effect: now,
                addr,
                payload: NO_PAYLOAD,
                len,
                attr,
                kind: EventKind::Device,
                purpose: Purpose::UNTAGGED,
                source: self.port,
                flags: 0,
                code,
                wire_bytes: 0,
            },
            same_as,
            payload,
        )
    }

    /// Reads the device's own PMR (device-internal: no bus traffic).
    pub fn pmr_read(&self, offset: u64, buf: &mut [u8]) -> Result<(), PcieError> {
        let mut ports = self.machine.ports.borrow_mut();
        let p = &mut ports[self.port as usize];
        if offset
            .checked_add(buf.len() as u64)
            .is_none_or(|e| e > p.pmr.len())
        {
            return Err(PcieError::UnsupportedRequest {
                addr: offset,
                what: "read outside the PMR",
            });
        }
        p.pmr.read(offset, buf);
        if let Some(log) = &mut p.pmr_access {
            log.read_bytes(offset, buf.len() as u64);
        }
        drop(ports);
        self.machine.record_pmr_read(self.port, offset, buf.len());
        Ok(())
    }

    /// Size of the device's PMR in bytes (0 without one).
    pub fn pmr_len(&self) -> u64 {
        self.machine.ports.borrow()[self.port as usize].pmr.len()
    }

    /// Records a device-internal event (a media program, a flush
    /// completing...) with a device-defined `code`, a device-defined
    /// address (an LBA) and length. `payload` is either empty or `len`
    /// bytes; it is kept only in `Full` trace mode. Returns the event's
    /// sequence number in the trace.
    pub fn record(&self, code: u16, addr: u64, len: u32, payload: &[u8], attr: u32) -> u64 {
        debug_assert!(payload.is_empty() || payload.len() == len as usize);
        let now = self.machine.now();
        self.machine.trace.borrow_mut().record(
            TraceEntry {
                time: now,
                effect: now,
                addr,
                payload: NO_PAYLOAD,
                len,
                attr,
                kind: EventKind::Device,
                purpose: Purpose::UNTAGGED,
                source: self.port,
                flags: 0,
                code,
                wire_bytes: 0,
            },
            payload,
        )
    }
}
