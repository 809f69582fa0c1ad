//! fsck's small helpers: little-endian reads, bit vectors and runs,
//! directory-block parsing, and the per-inode and per-directory records.

use super::*;

// ---- small helpers ----

pub(super) fn rd_u16(b: &[u8], o: usize) -> u16 {
    match b.get(o..o.saturating_add(2)) {
        Some(s) => u16::from_le_bytes([s[0], s[1]]),
        None => 0,
    }
}

pub(super) fn rd_u32(b: &[u8], o: usize) -> u32 {
    match b.get(o..o.saturating_add(4)) {
        Some(s) => u32::from_le_bytes([s[0], s[1], s[2], s[3]]),
        None => 0,
    }
}

pub(super) fn rd_u64(b: &[u8], o: usize) -> u64 {
    let mut x = [0u8; 8];
    if let Some(s) = b.get(o..o.saturating_add(8)) {
        x.copy_from_slice(s);
    }
    u64::from_le_bytes(x)
}

/// The low `k` bits set (k <= 64).
pub(super) fn ones(k: u64) -> u64 {
    if k >= 64 {
        !0
    } else {
        (1u64 << k) - 1
    }
}

/// 64 bits of a byte bitmap starting at bit `bit` (zeros past the end).
pub(super) fn bits_at(src: &[u8], bit: u64) -> u64 {
    let byte = (bit / 8) as usize;
    let sh = (bit % 8) as u32;
    if let Some(s) = byte.checked_add(8).and_then(|e| src.get(byte..e)) {
        let mut x = [0u8; 8];
        x.copy_from_slice(s);
        let lo = u64::from_le_bytes(x) >> sh;
        if sh == 0 {
            return lo;
        }
        let hi = src.get(byte + 8).copied().unwrap_or(0) as u64;
        return lo | hi << (64 - sh);
    }
    let mut x = [0u8; 16];
    if byte < src.len() {
        let end = byte.saturating_add(9).min(src.len());
        x[..end - byte].copy_from_slice(&src[byte..end]);
    }
    (u128::from_le_bytes(x) >> sh) as u64
}

/// Clear bits of a byte bitmap in `[a, b)`: how many, and the first.
pub(super) fn clear_bits(src: &[u8], a: u64, b: u64) -> (u64, Option<u64>) {
    let mut count = 0u64;
    let mut first = None;
    let mut i = a;
    while i < b {
        let k = (b - i).min(64);
        let clear = !bits_at(src, i) & ones(k);
        if clear != 0 {
            first.get_or_insert(i + clear.trailing_zeros() as u64);
            count += clear.count_ones() as u64;
        }
        i += k;
    }
    (count, first)
}

/// A fixed-size bit vector.
#[derive(Debug, Default)]
pub(super) struct Bits {
    pub(super) w: Vec<u64>,
}

impl Bits {
    pub(super) fn new(n: u64) -> Bits {
        Bits {
            w: vec![0; n.div_ceil(64) as usize],
        }
    }

    pub(super) fn get(&self, i: u64) -> bool {
        self.w
            .get((i / 64) as usize)
            .is_some_and(|x| (x >> (i % 64)) & 1 == 1)
    }

    pub(super) fn set(&mut self, i: u64) {
        if let Some(x) = self.w.get_mut((i / 64) as usize) {
            *x |= 1 << (i % 64);
        }
    }

    /// 64 bits starting at bit `i`.
    pub(super) fn get64(&self, i: u64) -> u64 {
        let wi = (i / 64) as usize;
        let sh = i % 64;
        let lo = self.w.get(wi).copied().unwrap_or(0) >> sh;
        if sh == 0 {
            lo
        } else {
            lo | self.w.get(wi + 1).copied().unwrap_or(0) << (64 - sh)
        }
    }

    /// ORs `v` into the bits starting at `i`.
    pub(super) fn or64(&mut self, i: u64, v: u64) {
        let wi = (i / 64) as usize;
        let sh = i % 64;
        if let Some(x) = self.w.get_mut(wi) {
            *x |= v << sh;
        }
        if sh != 0 {
            if let Some(x) = self.w.get_mut(wi + 1) {
                *x |= v >> (64 - sh);
            }
        }
    }

    /// Calls `f(word index, mask)` for the words of `[start, start + len)`.
    pub(super) fn for_range(start: u64, len: u64, mut f: impl FnMut(usize, u64)) {
        let end = start.saturating_add(len);
        let mut i = start;
        while i < end {
            let wi = i / 64;
            let lo = i % 64;
            let hi = (end - wi * 64).min(64);
            f(wi as usize, ones(hi) & !ones(lo));
            i = wi * 64 + hi;
        }
    }

    pub(super) fn any_in(&self, start: u64, len: u64) -> bool {
        let mut any = false;
        Bits::for_range(start, len, |wi, m| {
            any |= self.w.get(wi).is_some_and(|x| x & m != 0);
        });
        any
    }

    pub(super) fn set_range(&mut self, start: u64, len: u64) {
        let w = &mut self.w;
        Bits::for_range(start, len, |wi, m| {
            if let Some(x) = w.get_mut(wi) {
                *x |= m;
            }
        });
    }

    pub(super) fn count(&self) -> u64 {
        self.w.iter().map(|x| x.count_ones() as u64).sum()
    }
}

/// Runs of set bits `[a, b]` in `words` (bit i of word k is item 64k+i),
/// each run reported once.
pub(super) fn runs(words: impl Iterator<Item = u64>, mut f: impl FnMut(u64, u64)) {
    let mut run: Option<(u64, u64)> = None;
    for (k, mut x) in words.enumerate() {
        while x != 0 {
            let t = x.trailing_zeros() as u64;
            let i = k as u64 * 64 + t;
            x &= x - 1;
            run = match run {
                Some((a, b)) if b + 1 == i => Some((a, i)),
                Some((a, b)) => {
                    f(a, b);
                    Some((i, i))
                }
                None => Some((i, i)),
            };
        }
    }
    if let Some((a, b)) = run {
        f(a, b);
    }
}

