//! A file's bytes in the model and the promises: 4 KiB pages shared
//! between versions.
//!
//! The model keeps a version of every file after every operation (the
//! oracle allows any of them, block by block), so a version must not cost
//! a copy of the file: a write copies only the pages it changes, and a
//! clone copies the page pointers. Pages are the file system's blocks
//! ([`mqfs::layout::BLOCK`]), so the oracle's block-by-block rule reads
//! one page per block.
//!
//! Invariant: there are exactly `ceil(len / PAGE)` pages, and the bytes of
//! the last page past `len` are zero (so a file that grows reads zeros
//! there, as after a truncation).

use std::cmp::Ordering;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Bytes per page: one file-system block.
pub const PAGE: usize = mqfs::layout::BLOCK;

type Page = Arc<[u8; PAGE]>;

/// A file's content: `len` bytes in shared pages. Ordered and serialized
/// as its bytes.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "Vec<u8>", into = "Vec<u8>")]
pub struct Content {
    len: usize,
    pages: Vec<Page>,
}

impl std::fmt::Debug for Content {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Content({} bytes)", self.len)
    }
}

impl From<&[u8]> for Content {
    fn from(bytes: &[u8]) -> Content {
        // Page by page (the same bytes `write_with` would lay down, the
        // last page's tail zero).
        let pages = bytes
            .chunks(PAGE)
            .map(|chunk| {
                let mut page = [0u8; PAGE];
                page[..chunk.len()].copy_from_slice(chunk);
                Arc::new(page)
            })
            .collect();
        Content {
            len: bytes.len(),
            pages,
        }
    }
}

impl From<Content> for Vec<u8> {
    fn from(c: Content) -> Vec<u8> {
        c.to_vec()
    }
}

