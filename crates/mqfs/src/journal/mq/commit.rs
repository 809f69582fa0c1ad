//! Running one transaction, in named phases:
//!
//! 1. [`MqJournal::plan`]: room in the area (checkpointing if needed) and
//!    the layout of the copies, the JH and the revokes in the log
//!    ([`lay_out`]);
//! 2. [`MqJournal::submit`]: the blocks into host pages and one ccNVMe
//!    transaction on the caller's queue, REQ_TX, then the JH REQ_TX_COMMIT
//!    (ccNVMe 5.1), its doorbell rung in id order (`docs/decisions.md` M9);
//! 3. [`MqJournal::record`]: only once the transaction is committed
//!    (atomic), the area's tail and sequence number, its checkpoint queue
//!    and the version indexes take it;
//! 4. [`MqJournal::track`], [`MqJournal::wait`]: durability bookkeeping in
//!    the background, and the caller's wait for durability.
//!
//! An error in phases 1 and 2 leaves the journal as if the transaction had
//! never started (dropping the open transaction rolls the P-SQ tail back):
//! no sequence number is used up, no log space taken, nothing waits for it
//! at the front of the checkpoint queue and no index holds a version of
//! it, so later transactions and checkpoints go on.

use super::*;
use crate::journal::cc;
use crate::journal::log::{lay_out, log_blocks, LogBytes, Write};

/// A transaction laid out in its area's log, not submitted yet.
pub(super) struct Planned {
    /// Area sequence number.
    seq: u64,
    /// Log offset right after it.
    end: u64,
    /// Data written to its home.
    homes: Vec<Write>,
    /// Journaled (home, copy).
    copies: Vec<Write>,
    /// The log blocks but the JH (copies named by their index in
    /// `copies`).
    log: Vec<(u64, LogBytes)>,
    /// The JH (the last descriptor).
    jh: Write,
}

/// A submitted transaction: atomic, its pages still the device's.
pub(super) type Submitted = cc::CcTx;

