//! Crash states of a machine with one controller ([`Explorer`]) or several
//! ([`DevicesExplorer`]): the PMR states of `pcie_sim::CrashCursor`
//! combined with the media states of one [`MediaCursor`] per controller,
//! and a fresh machine booted over any of them.
//!
//! With several controllers each one fails on its own: the PMR cursor
//! already chooses per port which in-flight writes landed, and the media
//! states are the product of each drive's choice of cache blocks that were
//! destaged ([`product`], the one enumeration both explorers use).
//!
//! A state is the persistent PMR image at the crash point plus a choice of
//! pending PMR writes, times the durable media blocks plus a choice of
//! pending (volatile) blocks. Both choices are enumerated exhaustively up
//! to a bound on the pending items, and the number of states the bound
//! left out is reported. Building a state copies no image: PMR pages and
//! media blocks are shared copy-on-write with the cursors.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;

use pcie_sim::content_hash::ContentHash;
use pcie_sim::{BusLayout, BusTrace, CrashChoice, CrashCursor, ItemConstraint, Machine, PageStore, Pending};

use crate::controller::{Controller, ControllerConfig};
use crate::error::CtrlError;
use crate::media::{Block, Image, Media};
use crate::power::{MediaCursor, PendingBlock};

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
    /// Hash of the media delta (see [`MediaCursor::state`]).
    pub media_hash: ContentHash,
    /// Each delta block's contribution to `media_hash`.
    pub block_hashes: imbl::HashMap<u64, ContentHash>,
}

impl CrashState {
    /// A hash of the state's content (PMR bytes and media blocks), for
    /// skipping states already checked. Cheap: both halves are kept
    /// incrementally.
    pub fn content_hash(&mut self) -> ContentHash {
        // The PMR's terms and the media's are seeded by different address
        // spaces, so they combine by XOR like the terms within each.
        self.pmr.content_hash() ^ self.media_hash
    }
}

/// A unit of persistent storage a checker reads: a 64-byte line of a
/// device's PMR, or a media block. Pending items never straddle units
/// (a write-combining line is one PMR unit, a block version one block).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Unit {
    /// PMR bytes `line * 64 .. line * 64 + 64` of the device on `port`.
    Pmr {
        /// The device's port.
        port: u8,
        /// Offset / 64.
        line: u64,
    },
    /// A media block of the drive on `port`.
    Block {
        /// The drive's port.
        port: u8,
        /// The block's LBA on that drive.
        lba: u64,
    },
}

/// Facts fixed about the pending items of one point: PMR items as
/// [`ItemConstraint`] says, media block versions that landed or did not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Constraint {
    /// The PMR side.
    pub pmr: ItemConstraint,
    /// Indices into the point's pending blocks that landed.
    pub media_in: BTreeSet<usize>,
    /// Indices that did not.
    pub media_out: BTreeSet<usize>,
}

impl Constraint {
    /// Both constraints at once.
    pub fn and(&self, other: &Constraint) -> Constraint {
        Constraint {
            pmr: self.pmr.and(&other.pmr),
            media_in: self.media_in.union(&other.media_in).copied().collect(),
            media_out: self.media_out.union(&other.media_out).copied().collect(),
        }
    }
}

/// The pending items of one point that write a unit.
#[derive(Clone, Debug, Default)]
struct UnitItems {
    /// In-flight writes: (port, position in the port's in-flight list),
    /// oldest first.
    posted: Vec<(u8, usize)>,
    /// Lines (indices into the point's pending lines).
    lines: Vec<usize>,
    /// Block versions (indices into the point's pending blocks), oldest
    /// first.
    versions: Vec<usize>,
}

/// Most classes one unit may have (past it, [`PointItems::classes`] gives
/// up rather than enumerate).
pub const MAX_CLASSES: usize = 1 << 12;

/// The pending items of one point by the unit each writes, for choosing
/// states by what a checker read ([`Explorer::items_at`]).
///
/// A unit's *class* in a state is what decides its content there: which
/// of its PMR items landed (in-flight writes land in order, so for them
/// how many), or which of its block versions is the newest that landed
/// (the block holds that one; older ones do not show). Two states in the
/// same class at a unit hold the same bytes there.
#[derive(Clone, Debug, Default)]
pub struct PointItems {
    units: BTreeMap<Unit, UnitItems>,
}

impl PointItems {
    /// True if some pending item writes `u` (else `u` holds the same in
    /// every state of the point).
    pub fn pending_at(&self, u: Unit) -> bool {
        self.units.contains_key(&u)
    }

