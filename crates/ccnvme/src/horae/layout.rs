//! Where the ordering queue sits in the PMR, and the 16-byte ordering
//! metadata entry of Horae's Figure 6, bit-exact.
//!
//! ```text
//! start + 0x000  header line: magic "HORAEOQ1" (u64), version (u32), capacity (u32),
//!                devices (u8), zero (u8), stream (u16), streams (u16), zeros
//! start + 0x040  head    (u64, alone in its 64-byte line)
//! start + 0x080  flushed (u64, alone in its line)
//! start + 0x0C0  tail    (u64, alone in its line)
//! start + 0x100  ring of `capacity` 16-byte entries
//! ```
//!
//! `start` is [`crate::BlockDevice::pmr_free_start`] (the first byte after
//! the ccNVMe queue regions, 0 without ccNVMe; `docs/decisions.md` H4) on
//! the stream's first device, plus the stream's slice: with `streams`
//! streams the room after the free start is cut into `streams` equal
//! 64-byte-aligned slices and stream `sid` owns slice `sid` (Horae Table 1:
//! "HORAE evenly partitions the CMB area ... and assigns a portion to each
//! stream"; [`RegionLayout::for_stream`]). The header says how many
//! devices the stream's entries may name and which slice it is
//! ([`Geometry`]); zeros there (a region written before streams existed)
//! read as one device, stream 0 of 1. All integers
//! are little-endian. The pointers are monotonic 64-bit sequence numbers
//! (never wrapped in practice); entry `seq` lives in slot
//! `seq % capacity`. The queue holds `[head, tail)`; `flushed <= tail`, and
//! `flushed < head` is allowed (on a device without a volatile cache the
//! head may pass `flushed` on `dr` bits alone).
//!
//! ## Entry bit order
//!
//! The entry is one little-endian 128-bit integer (bytes 0..16), fields
//! packed from bit 0 upward in Figure 6's order:
//!
//! | bits | field | meaning |
//! |---|---|---|
//! | 0..32 | `lba` | first logical block (device LBA units) |
//! | 32..64 | `len` | 4 KiB blocks (the bio's pages) |
//! | 64..72 | `devid` | destination device: index in the stream's device list |
//! | 72 | `etag` | set on the first entry of each epoch |
//! | 73 | `dr` | the entry's data is durable (set on completion) |
//! | 74..106 | `plba` | prepare-write LBA; [`NO_PLBA`]: not redirected |
//! | 106 | `ipu` | the write updates live data in place (not in Figure 6; see below) |
//! | 107..128 | `rsvd` | zero |
//!
//! So bytes 0..8 hold `lba | len << 32`, and the 8-byte word at bytes 8..16
//! holds `devid | etag << 8 | dr << 9 | plba << 10 | ipu << 42 | rsvd << 43`:
//! setting `dr` rewrites that one aligned 8-byte word, `ipu` included
//! (`docs/decisions.md` H5).
//!
//! ## The `ipu` bit (a deviation from Figure 6)
//!
//! Horae marks an in-place update (IPU, 5.4) by redirecting it: its entry
//! carries the p-area slot in `plba`, and recovery commits or drops the
//! prepare write while the home block keeps its old content
//! ([`super::redirect`]). A stream without a p-area does not redirect: an
//! in-place write goes to its home block directly and its entry says so
//! with the `ipu` bit, the lowest bit Figure 6 leaves reserved. Recovery
//! never zero-fills an `ipu` entry's blocks: they hold live data, old or
//! new (a 4 KiB write lands whole in the media model; a torn overwrite
//! before fsync is what ext4's ordered mode allows too). A redirected
//! in-place write carries both `plba` and `ipu`; a write redirected only
//! because the IPU tree holds its block carries `plba` alone. The layout
//! version stays 1: a region written before the bit existed has it clear
//! everywhere (`rsvd` was zero), and a reader that predates it refuses an
//! `ipu` entry as reserved bits set rather than zero-filling live data.

/// Magic of the header ("HORAEOQ1" little-endian).
pub const MAGIC: u64 = u64::from_le_bytes(*b"HORAEOQ1");
/// Layout version.
pub const VERSION: u32 = 1;
/// Offset of the head pointer in the region.
pub const HEAD: u64 = 0x40;
/// Offset of the flushed pointer in the region.
pub const FLUSHED: u64 = 0x80;
/// Offset of the tail pointer in the region.
pub const TAIL: u64 = 0xC0;
/// Offset of the ring in the region.
pub const RING: u64 = 0x100;
/// Bytes per entry (Figure 6: 128 bits).
pub const ENTRY_BYTES: u64 = 16;
/// `plba` of an entry whose write was not redirected (it went home).
pub const NO_PLBA: u32 = u32::MAX;
/// Mask of the 21 reserved bits.
const RSVD_MASK: u32 = (1 << 21) - 1;

/// Which stream a region is and over how many devices (header bytes
/// 16..22). Zeros read as [`Geometry::SINGLE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Devices the stream's entries may name (`devid < devices`).
    pub devices: u8,
    /// The stream's id (its slice).
    pub stream: u16,
    /// Streams the PMR is partitioned into.
    pub streams: u16,
}

