//! Where fsck reads blocks from: a drive, a media store, an image or a
//! byte buffer.

use std::rc::Rc;
use std::sync::Arc;

use crate::layout::BLOCK;

/// Where fsck reads blocks from.
pub trait BlockSource {
    /// Blocks the source holds.
    fn blocks(&self) -> u64;
    /// Copies block `block` into `buf` (zeros past the end).
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]);
}

/// A drive's current content as its controller would return it (the
/// write cache where newer, else the media), without simulated time.
impl BlockSource for nvme_ctrl::Backend {
    fn blocks(&self) -> u64 {
        nvme_ctrl::Backend::blocks(self)
    }
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        self.peek(block, buf);
    }
}

impl BlockSource for nvme_ctrl::Media {
    fn blocks(&self) -> u64 {
        nvme_ctrl::Media::blocks(self)
    }
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        nvme_ctrl::Media::read(self, block, buf);
    }
}

impl BlockSource for nvme_ctrl::Image {
    fn blocks(&self) -> u64 {
        nvme_ctrl::Image::blocks(self)
    }
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        nvme_ctrl::Image::read(self, block, buf);
    }
}

/// A raw image: block `b` at byte `b * 4096` (a short last block is
/// ignored).
impl BlockSource for [u8] {
    fn blocks(&self) -> u64 {
        (self.len() / BLOCK) as u64
    }
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        let src = usize::try_from(block)
            .ok()
            .and_then(|b| b.checked_mul(BLOCK))
            .and_then(|o| self.get(o..o.checked_add(BLOCK)?));
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
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        self.as_slice().read(block, buf);
    }
}

impl<T: BlockSource + ?Sized> BlockSource for &T {
    fn blocks(&self) -> u64 {
        (**self).blocks()
    }
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        (**self).read(block, buf);
    }
}

impl<T: BlockSource + ?Sized> BlockSource for Rc<T> {
    fn blocks(&self) -> u64 {
        (**self).blocks()
    }
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        (**self).read(block, buf);
    }
}

impl<T: BlockSource + ?Sized> BlockSource for Arc<T> {
    fn blocks(&self) -> u64 {
        (**self).blocks()
    }
    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        (**self).read(block, buf);
    }
}