    /// Every class of `u`, each as the constraint that says it (on `u`'s
    /// items only); `None` past [`MAX_CLASSES`].
    pub fn classes(&self, u: Unit) -> Option<Vec<Constraint>> {
        let Some(it) = self.units.get(&u) else {
            return Some(vec![Constraint::default()]);
        };
        let posted = posted_classes(&it.posted);
        let n = posted
            .len()
            .checked_mul(1usize.checked_shl(it.lines.len() as u32)?)?;
        let n = n.checked_mul(it.versions.len() + 1)?;
        if n > MAX_CLASSES {
            return None;
        }
        let mut out = Vec::with_capacity(n);
        for p in &posted {
            for mask in 0u64..1 << it.lines.len() {
                for newest in 0..=it.versions.len() {
                    let mut c = p.clone();
                    for (b, &l) in it.lines.iter().enumerate() {
                        if mask & (1 << b) != 0 {
                            c.pmr.lines_in.insert(l);
                        } else {
                            c.pmr.lines_out.insert(l);
                        }
                    }
                    version_class(&it.versions, newest, &mut c);
                    out.push(c);
                }
            }
        }
        Some(out)
    }

    /// The class `choice` puts `u` in, as the constraint that says it.
    pub fn class_of(&self, u: Unit, choice: &StateChoice) -> Constraint {
        let mut c = Constraint::default();
        let Some(it) = self.units.get(&u) else {
            return c;
        };
        if let Some(&(port, _)) = it.posted.first() {
            let n = choice
                .pmr
                .in_flight_landed
                .get(port as usize)
                .copied()
                .unwrap_or(0);
            let landed = it.posted.iter().take_while(|(_, i)| *i < n).count();
            c = posted_classes(&it.posted).swap_remove(landed);
        }
        for &l in &it.lines {
            if choice.pmr.lines_landed.contains(&l) {
                c.pmr.lines_in.insert(l);
            } else {
                c.pmr.lines_out.insert(l);
            }
        }
        let newest = it
            .versions
            .iter()
            .rposition(|v| choice.media.contains(v))
            .map_or(0, |j| j + 1);
        version_class(&it.versions, newest, &mut c);
        c
    }
}

/// The classes of a unit's in-flight writes (all on one port, oldest
/// first): the first `c` of them landed, for each `c`.
fn posted_classes(posted: &[(u8, usize)]) -> Vec<Constraint> {
    let Some(&(port, _)) = posted.first() else {
        return vec![Constraint::default()];
    };
    let p = port as usize;
    (0..=posted.len())
        .map(|c| {
            let mut k = Constraint::default();
            k.pmr.posted_min = vec![0; p + 1];
            k.pmr.posted_max = vec![usize::MAX; p + 1];
            if c > 0 {
                k.pmr.posted_min[p] = posted[c - 1].1 + 1;
            }
            if let Some(&(_, next)) = posted.get(c) {
                k.pmr.posted_max[p] = next;
            }
            k
        })
        .collect()
}

/// Adds "the newest landed version is `newest`" (1-based; 0: none) to `c`.
fn version_class(versions: &[usize], newest: usize, c: &mut Constraint) {
    if newest > 0 {
        c.media_in.insert(versions[newest - 1]);
    }
    c.media_out.extend(&versions[newest..]);
}

/// The pending items of one point by the unit each writes: the PMR items
/// (`where_`, every port's) and each drive's pending blocks (`drives`: its
/// port and its blocks). Block versions are numbered across the drives in
/// the order given (the first drive's `0..n`, the next drive's from `n`):
/// the indices of [`Constraint::media_in`] and [`StateChoice::media`]. The
/// one place both explorers build their [`PointItems`].
fn point_items(
    where_: &pcie_sim::ItemUnits,
    drives: &[(u8, &[PendingBlock])],
) -> Result<PointItems, CtrlError> {
    let mut units: BTreeMap<Unit, UnitItems> = BTreeMap::new();
    for (port, q) in where_.posted.iter().enumerate() {
        for (i, us) in q.iter().enumerate() {
            for &(p, line) in us {
                units
                    .entry(Unit::Pmr { port: p, line })
                    .or_default()
                    .posted
                    .push((port as u8, i));
            }
        }
    }
    for (l, us) in where_.lines.iter().enumerate() {
        for &(port, line) in us {
            units.entry(Unit::Pmr { port, line }).or_default().lines.push(l);
        }
    }
    let mut offset = 0;
    for &(port, blocks) in drives {
        let mut by_block: Vec<(u64, usize, usize)> = blocks
            .iter()
            .enumerate()
            .map(|(i, b)| (b.block, b.data_in, offset + i))
            .collect();
        by_block.sort_unstable();
        for (lba, _, i) in by_block {
            units
                .entry(Unit::Block { port, lba })
                .or_default()
                .versions
                .push(i);
        }
        offset += blocks.len();
    }
    if units
        .values()
        .any(|u| u.posted.iter().any(|(p, _)| *p != u.posted[0].0))
    {
        return Err(CtrlError::Crash("a PMR unit written through two ports".into()));
    }
    Ok(PointItems { units })
}