impl Geometry {
    /// One stream on one device (what a region without these fields is).
    pub const SINGLE: Geometry = Geometry {
        devices: 1,
        stream: 0,
        streams: 1,
    };

    /// The fields as the header stores them (bytes 16..22).
    fn to_bytes(self) -> [u8; 6] {
        let mut b = [0u8; 6];
        b[0] = self.devices;
        b[2..4].copy_from_slice(&self.stream.to_le_bytes());
        b[4..6].copy_from_slice(&self.streams.to_le_bytes());
        b
    }

    /// Reads header bytes 16..22; all zero is [`Geometry::SINGLE`].
    fn from_header(h: &[u8; 64]) -> Geometry {
        if h[16..22].iter().all(|&b| b == 0) {
            return Geometry::SINGLE;
        }
        Geometry {
            devices: h[16],
            stream: u16::from_le_bytes([h[18], h[19]]),
            streams: u16::from_le_bytes([h[20], h[21]]),
        }
    }

    /// True if the fields describe a stream that can exist.
    pub fn valid(self) -> bool {
        self.devices >= 1 && self.streams >= 1 && self.stream < self.streams
    }
}

/// Where the region sits in the PMR.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RegionLayout {
    /// PMR offset of the region (64-byte aligned).
    pub start: u64,
    /// Entries in the ring.
    pub capacity: u32,
}

impl RegionLayout {
    /// The largest ring that fits between `start` and the end of the PMR.
    pub fn largest(start: u64, pmr_bytes: u64) -> Option<RegionLayout> {
        let room = pmr_bytes.checked_sub(start)?.checked_sub(RING)? / ENTRY_BYTES;
        let capacity = room.min(u32::MAX as u64) as u32;
        (capacity >= 1).then_some(RegionLayout { start, capacity })
    }

    /// The region of stream `stream` of `streams` (Horae Table 1: the
    /// room from `free_start` to the end of the PMR cut into `streams`
    /// equal slices, each rounded down to 64 bytes), with the largest ring
    /// that fits its slice or `capacity` entries if given and it fits.
    /// `None` if the slice has no room for one entry or `capacity` does
    /// not fit it.
    pub fn for_stream(
        free_start: u64,
        pmr_bytes: u64,
        stream: u16,
        streams: u16,
        capacity: Option<u32>,
    ) -> Option<RegionLayout> {
        if streams == 0 || stream >= streams {
            return None;
        }
        let room = pmr_bytes.checked_sub(free_start.div_ceil(64) * 64)?;
        let slice = room / streams as u64 / 64 * 64;
        let start = free_start.div_ceil(64) * 64 + stream as u64 * slice;
        let largest = RegionLayout::largest(start, start + slice)?;
        match capacity {
            None => Some(largest),
            Some(c) if c >= 1 && c <= largest.capacity => Some(RegionLayout { start, capacity: c }),
            Some(_) => None,
        }
    }

    /// Bytes of the region.
    pub fn bytes(&self) -> u64 {
        RING + self.capacity as u64 * ENTRY_BYTES
    }

    /// True if the region fits in a PMR of `pmr_bytes`.
    pub fn fits(&self, pmr_bytes: u64) -> bool {
        self.capacity >= 1 && self.start % 64 == 0 && self.start + self.bytes() <= pmr_bytes
    }

    /// Offset in the region of entry `seq`'s slot.
    pub fn slot(&self, seq: u64) -> u64 {
        RING + (seq % self.capacity as u64) * ENTRY_BYTES
    }

    /// The header line's bytes (geometry fields zero: one stream on one
    /// device).
    pub fn header_bytes(&self) -> [u8; 64] {
        let mut h = [0u8; 64];
        h[0..8].copy_from_slice(&MAGIC.to_le_bytes());
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&self.capacity.to_le_bytes());
        h
    }

    /// The header line's bytes of a region of stream geometry `g`
    /// ([`Geometry::SINGLE`] writes the same bytes as
    /// [`RegionLayout::header_bytes`]).
    pub fn header_bytes_of(&self, g: Geometry) -> [u8; 64] {
        let mut h = self.header_bytes();
        if g != Geometry::SINGLE {
            h[16..22].copy_from_slice(&g.to_bytes());
        }
        h
    }

    /// The geometry a header line names (see [`Geometry`]), or why it is
    /// not one.
    pub fn parse_geometry(h: &[u8; 64]) -> Result<Geometry, String> {
        let g = Geometry::from_header(h);
        if !g.valid() {
            return Err(format!("impossible stream geometry {g:?}"));
        }
        Ok(g)
    }

    /// Parses a header line of a region at `start`: `Ok(None)` without the
    /// magic (no layout), an error if the magic is there but the rest is
    /// not a layout that fits.
    pub fn parse_header(h: &[u8; 64], start: u64, pmr_bytes: u64) -> Result<Option<RegionLayout>, String> {
        if u64::from_le_bytes(le8(&h[0..8])) != MAGIC {
            return Ok(None);
        }
        let version = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
        if version != VERSION {
            return Err(format!("unknown layout version {version}"));
        }
        let l = RegionLayout {
            start,
            capacity: u32::from_le_bytes([h[12], h[13], h[14], h[15]]),
        };
        if !l.fits(pmr_bytes) {
            return Err(format!(
                "capacity {} does not fit the PMR after offset {start:#x}",
                l.capacity
            ));
        }
        Ok(Some(l))
    }
}

