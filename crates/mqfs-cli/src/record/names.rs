//! What the recorder knows about the tree: the names FUSE replies gave the
//! kernel ([`Names`]), so that a request on an inode becomes the paths a
//! promise is about, and the contents each file path may hold after a
//! crash ([`History`]), for fatomic's promise.

use std::collections::{BTreeMap, BTreeSet};

use crashfuzz::Kind;
use mqfs::layout::ROOT_INO;
use mqfs::Ino;

/// Longest chain of directories followed to build a path (a guard against
/// a loop of stale names).
const MAX_DEPTH: usize = 4096;

/// The crash explorer's kind of a file type (special files count as
/// empty regular files).
pub use crashfuzz::oracle::kind_of;

/// A name: (directory, name in it).
type Name = (Ino, String);

/// The names of the inodes the kernel knows. The kernel reaches an inode
/// only through a name a reply gave it (lookup, create, mkdir, symlink,
/// link), and every change of a name goes through the adapter, so the
/// table holds every name the kernel can act through.
#[derive(Debug)]
pub struct Names {
    entries: BTreeMap<Name, Ino>,
    links: BTreeMap<Ino, BTreeSet<Name>>,
    kinds: BTreeMap<Ino, Kind>,
    /// The name each inode was last reached through.
    last: BTreeMap<Ino, Name>,
}

impl Default for Names {
    fn default() -> Names {
        Names {
            entries: BTreeMap::new(),
            links: BTreeMap::new(),
            kinds: BTreeMap::from([(ROOT_INO, Kind::Dir)]),
            last: BTreeMap::new(),
        }
    }
}

impl Names {
    /// `parent/name` holds `ino` (a reply said so).
    pub fn learn(&mut self, parent: Ino, name: &str, ino: Ino, kind: Kind) {
        if name == "." || name == ".." {
            return;
        }
        let key = (parent, name.to_string());
        if let Some(old) = self.entries.insert(key.clone(), ino) {
            if old != ino {
                self.drop_link(old, &key);
            }
        }
        self.links.entry(ino).or_default().insert(key.clone());
        self.kinds.insert(ino, kind);
        self.last.insert(ino, key);
    }

    fn drop_link(&mut self, ino: Ino, key: &Name) {
        if let Some(set) = self.links.get_mut(&ino) {
            set.remove(key);
            if set.is_empty() {
                self.links.remove(&ino);
            }
        }
        if self.last.get(&ino) == Some(key) {
            self.last.remove(&ino);
        }
    }

    /// `parent/name` is gone, and with it everything under it.
    pub fn forget(&mut self, parent: Ino, name: &str) -> Option<Ino> {
        let key = (parent, name.to_string());
        let ino = self.entries.remove(&key)?;
        self.drop_link(ino, &key);
        if self.kinds.get(&ino) == Some(&Kind::Dir) {
            let children: Vec<String> = self
                .entries
                .keys()
                .filter(|(p, _)| *p == ino)
                .map(|(_, n)| n.clone())
                .collect();
            for c in children {
                self.forget(ino, &c);
            }
        }
        Some(ino)
    }

    /// `from` was renamed to `to` (replacing what `to` held). Returns
    /// false if that changed nothing (two names of one file: POSIX leaves
    /// both).
    pub fn rename(&mut self, from: (Ino, &str), to: (Ino, &str)) -> bool {
        let moved = self.lookup(from.0, from.1);
        if from == to || moved.is_some() && self.lookup(to.0, to.1) == moved {
            return false;
        }
        self.forget(to.0, to.1);
        if let Some(ino) = moved {
            let key = (from.0, from.1.to_string());
            self.entries.remove(&key);
            self.drop_link(ino, &key);
            let kind = self.kind(ino).unwrap_or(Kind::File);
            self.learn(to.0, to.1, ino, kind);
        }
        true
    }

    /// The inode `parent/name` holds, if known.
    pub fn lookup(&self, parent: Ino, name: &str) -> Option<Ino> {
        self.entries.get(&(parent, name.to_string())).copied()
    }

    /// The kind of `ino`, if known.
    pub fn kind(&self, ino: Ino) -> Option<Kind> {
        self.kinds.get(&ino).cloned()
    }

    /// The path of directory `dir` (a directory has one name).
    pub fn dir_path(&self, dir: Ino) -> Option<String> {
        let mut parts = Vec::new();
        let mut cur = dir;
        for _ in 0..MAX_DEPTH {
            if cur == ROOT_INO {
                parts.reverse();
                return Some(format!("/{}", parts.join("/")));
            }
            let (p, n) = self.links.get(&cur)?.iter().next()?;
            parts.push(n.as_str());
            cur = *p;
        }
        None
    }

    /// The path of `parent/name`, if `parent`'s path is known.
    pub fn path(&self, parent: Ino, name: &str) -> Option<String> {
        let d = self.dir_path(parent)?;
        Some(if d == "/" {
            format!("/{name}")
        } else {
            format!("{d}/{name}")
        })
    }

    /// Every known path of `ino`, sorted.
    pub fn paths_of(&self, ino: Ino) -> Vec<String> {
        if ino == ROOT_INO {
            return vec!["/".into()];
        }
        let mut v: Vec<String> = self
            .links
            .get(&ino)
            .into_iter()
            .flatten()
            .filter_map(|(p, n)| self.path(*p, n))
            .collect();
        v.sort();
        v
    }