/// The least state meeting `c` of a point whose PMR items are `pending`
/// and which has `blocks` pending block versions (over every drive, as
/// [`point_items`] numbers them); `None` if no allowed state meets it.
fn least_of(pending: &Pending, blocks: usize, c: &Constraint) -> Option<StateChoice> {
    if !c.media_in.is_disjoint(&c.media_out) || c.media_in.iter().any(|&i| i >= blocks) {
        return None;
    }
    Some(StateChoice {
        pmr: pending.least_choice(&c.pmr)?,
        media: c.media_in.iter().copied().collect(),
    })
}

/// What block `lba` of one drive holds in class `class`: the newest of
/// the drive's pending versions (`blocks`, numbered from `offset` in the
/// point's numbering) that `class` lands, else what is durable there
/// (`durable`, over `base`).
fn block_of_class(
    blocks: &[PendingBlock],
    offset: usize,
    lba: u64,
    class: &Constraint,
    durable: &imbl::HashMap<u64, Block>,
    base: &Image,
    buf: &mut [u8; crate::media::BLOCK],
) {
    let landed = class
        .media_in
        .iter()
        .filter_map(|&i| i.checked_sub(offset).and_then(|j| blocks.get(j)))
        .filter(|b| b.block == lba)
        .max_by_key(|b| b.data_in);
    match landed.map(|b| &b.data).or_else(|| durable.get(&lba)) {
        Some(d) => buf.copy_from_slice(&d[..]),
        None => base.read(lba, buf),
    }
}

/// Enumerates crash states point by point.
#[derive(Debug)]
pub struct Explorer<'t> {
    trace: &'t BusTrace,
    port: u8,
    pmr: CrashCursor<'t>,
    media: MediaCursor<'t>,
    /// What is pending at the point last enumerated.
    current: Option<Current>,
}

/// The pending items at one point.
#[derive(Debug)]
struct Current {
    k: usize,
    pending: Pending,
    blocks: Vec<PendingBlock>,
}

/// How many states the bounds left out at one point.
pub type LeftOut = u64;

impl<'t> Explorer<'t> {
    /// An explorer over `trace` (recorded in `Full` mode) for the controller
    /// on `port`, starting from `initial_pmr` (one image per port of
    /// `layout`). Which completions are durable, the trace says
    /// ([`crate::power`]).
    pub fn new(
        trace: &'t BusTrace,
        layout: BusLayout,
        initial_pmr: Vec<PageStore>,
        port: u8,
    ) -> Result<Self, CtrlError> {
        Ok(Explorer {
            trace,
            port,
            pmr: CrashCursor::new(trace, layout, initial_pmr)?,
            media: MediaCursor::new(trace, port)?,
            current: None,
        })
    }

    /// Block versions of the drive offered only from their arrival
    /// ([`MediaCursor::arrivals_without_submission`]).
    pub fn arrivals_without_submission(&self) -> Vec<usize> {
        vec![self.media.arrivals_without_submission()]
    }

    /// Number of crash points (entries of the trace).
    pub fn points(&self) -> usize {
        self.trace.entries().len()
    }

    /// Moves to "just after entry `k`" and returns a value that is equal
    /// at two points exactly when nothing that makes up a crash state
    /// (persistent PMR and media, pending lines, writes and blocks)
    /// changed between them; a caller can then skip the later point.
    pub fn advance(&mut self, k: usize) -> Result<(u64, u64), CtrlError> {
        self.pmr.advance_past(k)?;
        self.media.advance_past(k)?;
        Ok((self.pmr.changes(), self.media.changes()))
    }

    /// Every state after entry `k` (points must be visited in order).
    /// `max_lines` bounds the write-combining subsets, `max_blocks` the
    /// media subsets (2^bound each at most; past a bound the subsets are
    /// sampled as `pcie_sim::subsets` says, and the second value counts
    /// the states left out). Builds them all at once: for many states use
    /// [`Explorer::choices_at`] and [`Explorer::build`].
    pub fn states_at(
        &mut self,
        k: usize,
        max_lines: u32,
        max_blocks: u32,
    ) -> Result<(Vec<CrashState>, LeftOut), CtrlError> {
        let (choices, left_out) = self.choices_at(k, max_lines, max_blocks)?;
        let states = choices
            .iter()
            .map(|c| self.build(k, c))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((states, left_out))
    }

