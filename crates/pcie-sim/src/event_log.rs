//! What every trace of the machine keeps of its events (the bus trace,
//! [`crate::BusTrace`]; the persistent memory's, [`crate::pmem::PmTrace`]),
//! written once: the entries in order, their payload bytes in one arena,
//! a count of events and a rolling hash, each as far as the
//! [`TraceMode`] asks. A trace adds its own entry type, the words of an
//! entry its hash takes, and its counters.

use crate::trace::{TraceMode, NO_PAYLOAD};

/// An entry an [`EventLog`] stores: its payload's length, and where its
/// payload sits in the log's arena.
pub(crate) trait LogEntry: Copy {
    /// Payload bytes the entry describes.
    fn payload_len(&self) -> u32;
    /// Offset of the payload in the arena, or [`NO_PAYLOAD`].
    fn payload_at(&self) -> u64;
    /// Sets [`LogEntry::payload_at`].
    fn set_payload_at(&mut self, at: u64);
}

/// The entries, payloads, event count and rolling hash of one trace.
#[derive(Clone, Debug)]
pub(crate) struct EventLog<E> {
    mode: TraceMode,
    entries: Vec<E>,
    payloads: Vec<u8>,
    hash: u64,
    events: u64,
}

impl<E> Default for EventLog<E> {
    fn default() -> Self {
        EventLog {
            mode: TraceMode::default(),
            entries: Vec::new(),
            payloads: Vec::new(),
            hash: 0,
            events: 0,
        }
    }
}

const HASH_MUL: u64 = 0x9E37_79B9_7F4A_7C15;

/// One step of the rolling hash.
#[inline]
pub(crate) fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(HASH_MUL).rotate_left(29)
}

/// Mixes an entry's `words` into `h`: each word through a multiply of its
/// own (salted and rotated by its position, so a word moved to another
/// field changes the value), the results folded, and the fold through one
/// [`mix`] into the chain. The multiplies are independent, so the CPU
/// overlaps them: the chain from one entry to the next is one `mix` long
/// instead of one per word (every bus event passes here).
#[inline]
fn mix_words(h: u64, words: &[u64]) -> u64 {
    let mut acc = 0u64;
    for (i, &w) in words.iter().enumerate() {
        let salt = HASH_MUL.rotate_left(7 * i as u32 + 1);
        acc ^= (w ^ salt).wrapping_mul(HASH_MUL).rotate_left(11 * i as u32 + 29);
    }
    mix(h, acc)
}

/// Lanes of [`mix_payload`]: independent chains the CPU runs in parallel.
const LANES: usize = 8;

/// Mixes `payload` into `h`: its 64-byte blocks word by word into eight
/// lanes (word `i` of a block into lane `i`), each lane a chain of [`mix`]
/// seeded from `h` and its index, then the lanes into `h` by position
/// ([`mix_words`]), then
/// the remaining words (the last zero-padded) and the length. Eight
/// independent chains run several times as fast as one (a `mix` waits
/// for the multiply of the step before it), and every DMA payload byte
/// passes here. Equal payloads give equal hashes; a word moved to another
/// lane or block, or a changed length, changes the value (as far as a
/// 64-bit hash can).
#[inline]
fn mix_payload(mut h: u64, payload: &[u8]) -> u64 {
    let word = |b: &[u8]| {
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(w)
    };
    let mut blocks = payload.chunks_exact(8 * LANES);
    if payload.len() >= 8 * LANES {
        let mut lanes = [0u64; LANES];
        for (i, l) in lanes.iter_mut().enumerate() {
            *l = mix(h, i as u64 + 1);
        }
        for block in &mut blocks {
            for (l, w) in lanes.iter_mut().zip(block.chunks_exact(8)) {
                *l = mix(*l, word(w));
            }
        }
        h = mix_words(h, &lanes);
    }
    for w in blocks.remainder().chunks(8) {
        h = mix(h, word(w));
    }
    mix(h, payload.len() as u64)
}

impl<E: LogEntry> EventLog<E> {
    /// An empty log keeping `mode` detail.
    pub(crate) fn new(mode: TraceMode) -> Self {
        EventLog {
            mode,
            ..EventLog::default()
        }
    }

    /// The recording mode.
    pub(crate) fn mode(&self) -> TraceMode {
        self.mode
    }

    /// Changes the recording mode from now on.
    pub(crate) fn set_mode(&mut self, mode: TraceMode) {
        self.mode = mode;
    }