impl Ord for Content {
    /// As byte strings: block by block (a shorter last block that is a
    /// prefix of the other's block, or no block at all, is less).
    fn cmp(&self, other: &Content) -> Ordering {
        (0..self.pages.len().max(other.pages.len()))
            .map(|i| self.block(i).cmp(other.block(i)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }
}

impl PartialOrd for Content {
    fn partial_cmp(&self, other: &Content) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl From<Vec<u8>> for Content {
    fn from(bytes: Vec<u8>) -> Content {
        Content::from(bytes.as_slice())
    }
}

impl Content {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the file is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes of block `i` inside the file (shorter for the last block,
    /// empty past the end).
    pub fn block(&self, i: usize) -> &[u8] {
        let start = i.saturating_mul(PAGE);
        match self.pages.get(i) {
            Some(p) => &p[..PAGE.min(self.len - start)],
            None => &[],
        }
    }

    /// Bytes `start..end` (clipped to the file).
    pub fn range(&self, start: usize, end: usize) -> Vec<u8> {
        let end = end.min(self.len);
        let mut out = Vec::with_capacity(end.saturating_sub(start));
        let mut at = start;
        while at < end {
            let (i, o) = (at / PAGE, at % PAGE);
            let n = (PAGE - o).min(end - at);
            out.extend_from_slice(&self.pages[i][o..o + n]);
            at += n;
        }
        out
    }

    /// Every byte.
    pub fn to_vec(&self) -> Vec<u8> {
        self.range(0, self.len)
    }

    /// True if the content is `bytes`.
    pub fn eq_bytes(&self, bytes: &[u8]) -> bool {
        bytes.len() == self.len && bytes.chunks(PAGE).enumerate().all(|(i, c)| self.block(i) == c)
    }

    fn page_mut(&mut self, i: usize) -> &mut [u8; PAGE] {
        Arc::make_mut(&mut self.pages[i])
    }

    /// Sets the length: bytes past the old end read as zeros, bytes past
    /// the new end are gone.
    pub fn set_len(&mut self, len: usize) {
        if len < self.len && len % PAGE != 0 {
            let (i, o) = (len / PAGE, len % PAGE);
            self.page_mut(i)[o..].fill(0);
        }
        self.pages.resize_with(len.div_ceil(PAGE), || Arc::new([0; PAGE]));
        self.len = len;
    }

    /// Writes `len` bytes at `off`, byte `k` of the file being `byte(k)`,
    /// growing the file to reach them.
    pub fn write_with(&mut self, off: u64, len: u64, byte: impl Fn(u64) -> u8) {
        let end = (off + len) as usize;
        if end > self.len {
            self.set_len(end);
        }
        let mut at = off as usize;
        while at < end {
            let (i, o) = (at / PAGE, at % PAGE);
            let n = (PAGE - o).min(end - at);
            let page = self.page_mut(i);
            for (k, b) in page[o..o + n].iter_mut().enumerate() {
                *b = byte((at + k) as u64);
            }
            at += n;
        }
    }

    /// Zeroes bytes `start..end` inside the file (the length stays).
    pub fn zero(&mut self, start: usize, end: usize) {
        let end = end.min(self.len);
        if start < end {
            self.write_with(start as u64, (end - start) as u64, |_| 0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Step {
        Write(u64, u64, u8),
        SetLen(usize),
        Zero(usize, usize),
        Snapshot,
    }

    fn step() -> impl Strategy<Value = Step> {
        let at = 0u64..(5 * PAGE as u64);
        prop_oneof![
            (at.clone(), 0u64..(2 * PAGE as u64), any::<u8>()).prop_map(|(o, l, s)| Step::Write(o, l, s)),
            (0usize..5 * PAGE).prop_map(Step::SetLen),
            (0usize..5 * PAGE, 0usize..5 * PAGE).prop_map(|(a, b)| Step::Zero(a.min(b), a.max(b))),
            Just(Step::Snapshot),
        ]
    }

    proptest! {
        /// Content behaves as a byte vector, and a snapshot taken before a
        /// change keeps its bytes (pages are copied on write).
        #[test]
        fn content_is_a_byte_vector(steps in prop::collection::vec(step(), 1..40)) {
            let mut c = Content::default();
            let mut v: Vec<u8> = Vec::new();
            let mut snaps: Vec<(Content, Vec<u8>)> = Vec::new();
            for s in steps {
                match s {
                    Step::Write(off, len, seed) => {
                        let f = |k: u64| (k as u8).wrapping_mul(31).wrapping_add(seed);
                        c.write_with(off, len, f);
                        let end = (off + len) as usize;
                        if v.len() < end {
                            v.resize(end, 0);
                        }
                        for k in off..off + len {
                            v[k as usize] = f(k);
                        }
                    }
                    Step::SetLen(n) => {
                        c.set_len(n);
                        v.resize(n, 0);
                    }
                    Step::Zero(a, b) => {
                        c.zero(a, b);
                        let b = b.min(v.len());
                        if a < b {
                            v[a..b].fill(0);
                        }
                    }
                    Step::Snapshot => snaps.push((c.clone(), v.clone())),
                }
                prop_assert_eq!(c.len(), v.len());
                prop_assert!(c.eq_bytes(&v));
                prop_assert_eq!(c.to_vec(), v.clone());
                prop_assert_eq!(&c, &Content::from(v.as_slice()));
            }
            for (a, av) in &snaps {
                for (b, bv) in &snaps {
                    prop_assert_eq!(a.cmp(b), av.cmp(bv));
                }
            }
            for (c, v) in &snaps {
                prop_assert_eq!(c.to_vec(), v.clone());
                for i in 0..v.len().div_ceil(PAGE) {
                    let end = ((i + 1) * PAGE).min(v.len());
                    prop_assert_eq!(c.block(i), &v[i * PAGE..end]);
                }
            }
        }
    }

    #[test]
    fn a_write_copies_only_its_pages() {
        let mut a = Content::default();
        a.write_with(0, 3 * PAGE as u64, |_| 7);
        let mut b = a.clone();
        b.write_with(PAGE as u64 + 5, 1, |_| 9);
        assert!(Arc::ptr_eq(&a.pages[0], &b.pages[0]));
        assert!(!Arc::ptr_eq(&a.pages[1], &b.pages[1]));
        assert!(Arc::ptr_eq(&a.pages[2], &b.pages[2]));
        assert_eq!(a.block(1)[5], 7);
        assert_eq!(b.block(1)[5], 9);
    }
}