    /// The choices of the states after entry `k` (see
    /// [`Explorer::states_at`]), without building them; [`Explorer::build`]
    /// builds one.
    pub fn choices_at(
        &mut self,
        k: usize,
        max_lines: u32,
        max_blocks: u32,
    ) -> Result<(Vec<StateChoice>, LeftOut), CtrlError> {
        self.pmr.advance_past(k)?;
        self.media.advance_past(k)?;
        let pending = self.pmr.pending();
        let pmr_choices = self.pmr.choices(&pending, max_lines);
        let blocks = self.media.pending();
        let media_sets = pcie_sim::subsets::subsets(blocks.len(), max_blocks, k as u64);
        let (choices, left_out) = product(pmr_choices, vec![media_sets]);
        let out = choices
            .into_iter()
            .map(|mut c| StateChoice {
                pmr: c.pmr,
                media: c.media.pop().unwrap_or_default(),
            })
            .collect();
        self.current = Some(Current { k, pending, blocks });
        Ok((out, left_out))
    }

    /// The pending items after entry `k` by the unit each writes, making
    /// `k` the current point (points must be visited in order).
    pub fn items_at(&mut self, k: usize) -> Result<PointItems, CtrlError> {
        self.pmr.advance_past(k)?;
        self.media.advance_past(k)?;
        let pending = self.pmr.pending();
        let blocks = self.media.pending();
        let items = point_items(&self.pmr.item_units(&pending), &[(self.port, &blocks)])?;
        self.current = Some(Current { k, pending, blocks });
        Ok(items)
    }

    /// The least state of the current point that meets `c` (see
    /// [`Pending::least_choice`]; block versions land only where `c` says
    /// so), or `None` if no state the envelope allows meets it.
    pub fn least(&self, c: &Constraint) -> Option<StateChoice> {
        let cur = self.current.as_ref()?;
        least_of(&cur.pending, cur.blocks.len(), c)
    }

    /// The bytes media block `lba` holds in the states of the current
    /// point in class `class` ([`PointItems::classes`]): the newest
    /// version `class` lands, else what is durable there (over `base`, the
    /// run's starting image). Cheaper than building a state to read one
    /// block.
    pub fn block_in(&self, lba: u64, class: &Constraint, base: &Image, buf: &mut [u8; crate::media::BLOCK]) {
        let blocks = self.current.as_ref().map_or(&[][..], |cur| &cur.blocks[..]);
        block_of_class(blocks, 0, lba, class, self.media.durable(), base, buf);
    }

    /// Builds the state after entry `k` given by `choice`; `k` must be the
    /// point of the last [`Explorer::choices_at`]. A choice that names
    /// items not pending there is an error.
    pub fn build(&self, k: usize, choice: &StateChoice) -> Result<CrashState, CtrlError> {
        let cur = self
            .current
            .as_ref()
            .filter(|c| c.k == k)
            .ok_or_else(|| CtrlError::Crash(format!("point {k} is not the current one")))?;
        let images = self.pmr.materialize(&cur.pending, &choice.pmr)?;
        let pmr = images
            .get(self.port as usize)
            .cloned()
            .ok_or_else(|| CtrlError::Crash("no PMR image for the port".into()))?;
        if let Some(&bad) = choice.media.iter().find(|&&i| i >= cur.blocks.len()) {
            return Err(CtrlError::Crash(format!(
                "media block {bad} is not pending at entry {k} ({} are)",
                cur.blocks.len()
            )));
        }
        let media = self.media.state(&cur.blocks, &choice.media)?;
        Ok(CrashState {
            point: k,
            media: media.delta,
            media_hash: media.hash,
            block_hashes: media.block_hashes,
            pmr,
            choice: choice.clone(),
        })
    }

    /// The one state after entry `k` given by `choice` (for replaying a
    /// state found earlier; points must still be visited in order).
    pub fn state(&mut self, k: usize, choice: &StateChoice) -> Result<CrashState, CtrlError> {
        self.pmr.advance_past(k)?;
        self.media.advance_past(k)?;
        self.current = Some(Current {
            k,
            pending: self.pmr.pending(),
            blocks: self.media.pending(),
        });
        self.build(k, choice)
    }
}

/// The blocks written since the controller attached, each with the hash
/// term of what it holds now (the cache's newer version if any): what a
/// drive booted over a crash state changed of it.
pub fn written_terms(backend: &crate::Backend) -> BTreeMap<u64, ContentHash> {
    let mut buf = [0u8; crate::media::BLOCK];
    backend
        .written()
        .into_iter()
        .map(|b| {
            backend.peek(b, &mut buf);
            (b, crate::power::block_hash(b, &buf))
        })
        .collect()
}

