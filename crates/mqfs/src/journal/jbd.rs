//! Ordered metadata journaling in the manner of JBD2 (Ext4), and its Horae
//! variant (HoraeFS), in journal area 0.
//!
//! Every operation's metadata changes join the *running transaction*. A
//! separate commit thread (JBD2's kjournald2) commits it when an fsync asks
//! (`docs/decisions.md` E1, E2, H10):
//!
//! - **classic**: freeze the operation gate and snapshot the transaction's
//!   blocks; write the data of the files it touched (ordered mode) and,
//!   without waiting between them, the descriptor, the block copies and
//!   the revoke records; wait for all of them (the ordering point); write
//!   the commit record with PREFLUSH and FUA and wait (Linux 4.18
//!   `jbd2_journal_commit_transaction`). The fsync caller writes its own
//!   file's data and waits before it wakes the commit thread. One
//!   transaction at a time.
//! - **horae** (HoraeFS, Horae 5.6.2, built on BarrierFS): the fsync caller
//!   dispatches its own file's data as one epoch of ordered writes in its
//!   own context (`Jbd::dispatch_data`, Horae 5.6.1 guideline: "the fsync
//!   thread's data" is an ordered write), then wakes the commit thread.
//!   JBD2 is split in two stages, as BarrierFS splits it into a commit
//!   thread and a flush thread: the **submit stage** (the commit thread)
//!   snapshots the transaction, appends the other files' data, the
//!   descriptor, copies and revokes as one epoch of the ordering queue and
//!   the commit record as the next ({D, JM} <= JC), dispatches them
//!   without waiting and goes on with the next transaction; the **flush
//!   stage** (the flush thread) waits for a transaction's writes, sends the
//!   joint FLUSH up to its commit record (no Flush reaches a drive without
//!   a volatile cache: Horae's sync flush on PLP drives, 5.3), and only
//!   then acknowledges it, in order. There is no FLUSH between data and
//!   journal: the ordering layer orders them (Horae 5.3, "HORAE eliminates
//!   intermediate FLUSHes").
//!
//! - **classic committing through ccNVMe** ([`JbdCommit::CcNvmeTransaction`],
//!   ccNVMe 7.5.1, Figure 13's "+ccNVMe"): the same commit thread, compound
//!   running transaction, group commit and BH_Shadow, but the commit is one
//!   ccNVMe transaction on the commit thread's core (`cc::submit`, the
//!   path MQFS uses): the ordered data to their homes, the descriptors,
//!   copies and revokes REQ_TX, the last descriptor REQ_TX_COMMIT; no
//!   commit block, no FLUSH, no wait between data and log. The commit
//!   thread waits until the transaction is durable, then acknowledges it.
//!   Recovery scans the log to the last descriptor
//!   (`End::LastDescriptor`) and replays only what the driver's recovery
//!   does not report unfinished (`mq::recover`, the MQFS recovery over
//!   the one area, a revoke hiding its own transaction too).
//!
//! A transaction is laid out in the log as `log` says, followed by its
//! commit block (`End::CommitBlock`; none when committed through ccNVMe).
//! Committed transactions stay in the log until a checkpoint writes their
//! snapshots home (when the log is three quarters full, at sync and at
//! unmount); a checkpoint first waits until no transaction is in flight.
//! Recovery (`log::scan`, `Replay`) replays committed transactions in
//! order and honours revoke records (a revoke in transaction T hides
//! copies from T and earlier, `RevokeScope::ThisAndEarlier`).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use ccnvme::horae::{Epoch, OrderedWrite, OrderingQueue};
use ccnvme::{Bio, BioFlags};
use tokio::sync::{Mutex, Notify};

use crate::cache::CachedBlock;
use crate::error::FsError;
use crate::fs::{Ctx, Fs, Ino, InodeState};
use crate::journal::cc;
use crate::journal::format::{AreaSuper, Commit};
use crate::journal::log::{self, lay_out, log_blocks, End, Found, Layout, Replay, RevokeScope, Ring};
use crate::layout::BLOCK;
use crate::volume::Submitted;

/// How the classic journal commits a transaction
/// ([`crate::FsProfile::jbd_commit`]; HoraeFS ignores it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum JbdCommit {
    /// JBD2 as Linux 4.18 runs it: ordered data and then descriptors,
    /// copies and revokes without a wait between them, wait for all; the
    /// commit record with PREFLUSH and FUA, wait (`End::CommitBlock`).
    #[default]
    CommitRecord,
    /// Ext4 "using ccNVMe to perform journaling" (ccNVMe 7.5.1, Figure 13's
    /// +ccNVMe): one ccNVMe transaction per commit, its last descriptor
    /// the REQ_TX_COMMIT request, no commit record (see the module doc).
    /// Needs the ccNVMe driver
    /// ([`probe_options_for`](crate::mount::probe_options_for)); the log
    /// is recovered with the driver's report of unfinished transactions
    /// (`docs/decisions.md` E7).
    CcNvmeTransaction,
}

/// A committed transaction still in the log.
struct LiveTx {
    blocks: Vec<(u64, Box<[u8; BLOCK]>)>,
    /// Blocks this transaction revoked (freed metadata).
    revokes: Vec<u64>,
}

#[derive(Default)]
struct Running {
    blocks: BTreeSet<u64>,
    revokes: BTreeSet<u64>,
    ordered: BTreeSet<Ino>,
    /// Blocks freed in this transaction: until it commits, their old
    /// owner still holds them on disk, so a reuse before then is no fresh
    /// block (HoraeFS writes it as an in-place update).
    freed: BTreeSet<u64>,
    /// data=journal: the log blocks the handles of this transaction
    /// reserved for data, and running handles for metadata
    /// ([`Jbd::start_handle`]; JBD2's `t_outstanding_credits`).
    data_credits: u64,
}

/// Writes started and not yet waited for, with their host pages.
type Started = Vec<Submitted>;

/// The page locks of a transaction's shadowed buffers (BH_Shadow), each
/// with the index of its buffer among the transaction's copies, held until
/// the log write of that copy completes ([`Jbd::shadow`]).
type Shadow = Vec<(usize, tokio::sync::OwnedMutexGuard<()>)>;

