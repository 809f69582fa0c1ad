//! 128-bit content hashes of persistent images, for recognising crash
//! states already checked.
//!
//! An image (a PMR, the media blocks that differ from a base) hashes as the
//! XOR of one term per non-zero page or per delta block (see [`unit_term`]): xxh3-128 of the
//! unit's bytes, seeded by the unit's position and its address space. The
//! XOR lets a hash be kept incrementally (a write takes the unit's old term
//! out and puts the new one in) and makes it independent of the order the
//! units were written in.
//!
//! Why a collision is negligible: every position contributes at most one
//! term, and terms of different positions or spaces are hashes under
//! different seeds, so two different images hash equal only if the XOR of
//! the terms where they differ is zero, which for a 128-bit hash behaves as
//! a uniformly random event of probability 2^-128. Over n distinct states
//! the chance of any collision is below n^2 / 2^129: for 2^40 states (far
//! past any run) about 2^-49. A 64-bit key, as before, gave about 2^-25 at
//! 2^20 states, and a collision silently skips a state.

use xxhash_rust::xxh3::xxh3_128_with_seed;

/// A 128-bit content hash.
pub type ContentHash = u128;

/// The address space a unit belongs to: equal bytes at the same index of
/// two spaces must not cancel out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    /// A 4 KiB page of a PMR, by page index.
    PmrPage,
    /// A media block, by block number.
    MediaBlock,
}

/// The term of the unit at `index` of `space` holding `bytes`.
///
/// A PMR page is hashed whole (every page is present, a page never written
/// reads as zeros), so an all-zero page's term is 0, equal to an absent
/// one. A media block is hashed as part of a *delta* over a base image,
/// where an absent block means "the base's content": a delta block of
/// zeros over a base block that is not zero is a different image, so its
/// term is never 0 (it used to be, and a zeroed block that landed hashed
/// like the same write not landed).
pub fn unit_term(space: Space, index: u64, bytes: &[u8]) -> ContentHash {
    if space == Space::PmrPage && bytes.iter().all(|&b| b == 0) {
        return 0;
    }
    let seed = index.wrapping_mul(2) | matches!(space, Space::MediaBlock) as u64;
    xxh3_128_with_seed(bytes, seed)
}

/// Combines independent 128-bit keys (a content hash and a key of the
/// promises in force, say) into one, order-sensitively.
pub fn combine(parts: &[ContentHash]) -> ContentHash {
    let mut bytes = Vec::with_capacity(parts.len() * 16);
    for p in parts {
        bytes.extend_from_slice(&p.to_le_bytes());
    }
    xxh3_128_with_seed(&bytes, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_units_are_absent_and_spaces_do_not_cancel() {
        assert_eq!(unit_term(Space::PmrPage, 3, &[0; 4096]), 0);
        assert_ne!(
            unit_term(Space::MediaBlock, 3, &[0; 4096]),
            0,
            "a zeroed delta block is not the base's block"
        );
        let a = unit_term(Space::PmrPage, 3, &[7; 4096]);
        let b = unit_term(Space::MediaBlock, 3, &[7; 4096]);
        assert_ne!(a, 0);
        assert_ne!(a, b, "equal bytes at the same index of two spaces");
        assert_ne!(
            a,
            unit_term(Space::PmrPage, 4, &[7; 4096]),
            "position is part of the term"
        );
    }

    #[test]
    fn combine_is_order_sensitive() {
        assert_ne!(combine(&[1, 2]), combine(&[2, 1]));
        assert_eq!(combine(&[1, 2]), combine(&[1, 2]));
    }
}