pub(super) fn range_text(a: u64, b: u64) -> String {
    if a == b {
        format!("block {a}")
    } else {
        format!("blocks {a}..={b} ({} blocks)", b - a + 1)
    }
}

/// A hash of a name (8 bytes at a time; only equal hashes are compared).
pub(super) fn name_hash(n: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = n.len() as u64;
    let mut chunks = n.chunks_exact(8);
    for c in &mut chunks {
        let mut x = [0u8; 8];
        x.copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(x)).wrapping_mul(K).rotate_left(29);
    }
    let mut x = [0u8; 8];
    x[..chunks.remainder().len()].copy_from_slice(chunks.remainder());
    (h ^ u64::from_le_bytes(x)).wrapping_mul(K)
}

pub(super) fn valid_name(n: &[u8]) -> bool {
    !n.is_empty() && !n.contains(&b'/') && !n.contains(&0) && std::str::from_utf8(n).is_ok()
}

pub(super) fn valid_target(t: &[u8]) -> bool {
    !t.is_empty() && !t.contains(&0) && std::str::from_utf8(t).is_ok()
}

/// One live entry of a directory block (its name is in `Checker::names`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Ent {
    pub(super) ino: u32,
    pub(super) ftype: FileType,
    pub(super) name_at: u32,
    pub(super) name_len: u8,
}

/// Parses a directory block exactly as `layout::decode_dir_block` does
/// (same checks, same verdict), appending the live entries to `out` and
/// their names to `names` without allocating per entry.
pub(super) fn parse_dir_block(
    b: &[u8; BLOCK],
    out: &mut Vec<Ent>,
    names: &mut Vec<u8>,
) -> Result<(), &'static str> {
    out.clear();
    if b[DIR_SPACE + 7] != 0xDE || rd_u16(b, DIR_SPACE + 4) != DIR_TAIL as u16 {
        return Err("no checksum tail");
    }
    if rd_u32(b, DIR_SPACE + 8) != crc(&b[..DIR_SPACE]) {
        return Err("checksum mismatch");
    }
    let mark = names.len();
    let mut off = 0usize;
    pub(super) fn fail(
        names: &mut Vec<u8>,
        mark: usize,
        out: &mut Vec<Ent>,
        w: &'static str,
    ) -> Result<(), &'static str> {
        names.truncate(mark);
        out.clear();
        Err(w)
    }
    while off < DIR_SPACE {
        if off + 8 > DIR_SPACE {
            return fail(names, mark, out, "entry header past the end");
        }
        let ino = rd_u32(b, off);
        let rec = rd_u16(b, off + 4) as usize;
        let nlen = b[off + 6] as usize;
        if rec < 8 || rec % 4 != 0 || off + rec > DIR_SPACE || (ino != 0 && dirent_len(nlen) > rec) {
            return fail(names, mark, out, "bad record length");
        }
        if ino != 0 {
            let Some(ftype) = FileType::from_dirent_code(b[off + 7]) else {
                return fail(names, mark, out, "bad file type");
            };
            if nlen == 0 {
                return fail(names, mark, out, "empty name");
            }
            out.push(Ent {
                ino,
                ftype,
                name_at: names.len() as u32,
                name_len: nlen as u8,
            });
            names.extend_from_slice(&b[off + 8..off + 8 + nlen]);
        }
        off += rec;
    }
    Ok(())
}

/// What an inode turned out to be.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Kind {
    /// Not looked at yet.
    #[default]
    Unseen,
    /// A free slot.
    Free,
    /// Damaged (a finding says how).
    Bad,
    File,
    Dir,
    Symlink,
    /// A fifo, device or socket.
    Special(FileType),
}

impl Kind {
    pub(super) fn of(t: FileType) -> Kind {
        match t {
            FileType::File => Kind::File,
            FileType::Dir => Kind::Dir,
            FileType::Symlink => Kind::Symlink,
            FileType::Fifo | FileType::CharDev | FileType::BlockDev | FileType::Socket => Kind::Special(t),
        }
    }
    pub(super) fn file_type(self) -> Option<FileType> {
        match self {
            Kind::File => Some(FileType::File),
            Kind::Dir => Some(FileType::Dir),
            Kind::Symlink => Some(FileType::Symlink),
            Kind::Special(t) => Some(t),
            _ => None,
        }
    }
    pub(super) fn live(self) -> bool {
        self.file_type().is_some()
    }
}

pub(super) const REACHED: u8 = 1;
pub(super) const DISCOVERED: u8 = 2;
pub(super) const NO_DIR: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
pub(super) struct InoInfo {
    pub(super) kind: Kind,
    pub(super) flags: u8,
    pub(super) links: u16,
    pub(super) refs: u32,
    /// Index in `Checker::dirs` (directories only).
    pub(super) dir: u32,
}

impl Default for InoInfo {
    fn default() -> Self {
        InoInfo {
            kind: Kind::Unseen,
            flags: 0,
            links: 0,
            refs: 0,
            dir: NO_DIR,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(super) struct DirRec {
    /// Its valid extents: `Checker::dir_ext[ext_at..ext_at + ext_len]`.
    pub(super) ext_at: u32,
    pub(super) ext_len: u32,
    /// Blocks its size covers.
    pub(super) nblocks: u64,
    /// The directory it was first reached from (the root: itself).
    pub(super) parent: u32,
    /// It has the index flag (`FLAG_INDEX`): its index is checked.
    pub(super) indexed: bool,
}
