//! The package translation layer (PTL): DRAM maps from inodes and
//! directory entries to the live packages that describe them (slides,
//! "Package Management (1/2)": packages "violate metadata objects", the
//! PTL provides "compatible services"). Nothing here is persistent; mount
//! rebuilds it from the packages ([`crate::recovery`]).

use fsapi::{Errno, Work};
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Result, WofsError};
use crate::package::{FileType, Ino, PkgRef, ROOT};
use crate::reclaim::Space;

/// An inode as the PTL knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inode {
    /// Its type.
    pub ftype: FileType,
    /// Permission bits.
    pub perm: u16,
    /// Size in bytes.
    pub size: u64,
    /// Data page of each file page (0: a hole); as many as the size needs.
    pub pages: Vec<u32>,
    /// The live attribute package, if any.
    pub attr: Option<PkgRef>,
    /// The entries naming it: (directory, name).
    pub links: BTreeSet<(Ino, String)>,
}

impl Inode {
    /// A new inode with no data.
    pub fn new(ftype: FileType, perm: u16) -> Inode {
        Inode {
            ftype,
            perm,
            size: 0,
            pages: Vec::new(),
            attr: None,
            links: BTreeSet::new(),
        }
    }
}

/// A directory entry: the inode it names and the package that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The inode.
    pub ino: Ino,
    /// The entry's package (create, link or rename).
    pub pkg: PkgRef,
}

/// The whole DRAM state.
#[derive(Clone, Debug)]
pub struct Ptl {
    /// Live inodes.
    pub inodes: BTreeMap<Ino, Inode>,
    /// Each directory's entries by name.
    pub dirs: BTreeMap<Ino, BTreeMap<String, Entry>>,
    /// Free slots and pages, and the causal holds.
    pub space: Space,
    /// The next package's sequence number.
    pub next_seq: u64,
    /// The next inode number.
    pub next_ino: Ino,
    /// The DRAM work done since it was last taken ([`Ptl::take_work`]):
    /// what the calls are charged for ([`fsapi::Meter`]).
    work: Cell<Work>,
}

impl Ptl {
    /// A PTL with only the root directory.
    pub fn empty(space: Space, root_perm: u16) -> Ptl {
        let mut p = Ptl {
            inodes: BTreeMap::new(),
            dirs: BTreeMap::new(),
            space,
            next_seq: 1,
            next_ino: ROOT + 1,
            work: Cell::new(Work::default()),
        };
        p.inodes.insert(ROOT, Inode::new(FileType::Dir, root_perm));
        p.dirs.insert(ROOT, BTreeMap::new());
        p
    }

    /// The inode `ino`.
    pub fn inode(&self, ino: Ino) -> Result<&Inode> {
        self.inodes.get(&ino).ok_or(WofsError::Fs(Errno::NotFound))
    }

    /// Counts DRAM work done on the table.
    pub fn count(&self, w: Work) {
        self.work.set(self.work.get() + w);
    }

    /// The work counted since the last call, the allocator's included.
    pub fn take_work(&mut self) -> Work {
        self.work.take()
            + Work {
                allocs: self.space.take_ops(),
                ..Work::default()
            }
    }

    /// The entries of directory `ino` (one probe of the directory index).
    pub fn dir(&self, ino: Ino) -> Result<&BTreeMap<String, Entry>> {
        self.count(Work::dirents(1));
        match self.inode(ino)?.ftype {
            FileType::Dir => self.dirs.get(&ino).ok_or(WofsError::Fs(Errno::NotFound)),
            FileType::File => Err(WofsError::Fs(Errno::NotDir)),
        }
    }

    /// The entry `name` of directory `parent`.
    pub fn entry(&self, parent: Ino, name: &str) -> Result<Entry> {
        self.dir(parent)?
            .get(name)
            .copied()
            .ok_or(WofsError::Fs(Errno::NotFound))
    }

    /// Adds an entry (the inode must exist).
    pub fn add_entry(&mut self, parent: Ino, name: &str, e: Entry) {
        self.count(Work {
            inodes: 1,
            dirents: 1,
            ..Work::default()
        });
        self.dirs.entry(parent).or_default().insert(name.to_string(), e);
        if let Some(i) = self.inodes.get_mut(&e.ino) {
            i.links.insert((parent, name.to_string()));
        }
    }

    /// Removes an entry whose package is cancelled: the package is retired
    /// and held by `canceller`; an inode left without entries is dropped
    /// with its attribute package and data pages.
    pub fn cancel_entry(&mut self, parent: Ino, name: &str, canceller: u32) {
        self.count(Work {
            inodes: 1,
            dirents: 1,
            ..Work::default()
        });
        let Some(e) = self.dirs.get_mut(&parent).and_then(|d| d.remove(name)) else {
            return;
        };
        self.space.retire(e.pkg.slot);
        self.space.hold(canceller, e.pkg.slot);
        let gone = match self.inodes.get_mut(&e.ino) {
            Some(i) => {
                i.links.remove(&(parent, name.to_string()));
                i.links.is_empty()
            }
            None => false,
        };
        if gone {
            if let Some(i) = self.inodes.remove(&e.ino) {
                if let Some(a) = i.attr {
                    self.space.retire(a.slot);
                }
                for p in i.pages {
                    self.space.free_page(p);
                }
            }
            self.dirs.remove(&e.ino);
        }
    }

    /// The directory holding directory `ino` (`None` for the root).
    pub fn parent_of_dir(&self, ino: Ino) -> Option<Ino> {
        self.inodes.get(&ino)?.links.iter().next().map(|(p, _)| *p)
    }

    /// True if `ino` is `dir` or below it.
    pub fn is_under(&self, mut ino: Ino, dir: Ino) -> bool {
        for _ in 0..=self.inodes.len() {
            if ino == dir {
                return true;
            }
            match self.parent_of_dir(ino) {
                Some(p) => ino = p,
                None => return false,
            }
        }
        false
    }

    /// Allocates a sequence number.
    pub fn seq(&mut self) -> u64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }
}