/// Releases each lock of `shadow` once the log write of its copy completed
/// (`log[at[copy]]`), whatever the commit thread does meanwhile: BH_Shadow
/// clears in that log buffer's I/O completion (Linux 4.18
/// `journal_end_buffer_io_sync`), and its waiters wake then.
fn release_on_completion(fs: &Fs, shadow: Shadow, log: &[Submitted], at: &[Option<usize>]) {
    for (copy, guard) in shadow {
        let Some(done) = at
            .get(copy)
            .copied()
            .flatten()
            .and_then(|i| log.get(i))
            .map(|w| w.done.clone())
        else {
            unreachable!("shadowed copy {copy} has no log write: lay_out writes every copy");
        };
        drop(fs.machine().sim().spawn(async move {
            done.wait_raw().await;
            drop(guard);
        }));
    }
}

/// A HoraeFS transaction past its submit stage: its writes are dispatched
/// and the flush stage has not acknowledged it yet.
struct InFlight {
    tid: u64,
    /// Its writes (taken by the flush stage).
    started: Started,
    /// The end of its last ordering-queue entry: where its joint FLUSH
    /// reaches (`None`: it wrote nothing).
    flush_to: Option<u64>,
    /// Blocks it freed: until it is durable their old owners hold them on
    /// disk, so a write to one is in place (see `Running::freed`).
    freed: BTreeSet<u64>,
}

/// The data an fsync caller dispatched itself ([`Jbd::dispatch_data`]):
/// [`Jbd::data_durable`] makes it durable.
pub(crate) struct DataDispatch {
    started: Started,
    /// The end of its epoch in the ordering queue.
    end: u64,
}

/// Counters of the journal's commit pipeline (classic mode counts
/// `commits`, `shadowed` and `frozen`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PipelineStats {
    /// Transactions with a commit record, counted when dispatched (classic:
    /// when written).
    pub commits: u64,
    /// Most transactions in flight at once (submitted, not acknowledged):
    /// 2 or more means a transaction was dispatched before the previous
    /// one was durable.
    pub max_in_flight: u64,
    /// Submit stages that began while an earlier transaction was in
    /// flight.
    pub overlapped: u64,
    /// Epochs of data dispatched by fsync callers in their own context.
    pub caller_data_epochs: u64,
    /// Buffers a classic commit wrote to the log from the live buffer
    /// (BH_Shadow: a modifier waited for the log write).
    pub shadowed: u64,
    /// Buffers a classic commit wrote from a frozen copy: a modifier
    /// changed them after the transaction was locked, before its log write.
    pub frozen: u64,
    /// HoraeFS: in-place data writes redirected to the p-area (prepare
    /// writes, Horae 5.4; 0 without a p-area).
    pub redirected: u64,
    /// data=journal: writes that found the running transaction full and
    /// waited for its commit to start before going on
    /// ([`Jbd::wait_for_commit_start`]).
    pub handle_waits: u64,
    /// The most log blocks one transaction wrote (copies, descriptors,
    /// revoke records and commit record).
    pub largest_transaction: u64,
}

struct State {
    running: Running,
    /// Log sequence number of the next transaction written to the log.
    /// Only transactions that write something take one: recovery stops at
    /// the first gap.
    next_seq: u64,
    /// Ticket of the running transaction (every commit takes one, empty or
    /// not; waiters wait for tickets, not log sequence numbers).
    next_tid: u64,
    /// Last committed ticket.
    committed: u64,
    /// Last ticket whose writes are dispatched (HoraeFS: its submit stage
    /// is done, so its order is fixed; classic: committed): what
    /// `fbarrier` waits for.
    dispatched: u64,
    /// Highest ticket an fsync asked to commit.
    requested: u64,
    /// Log head (first live block offset) and its sequence number.
    head: u64,
    head_seq: u64,
    /// Next free log offset.
    tail: u64,
    live: VecDeque<LiveTx>,
    /// Home blocks with a copy in a live transaction.
    journaled: BTreeSet<u64>,
    /// Per inode, the ticket of the last transaction that changed its
    /// metadata (ext4's `i_sync_tid`).
    sync_tid: BTreeMap<Ino, u64>,
    /// Highest ticket whose commit has sent its flush (the commit
    /// record's PREFLUSH): data completed before it are durable, data
    /// completed after it are not covered by that transaction.
    flushed: u64,
}

/// The journal.
pub(crate) struct Jbd {
    ring: Ring,
    horae: Option<Rc<OrderingQueue>>,
    /// Classic commits as one ccNVMe transaction each
    /// ([`JbdCommit::CcNvmeTransaction`]; never with `horae`).
    cc: bool,
    st: RefCell<State>,
    /// HoraeFS transactions between their submit and flush stages, in
    /// order.
    in_flight: RefCell<VecDeque<InFlight>>,
    /// Writes of data an `fbarrier` or `fdatabarrier` caller dispatched
    /// and did not wait for ([`Jbd::defer_data`]): the next transaction's
    /// flush stage waits for them, or the flush thread when idle.
    deferred: RefCell<Started>,
    stats: Cell<PipelineStats>,
    commit_lock: Mutex<()>,
    wake_commit: Notify,
    wake_flush: Notify,
    /// Woken when a transaction is dispatched, acknowledged or retired.
    committed: Notify,
    /// Set when the commit thread should stop.
    stop: Cell<bool>,
}

impl Jbd {
    /// A journal over area 0 of `fs`, whose log starts as `sb` says.
    pub(crate) fn new(
        fs: &Fs,
        sb: &AreaSuper,
        next: Option<(u64, u64)>,
        horae: Option<Rc<OrderingQueue>>,
    ) -> Rc<Jbd> {
        let s = fs.sb.borrow();
        let (tail, seq) = next.unwrap_or((sb.head, sb.seq));
        let cc = horae.is_none() && fs.profile.jbd_commit == JbdCommit::CcNvmeTransaction;
        Rc::new(Jbd {
            ring: Ring::of(&s, 0),
            horae,
            cc,
            st: RefCell::new(State {
                running: Running::default(),
                next_seq: seq,
                next_tid: 1,
                committed: 0,
                dispatched: 0,
                requested: 0,
                head: tail,
                head_seq: seq,
                tail,
                live: VecDeque::new(),
                journaled: BTreeSet::new(),
                sync_tid: BTreeMap::new(),
                flushed: 0,
            }),
            in_flight: RefCell::new(VecDeque::new()),
            deferred: RefCell::new(Vec::new()),
            stats: Cell::new(PipelineStats::default()),
            commit_lock: Mutex::new(()),
            wake_commit: Notify::new(),
            wake_flush: Notify::new(),
            committed: Notify::new(),
            stop: Cell::new(false),
        })
    }

