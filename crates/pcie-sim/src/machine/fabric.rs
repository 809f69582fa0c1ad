//! The fabric side of the machine: scheduled bus actions taking effect
//! (MMIO and PMR writes landing, reads served, DMA, MSI-X), and the
//! emission of host stores and loads onto the link.

use super::*;

impl Inner {
    pub(crate) fn now(&self) -> SimTime {
        self.sim.now()
    }

    /// Queues an effect for `due`.
    pub(crate) fn schedule(&self, due: SimTime, action: Action) {
        let mut q = self.bus.borrow_mut();
        let slot = match q.free.pop() {
            Some(s) => {
                q.actions[s as usize] = Some(action);
                s
            }
            None => {
                q.actions.push(Some(action));
                (q.actions.len() - 1) as u32
            }
        };
        drop(q);
        if let Some(sink) = self.bus_sink.get() {
            self.sim.schedule_event(due, sink, slot);
        }
    }

    pub(crate) fn endpoint(&self, port: u8) -> Option<Rc<dyn Endpoint>> {
        self.endpoints.borrow().get(port as usize).cloned().flatten()
    }

    pub(crate) fn execute(&self, action: Action) {
        match action {
            Action::RegWrite { port, offset, data } => {
                if let Some(ep) = self.endpoint(port) {
                    if ep.reg_write(offset, data.bytes()).is_err() {
                        self.trace.borrow_mut().count_unsupported();
                    }
                }
            }
            Action::PmrWrite { port, offset, data } => {
                let hook = match self.ports.borrow_mut().get_mut(port as usize) {
                    Some(p) => {
                        p.pmr.write(offset, data.bytes());
                        if let Some(log) = &mut p.pmr_access {
                            log.write_bytes(offset, data.bytes().len() as u64);
                        }
                        p.pmr_hook.clone()
                    }
                    None => None,
                };
                if let Some(hook) = hook {
                    hook(offset, data.bytes());
                }
                if let Some(ep) = self.endpoint(port) {
                    ep.pmr_written(offset, data.bytes().len() as u64);
                }
            }
            Action::DeviceRead {
                port,
                bar,
                offset,
                len,
                tag,
                attr,
                purpose,
                mut ur,
            } => {
                let mut buf = vec![0u8; len as usize];
                if !ur {
                    ur = match (bar, self.endpoint(port)) {
                        (_, None) => true,
                        (BarKind::Registers, Some(ep)) => ep.reg_read(offset, &mut buf).is_err(),
                        (BarKind::Pmr, Some(ep)) => {
                            if ep.pmr_enabled() {
                                if let Some(p) = self.ports.borrow_mut().get_mut(port as usize) {
                                    p.pmr.read(offset, &mut buf);
                                    if let Some(log) = &mut p.pmr_access {
                                        log.read_bytes(offset, buf.len() as u64);
                                    }
                                }
                                self.record_pmr_read(port, offset, buf.len());
                                false
                            } else {
                                true
                            }
                        }
                    };
                }
                if ur {
                    self.trace.borrow_mut().count_unsupported();
                }
                // A zero-length read still returns one DW (PCIe 3.0 2.2.5).
                let data_len = if ur { 0 } else { (len as usize).max(4) };
                let mut payload = buf;
                payload.resize(data_len, 0);
                let now = self.now();
                let link = &self.profile.link;
                let wire = link.wire_bytes(TlpKind::Completion, 0, data_len as u32);
                let tx = {
                    let mut ports = self.ports.borrow_mut();
                    ports[port as usize].up.transmit(link, now, wire)
                };
                self.trace.borrow_mut().record(
                    TraceEntry {
                        time: now,
                        effect: tx.arrival,
                        addr: 0,
                        payload: NO_PAYLOAD,
                        len: data_len as u32,
                        attr,
                        kind: EventKind::MmioReadCompletion,
                        purpose,
                        source: port,
                        flags: if ur { FLAG_UR } else { 0 },
                        code: 0,
                        wire_bytes: wire as u16,
                    },
                    &payload,
                );
                payload.truncate(len as usize);
                self.schedule(
                    tx.arrival,
                    Action::MmioCompletion {
                        tag,
                        data: Payload::new(&payload),
                        ur,
                        covers: len.max(1),
                    },
                );
            }
            Action::MmioCompletion {
                tag,
                data,
                ur,
                covers,
            } => self.complete_read(tag, 0, data.bytes(), ur, covers),
            Action::DmaCompletion { tag } => self.complete_dma_read(tag),
            Action::ServeDmaRead {
                port,
                addr,
                len,
                tag,
                offset,
                purpose,
                attr,
            } => self.serve_dma_read(port, addr, len, tag, offset, purpose, attr),
            Action::HostWrite { addr, data } => {
                // The emitter checked the range; a failure here cannot happen.
                if let Err(e) = self.mem.write(crate::addr::HostAddr(addr), data.bytes()) {
                    unreachable!("a host write checked when emitted failed when applied: {e}");
                }
            }
            Action::Msix { vector } => self.irq.raise(vector),
        }
    }