/// Eight bytes of `b` (which must be 8 long) as an array.
pub(crate) fn le8(b: &[u8]) -> [u8; 8] {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    a
}

/// One ordering-metadata entry (Figure 6), field by field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawEntry {
    /// First logical block.
    pub lba: u32,
    /// 4 KiB blocks.
    pub len: u32,
    /// Destination device.
    pub devid: u8,
    /// First entry of an epoch.
    pub etag: bool,
    /// Data durable.
    pub dr: bool,
    /// Prepare-write LBA ([`NO_PLBA`]: none).
    pub plba: u32,
    /// The write updates live data in place: recovery keeps its blocks
    /// (see the module documentation).
    pub ipu: bool,
    /// Reserved (21 bits).
    pub rsvd: u32,
}

impl RawEntry {
    /// The entry's 16 bytes.
    pub fn to_bytes(&self) -> [u8; 16] {
        let v: u128 = self.lba as u128
            | (self.len as u128) << 32
            | (self.devid as u128) << 64
            | (self.etag as u128) << 72
            | (self.dr as u128) << 73
            | (self.plba as u128) << 74
            | (self.ipu as u128) << 106
            | ((self.rsvd & RSVD_MASK) as u128) << 107;
        v.to_le_bytes()
    }

    /// Decodes 16 bytes.
    pub fn from_bytes(b: &[u8; 16]) -> RawEntry {
        let v = u128::from_le_bytes(*b);
        RawEntry {
            lba: v as u32,
            len: (v >> 32) as u32,
            devid: (v >> 64) as u8,
            etag: (v >> 72) & 1 == 1,
            dr: (v >> 73) & 1 == 1,
            plba: (v >> 74) as u32,
            ipu: (v >> 106) & 1 == 1,
            rsvd: (v >> 107) as u32 & RSVD_MASK,
        }
    }

    /// The aligned 8-byte word at bytes 8..16 (devid, etag, dr, plba,
    /// ipu, rsvd): what a `dr` update rewrites.
    pub fn high_word(&self) -> [u8; 8] {
        le8(&self.to_bytes()[8..16])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_bits_follow_figure_6() {
        let e = RawEntry {
            lba: 0x1234_5678,
            len: 0x9ABC_DEF0,
            devid: 0xA5,
            etag: true,
            dr: false,
            plba: 0xDEAD_BEEF,
            ipu: true,
            rsvd: 0x15_5555 & RSVD_MASK,
        };
        let b = e.to_bytes();
        assert_eq!(&b[0..4], &0x1234_5678u32.to_le_bytes());
        assert_eq!(&b[4..8], &0x9ABC_DEF0u32.to_le_bytes());
        assert_eq!(b[8], 0xA5);
        let w = u64::from_le_bytes(e.high_word());
        assert_eq!(w & 0xFF, 0xA5);
        assert_eq!((w >> 8) & 1, 1);
        assert_eq!((w >> 9) & 1, 0);
        assert_eq!((w >> 10) & 0xFFFF_FFFF, 0xDEAD_BEEF);
        assert_eq!((w >> 42) & 1, 1);
        assert_eq!(w >> 43, (0x15_5555 & RSVD_MASK) as u64);
        let fresh = RawEntry { ipu: false, ..e };
        assert_eq!(u64::from_le_bytes(fresh.high_word()) ^ w, 1 << 42);
        assert_eq!(RawEntry::from_bytes(&b), e);
        let d = RawEntry { dr: true, ..e };
        assert_eq!(u64::from_le_bytes(d.high_word()) ^ w, 1 << 9);
        assert_eq!(&d.to_bytes()[0..8], &b[0..8]);
    }

    #[test]
    fn header_round_trips_and_rejects_bad_sizes() {
        let l = RegionLayout::largest(0x5000, 2 << 20).unwrap();
        assert_eq!(l.start + l.bytes(), 2 << 20);
        assert_eq!(
            RegionLayout::parse_header(&l.header_bytes(), 0x5000, 2 << 20),
            Ok(Some(l))
        );
        assert_eq!(RegionLayout::parse_header(&[0u8; 64], 0x5000, 2 << 20), Ok(None));
        let big = RegionLayout {
            capacity: l.capacity + 1,
            ..l
        };
        assert!(RegionLayout::parse_header(&big.header_bytes(), 0x5000, 2 << 20).is_err());
        let mut v = l.header_bytes();
        v[8] = 9;
        assert!(RegionLayout::parse_header(&v, 0x5000, 2 << 20).is_err());
        assert_eq!(l.slot(l.capacity as u64 + 3), RING + 3 * ENTRY_BYTES);
    }
}
