//! Image surgery for the tests that damage an image on purpose (fsck,
//! repair): whole blocks read and written straight in the image's bytes.
#![allow(dead_code)]

use mqfs::fsck::BlockSource;
use mqfs::layout::{Superblock, BLOCK};

/// Block `b` of the image.
pub fn get(img: &[u8], b: u64) -> Box<[u8; BLOCK]> {
    let mut buf = Box::new([0u8; BLOCK]);
    img.read(b, &mut buf);
    buf
}

/// Overwrites block `b` of the image.
pub fn put(img: &mut [u8], b: u64, data: &[u8; BLOCK]) {
    img[b as usize * BLOCK..(b as usize + 1) * BLOCK].copy_from_slice(data);
}

/// The image's superblock.
pub fn superblock(img: &[u8]) -> Superblock {
    Superblock::decode(&get(img, 0)[..], img.blocks()).unwrap()
}

/// Sets or clears bit `bit` of bitmap block `block`.
pub fn set_bit(img: &mut [u8], block: u64, bit: u64, on: bool) {
    let mut b = get(img, block);
    let (byte, mask) = ((bit / 8) as usize, 1u8 << (bit % 8));
    if on {
        b[byte] |= mask;
    } else {
        b[byte] &= !mask;
    }
    put(img, block, &b);
}
