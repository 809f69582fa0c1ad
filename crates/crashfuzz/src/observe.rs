//! The read-set reduction: crash states enumerated by what their checks
//! read, so that every state the envelope allows is judged (none sampled,
//! no bound) while only a few are checked.
//!
//! # Why this judges every state
//!
//! A check (boot, the driver's and the file system's recovery, fsck, the
//! oracle, the sanity check) is a deterministic program whose only inputs
//! are the state's PMR bytes and media blocks ([`crate::reuse`] gives the
//! argument). It logs the *units* it reads before writing them itself
//! (64-byte PMR lines, blocks: [`pcie_sim::observe`]). Two states that hold
//! the same bytes at every unit one of their checks read take the same
//! steps and get the same verdict.
//!
//! At a crash point the pending items (in-flight PMR writes, write-
//! combining lines, cached block versions) each write one unit. A unit's
//! *class* in a state is what decides its bytes there
//! ([`nvme_ctrl::crash::PointItems`]): equal classes, equal bytes. The
//! enumeration is a tree of constraints, each the set of allowed states
//! that meet it. A node's state is the least one that meets its constraint
//! ([`pcie_sim::Pending::least_choice`]); its check reads units
//! `u1, u2, ...`. The node's states then split, without overlap, into
//! those in the state's class at every `u_i` (they all get its verdict:
//! the leaf), and for each `j` and each other class `a` of `u_j`, those in
//! its classes at `u_1..u_{j-1}` and in `a` at `u_j` (a child, explored the
//! same way if any allowed state meets it). Units no pending item writes
//! hold the same in every state and need no split. Every child fixes a
//! class its parent left open, so the tree is finite; its leaves cover
//! every allowed state once. The order of the reads only shapes the tree.
//!
//! So a run reports no state left unvisited: each allowed state is in a
//! leaf whose state was checked (or was equal in content and promises to
//! one checked). `tests/read_sets.rs` checks, by brute force on small
//! runs, that every state gets its leaf's verdict.
//!
//! The tree itself is written once, in the lowest crate both the drives
//! and persistent memory reach ([`pcie_sim::readset`]): this module gives
//! it the drive side's units and classes ([`DriveClasses`]) and adds the
//! judged data blocks; the PM crash harness gives it 64-byte lines
//! ([`pcie_sim::pmem::PmClasses`], [`pcie_sim::pmem::explore_read_sets`]).
//! `crashfuzz` sits above the PM harness (`fsapi::crash`, which the PM
//! file systems' own crash tests use), so the tree cannot live here.
//!
//! # Several drives
//!
//! The same tree, written once ([`CrashSpace`], [`PointTree`],
//! `enumerate`), walks the states of a machine with several drives
//! (`horae2`, [`crate::devices`]); only the explorer behind the trait
//! differs. The argument above carries over unit by unit:
//!
//! - *The check is a function of the units it read.* A check boots every
//!   drive afresh over the state (its PMR image, its media) and runs
//!   deterministically; its only inputs are the bytes of every drive.
//!   Each drive's back end logs the blocks read before written, the
//!   machine logs each port's PMR lines, and every unit names its drive:
//!   [`Unit::Pmr`] its port, [`Unit::Block`] the port of the drive holding
//!   the block. So the read set is the per-drive read sets together, and
//!   two states that agree at every unit of it, on every drive, take the
//!   same steps and get the same verdict.
//! - *Every pending item writes one unit of one drive*, and a unit's
//!   class decides its bytes: a PMR item writes a line of its port's PMR
//!   (the PMR side is one [`pcie_sim::Pending`] over all ports, as on one
//!   drive), a block version a block of the drive that cached it.
//!   [`nvme_ctrl::crash::DevicesExplorer::items_at`] numbers the block
//!   versions across the drives (drive 0's first) so that one
//!   [`Constraint`] speaks of all of them, built by the same function as
//!   one drive's ([`nvme_ctrl::crash::Explorer::items_at`]).
//! - *The least state meeting a constraint is allowed.* The states are
//!   the PMR choices times, per drive, any subset of its pending blocks
//!   (each drive loses its cache on its own): the media side has no order
//!   rule, so landing exactly `media_in` is allowed whatever the drive,
//!   and the PMR side is the one-drive `least_choice` over every port.
//!
//! Data blocks judged instead of read ([`crate::blockwise`]) name the
//! member block the volume block maps to; the map comes from the members'
//! labels (their block 0), which the mount read, so it is fixed in the
//! leaf. `tests/read_sets.rs` compares every state of small `horae2` runs
//! (the joint FLUSH switched off, so failing verdicts too) with its
//! leaf's verdict by brute force, and shows that a tree split by one
//! drive's units alone takes wrong verdicts. On several drives a state
//! checked is always booted and judged in full (no verdict or recovery
//! reuse, [`crate::reuse`]).
//!
//! A node whose state equals (in content and promises in force) a state
//! checked before keeps that state's verdict and takes its check's
//! observations (units read, judgements) to split the node, without
//! checking it again: a check is a deterministic function of the state's
//! bytes and the promises, so the equal state's observations are its own
//! (it is checked again only while the first check is not back).
//!
//! A unit with more than [`nvme_ctrl::crash::MAX_CLASSES`] classes is not
//! split; its point counts as having states not visited (no run of the
//! default campaign has one). A point's tree is cut at a budget of nodes
//! ([`crate::DriveEnumeration::ReadSets`]'s `budget`): a check that reads many units
//! each with pending items (an oracle reading every block of a file whose
//! blocks were all overwritten) splits its point into the product of their
//! classes. Past the budget, each node left open is counted as (at least)
//! one state not visited.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use crossbeam::channel::{Receiver, Sender};
use nvme_ctrl::crash::{Constraint, PointItems, StateChoice, Unit};
use nvme_ctrl::Image;
use pcie_sim::readset::{ClassSpace, Classes, ReadSetTree};

