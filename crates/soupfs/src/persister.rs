//! The persister (paper L213-L223): it drains the dirty inodes' operation
//! lists, oldest operation first, each after the operations its `after`
//! edges name, and writes each into the consistent view in the order
//! the paper's dependency rules require (L117-L149):
//!
//! - diradd (Fig. 5): the inode (①), the name lines (②), the dentry (③)
//!   and their bitmap bits, then one "persisted before" edge, then the
//!   8-byte publish of the dentry in its bucket (④), then the parent's
//!   mtime (⑤). A diradd that replaces a dentry publishes the new one in
//!   the old one's place with the same single pointer, then reclaims.
//! - dirrem (Fig. 6): the 8-byte unpublish (①), then the parent (②) and
//!   the frees of the name, the dentry and, with no name left in either
//!   view, the inode and its pages (③-⑤).
//! - sizechg: allocations, data lines and index entries, one edge, then
//!   root and size (one line: root stored first), one edge, then the
//!   reclaim of blocks past a smaller size.
//! - attrchg: the inode's head word and mtime.
//!
//! It holds the file-system lock for one operation at a time.

use fsapi::Ctx;
use pcie_sim::Core;

use crate::error::FsError;
use crate::fs::SoupFs;
use crate::layout::{
    bucket_of, dentry_meta, words_to_line, InodeLine, Kind, D_CNEXT, I_MTIME, I_NLINK, I_PARENT, I_ROOT,
    I_SIZE, LINE, NAME_PER_LINE, PAGE,
};
use crate::pm::Batch;
use crate::state::{Dentry, Ino, Op, OpKind, State};

/// Stores the bitmap word for `addr` if its bit (or page) changes.
async fn mark(b: &mut Batch<'_>, st: &mut State, addr: u64, page: bool, set: bool) -> Result<(), FsError> {
    if let Some((w, v)) = st.alloc.mark(addr, page, set) {
        b.store_word(w, v).await?;
    }
    Ok(())
}

/// Writes the inode line (and zeroes a directory's bucket page) the first
/// time the consistent view needs it, from the consistent shadow.
async fn ensure_init(b: &mut Batch<'_>, st: &mut State, ino: Ino) -> Result<(), FsError> {
    let i = st.inode(ino)?;
    if i.cons.init {
        return Ok(());
    }
    let (kind, root) = (i.kind, i.root);
    let line = InodeLine {
        kind,
        perm: i.perm,
        nlink: i.cons.nlink,
        size: i.cons.size,
        root: i.cons.root,
        parent: i.cons.parent,
        mtime: i.mtime,
    };
    if kind == Kind::Dir {
        let zero = [0u8; 64];
        for l in 0..PAGE / LINE {
            b.store(root + l * LINE, &zero).await?;
        }
        mark(b, st, root, true, true).await?;
    }
    b.store(ino, &line.encode()).await?;
    mark(b, st, ino, false, true).await?;
    st.inode_mut(ino)?.cons.init = true;
    Ok(())
}

/// The word that points at dentry `d` in the consistent view (the bucket
/// head or its predecessor's consistent next), and what follows `d`.
fn slot_of(st: &State, dir: Ino, d: &Dentry) -> Result<(u64, u64, usize), FsError> {
    let di = st.inode(dir)?;
    let bucket = bucket_of(d.hash);
    let list = di.cons.buckets.get(&bucket).ok_or(FsError::Corrupt {
        addr: d.addr,
        what: "dentry not in the consistent view",
    })?;
    let idx = list.iter().position(|&a| a == d.addr).ok_or(FsError::Corrupt {
        addr: d.addr,
        what: "dentry not in the consistent view",
    })?;
    let slot = if idx == 0 {
        di.root + 8 * bucket
    } else {
        list[idx - 1] + D_CNEXT
    };
    Ok((slot, list.get(idx + 1).copied().unwrap_or(0), idx))
}

/// Frees a dentry and its name lines (bitmap and free list).
async fn free_dentry(b: &mut Batch<'_>, st: &mut State, d: &Dentry) -> Result<(), FsError> {
    for &l in d.names.iter().chain(std::iter::once(&d.addr)) {
        mark(b, st, l, false, false).await?;
        st.alloc.free_line(l);
    }
    Ok(())
}

/// Drops one consistent name of `ino`; frees it once no name is left in
/// either view and no diradd of it is pending.
async fn drop_link(b: &mut Batch<'_>, st: &mut State, ino: Ino) -> Result<(), FsError> {
    let i = st.inode_mut(ino)?;
    i.cons.nlink = i.cons.nlink.saturating_sub(1);
    let (init, n) = (i.cons.init, i.cons.nlink);
    if init {
        b.store_word(ino + I_NLINK, n).await?;
    }
    let i = st.inode(ino)?;
    if i.nlink > 0 || i.cons.nlink > 0 || !i.adds.is_empty() {
        return Ok(());
    }
    let Some(i) = st.inodes.remove(&ino) else {
        return Ok(());
    };
    st.dirty.remove(&ino);
    let mut pages: Vec<u64> = i.blocks.clone();
    if i.root != 0 {
        pages.push(i.root);
    }
    for p in pages {
        mark(b, st, p, true, false).await?;
        st.alloc.free_page(p);
    }
    mark(b, st, ino, false, false).await?;
    st.alloc.free_line(ino);
    Ok(())
}

