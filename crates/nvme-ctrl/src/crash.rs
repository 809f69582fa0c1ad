//! Crash states of a machine with one controller: the PMR states of
//! `pcie_sim::CrashCursor` combined with the media states of
//! [`MediaCursor`], and a fresh machine booted over any of them.
//!
//! A state is the persistent PMR image at the crash point plus a choice of
//! pending PMR writes, times the durable media blocks plus a choice of
//! pending (volatile) blocks. Both choices are enumerated exhaustively up
//! to a bound on the pending items, and the number of states the bound
//! left out is reported. Building a state copies no image: PMR pages and
//! media blocks are shared copy-on-write with the cursors.

use std::rc::Rc;
use std::sync::Arc;

use pcie_sim::{BusLayout, BusTrace, CrashChoice, CrashCursor, Machine, PageStore};

use crate::controller::{Controller, ControllerConfig};
use crate::error::CtrlError;
use crate::media::{Block, Image, Media};
use crate::power::MediaCursor;

/// Which pending items landed in one state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct StateChoice {
    /// The PMR side (in-flight prefix per port, WC lines that landed).
    pub pmr: CrashChoice,
    /// Indices of the pending media blocks that were destaged.
    pub media: Vec<usize>,
}

/// One crash state.
#[derive(Clone, Debug)]
pub struct CrashState {
    /// The crash happened just after this trace entry.
    pub point: usize,
    /// The choice of pending items.
    pub choice: StateChoice,
    /// The PMR image of the controller's port.
    pub pmr: PageStore,
    /// Media blocks that differ from the starting image.
    pub media: imbl::HashMap<u64, Block>,
    /// Hash of the media delta (see [`MediaCursor::state_hash`]).
    pub media_hash: u64,
}

impl CrashState {
    /// A hash of the state's content (PMR bytes and media blocks), for
    /// skipping states already checked. Cheap: both halves are kept
    /// incrementally.
    pub fn content_hash(&mut self) -> u64 {
        self.pmr.content_hash().rotate_left(17) ^ self.media_hash
    }
}

/// Enumerates crash states point by point.
#[derive(Debug)]
pub struct Explorer<'t> {
    trace: &'t BusTrace,
    port: u8,
    pmr: CrashCursor<'t>,
    media: MediaCursor<'t>,
}

/// How many states the bounds left out at one point.
pub type LeftOut = u64;

impl<'t> Explorer<'t> {
    /// An explorer over `trace` (recorded in `Full` mode) for the controller
    /// on `port`, starting from `initial_pmr` (one image per port of
    /// `layout`). `volatile`: the drive's cache loses data at power failure.
    pub fn new(
        trace: &'t BusTrace,
        layout: BusLayout,
        initial_pmr: Vec<PageStore>,
        port: u8,
        volatile: bool,
    ) -> Result<Self, CtrlError> {
        Ok(Explorer {
            trace,
            port,
            pmr: CrashCursor::new(trace, layout, initial_pmr)?,
            media: MediaCursor::new(trace, port, volatile)?,
        })
    }

    /// Number of crash points (entries of the trace).
    pub fn points(&self) -> usize {
        self.trace.entries().len()
    }

    /// Every state after entry `k` (points must be visited in order).
    /// `max_lines` bounds the write-combining subsets, `max_blocks` the
    /// media subsets (2^bound each at most).
    pub fn states_at(
        &mut self,
        k: usize,
        max_lines: u32,
        max_blocks: u32,
    ) -> Result<(Vec<CrashState>, LeftOut), CtrlError> {
        self.pmr.advance_past(k)?;
        self.media.advance_past(k)?;
        let pending = self.pmr.pending();
        let (pmr_choices, mut left_out) = self.pmr.choices(&pending, max_lines);
        let blocks = self.media.pending();
        let n = blocks.len() as u32;
        let enumerated = n.min(max_blocks).min(16);
        if n > enumerated {
            left_out += pmr_choices.len() as u64 * ((1u64 << n.min(63)) - (1u64 << enumerated));
        }
        let mut out = Vec::new();
        for pc in &pmr_choices {
            let images = self.pmr.materialize(&pending, pc)?;
            let pmr = images
                .get(self.port as usize)
                .cloned()
                .ok_or_else(|| CtrlError::Crash("no PMR image for the port".into()))?;
            for mask in 0u64..(1u64 << enumerated) {
                let landed: Vec<usize> = (0..enumerated as usize)
                    .filter(|b| mask & (1 << b) != 0)
                    .collect();
                let media = self.media.materialize(&blocks, &landed)?;
                let media_hash = self.media.state_hash(&blocks, &landed);
                out.push(CrashState {
                    point: k,
                    pmr: pmr.clone(),
                    media,
                    media_hash,
                    choice: StateChoice {
                        pmr: pc.clone(),
                        media: landed,
                    },
                });
            }
        }
        Ok((out, left_out))
    }
}

/// Attaches a fresh controller over a crash state to `machine` (which
/// must have no device yet, so the controller gets port 0).
pub fn boot(
    machine: &Machine,
    config: ControllerConfig,
    base: &Arc<Image>,
    state: &CrashState,
) -> Result<Rc<Controller>, CtrlError> {
    let media = Media::cow(base.clone(), state.media.clone());
    Controller::attach(machine, config, media, Some(state.pmr.clone()))
}