/// A hash of what a drive booted over a crash state holds after writing
/// `written` ([`written_terms`]): the state's delta blocks (`block_hashes`,
/// each block's hash term, as [`CrashState::block_hashes`]), with the
/// written ones replaced. Blocks for which `relevant` is false are left
/// out. Equal content over the same base gives an equal hash when the
/// same blocks differ from the base (a block rewritten with its base
/// content may make equal images hash differently, never different images
/// equal).
pub fn drive_hash(
    block_hashes: &imbl::HashMap<u64, ContentHash>,
    written: &BTreeMap<u64, ContentHash>,
    relevant: impl Fn(u64) -> bool,
) -> ContentHash {
    let mut h: ContentHash = 0;
    for (b, bh) in block_hashes.iter() {
        if relevant(*b) && !written.contains_key(b) {
            h ^= bh;
        }
    }
    for (b, term) in written {
        if relevant(*b) {
            h ^= term;
        }
    }
    h
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

/// The crash states of several independent parts as the product of each
/// part's choices: every PMR choice with every combination of one media
/// subset per drive. Each part comes with how many of its choices a bound
/// left out; the result counts the states left out: the full product less
/// the enumerated one (for one drive: the PMR choices left out times every
/// media state, plus the enumerated PMR choices times the media states
/// left out).
pub fn product(
    pmr: (Vec<CrashChoice>, u64),
    media: Vec<(Vec<Vec<usize>>, u64)>,
) -> (Vec<DevicesChoice>, LeftOut) {
    let total = |n: usize, left: u64| (n as u64).saturating_add(left);
    let mut all = total(pmr.0.len(), pmr.1);
    let mut enumerated = pmr.0.len() as u64;
    for (sets, left) in &media {
        all = all.saturating_mul(total(sets.len(), *left));
        enumerated = enumerated.saturating_mul(sets.len() as u64);
    }
    let mut combos: Vec<Vec<Vec<usize>>> = vec![Vec::new()];
    for (sets, _) in &media {
        combos = combos
            .iter()
            .flat_map(|c| {
                sets.iter().map(move |s| {
                    let mut c = c.clone();
                    c.push(s.clone());
                    c
                })
            })
            .collect();
    }
    let mut out = Vec::with_capacity(pmr.0.len() * combos.len());
    for pc in &pmr.0 {
        for c in &combos {
            out.push(DevicesChoice {
                pmr: pc.clone(),
                media: c.clone(),
            });
        }
    }
    (out, all.saturating_sub(enumerated))
}

/// Which pending items landed in one state of a machine with several
/// drives.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DevicesChoice {
    /// The PMR side, every port.
    pub pmr: CrashChoice,
    /// Per drive (by port), indices of its pending media blocks that were
    /// destaged.
    pub media: Vec<Vec<usize>>,
}

/// One crash state of a machine with several drives.
#[derive(Clone, Debug)]
pub struct DevicesState {
    /// The crash happened just after this trace entry.
    pub point: usize,
    /// The choice of pending items.
    pub choice: DevicesChoice,
    /// Per drive: its PMR image.
    pub pmr: Vec<PageStore>,
    /// Per drive: the media blocks that differ from its starting image.
    pub media: Vec<imbl::HashMap<u64, Block>>,
    /// Per drive: the hash of its media delta.
    pub media_hash: Vec<ContentHash>,
    /// Per drive: each delta block's contribution to its `media_hash`.
    pub block_hashes: Vec<imbl::HashMap<u64, ContentHash>>,
}

/// Drive `d`'s hash as a term of a machine's: the terms of one drive are
/// mixed with its index, so equal content on two drives does not cancel
/// out when the terms are XORed.
pub fn drive_term(d: usize, h: ContentHash) -> ContentHash {
    h.rotate_left(d as u32 * 17)
        .wrapping_mul(2 * d as ContentHash + 1)
}

impl DevicesState {
    /// A hash of the state's content (every drive's PMR bytes and media
    /// blocks), for skipping states already checked: each drive's terms
    /// mixed with its index ([`drive_term`]).
    pub fn content_hash(&mut self) -> ContentHash {
        let mut h: ContentHash = 0;
        for (d, (p, m)) in self.pmr.iter_mut().zip(&self.media_hash).enumerate() {
            h ^= drive_term(d, p.content_hash() ^ m);
        }
        h
    }
}

/// The pending items of every drive at one point.
#[derive(Debug)]
struct DevicesCurrent {
    k: usize,
    pending: Pending,
    blocks: Vec<Vec<PendingBlock>>,
}

/// Enumerates crash states of a machine whose drives sit on ports
/// `0..n` (as [`crate::attach_drives`] plugs them), point by point: each
/// drive's PMR writes in flight and cache blocks land or not independently
/// of the others'.
#[derive(Debug)]
pub struct DevicesExplorer<'t> {
    trace: &'t BusTrace,
    pmr: CrashCursor<'t>,
    media: Vec<MediaCursor<'t>>,
    current: Option<DevicesCurrent>,
}

