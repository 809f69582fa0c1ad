//! Power failure of the media: which media states a crash after trace
//! entry `k` may leave (ARCHITECTURE.md 4, the rows for the write cache and
//! multi-block writes).
//!
//! Replayed from the controller's own trace events:
//!
//! - a [`events::MEDIA_WRITE`] is durable;
//! - a [`events::DATA_IN`] is durable at once on a drive whose cache is
//!   power-loss protected or absent-and-protected (Optane: the data is in
//!   the power-protected domain once the controller has it); on a drive with
//!   a volatile cache it stays *pending* until a `MEDIA_WRITE` of that
//!   version, and at a crash any subset of the pending blocks may have been
//!   destaged (for each block: its newest pending version, or nothing);
//! - a write of several blocks is torn at block granularity: each block has
//!   its own events, and a crash point falls between any two of them.
//!
//! Durable content is kept as a persistent map of blocks over the image the
//! run started from, so a crash state is that map (cloned in O(1)) plus the
//! chosen pending blocks.

use std::sync::Arc;

use pcie_sim::content_hash::{unit_term, ContentHash, Space};
use pcie_sim::{BusTrace, EventKind, TraceMode};

use crate::error::CtrlError;
use crate::events;
use crate::media::{Block, Image, Media, BLOCK};

/// A block that may or may not have been destaged at the crash point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingBlock {
    /// Media block number.
    pub block: u64,
    /// Its newest content not known to be on the media.
    pub data: Block,
    /// Trace index of the `DATA_IN` event that brought it.
    pub data_in: usize,
    /// Its contribution to a media delta's hash.
    pub hash: ContentHash,
}

/// The contribution of block `lba` holding `data` to a delta's hash
/// ([`pcie_sim::content_hash`]).
pub fn block_hash(lba: u64, data: &[u8]) -> ContentHash {
    unit_term(Space::MediaBlock, lba, data)
}

/// Replays a controller's events from a trace.
#[derive(Debug)]
pub struct MediaCursor<'t> {
    trace: &'t BusTrace,
    port: u8,
    volatile: bool,
    applied: usize,
    durable: imbl::HashMap<u64, Block>,
    /// XOR of the hash contributions of the durable blocks, and each one's.
    durable_hash: ContentHash,
    durable_hashes: imbl::HashMap<u64, ContentHash>,
    /// Pending blocks by block number, with the payload offset of the
    /// version (to recognise its MEDIA_WRITE).
    pending: std::collections::BTreeMap<u64, (PendingBlock, u64)>,
    /// Bumped whenever the durable or pending blocks change.
    changes: u64,
}

fn block_of(payload: &[u8]) -> Option<Block> {
    if payload.len() != BLOCK {
        return None;
    }
    let mut b = [0u8; BLOCK];
    b.copy_from_slice(payload);
    Some(Arc::new(b))
}

impl<'t> MediaCursor<'t> {
    /// A cursor before the first entry of `trace` (recorded in `Full`
    /// mode) for the controller on `port`. `volatile`: the drive has a
    /// write cache without power-loss protection
    /// ([`crate::SsdProfile::volatile_cache`]).
    pub fn new(trace: &'t BusTrace, port: u8, volatile: bool) -> Result<Self, CtrlError> {
        if trace.mode() != TraceMode::Full {
            return Err(CtrlError::Crash("the trace was recorded without payloads".into()));
        }
        Ok(MediaCursor {
            trace,
            port,
            volatile,
            applied: 0,
            durable: imbl::HashMap::new(),
            durable_hash: 0,
            durable_hashes: Default::default(),
            pending: Default::default(),
            changes: 0,
        })
    }

