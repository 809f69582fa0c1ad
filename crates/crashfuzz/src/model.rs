//! The reference model of the file tree a workload builds: what each path
//! holds after every successful operation. The recorder applies an
//! operation to the model only when the file system accepted it, so the
//! model needs no error rules of its own, except setxattr(2)'s (see
//! `Model::xattrs_after_set`: an operation's outcome is foreseen before
//! the file system answers).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::content::Content;
use crate::oracle::{Node as State, Xattrs};
use crate::workload::{pattern, xattr_value, Op, XattrHow};

/// The permission bits [`crate::record::run_op`] creates files with
/// (`Fs::create_path`); workloads have no chmod, so they never change.
pub const FILE_PERM: u16 = 0o644;

/// What a node is.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
}

#[derive(Clone, Debug)]
enum Node {
    /// Shared, so that cloning the model (for an operation's outcome,
    /// [`Model::after`]) does not copy contents; a change copies only the
    /// pages it touches ([`Content`]).
    File(Arc<Content>),
    Dir(BTreeMap<String, u64>),
    Symlink(String),
}

/// The model tree: nodes by id, names in directories (hard links share a
/// node), open descriptors (each names a node, which outlives its names
/// while open), and extended attributes by node.
#[derive(Clone, Debug)]
pub struct Model {
    nodes: BTreeMap<u64, Node>,
    next: u64,
    /// Each node's extended attributes (none: no entry). They are the
    /// inode's (setxattr(2)): hard links share them, a rename carries
    /// them, and once the last name is gone they are seen nowhere (a node
    /// made later under that name has a new id, and none).
    xattrs: BTreeMap<u64, Xattrs>,
    fds: BTreeMap<u32, u64>,
    /// Names each node lost during the run (unlink, rename away): a crash
    /// may undo the loss, so a write through a descriptor shows there.
    former: BTreeMap<u64, std::collections::BTreeSet<String>>,
}

/// Root node id.
const ROOT: u64 = 1;

impl Default for Model {
    fn default() -> Self {
        let mut nodes = BTreeMap::new();
        nodes.insert(ROOT, Node::Dir(BTreeMap::new()));
        Model {
            nodes,
            next: 2,
            xattrs: BTreeMap::new(),
            fds: BTreeMap::new(),
            former: BTreeMap::new(),
        }
    }
}

fn split(path: &str) -> Option<(&str, &str)> {
    let i = path.rfind('/')?;
    Some((&path[..i], &path[i + 1..]))
}

impl Model {
    /// The node id at `path`.
    pub fn lookup(&self, path: &str) -> Option<u64> {
        let mut cur = ROOT;
        for name in path.split('/').filter(|s| !s.is_empty()) {
            match self.nodes.get(&cur)? {
                Node::Dir(e) => cur = *e.get(name)?,
                _ => return None,
            }
        }
        Some(cur)
    }

    fn dir_mut(&mut self, path: &str) -> Option<&mut BTreeMap<String, u64>> {
        let id = self.lookup(path)?;
        match self.nodes.get_mut(&id)? {
            Node::Dir(e) => Some(e),
            _ => None,
        }
    }

    /// The content of the file at `path`.
    pub fn content(&self, path: &str) -> Option<Vec<u8>> {
        self.shared_content(path).map(|c| c.to_vec())
    }

    /// The content of the file at `path`, shared with the model (no copy).
    pub fn shared_content(&self, path: &str) -> Option<Arc<Content>> {
        match self.nodes.get(&self.lookup(path)?)? {
            Node::File(c) => Some(c.clone()),
            _ => None,
        }
    }

    /// Every file's path and content, shared with the model (no copy).
    pub fn files(&self) -> Vec<(String, Arc<Content>)> {
        self.names()
            .into_iter()
            .filter_map(|(p, id)| match self.nodes.get(&id)? {
                Node::File(c) => Some((p, c.clone())),
                _ => None,
            })
            .collect()
    }

    /// The number of names of node `id` (a file's link count).
    fn link_count(&self, id: u64) -> u16 {
        let n = self
            .nodes
            .values()
            .filter_map(|n| match n {
                Node::Dir(e) => Some(e.values().filter(|c| **c == id).count()),
                _ => None,
            })
            .sum::<usize>();
        u16::try_from(n).unwrap_or(u16::MAX)
    }

