//! The index operations of an indexed directory on its blocks: probe,
//! continuation, conversion and splits (Linux `fs/ext4/namei.c`), with the
//! format and pure algorithms in [`crate::htree`].
//!
//! A conversion or split changes several blocks at once (root, node, old
//! and new leaf). It first grows the directory by its new blocks, each
//! written as an empty entry block and the inode written with the new
//! size, so a crash after that point leaves unreferenced empty blocks and
//! no lost entry; then it takes the page locks of every block it changes
//! (in block order), re-reads them under the locks, and rewrites them all
//! with no suspension point in between, so no commit sees half a split.
//! Every changed block is recorded for the directory and the entry's
//! inode as any directory block ([`Fs::dirtied_dir`]): in the journaled
//! modes they are then committed together (JBD2's one running
//! transaction in `classic` and `horae`, as ext4's split is one handle;
//! in `mq`, the entanglement closure of `MqJournal::entangled`, since
//! the directory owns all of them), so no fsync commits a leaf without
//! the index that reaches its moved entries.

use std::rc::Rc;

use tokio::sync::OwnedMutexGuard;

use crate::cache::CachedBlock;
use crate::error::FsError;
use crate::fs::{Ctx, Fs, InodeState};
use crate::htree::{
    by_hash, continues, decode_dx_node, decode_dx_root, encode_dx_node, encode_dx_root, find, split_point,
    DxEntry, DxRoot, NODE_LIMIT, ROOT_LIMIT,
};
use crate::layout::{decode_dir_block, encode_dir_block, DirEntry, BLOCK, FLAG_INDEX};

/// The path a hash takes from the root to a leaf (ext4's `dx_frame`s).
pub(crate) struct Probe {
    /// The root as read.
    root: DxRoot,
    /// The position taken in the root.
    root_at: usize,
    /// With two levels: the node's logical block, its entries and the
    /// position taken in it.
    node: Option<(u32, Vec<DxEntry>, usize)>,
    /// The leaf's logical block.
    pub(crate) leaf: u32,
}

/// Blocks held under their page locks.
struct Held {
    order: Vec<u64>,
    bufs: Vec<(Rc<CachedBlock>, OwnedMutexGuard<()>)>,
}

impl Held {
    /// Held block `b`.
    fn get(&self, b: u64) -> &CachedBlock {
        match self.order.binary_search(&b) {
            Ok(i) => &self.bufs[i].0,
            Err(_) => unreachable!("block {b} is among the locked ones"),
        }
    }
}

impl Fs {
    /// Reads the index from the root down to the leaf that covers `hash`
    /// (`dx_probe`), charging `dirent_cycles` per binary-search probe.
    pub(crate) async fn dx_probe(&self, ctx: Ctx, dir: &InodeState, hash: u32) -> Result<Probe, FsError> {
        let b = Fs::dir_block(dir, 0)?;
        let root = decode_dx_root(&self.meta(ctx, b).await?.data()[..])?;
        let (root_at, probes) = find(&root.entries, hash);
        let mut cycles = probes as u64;
        let child = root.entries[root_at];
        let (node, leaf) = if root.levels == 0 {
            (None, child.block)
        } else {
            let entries = self.read_node(ctx, dir, child).await?;
            let (at, probes) = find(&entries, hash);
            cycles += probes as u64;
            let leaf = entries[at].block;
            (Some((child.block, entries, at)), leaf)
        };
        self.cycles(ctx, self.profile.cpu.dirent_cycles * cycles).await;
        Ok(Probe {
            root,
            root_at,
            node,
            leaf,
        })
    }

    /// The dx_node that root entry `e` points at.
    async fn read_node(&self, ctx: Ctx, dir: &InodeState, e: DxEntry) -> Result<Vec<DxEntry>, FsError> {
        if e.block == 0 {
            return Err(FsError::Corrupt(format!(
                "directory {}: index points at its root",
                dir.ino
            )));
        }
        let b = Fs::dir_block(dir, e.block)?;
        decode_dx_node(&self.meta(ctx, b).await?.data()[..], e.hash)
    }

    /// Moves `p` to the next leaf if a search for `hash` continues there
    /// (`ext4_htree_next_block`: the next index entry, at the node's level
    /// or, past the node's end, the root's, starts with `hash`). False at
    /// the end of the run.
    pub(crate) async fn dx_next(
        &self,
        ctx: Ctx,
        dir: &InodeState,
        p: &mut Probe,
        hash: u32,
    ) -> Result<bool, FsError> {
        if let Some((_, entries, at)) = &mut p.node {
            if let Some(next) = entries.get(*at + 1) {
                if !continues(next.hash, hash) {
                    return Ok(false);
                }
                *at += 1;
                p.leaf = next.block;
                return Ok(true);
            }
        }
        let Some(next) = p.root.entries.get(p.root_at + 1).copied() else {
            return Ok(false);
        };
        if !continues(next.hash, hash) {
            return Ok(false);
        }
        p.root_at += 1;
        if p.root.levels == 0 {
            p.leaf = next.block;
        } else {
            let entries = self.read_node(ctx, dir, next).await?;
            p.leaf = entries[0].block;
            p.node = Some((next.block, entries, 0));
        }
        Ok(true)
    }