    /// Forgets everything recorded, keeping the allocations for reuse.
    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.payloads.clear();
        self.hash = 0;
        self.events = 0;
    }

    /// Records an event: counts it, and unless only counters are kept,
    /// mixes `words(&e)` (the entry's fields its trace hashes; not
    /// computed when only counters are kept, as in every crash checker's
    /// machine) and `payload` into the hash and stores the entry as the mode asks (its payload in
    /// `Full` mode, when `payload` is exactly the entry's bytes). Returns
    /// its sequence number.
    #[inline]
    pub(crate) fn record<const N: usize>(
        &mut self,
        mut e: E,
        words: impl FnOnce(&E) -> [u64; N],
        payload: &[u8],
    ) -> u64 {
        let seq = self.events;
        self.events += 1;
        if self.mode == TraceMode::CountersOnly {
            return seq;
        }
        self.hash = mix_payload(mix_words(self.hash, &words(&e)), payload);
        match self.mode {
            TraceMode::Off | TraceMode::CountersOnly => {}
            TraceMode::Events => {
                e.set_payload_at(NO_PAYLOAD);
                self.entries.push(e);
            }
            TraceMode::Full => {
                let at = if payload.len() != e.payload_len() as usize || payload.is_empty() {
                    NO_PAYLOAD
                } else {
                    let off = self.payloads.len() as u64;
                    self.payloads.extend_from_slice(payload);
                    off
                };
                e.set_payload_at(at);
                self.entries.push(e);
            }
        }
        seq
    }

    /// Records an event whose payload is the stored payload of entry
    /// `same_as`, without a second copy, mixing only `words` into the hash;
    /// `None` (nothing recorded) where that payload is not stored or its
    /// length differs.
    pub(crate) fn record_sharing(&mut self, mut e: E, same_as: u64, words: &[u64]) -> Option<u64> {
        let at = match self.entries.get(same_as as usize) {
            Some(prev)
                if self.mode == TraceMode::Full
                    && prev.payload_at() != NO_PAYLOAD
                    && prev.payload_len() == e.payload_len() =>
            {
                prev.payload_at()
            }
            _ => return None,
        };
        let seq = self.events;
        self.events += 1;
        self.hash = mix_words(self.hash, words);
        e.set_payload_at(at);
        self.entries.push(e);
        Some(seq)
    }

    /// Events so far (recorded or not, in any mode).
    pub(crate) fn len(&self) -> u64 {
        self.events
    }

    /// The stored entries (empty in `Off` and `CountersOnly` modes).
    pub(crate) fn entries(&self) -> &[E] {
        &self.entries
    }

    /// The payload of an entry (empty unless recorded in `Full` mode).
    pub(crate) fn payload(&self, e: &E) -> &[u8] {
        if e.payload_at() == NO_PAYLOAD {
            return &[];
        }
        let s = e.payload_at() as usize;
        self.payloads.get(s..s + e.payload_len() as usize).unwrap_or(&[])
    }

    /// Rolling hash of every event so far (not kept when only counters
    /// are).
    pub(crate) fn hash(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::{mix_payload, mix_words};

    #[test]
    fn the_entry_hash_sees_every_word_and_its_place() {
        let base = [3u64, 0, 1 << 40, 77, 0xdead_beef];
        let h = mix_words(5, &base);
        assert_eq!(h, mix_words(5, &base), "equal words, equal hashes");
        assert_ne!(h, mix_words(6, &base), "the hash so far counts");
        for i in 0..base.len() {
            for bit in [0, 1, 31, 63] {
                let mut w = base;
                w[i] ^= 1 << bit;
                assert_ne!(h, mix_words(5, &w), "bit {bit} of word {i}");
            }
            for j in i + 1..base.len() {
                let mut w = base;
                w.swap(i, j);
                assert_ne!(h, mix_words(5, &w), "words {i} and {j} swapped");
            }
        }
        // Equal values in two fields do not cancel.
        assert_ne!(mix_words(5, &[9, 9]), mix_words(5, &[0, 0]), "a value repeated");
        assert_ne!(mix_words(5, &[1]), mix_words(5, &[1, 0]), "a word more");
    }

    #[test]
    fn the_payload_hash_sees_every_byte_its_place_and_the_length() {
        let base: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        let h = mix_payload(11, &base);
        assert_eq!(h, mix_payload(11, &base.clone()), "equal payloads, equal hashes");
        assert_ne!(h, mix_payload(12, &base), "the hash so far counts");
        for at in [0, 7, 8, 31, 32, 2047, 4095] {
            let mut p = base.clone();
            p[at] ^= 1;
            assert_ne!(h, mix_payload(11, &p), "a changed byte at {at}");
        }
        // Two words of one block swapped (lanes 0 and 1), and the first two
        // blocks swapped.
        let mut p = base.clone();
        p[..16].rotate_left(8);
        assert_ne!(h, mix_payload(11, &p), "words swapped between lanes");
        let mut p = base.clone();
        p[..128].rotate_left(64);
        assert_ne!(h, mix_payload(11, &p), "blocks swapped");
        // A trailing zero byte, and short payloads of every length.
        let mut p = base.clone();
        p.push(0);
        assert_ne!(h, mix_payload(11, &p), "one byte longer");
        let short: Vec<u64> = (0..40).map(|n| mix_payload(11, &vec![0u8; n])).collect();
        let mut distinct = short.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(
            distinct.len(),
            short.len(),
            "zero payloads of 0..40 bytes differ by length"
        );
    }
}
