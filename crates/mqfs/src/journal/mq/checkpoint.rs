//! Making room in a journal area: checkpointing its durable versions home
//! (skipping those another area holds newer), and draining every area.

use super::*;
use crate::journal::log::write_super;

impl MqJournal {
    /// Checkpoints until `need` log blocks fit in `area` under the
    /// watermark.
    pub(super) async fn make_room(&self, fs: &Fs, ctx: Ctx, area: &Area, need: u64) -> Result<(), FsError> {
        if need + 1 > area.ring().len() {
            return Err(FsError::NoSpace);
        }
        loop {
            let (used, live) = {
                let a = area.st.borrow();
                (area.ring().used(a.head, a.tail), a.live.len())
            };
            let limit = area.ring().len() * fs.profile.checkpoint_watermark as u64 / 100;
            if used + need <= limit.max(need + 1) {
                return Ok(());
            }
            if live == 0 {
                return Err(FsError::NoSpace);
            }
            if !self.checkpoint(fs, ctx).await? {
                // Nothing checkpointable yet (no I/O was issued, so no
                // wake-up can have been missed): wait for a transaction to
                // become durable.
                self.pending_notify.notified().await;
            }
        }
    }

    /// Checkpoints every area up to the durable prefix of transaction ids
    /// (ccNVMe 5.2, `docs/decisions.md` M6): the transactions below the lowest
    /// pending id, from all areas at once, newest version per block, then
    /// each area's superblock with its new head and `home_below`. Taking
    /// the areas together and only a prefix keeps an older copy of a block
    /// in one area from outliving a newer copy another area checkpointed.
    /// Returns false if nothing was checkpointable.
    pub(super) async fn checkpoint(&self, fs: &Fs, ctx: Ctx) -> Result<bool, FsError> {
        let _one = self.checkpointing.lock().await;
        let prefix = self.pending.borrow().iter().next().copied().unwrap_or(u64::MAX);
        let taken: Vec<(usize, Vec<LiveTx>)> = self
            .areas
            .iter()
            .enumerate()
            .map(|(i, area)| {
                let mut a = area.st.borrow_mut();
                let mut v = Vec::new();
                while a.live.front().is_some_and(|t| t.txid < prefix && t.durable.get()) {
                    if let Some(t) = a.live.pop_front() {
                        v.push(t);
                    }
                }
                (i, v)
            })
            .filter(|(_, v)| !v.is_empty())
            .collect();
        let Some(top) = taken.iter().flat_map(|(_, v)| v.iter().map(|t| t.txid)).max() else {
            return Ok(false);
        };
        // Newest version per home among the taken, unless a live
        // transaction holds a newer one (or the block was revoked).
        let mut newest: BTreeMap<u64, (u64, &[u8; BLOCK])> = BTreeMap::new();
        for t in taken.iter().flat_map(|(_, v)| v.iter()) {
            for (home, data) in &t.blocks {
                if newest.get(home).is_none_or(|(id, _)| *id < t.txid) {
                    newest.insert(*home, (t.txid, &**data));
                }
            }
        }
        let mut writes = Vec::new();
        for (home, (txid, data)) in &newest {
            let mut tree = self.tree(*home).borrow_mut();
            let Some(versions) = tree.get_mut(home) else {
                continue; // revoked
            };
            if versions.iter().any(|v| v.txid > *txid) {
                continue; // a newer copy is still in a log
            }
            for v in versions.iter_mut().filter(|v| v.txid == *txid) {
                v.state = VState::Chp;
            }
            writes.push((*home, Box::new(**data)));
        }
        if !writes.is_empty() {
            fs.write_all(ctx, &writes, BioFlags::NONE).await?;
            fs.flush(ctx).await?;
        }
        for (i, v) in &taken {
            let area = &self.areas[*i];
            let (end, seq) = v.last().map(|t| (t.end, t.seq + 1)).unwrap_or((1, 1));
            let jsb = AreaSuper {
                area: area.index,
                head: end,
                seq,
                home_below: top + 1,
            };
            write_super(fs, ctx, area.ring(), &jsb).await?;
            area.st.borrow_mut().head = end;
        }
        for t in taken.iter().flat_map(|(_, v)| v.iter()) {
            for (home, _) in &t.blocks {
                let mut tree = self.tree(*home).borrow_mut();
                if let Some(vs) = tree.get_mut(home) {
                    vs.retain(|v| v.txid > t.txid);
                    if vs.is_empty() {
                        tree.remove(home);
                    }
                }
            }
        }
        Ok(true)
    }

    /// Waits for every transaction, then checkpoints every area (unmount).
    pub(crate) async fn drain(&self, fs: &Fs, ctx: Ctx) -> Result<(), FsError> {
        while !self.pending.borrow().is_empty() {
            self.pending_notify.notified().await;
        }
        self.checkpoint(fs, ctx).await?;
        let home_below = fs.next_txid.get();
        for area in &self.areas {
            let _l = area.lock.lock().await;
            let jsb = {
                let a = area.st.borrow();
                AreaSuper {
                    area: area.index,
                    head: a.tail,
                    seq: a.next_seq,
                    home_below,
                }
            };
            write_super(fs, ctx, area.ring(), &jsb).await?;
        }
        Ok(())
    }
}
