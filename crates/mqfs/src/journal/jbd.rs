//! Ordered metadata journaling in the manner of JBD2 (Ext4), and its Horae
//! variant (HoraeFS), in journal area 0.
//!
//! Every operation's metadata changes join the *running transaction*. A
//! separate commit thread (JBD2's kjournald2) commits it when an fsync asks
//! (`docs/decisions.md` E1, E2):
//!
//! - **classic**: freeze the operation gate and snapshot the transaction's
//!   blocks; write the data of the files it touched (ordered mode) and
//!   wait; write the descriptor, the block copies and the revoke records
//!   and wait (the ordering point); write the commit record with PREFLUSH
//!   and FUA and wait.
//! - **horae**: the same blocks, but the data, descriptor, copies and
//!   revokes form one epoch of the Horae ordering queue and the commit
//!   record the next ({D, JM} <= JC, Horae 5.6.2); everything is
//!   dispatched without waiting, then a wait for all, then the joint flush.
//!
//! A transaction is laid out in the log as `log` says, followed by its
//! commit block (`End::CommitBlock`). Committed transactions stay in the
//! log until a checkpoint writes their snapshots home (when the log is
//! three quarters full, at sync and at unmount). Recovery (`log::scan`,
//! `Replay`) replays committed transactions in order and honours revoke
//! records (a revoke in transaction T hides copies from T and earlier,
//! `RevokeScope::ThisAndEarlier`).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;

use ccnvme::horae::{OrderedWrite, OrderingQueue};
use ccnvme::{Bio, BioFlags, Done};
use pcie_sim::HostAddr;
use tokio::sync::{Mutex, Notify};

use crate::error::FsError;
use crate::fs::{Ctx, Fs, Ino};
use crate::journal::format::{AreaSuper, Commit};
use crate::journal::log::{self, lay_out, log_blocks, End, Found, Replay, RevokeScope, Ring};
use crate::layout::BLOCK;

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
}