async fn dir_add(
    b: &mut Batch<'_>,
    st: &mut State,
    dir: Ino,
    seq: u64,
    d: &Dentry,
    replaces: Option<&Dentry>,
) -> Result<(), FsError> {
    let bucket = bucket_of(d.hash);
    ensure_init(b, st, dir).await?;
    let (slot, cnext) = match replaces {
        Some(y) => {
            let (s, n, _) = slot_of(st, dir, y)?;
            (s, n)
        }
        None => {
            let di = st.inode(dir)?;
            let head = di.cons.buckets.get(&bucket).and_then(|l| l.first()).copied();
            (di.root + 8 * bucket, head.unwrap_or(0))
        }
    };
    if b.faults.publish_before_init {
        b.publish(slot, d.addr).await?;
    }
    // ① the inode: one more consistent name, persisted before the dentry.
    let i = st.inode_mut(d.ino)?;
    i.cons.nlink += 1;
    let moved_dir = i.kind == Kind::Dir && i.cons.parent != dir;
    if moved_dir {
        i.cons.parent = dir;
    }
    let (init, nlink) = (i.cons.init, i.cons.nlink);
    if init {
        b.store_word(d.ino + I_NLINK, nlink).await?;
        if moved_dir {
            b.store_word(d.ino + I_PARENT, dir).await?;
        }
    } else {
        ensure_init(b, st, d.ino).await?;
    }
    // ② the name lines.
    let bytes = d.name.as_bytes();
    for (k, &l) in d.names.iter().enumerate() {
        let mut words = [0u64; 8];
        words[0] = d.names.get(k + 1).copied().unwrap_or(0);
        let mut line = words_to_line(&words);
        let chunk = &bytes[(k * NAME_PER_LINE).min(bytes.len())..((k + 1) * NAME_PER_LINE).min(bytes.len())];
        line[8..8 + chunk.len()].copy_from_slice(chunk);
        b.store(l, &line).await?;
        mark(b, st, l, false, true).await?;
    }
    // ③ the dentry.
    let first = d.names.first().copied().unwrap_or(0);
    let words = [d.ino, first, cnext, dentry_meta(d.hash, bytes.len()), 0, 0, 0, 0];
    b.store(d.addr, &words_to_line(&words)).await?;
    mark(b, st, d.addr, false, true).await?;
    b.persist().await?;
    // ④ the publish.
    if !b.faults.publish_before_init {
        b.publish(slot, d.addr).await?;
    }
    let di = st.inode_mut(dir)?;
    let list = di.cons.buckets.entry(bucket).or_default();
    match replaces {
        Some(y) => {
            if let Some(p) = list.iter().position(|&a| a == y.addr) {
                list[p] = d.addr;
            }
        }
        None => list.insert(0, d.addr),
    }
    // ⑤ the parent.
    let mtime = di.mtime;
    b.store_word(dir + I_MTIME, mtime).await?;
    let i = st.inode_mut(d.ino)?;
    i.adds.retain(|&(a, s)| (a, s) != (dir, seq));
    if let Some(y) = replaces {
        free_dentry(b, st, y).await?;
        drop_link(b, st, y.ino).await?;
    }
    b.persist().await
}

async fn dir_rem(b: &mut Batch<'_>, st: &mut State, dir: Ino, d: &Dentry) -> Result<(), FsError> {
    let (slot, next, idx) = slot_of(st, dir, d)?;
    if b.faults.free_before_unpublish {
        free_dentry(b, st, d).await?;
        b.persist().await?;
    }
    // ① the unpublish.
    b.publish(slot, next).await?;
    let di = st.inode_mut(dir)?;
    if let Some(l) = di.cons.buckets.get_mut(&bucket_of(d.hash)) {
        l.remove(idx);
    }
    // ② the parent, ③-⑤ the frees.
    let mtime = di.mtime;
    b.store_word(dir + I_MTIME, mtime).await?;
    if !b.faults.free_before_unpublish {
        free_dentry(b, st, d).await?;
    }
    drop_link(b, st, d.ino).await?;
    b.persist().await
}