impl MqJournal {
    /// Runs transaction `txid` of `items` and `revokes` on `area` (the
    /// caller holds the area's lock). The in-memory journal changes only
    /// if it is committed (see the module doc).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn run_tx(
        self: &Rc<Self>,
        fs: &Fs,
        ctx: Ctx,
        area: &Area,
        txid: u64,
        items: Vec<Item>,
        revokes: Vec<u64>,
        kind: SyncKind,
    ) -> Result<(), TxError> {
        let mut planned = self.plan(fs, ctx, area, txid, items, &revokes).await?;
        let sub = self.submit(fs, ctx, txid, &mut planned).await?;
        let durable = self.record(area, txid, planned);
        self.track(fs, txid, &sub, durable);
        if kind.atomic_only() {
            return Ok(());
        }
        self.wait(fs, txid, &sub).await.map_err(TxError::Committed)
    }

    /// Phase 1: room in `area` and the layout, from its tail.
    async fn plan(
        &self,
        fs: &Fs,
        ctx: Ctx,
        area: &Area,
        txid: u64,
        items: Vec<Item>,
        revokes: &[u64],
    ) -> Result<Planned, FsError> {
        let mut homes = Vec::new();
        let mut copies = Vec::new();
        for it in items {
            match it {
                Item::Home(home, data) => homes.push((home, data)),
                Item::Copy(home, data) => copies.push((home, data)),
            }
        }
        self.make_room(fs, ctx, area, log_blocks(copies.len(), revokes.len()))
            .await?;
        // A journal entry (its tag in the JH) for each copy; data written
        // home has none, as JBD2 builds none for ordered data.
        fs.cycles(ctx, fs.profile.journal_block_cycles * copies.len() as u64)
            .await;
        let (tail, seq) = {
            let a = area.st.borrow();
            (a.tail, a.next_seq)
        };
        let laid = lay_out(area.ring(), tail, seq, txid, &copies, revokes);
        let end = laid.end;
        let (log, jh) = laid.split_last();
        Ok(Planned {
            seq,
            end,
            homes,
            copies,
            log,
            jh,
        })
    }

    /// Phase 2: one ccNVMe transaction ([`cc::submit`]), its doorbell rung
    /// after every lower id's (global prefix rule). Takes the blocks out of
    /// `p` (what `record` needs stays).
    async fn submit(
        self: &Rc<Self>,
        fs: &Fs,
        ctx: Ctx,
        txid: u64,
        p: &mut Planned,
    ) -> Result<Submitted, FsError> {
        let me = self.clone();
        let wait_turn = async move {
            if me.opts.rule == RecoveryRule::GlobalPrefix {
                while me.turn.get() < txid {
                    me.turn_notify.notified().await;
                }
            }
        };
        let homes = std::mem::take(&mut p.homes);
        let log = std::mem::take(&mut p.log);
        cc::submit(fs, ctx, txid, homes, log, &p.copies, &p.jh, wait_turn).await
    }

    /// Phase 3: the committed transaction enters the area's log (tail,
    /// sequence number, checkpoint queue) and the version indexes, and
    /// the next id may ring. Returns its durability flag.
    fn record(&self, area: &Area, txid: u64, p: Planned) -> Rc<Cell<bool>> {
        let durable = Rc::new(Cell::new(false));
        for (home, _) in &p.copies {
            self.tree(*home)
                .borrow_mut()
                .entry(*home)
                .or_default()
                .push(Version {
                    txid,
                    state: VState::Log,
                });
        }
        {
            let mut a = area.st.borrow_mut();
            debug_assert_eq!(a.next_seq, p.seq, "the area lock serializes its transactions");
            a.next_seq = p.seq + 1;
            a.tail = p.end;
            a.live.push_back(LiveTx {
                txid,
                end: p.end,
                seq: p.seq,
                blocks: p.copies,
                durable: durable.clone(),
            });
        }
        self.pass_turn(txid);
        durable
    }

    /// Phase 4a: when the device reports the transaction durable (or
    /// failed), whether or not the caller waits: its pages back to the
    /// pool, its flag set, its id no longer pending, the frees it carried
    /// released. This is the transaction's completion callback (a bio's
    /// `end_io` in Linux): it runs in the completion's interrupt context,
    /// whose cost the driver's interrupt handler already charges, so no
    /// thread sleeps for it and none is woken (only a caller that waits
    /// pays a wake-up, in [`MqJournal::wait`]).
    fn track(self: &Rc<Self>, fs: &Fs, txid: u64, sub: &Submitted, durable_flag: Rc<Cell<bool>>) {
        let me = self.clone();
        let durable = sub.handle.durable.clone();
        let recycled = sub.pages.clone();
        let pool: Rc<RefCell<Vec<HostAddr>>> = fs.pages.clone();
        fs.machine.sim().spawn(async move {
            let s = durable.wait_raw().await;
            pool.borrow_mut().extend(recycled);
            if s.is_success() {
                durable_flag.set(true);
            }
            me.pending.borrow_mut().remove(&txid);
            if s.is_success() {
                me.release_frees();
            }
            me.pending_notify.notify_waiters();
        });
    }

    /// Phase 4b: waits until the transaction is durable and, under the
    /// global prefix rule, every lower id too (recovery keeps a prefix).
    async fn wait(&self, fs: &Fs, txid: u64, sub: &Submitted) -> Result<(), FsError> {
        let s = fs.vol.first().wait(sub.core, &sub.handle.durable).await;
        if !s.is_success() {
            fs.readonly.set(true);
            return Err(FsError::Driver(ccnvme::DriverError::Command(s)));
        }
        if self.opts.rule == RecoveryRule::GlobalPrefix {
            self.wait_durable_below(txid).await;
        }
        Ok(())
    }
}

/// How a transaction failed.
#[derive(Debug)]
pub(super) enum TxError {
    /// Before it committed: the journal is as if it never started.
    NotCommitted(FsError),
    /// After it committed (the device failed it): the file system is
    /// read-only.
    Committed(FsError),
}

impl From<FsError> for TxError {
    fn from(e: FsError) -> Self {
        TxError::NotCommitted(e)
    }
}

/// A page lock held across I/O (shadow paging off).
pub(super) struct HeldLock {
    _guard: tokio::sync::OwnedMutexGuard<()>,
}

impl HeldLock {
    pub(super) fn take(block: Rc<crate::cache::CachedBlock>) -> Option<HeldLock> {
        // Under the gate no operation holds a page lock, so this succeeds.
        let guard = block.lock.clone().try_lock_owned().ok()?;
        Some(HeldLock { _guard: guard })
    }
}
