//! A read-only view of a namespace's logical blocks, outside the command path.
//!
//! Not an NVMe 1.4 structure: this is the one interface in this crate. A checker (the file
//! system's fsck, a crash explorer) reads what a namespace holds, one logical block at a
//! time, without issuing Read commands (NVMe 1.4 6.9) through a queue: the controller
//! emulator implements it for its media, drive and image types, and byte buffers implement it
//! below, so a checker depends on this trait rather than on the emulator. A real drive
//! offers no such side door; it exists so that a checker can run once per crash state
//! without simulated time.

use std::rc::Rc;
use std::sync::Arc;

/// Bytes per logical block of the namespaces this workspace formats: LBA Format 0 with
/// LBADS = 12 (NVMe 1.4 Figure 245).
pub const LBA_BYTES: usize = 4096;

/// Where a checker reads logical blocks from.
pub trait BlockSource {
    /// Logical blocks the source holds.
    fn blocks(&self) -> u64;
    /// Copies logical block `block` into `buf` (zeros past the end).
    fn read(&self, block: u64, buf: &mut [u8; LBA_BYTES]);
}

/// A raw image: block `b` at byte `b * 4096` (a short last block is ignored).
impl BlockSource for [u8] {
    fn blocks(&self) -> u64 {
        (self.len() / LBA_BYTES) as u64
    }
    fn read(&self, block: u64, buf: &mut [u8; LBA_BYTES]) {
        let src = usize::try_from(block)
            .ok()
            .and_then(|b| b.checked_mul(LBA_BYTES))
            .and_then(|o| self.get(o..o.checked_add(LBA_BYTES)?));
        match src {
            Some(s) => buf.copy_from_slice(s),
            None => buf.fill(0),
        }
    }
}

impl BlockSource for Vec<u8> {
    fn blocks(&self) -> u64 {
        self.as_slice().blocks()
    }
    fn read(&self, block: u64, buf: &mut [u8; LBA_BYTES]) {
        self.as_slice().read(block, buf);
    }
}

impl<T: BlockSource + ?Sized> BlockSource for &T {
    fn blocks(&self) -> u64 {
        (**self).blocks()
    }
    fn read(&self, block: u64, buf: &mut [u8; LBA_BYTES]) {
        (**self).read(block, buf);
    }
}

impl<T: BlockSource + ?Sized> BlockSource for Rc<T> {
    fn blocks(&self) -> u64 {
        (**self).blocks()
    }
    fn read(&self, block: u64, buf: &mut [u8; LBA_BYTES]) {
        (**self).read(block, buf);
    }
}

impl<T: BlockSource + ?Sized> BlockSource for Arc<T> {
    fn blocks(&self) -> u64 {
        (**self).blocks()
    }
    fn read(&self, block: u64, buf: &mut [u8; LBA_BYTES]) {
        (**self).read(block, buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_images_read_whole_blocks_and_zeros_past_the_end() {
        let mut img = vec![0u8; 2 * LBA_BYTES + 7];
        img[LBA_BYTES] = 0xAB;
        let mut buf = [0xFFu8; LBA_BYTES];
        assert_eq!(BlockSource::blocks(&img), 2);
        BlockSource::read(&img, 1, &mut buf);
        assert_eq!(buf[0], 0xAB);
        BlockSource::read(&img, 2, &mut buf);
        assert!(buf.iter().all(|&b| b == 0), "the short last block reads as zeros");
        buf.fill(0xFF);
        BlockSource::read(&img, u64::MAX, &mut buf);
        assert!(buf.iter().all(|&b| b == 0));
    }
}
