//! The extent tree of a file, Ext4's (Linux `fs/ext4/extents.c`): a B+tree
//! keyed by file block whose leaves hold [`Extent`]s and whose index nodes
//! hold [`IndexEntry`]s (`ext4_extent_idx`). The root lives in the inode
//! (its 8 slots, [`ROOT_ENTRIES`]); every other node is one block
//! ([`crate::layout::encode_node`] / [`crate::layout::decode_node`]). Depth 0: the root holds
//! the extents themselves.
//!
//! The whole tree is kept in memory while the inode is cached (Ext4 reads
//! nodes through the buffer cache on demand; a file's tree here is at most
//! a few hundred blocks for the files the simulations make). Edits follow
//! Ext4:
//!
//! - insert (`ext4_ext_insert_extent`): into the leaf whose range holds
//!   the key; a full leaf is split (`ext4_ext_split`), the split moving up
//!   while the parent is full; a full root grows the tree by one level
//!   (`ext4_ext_grow_indepth`: the root's entries move into a new block,
//!   the root keeps one index entry to it);
//! - remove (`ext4_ext_rm_leaf`): a node left empty is released and its
//!   index entry removed from the parent (`ext4_ext_rm_idx`); an empty
//!   root goes back to depth 0;
//! - every index entry's key is the first key of its child
//!   (`ext4_ext_correct_indexes`).
//!
//! Deviations (`docs/decisions.md` M16): a split moves the upper half of
//! a node to the new block, or only the new entry when it was appended at
//! the end (Ext4 splits at the insertion point, which gives the same
//! full leaves for appends); and a root whose only child fits in the root
//! takes that child's entries back (depth shrinks), so a file whose
//! extents fit the inode again holds no tree block, as the layout-2 leaf
//! was freed.
//!
//! Edits never allocate: one that needs new blocks takes them from the
//! caller through `alloc` ([`ExtentTree::blocks_for_insert`] says how many
//! an insert takes; a batch is counted by running it on a copy), so the
//! caller can get every block before anything changes. Changed nodes are
//! remembered as dirty and released ones as released, for the caller to
//! write and free ([`ExtentTree::take_dirty`], [`ExtentTree::take_released`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::error::FsError;
use crate::layout::Extent;

/// Entries in the root (the inode's 8 extent slots).
pub const ROOT_ENTRIES: usize = crate::layout::INLINE_EXTENTS;
/// Extents in a leaf block.
pub const LEAF_ENTRIES: usize = (crate::layout::BLOCK - 16 - 4) / 16;
/// Index entries in an index block.
pub const INDEX_ENTRIES: usize = (crate::layout::BLOCK - 16 - 4) / 12;
/// Deepest tree (Ext4's `EXT4_MAX_EXTENT_DEPTH`; 4 levels of blocks under
/// the root already map more than the 2^32 blocks a file can have).
pub const MAX_DEPTH: u16 = 5;

/// An index entry (`ext4_extent_idx`): the subtree in block `child` maps
/// the file blocks from `logical` up to the next entry's key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct IndexEntry {
    /// First file block the subtree maps (the first key of `child`).
    pub logical: u32,
    /// The child node's block.
    pub child: u64,
}

/// The entries of one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Entries {
    /// A leaf: extents sorted by file block, not overlapping.
    Leaf(Vec<Extent>),
    /// An index node: entries sorted by key.
    Index(Vec<IndexEntry>),
}

impl Default for Entries {
    fn default() -> Entries {
        Entries::Leaf(Vec::new())
    }
}

impl Entries {
    /// Number of entries.
    pub fn len(&self) -> usize {
        match self {
            Entries::Leaf(v) => v.len(),
            Entries::Index(v) => v.len(),
        }
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Key of entry `i`.
    fn key(&self, i: usize) -> u32 {
        match self {
            Entries::Leaf(v) => v[i].logical,
            Entries::Index(v) => v[i].logical,
        }
    }

    /// The first key, if any.
    pub fn first_key(&self) -> Option<u32> {
        (!self.is_empty()).then(|| self.key(0))
    }

    /// Entries a block node of this kind holds.
    fn block_capacity(&self) -> usize {
        match self {
            Entries::Leaf(_) => LEAF_ENTRIES,
            Entries::Index(_) => INDEX_ENTRIES,
        }
    }

    /// Splits off entries `at..` into a node of the same kind.
    fn split_off(&mut self, at: usize) -> Entries {
        match self {
            Entries::Leaf(v) => Entries::Leaf(v.split_off(at)),
            Entries::Index(v) => Entries::Index(v.split_off(at)),
        }
    }

    /// Removes entry `i`.
    fn remove(&mut self, i: usize) {
        match self {
            Entries::Leaf(v) => {
                v.remove(i);
            }
            Entries::Index(v) => {
                v.remove(i);
            }
        }
    }
}

/// Where a node is: the root (in the inode) or a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    Root,
    Block(u64),
}

