//! The latest view in DRAM (the paper's VFS inodes, latest buckets,
//! latest next pointers and free lists: L150-L184), beside a shadow of
//! what the consistent view in PM holds, and the per-inode operation lists
//! the persister drains (L185-L197, Table 2).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use fsapi::Errno;

use crate::alloc::Alloc;
use crate::error::FsError;
use crate::layout::Kind;

/// An inode number: the PM offset of the inode's line.
pub type Ino = u64;

/// A dentry: its PM line, its name lines, the inode it names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dentry {
    pub addr: u64,
    pub names: Vec<u64>,
    pub ino: Ino,
    pub name: String,
    pub hash: u64,
}

/// One tracked operation (Table 2).
#[derive(Clone, Debug)]
pub(crate) enum OpKind {
    /// A dentry added to this directory; `replaces` the dentry of the same
    /// name it overwrites (rename onto an existing name).
    DirAdd { d: Dentry, replaces: Option<Dentry> },
    /// A dentry removed from this directory.
    DirRem { d: Dentry },
    /// The file's size (and index) changed.
    SizeChg,
    /// The inode's attributes changed.
    AttrChg,
}

/// An operation with its global sequence number and the operations of
/// other inodes it must follow: (inode, persist its ops up to this seq).
#[derive(Clone, Debug)]
pub(crate) struct Op {
    pub seq: u64,
    pub kind: OpKind,
    pub after: Vec<(Ino, u64)>,
}

/// What the consistent view in PM holds for an inode.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cons {
    /// The inode line (and a directory's zeroed bucket page) is written.
    pub init: bool,
    pub nlink: u64,
    pub size: u64,
    pub root: u64,
    pub parent: Ino,
    /// Each bucket's consistent list of dentry lines, head first.
    pub buckets: BTreeMap<u64, Vec<u64>>,
}

/// A DRAM inode: the latest view, the consistent shadow, the op list.
#[derive(Clone, Debug)]
pub(crate) struct Inode {
    pub kind: Kind,
    pub perm: u16,
    pub nlink: u64,
    pub size: u64,
    pub mtime: u64,
    /// A directory's parent; a file's directory of its latest name.
    pub parent: Ino,
    /// File index page or directory bucket page (0: none yet).
    pub root: u64,
    /// File blocks attached to the index (may run past the size until a
    /// truncation is persisted).
    pub blocks: Vec<u64>,
    /// A directory's entries (the latest view of its hash table).
    pub entries: BTreeMap<String, Dentry>,
    pub cons: Cons,
    pub ops: VecDeque<Op>,
    /// Data lines written since the last size change was persisted.
    pub dirty_lines: BTreeSet<u64>,
    /// Pending diradds that name this inode: (directory, seq).
    pub adds: Vec<(Ino, u64)>,
}

impl Inode {
    pub fn new(kind: Kind, perm: u16, parent: Ino, root: u64, mtime: u64) -> Self {
        Inode {
            kind,
            perm,
            nlink: 0,
            size: 0,
            mtime,
            parent,
            root,
            blocks: Vec::new(),
            entries: BTreeMap::new(),
            cons: Cons {
                parent,
                ..Cons::default()
            },
            ops: VecDeque::new(),
            dirty_lines: BTreeSet::new(),
            adds: Vec::new(),
        }
    }
}

/// Counts of the persister's work.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PersistStats {
    /// Operations persisted.
    pub ops: u64,
    /// "Persisted before" edges (each a batch of `clwb`s and an `sfence`).
    pub edges: u64,
    /// Persister rounds that found work.
    pub rounds: u64,
}

/// The whole DRAM state, behind the file system's lock.
#[derive(Debug)]
pub(crate) struct State {
    pub inodes: BTreeMap<Ino, Inode>,
    pub alloc: Alloc,
    pub seq: u64,
    pub root: Ino,
    /// The dirty inode list: inodes with a non-empty op list.
    pub dirty: BTreeSet<Ino>,
    pub stats: PersistStats,
}

impl State {
    pub fn inode(&self, ino: Ino) -> Result<&Inode, FsError> {
        self.inodes.get(&ino).ok_or(FsError::Fs(Errno::NotFound))
    }

    pub fn inode_mut(&mut self, ino: Ino) -> Result<&mut Inode, FsError> {
        self.inodes.get_mut(&ino).ok_or(FsError::Fs(Errno::NotFound))
    }