impl<'t> DevicesExplorer<'t> {
    /// An explorer over `trace` (recorded in `Full` mode) starting from
    /// `initial_pmr` (one image per port of `layout`, one drive per port).
    pub fn new(
        trace: &'t BusTrace,
        layout: BusLayout,
        initial_pmr: Vec<PageStore>,
    ) -> Result<Self, CtrlError> {
        let media = (0..initial_pmr.len())
            .map(|port| {
                let port = u8::try_from(port).map_err(|_| CtrlError::Crash("more than 256 drives".into()))?;
                MediaCursor::new(trace, port)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(DevicesExplorer {
            trace,
            pmr: CrashCursor::new(trace, layout, initial_pmr)?,
            media,
            current: None,
        })
    }

    /// Per drive, by port, the block versions offered only from their
    /// arrival ([`MediaCursor::arrivals_without_submission`]).
    pub fn arrivals_without_submission(&self) -> Vec<usize> {
        self.media
            .iter()
            .map(MediaCursor::arrivals_without_submission)
            .collect()
    }

    /// Number of crash points (entries of the trace).
    pub fn points(&self) -> usize {
        self.trace.entries().len()
    }

    /// Moves to "just after entry `k`" and returns a value that is equal
    /// at two points exactly when nothing that makes up a crash state
    /// changed between them (see [`Explorer::advance`]).
    pub fn advance(&mut self, k: usize) -> Result<Vec<u64>, CtrlError> {
        self.pmr.advance_past(k)?;
        let mut v = vec![self.pmr.changes()];
        for m in &mut self.media {
            m.advance_past(k)?;
            v.push(m.changes());
        }
        Ok(v)
    }

    /// The choices of the states after entry `k` (points in order), under
    /// the bounds of [`Explorer::states_at`] (`max_blocks` per drive),
    /// with the number of states the bounds left out.
    pub fn choices_at(
        &mut self,
        k: usize,
        max_lines: u32,
        max_blocks: u32,
    ) -> Result<(Vec<DevicesChoice>, LeftOut), CtrlError> {
        self.advance(k)?;
        let pending = self.pmr.pending();
        let pmr_choices = self.pmr.choices(&pending, max_lines);
        let blocks: Vec<Vec<PendingBlock>> = self.media.iter().map(|m| m.pending()).collect();
        let sets = blocks
            .iter()
            .enumerate()
            .map(|(d, b)| pcie_sim::subsets::subsets(b.len(), max_blocks, k as u64 ^ ((d as u64) << 40)))
            .collect();
        let (choices, left_out) = product(pmr_choices, sets);
        self.current = Some(DevicesCurrent { k, pending, blocks });
        Ok((choices, left_out))
    }

    /// The pending items after entry `k` by the unit each writes, making
    /// `k` the current point (points in order), as
    /// [`Explorer::items_at`] gives them for one drive: blocks are units of
    /// the drive holding them, and block versions are numbered across the
    /// drives (drive 0's first; [`DevicesExplorer::split`] turns a choice
    /// so numbered into a [`DevicesChoice`]).
    pub fn items_at(&mut self, k: usize) -> Result<PointItems, CtrlError> {
        self.advance(k)?;
        let pending = self.pmr.pending();
        let blocks: Vec<Vec<PendingBlock>> = self.media.iter().map(|m| m.pending()).collect();
        let drives = blocks
            .iter()
            .enumerate()
            .map(|(d, b)| {
                Ok((
                    u8::try_from(d).map_err(|_| CtrlError::Crash("more than 256 drives".into()))?,
                    &b[..],
                ))
            })
            .collect::<Result<Vec<_>, CtrlError>>()?;
        let items = point_items(&self.pmr.item_units(&pending), &drives)?;
        self.current = Some(DevicesCurrent { k, pending, blocks });
        Ok(items)
    }

    /// The least state of the current point that meets `c` (as
    /// [`Explorer::least`]), its block versions numbered across the drives
    /// ([`DevicesExplorer::items_at`]); `None` if no allowed state meets it.
    pub fn least(&self, c: &Constraint) -> Option<StateChoice> {
        let cur = self.current.as_ref()?;
        least_of(&cur.pending, cur.blocks.iter().map(Vec::len).sum(), c)
    }

    /// A choice whose block versions are numbered across the drives (as
    /// [`DevicesExplorer::items_at`] numbers them) as a [`DevicesChoice`]
    /// of the current point; `None` if it names a version not pending.
    pub fn split(&self, choice: &StateChoice) -> Option<DevicesChoice> {
        let cur = self.current.as_ref()?;
        let mut media = vec![Vec::new(); cur.blocks.len()];
        let mut offset = 0;
        let mut ends = Vec::with_capacity(cur.blocks.len());
        for b in &cur.blocks {
            ends.push((offset, offset + b.len()));
            offset += b.len();
        }
        for &i in &choice.media {
            let d = ends.iter().position(|&(lo, hi)| (lo..hi).contains(&i))?;
            media[d].push(i - ends[d].0);
        }
        Some(DevicesChoice {
            pmr: choice.pmr.clone(),
            media,
        })
    }

    /// The inverse of [`DevicesExplorer::split`] at the current point.
    pub fn flatten(&self, choice: &DevicesChoice) -> Option<StateChoice> {
        let cur = self.current.as_ref()?;
        let mut media = Vec::new();
        let mut offset = 0;
        for (d, b) in cur.blocks.iter().enumerate() {
            for &i in choice.media.get(d).map_or(&[][..], |v| &v[..]) {
                if i >= b.len() {
                    return None;
                }
                media.push(offset + i);
            }
            offset += b.len();
        }
        media.sort_unstable();
        Some(StateChoice {
            pmr: choice.pmr.clone(),
            media,
        })
    }

    /// The bytes block `lba` of the drive on `port` holds in the states of
    /// the current point in class `class` (numbered across the drives), as
    /// [`Explorer::block_in`] says for one drive; `base`: that drive's
    /// starting image.
    pub fn block_in(
        &self,
        port: u8,
        lba: u64,
        class: &Constraint,
        base: &Image,
        buf: &mut [u8; crate::media::BLOCK],
    ) {
        let d = port as usize;
        let (blocks, offset) = match self.current.as_ref() {
            Some(cur) if d < cur.blocks.len() => {
                (&cur.blocks[d][..], cur.blocks[..d].iter().map(Vec::len).sum())
            }
            _ => (&[][..], 0),
        };
        match self.media.get(d) {
            Some(m) => block_of_class(blocks, offset, lba, class, m.durable(), base, buf),
            None => base.read(lba, buf),
        }
    }

    /// Builds the state after entry `k` given by `choice`; `k` must be the
    /// point of the last [`DevicesExplorer::choices_at`].
    pub fn build(&self, k: usize, choice: &DevicesChoice) -> Result<DevicesState, CtrlError> {
        let cur = self
            .current
            .as_ref()
            .filter(|c| c.k == k)
            .ok_or_else(|| CtrlError::Crash(format!("point {k} is not the current one")))?;
        if choice.media.len() != self.media.len() {
            return Err(CtrlError::Crash(format!(
                "a choice for {} drives on a machine with {}",
                choice.media.len(),
                self.media.len()
            )));
        }
        let images = self.pmr.materialize(&cur.pending, &choice.pmr)?;
        let mut pmr = Vec::with_capacity(self.media.len());
        let mut media = Vec::with_capacity(self.media.len());
        let mut media_hash = Vec::with_capacity(self.media.len());
        let mut block_hashes = Vec::with_capacity(self.media.len());
        for (d, (cursor, landed)) in self.media.iter().zip(&choice.media).enumerate() {
            pmr.push(
                images
                    .get(d)
                    .cloned()
                    .ok_or_else(|| CtrlError::Crash(format!("no PMR image for port {d}")))?,
            );
            let m = cursor.state(&cur.blocks[d], landed)?;
            media.push(m.delta);
            media_hash.push(m.hash);
            block_hashes.push(m.block_hashes);
        }
        Ok(DevicesState {
            point: k,
            choice: choice.clone(),
            pmr,
            media,
            media_hash,
            block_hashes,
        })
    }
}

/// Attaches fresh controllers over a crash state to `machine` (which must
/// have no device yet, so drive `i` gets port `i` again): drive `i` of
/// `configs` over `bases[i]` (its starting image) and the state's delta
/// and PMR image for it.
pub fn boot_devices(
    machine: &Machine,
    configs: Vec<ControllerConfig>,
    bases: &[Arc<Image>],
    state: &DevicesState,
) -> Result<Vec<Rc<Controller>>, CtrlError> {
    if configs.len() != state.media.len() || bases.len() != state.media.len() {
        return Err(CtrlError::Crash(format!(
            "{} configurations and {} images for a state of {} drives",
            configs.len(),
            bases.len(),
            state.media.len()
        )));
    }
    let drives = configs
        .into_iter()
        .zip(bases)
        .zip(state.media.iter().zip(&state.pmr))
        .map(|((config, base), (delta, pmr))| crate::drives::Drive {
            config,
            media: Media::cow(base.clone(), delta.clone()),
            pmr: Some(pmr.clone()),
        })
        .collect();
    crate::drives::attach_drives(machine, drives)
}

/// A crash state as the drives a checker boots over it, whether of one
/// drive ([`CrashState`]) or several ([`DevicesState`]): drive `d` sits on
/// port `d`. What recovery reuse and verdict reuse need of a state is said
/// once here, for any number of drives.
pub trait BootState {
    /// The trace entry the crash followed.
    fn point(&self) -> usize;
    /// How many drives the state holds.
    fn drives(&self) -> usize;
    /// Drive `d`'s PMR image.
    fn pmr(&self, d: usize) -> &PageStore;
    /// Drive `d`'s delta blocks, each with its hash term.
    fn block_hashes(&self, d: usize) -> &imbl::HashMap<u64, ContentHash>;
    /// Attaches a fresh controller per drive to `machine` (which must have
    /// no device yet): drive `d` with `configs[d]` over `bases[d]`, its
    /// starting image, and the state's delta and PMR.
    fn boot(
        &self,
        machine: &Machine,
        configs: Vec<ControllerConfig>,
        bases: &[Arc<Image>],
    ) -> Result<Vec<Rc<Controller>>, CtrlError>;

    /// A hash of every drive's PMR content ([`drive_term`] per drive; on
    /// one drive its PMR's hash). Enumeration hashed the pages already; a
    /// state built elsewhere (a replay) is hashed on a copy of its page
    /// table.
    fn pmr_hash(&self) -> ContentHash {
        (0..self.drives())
            .map(|d| {
                let p = self.pmr(d);
                drive_term(d, p.current_hash().unwrap_or_else(|| p.clone().content_hash()))
            })
            .fold(0, |h, t| h ^ t)
    }

    /// The hash term of what the drive on `port` holds at `lba`, `None`
    /// where it holds its base image's block.
    fn held(&self, port: u8, lba: u64) -> Option<ContentHash> {
        let d = port as usize;
        (d < self.drives())
            .then(|| self.block_hashes(d).get(&lba).copied())
            .flatten()
    }

    /// A hash of what the drives hold after a boot wrote `written[d]`
    /// ([`written_terms`]) on drive `d`: [`drive_hash`] per drive, mixed
    /// with its index ([`drive_term`]), over the blocks `relevant(port,
    /// lba)` keeps.
    fn recovered_hash(
        &self,
        written: &[BTreeMap<u64, ContentHash>],
        relevant: &dyn Fn(u8, u64) -> bool,
    ) -> ContentHash {
        let none = BTreeMap::new();
        (0..self.drives())
            .map(|d| {
                let w = written.get(d).unwrap_or(&none);
                drive_term(d, drive_hash(self.block_hashes(d), w, |b| relevant(d as u8, b)))
            })
            .fold(0, |h, t| h ^ t)
    }
}

impl BootState for CrashState {
    fn point(&self) -> usize {
        self.point
    }

    fn drives(&self) -> usize {
        1
    }

    fn pmr(&self, _d: usize) -> &PageStore {
        &self.pmr
    }

    fn block_hashes(&self, _d: usize) -> &imbl::HashMap<u64, ContentHash> {
        &self.block_hashes
    }

    fn boot(
        &self,
        machine: &Machine,
        configs: Vec<ControllerConfig>,
        bases: &[Arc<Image>],
    ) -> Result<Vec<Rc<Controller>>, CtrlError> {
        match (configs.into_iter().next(), bases.first()) {
            (Some(config), Some(base)) => Ok(vec![boot(machine, config, base, self)?]),
            _ => Err(CtrlError::Crash(
                "no configuration or image for a state of one drive".into(),
            )),
        }
    }
}

impl BootState for DevicesState {
    fn point(&self) -> usize {
        self.point
    }

    fn drives(&self) -> usize {
        self.media.len()
    }

    fn pmr(&self, d: usize) -> &PageStore {
        &self.pmr[d]
    }

    fn block_hashes(&self, d: usize) -> &imbl::HashMap<u64, ContentHash> {
        &self.block_hashes[d]
    }

    fn boot(
        &self,
        machine: &Machine,
        configs: Vec<ControllerConfig>,
        bases: &[Arc<Image>],
    ) -> Result<Vec<Rc<Controller>>, CtrlError> {
        boot_devices(machine, configs, bases, self)
    }
}

#[cfg(test)]
mod product_tests {
    use super::*;

    #[test]
    fn product_enumerates_every_combination_and_counts_what_bounds_left_out() {
        let pmr = vec![
            CrashChoice::default(),
            CrashChoice {
                lines_landed: vec![0],
                ..Default::default()
            },
        ];
        let a = vec![vec![], vec![0]];
        let b = vec![vec![], vec![0], vec![1]];
        let (all, left) = product((pmr.clone(), 0), vec![(a.clone(), 0), (b.clone(), 0)]);
        assert_eq!((all.len(), left), (12, 0));
        let distinct: BTreeSet<_> = all
            .iter()
            .map(|c| (c.pmr.lines_landed.clone(), c.media.clone()))
            .collect();
        assert_eq!(distinct.len(), 12);
        // One drive: the single-drive formula.
        let (one, left) = product((pmr.clone(), 3), vec![(b.clone(), 5)]);
        assert_eq!((one.len(), left), (6, 3 * (3 + 5) + 2 * 5));
        // Two drives: full product less the enumerated one.
        let (_, left) = product((pmr, 1), vec![(a, 2), (b, 0)]);
        assert_eq!(left, 3 * 4 * 3 - 2 * 2 * 3);
    }
}