    pub(crate) fn note_dirty(&self, b: u64, owners: &[Ino]) {
        let mut st = self.st.borrow_mut();
        st.running.blocks.insert(b);
        st.running.revokes.remove(&b);
        st.running.ordered.extend(owners.iter().copied());
        let tid = st.next_tid;
        for o in owners {
            st.sync_tid.insert(*o, tid);
        }
    }

    /// Whether the transaction that last changed `ino`'s metadata will
    /// still send a flush after now, so that data written before now are
    /// durable with its commit (Linux's `jbd2_trans_will_send_data_barrier`
    /// for ext4's `i_sync_tid`): false once its commit (or a later one)
    /// sent its flush, or for an inode no transaction changed. ext4's
    /// fsync, which writes the file's data first, then flushes itself
    /// (`ext4_sync_file`: `needs_barrier`).
    pub(crate) fn will_flush_for(&self, ino: Ino) -> bool {
        let st = self.st.borrow();
        st.sync_tid.get(&ino).is_some_and(|t| *t > st.flushed)
    }

    /// Transaction `tid`'s commit sends its flush now: data completed
    /// after this are not covered by it ([`Jbd::will_flush_for`]).
    fn flush_sent(&self, tid: u64) {
        let mut st = self.st.borrow_mut();
        st.flushed = st.flushed.max(tid);
    }

    /// HoraeFS's ordering queue.
    pub(crate) fn ordering_queue(&self) -> Option<&Rc<OrderingQueue>> {
        self.horae.as_ref()
    }

    /// True for HoraeFS.
    pub(crate) fn is_horae(&self) -> bool {
        self.horae.is_some()
    }

    /// The pipeline's counters.
    pub(crate) fn stats(&self) -> PipelineStats {
        self.stats.get()
    }