    pub fn dir(&self, ino: Ino) -> Result<&Inode, FsError> {
        let i = self.inode(ino)?;
        if i.kind != Kind::Dir {
            return Err(FsError::Fs(Errno::NotDir));
        }
        Ok(i)
    }

    /// The dentry `name` in directory `dir`.
    pub fn entry(&self, dir: Ino, name: &str) -> Result<&Dentry, FsError> {
        let d = self.dir(dir)?;
        if name.len() > crate::layout::NAME_MAX {
            return Err(FsError::Fs(Errno::NameTooLong));
        }
        d.entries.get(name).ok_or(FsError::Fs(Errno::NotFound))
    }

    /// Appends an operation to `ino`'s list; its sequence number.
    pub fn push_op(&mut self, ino: Ino, kind: OpKind, after: Vec<(Ino, u64)>) -> Result<u64, FsError> {
        self.seq += 1;
        let seq = self.seq;
        let i = self.inode_mut(ino)?;
        let merge = matches!(kind, OpKind::SizeChg | OpKind::AttrChg)
            && i.ops
                .iter()
                .any(|o| std::mem::discriminant(&o.kind) == std::mem::discriminant(&kind));
        if !merge {
            i.ops.push_back(Op { seq, kind, after });
        }
        self.dirty.insert(ino);
        Ok(seq)
    }

    /// The operation to persist next so that `ino`'s ops up to `seq` get
    /// persisted, following `after` edges first: the inode whose front op
    /// it is, or `None` when they are all persisted.
    pub fn runnable(&self, mut ino: Ino, mut seq: u64) -> Option<Ino> {
        'descend: loop {
            let front = self.inodes.get(&ino)?.ops.front()?;
            if front.seq > seq {
                return None;
            }
            for &(d, s) in &front.after {
                let waiting = self
                    .inodes
                    .get(&d)
                    .and_then(|i| i.ops.front())
                    .is_some_and(|o| o.seq <= s);
                if waiting {
                    ino = d;
                    seq = s;
                    continue 'descend;
                }
            }
            return Some(ino);
        }
    }

    /// The dirty inode whose front op is oldest.
    pub fn oldest_dirty(&self) -> Option<Ino> {
        self.dirty
            .iter()
            .filter_map(|i| {
                self.inodes
                    .get(i)
                    .and_then(|n| n.ops.front())
                    .map(|o| (o.seq, *i))
            })
            .min()
            .map(|(_, i)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> State {
        let mut st = State {
            inodes: BTreeMap::new(),
            alloc: Alloc::default(),
            seq: 0,
            root: 1,
            dirty: BTreeSet::new(),
            stats: PersistStats::default(),
        };
        for ino in [1, 2, 3] {
            st.inodes.insert(ino, Inode::new(Kind::Dir, 0o755, 1, 0, 0));
        }
        st
    }

    #[test]
    fn runnable_follows_after_edges_to_older_operations_first() {
        let mut st = state();
        let a = st.push_op(2, OpKind::AttrChg, Vec::new()).unwrap();
        let b = st.push_op(3, OpKind::AttrChg, vec![(2, a)]).unwrap();
        st.push_op(1, OpKind::SizeChg, vec![(3, b)]).unwrap();
        assert_eq!(st.oldest_dirty(), Some(2));
        assert_eq!(
            st.runnable(1, u64::MAX),
            Some(2),
            "1 waits for 3, which waits for 2"
        );
        st.inodes.get_mut(&2).unwrap().ops.pop_front();
        assert_eq!(st.runnable(1, u64::MAX), Some(3));
        st.inodes.get_mut(&3).unwrap().ops.pop_front();
        assert_eq!(st.runnable(1, u64::MAX), Some(1));
        assert_eq!(st.runnable(1, 0), None, "nothing up to seq 0");
    }

    #[test]
    fn size_and_attribute_changes_merge_and_directory_operations_do_not() {
        let mut st = state();
        st.push_op(2, OpKind::SizeChg, Vec::new()).unwrap();
        st.push_op(2, OpKind::SizeChg, Vec::new()).unwrap();
        st.push_op(2, OpKind::AttrChg, Vec::new()).unwrap();
        assert_eq!(st.inodes[&2].ops.len(), 2);
        assert!(st.dirty.contains(&2));
        assert_eq!(
            st.push_op(9, OpKind::AttrChg, Vec::new()),
            Err(FsError::Fs(Errno::NotFound))
        );
    }
}
