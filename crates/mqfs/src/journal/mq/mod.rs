//! Multi-queue journaling on ccNVMe: MQFS proper (ccNVMe section 5).
//!
//! - **Primitives (5.1).** A transaction takes its id from the global
//!   counter. Its data blocks (to their homes), the shadow copies of its
//!   metadata blocks (to the journal area) and, last, its journal
//!   description block (JH: transaction id and home-to-journal mappings)
//!   form one ccNVMe transaction on the calling core's queue: the blocks
//!   tagged REQ_TX, the JH REQ_TX_COMMIT. There is no commit record and no
//!   FLUSH ordering point. fsync returns when it is durable, fatomic when it
//!   is atomic (P-SQDB persistent).
//! - **Multi-queue journaling (5.2).** One journal area per hardware queue;
//!   each thread journals on its own core's area (or takes one of a pool
//!   of streams, [`Streams`]), in its own context.
//!   Per-tree in-memory indexes (chosen by block group, metadata
//!   journaling) hold each home block's journaled versions (transaction id,
//!   area, log position, state `log` or `chp`). Checkpointing one area
//!   skips versions another area holds newer copies of and never suspends
//!   logging elsewhere.
//! - **Metadata shadow paging (5.3).** Metadata blocks are copied under the
//!   operation gate and released at once; switched off, their page locks
//!   are held until the transaction is durable.
//! - **Selective revocation (5.4).** A block reused as data while a
//!   version of it is being checkpointed is journaled (data journaling);
//!   otherwise the reusing inode's next transaction carries a revoke and the
//!   older versions leave the index.
//! - **Recovery (5.5, `docs/decisions.md` M8, M9).** Transactions ccNVMe reports
//!   unfinished are discarded, the rest replayed in transaction-id order.
//!   The paper's rule alone is unsafe across queues (M9), so the default
//!   rule is the global prefix: transactions ring their doorbells in id
//!   order, fsync waits until every lower id is durable, and recovery
//!   discards every transaction from the lowest unfinished id on. The
//!   paper-literal rule is kept as [`RecoveryRule::PaperLiteral`] to show
//!   the anomaly.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use ccnvme::BioFlags;
use pcie_sim::HostAddr;
use tokio::sync::{Mutex, Notify};

use crate::cache::CachedBlock;
use crate::error::FsError;
use crate::fs::{Ctx, Fs, InodeState};
use crate::journal::format::AreaSuper;
use crate::journal::log::Ring;
use crate::layout::BLOCK;

mod checkpoint;
mod commit;
mod recovery;

use commit::{HeldLock, TxError};
pub(crate) use recovery::recover;

/// How recovery treats unfinished transactions across queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RecoveryRule {
    /// Discard every transaction with an id at or above the lowest
    /// unfinished one (`docs/decisions.md` M9, the global-prefix rule); doorbells ring in id order and
    /// fsync waits for every lower id. The default.
    GlobalPrefix,
    /// Discard exactly the unfinished transactions (the paper's 5.5 as
    /// written). Unsafe across queues; kept to demonstrate it.
    PaperLiteral,
}

/// Which journal area (MQFS's *stream*: an area and its ccNVMe
/// transactions) a sync journals on. A sync holds its stream from its
/// snapshot until its transaction is durable, so the streams bound how many
/// transactions are in flight at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Streams {
    /// Each core its own area (MQFS's multi-queue journaling, ccNVMe 5.2:
    /// "each core writes the journaled data blocks to its dedicated journal
    /// area").
    PerCore,
    /// The first `n` areas, shared by every thread, as MQFS's `nr_streams`
    /// mount option shares them: a sync takes stream `core mod n` if it is
    /// free, else the next free one in turn, else waits for `core mod n`
    /// (the artifact's `get_free_stream`: `mutex_trylock` on each, then
    /// `mutex_lock` on its own), and releases it after its transaction is
    /// durable (`put_stream`). `Pool(1)` is one journal for all. The paper's
    /// artifact mounts Figure 13's +ccNVMe step with `nr_streams=4` and
    /// +MQJournal with 24 (`docs/decisions.md` E8). Deviation: the
    /// transaction goes on the caller's ccNVMe queue, not on one bound to
    /// the stream; a stream's transactions are serialized by the stream all
    /// the same.
    Pool(u32),
}