/// The path from the root down to a leaf: each index node passed and the
/// entry taken in it.
type Path = Vec<(At, usize)>;

/// A file's extent tree (see the module docs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExtentTree {
    /// Levels of blocks under the root (0: the root is the leaf).
    depth: u16,
    /// The root's entries (at most [`ROOT_ENTRIES`]).
    root: Entries,
    /// The tree blocks and their entries.
    nodes: BTreeMap<u64, Entries>,
    /// Tree blocks changed since [`ExtentTree::take_dirty`].
    dirty: BTreeSet<u64>,
    /// Blocks that left the tree since [`ExtentTree::take_released`].
    released: Vec<u64>,
}

impl ExtentTree {
    /// A depth-0 tree holding `extents` (sorted, at most [`ROOT_ENTRIES`]).
    pub fn inline(extents: Vec<Extent>) -> ExtentTree {
        debug_assert!(
            extents.len() <= ROOT_ENTRIES,
            "an inline tree holds at most 8 extents"
        );
        ExtentTree {
            root: Entries::Leaf(extents),
            ..Default::default()
        }
    }

    /// A tree of `depth` whose root holds `root` and whose blocks are not
    /// loaded yet (see [`ExtentTree::missing_children`]).
    pub fn from_root(depth: u16, root: Entries) -> ExtentTree {
        ExtentTree {
            depth,
            root,
            ..Default::default()
        }
    }

    /// Levels of blocks under the root.
    pub fn depth(&self) -> u16 {
        self.depth
    }

    /// The root's entries.
    pub fn root(&self) -> &Entries {
        &self.root
    }

    /// The tree blocks and their entries.
    pub fn nodes(&self) -> &BTreeMap<u64, Entries> {
        &self.nodes
    }

    /// Number of tree blocks.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// True if no extent is mapped.
    pub fn is_empty(&self) -> bool {
        self.root.is_empty()
    }

    fn node(&self, at: At) -> &Entries {
        match at {
            At::Root => &self.root,
            At::Block(b) => match self.nodes.get(&b) {
                Some(n) => n,
                None => unreachable!("a path names only nodes of the tree"),
            },
        }
    }

    /// The node at `at`, marked dirty.
    fn node_mut(&mut self, at: At) -> &mut Entries {
        match at {
            At::Root => &mut self.root,
            At::Block(b) => {
                self.dirty.insert(b);
                match self.nodes.get_mut(&b) {
                    Some(n) => n,
                    None => unreachable!("a path names only nodes of the tree"),
                }
            }
        }
    }

    fn capacity(&self, at: At) -> usize {
        match at {
            At::Root => ROOT_ENTRIES,
            At::Block(_) => self.node(at).block_capacity(),
        }
    }

    /// The path to the leaf whose range holds file block `key`, and the
    /// leaf.
    fn descend(&self, key: u32) -> (Path, At) {
        let mut path = Path::with_capacity(self.depth as usize);
        let mut at = At::Root;
        for _ in 0..self.depth {
            let Entries::Index(v) = self.node(at) else {
                unreachable!("nodes above depth 0 are index nodes (checked at load)");
            };
            let i = v.partition_point(|e| e.logical <= key).saturating_sub(1);
            path.push((at, i));
            at = At::Block(v[i].child);
        }
        (path, at)
    }

    fn leaf(&self, at: At) -> &Vec<Extent> {
        match self.node(at) {
            Entries::Leaf(v) => v,
            Entries::Index(_) => unreachable!("depth-0 nodes are leaves (checked at load)"),
        }
    }