/// The journal.
pub(crate) struct Jbd {
    ring: Ring,
    horae: Option<Rc<OrderingQueue>>,
    st: RefCell<State>,
    commit_lock: Mutex<()>,
    wake_commit: Notify,
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
        Rc::new(Jbd {
            ring: Ring {
                start: s.area_start(0),
                blocks: s.area_blocks,
            },
            horae,
            st: RefCell::new(State {
                running: Running::default(),
                next_seq: seq,
                next_tid: 1,
                committed: 0,
                requested: 0,
                head: tail,
                head_seq: seq,
                tail,
                live: VecDeque::new(),
                journaled: BTreeSet::new(),
            }),
            commit_lock: Mutex::new(()),
            wake_commit: Notify::new(),
            committed: Notify::new(),
            stop: Cell::new(false),
        })
    }

    pub(crate) fn note_dirty(&self, b: u64, owners: &[Ino]) {
        let mut st = self.st.borrow_mut();
        st.running.blocks.insert(b);
        st.running.revokes.remove(&b);
        st.running.ordered.extend(owners.iter().copied());
    }

    /// True for HoraeFS.
    pub(crate) fn is_horae(&self) -> bool {
        self.horae.is_some()
    }

    /// Puts `ino`'s dirty data in the running transaction (ordered mode).
    pub(crate) fn order_data(&self, ino: Ino) {
        self.st.borrow_mut().running.ordered.insert(ino);
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

    /// The commit thread: commits whenever asked, until stopped.
    pub(crate) async fn commit_thread(self: Rc<Self>, fs: Rc<Fs>) {
        let ctx = Ctx::on(fs.profile.commit_core);
        loop {
            if self.stop.get() {
                return;
            }
            let want = {
                let st = self.st.borrow();
                st.requested > st.committed
            };
            if !want {
                self.wake_commit.notified().await;
                continue;
            }
            if self.commit(&fs, ctx).await.is_err() {
                fs.readonly.set(true);
                self.committed.notify_waiters();
                return;
            }
        }
    }

    /// Stops the commit thread.
    pub(crate) fn stop(&self) {
        self.stop.set(true);
        self.wake_commit.notify_one();
    }

    /// Asks the commit thread to commit the running transaction and waits
    /// until it is committed. The caller pays two context switches (wake
    /// the thread, be woken).
    pub(crate) async fn commit_and_wait(&self, fs: &Fs, ctx: Ctx) -> Result<(), FsError> {
        let target = {
            let mut st = self.st.borrow_mut();
            let empty = st.running.blocks.is_empty()
                && st.running.revokes.is_empty()
                && st.running.ordered.is_empty();
            let t = if empty { st.next_tid - 1 } else { st.next_tid };
            st.requested = st.requested.max(t);
            t
        };
        if self.st.borrow().committed >= target {
            return Ok(());
        }
        self.wake_commit.notify_one();
        loop {
            if self.st.borrow().committed >= target {
                break;
            }
            if fs.readonly.get() {
                return Err(FsError::Io("journal commit failed".into()));
            }
            self.committed.notified().await;
        }
        fs.cpu(ctx, fs.profile.context_switch).await;
        Ok(())
    }

    /// Commits the running transaction (run by the commit thread, or
    /// directly at sync and unmount).
    pub(crate) async fn commit(&self, fs: &Fs, ctx: Ctx) -> Result<(), FsError> {
        let _c = self.commit_lock.lock().await;
        // Freeze: no operation is half-way while the snapshot is taken.
        let frozen = fs.freeze().await;
        let (tid, running) = {
            let mut st = self.st.borrow_mut();
            let r = std::mem::take(&mut st.running);
            let tid = st.next_tid;
            st.next_tid += 1;
            (tid, r)
        };
        let snapshots: Vec<(u64, Box<[u8; BLOCK]>)> = running
            .blocks
            .iter()
            .filter_map(|b| fs.bufs.get(*b).map(|c| (*b, c.snapshot())))
            .collect();
        let mut data: Vec<(u64, Box<[u8; BLOCK]>)> = Vec::new();
        // Per data block: true if it overwrites live data in place (HoraeFS
        // tells the ordering layer, as it detects IPU from `BH_New`, Horae
        // 5.6.2): not allocated since the inode's last commit, or allocated
        // after being freed in this very transaction (its old owner keeps
        // it until this commits). Fresh blocks hold dead data, which a
        // Horae recovery may zero-fill.
        let mut in_place: Vec<bool> = Vec::new();
        for ino in &running.ordered {
            let st = fs.inodes.borrow().get(ino).cloned();
            if let Some(st) = st {
                // Every allocation since the last commit dirtied a bitmap
                // on the inode's behalf, so the inode is in `ordered`: this
                // takes each allocation in the transaction that commits it.
                let fresh = std::mem::take(&mut *st.new_blocks.borrow_mut());
                for (fb, page) in st.pages.dirty() {
                    if let Some(home) = Fs::bmap(&st, fb) {
                        data.push((home, page.snapshot()));
                        in_place.push(!fresh.contains(&home) || running.freed.contains(&home));
                        page.set_dirty(false);
                    }
                }
            }
        }
        drop(frozen);
        let revokes: Vec<u64> = running.revokes.into_iter().collect();
        if snapshots.is_empty() && revokes.is_empty() {
            if !data.is_empty() {
                fs.write_all(ctx, &data, BioFlags::NONE).await?;
            }
            self.finish(tid);
            return Ok(());
        }
        let seq = {
            let mut st = self.st.borrow_mut();
            let s = st.next_seq;
            st.next_seq += 1;
            s
        };
        fs.cycles(ctx, fs.profile.journal_block_cycles * snapshots.len() as u64)
            .await;
        let need = log_blocks(snapshots.len(), revokes.len()) + 1;
        self.make_room(fs, ctx, need).await?;
        // Lay the transaction out in the log, the commit block after it.
        let start = self.st.borrow().tail;
        let laid = lay_out(self.ring, start, seq, seq, &snapshots, &revokes);
        let log = laid.blocks;
        let commit = (
            self.ring.start + laid.end,
            Commit {
                seq,
                blocks: log.len() as u32,
            }
            .encode(),
        );
        let pos = self.ring.advance(laid.end, 1);
        match &self.horae {
            None => {
                // Ordered data first, then the log blocks, then the commit
                // record behind a flush, each an ordering point.
                if !data.is_empty() {
                    fs.write_all(ctx, &data, BioFlags::NONE).await?;
                }
                fs.write_all(ctx, &log, BioFlags::NONE).await?;
                let flags = if fs.profile.commit_fua {
                    BioFlags::PREFLUSH | BioFlags::FUA
                } else {
                    BioFlags::PREFLUSH
                };
                fs.write_all(ctx, &[commit], flags).await?;
            }
            Some(oq) => {
                // The log and the commit block are cleaned before reuse
                // (Horae 5.6.2): not in place.
                in_place.resize(data.len() + log.len(), false);
                let mut epoch1 = data;
                epoch1.extend(log);
                let mut started = self.horae_epoch(fs, oq, ctx, &epoch1, &in_place).await?;
                started.extend(self.horae_epoch(fs, oq, ctx, &[commit], &[false]).await?);
                fs.write_wait(ctx, started).await?;
                oq.flush(ctx.core).await?;
            }
        }
        {
            let mut st = self.st.borrow_mut();
            st.tail = pos;
            for (b, _) in &snapshots {
                st.journaled.insert(*b);
            }
            st.live.push_back(LiveTx {
                blocks: snapshots,
                revokes: revokes.clone(),
            });
        }
        self.finish(tid);
        Ok(())
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
    ) -> Result<Vec<(Done, HostAddr)>, FsError> {
        debug_assert_eq!(blocks.len(), in_place.len(), "one in-place flag per block");
        let writes: Vec<OrderedWrite> = blocks
            .iter()
            .zip(in_place)
            .map(|((b, _), ip)| OrderedWrite {
                lba: *b,
                len: 1,
                in_place: *ip,
            })
            .collect();
        let epoch = oq.append_writes(ctx.core, &writes).await?;
        let mut started = Vec::new();
        for (i, (b, data)) in blocks.iter().enumerate() {
            let page = fs.take_page_pub()?;
            let core = fs.machine.core(ctx.core % fs.machine.core_count().max(1))?;
            core.write_mem(page, &data[..]).await?;
            let id = epoch
                .entry(i as u32)
                .ok_or_else(|| FsError::Io("ordering queue epoch too short".into()))?;
            let done = oq.submit(ctx.core, id, &Bio::write(*b, vec![page])).await?;
            started.push((done, page));
        }
        Ok(started)
    }

    fn finish(&self, tid: u64) {
        let mut st = self.st.borrow_mut();
        st.committed = st.committed.max(tid);
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
            fs.flush(ctx).await?;
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
    /// position and sequence number after the last one.
    pub(crate) async fn recover(fs: &Fs, ctx: Ctx, jsb: &AreaSuper) -> Result<(u64, u64), FsError> {
        let ring = {
            let s = fs.sb.borrow();
            Ring {
                start: s.area_start(0),
                blocks: s.area_blocks,
            }
        };
        let found = log::scan(fs, ctx, ring, jsb.head, jsb.seq, End::CommitBlock).await?;
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