    /// A completion for read `tag` arrived. The tag closes only when every
    /// request of the read has been answered, even when one failed, so a
    /// late completion never lands on a reused tag.
    pub(crate) fn complete_read(&self, tag: u32, offset: usize, data: &[u8], ur: bool, covers: u32) {
        let mut reads = self.reads.borrow_mut();
        let Some(w) = reads.get(tag) else {
            unreachable!("a completion for read tag {tag}, which closed when its last request was answered");
        };
        if ur {
            w.failed = true;
        } else if !data.is_empty() {
            let end = (offset + data.len()).min(w.len);
            if offset == w.buf.len() {
                // In order (the usual case): appended, no zero-fill.
                w.buf.extend_from_slice(&data[..end.saturating_sub(offset)]);
            } else if offset < end {
                if w.buf.len() < end {
                    w.buf.resize(end, 0);
                }
                w.buf[offset..end].copy_from_slice(&data[..end - offset]);
            }
        }
        w.remaining = w.remaining.saturating_sub(covers.max(1) as u64);
        if w.remaining == 0 {
            if let Some(waker) = w.waker.take() {
                waker.wake();
            }
        }
    }

    /// The last completion of DMA read `tag` arrived: every byte is in its
    /// buffer (or the read failed), and its reader wakes.
    pub(crate) fn complete_dma_read(&self, tag: u32) {
        let mut reads = self.reads.borrow_mut();
        let Some(w) = reads.get(tag) else {
            unreachable!("the completion of DMA read tag {tag}, which is open until its reader takes it");
        };
        debug_assert_eq!(
            w.unserved, 0,
            "a DMA read completes after its last request was served"
        );
        w.remaining = 0;
        if let Some(waker) = w.waker.take() {
            waker.wake();
        }
    }