    fn leaf_mut(&mut self, at: At) -> &mut Vec<Extent> {
        match self.node_mut(at) {
            Entries::Leaf(v) => v,
            Entries::Index(_) => unreachable!("depth-0 nodes are leaves (checked at load)"),
        }
    }

    /// The extent mapping file block `fb`, if any.
    pub fn lookup(&self, fb: u32) -> Option<Extent> {
        self.at_or_before(fb).filter(|e| (fb as u64) < e.end())
    }

    /// The last extent starting at or before file block `key`. (The leaf
    /// `ExtentTree::descend` reaches holds it: an index key is its
    /// child's first key.)
    pub fn at_or_before(&self, key: u32) -> Option<Extent> {
        let (_, at) = self.descend(key);
        let v = self.leaf(at);
        let i = v.partition_point(|e| e.logical <= key);
        v.get(i.checked_sub(1)?).copied()
    }

    /// The extents starting in file blocks `[from, to]`, in file order.
    pub fn starting_in(&self, from: u32, to: u32) -> Vec<Extent> {
        let mut out = Vec::new();
        if from <= to {
            self.collect_range(At::Root, self.depth, from, to, &mut out);
        }
        out
    }

    fn collect_range(&self, at: At, level: u16, from: u32, to: u32, out: &mut Vec<Extent>) {
        match self.node(at) {
            Entries::Leaf(v) => {
                let i = v.partition_point(|e| e.logical < from);
                out.extend(v[i..].iter().take_while(|e| e.logical <= to));
            }
            Entries::Index(v) if level > 0 => {
                // Children from the one whose range holds `from`.
                let i = v.partition_point(|e| e.logical <= from).saturating_sub(1);
                for e in v[i..].iter().take_while(|e| e.logical <= to) {
                    if self.nodes.contains_key(&e.child) {
                        self.collect_range(At::Block(e.child), level - 1, from, to, out);
                    }
                }
            }
            Entries::Index(_) => {}
        }
    }

    /// The last extent (highest file blocks).
    pub fn last(&self) -> Option<Extent> {
        let (_, at) = self.descend(u32::MAX);
        self.leaf(at).last().copied()
    }

    /// The first extent.
    pub fn first(&self) -> Option<Extent> {
        let (_, at) = self.descend(0);
        self.leaf(at).first().copied()
    }

    /// Every extent, in file order (nodes not loaded are skipped).
    pub fn extents(&self) -> Vec<Extent> {
        let mut out = Vec::new();
        self.collect(At::Root, &mut out, self.depth);
        out
    }

    fn collect(&self, at: At, out: &mut Vec<Extent>, level: u16) {
        match self.node(at) {
            Entries::Leaf(v) => out.extend_from_slice(v),
            Entries::Index(v) => {
                if level == 0 {
                    return;
                }
                for e in v {
                    if self.nodes.contains_key(&e.child) {
                        self.collect(At::Block(e.child), out, level - 1);
                    }
                }
            }
        }
    }

    /// Overwrites the extents in file order with `v` (as many as the tree
    /// holds), keeping the tree's shape and not checking what they are:
    /// for tools that forge or repair an image. The leaves are marked
    /// dirty.
    pub fn overwrite_extents(&mut self, v: &[Extent]) {
        let mut leaves = Vec::new();
        self.leaf_order(At::Root, self.depth, &mut leaves);
        let mut rest = v;
        for at in leaves {
            let leaf = self.leaf_mut(at);
            let n = leaf.len().min(rest.len());
            leaf[..n].copy_from_slice(&rest[..n]);
            rest = &rest[n..];
        }
    }

    fn leaf_order(&self, at: At, level: u16, out: &mut Vec<At>) {
        match self.node(at) {
            Entries::Leaf(_) => out.push(at),
            Entries::Index(v) if level > 0 => {
                for e in v {
                    if self.nodes.contains_key(&e.child) {
                        self.leaf_order(At::Block(e.child), level - 1, out);
                    }
                }
            }
            Entries::Index(_) => {}
        }
    }

