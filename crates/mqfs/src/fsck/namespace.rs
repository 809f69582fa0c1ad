//! The namespace pass of the checker: from the root through every
//! directory it reaches, directory blocks and entries, loops and
//! directory hard links.

use super::checker::Checker;
use super::dirindex::IndexScan;
use super::*;

impl Checker<'_> {
    /// Marks `ino` reached from a directory; returns what it is.
    pub(super) fn reach(&mut self, ino: u32) -> Kind {
        self.ensure_inode(ino);
        let s = self.info[ino as usize];
        if (s.kind.live() || s.kind == Kind::Bad) && s.flags & REACHED == 0 {
            self.info[ino as usize].flags |= REACHED;
            self.reached.set(ino as u64 - 1);
            if ino >= FIRST_INO && !self.disk_ibm.get(ino as u64 - 1) {
                self.flag(FindingKind::InodeUsedButFree, Some(ino), None, || {
                    "reachable from the root but free in the inode bitmap".into()
                });
            }
        }
        s.kind
    }

    pub(super) fn parent_of(&self, d: u32) -> u32 {
        let di = self.info[d as usize].dir;
        self.dirs.get(di as usize).map_or(ROOT_INO, |r| r.parent)
    }

    /// True if `anc` is `d` or one of its ancestors (in the traversal
    /// tree); `None` when the walk budget is spent (a hostile image full of
    /// deep directory hard links).
    pub(super) fn is_ancestor(&mut self, anc: u32, d: u32) -> Option<bool> {
        let mut cur = d;
        for _ in 0..=self.dirs.len() {
            self.ancestor_budget = self.ancestor_budget.checked_sub(1)?;
            if cur == anc {
                return Some(true);
            }
            if cur == ROOT_INO {
                return Some(false);
            }
            cur = self.parent_of(cur);
        }
        Some(false)
    }

    pub(super) fn traverse(&mut self) {
        let root = self.info[ROOT_INO as usize];
        if root.kind != Kind::Dir {
            let k = root.kind;
            self.flag(FindingKind::RootNotDir, Some(ROOT_INO), None, || {
                format!("the root inode is {k:?}, not a directory")
            });
            return;
        }
        self.reach(ROOT_INO);
        self.info[ROOT_INO as usize].flags |= DISCOVERED;
        if let Some(r) = self.dirs.get_mut(root.dir as usize) {
            r.parent = ROOT_INO;
        }
        self.stack.push(ROOT_INO);
        while let Some(d) = self.stack.pop() {
            self.scan_dir(d);
        }
        self.extra_names.sort_unstable();
        for k in 0..self.odd_dotdots.len() {
            let (d, x, p) = self.odd_dotdots[k];
            if self.extra_names.binary_search(&(d, x)).is_ok() {
                let r = &mut self.info[x as usize].refs;
                *r = r.saturating_add(1);
            } else {
                let want = self.parent_of(d);
                self.flag(FindingKind::DirBadDotDot, Some(d), Some(p), || {
                    format!("\"..\" names inode {x}, not {want}")
                });
            }
        }
    }

    pub(super) fn scan_dir(&mut self, d: u32) {
        let Some(rec) = self.dirs.get(self.info[d as usize].dir as usize).copied() else {
            return;
        };
        self.names.clear();
        self.name_keys.clear();
        let mut dots = 0u32;
        let mut dotdots = 0u32;
        let parent = rec.parent;
        let mut index = rec.indexed.then(IndexScan::default);
        for k in rec.ext_at..rec.ext_at + rec.ext_len {
            let e = self.dir_ext[k as usize];
            let logical = e.logical as u64;
            if logical >= rec.nblocks {
                continue;
            }
            let n = (e.len as u64).min(rec.nblocks - logical);
            for j in 0..n {
                let p = e.physical + j;
                if self.conflict.as_ref().is_some_and(|c| c.get(p)) {
                    let read = self
                        .conflict_read
                        .get_or_insert_with(|| Bits::new(self.sb.blocks));
                    if read.get(p) {
                        continue;
                    }
                    read.set(p);
                }
                Checker::read_into(self.src, &mut self.blocks_read, p, &mut self.dbuf);
                self.meta(MetaKind::Directory, p);
                let mut ents = std::mem::take(&mut self.ents);
                let parsed = parse_dir_block(&self.dbuf, &mut ents, &mut self.names);
                if let Err(w) = parsed {
                    self.flag(FindingKind::DirBlockCorrupt, Some(d), Some(p), || {
                        format!("directory block {} of inode {d}: {w}", logical + j)
                    });
                }
                for ent in &ents {
                    self.dir_entry(d, p, parent, ent, &mut dots, &mut dotdots);
                }
                if let Some(ix) = index.as_mut() {
                    let names = &self.names;
                    let seed = self.sb.hash_seed;
                    let real = ents.iter().filter_map(|e| {
                        let n = names.get(e.name_at as usize..e.name_at as usize + e.name_len as usize)?;
                        (n != b"." && n != b"..").then_some(n)
                    });
                    ix.add(seed, (logical + j) as u32, p, &self.dbuf, real);
                }
                self.ents = ents;
            }
        }
        if let Some(ix) = index {
            self.check_index(d, ix, rec.nblocks);
        }
        if dots == 0 {
            self.flag(FindingKind::DirMissingDot, Some(d), None, || {
                "no '.' entry".into()
            });
        }
        if dotdots == 0 {
            self.flag(FindingKind::DirBadDotDot, Some(d), None, || {
                "no '..' entry".into()
            });
        }
        if self.name_keys.len() > 1 {
            let mut keys = std::mem::take(&mut self.name_keys);
            keys.sort_unstable();
            for w in keys.windows(2) {
                let (h1, a1, l1) = w[0];
                let (h2, a2, l2) = w[1];
                if h1 != h2 || l1 != l2 {
                    continue;
                }
                let n1 = &self.names[a1 as usize..a1 as usize + l1 as usize];
                let n2 = &self.names[a2 as usize..a2 as usize + l2 as usize];
                if n1 == n2 {
                    let shown = String::from_utf8_lossy(n1).into_owned();
                    self.flag(FindingKind::DirDuplicateName, Some(d), None, || {
                        format!("two entries named {shown:?}")
                    });
                }
            }
            self.name_keys = keys;
        }
    }

    pub(super) fn dir_entry(
        &mut self,
        d: u32,
        p: u64,
        parent: u32,
        ent: &Ent,
        dots: &mut u32,
        dotdots: &mut u32,
    ) {
        let at = ent.name_at as usize;
        let len = ent.name_len as usize;
        let mut copy = [0u8; 256];
        let Some(src) = self.names.get(at..at + len) else {
            return;
        };
        copy[..len].copy_from_slice(src);
        let name = &copy[..len];
        let ino = ent.ino;
        let lossy = || String::from_utf8_lossy(name).into_owned();
        if name == b"." || name == b".." {
            let dot = name == b".";
            let (count, want) = if dot {
                (&mut *dots, d)
            } else {
                (&mut *dotdots, parent)
            };
            *count += 1;
            let again = *count > 1;
            let shown = lossy();
            if again {
                self.flag(FindingKind::DirDuplicateName, Some(d), Some(p), || {
                    format!("two entries named {shown:?}")
                });
                return;
            }
            if ent.ftype != FileType::Dir {
                self.flag(FindingKind::DirEntryBadType, Some(d), Some(p), || {
                    format!("{shown:?} has type {:?}", ent.ftype)
                });
            }
            if ino != want && !dot {
                // Judged after the traversal: a directory with two names
                // may have its ".." in the other parent.
                self.odd_dotdots.push((d, ino, p));
            } else if ino != want {
                self.flag(FindingKind::DirMissingDot, Some(d), Some(p), || {
                    format!("{shown:?} names inode {ino}, not {want}")
                });
            } else {
                let r = &mut self.info[want as usize].refs;
                *r = r.saturating_add(1);
            }
            return;
        }
        let name_ok = valid_name(name);
        self.name_keys.push((name_hash(name), ent.name_at, ent.name_len));
        if !name_ok {
            let shown = lossy();
            self.flag(FindingKind::DirEntryBadName, Some(d), Some(p), || {
                format!("entry {shown:?} (inode {ino}) has a name no path reaches")
            });
        }
        if ino as u64 > self.sb.inodes() || ino == 0 || (ino < FIRST_INO && ino != ROOT_INO) {
            let shown = lossy();
            self.flag(FindingKind::DirEntryBadInode, Some(d), Some(p), || {
                format!("entry {shown:?} names inode {ino}, which is out of range or reserved")
            });
            return;
        }
        let kind = self.reach(ino);
        if !(kind.live() || kind == Kind::Bad) {
            let shown = lossy();
            self.flag(FindingKind::DirEntryBadInode, Some(d), Some(p), || {
                format!("entry {shown:?} names inode {ino}, which is free")
            });
            return;
        }
        let r = &mut self.info[ino as usize].refs;
        *r = r.saturating_add(1);
        if let Some(t) = kind.file_type() {
            if t != ent.ftype {
                let shown = lossy();
                self.flag(FindingKind::DirEntryBadType, Some(d), Some(p), || {
                    format!(
                        "entry {shown:?} has type {:?} but inode {ino} is a {t:?}",
                        ent.ftype
                    )
                });
            }
        }
        if kind != Kind::Dir {
            return;
        }
        if self.info[ino as usize].flags & DISCOVERED == 0 {
            self.info[ino as usize].flags |= DISCOVERED;
            let di = self.info[ino as usize].dir as usize;
            if let Some(r) = self.dirs.get_mut(di) {
                r.parent = d;
            }
            self.stack.push(ino);
        } else {
            self.extra_names.push((ino, d));
            let shown = lossy();
            match self.is_ancestor(ino, d) {
                Some(true) => self.flag(FindingKind::DirectoryLoop, Some(d), Some(p), || {
                    format!("entry {shown:?} names directory {ino}, an ancestor of directory {d}")
                }),
                Some(false) => self.flag(FindingKind::DirectoryHardLink, Some(d), Some(p), || {
                    format!("entry {shown:?} is a second name of directory {ino}")
                }),
                None => self.flag(FindingKind::DirectoryHardLink, Some(d), Some(p), || {
                    format!("entry {shown:?} is a second name of directory {ino} (not checked for a loop)")
                }),
            }
        }
    }

    // ---- 6. counts and bitmaps ----
}