use crate::blockwise::BlockJudgement;
use crate::oracle::Promise;
pub use crate::pipeline::CrashSpace;
use crate::pipeline::{Checked, ExploreReport, Job, NewPoints};

/// What one check observed: the units it read and the data blocks it
/// judged (as [`PointTree::read`] takes them).
type Observed = (Arc<[Unit]>, Arc<[BlockJudgement]>);

/// The drive side's crash states as the read-set tree
/// ([`pcie_sim::readset`]) walks them: a unit is a PMR line or a media
/// block, its classes those of [`PointItems`], the least state the
/// explorer's.
#[derive(Debug)]
pub struct DriveClasses<'e, S: CrashSpace + ?Sized> {
    explorer: &'e S,
    items: PointItems,
}

impl<S: CrashSpace + ?Sized> ClassSpace for DriveClasses<'_, S> {
    type Unit = Unit;
    type Constraint = Constraint;
    type Choice = StateChoice;

    fn least(&self, c: &Constraint) -> Option<StateChoice> {
        self.explorer.least(c)
    }

    fn and(&self, a: &Constraint, b: &Constraint) -> Constraint {
        a.and(b)
    }

    fn classes(&self, u: Unit, choice: &StateChoice) -> Classes<Constraint> {
        if !self.items.pending_at(u) {
            return Classes::One;
        }
        let mine = self.items.class_of(u, choice);
        let Some(mut others) = self.items.classes(u) else {
            return Classes::TooMany;
        };
        others.retain(|c| *c != mine);
        Classes::Split { mine, others }
    }
}

/// One crash point's tree: the read-set tree ([`ReadSetTree`], written
/// once for the drives and persistent memory) over the point's states
/// ([`DriveClasses`]), with the data blocks judged instead of read
/// ([`crate::blockwise`]) on top: hands out node states to check and
/// splits each node by what its check read (the module doc's argument).
#[derive(Debug)]
pub struct PointTree<'e, S: CrashSpace + ?Sized> {
    space: DriveClasses<'e, S>,
    tree: ReadSetTree<DriveClasses<'e, S>>,
    bases: &'e [Arc<Image>],
    /// Classes of judged blocks evaluated ([`PointTree::read`]).
    pub judged_classes: u64,
}

impl<'e, S: CrashSpace + ?Sized> PointTree<'e, S> {
    /// The tree of the explorer's current point, whose pending items are
    /// `items` ([`CrashSpace::items_at`]), over the run's starting images
    /// `bases` (each drive's, by port).
    pub fn new(explorer: &'e S, items: PointItems, bases: &'e [Arc<Image>]) -> Self {
        PointTree {
            space: DriveClasses { explorer, items },
            tree: ReadSetTree::new(),
            bases,
            judged_classes: 0,
        }
    }