    /// Blocks an insert of an extent at `key` takes: one per full node on
    /// the path from the leaf up (each is split), the root counting one
    /// when full (the tree grows a level).
    pub fn blocks_for_insert(&self, key: u32) -> usize {
        let (path, leaf) = self.descend(key);
        let mut n = 0;
        for at in std::iter::once(leaf).chain(path.iter().rev().map(|(a, _)| *a)) {
            if self.node(at).len() < self.capacity(at) {
                break;
            }
            n += 1;
        }
        n
    }

    /// Inserts `e` (not overlapping any extent), splitting full nodes and
    /// growing the tree with blocks from `alloc` (as many as
    /// [`ExtentTree::blocks_for_insert`] said).
    pub fn insert(&mut self, e: Extent, alloc: &mut dyn FnMut() -> u64) {
        let (path, leaf) = self.descend(e.logical);
        let v = self.leaf_mut(leaf);
        let pos = v.partition_point(|x| x.logical < e.logical);
        debug_assert!(
            v.get(pos).is_none_or(|x| e.end() <= x.logical as u64)
                && pos.checked_sub(1).is_none_or(|p| v[p].end() <= e.logical as u64),
            "inserted extents do not overlap"
        );
        v.insert(pos, e);
        if pos == 0 {
            self.correct_keys(&path, leaf);
        }
        self.split_full(path, leaf, pos, alloc);
    }

    /// Replaces the extent keyed `key` by `e` with the same key (an
    /// extent grown or shrunk in place, or converted).
    pub fn replace(&mut self, key: u32, e: Extent) {
        debug_assert_eq!(key, e.logical, "replace keeps the key");
        let (_, leaf) = self.descend(key);
        let v = self.leaf_mut(leaf);
        match v.binary_search_by_key(&key, |x| x.logical) {
            Ok(i) => v[i] = e,
            Err(_) => debug_assert!(false, "replace of an extent that is not there"),
        }
    }

    /// Removes the extent keyed `key`, releasing nodes left empty.
    pub fn remove(&mut self, key: u32) -> Option<Extent> {
        let (mut path, mut at) = self.descend(key);
        let v = self.leaf_mut(at);
        let i = v.binary_search_by_key(&key, |x| x.logical).ok()?;
        let e = v.remove(i);
        let mut removed_at = i;
        // ext4_ext_rm_idx: an emptied block goes, and its parent's entry.
        while let At::Block(b) = at {
            if !self.node(at).is_empty() {
                break;
            }
            self.nodes.remove(&b);
            self.dirty.remove(&b);
            self.released.push(b);
            let Some((parent, pi)) = path.pop() else {
                unreachable!("a block node has a parent");
            };
            self.node_mut(parent).remove(pi);
            at = parent;
            removed_at = pi;
        }
        if self.root.is_empty() {
            self.depth = 0;
            self.root = Entries::Leaf(Vec::new());
        } else if removed_at == 0 && !self.node(at).is_empty() {
            self.correct_keys(&path, at);
        }
        self.shrink();
        Some(e)
    }

    /// Sets each index key on `path` above `at` to its child's first key,
    /// upwards while the child is its parent's first.
    fn correct_keys(&mut self, path: &[(At, usize)], mut at: At) {
        for &(parent, i) in path.iter().rev() {
            let Some(k) = self.node(at).first_key() else {
                return;
            };
            if let Entries::Index(v) = self.node_mut(parent) {
                v[i].logical = k;
            }
            if i != 0 {
                return;
            }
            at = parent;
        }
    }

    /// Splits the node at `at` if an insert at `pos` overfilled it, and its
    /// parents in turn; a full root grows the tree.
    fn split_full(&mut self, mut path: Path, mut at: At, mut pos: usize, alloc: &mut dyn FnMut() -> u64) {
        loop {
            let len = self.node(at).len();
            if len <= self.capacity(at) {
                return;
            }
            match at {
                At::Root => {
                    // ext4_ext_grow_indepth.
                    let b = alloc();
                    let moved = std::mem::take(&mut self.root);
                    let logical = moved.first_key().unwrap_or(0);
                    self.nodes.insert(b, moved);
                    self.dirty.insert(b);
                    self.root = Entries::Index(vec![IndexEntry { logical, child: b }]);
                    self.depth += 1;
                    debug_assert!(self.depth <= MAX_DEPTH, "2^32 blocks fit in MAX_DEPTH levels");
                    return;
                }
                At::Block(_) => {
                    // ext4_ext_split.
                    let split = if pos + 1 == len { len - 1 } else { len / 2 };
                    let upper = self.node_mut(at).split_off(split);
                    let logical = upper.first_key().unwrap_or(0);
                    let b = alloc();
                    self.nodes.insert(b, upper);
                    self.dirty.insert(b);
                    let Some((parent, pi)) = path.pop() else {
                        unreachable!("a block node has a parent");
                    };
                    if let Entries::Index(v) = self.node_mut(parent) {
                        v.insert(pi + 1, IndexEntry { logical, child: b });
                    }
                    at = parent;
                    pos = pi + 1;
                }
            }
        }
    }