    /// Notes that `len` bytes of DMA read `tag` were served (sampled, or
    /// refused) and, if they were its last, schedules the read's one
    /// completion at `last_arrival`, when its last CplD arrives.
    ///
    /// Each CplD is transmitted and recorded where it is sent, but the
    /// reader takes the whole read as one action: it wakes only once
    /// every byte has arrived, and the bytes were sampled when their
    /// request was served, so delivering each request's completions at
    /// their own arrival would change nothing anyone can observe, only
    /// cost an event each. The requests are served in the order they were
    /// sent (they cross one link, each after the same latency) and their
    /// completions leave one port in order, so the last served arrives
    /// last; the one action is scheduled where the last request's own
    /// would have been, so it keeps that place in the run queue.
    fn served_dma_read(&self, tag: u32, len: u32, failed: bool, last_arrival: SimTime) {
        let last = {
            let mut reads = self.reads.borrow_mut();
            let Some(w) = reads.get(tag) else {
                unreachable!("read tag {tag} is open until its last request is answered");
            };
            w.failed |= failed;
            debug_assert!(
                w.unserved >= len as u64,
                "a DMA read's requests serve its bytes once"
            );
            w.unserved = w.unserved.saturating_sub(len as u64);
            w.unserved == 0
        };
        if last {
            self.schedule(last_arrival, Action::DmaCompletion { tag });
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn serve_dma_read(
        &self,
        port: u8,
        addr: u64,
        len: u32,
        tag: u32,
        offset: u32,
        purpose: Purpose,
        attr: u32,
    ) {
        let now = self.now();
        let link = self.profile.link.clone();
        // The bytes are sampled now, straight into the reader's buffer at
        // their place: the reader sees the buffer only once the last
        // completion of the read has arrived (its waiter wakes then), so
        // sampling here and handing the bytes over on arrival cannot be
        // told apart, and no buffer travels with the completions.
        let sampled = {
            let mut reads = self.reads.borrow_mut();
            let Some(w) = reads.get(tag) else {
                unreachable!("read tag {tag} is open until its last request is answered");
            };
            let (at, n) = (offset as usize, len as usize);
            if at == w.buf.len() {
                self.mem.read_append(crate::addr::HostAddr(addr), n, &mut w.buf)
            } else {
                if w.buf.len() < at + n {
                    w.buf.resize(at + n, 0);
                }
                self.mem.read(crate::addr::HostAddr(addr), &mut w.buf[at..at + n])
            }
        };
        if sampled.is_err() {
            let wire = link.wire_bytes(TlpKind::Completion, 0, 0);
            let tx = self.ports.borrow_mut()[port as usize]
                .down
                .transmit(&link, now, wire);
            let mut t = self.trace.borrow_mut();
            t.count_unsupported();
            t.record(
                TraceEntry {
                    time: now,
                    effect: tx.arrival,
                    addr,
                    payload: NO_PAYLOAD,
                    len: 0,
                    attr,
                    kind: EventKind::DmaReadCompletion,
                    purpose,
                    source: port,
                    flags: FLAG_UR,
                    code: 0,
                    wire_bytes: wire as u16,
                },
                &[],
            );
            drop(t);
            self.served_dma_read(tag, len, true, tx.arrival);
            return;
        }
        // Every CplD of the request is transmitted and recorded (the trace
        // holds each TLP); the reader takes the whole read as one action
        // when its last CplD arrives (`served_dma_read`).
        debug_assert!(len > 0, "a DMA read of no bytes sends no request");
        let mut last_arrival = now;
        let reads = self.reads.borrow();
        let Some(data) = reads.sampled(tag, offset as usize, len as usize) else {
            unreachable!("read tag {tag} holds the bytes just sampled into it");
        };
        for (a, l) in link.split_completion(addr, len as u64) {
            let rel = (a - addr) as usize;
            let chunk = &data[rel..rel + l as usize];
            let wire = link.wire_bytes(TlpKind::Completion, a, l);
            let tx = self.ports.borrow_mut()[port as usize]
                .down
                .transmit(&link, now, wire);
            self.trace.borrow_mut().record(
                TraceEntry {
                    time: now,
                    effect: tx.arrival,
                    addr: a,
                    payload: NO_PAYLOAD,
                    len: l,
                    attr,
                    kind: EventKind::DmaReadCompletion,
                    purpose,
                    source: port,
                    flags: 0,
                    code: 0,
                    wire_bytes: wire as u16,
                },
                chunk,
            );
            debug_assert!(tx.arrival >= last_arrival, "CplDs of one port arrive in order");
            last_arrival = tx.arrival;
        }
        drop(reads);
        self.served_dma_read(tag, len, false, last_arrival);
    }

    /// Emits a host posted write to a device BAR: it enters the root port's
    /// posted buffer, waits there for a posted credit and the transmitter,
    /// queues at the device ingress, and takes effect when served. Records
    /// it and schedules its effect. Returns when the root port accepted it
    /// (the moment a store retires or a fence sees it globally visible).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn emit_host_write(
        &self,
        core: usize,
        addr: u64,
        data: &[u8],
        purpose: Purpose,
        attr: u32,
        extra_flags: u8,
        uncore: crate::time::SimDuration,
    ) -> Result<SimTime, PcieError> {
        let len = data.len() as u64;
        let Some((port, bar, offset)) = self.layout.borrow().decode(addr, len) else {
            return Err(PcieError::Unmapped { addr, len });
        };
        let now = self.now();
        // The write reaches the root port after crossing the uncore.
        let at = now + uncore;
        let link = &self.profile.link;
        let ep = self.endpoint(port);
        let mut flags = extra_flags;
        let ur = match bar {
            BarKind::Registers => {
                let rule = self.ports.borrow()[port as usize].layout.register_access;
                !rule.allows(offset, data.len())
            }
            BarKind::Pmr => {
                flags |= FLAG_PMR;
                !ep.as_ref().is_some_and(|e| e.pmr_enabled())
            }
        };
        if ur {
            flags |= FLAG_UR;
        }
        let wire = link.wire_bytes(TlpKind::Request, addr, data.len() as u32);
        let (accepted, done) = {
            let mut ports = self.ports.borrow_mut();
            let p = &mut ports[port as usize];
            let limit = match &p.layout.pmr {
                Some(pmr) => pmr.timing.posted_credits.max(1) as usize,
                None => 8,
            };
            while p.credits.front().is_some_and(|t| *t <= at) {
                p.credits.pop_front();
            }
            // The root port accepts the write once a slot of its posted
            // buffer is free: when the write `depth` places ahead of it
            // has started on the link.
            let depth = self.profile.host.rc_posted_buffer.max(1);
            let accepted = if p.rc_queue.len() >= depth {
                at.max(p.rc_queue[p.rc_queue.len() - depth])
            } else {
                at
            };
            let mut ready = accepted;
            while p.credits.len() >= limit {
                if let Some(t) = p.credits.pop_front() {
                    ready = ready.max(t);
                }
            }
            let tx = p.down.transmit(link, ready, wire);
            p.rc_queue.push_back(tx.start);
            while p.rc_queue.len() > depth {
                p.rc_queue.pop_front();
            }
            let service = match (bar, &p.layout.pmr) {
                (BarKind::Pmr, Some(pmr)) => {
                    pmr.timing.write_fixed + crate::time::SimDuration(pmr.timing.write_ps_per_byte * len)
                }
                _ => p.layout.register_latency,
            };
            let start = tx.arrival.max(p.ingress_free_at);
            let done = start + service;
            p.ingress_free_at = done;
            p.credits.push_back(done + link.one_way_latency);
            (accepted, done)
        };
        {
            let mut t = self.trace.borrow_mut();
            if ur {
                t.count_unsupported();
            }
            t.record(
                TraceEntry {
                    time: now,
                    effect: done,
                    addr,
                    payload: NO_PAYLOAD,
                    len: data.len() as u32,
                    attr,
                    kind: EventKind::MmioWrite,
                    purpose,
                    source: core as u8,
                    flags,
                    code: 0,
                    wire_bytes: wire as u16,
                },
                data,
            );
        }
        if !ur {
            let data = Payload::new(data);
            let action = match bar {
                BarKind::Registers => Action::RegWrite { port, offset, data },
                BarKind::Pmr => Action::PmrWrite { port, offset, data },
            };
            self.schedule(done, action);
        }
        Ok(accepted)
    }

    /// Records that `len` bytes of port `port`'s PMR at `offset` were read
    /// now ([`EventKind::PmrRead`]): whoever read them may act on them, so
    /// the crash model must hold the writes they came from as landed.
    /// Nothing for an empty read.
    pub(crate) fn record_pmr_read(&self, port: u8, offset: u64, len: usize) {
        if len != 0 {
            self.record_marker(EventKind::PmrRead, port, offset, len as u32);
        }
    }

    /// Records a trace entry that is not a bus transaction and carries no
    /// payload (a [`EventKind::Fence`] or [`EventKind::PmrRead`]) now.
    pub(crate) fn record_marker(&self, kind: EventKind, source: u8, addr: u64, len: u32) {
        let now = self.now();
        self.trace.borrow_mut().record(
            TraceEntry {
                time: now,
                effect: now,
                addr,
                payload: NO_PAYLOAD,
                len,
                attr: 0,
                kind,
                purpose: Purpose::UNTAGGED,
                source,
                flags: 0,
                code: 0,
                wire_bytes: 0,
            },
            &[],
        );
    }

    /// Emits a core's read request for `len` bytes (0: a zero-length read)
    /// and returns the tag its completion will fill.
    pub(crate) fn emit_host_read(
        &self,
        core: usize,
        addr: u64,
        len: u32,
        purpose: Purpose,
        attr: u32,
    ) -> Result<u32, PcieError> {
        let Some((port, bar, offset)) = self.layout.borrow().decode(addr, len as u64) else {
            return Err(PcieError::Unmapped {
                addr,
                len: len as u64,
            });
        };
        let now = self.now();
        let link = &self.profile.link;
        let (tx_arrival, done, ur, wire) = {
            let mut ports = self.ports.borrow_mut();
            let p = &mut ports[port as usize];
            let ur = match bar {
                BarKind::Registers => !p.layout.register_access.allows(offset, len as usize),
                BarKind::Pmr => false,
            };
            let wire = link.wire_bytes(TlpKind::Request, addr, 0);
            let tx = p.down.transmit(link, now, wire);
            let service = match (bar, &p.layout.pmr) {
                (BarKind::Pmr, Some(pmr)) => {
                    pmr.timing.read_fixed + crate::time::SimDuration(pmr.timing.read_ps_per_byte * len as u64)
                }
                _ => p.layout.register_latency,
            };
            // A read waits for every write before it (PCIe ordering), but its
            // own latency is pipelined: it does not hold up later requests.
            let start = tx.arrival.max(p.ingress_free_at);
            let done = start + service;
            (tx.arrival, done, ur, wire)
        };
        let _ = tx_arrival;
        let tag = self.reads.borrow_mut().open(len as usize, len.max(1) as u64);
        self.trace.borrow_mut().record(
            TraceEntry {
                time: now,
                effect: done,
                addr,
                payload: NO_PAYLOAD,
                len: 0,
                attr,
                kind: EventKind::MmioRead,
                purpose,
                source: core as u8,
                flags: if bar == BarKind::Pmr { FLAG_PMR } else { 0 },
                code: 0,
                wire_bytes: wire as u16,
            },
            &[],
        );
        self.schedule(
            done,
            Action::DeviceRead {
                port,
                bar,
                offset,
                len,
                tag,
                attr,
                purpose,
                ur,
            },
        );
        Ok(tag)
    }
}

impl EventSink for Inner {
    fn teardown(&self) {
        // Devices hold their port (and so this machine); dropping them here
        // breaks the cycle once the simulation is over.
        let eps = std::mem::take(&mut *self.endpoints.borrow_mut());
        drop(eps);
        self.bus.borrow_mut().actions.clear();
    }

    fn fire(&self, slot: u32) {
        let action = {
            let mut q = self.bus.borrow_mut();
            let a = q.actions.get_mut(slot as usize).and_then(|a| a.take());
            if a.is_some() {
                q.free.push(slot);
            }
            a
        };
        if let Some(a) = action {
            self.execute(a);
        }
    }
}