    /// The explorer whose point this is.
    pub fn explorer(&self) -> &'e S {
        self.space.explorer
    }

    /// The next node to check: its number and its state's choice (the
    /// least state meeting its constraint); `None` when no node is open
    /// (more may open as checks report their reads).
    pub fn next_node(&mut self) -> Option<(usize, StateChoice)> {
        self.tree.next_node(&self.space)
    }

    /// Nodes handed out so far.
    pub fn nodes(&self) -> usize {
        self.tree.nodes()
    }

    /// Nodes and witnesses open (not handed out yet).
    pub fn open(&self) -> usize {
        self.tree.open()
    }

    /// True if node `id` is a witness: a state of a leaf already judged,
    /// in a class one of its judgements rejects (checked, never split).
    pub fn is_witness(&self, id: usize) -> bool {
        self.tree.is_witness(id)
    }

    /// Witnesses handed out so far.
    pub fn witnesses(&self) -> usize {
        self.tree.witnesses()
    }

    /// True if a unit read or judged had too many classes to split:
    /// states left unjudged.
    pub fn too_wide(&self) -> bool {
        self.tree.too_wide
    }

    /// Splits node `id` by what its check read: the states of the node that
    /// differ from its state at a read unit become new open nodes. Then
    /// judges the other classes of the blocks its check judged instead of
    /// reading (`judged`, [`crate::blockwise`]): each class a judgement
    /// rejects gives a witness. A witness's own check is not split (its
    /// states are in its leaf's already).
    pub fn read(&mut self, id: usize, reads: &[Unit], judged: &[BlockJudgement]) {
        // `prefix` is the leaf: the node's states in its state's class at
        // every unit read.
        let Some(prefix) = self.tree.read(&self.space, id, reads) else {
            return;
        };
        let choice = self.tree.choice(id).clone();
        let mut buf = [0u8; mqfs::layout::BLOCK];
        for j in judged {
            let Unit::Block { port, lba } = j.unit else {
                unreachable!("only media blocks are judged");
            };
            let others = match self.space.classes(j.unit, &choice) {
                Classes::One => continue,
                Classes::TooMany => {
                    self.tree.too_wide = true;
                    continue;
                }
                Classes::Split { others, .. } => others,
            };
            for other in others {
                let w = prefix.and(&other);
                if self.space.explorer.least(&w).is_none() {
                    continue;
                }
                self.space
                    .explorer
                    .block_in(port, lba, &other, self.bases, &mut buf);
                self.judged_classes += 1;
                if !j.fits(&buf) {
                    self.tree.add_witness(w);
                }
            }
        }
    }

    /// True if the state `choice` is in node `id`'s leaf, given what the
    /// node's check read: it meets the node's constraint and is in the
    /// node's state's class at every read unit (for tests).
    pub fn in_leaf(&self, id: usize, reads: &[Unit], choice: &StateChoice) -> bool {
        meets(&self.tree.leaf(&self.space, id, reads), choice)
    }
}

/// True if `choice` meets `c`.
fn meets(c: &Constraint, choice: &StateChoice) -> bool {
    let p = &c.pmr;
    p.lines_in.iter().all(|l| choice.pmr.lines_landed.contains(l))
        && !p.lines_out.iter().any(|l| choice.pmr.lines_landed.contains(l))
        && choice.pmr.in_flight_landed.iter().enumerate().all(|(port, n)| {
            *n >= p.posted_min.get(port).copied().unwrap_or(0)
                && *n <= p.posted_max.get(port).copied().unwrap_or(usize::MAX)
        })
        && c.media_in.iter().all(|v| choice.media.contains(v))
        && !c.media_out.iter().any(|v| choice.media.contains(v))
}