async fn size_chg(b: &mut Batch<'_>, st: &mut State, ino: Ino) -> Result<(), FsError> {
    ensure_init(b, st, ino).await?;
    let i = st.inode_mut(ino)?;
    let n = i.size.div_ceil(PAGE) as usize;
    let old_n = i.cons.size.div_ceil(PAGE) as usize;
    let (root, size) = (i.root, i.size);
    let blocks: Vec<u64> = i.blocks.iter().take(n).copied().collect();
    for l in std::mem::take(&mut i.dirty_lines) {
        b.add_dirty(l);
    }
    for k in old_n.min(n)..n {
        b.add_dirty(root + 8 * k as u64);
    }
    if n > 0 {
        mark(b, st, root, true, true).await?;
    }
    for &blk in &blocks {
        mark(b, st, blk, true, true).await?;
    }
    b.persist().await?;
    let cons_root = st.inode(ino)?.cons.root;
    if n > 0 && cons_root != root {
        b.store_word(ino + I_ROOT, root).await?;
    }
    b.store_word(ino + I_SIZE, size).await?;
    b.persist().await?;
    let i = st.inode_mut(ino)?;
    i.cons.size = size;
    if n > 0 {
        i.cons.root = root;
    }
    let gone: Vec<u64> = i.blocks.drain(n.min(i.blocks.len())..).collect();
    for blk in gone {
        mark(b, st, blk, true, false).await?;
        st.alloc.free_page(blk);
    }
    if !b.is_clean() {
        b.persist().await?;
    }
    Ok(())
}

async fn attr_chg(b: &mut Batch<'_>, st: &mut State, ino: Ino) -> Result<(), FsError> {
    ensure_init(b, st, ino).await?;
    let i = st.inode(ino)?;
    let (head, mtime) = (crate::layout::inode_head(i.kind, i.perm), i.mtime);
    b.store_word(ino, head).await?;
    b.store_word(ino + I_MTIME, mtime).await?;
    b.persist().await
}

async fn exec(b: &mut Batch<'_>, st: &mut State, ino: Ino, op: &Op) -> Result<(), FsError> {
    match &op.kind {
        OpKind::DirAdd { d, replaces } => dir_add(b, st, ino, op.seq, d, replaces.as_ref()).await,
        OpKind::DirRem { d } => dir_rem(b, st, ino, d).await,
        OpKind::SizeChg => size_chg(b, st, ino).await,
        OpKind::AttrChg => attr_chg(b, st, ino).await,
    }
}

impl SoupFs {
    /// Persists one operation so that `ino`'s ops up to `seq` progress;
    /// false when there is none left.
    async fn persist_step(&self, core: &Core, ino: Ino, seq: u64) -> Result<bool, FsError> {
        let mut st = self.lock().await;
        let Some(target) = st.runnable(ino, seq) else {
            return Ok(false);
        };
        let Some(op) = st.inode_mut(target)?.ops.pop_front() else {
            return Ok(false);
        };
        if st.inode(target)?.ops.is_empty() {
            st.dirty.remove(&target);
        }
        let mut b = Batch::new(&self.inner.pmem, core, self.inner.faults);
        exec(&mut b, &mut st, target, &op).await?;
        st.stats.ops += 1;
        st.stats.edges += b.edges;
        Ok(true)
    }

    /// Persists `ino`'s operations up to `seq` (and what they follow).
    pub(crate) async fn persist_upto(&self, core: &Core, ino: Ino, seq: u64) -> Result<(), FsError> {
        while self.persist_step(core, ino, seq).await? {}
        Ok(())
    }

    /// One persister round: every pending operation, oldest first.
    pub(crate) async fn persist_round(&self, core: &Core) -> Result<(), FsError> {
        let mut any = false;
        loop {
            let next = self.lock().await.oldest_dirty();
            let Some(ino) = next else { break };
            any = true;
            self.persist_upto(core, ino, u64::MAX).await?;
        }
        if any {
            self.lock().await.stats.rounds += 1;
        }
        Ok(())
    }

    /// `sync`: persists everything now.
    pub async fn sync(&self, ctx: Ctx) -> Result<(), FsError> {
        self.persist_round(&self.core(ctx)?).await
    }

    /// `fsync`: persists the file's own pending operations, then the
    /// pending diradds that make it reachable: its own (every name) and,
    /// up the tree, those of every directory holding one of its names and
    /// of their ancestors.
    pub async fn fsync(&self, ctx: Ctx, ino: Ino) -> Result<(), FsError> {
        let core = &self.core(ctx)?;
        self.lock().await.inode(ino)?;
        self.persist_upto(core, ino, u64::MAX).await?;
        let mut todo = vec![ino];
        let mut seen = std::collections::BTreeSet::new();
        while let Some(at) = todo.pop() {
            if !seen.insert(at) {
                continue;
            }
            let adds = {
                let st = self.lock().await;
                let Some(i) = st.inodes.get(&at) else { continue };
                if at != st.root {
                    if i.kind == Kind::Dir {
                        todo.push(i.parent);
                    } else {
                        todo.extend(
                            st.inodes
                                .iter()
                                .filter(|(_, d)| d.entries.values().any(|e| e.ino == at))
                                .map(|(&d, _)| d),
                        );
                    }
                }
                i.adds.clone()
            };
            for (d, s) in adds {
                self.persist_upto(core, d, s).await?;
            }
        }
        Ok(())
    }
}