    fn count(&self, f: impl FnOnce(&mut PipelineStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    /// Puts `ino`'s dirty data in the running transaction (ordered mode;
    /// under data=journal, the pages themselves).
    pub(crate) fn order_data(&self, ino: Ino) {
        self.st.borrow_mut().running.ordered.insert(ino);
    }

    /// The most log blocks a transaction may take: a quarter of the log,
    /// JBD2's `j_max_transaction_buffers` (fs/jbd2/journal.c,
    /// `jbd2_journal_get_max_txn_bufs`).
    fn max_transaction_blocks(&self) -> u64 {
        self.ring.blocks / 4
    }

    /// data=journal: starts a handle in the running transaction, as JBD2's
    /// `start_this_handle` adds a handle's credits to
    /// `t_outstanding_credits` (fs/jbd2/transaction.c,
    /// `add_transaction_credits`): reserves room for up to `pages` data
    /// blocks and `meta` metadata blocks the handle may dirty, and returns
    /// how many pages it reserved. 0 means the transaction is full: the
    /// caller leaves its operation, waits for the commit to start
    /// ([`Jbd::wait_for_commit_start`]) and tries again. An empty
    /// transaction takes one page whatever the log's size, so every write
    /// goes on. Credits count log blocks (descriptors and the commit record
    /// included) over what the transaction already holds; the caller
    /// returns the `meta` credits when its handle stops
    /// ([`Jbd::stop_handle`]), its dirtied buffers being in the
    /// transaction by then.
    pub(crate) fn start_handle(&self, pages: u64, meta: u64) -> u64 {
        let mut st = self.st.borrow_mut();
        let r = &mut st.running;
        let used = |credits: u64| log_blocks(r.blocks.len() + credits as usize, r.revokes.len()) + 1;
        let max = self.max_transaction_blocks();
        let fits = |n: u64| used(r.data_credits + n + meta) <= max;
        let got = if !fits(1) {
            u64::from(r.data_credits == 0 && r.blocks.is_empty())
        } else {
            // The most pages that fit (at most `pages`), by bisection.
            let (mut lo, mut hi) = (1, pages);
            while lo < hi {
                let mid = lo + (hi - lo).div_ceil(2);
                if fits(mid) {
                    lo = mid;
                } else {
                    hi = mid - 1;
                }
            }
            lo
        };
        if got > 0 {
            r.data_credits += got + meta;
        }
        got
    }

    /// Returns the `meta` credits of a handle [`Jbd::start_handle`]
    /// started (`jbd2_journal_stop` gives back what a handle did not
    /// use); the caller still holds its operation, so the handle's
    /// transaction is still running.
    pub(crate) fn stop_handle(&self, meta: u64) {
        let mut st = self.st.borrow_mut();
        debug_assert!(
            st.running.data_credits >= meta,
            "a handle returns the credits it took"
        );
        st.running.data_credits = st.running.data_credits.saturating_sub(meta);
    }

    /// data=journal: asks the commit thread to commit the running
    /// transaction and waits until it has taken it (JBD2's
    /// `wait_transaction_locked` after `jbd2_log_start_commit`: a new
    /// transaction runs from then on), not for its durability. The caller
    /// pays two context switches.
    pub(crate) async fn wait_for_commit_start(&self, fs: &Fs, ctx: Ctx) -> Result<(), FsError> {
        self.count(|s| s.handle_waits += 1);
        let target = {
            let mut st = self.st.borrow_mut();
            let t = st.next_tid;
            st.requested = st.requested.max(t);
            t
        };
        self.wake_commit.notify_one();
        self.wait_for(fs, |j| j.st.borrow().next_tid > target).await?;
        fs.woken(ctx, fs.profile.context_switch).await;
        Ok(())
    }

    /// Block `b` was freed (data or metadata) in the running transaction.
    pub(crate) fn note_freed(&self, b: u64) {
        self.st.borrow_mut().running.freed.insert(b);
    }

    pub(crate) fn note_freed_meta(&self, b: u64) {
        let mut st = self.st.borrow_mut();
        let was_running = st.running.blocks.remove(&b);
        if was_running || st.journaled.contains(&b) {
            st.running.revokes.insert(b);
        }
    }

    /// True if a data write to `home` overwrites live data in place
    /// (HoraeFS tells the ordering layer, as it detects IPU from `BH_New`,
    /// Horae 5.6.2): not allocated since its inode's last commit (`fresh`
    /// false), or allocated after being freed by a transaction that is not
    /// durable yet (the running one or one in flight: its old owner keeps
    /// it on disk until then). Fresh blocks hold dead data, which a Horae
    /// recovery may zero-fill.
    /// `freed` is the running transaction's (the submit stage has taken
    /// it out of the state by then).
    fn overwrites_live(&self, home: u64, fresh: bool, freed: &BTreeSet<u64>) -> bool {
        !fresh || freed.contains(&home) || self.in_flight.borrow().iter().any(|t| t.freed.contains(&home))
    }

    /// Starts the commit thread, and HoraeFS's flush thread.
    pub(crate) fn start(self: &Rc<Self>, fs: &Rc<Fs>) {
        let (j, f) = (self.clone(), fs.clone());
        fs.machine.sim().spawn(async move { j.commit_thread(f).await });
        if self.is_horae() {
            let (j, f) = (self.clone(), fs.clone());
            fs.machine.sim().spawn(async move { j.flush_thread(f).await });
        }
    }

    /// The commit thread (HoraeFS: the submit stage): commits whenever
    /// asked, until stopped. In HoraeFS it goes on with the next
    /// transaction as soon as one is dispatched.
    async fn commit_thread(self: Rc<Self>, fs: Rc<Fs>) {
        let ctx = Ctx::on(fs.profile.commit_core);
        loop {
            if self.stop.get() {
                return;
            }
            let want = {
                let st = self.st.borrow();
                st.requested >= st.next_tid
            };
            if !want {
                self.wake_commit.notified().await;
                continue;
            }
            if self.submit(&fs, ctx).await.is_err() {
                self.fail(&fs);
                return;
            }
        }
    }

    /// HoraeFS's flush thread (the flush stage): for each transaction in
    /// flight, in order, waits for its writes and sends the joint FLUSH up
    /// to its commit record, then acknowledges it.
    async fn flush_thread(self: Rc<Self>, fs: Rc<Fs>) {
        let ctx = Ctx::on(fs.profile.flush_core.unwrap_or(fs.profile.commit_core));
        loop {
            let front = self.in_flight.borrow_mut().front_mut().map(|t| {
                let started = std::mem::take(&mut t.started);
                (t.tid, started, t.flush_to)
            });
            let Some((tid, started, flush_to)) = front else {
                // Idle: reap the writes barrier callers left behind.
                let left = std::mem::take(&mut *self.deferred.borrow_mut());
                if !left.is_empty() {
                    if fs.write_wait(ctx, left).await.is_err() {
                        self.fail(&fs);
                        return;
                    }
                    continue;
                }
                if self.stop.get() {
                    return;
                }
                self.wake_flush.notified().await;
                continue;
            };
            // Fault injection: acknowledge before the transaction is
            // durable (the waits below still run, so pages are recycled
            // only after their DMA).
            let early = !fs.profile.horae_ack_after_flush;
            if early {
                self.acknowledge(tid);
            }
            let r = self.flush_stage(&fs, ctx, started, flush_to).await;
            if r.is_err() {
                self.fail(&fs);
                return;
            }
            let retired = self.in_flight.borrow_mut().pop_front();
            debug_assert!(
                retired.as_ref().is_some_and(|t| t.tid == tid),
                "the flush stage retires the transaction it waited for"
            );
            if !early {
                self.acknowledge(tid);
            }
            self.committed.notify_waiters();
        }
    }

    /// The durability waits of one HoraeFS transaction: its writes, then
    /// the joint FLUSH through `flush_to`.
    async fn flush_stage(
        &self,
        fs: &Fs,
        ctx: Ctx,
        started: Started,
        flush_to: Option<u64>,
    ) -> Result<(), FsError> {
        fs.write_wait(ctx, started).await?;
        if let (Some(oq), Some(end)) = (&self.horae, flush_to) {
            oq.flush_through(ctx.core, end).await?;
        }
        Ok(())
    }

    /// A commit failed: the file system turns read-only and every waiter
    /// is woken to see it.
    fn fail(&self, fs: &Fs) {
        fs.readonly.set(true);
        self.committed.notify_waiters();
    }

    /// Stops the commit thread (and the flush thread).
    pub(crate) fn stop(&self) {
        self.stop.set(true);
        self.wake_commit.notify_one();
        self.wake_flush.notify_one();
    }

    /// HoraeFS: dispatches `st`'s dirty data as one epoch of ordered writes
    /// from the caller's context (page preparation, the ordering layer and
    /// the block layer all on the caller's core), without waiting. The
    /// operation gate is held from taking the pages until their epoch is
    /// appended, so no transaction snapshot falls in between: the
    /// transaction that commits their metadata appends its epochs after
    /// this one ({D, JM} <= JC). `None` when there is nothing dirty or in classic mode.
    pub(crate) async fn dispatch_data(
        &self,
        fs: &Fs,
        ctx: Ctx,
        st: &InodeState,
    ) -> Result<Option<DataDispatch>, FsError> {
        let Some(oq) = &self.horae else {
            return Ok(None);
        };
        let op = fs.enter_gate().await;
        let data = fs.take_dirty_data(ctx, st).await?;
        if data.is_empty() {
            return Ok(None);
        }
        let in_place: Vec<bool> = {
            let fresh = st.new_blocks.borrow();
            let js = self.st.borrow();
            data.iter()
                .map(|(b, _)| self.overwrites_live(*b, fresh.contains(b), &js.running.freed))
                .collect()
        };
        // More in-place writes than the p-area holds go as several epochs
        // in a row, each dispatched before the next is appended.
        let chunks = Self::p_area_chunks(fs, oq, &data, &in_place)?;
        let (last, rest) = chunks
            .split_last()
            .ok_or_else(|| FsError::Io("no epoch".into()))?;
        let mut started = Vec::new();
        for r in rest {
            let (_, s) = self
                .horae_epoch(fs, oq, ctx, &data[r.clone()], &in_place[r.clone()])
                .await?;
            started.extend(s);
        }
        let epoch = Self::horae_append(fs, oq, ctx, &data[last.clone()], &in_place[last.clone()]).await?;
        self.count_redirected(oq, &in_place[last.clone()]);
        // Appended: any later snapshot's epochs come after this one, so
        // operations may go on while the block layer takes the writes.
        drop(op);
        started.extend(Self::horae_dispatch(fs, oq, ctx, epoch, &data[last.clone()]).await?);
        self.count(|s| s.caller_data_epochs += 1);
        Ok(Some(DataDispatch {
            started,
            end: epoch.first + epoch.len as u64,
        }))
    }

    /// Makes data from [`Jbd::dispatch_data`] durable: waits for its writes
    /// and sends the joint FLUSH through its epoch, unless a transaction's
    /// flush stage already went past it (the usual case: the caller's
    /// transaction appends its commit record after this data).
    pub(crate) async fn data_durable(&self, fs: &Fs, ctx: Ctx, d: DataDispatch) -> Result<(), FsError> {
        fs.write_wait(ctx, d.started).await?;
        if let Some(oq) = &self.horae {
            oq.flush_through(ctx.core, d.end).await?;
        }
        Ok(())
    }

    /// Leaves the writes of data from [`Jbd::dispatch_data`] to the flush
    /// stage (`fbarrier`, `fdatabarrier`: the caller does not wait for
    /// them): the next transaction dispatched waits for them with its own,
    /// or the flush thread when it is idle.
    pub(crate) fn defer_data(&self, d: DataDispatch) {
        self.deferred.borrow_mut().extend(d.started);
        self.wake_flush.notify_one();
    }

    /// Asks the commit thread to commit the running transaction and waits
    /// until it is committed. The caller pays two context switches (wake
    /// the thread, be woken).
    pub(crate) async fn commit_and_wait(&self, fs: &Fs, ctx: Ctx) -> Result<(), FsError> {
        self.request_and_wait(fs, ctx, false).await
    }

    /// `fbarrier`'s wait (HoRAE Table 1, 5.6.2): asks the commit thread to
    /// commit the running transaction and waits only until its writes are
    /// dispatched through the ordering layer (the submit stage is done:
    /// its order against every later write is fixed), not for their
    /// durability. The caller pays the same two context switches. In
    /// classic mode a transaction is dispatched when it is committed.
    pub(crate) async fn barrier_and_wait(&self, fs: &Fs, ctx: Ctx) -> Result<(), FsError> {
        self.request_and_wait(fs, ctx, true).await
    }

    async fn request_and_wait(&self, fs: &Fs, ctx: Ctx, dispatched: bool) -> Result<(), FsError> {
        let target = {
            let mut st = self.st.borrow_mut();
            let empty = st.running.blocks.is_empty()
                && st.running.revokes.is_empty()
                && st.running.ordered.is_empty();
            let t = if empty { st.next_tid - 1 } else { st.next_tid };
            st.requested = st.requested.max(t);
            t
        };
        let reached = |st: &State| {
            if dispatched {
                st.dispatched >= target
            } else {
                st.committed >= target
            }
        };
        if reached(&self.st.borrow()) {
            return Ok(());
        }
        self.wake_commit.notify_one();
        self.wait_for(fs, |j| reached(&j.st.borrow())).await?;
        fs.woken(ctx, fs.profile.context_switch).await;
        Ok(())
    }

    /// Sleeps until `done` holds, woken by each commit (or by a failure,
    /// which makes the file system read-only: an error then).
    async fn wait_for(&self, fs: &Fs, done: impl Fn(&Self) -> bool) -> Result<(), FsError> {
        loop {
            if done(self) {
                return Ok(());
            }
            if fs.readonly.get() {
                return Err(FsError::Io("journal commit failed".into()));
            }
            self.committed.notified().await;
        }
    }

    /// Waits until transaction `tid` is acknowledged.
    async fn wait_committed(&self, fs: &Fs, tid: u64) -> Result<(), FsError> {
        self.wait_for(fs, |j| j.st.borrow().committed >= tid).await
    }

    /// Waits until no HoraeFS transaction is in flight.
    async fn drain(&self, fs: &Fs) -> Result<(), FsError> {
        self.wait_for(fs, |j| j.in_flight.borrow().is_empty()).await
    }

    /// Commits the running transaction and waits until it is committed
    /// (sync and unmount).
    pub(crate) async fn commit(&self, fs: &Fs, ctx: Ctx) -> Result<(), FsError> {
        let tid = self.submit(fs, ctx).await?;
        self.wait_committed(fs, tid).await
    }

    /// Takes the running transaction and writes it; returns its ticket.
    /// Classic mode waits for every write (the transaction is committed
    /// when this returns); HoraeFS only dispatches them (the submit stage)
    /// and hands the transaction to the flush stage.
    async fn submit(&self, fs: &Fs, ctx: Ctx) -> Result<u64, FsError> {
        let _c = self.commit_lock.lock().await;
        if !self.in_flight.borrow().is_empty() {
            self.count(|s| s.overlapped += 1);
        }
        // Freeze: no operation is half-way while the snapshot is taken.
        let frozen = fs.freeze().await;
        let (tid, running) = {
            let mut st = self.st.borrow_mut();
            let r = std::mem::take(&mut st.running);
            let tid = st.next_tid;
            st.next_tid += 1;
            (tid, r)
        };
        // Writers waiting for room in a full transaction go on in the next.
        self.committed.notify_waiters();
        let snapshots: Vec<(u64, Box<[u8; BLOCK]>)> = running
            .blocks
            .iter()
            .filter_map(|b| fs.bufs.get(*b).map(|c| (*b, c.snapshot())))
            .collect();
        // The buffers' versions as locked (T_LOCKED), for BH_Shadow.
        let locked: Vec<(Rc<CachedBlock>, u64)> = running
            .blocks
            .iter()
            .filter_map(|b| fs.bufs.get(*b).map(|c| (c.clone(), c.version())))
            .collect();
        let mut data: Vec<(u64, Box<[u8; BLOCK]>)> = Vec::new();
        // Per data block: true if it overwrites live data in place.
        let mut in_place: Vec<bool> = Vec::new();
        // data=journal: the file data are copies in the log, like the
        // metadata, and go home by the checkpoint; a block the running
        // transaction revoked (freed, then reused) is journaled again, so
        // its revoke is cancelled, as `jbd2_journal_cancel_revoke` does.
        let journal_data = fs.profile.data_journal;
        let mut running = running;
        // Every dirty page of the transaction's files goes in it: a write
        // joined its pages to the running transaction when it dirtied
        // them, with room reserved (`Jbd::start_handle`), so the data
        // commit with the allocations and sizes that expose them.
        let mut data_copies: Vec<(u64, Box<[u8; BLOCK]>)> = Vec::new();
        for ino in &running.ordered {
            let st = fs.inodes.borrow().get(ino).cloned();
            if let Some(st) = st {
                // Every allocation since the last commit dirtied a bitmap
                // on the inode's behalf, so the inode is in `ordered`: this
                // takes each allocation in the transaction that commits it.
                let fresh = std::mem::take(&mut *st.new_blocks.borrow_mut());
                for (fb, page) in st.pages.dirty() {
                    if let Some(home) = Fs::bmap(&st, fb) {
                        if journal_data {
                            data_copies.push((home, page.snapshot()));
                        } else {
                            data.push((home, page.snapshot()));
                            in_place.push(self.overwrites_live(home, fresh.contains(&home), &running.freed));
                        }
                        page.set_dirty(false);
                    }
                }
            }
        }
        drop(frozen);
        for (home, _) in &data_copies {
            running.revokes.remove(home);
        }
        // Data copies after the metadata's: the shadow indices of `locked`
        // stay those of the metadata copies.
        let mut snapshots = snapshots;
        snapshots.extend(data_copies);
        let revokes: Vec<u64> = running.revokes.into_iter().collect();
        if snapshots.is_empty() && revokes.is_empty() {
            match &self.horae {
                None => {
                    if !data.is_empty() {
                        fs.write_all(ctx, &data, BioFlags::NONE).await?;
                    }
                    self.acknowledge(tid);
                }
                Some(oq) => {
                    let (mut started, flush_to) = if data.is_empty() {
                        (Vec::new(), None)
                    } else {
                        let (e, started) = self.horae_epoch(fs, oq, ctx, &data, &in_place).await?;
                        (started, Some(e.first + e.len as u64))
                    };
                    started.extend(std::mem::take(&mut *self.deferred.borrow_mut()));
                    self.hand_to_flush(InFlight {
                        tid,
                        started,
                        flush_to,
                        freed: running.freed,
                    });
                }
            }
            return Ok(tid);
        }
        let seq = {
            let mut st = self.st.borrow_mut();
            let s = st.next_seq;
            st.next_seq += 1;
            s
        };
        fs.cycles(ctx, fs.profile.journal_block_cycles * snapshots.len() as u64)
            .await;
        // Through ccNVMe: no commit block, and a global transaction id the
        // driver tracks (its recovery reports the unfinished ones by id).
        let commit_blocks = u64::from(!self.cc);
        let need = log_blocks(snapshots.len(), revokes.len()) + commit_blocks;
        self.count(|s| s.largest_transaction = s.largest_transaction.max(need));
        self.make_room(fs, ctx, need).await?;
        let txid = if self.cc {
            let t = fs.next_txid.get();
            fs.next_txid.set(t + 1);
            t
        } else {
            seq
        };
        // Lay the transaction out in the log, the commit block after it.
        let start = self.st.borrow().tail;
        let laid = lay_out(self.ring, start, seq, txid, &snapshots, &revokes);
        let end = laid.end;
        if self.cc {
            // Its durability (the driver's flush) may come before data an
            // fsync caller writes after this point.
            self.flush_sent(tid);
            self.commit_cc(fs, ctx, txid, data, laid, &snapshots, locked)
                .await?;
            let mut st = self.st.borrow_mut();
            st.tail = end;
            st.journaled.extend(snapshots.iter().map(|(b, _)| *b));
            st.live.push_back(LiveTx {
                blocks: snapshots,
                revokes,
            });
            drop(st);
            self.count(|s| s.commits += 1);
            self.acknowledge(tid);
            return Ok(tid);
        }
        let copy_at = laid.copy_positions(snapshots.len());
        let log = laid.into_writes(&snapshots);
        let commit = (
            self.ring.start + end,
            Commit {
                seq,
                blocks: log.len() as u32,
            }
            .encode(self.ring.seed),
        );
        let pos = self.ring.advance(end, 1);
        let remember = |this: &Self, snapshots: Vec<(u64, Box<[u8; BLOCK]>)>| {
            let mut st = this.st.borrow_mut();
            st.tail = pos;
            for (b, _) in &snapshots {
                st.journaled.insert(*b);
            }
            st.live.push_back(LiveTx {
                blocks: snapshots,
                revokes: revokes.clone(),
            });
        };
        match &self.horae {
            None => {
                // Linux 4.18 `jbd2_journal_commit_transaction`: the
                // ordered data are submitted (`journal_submit_data_buffers`)
                // and the log blocks after them without a wait; then the
                // commit waits for the data
                // (`journal_finish_inode_data_buffers`) and for the log
                // buffers, and only then writes the commit record behind a
                // flush: the one ordering point.
                let shadow = self.shadow(fs, locked);
                let data_writes = data.len();
                let mut writes = data;
                writes.extend(log);
                let started = fs.start_all(ctx, &writes, BioFlags::NONE).await?;
                release_on_completion(fs, shadow, &started[data_writes..], &copy_at);
                fs.write_wait(ctx, started).await?;
                let flags = if !fs.profile.barrier {
                    BioFlags::NONE
                } else if fs.profile.commit_fua {
                    BioFlags::PREFLUSH | BioFlags::FUA
                } else {
                    BioFlags::PREFLUSH
                };
                self.flush_sent(tid);
                fs.write_all(ctx, &[commit], flags).await?;
                remember(self, snapshots);
                self.count(|s| s.commits += 1);
                self.acknowledge(tid);
            }
            Some(oq) => {
                // The log and the commit block are cleaned before reuse
                // (Horae 5.6.2): not in place.
                in_place.resize(data.len() + log.len(), false);
                // The buffers are shadowed from their log writes' dispatch
                // until those writes complete.
                let shadow = self.shadow(fs, locked);
                let data_writes = data.len();
                let mut epoch1 = data;
                epoch1.extend(log);
                let (_, mut started) = self.horae_epoch(fs, oq, ctx, &epoch1, &in_place).await?;
                release_on_completion(fs, shadow, &started[data_writes..], &copy_at);
                let (jc, s2) = self.horae_epoch(fs, oq, ctx, &[commit], &[false]).await?;
                started.extend(s2);
                started.extend(std::mem::take(&mut *self.deferred.borrow_mut()));
                // The log space and the copies are taken now: the next
                // transaction lays out after this one, and a block freed
                // while this one is in flight gets a revoke record.
                remember(self, snapshots);
                self.count(|s| s.commits += 1);
                self.hand_to_flush(InFlight {
                    tid,
                    started,
                    flush_to: Some(jc.first + jc.len as u64),
                    freed: running.freed,
                });
            }
        }
        Ok(tid)
    }

    /// Commits a classic transaction as one ccNVMe transaction
    /// ([`JbdCommit::CcNvmeTransaction`]) on the commit thread's core: the
    /// ordered `data` to their homes and the log blocks of `laid` REQ_TX,
    /// its last descriptor REQ_TX_COMMIT ([`cc::submit`]), then waits
    /// until it is durable. The buffers are shadowed (BH_Shadow) until
    /// then: the log writes complete when the transaction does.
    #[allow(clippy::too_many_arguments)]
    async fn commit_cc(
        &self,
        fs: &Fs,
        ctx: Ctx,
        txid: u64,
        data: Vec<(u64, Box<[u8; BLOCK]>)>,
        laid: Layout,
        snapshots: &[(u64, Box<[u8; BLOCK]>)],
        locked: Vec<(Rc<CachedBlock>, u64)>,
    ) -> Result<(), FsError> {
        let (log, last) = laid.split_last();
        let shadow = self.shadow(fs, locked);
        let sub = cc::submit(fs, ctx, txid, data, log, snapshots, &last, std::future::ready(())).await?;
        let s = fs.vol.first().wait(sub.core, &sub.handle.durable).await;
        fs.pages.borrow_mut().extend(sub.pages);
        drop(shadow);
        if !s.is_success() {
            return Err(FsError::Driver(ccnvme::DriverError::Command(s)));
        }
        Ok(())
    }

    /// JBD2's choice for each metadata buffer of a classic transaction as
    /// its log write starts (Linux 4.18 `jbd2_journal_write_metadata_buffer`
    /// and `do_get_write_access`): a buffer a modifier changed since the
    /// transaction was locked, or is changing now, was given a frozen copy
    /// (`b_frozen_data`: the snapshot taken at lock time stands for it),
    /// so its modifiers go on; any other is written from the live buffer
    /// and shadowed (BH_Shadow): its page lock is held until the log write
    /// completes, so a modifier waits for that write, as
    /// `do_get_write_access` sleeps in `wait_on_bit_io(BH_Shadow)`.
    /// Readers take no page lock and never wait. Returns the held locks,
    /// which [`release_on_completion`] releases when the log writes
    /// complete, in classic mode and in HoraeFS alike (ccNVMe 7.3: "In
    /// Ext4 and HoraeFS, the accesses to the same block are serialized by
    /// the block-level lock"). Deviation: the frozen copy's memcpy is not
    /// charged to the modifier. [`crate::FsProfile::jbd_shadow`] off gives
    /// every buffer a frozen copy.
    fn shadow(&self, fs: &Fs, locked: Vec<(Rc<CachedBlock>, u64)>) -> Shadow {
        if !fs.profile.jbd_shadow {
            return Vec::new();
        }
        let mut held = Vec::with_capacity(locked.len());
        let (mut shadowed, mut frozen) = (0, 0);
        for (copy, (c, version)) in locked.into_iter().enumerate() {
            let guard = (c.version() == version)
                .then(|| c.lock.clone().try_lock_owned().ok())
                .flatten();
            match guard {
                Some(g) => {
                    held.push((copy, g));
                    shadowed += 1;
                }
                None => frozen += 1,
            }
        }
        self.count(|s| {
            s.shadowed += shadowed;
            s.frozen += frozen;
        });
        held
    }

    /// Queues a dispatched transaction for the flush stage.
    fn hand_to_flush(&self, t: InFlight) {
        {
            let mut st = self.st.borrow_mut();
            st.dispatched = st.dispatched.max(t.tid);
        }
        let n = {
            let mut q = self.in_flight.borrow_mut();
            q.push_back(t);
            q.len() as u64
        };
        self.count(|s| s.max_in_flight = s.max_in_flight.max(n));
        self.wake_flush.notify_one();
        // Barrier callers wait for the dispatch.
        self.committed.notify_waiters();
    }

    /// Appends `blocks` as one epoch of the ordering queue (`in_place[i]`:
    /// block `i` overwrites live data), then dispatches them without
    /// waiting.
    async fn horae_epoch(
        &self,
        fs: &Fs,
        oq: &Rc<OrderingQueue>,
        ctx: Ctx,
        blocks: &[(u64, Box<[u8; BLOCK]>)],
        in_place: &[bool],
    ) -> Result<(Epoch, Started), FsError> {
        let mut out: Option<(Epoch, Started)> = None;
        for r in Self::p_area_chunks(fs, oq, blocks, in_place)? {
            let epoch = Self::horae_append(fs, oq, ctx, &blocks[r.clone()], &in_place[r.clone()]).await?;
            self.count_redirected(oq, &in_place[r.clone()]);
            let s = Self::horae_dispatch(fs, oq, ctx, epoch, &blocks[r]).await?;
            let started = match out.take() {
                Some((_, mut before)) => {
                    before.extend(s);
                    before
                }
                None => s,
            };
            out = Some((epoch, started));
        }
        out.ok_or_else(|| FsError::Io("an empty epoch".into()))
    }

    /// Splits an epoch's blocks into runs in which no member of the
    /// volume gets more redirected writes (in place, or of a block the IPU
    /// tree holds) than the stream's p-area has slots on it: an epoch must
    /// fit the p-area whole (its prepare writes are reserved at once), and
    /// epochs in a row only add order. One run without a p-area.
    fn p_area_chunks(
        fs: &Fs,
        oq: &OrderingQueue,
        blocks: &[(u64, Box<[u8; BLOCK]>)],
        in_place: &[bool],
    ) -> Result<Vec<std::ops::Range<usize>>, FsError> {
        let mut out = Vec::new();
        if !oq.redirects() {
            out.push(0..in_place.len());
            return Ok(out);
        }
        let mut used: BTreeMap<usize, usize> = BTreeMap::new();
        let mut start = 0;
        for (i, ((b, _), ip)) in blocks.iter().zip(in_place).enumerate() {
            let (member, lba) = fs.vol.map(*b)?;
            let limit = oq.p_area_slots(member as u8);
            let redirected = limit > 0 && (*ip || oq.read_location(member as u8, lba) != lba);
            if !redirected {
                continue;
            }
            let n = used.entry(member).or_default();
            if *n == limit {
                out.push(start..i);
                start = i;
                used.clear();
                used.insert(member, 0);
            }
            *used.entry(member).or_default() += 1;
        }
        out.push(start..in_place.len());
        Ok(out)
    }

    /// Counts the in-place writes of an appended epoch the ordering layer
    /// redirected.
    fn count_redirected(&self, oq: &OrderingQueue, in_place: &[bool]) {
        if oq.redirects() {
            let n = in_place.iter().filter(|x| **x).count() as u64;
            self.count(|s| s.redirected += n);
        }
    }

    /// Appends `blocks` as one epoch of the ordering queue: their order
    /// against every other epoch is fixed when this returns. Each entry
    /// names the member of the volume its block maps to (its `devid`,
    /// Horae Figure 6; [`crate::volume`]).
    async fn horae_append(
        fs: &Fs,
        oq: &Rc<OrderingQueue>,
        ctx: Ctx,
        blocks: &[(u64, Box<[u8; BLOCK]>)],
        in_place: &[bool],
    ) -> Result<Epoch, FsError> {
        debug_assert_eq!(blocks.len(), in_place.len(), "one in-place flag per block");
        let mut writes = Vec::with_capacity(blocks.len());
        for ((b, _), ip) in blocks.iter().zip(in_place) {
            let (member, lba) = fs.vol.map(*b)?;
            writes.push(OrderedWrite {
                in_place: *ip,
                ..OrderedWrite::fresh(lba, 1).on(member as u8)
            });
        }
        Ok(oq.append_writes(ctx.core, &writes).await?)
    }

    /// Submits the writes of `epoch` (appended from `blocks`) through the
    /// block layer, without waiting.
    async fn horae_dispatch(
        fs: &Fs,
        oq: &Rc<OrderingQueue>,
        ctx: Ctx,
        epoch: Epoch,
        blocks: &[(u64, Box<[u8; BLOCK]>)],
    ) -> Result<Started, FsError> {
        let mut started = Vec::new();
        for (i, (b, data)) in blocks.iter().enumerate() {
            let page = fs.take_page_pub()?;
            let core = fs.machine.core(ctx.core % fs.machine.core_count().max(1))?;
            core.write_mem(page, &data[..]).await?;
            let id = epoch
                .entry(i as u32)
                .ok_or_else(|| FsError::Io("ordering queue epoch too short".into()))?;
            let (member, lba) = fs.vol.map(*b)?;
            let done = oq.submit(ctx.core, id, &Bio::write(lba, vec![page])).await?;
            started.push(Submitted { member, done, page });
        }
        Ok(started)
    }

    /// Acknowledges transaction `tid`: its waiters may return.
    fn acknowledge(&self, tid: u64) {
        let mut st = self.st.borrow_mut();
        st.committed = st.committed.max(tid);
        st.dispatched = st.dispatched.max(tid);
        drop(st);
        self.committed.notify_waiters();
    }

    /// Checkpoints until `need` log blocks are free (or the log would be
    /// fuller than the watermark).
    async fn make_room(&self, fs: &Fs, ctx: Ctx, need: u64) -> Result<(), FsError> {
        let ring = self.ring.len();
        if need + 1 > ring {
            return Err(FsError::NoSpace);
        }
        let full = {
            let st = self.st.borrow();
            let used = self.ring.used(st.head, st.tail) + need;
            used * 100 > ring * fs.profile.checkpoint_watermark as u64
        };
        if full {
            self.checkpoint(fs, ctx).await?;
        }
        Ok(())
    }

    /// Writes every live transaction's newest copies home, flushes, and
    /// frees the log (the area superblock then points past them).
    pub(crate) async fn checkpoint(&self, fs: &Fs, ctx: Ctx) -> Result<(), FsError> {
        // Only durable transactions go home, and the new log head must not
        // pass one still in flight.
        self.drain(fs).await?;
        let (blocks, tail, seq) = {
            let st = self.st.borrow();
            // A copy followed by a revoke (the block was freed, and may now
            // hold file data written in place) is not written home.
            let mut newest: BTreeMap<u64, &Box<[u8; BLOCK]>> = BTreeMap::new();
            for t in &st.live {
                for (b, d) in &t.blocks {
                    newest.insert(*b, d);
                }
                for b in &t.revokes {
                    newest.remove(b);
                }
            }
            for b in &st.running.revokes {
                newest.remove(b);
            }
            let mut v: Vec<(u64, Box<[u8; BLOCK]>)> =
                newest.into_iter().map(|(b, d)| (b, d.clone())).collect();
            v.sort_by_key(|(b, _)| *b);
            (v, st.tail, st.next_seq)
        };
        if !blocks.is_empty() {
            fs.write_all(ctx, &blocks, BioFlags::NONE).await?;
            fs.barrier_flush(ctx).await?;
        }
        let jsb = AreaSuper {
            area: 0,
            head: tail,
            seq,
            home_below: 0,
        };
        log::write_super(fs, ctx, self.ring, &jsb).await?;
        let mut st = self.st.borrow_mut();
        st.live.clear();
        st.journaled.clear();
        st.head = tail;
        st.head_seq = seq;
        Ok(())
    }

    /// Commits everything and checkpoints it (sync, unmount).
    pub(crate) async fn sync_all(&self, fs: &Fs, ctx: Ctx) -> Result<(), FsError> {
        self.commit(fs, ctx).await?;
        let _c = self.commit_lock.lock().await;
        self.checkpoint(fs, ctx).await
    }

    /// Replays the log of area 0 (mount after a crash): every transaction
    /// with a valid commit record, in order, honouring revokes (a revoke in
    /// transaction T hides copies from T and earlier). Returns the log
    /// position and sequence number after the last one. A damaged
    /// transaction ends the log there and is recorded
    /// ([`Fs::journal_damage`]); the log restarts at its first block.
    pub(crate) async fn recover(fs: &Fs, ctx: Ctx, jsb: &AreaSuper) -> Result<(u64, u64), FsError> {
        let ring = Ring::of(&fs.sb.borrow(), 0);
        let found = log::scan(fs, ctx, 0, ring, jsb.head, jsb.seq, End::CommitBlock).await?;
        if let Some(d) = found.damage.clone() {
            fs.note_journal_damage(d);
        }
        let txs: Vec<(u64, &Found)> = found.txs.iter().map(|t| (ring.start, t)).collect();
        Replay::resolve(&txs, RevokeScope::ThisAndEarlier)
            .apply(fs, ctx)
            .await?;
        let jsb = AreaSuper {
            area: 0,
            head: found.pos,
            seq: found.seq,
            home_below: 0,
        };
        log::write_super(fs, ctx, ring, &jsb).await?;
        Ok((found.pos, found.seq))
    }
}