    /// The path a sync of `ino` went through: the name it was last reached
    /// by, if it still has it, else any of its names.
    pub fn sync_path(&self, ino: Ino) -> Option<String> {
        if ino == ROOT_INO {
            return Some("/".into());
        }
        self.last
            .get(&ino)
            .and_then(|(p, n)| self.path(*p, n))
            .or_else(|| self.paths_of(ino).into_iter().next())
    }
}

/// The contents a file path may hold after a crash, as far as the run
/// shows: for a path made during the run, every content it had at a
/// persistence point; nothing for a path that held a file at the mount
/// (its durable contents were never read) or that lies under a directory
/// renamed during the run (it may revert to anything the old tree held).
#[derive(Debug, Default)]
pub struct History {
    /// Path -> its contents at persistence points (`None`: unknown).
    paths: BTreeMap<String, Option<Vec<Vec<u8>>>>,
    /// Directories renamed during the run (both names).
    tainted: Vec<String>,
}

fn merge(dst: &mut Option<Vec<Vec<u8>>>, src: Option<Vec<Vec<u8>>>) {
    match (dst.as_mut(), src) {
        (Some(d), Some(s)) => {
            for c in s {
                if !d.contains(&c) {
                    d.push(c);
                }
            }
        }
        (_, None) => *dst = None,
        (None, Some(_)) => {}
    }
}

impl History {
    /// `path` exists and was not made during the run (unless already
    /// known).
    pub fn existing(&mut self, path: &str) {
        self.paths.entry(path.into()).or_insert(None);
    }

    /// A file was made at `path`, which did not exist.
    pub fn made(&mut self, path: &str) {
        self.paths.entry(path.into()).or_insert_with(|| Some(Vec::new()));
    }

    /// `from` was renamed to `to`.
    pub fn renamed(&mut self, from: &str, to: &str, dir: bool) {
        if dir {
            self.tainted.extend([from.to_string(), to.to_string()]);
            return;
        }
        let src = self.paths.get(from).cloned().flatten();
        merge(
            self.paths.entry(to.into()).or_insert_with(|| Some(Vec::new())),
            src,
        );
    }

    /// `new` was linked to the file whose other names are `names`.
    pub fn linked(&mut self, new: &str, names: &[String]) {
        let srcs: Vec<_> = names
            .iter()
            .map(|n| self.paths.get(n).cloned().flatten())
            .collect();
        let dst = self.paths.entry(new.into()).or_insert_with(|| Some(Vec::new()));
        for s in srcs {
            merge(dst, s);
        }
    }

    /// The file at `paths` reached a persistence point holding `content`.
    pub fn synced(&mut self, paths: &[String], content: &[u8]) {
        for p in paths {
            if let Some(Some(v)) = self.paths.get_mut(p) {
                if !v.iter().any(|c| c == content) {
                    v.push(content.to_vec());
                }
            }
        }
    }

    /// The known contents of `path` at persistence points, or `None` if
    /// they are not all known.
    pub fn versions(&self, path: &str) -> Option<Vec<Vec<u8>>> {
        let under = |t: &String| path == t || path.starts_with(&format!("{t}/"));
        if self.tainted.iter().any(under) {
            return None;
        }
        self.paths.get(path).cloned().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_renames_links_and_removals() {
        let mut n = Names::default();
        n.learn(ROOT_INO, "d", 10, Kind::Dir);
        n.learn(10, "f", 11, Kind::File);
        n.learn(ROOT_INO, "g", 11, Kind::File);
        assert_eq!(n.paths_of(11), ["/d/f", "/g"]);
        assert_eq!(n.sync_path(11).as_deref(), Some("/g"));
        n.rename((ROOT_INO, "d"), (ROOT_INO, "e"));
        assert_eq!(n.paths_of(11), ["/e/f", "/g"]);
        n.forget(ROOT_INO, "g");
        assert_eq!(n.sync_path(11).as_deref(), Some("/e/f"));
        // Renamed over: the old target's names go.
        n.learn(ROOT_INO, "x", 12, Kind::File);
        n.rename((10, "f"), (ROOT_INO, "x"));
        assert_eq!(n.paths_of(11), ["/x"]);
        assert!(n.paths_of(12).is_empty());
        n.forget(ROOT_INO, "e");
        assert_eq!(n.lookup(10, "f"), None);
        assert_eq!(n.path(ROOT_INO, "y").as_deref(), Some("/y"));
    }

    #[test]
    fn history_is_known_only_for_paths_made_in_the_run() {
        let mut h = History::default();
        h.existing("/old");
        h.made("/new");
        h.synced(&["/old".into(), "/new".into()], b"v1");
        assert_eq!(h.versions("/old"), None);
        assert_eq!(h.versions("/new"), Some(vec![b"v1".to_vec()]));
        h.renamed("/old", "/new", false);
        assert_eq!(h.versions("/new"), None, "the old file's contents are unknown");
        h.made("/a");
        h.renamed("/d", "/e", true);
        h.made("/e/b");
        assert_eq!(h.versions("/e/b"), None, "under a renamed directory");
        assert_eq!(h.versions("/a"), Some(vec![]));
    }
}
