//! Layout of the Persistent Memory Region (`docs/decisions.md` D3).
//!
//! ```text
//! 0x0000  header line: magic "CCNVME01", version, queues, slots, flags, generation
//! 0x1000  queue 0 region:  +0x00 P-SQDB (u32, alone in its 64-byte line)
//!                          +0x40 P-SQ-head (u32, alone in its line)
//!                          +0x80 ring of `slots` 64-byte entries
//!         queue 1 region ... (each region rounded up to 4 KiB)
//! HORAE   the Horae ordering queue region, after the last queue region
//! ```
//!
//! Keeping each pointer alone in a cache line means a write-combining line
//! never mixes a pointer with anything else.

/// Magic of the header ("CCNVME01" little-endian).
pub const MAGIC: u64 = u64::from_le_bytes(*b"CCNVME01");
/// Layout version.
pub const VERSION: u32 = 1;
/// Bytes of the header.
pub const HEADER: u64 = 4096;
/// Offset of P-SQDB in a queue region.
pub const DOORBELL: u64 = 0;
/// Offset of P-SQ-head in a queue region.
pub const HEAD: u64 = 64;
/// Offset of the ring in a queue region.
pub const RING: u64 = 128;
/// Bytes per ring entry.
pub const ENTRY: u64 = 64;

/// Where everything sits in the PMR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PmrLayout {
    /// Persistent submission queues.
    pub queues: u32,
    /// Slots per queue.
    pub slots: u32,
    /// Size of the PMR.
    pub pmr_bytes: u64,
}

impl PmrLayout {
    /// Bytes of one queue region.
    pub fn region_bytes(&self) -> u64 {
        (RING + self.slots as u64 * ENTRY).div_ceil(4096) * 4096
    }

    /// Offset of queue `q`'s region.
    pub fn region(&self, q: u32) -> u64 {
        HEADER + q as u64 * self.region_bytes()
    }

    /// Offset of queue `q`'s P-SQDB word.
    pub fn doorbell(&self, q: u32) -> u64 {
        self.region(q) + DOORBELL
    }

    /// Offset of queue `q`'s P-SQ-head word.
    pub fn head(&self, q: u32) -> u64 {
        self.region(q) + HEAD
    }

    /// Offset of queue `q`'s slot `s`.
    pub fn slot(&self, q: u32, s: u32) -> u64 {
        self.region(q) + RING + s as u64 * ENTRY
    }

    /// First byte after the queue regions (where Horae's region starts).
    pub fn end(&self) -> u64 {
        self.region(self.queues)
    }

    /// True if the layout fits in the PMR.
    pub fn fits(&self) -> bool {
        self.slots >= 2 && self.end() <= self.pmr_bytes
    }

    /// The header line's bytes.
    pub fn header_bytes(&self, generation: u64, flags: u32) -> [u8; 64] {
        let mut h = [0u8; 64];
        h[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&self.queues.to_le_bytes());
        h[16..20].copy_from_slice(&self.slots.to_le_bytes());
        h[20..24].copy_from_slice(&flags.to_le_bytes());
        h[24..32].copy_from_slice(&generation.to_le_bytes());
        h
    }

    /// Parses a header line: (layout, generation), or why it is not one.
    pub fn parse_header(h: &[u8; 64], pmr_bytes: u64) -> Result<(PmrLayout, u64), &'static str> {
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[o..o + 8]);
            u64::from_le_bytes(b)
        };
        let u32_at = |o: usize| {
            let mut b = [0u8; 4];
            b.copy_from_slice(&h[o..o + 4]);
            u32::from_le_bytes(b)
        };
        if u64_at(0) != MAGIC {
            return Err("no ccNVMe magic");
        }
        if u32_at(8) != VERSION {
            return Err("unknown layout version");
        }
        let l = PmrLayout {
            queues: u32_at(12),
            slots: u32_at(16),
            pmr_bytes,
        };
        if l.queues == 0 || l.queues > 1024 || !l.fits() {
            return Err("queue count or size does not fit the PMR");
        }
        Ok((l, u64_at(24)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_are_aligned_and_header_round_trips() {
        let l = PmrLayout {
            queues: 4,
            slots: 256,
            pmr_bytes: 2 << 20,
        };
        assert_eq!(l.region_bytes(), 20480);
        assert_eq!(l.doorbell(1) % 64, 0);
        assert_eq!(l.head(1) - l.doorbell(1), 64);
        assert!(l.fits());
        let (p, g) = PmrLayout::parse_header(&l.header_bytes(7, 0), 2 << 20).unwrap();
        assert_eq!((p, g), (l, 7));
        let mut bad = l.header_bytes(7, 0);
        bad[0] ^= 1;
        assert!(PmrLayout::parse_header(&bad, 2 << 20).is_err());
        let huge = PmrLayout { slots: 1 << 20, ..l };
        assert!(PmrLayout::parse_header(&huge.header_bytes(0, 0), 2 << 20).is_err());
    }
}