    /// Moves to "just after entry `k`" (forward only).
    pub fn advance_past(&mut self, k: usize) -> Result<(), CtrlError> {
        let entries = self.trace.entries();
        if k >= entries.len() {
            return Err(CtrlError::Crash(format!(
                "crash point {k} past the end ({})",
                entries.len()
            )));
        }
        if k + 1 < self.applied {
            return Err(CtrlError::Crash("crash points only move forward".into()));
        }
        while self.applied <= k {
            self.apply(self.applied);
            self.applied += 1;
        }
        Ok(())
    }

    fn apply(&mut self, i: usize) {
        let e = &self.trace.entries()[i];
        if e.kind != EventKind::Device || e.source != self.port {
            return;
        }
        let payload = self.trace.payload(e);
        let Some(data) = block_of(payload) else {
            return;
        };
        let hash = block_hash(e.addr, payload);
        if matches!(e.code, events::DATA_IN | events::MEDIA_WRITE) {
            self.changes += 1;
        }
        match e.code {
            events::DATA_IN if self.volatile => {
                self.pending.insert(
                    e.addr,
                    (
                        PendingBlock {
                            block: e.addr,
                            data,
                            data_in: i,
                            hash,
                        },
                        e.payload,
                    ),
                );
            }
            events::DATA_IN => {
                self.make_durable(e.addr, data, hash);
            }
            events::MEDIA_WRITE => {
                self.make_durable(e.addr, data, hash);
                if self
                    .pending
                    .get(&e.addr)
                    .is_some_and(|(_, off)| *off == e.payload)
                {
                    self.pending.remove(&e.addr);
                }
            }
            _ => {}
        }
    }

    /// A counter of changes to the durable and pending blocks. Equal at
    /// two points means equal media states at both.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    fn make_durable(&mut self, lba: u64, data: Block, hash: ContentHash) {
        self.durable.insert(lba, data);
        if let Some(old) = self.durable_hashes.insert(lba, hash) {
            self.durable_hash ^= old;
        }
        self.durable_hash ^= hash;
    }

    /// A hash of the durable delta combined with the pending blocks at
    /// `landed`: equal for states with equal delta content.
    pub fn state_hash(&self, pending: &[PendingBlock], landed: &[usize]) -> ContentHash {
        let mut h = self.durable_hash;
        for &i in landed {
            if let Some(p) = pending.get(i) {
                if let Some(old) = self.durable_hashes.get(&p.block) {
                    h ^= old;
                }
                h ^= p.hash;
            }
        }
        h
    }

    /// Per block of one crash state's delta (see [`MediaCursor::materialize`]),
    /// its hash contribution. Cheap: shares structure with the cursor.
    pub fn block_hashes(
        &self,
        pending: &[PendingBlock],
        landed: &[usize],
    ) -> imbl::HashMap<u64, ContentHash> {
        let mut h = self.durable_hashes.clone();
        for &i in landed {
            if let Some(p) = pending.get(i) {
                h.insert(p.block, p.hash);
            }
        }
        h
    }

    /// Blocks that are on the media for certain, over the starting image.
    pub fn durable(&self) -> &imbl::HashMap<u64, Block> {
        &self.durable
    }

    /// Blocks that may or may not have been destaged, by block number.
    pub fn pending(&self) -> Vec<PendingBlock> {
        self.pending.values().map(|(p, _)| p.clone()).collect()
    }

    /// The media delta of one crash state: the durable blocks plus the
    /// pending blocks at `landed` (indices into [`MediaCursor::pending`]).
    pub fn materialize(
        &self,
        pending: &[PendingBlock],
        landed: &[usize],
    ) -> Result<imbl::HashMap<u64, Block>, CtrlError> {
        let mut delta = self.durable.clone();
        for &i in landed {
            let p = pending
                .get(i)
                .ok_or_else(|| CtrlError::Crash(format!("no pending block {i}")))?;
            delta.insert(p.block, p.data.clone());
        }
        Ok(delta)
    }

    /// A media store for a fresh controller booting over a crash state.
    pub fn media(base: &Arc<Image>, delta: imbl::HashMap<u64, Block>) -> Media {
        Media::cow(base.clone(), delta)
    }
}