    /// Grows `dir` by `n` blocks, each an empty entry block, and writes
    /// the inode: their logical and device blocks. On `NoSpace` part way,
    /// the blocks already added stay (empty, unreferenced: harmless).
    async fn dir_grow(
        &self,
        ctx: Ctx,
        dir: &InodeState,
        child: Option<&InodeState>,
        n: usize,
    ) -> Result<Vec<(u32, u64)>, FsError> {
        let mut out = Vec::with_capacity(n);
        let mut failed = None;
        for _ in 0..n {
            let fb = (dir.inode.borrow().size / BLOCK as u64) as u32;
            let b = match self.map_new(ctx, dir, fb).await {
                Ok(b) => b,
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            };
            let buf = self.meta_new(b);
            {
                let _g = buf.lock.lock().await;
                buf.modify().copy_from_slice(&encode_dir_block(&[])?[..]);
            }
            dir.inode.borrow_mut().size += BLOCK as u64;
            self.dirtied_dir(b, dir, child);
            out.push((fb, b));
        }
        if !out.is_empty() {
            self.write_inode(ctx, dir).await?;
        }
        match failed {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Takes the page locks of `blocks` in block order.
    async fn lock_all(&self, ctx: Ctx, blocks: &[u64]) -> Result<Held, FsError> {
        let mut order: Vec<u64> = blocks.to_vec();
        order.sort_unstable();
        order.dedup();
        let mut bufs = Vec::with_capacity(order.len());
        for &b in &order {
            let buf = self.meta(ctx, b).await?;
            let g = buf.lock.clone().lock_owned().await;
            bufs.push((buf, g));
        }
        Ok(Held { order, bufs })
    }

    /// Records the blocks of one conversion or split, each for the
    /// directory and the entry's inode ([`Fs::dirtied_dir`]). In the `mq`
    /// mode the directory's unsynced set then holds them all, so the
    /// journal's entanglement closure (`MqJournal::entangled`) commits
    /// them together whichever inode's fsync takes one of them.
    fn dirtied_split(&self, blocks: &[u64], dir: &InodeState, child: Option<&InodeState>) {
        for &b in blocks {
            self.dirtied_dir(b, dir, child);
        }
    }

    /// Converts the full one-block linear `dir` to an indexed one
    /// (`make_indexed_dir`): block 0 becomes the root, its entries split
    /// by hash into two new leaves.
    pub(crate) async fn make_indexed(
        &self,
        ctx: Ctx,
        dir: &InodeState,
        child: Option<&InodeState>,
    ) -> Result<(), FsError> {
        let new = self.dir_grow(ctx, dir, child, 2).await?;
        let ((fb1, b1), (fb2, b2)) = (new[0], new[1]);
        let b0 = Fs::dir_block(dir, 0)?;
        let blocks = [b0, b1, b2];
        let held = self.lock_all(ctx, &blocks).await?;
        let entries = decode_dir_block(&held.get(b0).data()[..])?;
        let dot = entries.iter().find(|e| e.name == b".").map(|e| e.ino);
        let dotdot = entries.iter().find(|e| e.name == b"..").map(|e| e.ino);
        let (Some(dot), Some(dotdot)) = (dot, dotdot) else {
            return Err(FsError::Corrupt(format!(
                "directory {} without \".\" or \"..\"",
                dir.ino
            )));
        };
        let rest: Vec<DirEntry> = entries
            .into_iter()
            .filter(|e| e.name != b"." && e.name != b"..")
            .collect();
        if rest.len() < 2 {
            return Err(FsError::Corrupt(format!(
                "directory {}: a full block of under two entries",
                dir.ino
            )));
        }
        let sorted = by_hash(self.sb.borrow().hash_seed, rest);
        let (cut, hash2) = split_point(&sorted);
        let (low, high): (Vec<DirEntry>, Vec<DirEntry>) = {
            let mut low: Vec<DirEntry> = sorted.into_iter().map(|(_, e)| e).collect();
            let high = low.split_off(cut);
            (low, high)
        };
        let root = DxRoot {
            dot,
            dotdot,
            levels: 0,
            entries: vec![
                DxEntry { hash: 0, block: fb1 },
                DxEntry {
                    hash: hash2,
                    block: fb2,
                },
            ],
        };
        let leaf1 = encode_dir_block(&low)?;
        let leaf2 = encode_dir_block(&high)?;
        held.get(b0).modify().copy_from_slice(&encode_dx_root(&root)[..]);
        held.get(b1).modify().copy_from_slice(&leaf1[..]);
        held.get(b2).modify().copy_from_slice(&leaf2[..]);
        dir.inode.borrow_mut().flags |= FLAG_INDEX;
        drop(held);
        self.dirtied_split(&blocks, dir, child);
        self.write_inode(ctx, dir).await
    }

    /// Splits the full leaf `p` leads to (`do_split`), first splitting
    /// its full node or adding the second level (`ext4_dx_add_entry`).
    /// `NoSpace` when both levels are full (ext4's "Directory index
    /// full!").
    pub(crate) async fn dx_split(
        &self,
        ctx: Ctx,
        dir: &InodeState,
        p: &Probe,
        child: Option<&InodeState>,
    ) -> Result<(), FsError> {
        let root_full = p.root.entries.len() >= ROOT_LIMIT;
        let parent_full = match &p.node {
            Some((_, e, _)) => e.len() >= NODE_LIMIT,
            None => root_full,
        };
        // Two levels full (a root full at one level gets a second).
        if parent_full && p.node.is_some() && root_full {
            return Err(FsError::NoSpace);
        }
        let new = self.dir_grow(ctx, dir, child, 1 + parent_full as usize).await?;
        let (leaf_fb, leaf_b) = new[0];
        let new_node = new.get(1).copied();
        let b0 = Fs::dir_block(dir, 0)?;
        let old_leaf = Fs::dir_block(dir, p.leaf)?;
        let node_b = match &p.node {
            Some((fb, _, _)) => Some(Fs::dir_block(dir, *fb)?),
            None => None,
        };
        let mut blocks = vec![b0, old_leaf, leaf_b];
        blocks.extend(node_b);
        blocks.extend(new_node.map(|(_, b)| b));
        let held = self.lock_all(ctx, &blocks).await?;
        let read = |b: u64| held.get(b).snapshot();
        // Re-read under the locks: the index may have changed since the
        // probe (a concurrent rename into the directory); then the caller
        // probes again and the new blocks stay empty.
        let mut root = decode_dx_root(&read(b0)[..])?;
        let root_entry = root.entries.get(p.root_at).copied();
        let mut node = match (&p.node, node_b) {
            (Some((fb, _, _)), Some(nb)) => {
                let Some(re) = root_entry.filter(|e| e.block == *fb) else {
                    return Ok(());
                };
                Some((nb, decode_dx_node(&read(nb)[..], re.hash)?))
            }
            _ => None,
        };
        let leaf_at = {
            let level: &[DxEntry] = node.as_ref().map_or(&root.entries, |(_, n)| n);
            match level.iter().position(|e| e.block == p.leaf) {
                Some(i) => i,
                None => return Ok(()),
            }
        };
        let sorted = by_hash(self.sb.borrow().hash_seed, decode_dir_block(&read(old_leaf)[..])?);
        if sorted.len() < 2 {
            return Err(FsError::Corrupt(format!(
                "directory {}: a full leaf of under two entries",
                dir.ino
            )));
        }
        let (cut, hash2) = split_point(&sorted);
        let mut low: Vec<DirEntry> = sorted.into_iter().map(|(_, e)| e).collect();
        let high = low.split_off(cut);
        let entry = DxEntry {
            hash: hash2,
            block: leaf_fb,
        };
        let mut writes: Vec<(u64, Box<[u8; BLOCK]>)> = vec![
            (old_leaf, encode_dir_block(&low)?),
            (leaf_b, encode_dir_block(&high)?),
        ];
        match (node.as_mut(), new_node) {
            (None, None) => root.entries.insert(leaf_at + 1, entry),
            (None, Some((node_fb, nb))) => {
                // Add a level: the root's entries move to the new node.
                let mut moved = std::mem::take(&mut root.entries);
                moved.insert(leaf_at + 1, entry);
                root.entries = vec![DxEntry {
                    hash: 0,
                    block: node_fb,
                }];
                root.levels = 1;
                writes.push((nb, encode_dx_node(&moved)));
            }
            (Some((old_nb, n)), None) => {
                n.insert(leaf_at + 1, entry);
                writes.push((*old_nb, encode_dx_node(n)));
            }
            (Some((old_nb, n)), Some((node_fb, nb))) => {
                // Split the node: the upper half goes to the new one.
                n.insert(leaf_at + 1, entry);
                let upper = n.split_off(n.len() / 2);
                root.entries.insert(
                    p.root_at + 1,
                    DxEntry {
                        hash: upper[0].hash,
                        block: node_fb,
                    },
                );
                writes.push((*old_nb, encode_dx_node(n)));
                writes.push((nb, encode_dx_node(&upper)));
            }
        }
        writes.push((b0, encode_dx_root(&root)));
        for (b, data) in &writes {
            held.get(*b).modify().copy_from_slice(&data[..]);
        }
        drop(held);
        self.dirtied_split(&blocks, dir, child);
        Ok(())
    }
}
