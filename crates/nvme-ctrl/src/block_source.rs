//! The controller's drive, media and image types as [`nvme_spec::BlockSource`]s: what a
//! checker (fsck, the crash explorer) reads, without simulated time and without a command
//! through a queue. A real drive has no such side door (see [`nvme_spec::image`]).

use nvme_spec::{BlockSource, LBA_BYTES};

use crate::backend::Backend;
use crate::media::{Image, Media, BLOCK};

const _: () = assert!(
    BLOCK == LBA_BYTES,
    "the media's block is the namespace's logical block"
);

/// A drive's current content as its controller would return it (the write cache where
/// newer, else the media).
impl BlockSource for Backend {
    fn blocks(&self) -> u64 {
        Backend::blocks(self)
    }
    fn read(&self, block: u64, buf: &mut [u8; LBA_BYTES]) {
        self.note_read(block);
        self.peek(block, buf);
    }
}

/// The media store alone (no write cache).
impl BlockSource for Media {
    fn blocks(&self) -> u64 {
        Media::blocks(self)
    }
    fn read(&self, block: u64, buf: &mut [u8; LBA_BYTES]) {
        Media::read(self, block, buf);
    }
}

/// A frozen drive image.
impl BlockSource for Image {
    fn blocks(&self) -> u64 {
        Image::blocks(self)
    }
    fn read(&self, block: u64, buf: &mut [u8; LBA_BYTES]) {
        Image::read(self, block, buf);
    }
}
