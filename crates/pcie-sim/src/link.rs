//! The PCIe link: its profile, TLP sizes on the wire, request splitting, and
//! the per-direction serializer.
//!
//! Each direction is one FIFO: a TLP starts when the previous one has left
//! the transmitter (and, for a posted write to the device, when a posted
//! credit is free), occupies the wire for `wire bytes / bandwidth`, and
//! arrives one link latency later. A FIFO is a legal PCIe ordering with
//! Relaxed Ordering off (PCIe 3.0 Table 2-39): a posted write never passes a
//! posted write, a read request never passes a posted write, and a
//! completion never passes a posted write.

use crate::time::{Bandwidth, SimDuration, SimTime};

/// Physical-layer encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    /// 8b/10b (PCIe 1.x and 2.x).
    B8B10,
    /// 128b/130b (PCIe 3.0 and later).
    B128B130,
}

/// A PCIe link configuration. Every number carries its source.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkProfile {
    /// PCIe generation (informational; the rate and encoding below decide).
    pub generation: u8,
    /// Negotiated lanes.
    pub lanes: u32,
    /// Transfer rate per lane in MT/s. PCIe 3.0: 8000 (PCIe 3.0 base spec 4.2).
    pub mt_per_sec: u64,
    /// Line encoding. PCIe 3.0: 128b/130b (PCIe 3.0 base spec 4.2.2).
    pub encoding: Encoding,
    /// Max_Payload_Size in bytes. 256 B is the common setting for NVMe SSDs
    /// behind Intel root ports.
    pub max_payload: u32,
    /// Max_Read_Request_Size in bytes; Linux default 512 B.
    pub max_read_request: u32,
    /// Read Completion Boundary of the root complex: 64 B (PCIe 3.0 2.3.1.1).
    pub read_completion_boundary: u32,
    /// TLP header for 32-bit addresses: 3 DW (PCIe 3.0 2.2.1).
    pub header_bytes_32: u32,
    /// TLP header for 64-bit addresses: 4 DW (PCIe 3.0 2.2.1).
    pub header_bytes_64: u32,
    /// Per-TLP framing at the data-link and physical layers: for PCIe 3.0 a
    /// 4-byte STP token (with the sequence number) and a 4-byte LCRC
    /// (PCIe 3.0 4.2.2.3.2 and 3.5.2).
    pub framing_bytes: u32,
    /// One-way latency from transmitter to receiver, including the root
    /// port and endpoint PHY/data-link pipelines. 200 ns is an estimate for
    /// a direct-attached Gen3 device; with `pmr_read_latency` it yields the
    /// 0.9 us 8-byte PMR read that Horae measured (Horae 5.2).
    pub one_way_latency: SimDuration,
}

impl Default for LinkProfile {
    /// PCIe 3.0 x4, the link of the paper's SSDs (ccNVMe 7.1, Table 3).
    fn default() -> Self {
        LinkProfile::gen3_x4()
    }
}

impl LinkProfile {
    /// PCIe 3.0 x4.
    pub fn gen3_x4() -> Self {
        LinkProfile {
            generation: 3,
            lanes: 4,
            mt_per_sec: 8_000,
            encoding: Encoding::B128B130,
            max_payload: 256,
            max_read_request: 512,
            read_completion_boundary: 64,
            header_bytes_32: 12,
            header_bytes_64: 16,
            framing_bytes: 8,
            one_way_latency: SimDuration::from_ns(200),
        }
    }

    /// PCIe 4.0 x4 (16 GT/s per lane).
    pub fn gen4_x4() -> Self {
        LinkProfile {
            generation: 4,
            mt_per_sec: 16_000,
            ..Self::gen3_x4()
        }
    }

    /// Raw data bandwidth per direction after line encoding.
    pub fn bandwidth(&self) -> Bandwidth {
        let (num, den) = match self.encoding {
            Encoding::B8B10 => (8u64, 10u64),
            Encoding::B128B130 => (128, 130),
        };
        // MT/s * lanes bits per microsecond -> bytes per second.
        let bits_per_sec = self.mt_per_sec * 1_000_000 * self.lanes as u64 * num / den;
        Bandwidth {
            bytes_per_sec: bits_per_sec / 8,
        }
    }

    /// Header size for a request to `addr`.
    pub fn header_bytes(&self, addr: u64) -> u32 {
        if addr >> 32 == 0 {
            self.header_bytes_32
        } else {
            self.header_bytes_64
        }
    }

    /// Bytes on the wire for a TLP carrying `payload` data bytes that start
    /// at `addr` (data is DW-granular: a partial DW still takes a whole DW).
    /// Completions use 3 DW headers whatever the address.
    pub fn wire_bytes(&self, kind: TlpKind, addr: u64, payload: u32) -> u32 {
        let header = match kind {
            TlpKind::Completion => self.header_bytes_32,
            TlpKind::Request => self.header_bytes(addr),
        };
        let data = if payload == 0 {
            0
        } else {
            let first_dw = addr & !3;
            let end = addr + payload as u64;
            (end.div_ceil(4) * 4 - first_dw) as u32
        };
        self.framing_bytes + header + data
    }

    /// Time the TLP occupies the wire.
    pub fn serialization(&self, wire_bytes: u32) -> SimDuration {
        SimDuration::for_bytes(wire_bytes as u64, self.bandwidth())
    }

    /// Splits a memory write of `len` bytes at `addr` into TLP payloads: at
    /// most Max_Payload_Size each, never crossing a 4 KiB boundary
    /// (PCIe 3.0 2.2.7).
    pub fn split_write(&self, addr: u64, len: u64) -> impl Iterator<Item = (u64, u32)> {
        split(addr, len, self.max_payload as u64)
    }