    /// Node `id`'s attributes after setxattr(2) of `name` to `value` with
    /// `how`, or `None` where Linux refuses the call: `XATTR_CREATE` of a
    /// name present (EEXIST), `XATTR_REPLACE` of one absent (ENODATA), a
    /// value over `XATTR_SIZE_MAX` (E2BIG), a set that outgrows its block
    /// (ENOSPC: MQFS keeps every attribute in one block,
    /// `mqfs::layout::XATTR_SPACE`). The promises widen to an operation's
    /// outcome when it starts, before the file system answers, so the
    /// model must not foresee a state a refused call cannot leave. (A name
    /// the file system refuses, EOPNOTSUPP or ERANGE, is foreseen as set:
    /// that only widens.)
    fn xattrs_after_set(&self, id: u64, name: &str, value: Vec<u8>, how: XattrHow) -> Option<Xattrs> {
        let mut x = (*self.xattrs_of(id)).clone();
        let exists = x.contains_key(name);
        if (how == XattrHow::Create && exists) || (how == XattrHow::Replace && !exists) {
            return None;
        }
        if value.len() > mqfs::layout::XATTR_SIZE_MAX {
            return None;
        }
        x.insert(name.to_string(), value);
        (mqfs::layout::xattr_bytes(&x) <= mqfs::layout::XATTR_SPACE).then(|| Arc::new(x))
    }

    /// The extended attributes of node `id` (empty if none).
    pub fn xattrs_of(&self, id: u64) -> Xattrs {
        self.xattrs.get(&id).cloned().unwrap_or_default()
    }

    /// What the oracle sees at `path`: kind, for a file its content,
    /// link count and permission bits, and for a file or directory its
    /// extended attributes; `None` if there is no such name.
    pub fn state(&self, path: &str) -> Option<State> {
        let id = self.lookup(path)?;
        Some(match self.nodes.get(&id)? {
            Node::File(c) => State::File {
                content: Some(c.clone()),
                nlink: Some(self.link_count(id)),
                perm: Some(FILE_PERM),
                xattrs: Some(self.xattrs_of(id)),
            },
            Node::Dir(_) => State::Dir {
                xattrs: Some(self.xattrs_of(id)),
            },
            Node::Symlink(t) => State::Symlink(t.clone()),
        })
    }

    /// `path` and every path under it.
    pub fn subtree(&self, path: &str) -> Vec<String> {
        let mut out = vec![path.to_string()];
        let prefix = format!("{path}/");
        if self.kind(path) == Some(Kind::Dir) {
            out.extend(
                self.names()
                    .into_iter()
                    .map(|x| x.0)
                    .filter(|p| p.starts_with(&prefix)),
            );
        }
        out
    }