/// Enumerates every crash point's tree, sending each node's state to the
/// checkers (`tx`) and splitting it by what the check read (`rx`); `tally`
/// takes the result of every state not equal to one judged before. A wave
/// of one state (the tree's root, a node split alone) is checked here by
/// `check_here`, the checkers' own function: handing it to a checker
/// thread would only wait for it, at the cost of two thread wake-ups.
/// Returns the seconds spent waiting for checkers.
#[allow(clippy::too_many_arguments)]
pub(crate) fn enumerate<S: CrashSpace, C>(
    explorer: &mut S,
    promises: &[Promise],
    bases: &[Arc<Image>],
    budget: usize,
    tx: &Sender<Job<S::State>>,
    rx: &Receiver<Checked<C>>,
    check_here: &dyn Fn(Job<S::State>) -> Checked<C>,
    stop: &dyn Fn() -> bool,
    report: &mut ExploreReport,
    tally: &mut dyn FnMut(Checked<C>, &mut ExploreReport),
) -> Result<f64, String> {
    // Per distinct state (content and promises) handed out: what its
    // check observed, once it is back. A check is a function of the
    // state's content and the promises in force, so an equal state's
    // observations are its own.
    let mut seen: BTreeMap<u128, Option<Observed>> = BTreeMap::new();
    let mut waiting = 0f64;
    let mut points = NewPoints::default();
    // States allowed at the last point explored.
    let mut last = 0u64;
    loop {
        // Every check of the points before is tallied: a stop here is at
        // the same point whichever checker finished first (and a stop in
        // a point's waves, below, after the same wave).
        if stop() {
            report.stopped_early = true;
            break;
        }
        let next = points.next(explorer, promises, || {
            // Same states, same promises: all judged already.
            report.states_total = report.states_total.saturating_add(last);
            report.states_by_read_set = report.states_by_read_set.saturating_add(last);
        })?;
        let Some((k, promised)) = next else {
            break;
        };
        // How many states the envelope allows here (the bounded
        // enumeration's count, without building them).
        let (one, left) = explorer.choices(k, 0, 0)?;
        let allowed = (one.len() as u64).saturating_add(left);
        last = allowed;
        report.states_total = report.states_total.saturating_add(allowed);
        let items = explorer.items_at(k)?;
        let mut tree = PointTree::new(&*explorer, items, bases);
        // Per node handed out: its state was not equal to one judged before.
        // Per node handed out: its state's key, and whether the state was
        // not equal to one judged before.
        let mut keys: Vec<(u128, bool)> = Vec::new();
        // The wave's first state to check, held back until a second one
        // shows it is not alone; and how many were sent to the checkers.
        let mut first: Option<Job<S::State>> = None;
        let mut sent = 0usize;
        // Nodes whose state's observations are known already.
        let mut ready: Vec<(usize, Observed)> = Vec::new();
        loop {
            while tree.nodes() < budget {
                let Some((id, choice)) = tree.next_node() else {
                    break;
                };
                let mut st = tree.explorer().build(k, &choice)?;
                let h = pcie_sim::content_hash::combine(&[S::content_hash(&mut st), promised]);
                let known = seen.get(&h).cloned();
                let new = known.is_none();
                keys.push((h, new));
                if new {
                    report.states_checked += 1;
                    seen.insert(h, None);
                } else {
                    // Equal to a state judged already: its verdict stands,
                    // and its reads split the node. Checked again only if
                    // that state's check is not back yet.
                    report.states_deduplicated += 1;
                    if let Some(Some(obs)) = known {
                        ready.push((id, obs));
                        continue;
                    }
                }
                let job = Job { state: st, tag: id };
                if sent == 0 && first.is_none() {
                    // The only one so far: held back.
                    first = Some(job);
                } else {
                    let t = Instant::now();
                    for job in first.take().into_iter().chain([job]) {
                        tx.send(job).map_err(|_| "the checkers stopped".to_string())?;
                        sent += 1;
                    }
                    waiting += t.elapsed().as_secs_f64();
                }
            }
            if first.is_none() && sent == 0 && ready.is_empty() {
                break;
            }
            // Every check handed out is awaited and split in node order,
            // so the tree (and where a budget cuts it) does not depend on
            // which checker finished first.
            let t = Instant::now();
            let mut wave: Vec<(usize, Observed, Option<Checked<C>>)> = std::mem::take(&mut ready)
                .into_iter()
                .map(|(id, obs)| (id, obs, None))
                .collect();
            let mut take = |mut done: Checked<C>| {
                let obs: Observed = (
                    done.reads.take().unwrap_or_default().into(),
                    std::mem::take(&mut done.judgements).into(),
                );
                wave.push((done.tag, obs, Some(done)));
            };
            // Held back only while nothing was sent: the wave's one state.
            if let Some(job) = first.take() {
                take(check_here(job));
            }
            for _ in 0..std::mem::take(&mut sent) {
                take(rx.recv().map_err(|_| "the checkers stopped".to_string())?);
            }
            // Checking, here or on the checkers, is not enumerating.
            waiting += t.elapsed().as_secs_f64();
            wave.sort_by_key(|d| d.0);
            for (id, obs, done) in wave {
                tree.read(id, &obs.0, &obs.1);
                let (h, first) = keys[id];
                if let Some(slot @ None) = seen.get_mut(&h) {
                    *slot = Some(obs);
                }
                // Failures count once per distinct state, as without the
                // reduction.
                match done {
                    Some(done) if first => tally(done, report),
                    Some(done) => report.check_seconds += done.seconds,
                    None => {}
                }
            }
            // A wave is tallied whole and in node order, and which states
            // it holds depends only on the waves before: a stop here is
            // after the same wave whichever checker finished first. The
            // nodes left open count as not visited.
            if stop() {
                break;
            }
        }
        if tree.too_wide() {
            report.states_not_visited = u64::MAX;
        }
        // Past the budget, each node left open holds at least one state
        // not judged (a lower bound: how many it holds is not counted).
        report.states_not_visited = report.states_not_visited.saturating_add(tree.open() as u64);
        report.blocks_judged += tree.judged_classes;
        report.witnesses += tree.witnesses() as u64;
        // Witnesses are states of leaves counted already.
        let judged_apart = (tree.nodes() - tree.witnesses()) as u64;
        report.states_by_read_set = report
            .states_by_read_set
            .saturating_add(allowed.saturating_sub(judged_apart));
    }
    Ok(waiting)
}