    /// While the root has one child whose entries fit in the root, takes
    /// them back (the reverse of growing; see the module docs).
    fn shrink(&mut self) {
        while self.depth > 0 {
            let child = match &self.root {
                Entries::Index(v) if v.len() == 1 => v[0].child,
                _ => return,
            };
            if self.nodes.get(&child).is_none_or(|n| n.len() > ROOT_ENTRIES) {
                return;
            }
            if let Some(n) = self.nodes.remove(&child) {
                self.root = n;
            }
            self.dirty.remove(&child);
            self.released.push(child);
            self.depth -= 1;
        }
    }

    /// The tree blocks changed since the last call (to be written).
    pub fn take_dirty(&mut self) -> Vec<(u64, u16, &Entries)> {
        let dirty = std::mem::take(&mut self.dirty);
        if dirty.is_empty() {
            return Vec::new();
        }
        let levels = self.levels();
        dirty
            .into_iter()
            .filter_map(|b| Some((b, *levels.get(&b)?, self.nodes.get(&b)?)))
            .collect()
    }

    /// Blocks that left the tree since the last call (to be freed).
    pub fn take_released(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.released)
    }

    /// Each loaded tree block's level (0: leaf).
    fn levels(&self) -> BTreeMap<u64, u16> {
        let mut out = BTreeMap::new();
        let mut todo = vec![(At::Root, self.depth)];
        while let Some((at, level)) = todo.pop() {
            if let At::Block(b) = at {
                out.insert(b, level);
            }
            if let (Entries::Index(v), true) = (self.node(at), level > 0) {
                for e in v {
                    if self.nodes.contains_key(&e.child) && !out.contains_key(&e.child) {
                        todo.push((At::Block(e.child), level - 1));
                    }
                }
            }
        }
        out
    }

    // ---- loading and checking (the tree read from an image is untrusted) ----

    /// The blocks index entries name that are not loaded yet, with the
    /// level each must have. Fails if a loaded block is reached twice (two
    /// entries naming one block, or a loop).
    pub fn missing_children(&self) -> Result<Vec<(u64, u16)>, FsError> {
        let mut seen = BTreeSet::new();
        let mut out = Vec::new();
        let mut todo = vec![(At::Root, self.depth)];
        while let Some((at, level)) = todo.pop() {
            let Entries::Index(v) = self.node(at) else {
                continue;
            };
            if level == 0 {
                continue;
            }
            for e in v {
                if !seen.insert(e.child) {
                    return Err(corrupt(format!("tree block {} is named twice", e.child)));
                }
                if self.nodes.contains_key(&e.child) {
                    todo.push((At::Block(e.child), level - 1));
                } else {
                    out.push((e.child, level - 1));
                }
            }
        }
        Ok(out)
    }

    /// Adds the node decoded from block `b` (see
    /// [`crate::layout::decode_node`]).
    pub fn attach(&mut self, b: u64, node: Entries) -> Result<(), FsError> {
        if self.nodes.insert(b, node).is_some() {
            return Err(corrupt(format!("tree block {b} is named twice")));
        }
        Ok(())
    }

    /// Checks the loaded tree: every block loaded and in the data area
    /// (`in_range`), no block named twice, leaves exactly at depth 0, no
    /// empty node but an empty depth-0 root, keys strictly increasing and
    /// inside the parent's range, each index key the first key of its
    /// child, extents of at least one block, not overlapping, not past
    /// file block 2^32.
    pub fn validate(&self, in_range: &dyn Fn(u64) -> bool) -> Result<(), FsError> {
        if self.depth > MAX_DEPTH {
            return Err(corrupt(format!(
                "depth {} is deeper than {MAX_DEPTH}",
                self.depth
            )));
        }
        if self.root.len() > ROOT_ENTRIES || (self.depth > 0 && self.root.is_empty()) {
            return Err(corrupt("root entry count".into()));
        }
        let mut seen = BTreeSet::new();
        self.check_node(At::Root, self.depth, 0, 1 << 32, in_range, &mut seen)
    }

    fn check_node(
        &self,
        at: At,
        level: u16,
        lo: u64,
        hi: u64,
        in_range: &dyn Fn(u64) -> bool,
        seen: &mut BTreeSet<u64>,
    ) -> Result<(), FsError> {
        let node = match at {
            At::Root => &self.root,
            At::Block(b) => {
                if !in_range(b) {
                    return Err(corrupt(format!("tree block {b} is outside the data area")));
                }
                if !seen.insert(b) {
                    return Err(corrupt(format!("tree block {b} is named twice")));
                }
                let n = self
                    .nodes
                    .get(&b)
                    .ok_or_else(|| corrupt(format!("tree block {b} is not loaded")))?;
                if n.is_empty() {
                    return Err(corrupt(format!("tree block {b} is empty")));
                }
                if n.len() > n.block_capacity() {
                    return Err(corrupt(format!("tree block {b} has too many entries")));
                }
                n
            }
        };
        match (node, level) {
            (Entries::Leaf(v), 0) => {
                let mut prev = lo;
                for e in v {
                    let (s, end) = (e.logical as u64, e.end());
                    if e.len == 0 || s < prev || end > hi {
                        return Err(corrupt(format!(
                            "extent at file block {s} is empty, out of order or out of its node's range"
                        )));
                    }
                    prev = end;
                }
                Ok(())
            }
            (Entries::Index(v), l) if l > 0 => {
                for (i, e) in v.iter().enumerate() {
                    let s = e.logical as u64;
                    let next = v.get(i + 1).map_or(hi, |n| n.logical as u64);
                    if s < lo || s >= next || (i == 0 && at != At::Root && s != lo) {
                        return Err(corrupt(format!("index key {s} out of order or range")));
                    }
                    self.check_node(At::Block(e.child), l - 1, s, next, in_range, seen)?;
                    let first = self.nodes.get(&e.child).and_then(|n| n.first_key());
                    if first != Some(e.logical) {
                        return Err(corrupt(format!(
                            "index key {s} is not the first key of block {}",
                            e.child
                        )));
                    }
                }
                Ok(())
            }
            _ => Err(corrupt(format!("node at level {level} of the wrong kind"))),
        }
    }
}