    /// The paths whose state `op` can change: the paths it names, what is
    /// under them (a directory's rename moves its subtree) and every
    /// other name of a file it changes (content and link count are the
    /// inode's, shared by its hard links).
    pub fn affected(&self, op: &Op) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for p in op.changed_paths() {
            out.extend(self.subtree(p));
            out.extend(self.aliases(p));
        }
        if let Op::Fdwrite(fd, ..) = op {
            // A descriptor's file: every name it has.
            out.extend(self.fd_node(*fd).map(|n| self.names_of(n)).unwrap_or_default());
        }
        if let Op::Rename(from, to) = op {
            // The subtree reappears under the new name.
            let prefix = format!("{from}/");
            for q in self.subtree(from) {
                if let Some(rest) = q.strip_prefix(&prefix) {
                    out.push(format!("{to}/{rest}"));
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// What a write through a descriptor leaves at the names its file
    /// lost during the run and does not have now: a crash may undo the
    /// unlink or rename, and the file there holds the new bytes (its link
    /// count then is not known here: unchecked).
    /// `next` is this model with `op` applied ([`Model::after`]).
    pub fn former_names_after(&self, op: &Op, next: &Model) -> Vec<(String, Option<State>)> {
        let Op::Fdwrite(fd, ..) = op else {
            return Vec::new();
        };
        let Some(id) = self.fd_node(*fd) else {
            return Vec::new();
        };
        let now = self.names_of(id);
        let Some(Node::File(c)) = next.nodes.get(&id) else {
            return Vec::new();
        };
        self.former
            .get(&id)
            .into_iter()
            .flatten()
            .filter(|p| !now.contains(p))
            .map(|p| {
                let st = State::File {
                    content: Some(c.clone()),
                    nlink: None,
                    perm: Some(FILE_PERM),
                    xattrs: Some(next.xattrs_of(id)),
                };
                (p.clone(), Some(st))
            })
            .collect()
    }

    /// This model with `op` applied, if it succeeds, leaving this one as
    /// it is (what the operation can leave names in).
    pub fn after(&self, op: &Op) -> Model {
        let mut m = self.clone();
        m.apply(op);
        m
    }

    /// The states of `paths` now.
    pub fn states(&self, paths: &[String]) -> Vec<(String, Option<State>)> {
        paths.iter().map(|p| (p.clone(), self.state(p))).collect()
    }

    /// The kind of node at `path`.
    pub fn kind(&self, path: &str) -> Option<Kind> {
        Some(match self.nodes.get(&self.lookup(path)?)? {
            Node::File(_) => Kind::File,
            Node::Dir(_) => Kind::Dir,
            Node::Symlink(_) => Kind::Symlink,
        })
    }

    /// The entries of the directory at `path`: name -> kind.
    pub fn entries(&self, path: &str) -> Option<BTreeMap<String, Kind>> {
        match self.nodes.get(&self.lookup(path)?)? {
            Node::Dir(e) => Some(
                e.iter()
                    .filter_map(|(n, id)| {
                        let k = match self.nodes.get(id)? {
                            Node::File(_) => Kind::File,
                            Node::Dir(_) => Kind::Dir,
                            Node::Symlink(_) => Kind::Symlink,
                        };
                        Some((n.clone(), k))
                    })
                    .collect(),
            ),
            _ => None,
        }
    }

    /// The node descriptor `fd` names, if open.
    pub fn fd_node(&self, fd: u32) -> Option<u64> {
        self.fds.get(&fd).copied()
    }

    /// Every name of node `id`, in path order (none once the last is
    /// gone).
    pub fn names_of(&self, id: u64) -> Vec<String> {
        let mut out: Vec<String> = self
            .names()
            .into_iter()
            .filter(|(_, i)| *i == id)
            .map(|(p, _)| p)
            .collect();
        out.sort();
        out
    }

    /// The size of the file node `id` (what fstat says).
    pub fn file_size(&self, id: u64) -> Option<u64> {
        match self.nodes.get(&id)? {
            Node::File(c) => Some(c.len() as u64),
            _ => None,
        }
    }

    /// The other names of the file at `path` (hard links), if any.
    pub fn aliases(&self, path: &str) -> Vec<String> {
        let Some(id) = self.lookup(path) else {
            return Vec::new();
        };
        if !matches!(self.nodes.get(&id), Some(Node::File(_))) {
            return Vec::new();
        }
        self.names()
            .into_iter()
            .filter(|(p, i)| p != path && *i == id)
            .map(|(p, _)| p)
            .collect()
    }

    /// Every path under the root with its node id (no contents copied).
    pub(crate) fn names(&self) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        let mut stack = vec![(String::new(), ROOT)];
        while let Some((prefix, id)) = stack.pop() {
            if let Some(Node::Dir(e)) = self.nodes.get(&id) {
                for (name, child) in e {
                    let p = format!("{prefix}/{name}");
                    if matches!(self.nodes.get(child), Some(Node::Dir(_))) {
                        stack.push((p.clone(), *child));
                    }
                    out.push((p, *child));
                }
            }
        }
        out.sort();
        out
    }

    /// Every path with its state ([`Model::state`]), the root included;
    /// and the directories among them.
    pub fn all_states(&self) -> Vec<(String, Option<State>)> {
        let mut paths = vec!["/".to_string()];
        paths.extend(self.names().into_iter().map(|x| x.0));
        self.states(&paths)
    }

    /// Every path under the root with its kind and content (a file's
    /// bytes, a symbolic link's target).
    pub fn tree(&self) -> Vec<(String, Kind, Option<Vec<u8>>)> {
        self.names()
            .into_iter()
            .filter_map(|(p, id)| match self.nodes.get(&id)? {
                Node::File(c) => Some((p, Kind::File, Some(c.to_vec()))),
                Node::Symlink(t) => Some((p, Kind::Symlink, Some(t.as_bytes().to_vec()))),
                Node::Dir(_) => Some((p, Kind::Dir, None)),
            })
            .collect()
    }

    fn insert(&mut self, path: &str, node: Node) {
        let Some((dir, name)) = split(path) else { return };
        let id = self.next;
        self.next += 1;
        self.nodes.insert(id, node);
        if let Some(d) = self.dir_mut(dir) {
            d.insert(name.to_string(), id);
        }
    }

    fn remove_name(&mut self, path: &str) -> Option<u64> {
        let (dir, name) = split(path)?;
        self.dir_mut(dir)?.remove(name)
    }

    /// Writes `len` bytes of `seed`'s pattern at `off` into file node `id`.
    fn write_node(&mut self, id: u64, off: u64, len: u64, seed: u8) {
        if let Some(Node::File(c)) = self.nodes.get_mut(&id) {
            Arc::make_mut(c).write_with(off, len, |k| pattern(seed, k));
        }
    }

    /// Applies an operation the file system accepted.
    pub fn apply(&mut self, op: &Op) {
        match op {
            Op::Open(fd, p) => {
                if let Some(id) = self.lookup(p) {
                    self.fds.insert(*fd, id);
                }
            }
            Op::Close(fd) => {
                self.fds.remove(fd);
            }
            Op::Fdwrite(fd, off, len, seed) => {
                if let Some(id) = self.fd_node(*fd) {
                    self.write_node(id, *off, *len, *seed);
                }
            }
            Op::Fdfsync(_) | Op::Fdfdatasync(_) | Op::Fstat(_) => {}
            Op::Create(p) => self.insert(p, Node::File(Arc::default())),
            Op::Mkdir(p) => self.insert(p, Node::Dir(BTreeMap::new())),
            Op::Symlink(p, t) => self.insert(p, Node::Symlink(t.clone())),
            // An O_DIRECT write and a store through a mapping change the
            // bytes as a write does (a store never lies past the size: the
            // file system refused it).
            Op::Write(p, off, len, seed) | Op::Dwrite(p, off, len, seed) | Op::Mwrite(p, off, len, seed) => {
                if let Some(id) = self.lookup(p) {
                    self.write_node(id, *off, *len, *seed);
                }
            }
            Op::Fallocate(p, mode, off, len) => {
                if let Some(id) = self.lookup(p) {
                    if let Some(Node::File(c)) = self.nodes.get_mut(&id) {
                        mode.apply(Arc::make_mut(c), *off, *len);
                    }
                }
            }
            Op::Setxattr(p, name, len, seed, how) => {
                if let Some(id) = self.lookup(p) {
                    if let Some(x) = self.xattrs_after_set(id, name, xattr_value(*len, *seed), *how) {
                        self.xattrs.insert(id, x);
                    }
                }
            }
            Op::Removexattr(p, name) => {
                if let Some(id) = self.lookup(p) {
                    if let Some(x) = self.xattrs.get_mut(&id) {
                        Arc::make_mut(x).remove(name);
                        if x.is_empty() {
                            self.xattrs.remove(&id);
                        }
                    }
                }
            }
            Op::Truncate(p, size) => {
                if let Some(id) = self.lookup(p) {
                    if let Some(Node::File(c)) = self.nodes.get_mut(&id) {
                        Arc::make_mut(c).set_len(*size as usize);
                    }
                }
            }
            Op::Link(from, to) => {
                if let (Some(id), Some((dir, name))) = (self.lookup(from), split(to)) {
                    if let Some(d) = self.dir_mut(dir) {
                        d.insert(name.to_string(), id);
                    }
                }
            }
            Op::Unlink(p) | Op::Rmdir(p) => {
                if let Some(id) = self.remove_name(p) {
                    self.former.entry(id).or_default().insert(p.clone());
                }
            }
            Op::Rename(from, to) => {
                // POSIX: two names of the same file: rename does nothing.
                if from == to || (self.lookup(from).is_some() && self.lookup(from) == self.lookup(to)) {
                    return;
                }
                if let Some(id) = self.remove_name(from) {
                    self.former.entry(id).or_default().insert(from.clone());
                    if let Some((dir, name)) = split(to) {
                        if let Some(d) = self.dir_mut(dir) {
                            d.insert(name.to_string(), id);
                        }
                    }
                }
            }
            Op::Fsync(_)
            | Op::Fdatasync(_)
            | Op::Fatomic(_)
            | Op::Fdataatomic(_)
            | Op::Fbarrier(_)
            | Op::Fdatabarrier(_)
            | Op::Sync
            | Op::Sleep(_)
            | Op::WaitFor(_)
            | Op::Sfr(..)
            | Op::Msync(..) => {}
            // Setup only; the recorder applies it as the write it became.
            Op::Fill(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_descriptor_names_the_file_not_the_path() {
        let mut m = Model::default();
        m.apply(&Op::Create("/f".into()));
        m.apply(&Op::Open(1, "/f".into()));
        let node = m.fd_node(1).unwrap();
        m.apply(&Op::Link("/f".into(), "/g".into()));
        assert_eq!(m.names_of(node), vec!["/f", "/g"]);
        m.apply(&Op::Rename("/f".into(), "/h".into()));
        m.apply(&Op::Fdwrite(1, 1, 1, 0));
        assert_eq!(m.content("/h").unwrap(), vec![0, b'b']);
        m.apply(&Op::Unlink("/g".into()));
        m.apply(&Op::Unlink("/h".into()));
        // Nameless, still open: written through the descriptor, seen
        // nowhere in the tree.
        m.apply(&Op::Fdwrite(1, 0, 3, 0));
        assert!(m.names_of(node).is_empty());
        assert_eq!(m.file_size(node), Some(3));
        assert!(m.tree().is_empty());
        m.apply(&Op::Close(1));
        assert_eq!(m.fd_node(1), None);
    }

    #[test]
    fn direct_and_mapped_writes_change_bytes_and_range_syncs_nothing() {
        let mut m = Model::default();
        m.apply(&Op::Create("/f".into()));
        m.apply(&Op::Dwrite("/f".into(), 4, 2, 0));
        assert_eq!(m.content("/f").unwrap(), vec![0, 0, 0, 0, b'e', b'f']);
        m.apply(&Op::Mwrite("/f".into(), 0, 2, 0));
        assert_eq!(m.content("/f").unwrap(), vec![b'a', b'b', 0, 0, b'e', b'f']);
        let before = m.tree();
        m.apply(&Op::Sfr("/f".into(), 0, 0));
        m.apply(&Op::Msync("/f".into(), 0, 6));
        m.apply(&Op::Fsync("/".into()));
        assert_eq!(m.tree(), before);
        assert_eq!(m.lookup("/"), Some(ROOT));
        assert_eq!(m.kind("/"), Some(Kind::Dir));
    }

    #[test]
    fn links_share_content_and_renames_move() {
        let mut m = Model::default();
        m.apply(&Op::Mkdir("/a".into()));
        m.apply(&Op::Create("/a/f".into()));
        m.apply(&Op::Link("/a/f".into(), "/g".into()));
        m.apply(&Op::Write("/g".into(), 2, 3, 0));
        assert_eq!(m.content("/a/f").unwrap(), vec![0, 0, b'c', b'd', b'e']);
        m.apply(&Op::Rename("/a".into(), "/b".into()));
        assert_eq!(m.kind("/b/f"), Some(Kind::File));
        assert_eq!(m.lookup("/a"), None);
        m.apply(&Op::Truncate("/b/f".into(), 1));
        assert_eq!(m.content("/g").unwrap(), vec![0]);
        let t = m.tree();
        assert_eq!(
            t.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(),
            vec!["/b", "/b/f", "/g"]
        );
    }

    #[test]
    fn fallocate_modes_change_bytes_and_size_as_linux() {
        use crate::workload::Falloc;
        let run = |mode: Falloc, off: u64, len: u64| {
            let mut m = Model::default();
            m.apply(&Op::Create("/f".into()));
            m.apply(&Op::Write("/f".into(), 0, 100, 1));
            m.apply(&Op::Fallocate("/f".into(), mode, off, len));
            m.content("/f").unwrap()
        };
        let orig = run(Falloc::KeepSize, 0, 500);
        assert_eq!(orig.len(), 100);
        assert!(orig.iter().all(|&b| b != 0));
        let a = run(Falloc::Alloc, 50, 100);
        assert_eq!(
            (a.len(), &a[..100], a[100..].iter().all(|&b| b == 0)),
            (150, &orig[..], true)
        );
        assert_eq!(run(Falloc::Alloc, 0, 10), orig);
        let p = run(Falloc::PunchHole, 90, 100);
        assert_eq!((p.len(), &p[..90], &p[90..]), (100, &orig[..90], &[0u8; 10][..]));
        let z = run(Falloc::ZeroRange, 10, 200);
        assert_eq!(
            (z.len(), &z[..10], z[10..].iter().all(|&b| b == 0)),
            (210, &orig[..10], true)
        );
        let zk = run(Falloc::ZeroRangeKeepSize, 10, 200);
        assert_eq!((zk.len(), zk[10..].iter().all(|&b| b == 0)), (100, true));
    }
}
