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
}

/// Replays a controller's events from a trace.
#[derive(Debug)]
pub struct MediaCursor<'t> {
    trace: &'t BusTrace,
    port: u8,
    volatile: bool,
    applied: usize,
    durable: imbl::HashMap<u64, Block>,
    /// Pending blocks by block number, with the payload offset of the
    /// version (to recognise its MEDIA_WRITE).
    pending: std::collections::BTreeMap<u64, (PendingBlock, u64)>,
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
            pending: Default::default(),
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
        let Some(data) = block_of(self.trace.payload(e)) else {
            return;
        };
        match e.code {
            events::DATA_IN if self.volatile => {
                self.pending.insert(
                    e.addr,
                    (
                        PendingBlock {
                            block: e.addr,
                            data,
                            data_in: i,
                        },
                        e.payload,
                    ),
                );
            }
            events::DATA_IN => {
                self.durable.insert(e.addr, data);
            }
            events::MEDIA_WRITE => {
                self.durable.insert(e.addr, data);
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