/// Switches of the `mq` mode (ccNVMe Figure 13's contribution breakdown).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MqOptions {
    /// Which journal area a sync takes.
    pub streams: Streams,
    /// Copy metadata blocks and release their locks at once (else hold the
    /// page locks until the transaction is durable).
    pub shadow_paging: bool,
    /// Cross-queue recovery rule.
    pub rule: RecoveryRule,
    /// Selective revocation of reused metadata blocks (ccNVMe 5.4). Off
    /// only for fault injection: a stale journaled copy can then be
    /// replayed over the block's new content.
    pub selective_revocation: bool,
}

impl Default for MqOptions {
    fn default() -> Self {
        MqOptions {
            streams: Streams::PerCore,
            shadow_paging: true,
            rule: RecoveryRule::GlobalPrefix,
            selective_revocation: true,
        }
    }
}

/// What a sync primitive promises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncKind {
    /// Atomic and durable, inode included.
    Fsync,
    /// Durable; the inode only if more than timestamps changed.
    Fdatasync,
    /// Atomic only (ccNVMe 5.1 fatomic).
    Fatomic,
    /// Atomic only; the inode only if more than timestamps changed.
    Fdataatomic,
}

impl SyncKind {
    pub(crate) fn atomic_only(self) -> bool {
        matches!(self, SyncKind::Fatomic | SyncKind::Fdataatomic)
    }
    fn data_only(self) -> bool {
        matches!(self, SyncKind::Fdatasync | SyncKind::Fdataatomic)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum VState {
    Log,
    Chp,
}

#[derive(Clone, Copy, Debug)]
struct Version {
    txid: u64,
    state: VState,
}

struct LiveTx {
    txid: u64,
    /// Log position after the transaction.
    end: u64,
    /// Area sequence number of the transaction.
    seq: u64,
    /// (home, copy) of every journaled block.
    blocks: Vec<(u64, Box<[u8; BLOCK]>)>,
    durable: Rc<Cell<bool>>,
}

struct AreaState {
    head: u64,
    tail: u64,
    next_seq: u64,
    live: VecDeque<LiveTx>,
}

struct Area {
    index: u32,
    start: u64,
    blocks: u64,
    /// The file system's journal checksum seed.
    seed: u32,
    st: RefCell<AreaState>,
    /// Serializes the transactions of one area: the stream a sync holds
    /// ([`Streams`]).
    lock: Mutex<()>,
}

impl Area {
    fn ring(&self) -> Ring {
        Ring {
            start: self.start,
            blocks: self.blocks,
            seed: self.seed,
        }
    }
}

/// The multi-queue journal.
pub(crate) struct MqJournal {
    areas: Vec<Area>,
    trees: Vec<RefCell<BTreeMap<u64, Vec<Version>>>>,
    opts: MqOptions,
    /// Next transaction id allowed to ring its doorbell (global prefix).
    turn: Cell<u64>,
    /// Ids above `turn` that failed before ringing: the turn skips them.
    abandoned: RefCell<BTreeSet<u64>>,
    turn_notify: Notify,
    /// Transaction ids taken and not yet durable.
    pending: RefCell<BTreeSet<u64>>,
    pending_notify: Notify,
    /// Blocks reused as data while being checkpointed: journal them.
    journal_data: RefCell<BTreeSet<u64>>,
    /// One checkpoint at a time (it spans every area).
    checkpointing: Mutex<()>,
    /// Blocks freed whose freeing is not yet durable, with the id of the
    /// transaction that journaled their bitmap (None: not journaled yet).
    /// A new owner writing one in place would change a block the durable
    /// file system still maps, so reusing one journals its content.
    held: RefCell<BTreeMap<u64, Option<u64>>>,
    /// Each group's block bitmap.
    bitmaps: Vec<u64>,
    blocks_per_group: u64,
    groups_start: u64,
}

/// A transaction's snapshot, taken under the gate.
struct Snapshot {
    txid: u64,
    items: Vec<Item>,
    revokes: Vec<u64>,
    /// Page locks held until it is durable (shadow paging off).
    held: Vec<HeldLock>,
    undo: Undo,
}

/// What a snapshot took from the file system's dirty state, to give back
/// if its transaction fails before committing: the metadata blocks it
/// marked journaled and took from the inodes' dirty sets, the data pages
/// it marked clean, the new-block sets it emptied, the size flags it
/// cleared, the blocks it took off the data-journaling set, and (given
/// back apart) its revokes.
#[derive(Default)]
struct Undo {
    meta: Vec<u64>,
    journaled: Vec<Rc<CachedBlock>>,
    pages: Vec<Rc<CachedBlock>>,
    /// (owner, None for the transaction's own inode; blocks taken).
    new_blocks: Vec<(Option<Rc<InodeState>>, BTreeSet<u64>)>,
    size_dirty: Vec<Option<Rc<InodeState>>>,
    journal_data: Vec<u64>,
}

impl MqJournal {
    /// Makes everything `undo` took dirty again, the metadata (pulled from
    /// other inodes too) and `revokes` on `st`, whose next transaction
    /// journals them (or whichever transaction entangles with it first).
    fn restore(&self, st: &InodeState, undo: Undo, revokes: Vec<u64>) {
        let Undo {
            meta,
            journaled,
            pages,
            new_blocks,
            size_dirty,
            journal_data,
        } = undo;
        for c in &journaled {
            // A new version: `needs_journal` again (the journaled mark
            // only grows).
            drop(c.modify());
        }
        st.dirty_meta.extend(meta);
        st.revokes.borrow_mut().extend(revokes);
        for p in &pages {
            p.set_dirty(true);
        }
        for (owner, blocks) in new_blocks {
            owner
                .as_deref()
                .unwrap_or(st)
                .new_blocks
                .borrow_mut()
                .extend(blocks);
        }
        for owner in size_dirty {
            owner.as_deref().unwrap_or(st).size_dirty.set(true);
        }
        self.journal_data.borrow_mut().extend(journal_data);
    }
}

/// A block of a transaction before it is laid out.
enum Item {
    /// Data written to its home.
    Home(u64, Box<[u8; BLOCK]>),
    /// A copy journaled for `home`.
    Copy(u64, Box<[u8; BLOCK]>),
}

impl MqJournal {
    /// A journal over the areas of `fs`, with log positions and sequence
    /// numbers as recovery left them, and transaction ids from `next_txid`.
    pub(crate) fn new(fs: &Fs, starts: &[(u64, u64)], opts: MqOptions, next_txid: u64) -> Rc<MqJournal> {
        let sb = fs.sb.borrow();
        let areas = (0..sb.journal_areas)
            .map(|a| {
                let (pos, seq) = starts.get(a as usize).copied().unwrap_or((1, 1));
                Area {
                    index: a,
                    start: sb.area_start(a),
                    blocks: sb.area_blocks,
                    seed: sb.journal_csum_seed(),
                    st: RefCell::new(AreaState {
                        head: pos,
                        tail: pos,
                        next_seq: seq,
                        live: VecDeque::new(),
                    }),
                    lock: Mutex::new(()),
                }
            })
            .collect();
        Rc::new(MqJournal {
            areas,
            trees: (0..sb.journal_areas)
                .map(|_| RefCell::new(BTreeMap::new()))
                .collect(),
            opts,
            turn: Cell::new(next_txid),
            abandoned: RefCell::new(BTreeSet::new()),
            turn_notify: Notify::new(),
            pending: RefCell::new(BTreeSet::new()),
            pending_notify: Notify::new(),
            journal_data: RefCell::new(BTreeSet::new()),
            checkpointing: Mutex::new(()),
            held: RefCell::new(BTreeMap::new()),
            bitmaps: (0..sb.groups).map(|g| sb.block_bitmap(g)).collect(),
            blocks_per_group: sb.blocks_per_group as u64,
            groups_start: sb.groups_start,
        })
    }

    /// The index tree of home block `b`: by block group (metadata
    /// journaling, ccNVMe 5.2).
    fn tree(&self, b: u64) -> &RefCell<BTreeMap<u64, Vec<Version>>> {
        let group = b.saturating_sub(self.groups_start) / self.blocks_per_group.max(1);
        &self.trees[(group % self.trees.len() as u64) as usize]
    }

    pub(crate) fn note_dirty(&self, _b: u64) {}

    /// True if data block `home` may be written in place outside a
    /// transaction (O_DIRECT, sync_file_range): no copy of it waits in a
    /// log to be replayed or checkpointed over it, and it is not a block
    /// whose new content must be journaled (reused before its freeing is
    /// durable, or while being checkpointed).
    pub(crate) fn may_write_home(&self, home: u64) -> bool {
        !self.tree(home).borrow().contains_key(&home) && !self.journal_data.borrow().contains(&home)
    }

    pub(crate) fn note_freed_meta(&self, _b: u64) {}

    /// Block `b` was freed: until the freeing is durable, a new owner
    /// journals what it writes there (see [`MqJournal::note_reused`]).
    pub(crate) fn note_freed(&self, b: u64) {
        self.held.borrow_mut().insert(b, None);
    }

    /// The group bitmap of block `b`.
    fn bitmap_of(&self, b: u64) -> Option<u64> {
        let g = b.checked_sub(self.groups_start)? / self.blocks_per_group.max(1);
        self.bitmaps.get(g as usize).copied()
    }

    /// Transaction `txid` journals bitmap blocks `journaled`: the frees
    /// they carry become durable with it.
    fn tie_frees(&self, txid: u64, journaled: &BTreeSet<u64>) {
        for (b, t) in self.held.borrow_mut().iter_mut() {
            if t.is_none() && self.bitmap_of(*b).is_some_and(|bm| journaled.contains(&bm)) {
                *t = Some(txid);
            }
        }
    }

    /// Transaction `txid` failed before it committed: the frees tied to it
    /// are not durable with it (a later transaction journaling their
    /// bitmap takes them). The tie itself is made with the snapshot, under
    /// the gate, where it is known which frees the bitmap copy carries.
    fn untie_frees(&self, txid: u64) {
        for t in self.held.borrow_mut().values_mut() {
            if *t == Some(txid) {
                *t = None;
            }
        }
    }

    /// Releases the held blocks whose freeing transaction, and every
    /// lower one, is durable.
    fn release_frees(&self) {
        let lowest = self.pending.borrow().iter().next().copied().unwrap_or(u64::MAX);
        self.held
            .borrow_mut()
            .retain(|_, t| !t.is_some_and(|t| t < lowest));
    }

    /// Selective revocation (ccNVMe 5.4, `docs/decisions.md` M14), at reuse time.
    pub(crate) fn note_reused(&self, b: u64, owner: &InodeState) {
        // Freed by a transaction that is not durable yet: the durable file
        // system may still map the block, so its new content goes through
        // the journal, not in place (the data-journaling regression of
        // 5.4 case 1, for the same reason).
        if self.held.borrow_mut().remove(&b).is_some() {
            self.journal_data.borrow_mut().insert(b);
        }
        if !self.opts.selective_revocation {
            return;
        }
        let mut tree = self.tree(b).borrow_mut();
        let Some(versions) = tree.get(&b) else {
            return;
        };
        if versions.iter().any(|v| v.state == VState::Chp) {
            // Case 1: being checkpointed; journal the new content instead.
            self.journal_data.borrow_mut().insert(b);
        } else {
            // Case 2: revoke in the owner's next transaction; the older
            // versions leave the index so no checkpoint writes them.
            tree.remove(&b);
            owner.revokes.borrow_mut().insert(b);
        }
    }

    /// Takes the journal area (stream) the caller's sync runs on, as
    /// [`Streams`] says, and holds it until the guard drops.
    async fn take_area(&self, ctx: Ctx) -> (&Area, tokio::sync::MutexGuard<'_, ()>) {
        let areas = self.areas.len();
        let n = match self.opts.streams {
            Streams::PerCore => {
                let a = &self.areas[ctx.core % areas];
                return (a, a.lock.lock().await);
            }
            Streams::Pool(n) => (n as usize).clamp(1, areas),
        };
        let own = ctx.core % n;
        for k in 0..n {
            let a = &self.areas[(own + k) % n];
            if let Ok(g) = a.lock.try_lock() {
                return (a, g);
            }
        }
        let a = &self.areas[own];
        (a, a.lock.lock().await)
    }

    /// Makes `st` atomic (and durable unless `kind` is atomic-only) in one
    /// ccNVMe transaction on the caller's queue.
    pub(crate) async fn sync_inode(
        self: &Rc<Self>,
        fs: &Fs,
        ctx: Ctx,
        st: &InodeState,
        kind: SyncKind,
    ) -> Result<(), FsError> {
        // The file's dirty pages are prepared for I/O on the caller's core
        // first, as every mode's writeback prepares them
        // (`Fs::take_dirty_data`): MQFS's writepages runs before the rest
        // of its fsync, so before its transaction draws an id that later
        // ones wait behind, and outside the gate.
        fs.prepare_pages(ctx, st.pages.dirty_count()).await;
        let (area, _stream) = self.take_area(ctx).await;
        // Snapshot under the gate: no operation is half-way, and the id
        // is drawn in snapshot order (`docs/decisions.md` M10).
        let frozen = fs.freeze().await;
        let snap = self.snapshot(fs, st, kind);
        drop(frozen);
        let Some(snap) = snap else {
            // Nothing left to journal, but an earlier transaction (an
            // fatomic of this inode, or another inode's that took its
            // blocks, see `entangled`) may still be in flight: a durable
            // sync waits for every transaction drawn so far.
            if !kind.atomic_only() {
                let upto = fs.next_txid.get();
                self.wait_durable_below(upto).await;
            }
            return Ok(());
        };
        let Snapshot {
            txid,
            items,
            revokes,
            held,
            undo,
        } = snap;
        let r = self
            .run_tx(fs, ctx, area, txid, items, revokes.clone(), kind)
            .await;
        drop(held);
        match r {
            Ok(()) => Ok(()),
            Err(TxError::NotCommitted(e)) => {
                // As if it never started: what it took is dirty again,
                // for the next transaction of this inode (or of one
                // entangled with it).
                self.restore(st, undo, revokes);
                self.untie_frees(txid);
                self.abandon(txid);
                Err(e)
            }
            Err(TxError::Committed(e)) => {
                self.abandon(txid);
                Err(e)
            }
        }
    }

    /// Takes the transaction's snapshot; None if there is nothing to do.
    fn snapshot(&self, fs: &Fs, st: &InodeState, kind: SyncKind) -> Option<Snapshot> {
        let mut items = Vec::new();
        let mut held = Vec::new();
        let mut undo = Undo::default();
        let journal_data = self.journal_data.borrow().clone();
        let include_meta = !kind.data_only() || st.size_dirty.get();
        let mut meta_items = Vec::new();
        let mut owners: Vec<Rc<InodeState>> = Vec::new();
        if include_meta {
            let mut meta: BTreeSet<u64> = st.dirty_meta.take();
            if let Ok((iblk, _)) = fs.sb.borrow().inode_location(st.ino) {
                meta.insert(iblk);
            }
            let (meta, more_revokes, pulled) = Self::entangled(fs, st, meta);
            st.revokes.borrow_mut().extend(more_revokes);
            owners = pulled;
            undo.meta.extend(meta.iter().copied());
            for b in meta {
                let Some(c) = fs.bufs.get(b) else { continue };
                if !c.needs_journal() {
                    continue;
                }
                meta_items.push(Item::Copy(b, c.snapshot()));
                c.set_journaled(c.version());
                undo.journaled.push(c.clone());
                if !self.opts.shadow_paging {
                    if let Some(g) = HeldLock::take(c.clone()) {
                        held.push(g);
                    }
                }
            }
            if st.size_dirty.replace(false) {
                undo.size_dirty.push(None);
            }
        }
        // Data first: this inode's, and that of every inode whose metadata
        // the transaction carries (ordered mode: metadata never reaches the
        // media without the data it points to).
        let own = self.data_items(st, st, kind, &journal_data, &mut items, &mut undo);
        undo.new_blocks.push((None, own));
        for o in &owners {
            let taken = self.data_items(o, st, kind, &journal_data, &mut items, &mut undo);
            undo.new_blocks.push((Some(o.clone()), taken));
            if o.size_dirty.replace(false) {
                undo.size_dirty.push(Some(o.clone()));
            }
        }
        items.extend(meta_items);
        let revokes: Vec<u64> = std::mem::take(&mut *st.revokes.borrow_mut())
            .into_iter()
            .collect();
        if items.is_empty() && revokes.is_empty() {
            return None;
        }
        let txid = fs.next_txid.get();
        fs.next_txid.set(txid + 1);
        self.pending.borrow_mut().insert(txid);
        let journaled: BTreeSet<u64> = items
            .iter()
            .filter_map(|i| match i {
                Item::Copy(b, _) => Some(*b),
                Item::Home(..) => None,
            })
            .collect();
        self.tie_frees(txid, &journaled);
        Some(Snapshot {
            txid,
            items,
            revokes,
            held,
            undo,
        })
    }

    /// The dirty data pages of `owner` as transaction items (the
    /// transaction belongs to `tx_owner`, which takes any revokes).
    /// Returns the owner's new blocks it took.
    fn data_items(
        &self,
        owner: &InodeState,
        tx_owner: &InodeState,
        kind: SyncKind,
        journal_data: &BTreeSet<u64>,
        items: &mut Vec<Item>,
        undo: &mut Undo,
    ) -> BTreeSet<u64> {
        let new_blocks = std::mem::take(&mut *owner.new_blocks.borrow_mut());
        for (fb, page) in owner.pages.dirty() {
            let Some(home) = Fs::bmap(owner, fb) else {
                continue;
            };
            let data = page.snapshot();
            page.set_dirty(false);
            undo.pages.push(page.clone());
            // An atomic sync journals overwrites (their old content must
            // survive a discard, `docs/decisions.md` M12); reused blocks being
            // checkpointed are journaled too (5.4 case 1).
            let mut journal =
                (kind.atomic_only() && !new_blocks.contains(&home)) || journal_data.contains(&home);
            // A block with a journaled copy still in a log (an earlier
            // atomic sync journaled it), written in place now: recovery
            // would replay the older copy over it. As at reuse (5.4): if
            // the copy is being checkpointed, journal this one too (case
            // 1); else revoke the older copies (case 2).
            let checkpointing = self
                .tree(home)
                .borrow()
                .get(&home)
                .map(|vs| vs.iter().any(|v| v.state == VState::Chp));
            match checkpointing {
                Some(true) => journal = true,
                Some(false) if !journal && self.opts.selective_revocation => {
                    self.tree(home).borrow_mut().remove(&home);
                    tx_owner.revokes.borrow_mut().insert(home);
                }
                _ => {}
            }
            if journal && self.journal_data.borrow_mut().remove(&home) {
                undo.journal_data.push(home);
            }
            items.push(if journal {
                Item::Copy(home, data)
            } else {
                Item::Home(home, data)
            });
        }
        new_blocks
    }

    /// Closes `meta` over entanglement: a metadata block is shared by the
    /// operations of many inodes (an inode table block, a bitmap), so its
    /// snapshot carries every change made to it since it was last
    /// journaled, and each of those changes may depend on other blocks its
    /// operation dirtied (an unlink frees an inode here and removes its
    /// entry in a directory block there). Every inode whose unsynced
    /// metadata includes a block of the transaction hands its whole
    /// unsynced set (and its revokes) to the transaction, until nothing
    /// changes, so a transaction never commits half of an operation. This
    /// is the multi-queue counterpart of JBD2's one running transaction.
    ///
    /// A worklist over the file system's reverse index
    /// ([`DirtyIndex`](crate::dirty::DirtyIndex)):
    /// each block joins the transaction once and its owners are looked up
    /// once, and an owner handing its set over leaves the index, so the
    /// closure's work is linear in the (block, owner) pairs it takes, not
    /// in the number of cached inodes per transaction. Only cached inodes
    /// take part (a freed inode's set went to its heir).
    #[allow(clippy::type_complexity)]
    fn entangled(
        fs: &Fs,
        st: &InodeState,
        mut meta: BTreeSet<u64>,
    ) -> (BTreeSet<u64>, Vec<u64>, Vec<Rc<InodeState>>) {
        let mut revokes = Vec::new();
        let needs = |b: &u64| fs.bufs.get(*b).is_some_and(|c| c.needs_journal());
        meta.retain(needs);
        let mut work: Vec<u64> = meta.iter().copied().collect();
        let mut pulled: Vec<Rc<InodeState>> = Vec::new();
        while let Some(b) = work.pop() {
            for (ino, key) in fs.dirty_index.owners(b) {
                if ino == st.ino {
                    continue;
                }
                let Some(o) = fs.inodes.borrow().get(&ino).cloned() else {
                    continue;
                };
                // Another state under the same number (freed, not cached).
                if o.dirty_meta.owner() != (ino, key) {
                    continue;
                }
                for t in o.dirty_meta.take() {
                    if needs(&t) && meta.insert(t) {
                        work.push(t);
                    }
                }
                revokes.extend(std::mem::take(&mut *o.revokes.borrow_mut()));
                pulled.push(o);
            }
        }
        pulled.sort_by_key(|o| o.ino);
        (meta, revokes, pulled)
    }

    /// Waits until no transaction with an id below `upto` is pending.
    async fn wait_durable_below(&self, upto: u64) {
        loop {
            let lowest = self.pending.borrow().iter().next().copied();
            match lowest {
                Some(l) if l < upto => self.pending_notify.notified().await,
                _ => return,
            }
        }
    }

    /// A transaction that failed: let later ones ring and stop waiting.
    fn abandon(&self, txid: u64) {
        self.pending.borrow_mut().remove(&txid);
        self.pending_notify.notify_waiters();
        if self.turn.get() == txid {
            self.pass_turn(txid);
        } else if self.turn.get() < txid {
            // A lower id has not rung yet: when it does, the turn skips
            // this one (else every later id would wait for it forever).
            self.abandoned.borrow_mut().insert(txid);
        }
    }

    /// Transaction `txid` rang its doorbell (or failed at its turn): the
    /// next id not abandoned may ring.
    fn pass_turn(&self, txid: u64) {
        if self.turn.get() != txid {
            return;
        }
        let mut next = txid + 1;
        let mut abandoned = self.abandoned.borrow_mut();
        while abandoned.remove(&next) {
            next += 1;
        }
        drop(abandoned);
        self.turn.set(next);
        self.turn_notify.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use crate::journal::Journal;

    /// Under the global prefix rule, id `t` rings only once `turn` reaches
    /// it. Ids t, t+1, t+2 drawn; t+1 fails before ringing (while t has
    /// not rung yet), then t rings: the turn must pass to t+2. Without the
    /// `abandoned` set it stays at t+1, and t+2 and every later id wait
    /// for a doorbell that never rings.
    #[test]
    fn the_turn_skips_an_id_abandoned_before_a_lower_one_rang() {
        let t = crate::testing::new_fs(crate::Mode::Mq, nvme_ctrl::SsdProfile::optane_905p(), 4096, 1)
            .unwrap_or_else(|e| panic!("new_fs: {e}"));
        let Ok(Journal::Mq(m)) = t.fs.journal() else {
            panic!("an mq file system has an mq journal");
        };
        let first = m.turn.get();
        for id in first..first + 3 {
            m.pending.borrow_mut().insert(id);
        }
        m.abandon(first + 1);
        assert_eq!(m.turn.get(), first, "a lower id has not rung");
        m.pass_turn(first);
        assert_eq!(m.turn.get(), first + 2);
        // Failing at its own turn passes it on at once.
        m.abandon(first + 2);
        assert_eq!(m.turn.get(), first + 3);
        assert!(m.abandoned.borrow().is_empty());
    }

    /// The index work (entries looked up or removed) of the unmount's sync
    /// of `n` unsynced creates in one directory: the entanglement closures.
    fn closure_work(n: usize) -> u64 {
        let t = crate::testing::new_fs(crate::Mode::Mq, nvme_ctrl::SsdProfile::optane_905p(), 1 << 16, 1)
            .unwrap_or_else(|e| panic!("new_fs: {e}"));
        let fs = t.fs.clone();
        t.ex.block_on(async move {
            let c = crate::Ctx::on(0);
            let d = fs.mkdir(c, 2, "d", 0o755).await?.ino;
            for i in 0..n {
                fs.create(c, d, &format!("f{i:06}"), 0o644).await?;
            }
            let before = fs.dirty_index.work();
            fs.unmount(c).await?;
            Ok::<_, crate::FsError>(fs.dirty_index.work() - before)
        })
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Unmounting after 4n unsynced creates does about 4 times the index
    /// work of n (linear: 3,025 and 12,073 entries, three per create). The
    /// closure before the index scanned every cached inode per transaction
    /// (n^2 / 2 inodes); with a child copying its directory's set (as `mq`
    /// did), each pull costs the directory's blocks so far (9,495 and
    /// 72,802 entries), which the ratio catches.
    #[test]
    fn the_entanglement_closure_is_linear_in_unsynced_creates() {
        let small = closure_work(1000);
        let big = closure_work(4000);
        assert!(small >= 2000, "every create's two blocks are taken once: {small}");
        assert!(big <= 4 * small + small / 4, "n=1000: {small}, n=4000: {big}");
        assert!(big <= 4 * 4000, "{big} for 4000 creates");
    }
}
