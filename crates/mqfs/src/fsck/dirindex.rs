//! The check of an indexed directory's index ([`crate::htree`]), from
//! what the linear scan of its blocks gathered: the root decodes, every
//! node does and is reached once from the root, every child block is
//! inside the directory and referenced once, node hashes lie within their
//! root entry's range, every entry's hash lies within the range of the
//! leaf holding it (so a lookup finds it), and every leaf holding entries
//! is reached. An unreferenced leaf without entries is accepted: a crash
//! after a split grew the directory and before it rewrote the index
//! leaves one (`dir_index`), and no entry is lost.

use std::collections::BTreeMap;

use super::checker::Checker;
use super::FindingKind;
use crate::htree::{decode_dx_node, decode_dx_root, in_range, name_hash, DxEntry, DxRoot, NODE_LIMIT};
use crate::layout::{BLOCK, DIR_SPACE};

/// What the linear scan of an indexed directory gathers.
#[derive(Default)]
pub(super) struct IndexScan {
    /// Block 0 decoded as the root (None: not read).
    root: Option<Result<DxRoot, String>>,
    /// Blocks that look like nodes (the empty entry and the node limit),
    /// decoded, by logical block.
    nodes: BTreeMap<u32, Result<Vec<DxEntry>, String>>,
    /// The other blocks: device block and the hashes of their entries.
    leaves: BTreeMap<u32, (u64, Vec<u32>)>,
}

fn looks_like_node(b: &[u8; BLOCK]) -> bool {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]]) == 0
        && u16::from_le_bytes([b[4], b[5]]) as usize == DIR_SPACE
        && u16::from_le_bytes([b[8], b[9]]) as usize == NODE_LIMIT
}

impl IndexScan {
    /// Records logical block `logical` (device block `p`, content `b`,
    /// entry names `names`).
    pub(super) fn add<'a>(
        &mut self,
        seed: u32,
        logical: u32,
        p: u64,
        b: &[u8; BLOCK],
        names: impl Iterator<Item = &'a [u8]>,
    ) {
        if logical == 0 {
            self.root = Some(decode_dx_root(&b[..]).map_err(|e| e.to_string()));
        } else if looks_like_node(b) {
            self.nodes
                .insert(logical, decode_dx_node(&b[..], 0).map_err(|e| e.to_string()));
        } else {
            let hashes = names.map(|n| name_hash(seed, n)).collect();
            self.leaves.insert(logical, (p, hashes));
        }
    }
}

impl Checker<'_> {
    /// Checks directory `d`'s index (see the module docs).
    pub(super) fn check_index(&mut self, d: u32, scan: IndexScan, nblocks: u64) {
        let root = match scan.root {
            Some(Ok(r)) => r,
            Some(Err(e)) => {
                self.flag(FindingKind::DirIndexCorrupt, Some(d), None, || {
                    format!("root: {e}")
                });
                return;
            }
            None => {
                self.flag(FindingKind::DirIndexCorrupt, Some(d), None, || {
                    "no root block".into()
                });
                return;
            }
        };
        let mut refs: BTreeMap<u32, u32> = BTreeMap::new();
        // (lower, upper, child block) of every leaf the index reaches.
        let mut leaves: Vec<(u32, Option<u32>, u32)> = Vec::new();
        let mut bad: Vec<String> = Vec::new();
        let reference = |refs: &mut BTreeMap<u32, u32>, bad: &mut Vec<String>, block: u32| -> bool {
            if block == 0 || block as u64 >= nblocks {
                bad.push(format!("index entry points at block {block} of {nblocks}"));
                return false;
            }
            let r = refs.entry(block).or_insert(0);
            *r += 1;
            if *r > 1 {
                bad.push(format!("block {block} referenced twice"));
                return false;
            }
            true
        };
        for (i, e) in root.entries.iter().enumerate() {
            let lower = if i == 0 { 0 } else { e.hash };
            let upper = root.entries.get(i + 1).map(|n| n.hash);
            if !reference(&mut refs, &mut bad, e.block) {
                continue;
            }
            if root.levels == 0 {
                leaves.push((lower, upper, e.block));
                continue;
            }
            let node = match scan.nodes.get(&e.block) {
                Some(Ok(n)) => n,
                Some(Err(w)) => {
                    bad.push(format!("node {}: {w}", e.block));
                    continue;
                }
                None => {
                    bad.push(format!(
                        "root entry {i} points at block {} which is no node",
                        e.block
                    ));
                    continue;
                }
            };
            for (j, ne) in node.iter().enumerate() {
                let nlower = if j == 0 { lower } else { ne.hash };
                if j > 0 && !in_range(ne.hash, lower, upper) {
                    bad.push(format!(
                        "node {} entry {j} hash {:#x} outside its range",
                        e.block, ne.hash
                    ));
                }
                let nupper = node.get(j + 1).map(|n| n.hash).or(upper);
                if reference(&mut refs, &mut bad, ne.block) {
                    if scan.nodes.contains_key(&ne.block) {
                        bad.push(format!("node {} points at node {}", e.block, ne.block));
                    } else {
                        leaves.push((nlower, nupper, ne.block));
                    }
                }
            }
        }
        if root.levels == 0 {
            if let Some(n) = scan.nodes.keys().find(|n| refs.contains_key(n)) {
                bad.push(format!("one-level root points at node {n}"));
            }
        }
        for (lower, upper, block) in leaves {
            if let Some((_, hashes)) = scan.leaves.get(&block) {
                if let Some(h) = hashes.iter().find(|h| !in_range(**h, lower, upper)) {
                    bad.push(format!(
                        "leaf {block} holds hash {h:#x} outside its range {lower:#x}..{upper:x?}"
                    ));
                }
            }
        }
        for (block, (_, hashes)) in &scan.leaves {
            if !hashes.is_empty() && !refs.contains_key(block) {
                bad.push(format!(
                    "leaf {block} holds {} entries no index entry reaches",
                    hashes.len()
                ));
            }
        }
        for w in bad {
            self.flag(FindingKind::DirIndexCorrupt, Some(d), None, || w);
        }
    }
}
