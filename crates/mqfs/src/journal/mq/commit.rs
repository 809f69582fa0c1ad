//! Running one transaction: snapshot taken, blocks written as one ccNVMe
//! transaction behind its journal description block, versions indexed,
//! waits for atomicity or durability.

use super::*;

impl MqJournal {
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
    ) -> Result<(), FsError> {
        let copies = items.iter().filter(|i| matches!(i, Item::Copy(..))).count();
        // One descriptor per TAGS_PER_DESC copies; the last is the JH.
        let ndesc = copies.div_ceil(TAGS_PER_DESC).max(1);
        let nrev = revokes.len().div_ceil(REVOKES_PER_BLOCK);
        let need = (ndesc + copies + nrev) as u64;
        self.make_room(fs, ctx, area, need).await?;
        fs.cycles(ctx, fs.profile.journal_block_cycles * items.len() as u64)
            .await;
        // Lay out: [descriptor, its copies] per group of TAGS_PER_DESC
        // copies (the last descriptor is the JH, the commit), then revokes.
        let (start_pos, seq) = {
            let mut a = area.st.borrow_mut();
            let seq = a.next_seq;
            a.next_seq += 1;
            (a.tail, seq)
        };
        let mut writes: Vec<(u64, Box<[u8; BLOCK]>)> = Vec::new();
        let mut homes: Vec<(u64, Box<[u8; BLOCK]>)> = Vec::new();
        let mut copy_items = Vec::new();
        for it in items {
            match it {
                Item::Home(home, data) => homes.push((home, data)),
                Item::Copy(home, data) => copy_items.push((home, data)),
            }
        }
        let mut journaled = Vec::new();
        let mut pos = start_pos;
        let mut jh_pos = start_pos;
        let mut tags = Vec::new();
        let mut groups = copy_items.chunks(TAGS_PER_DESC).peekable();
        if groups.peek().is_none() {
            pos = area.advance(pos, 1);
        }
        while let Some(group) = groups.next() {
            let desc_pos = pos;
            pos = area.advance(pos, 1);
            tags = Vec::with_capacity(group.len());
            for (home, data) in group {
                tags.push(Tag {
                    home: *home,
                    journal: pos,
                    crc: crc(&data[..]),
                });
                writes.push((area.start + pos, data.clone()));
                journaled.push((*home, data.clone()));
                pos = area.advance(pos, 1);
            }
            if groups.peek().is_some() {
                let d = Descriptor {
                    seq,
                    txid,
                    last: false,
                    tags: std::mem::take(&mut tags),
                };
                writes.push((area.start + desc_pos, d.encode()));
            } else {
                jh_pos = desc_pos;
            }
        }
        for chunk in revokes.chunks(REVOKES_PER_BLOCK) {
            writes.push((
                area.start + pos,
                Revoke {
                    seq,
                    blocks: chunk.to_vec(),
                }
                .encode(),
            ));
            pos = area.advance(pos, 1);
        }
        let jh = Descriptor {
            seq,
            txid,
            last: true,
            tags,
        }
        .encode();
        let durable_flag = Rc::new(Cell::new(false));
        {
            let mut a = area.st.borrow_mut();
            a.tail = pos;
            a.live.push_back(LiveTx {
                txid,
                end: pos,
                seq,
                blocks: journaled.iter().map(|(h, d)| (*h, d.clone())).collect(),
                durable: durable_flag.clone(),
            });
        }
        for (home, _) in &journaled {
            self.tree(*home)
                .borrow_mut()
                .entry(*home)
                .or_default()
                .push(Version {
                    txid,
                    state: VState::Log,
                });
        }
        // Submit: blocks REQ_TX, then the JH REQ_TX_COMMIT.
        let core = ctx.core % fs.machine.core_count().max(1);
        let cpu = fs.machine.core(core)?;
        // One command per block (the convention Table 1 counts), unless
        // that would not fit a transaction.
        let fits = homes.len() + writes.len() < fs.dev.max_tx_commands();
        let per_cmd = if fits {
            1
        } else {
            (fs.dev.info().max_transfer / BLOCK as u64).max(1) as usize
        };
        let mut runs = runs_of(homes, per_cmd);
        let copies = runs_of(writes, per_cmd);
        // A transaction holds a bounded number of commands; home writes past
        // that go out first, FUA, and the transaction waits for them (they
        // are new blocks or fsync data, invisible until it commits).
        let room = fs.dev.max_tx_commands().saturating_sub(copies.len() + 1);
        if runs.len() > room {
            let early: Vec<(u64, Box<[u8; BLOCK]>)> = runs.split_off(room).into_iter().flatten().collect();
            fs.write_all(ctx, &early, BioFlags::FUA).await?;
        }
        let mut pages: Vec<HostAddr> = Vec::new();
        let mut tx = fs.dev.begin_tx(core, TxId(txid)).await?;
        for run in runs.iter().chain(copies.iter()) {
            let mut bio_pages = Vec::with_capacity(run.len());
            for (_, data) in run {
                let page = fs.take_page_pub()?;
                cpu.write_mem(page, &data[..]).await?;
                pages.push(page);
                bio_pages.push(page);
            }
            fs.dev.tx_add(&mut tx, &Bio::write(run[0].0, bio_pages)).await?;
        }
        let jh_page = fs.take_page_pub()?;
        cpu.write_mem(jh_page, &jh[..]).await?;
        pages.push(jh_page);
        let me = self.clone();
        let wait_turn = async move {
            if me.opts.rule == RecoveryRule::GlobalPrefix {
                while me.turn.get() < txid {
                    me.turn_notify.notified().await;
                }
            }
        };
        let h = tx
            .commit_after(&Bio::write(area.start + jh_pos, vec![jh_page]), wait_turn)
            .await?;
        if self.turn.get() == txid {
            self.turn.set(txid + 1);
            self.turn_notify.notify_waiters();
        }
        // Durability bookkeeping runs whether or not the caller waits.
        let me = self.clone();
        let dev = fs.dev.clone();
        let durable = h.durable.clone();
        let recycled = pages;
        let pool: Rc<RefCell<Vec<HostAddr>>> = fs.pages.clone();
        fs.machine.sim().spawn(async move {
            let s = dev.wait(core, &durable).await;
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
        if kind.atomic_only() {
            return Ok(());
        }
        let s = fs.dev.wait(core, &h.durable).await;
        if !s.is_success() {
            fs.readonly.set(true);
            return Err(FsError::Driver(ccnvme::DriverError::Command(s)));
        }
        if self.opts.rule == RecoveryRule::GlobalPrefix {
            // Every lower id durable too: recovery keeps a prefix.
            loop {
                let lowest = self.pending.borrow().iter().next().copied();
                match lowest {
                    Some(l) if l < txid => self.pending_notify.notified().await,
                    _ => break,
                }
            }
        }
        Ok(())
    }
}

/// Sorts `blocks` and groups runs of consecutive block numbers, at most
/// `max` blocks a run.
#[allow(clippy::type_complexity)]
fn runs_of(mut blocks: Vec<(u64, Box<[u8; BLOCK]>)>, max: usize) -> Vec<Vec<(u64, Box<[u8; BLOCK]>)>> {
    blocks.sort_by_key(|(b, _)| *b);
    let mut out: Vec<Vec<(u64, Box<[u8; BLOCK]>)>> = Vec::new();
    for (b, d) in blocks {
        match out.last_mut() {
            Some(run) if run.len() < max && run.last().is_some_and(|(p, _)| p + 1 == b) => run.push((b, d)),
            _ => out.push(vec![(b, d)]),
        }
    }
    out
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