fn corrupt(what: String) -> FsError {
    FsError::Corrupt(format!("extent tree: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext(logical: u32) -> Extent {
        Extent {
            logical,
            len: 1,
            physical: 1_000_000 + logical as u64,
            unwritten: false,
        }
    }

    #[test]
    fn inserts_split_and_grow_and_removes_release() {
        let mut t = ExtentTree::default();
        let mut next = 10u64;
        let mut used = 0usize;
        // Every other block, in a scrambled order: no two extents join.
        let keys: Vec<u32> = (0..3000u32).map(|i| (i * 7919 % 3000) * 2).collect();
        for &k in &keys {
            let need = t.blocks_for_insert(k);
            let before = next;
            t.insert(ext(k), &mut || {
                next += 1;
                next
            });
            assert_eq!((next - before) as usize, need, "blocks_for_insert is exact");
            used += need;
        }
        assert_eq!(t.node_count(), used);
        assert!(t.depth() >= 2, "3000 extents need two levels");
        t.validate(&|_| true).unwrap();
        let all = t.extents();
        assert_eq!(all.len(), 3000);
        assert!(all.windows(2).all(|w| w[0].logical < w[1].logical));
        assert_eq!(t.lookup(2 * 1234).map(|e| e.logical), Some(2468));
        assert_eq!(t.lookup(2 * 1234 + 1), None);
        assert_eq!(t.last().map(|e| e.logical), Some(5998));
        for &k in keys.iter().rev() {
            assert!(t.remove(k).is_some());
        }
        assert!(t.is_empty());
        assert_eq!(t.depth(), 0);
        assert_eq!(t.node_count(), 0);
        let mut released = t.take_released();
        released.sort_unstable();
        released.dedup();
        assert_eq!(released.len(), used, "every block taken is released once");
    }

    fn idx(logical: u32, child: u64) -> IndexEntry {
        IndexEntry { logical, child }
    }

    /// A tree of `depth` with `root` and the blocks `nodes`, loaded as
    /// `Fs::iget` loads one (`missing_children`, `attach`), then checked.
    fn load(depth: u16, root: Entries, nodes: &[(u64, Entries)]) -> Result<ExtentTree, FsError> {
        let mut t = ExtentTree::from_root(depth, root);
        loop {
            let missing = t.missing_children()?;
            if missing.is_empty() {
                break;
            }
            for (b, _) in missing {
                let n = nodes.iter().find(|(x, _)| *x == b).map(|(_, n)| n.clone());
                t.attach(b, n.ok_or_else(|| corrupt("no such block".into()))?)?;
            }
        }
        t.validate(&|b| (100..200).contains(&b))?;
        Ok(t)
    }

    #[test]
    fn damaged_trees_are_corrupt_not_a_panic() {
        let leaf = |keys: &[u32]| Entries::Leaf(keys.iter().map(|k| ext(*k)).collect());
        let is_corrupt = |r: Result<ExtentTree, FsError>, what: &str| {
            assert!(matches!(r, Err(FsError::Corrupt(_))), "{what}: {r:?}");
        };
        let good = load(
            1,
            Entries::Index(vec![idx(0, 100), idx(10, 101)]),
            &[(100, leaf(&[0, 5])), (101, leaf(&[10]))],
        );
        assert_eq!(good.unwrap().extents().len(), 3, "the undamaged tree loads");
        is_corrupt(
            load(
                2,
                Entries::Index(vec![idx(0, 100)]),
                &[(100, Entries::Index(vec![idx(0, 100)]))],
            ),
            "a block naming itself (a loop)",
        );
        is_corrupt(
            load(
                1,
                Entries::Index(vec![idx(0, 100), idx(10, 100)]),
                &[(100, leaf(&[0]))],
            ),
            "two entries naming one block",
        );
        is_corrupt(
            load(1, Entries::Index(vec![idx(0, 300)]), &[(300, leaf(&[0]))]),
            "a child outside the data area",
        );
        is_corrupt(
            load(1, Entries::Index(vec![idx(3, 100)]), &[(100, leaf(&[0]))]),
            "an index key that is not the child's first key",
        );
        is_corrupt(
            load(
                1,
                Entries::Index(vec![idx(0, 100), idx(10, 101)]),
                &[(100, leaf(&[0, 12])), (101, leaf(&[10]))],
            ),
            "an extent past its index entry's range",
        );
        is_corrupt(
            load(
                1,
                Entries::Index(vec![idx(10, 100), idx(0, 101)]),
                &[(100, leaf(&[10])), (101, leaf(&[0]))],
            ),
            "index keys out of order",
        );
        is_corrupt(
            load(2, Entries::Index(vec![idx(0, 100)]), &[(100, leaf(&[0]))]),
            "a leaf where an index node belongs (depth mismatch)",
        );
        is_corrupt(load(0, leaf(&[4, 2]), &[]), "extents out of order");
        let overlapping = Entries::Leaf(vec![Extent { len: 5, ..ext(0) }, ext(3)]);
        is_corrupt(load(0, overlapping, &[]), "overlapping extents");
        is_corrupt(
            load(
                MAX_DEPTH + 1,
                Entries::Index(vec![idx(0, 100)]),
                &[(100, leaf(&[0]))],
            ),
            "a tree deeper than the deepest",
        );
    }

    #[test]
    fn appends_fill_leaves() {
        let mut t = ExtentTree::default();
        let mut next = 10u64;
        for k in 0..(LEAF_ENTRIES as u32 * 10) {
            t.insert(ext(2 * k), &mut || {
                next += 1;
                next
            });
        }
        // 10 full leaves under one index block.
        assert_eq!(t.depth(), 2);
        assert_eq!(t.node_count(), 11);
        t.validate(&|_| true).unwrap();
    }
}