    /// Splits a memory read of `len` bytes into read requests: at most
    /// Max_Read_Request_Size each, never crossing a 4 KiB boundary.
    pub fn split_read_request(&self, addr: u64, len: u64) -> impl Iterator<Item = (u64, u32)> {
        split(addr, len, self.max_read_request as u64)
    }

    /// Splits the completion of one read request into CplD payloads: each at
    /// most Max_Payload_Size, and every split point on a Read Completion
    /// Boundary (PCIe 3.0 2.3.1.1), so a misaligned first completion ends at
    /// the first RCB boundary it can.
    pub fn split_completion(&self, addr: u64, len: u64) -> impl Iterator<Item = (u64, u32)> {
        let rcb = self.read_completion_boundary as u64;
        let mps = self.max_payload as u64;
        let end = addr.saturating_add(len);
        let mut cur = addr;
        std::iter::from_fn(move || {
            if cur >= end {
                return None;
            }
            // Largest end not past cur + MPS that is RCB-aligned (or the end).
            let mut stop = end.min(cur.saturating_add(mps));
            if stop < end {
                let aligned = stop / rcb * rcb;
                if aligned > cur {
                    stop = aligned;
                }
            }
            let piece = (cur, (stop - cur) as u32);
            cur = stop;
            Some(piece)
        })
    }
}

/// The two TLP header shapes the model needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlpKind {
    /// A memory read or write request (3 or 4 DW header by address).
    Request,
    /// A completion (3 DW header).
    Completion,
}

fn split(addr: u64, len: u64, max: u64) -> impl Iterator<Item = (u64, u32)> {
    // Saturating: a range touching the top of the 64-bit space ends there.
    let end = addr.saturating_add(len);
    let mut cur = addr;
    std::iter::from_fn(move || {
        if cur >= end {
            return None;
        }
        let page_end = (cur / 4096).saturating_add(1).saturating_mul(4096);
        let page_end = if page_end <= cur { u64::MAX } else { page_end };
        let stop = end.min(cur.saturating_add(max)).min(page_end);
        let piece = (cur, (stop - cur) as u32);
        cur = stop;
        Some(piece)
    })
}

/// One direction of the link: a FIFO transmitter.
#[derive(Clone, Debug, Default)]
pub struct Serializer {
    /// When the transmitter is next free.
    pub busy_until: SimTime,
}

/// When a TLP handed to the transmitter at `ready` leaves and arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmission {
    /// First bit on the wire.
    pub start: SimTime,
    /// Last bit on the wire (the transmitter is free again).
    pub end: SimTime,
    /// Last bit at the receiver.
    pub arrival: SimTime,
}

impl Serializer {
    /// Reserves the wire for a TLP of `wire_bytes` that may not start before
    /// `ready`.
    pub fn transmit(&mut self, profile: &LinkProfile, ready: SimTime, wire_bytes: u32) -> Transmission {
        let start = ready.max(self.busy_until);
        let end = start + profile.serialization(wire_bytes);
        self.busy_until = end;
        Transmission {
            start,
            end,
            arrival: end + profile.one_way_latency,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gen3_x4_bandwidth() {
        let p = LinkProfile::gen3_x4();
        // 4 lanes * 8 GT/s * 128/130 / 8 = 3.938 GB/s
        assert_eq!(p.bandwidth().bytes_per_sec, 3_938_461_538);
    }

    #[test]
    fn wire_bytes_count_headers_framing_and_whole_dws() {
        let p = LinkProfile::gen3_x4();
        assert_eq!(p.wire_bytes(TlpKind::Request, 0x1000, 64), 8 + 12 + 64);
        assert_eq!(p.wire_bytes(TlpKind::Request, 0x1_0000_0000, 4), 8 + 16 + 4);
        // 2 bytes straddling a DW boundary take two DWs.
        assert_eq!(p.wire_bytes(TlpKind::Request, 0x1003, 2), 8 + 12 + 8);
        assert_eq!(p.wire_bytes(TlpKind::Request, 0x1000, 0), 20);
        assert_eq!(p.wire_bytes(TlpKind::Completion, 0x1_0000_0000, 4), 8 + 12 + 4);
    }

    #[test]
    fn splits_respect_mps_mrrs_rcb_and_4k() {
        let p = LinkProfile::gen3_x4();
        let w: Vec<_> = p.split_write(0x1000, 4096).collect();
        assert_eq!(w.len(), 16);
        assert!(w.iter().all(|(_, l)| *l == 256));
        let r: Vec<_> = p.split_read_request(0x1f00, 1024).collect();
        assert_eq!(r, vec![(0x1f00, 256), (0x2000, 512), (0x2200, 256)]);
        let c: Vec<_> = p.split_completion(0x1010, 512).collect();
        assert_eq!(c, vec![(0x1010, 240), (0x1100, 256), (0x1200, 16)]);
        let total: u32 = c.iter().map(|(_, l)| l).sum();
        assert_eq!(total, 512);
    }

    #[test]
    fn serializer_is_fifo_and_exact() {
        let p = LinkProfile::gen3_x4();
        let mut s = Serializer::default();
        let a = s.transmit(&p, SimTime(0), 84);
        let b = s.transmit(&p, SimTime(0), 84);
        let ser = p.serialization(84);
        assert_eq!(a.end, SimTime(0) + ser);
        assert_eq!(b.start, a.end);
        assert_eq!(b.arrival, a.end + ser + p.one_way_latency);
    }
}
