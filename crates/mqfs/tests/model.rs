//! A model-based property test: random operation sequences run against an
//! in-memory reference model and against MQFS in each mode, with unmount
//! and mount in between, and the two must agree on every result and on the
//! whole tree.
//!
//! # The semantics the model follows
//!
//! POSIX as Linux applies it, with MQFS's choices where POSIX leaves one:
//!
//! - Paths are absolute and never follow symlinks. Walking through a
//!   non-directory gives `NotDir`, a missing component `NotFound`. The
//!   harness resolves the parent directory (or the file) first, then calls
//!   the inode-based operation, so a missing parent is `NotFound` whatever
//!   the name.
//! - Names: longer than 255 bytes -> `NameTooLong`; empty or containing
//!   '/' -> `Invalid`. The name is checked before the parent's type.
//! - create / mkdir / symlink of an existing name -> `Exists`; in a
//!   non-directory -> `NotDir`. A symlink target must be 1..=4096 bytes
//!   (else `Invalid`, checked before the name); targets of up to 128 bytes
//!   live in the inode, longer ones take one block.
//! - link of a directory -> `IsDir` (Linux says EPERM; MQFS says EISDIR),
//!   checked before the new name's existence (`Exists`).
//! - unlink of a directory -> `IsDir`; rmdir of a non-directory -> `NotDir`;
//!   rmdir of a non-empty directory -> `NotEmpty`.
//! - rename: a missing source -> `NotFound`; onto itself, or onto another
//!   name of the same inode -> success, nothing changes; a directory into
//!   itself or its own subtree -> `Invalid` (checked before the target); a
//!   file over a file replaces it (the replaced inode loses a link); a
//!   directory over an empty directory replaces it; over a non-empty one ->
//!   `NotEmpty`; a file over a directory -> `IsDir`; a directory over a
//!   file -> `NotDir`.
//! - write at any offset extends the file (holes read as zeros); a
//!   zero-length write returns 0 "and has no other results" (POSIX
//!   `write`): it does not extend the file. Writing a directory -> `IsDir`,
//!   a symlink -> `Invalid`. truncate shrinks or extends with zeros (same
//!   errors). A file holds exactly the blocks a write touched and a
//!   shrinking truncate kept, plus its extent-tree blocks (at most one for
//!   the extent counts generated here).
//! - fsync and sync change nothing visible; Remount (clean unmount, probe,
//!   mount) keeps everything.
//!
//! # The tests
//!
//! - `random_operations_match_the_model_across_remounts`: sequences of up
//!   to 5 creates and 1..40 random operations (Remount among them), each
//!   on one of two cores (in `mq` mode each core journals in its own
//!   area), on a 16384-block device; after every operation the whole tree
//!   (`common::snapshot`: readdir of every directory with names and types,
//!   getattr, full contents, readlink, hard-link groups, and the bitmaps
//!   against the blocks and inodes reachable) must equal the model's, and
//!   again after a final remount.
//! - `concurrent_threads_on_disjoint_subtrees_match_the_model`: 2 to 4
//!   simulated threads on their own cores, each with its own sequence on
//!   its own subtree `/t<i>` and its own names in a shared directory; the
//!   subtrees are disjoint, so every result and the final tree are the
//!   model's whatever the interleaving.
//!
//! Every mode in `Mode::ALL` runs (a mode whose mount says `Unsupported`
//! is skipped). A failing case prints its shrunk operation list (the
//! replay). Knobs: `MQFS_MODEL_CASES` (cases per mode: default 64, and 24
//! for the concurrent test), `MQFS_MODEL_SEED` (default: proptest's fixed
//! deterministic seed), `MQFS_MODES` (e.g. `none,horae`),
//! `MQFS_MODEL_STATS=1` (print each operation's outcomes).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::mem::discriminant;
use std::rc::Rc;
use std::time::Instant;

use common::{diff, modes, remount, setup, snapshot, Entry, Snap};
use mqfs::{Ctx, Fs, FsError, Mode};
use pcie_sim::{join_all, Machine};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};

/// Device size: small, but far from full for these sequences.
const BLOCKS: u64 = 16384;
/// Names the generator draws from (collisions are the point).
const NAMES: [&str; 4] = ["a", "b", "c", "d"];

// ---- the reference model ----

type Id = usize;
const ROOT_ID: Id = 0;

#[derive(Clone, Debug)]
enum Kind {
    Dir {
        entries: BTreeMap<String, Id>,
        parent: Id,
    },
    File {
        data: Vec<u8>,
        blocks: BTreeSet<u64>,
    },
    Symlink {
        target: String,
    },
}

/// An inode: its kind and, for non-directories, its link count (a
/// directory's is 2 + its subdirectories).
#[derive(Clone, Debug)]
struct Node {
    kind: Kind,
    links: u16,
}

#[derive(Clone, Debug)]
struct Model {
    nodes: BTreeMap<Id, Node>,
    next: Id,
}

fn invalid() -> FsError {
    FsError::Invalid(String::new())
}

fn check_name(name: &str) -> Result<(), FsError> {
    if name.len() > 255 {
        return Err(FsError::NameTooLong);
    }
    if name.is_empty() || name.contains('/') || name.contains('\0') {
        return Err(invalid());
    }
    Ok(())
}

fn is_dot(name: &str) -> bool {
    name == "." || name == ".."
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// (parent, name) of a path other than "/".
fn split(path: &str) -> (String, String) {
    let (d, n) = path.rsplit_once('/').expect("absolute path");
    (if d.is_empty() { "/".into() } else { d.into() }, n.into())
}

/// Write payload: never zero, so holes and written bytes differ.
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| ((i as u32 * 31 + seed as u32) % 251 + 1) as u8)
        .collect()
}

fn target(len: usize, seed: u8) -> String {
    const C: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789/._-";
    (0..len)
        .map(|i| C[(i * 7 + seed as usize) % C.len()] as char)
        .collect()
}

impl Model {
    fn new() -> Model {
        let root = Node {
            kind: Kind::Dir {
                entries: BTreeMap::new(),
                parent: ROOT_ID,
            },
            links: 2,
        };
        Model {
            nodes: BTreeMap::from([(ROOT_ID, root)]),
            next: 1,
        }
    }

    fn entries(&self, id: Id) -> Option<&BTreeMap<String, Id>> {
        match &self.nodes[&id].kind {
            Kind::Dir { entries, .. } => Some(entries),
            _ => None,
        }
    }

    fn entries_mut(&mut self, id: Id) -> &mut BTreeMap<String, Id> {
        match &mut self.nodes.get_mut(&id).expect("live node").kind {
            Kind::Dir { entries, .. } => entries,
            _ => panic!("not a directory"),
        }
    }

    fn is_dir(&self, id: Id) -> bool {
        self.entries(id).is_some()
    }

    fn resolve(&self, path: &str) -> Result<Id, FsError> {
        let mut cur = ROOT_ID;
        for comp in path.split('/').filter(|s| !s.is_empty()) {
            let ents = self.entries(cur).ok_or(FsError::NotDir)?;
            check_name(comp)?;
            cur = *ents.get(comp).ok_or(FsError::NotFound)?;
        }
        Ok(cur)
    }

    /// True if `anc` is `id` or one of its ancestors.
    fn is_ancestor(&self, anc: Id, mut id: Id) -> bool {
        loop {
            if id == anc {
                return true;
            }
            if id == ROOT_ID {
                return false;
            }
            id = match &self.nodes[&id].kind {
                Kind::Dir { parent, .. } => *parent,
                _ => return false,
            };
        }
    }

    fn make(&mut self, dir: Id, name: &str, kind: Kind) -> Result<(), FsError> {
        check_name(name)?;
        let ents = self.entries(dir).ok_or(FsError::NotDir)?;
        if is_dot(name) || ents.contains_key(name) {
            return Err(FsError::Exists);
        }
        let kind = match kind {
            Kind::Dir { entries, .. } => Kind::Dir { entries, parent: dir },
            k => k,
        };
        let id = self.next;
        self.next += 1;
        self.nodes.insert(id, Node { kind, links: 1 });
        self.entries_mut(dir).insert(name.to_string(), id);
        Ok(())
    }

    fn link(&mut self, src: Id, dir: Id, name: &str) -> Result<(), FsError> {
        check_name(name)?;
        if self.is_dir(src) {
            return Err(FsError::IsDir);
        }
        let ents = self.entries(dir).ok_or(FsError::NotDir)?;
        if is_dot(name) || ents.contains_key(name) {
            return Err(FsError::Exists);
        }
        self.entries_mut(dir).insert(name.to_string(), src);
        self.nodes.get_mut(&src).expect("live").links += 1;
        Ok(())
    }

    fn drop_link(&mut self, id: Id) {
        let n = self.nodes.get_mut(&id).expect("live");
        n.links -= 1;
        if n.links == 0 || matches!(n.kind, Kind::Dir { .. }) {
            self.nodes.remove(&id);
        }
    }

    fn remove(&mut self, dir: Id, name: &str, want_dir: bool) -> Result<(), FsError> {
        check_name(name)?;
        if is_dot(name) {
            return Err(invalid());
        }
        let ents = self.entries(dir).ok_or(FsError::NotDir)?;
        let id = *ents.get(name).ok_or(FsError::NotFound)?;
        match (want_dir, self.is_dir(id)) {
            (true, false) => return Err(FsError::NotDir),
            (false, true) => return Err(FsError::IsDir),
            _ => {}
        }
        if want_dir && !self.entries(id).expect("dir").is_empty() {
            return Err(FsError::NotEmpty);
        }
        self.entries_mut(dir).remove(name);
        self.drop_link(id);
        Ok(())
    }

    fn rename(&mut self, sd: Id, sn: &str, dd: Id, dn: &str) -> Result<(), FsError> {
        check_name(sn)?;
        check_name(dn)?;
        if is_dot(sn) || is_dot(dn) {
            return Err(invalid());
        }
        if !self.is_dir(dd) {
            return Err(FsError::NotDir);
        }
        let id = *self
            .entries(sd)
            .ok_or(FsError::NotDir)?
            .get(sn)
            .ok_or(FsError::NotFound)?;
        if sd == dd && sn == dn {
            return Ok(());
        }
        let moving_dir = self.is_dir(id);
        if moving_dir && self.is_ancestor(id, dd) {
            return Err(invalid());
        }
        let target = self.entries(dd).expect("dir").get(dn).copied();
        if let Some(t) = target {
            if t == id {
                return Ok(());
            }
            match (moving_dir, self.is_dir(t)) {
                (true, false) => return Err(FsError::NotDir),
                (false, true) => return Err(FsError::IsDir),
                _ => {}
            }
            if self.entries(t).is_some_and(|e| !e.is_empty()) {
                return Err(FsError::NotEmpty);
            }
            self.drop_link(t);
        }
        self.entries_mut(sd).remove(sn);
        self.entries_mut(dd).insert(dn.to_string(), id);
        if let Kind::Dir { parent, .. } = &mut self.nodes.get_mut(&id).expect("live").kind {
            *parent = dd;
        }
        Ok(())
    }

    fn write(&mut self, id: Id, off: u64, buf: &[u8]) -> Result<(), FsError> {
        match &mut self.nodes.get_mut(&id).expect("live").kind {
            Kind::Dir { .. } => Err(FsError::IsDir),
            Kind::Symlink { .. } => Err(invalid()),
            Kind::File { data, blocks } => {
                if buf.is_empty() {
                    return Ok(());
                }
                let off = off as usize;
                let end = off + buf.len();
                if data.len() < end {
                    data.resize(end, 0);
                }
                data[off..end].copy_from_slice(buf);
                blocks.extend(off as u64 / 4096..=(end as u64 - 1) / 4096);
                Ok(())
            }
        }
    }

    fn truncate(&mut self, id: Id, size: u64) -> Result<(), FsError> {
        match &mut self.nodes.get_mut(&id).expect("live").kind {
            Kind::Dir { .. } => Err(FsError::IsDir),
            Kind::Symlink { .. } => Err(invalid()),
            Kind::File { data, blocks } => {
                if size < data.len() as u64 {
                    let keep = size.div_ceil(4096);
                    blocks.retain(|b| *b < keep);
                }
                data.resize(size as usize, 0);
                Ok(())
            }
        }
    }

    /// Applies a step, with the same check order as the harness and MQFS.
    fn apply(&mut self, s: &Step) -> Result<(), FsError> {
        let file = || Kind::File {
            data: Vec::new(),
            blocks: BTreeSet::new(),
        };
        let dir = || Kind::Dir {
            entries: BTreeMap::new(),
            parent: ROOT_ID,
        };
        match s {
            Step::Create(d, n) => {
                let d = self.resolve(d)?;
                self.make(d, n, file())
            }
            Step::Mkdir(d, n) => {
                let d = self.resolve(d)?;
                self.make(d, n, dir())
            }
            Step::Symlink(d, n, t) => {
                let d = self.resolve(d)?;
                if t.is_empty() || t.len() > 4096 {
                    return Err(invalid());
                }
                self.make(d, n, Kind::Symlink { target: t.clone() })
            }
            Step::Write(p, off, len, seed) => {
                let id = self.resolve(p)?;
                self.write(id, *off, &pattern(*len, *seed))
            }
            Step::Truncate(p, size) => {
                let id = self.resolve(p)?;
                self.truncate(id, *size)
            }
            Step::Link(src, d, n) => {
                let s = self.resolve(src)?;
                let d = self.resolve(d)?;
                self.link(s, d, n)
            }
            Step::Unlink(d, n) => {
                let d = self.resolve(d)?;
                self.remove(d, n, false)
            }
            Step::Rmdir(d, n) => {
                let d = self.resolve(d)?;
                self.remove(d, n, true)
            }
            Step::Rename(sd, sn, dd, dn) => {
                let s = self.resolve(sd)?;
                let d = self.resolve(dd)?;
                self.rename(s, sn, d, dn)
            }
            Step::Fsync(p) => self.resolve(p).map(drop),
            Step::Sync | Step::Remount => Ok(()),
        }
    }

    /// Every path below `root` (not `root` itself), with its inode, in
    /// order.
    fn paths_under(&self, root: &str) -> Vec<(String, Id)> {
        let Ok(r) = self.resolve(root) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut stack = vec![(root.to_string(), r)];
        while let Some((p, id)) = stack.pop() {
            if let Some(ents) = self.entries(id) {
                for (n, c) in ents.iter().rev() {
                    let cp = join(&p, n);
                    out.push((cp.clone(), *c));
                    stack.push((cp, *c));
                }
            }
        }
        out.sort();
        out
    }

    /// The tree as [`snapshot`] sees it, and the blocks each file and
    /// symlink must hold.
    fn snap(&self) -> (Snap, BTreeMap<String, u64>) {
        let mut snap = Snap::default();
        let mut blocks = BTreeMap::new();
        let mut names: BTreeMap<Id, Vec<String>> = BTreeMap::new();
        for (p, id) in self.paths_under("/") {
            let n = &self.nodes[&id];
            let e = match &n.kind {
                Kind::Dir { entries, .. } => Entry::Dir {
                    links: 2 + entries.values().filter(|c| self.is_dir(**c)).count() as u16,
                },
                Kind::File { data, blocks: b } => {
                    blocks.insert(p.clone(), b.len() as u64);
                    names.entry(id).or_default().push(p.clone());
                    Entry::File {
                        links: n.links,
                        size: data.len() as u64,
                        data: data.clone(),
                    }
                }
                Kind::Symlink { target } => {
                    blocks.insert(p.clone(), (target.len() > 128) as u64);
                    names.entry(id).or_default().push(p.clone());
                    Entry::Symlink {
                        links: n.links,
                        size: target.len() as u64,
                        target: target.clone(),
                    }
                }
            };
            snap.entries.insert(p, e);
        }
        snap.groups = names.into_values().filter(|v| v.len() > 1).collect();
        (snap, blocks)
    }
}

/// Compares the whole tree of `fs` with the model.
async fn check(fs: &Fs, c: Ctx, model: &Model) -> Result<(), String> {
    let got = snapshot(fs, c).await?;
    let (want, blocks) = model.snap();
    let d = diff(&want, &got);
    if !d.is_empty() {
        return Err(d.join("\n"));
    }
    for (p, want) in blocks {
        let have = got.blocks[&p];
        let file = matches!(got.entries.get(&p), Some(Entry::File { .. }));
        // A file may also hold an extent-tree block (a leaf).
        if have < want || have > want + file as u64 {
            return Err(format!("{p}: holds {have} blocks, the model says {want}"));
        }
    }
    Ok(())
}

// ---- operations: as generated, and made concrete against the model ----

/// Picks a path: the n-th existing one of the kind the operation wants
/// (a file to write, a directory to rmdir...), the n-th existing one of
/// any kind, or one of a fixed universe (names a..d, 1 to 3 levels) that
/// may well not exist.
#[derive(Clone, Copy, Debug)]
enum Sel {
    Typed(u8),
    Existing(u8),
    Fixed(u8),
}

/// The kind of path an operation wants from `Sel::Typed`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    Any,
    File,
    NonDir,
    Dir,
}

/// A name for a new entry.
#[derive(Clone, Copy, Debug)]
enum Name {
    Short(u8),
    /// 255 bytes: the longest allowed.
    Max,
    /// 256 bytes.
    TooLong,
    Empty,
    Slash,
}

/// Where a new entry goes: a name in a directory, or a whole path (an
/// existing one makes `Exists` and rename-over cases).
#[derive(Clone, Copy, Debug)]
enum Dst {
    In(Sel, Name),
    Path(Sel),
}

/// Operations on the parts of the tree `Scope` gives a thread.
#[derive(Clone, Debug)]
enum Op {
    CreateFile(Dst),
    Mkdir(Dst),
    /// (file, offset, length, seed byte).
    Write(Sel, u32, u32, u8),
    Truncate(Sel, u32),
    Link(Sel, Dst),
    Unlink(Sel),
    Rmdir(Sel),
    Rename(Sel, Dst),
    /// (where, target length, seed).
    Symlink(Dst, u16, u8),
    Fsync(Sel),
    Sync,
    Remount,
    /// The concurrent variant's shared directory: create, write or unlink
    /// one of this thread's names there.
    SharedCreate(u8),
    SharedWrite(u8, u32, u32, u8),
    SharedUnlink(u8),
}

/// An operation with its paths decided.
#[derive(Clone, Debug)]
enum Step {
    Create(String, String),
    Mkdir(String, String),
    Symlink(String, String, String),
    Write(String, u64, usize, u8),
    Truncate(String, u64),
    Link(String, String, String),
    Unlink(String, String),
    Rmdir(String, String),
    Rename(String, String, String, String),
    Fsync(String),
    Sync,
    Remount,
}

/// The part of the tree a sequence works on: everything below `root` (""
/// for the whole tree), and maybe a shared directory where it owns the
/// names starting with `prefix`.
#[derive(Clone, Debug)]
struct Scope {
    root: String,
    shared: Option<(String, String)>,
}

impl Scope {
    fn whole() -> Scope {
        Scope {
            root: String::new(),
            shared: None,
        }
    }

    fn root_path(&self) -> String {
        if self.root.is_empty() {
            "/".into()
        } else {
            self.root.clone()
        }
    }

    /// Fixed paths below the root: a..d, 1 to `depth` levels.
    fn universe(&self, depth: usize) -> Vec<String> {
        let mut all = Vec::new();
        let mut level = vec![self.root.clone()];
        for _ in 0..depth {
            level = level
                .iter()
                .flat_map(|p| NAMES.iter().map(move |n| format!("{p}/{n}")))
                .collect();
            all.extend(level.iter().cloned());
        }
        all
    }

    fn path(&self, m: &Model, s: Sel, want: Want) -> String {
        let existing = m.paths_under(&self.root_path());
        let typed: Vec<&(String, Id)> = existing
            .iter()
            .filter(|(_, id)| match want {
                Want::Any => true,
                Want::File => matches!(m.nodes[id].kind, Kind::File { .. }),
                Want::NonDir => !m.is_dir(*id),
                Want::Dir => m.is_dir(*id),
            })
            .collect();
        match s {
            Sel::Typed(n) if !typed.is_empty() => typed[n as usize % typed.len()].0.clone(),
            Sel::Typed(n) | Sel::Existing(n) if !existing.is_empty() => {
                existing[n as usize % existing.len()].0.clone()
            }
            Sel::Typed(n) | Sel::Existing(n) | Sel::Fixed(n) => {
                let u = self.universe(3);
                u[n as usize % u.len()].clone()
            }
        }
    }

    fn dir(&self, m: &Model, s: Sel) -> String {
        match s {
            Sel::Typed(n) | Sel::Existing(n) => {
                let mut dirs = vec![self.root_path()];
                dirs.extend(
                    m.paths_under(&self.root_path())
                        .into_iter()
                        .filter(|(_, id)| m.is_dir(*id))
                        .map(|(p, _)| p),
                );
                dirs[n as usize % dirs.len()].clone()
            }
            Sel::Fixed(n) => {
                let mut u = vec![self.root_path()];
                u.extend(self.universe(2));
                u[n as usize % u.len()].clone()
            }
        }
    }

    fn name(n: Name) -> String {
        match n {
            Name::Short(i) => NAMES[i as usize % NAMES.len()].into(),
            Name::Max => "m".repeat(255),
            Name::TooLong => "l".repeat(256),
            Name::Empty => String::new(),
            Name::Slash => "x/y".into(),
        }
    }

    /// `want`: the kind an existing target should have (a directory for
    /// rename, to replace or refuse it).
    fn dst(&self, m: &Model, d: Dst, want: Want) -> (String, String) {
        match d {
            Dst::In(dir, n) => (self.dir(m, dir), Scope::name(n)),
            Dst::Path(s) => split(&self.path(m, s, want)),
        }
    }

    fn shared_name(&self, k: u8) -> (String, String) {
        let (dir, prefix) = self.shared.clone().expect("a shared directory");
        (dir, format!("{prefix}{}", k % 3))
    }

    /// Decides the paths of `op` against the model's current tree.
    fn step(&self, m: &Model, op: &Op) -> Step {
        match *op {
            Op::CreateFile(d) => {
                let (d, n) = self.dst(m, d, Want::Any);
                Step::Create(d, n)
            }
            Op::Mkdir(d) => {
                let (d, n) = self.dst(m, d, Want::Any);
                Step::Mkdir(d, n)
            }
            Op::Write(s, off, len, seed) => {
                Step::Write(self.path(m, s, Want::File), off as u64, len as usize, seed)
            }
            Op::Truncate(s, size) => Step::Truncate(self.path(m, s, Want::File), size as u64),
            Op::Link(s, d) => {
                let src = self.path(m, s, Want::NonDir);
                let (d, n) = self.dst(m, d, Want::Any);
                Step::Link(src, d, n)
            }
            Op::Unlink(s) => {
                let (d, n) = split(&self.path(m, s, Want::NonDir));
                Step::Unlink(d, n)
            }
            Op::Rmdir(s) => {
                let (d, n) = split(&self.path(m, s, Want::Dir));
                Step::Rmdir(d, n)
            }
            Op::Rename(s, d) => {
                let (sd, sn) = split(&self.path(m, s, Want::Any));
                let (dd, dn) = self.dst(m, d, Want::Dir);
                Step::Rename(sd, sn, dd, dn)
            }
            Op::Symlink(d, len, seed) => {
                let (d, n) = self.dst(m, d, Want::Any);
                Step::Symlink(d, n, target(len as usize, seed))
            }
            Op::Fsync(s) => Step::Fsync(self.path(m, s, Want::Any)),
            Op::Sync => Step::Sync,
            Op::Remount => Step::Remount,
            Op::SharedCreate(k) => {
                let (d, n) = self.shared_name(k);
                Step::Create(d, n)
            }
            Op::SharedWrite(k, off, len, seed) => {
                let (d, n) = self.shared_name(k);
                Step::Write(join(&d, &n), off as u64, len as usize, seed)
            }
            Op::SharedUnlink(k) => {
                let (d, n) = self.shared_name(k);
                Step::Unlink(d, n)
            }
        }
    }
}

/// Runs a step on the file system: the same resolution order as the model.
async fn exec(fs: &mut Rc<Fs>, machine: &Machine, c: Ctx, s: &Step) -> Result<(), FsError> {
    match s {
        Step::Create(d, n) => {
            let d = fs.resolve(c, d).await?;
            fs.create(c, d, n, 0o644).await.map(drop)
        }
        Step::Mkdir(d, n) => {
            let d = fs.resolve(c, d).await?;
            fs.mkdir(c, d, n, 0o755).await.map(drop)
        }
        Step::Symlink(d, n, t) => {
            let d = fs.resolve(c, d).await?;
            fs.symlink(c, d, n, t).await.map(drop)
        }
        Step::Write(p, off, len, seed) => {
            let ino = fs.resolve(c, p).await?;
            let n = fs.write(c, ino, *off, &pattern(*len, *seed)).await?;
            if n != *len {
                return Err(FsError::Io(format!("short write: {n} of {len} bytes")));
            }
            Ok(())
        }
        Step::Truncate(p, size) => {
            let ino = fs.resolve(c, p).await?;
            fs.truncate(c, ino, *size).await
        }
        Step::Link(src, d, n) => {
            let ino = fs.resolve(c, src).await?;
            let d = fs.resolve(c, d).await?;
            fs.link(c, ino, d, n).await.map(drop)
        }
        Step::Unlink(d, n) => {
            let d = fs.resolve(c, d).await?;
            fs.unlink(c, d, n).await
        }
        Step::Rmdir(d, n) => {
            let d = fs.resolve(c, d).await?;
            fs.rmdir(c, d, n).await
        }
        Step::Rename(sd, sn, dd, dn) => {
            let s = fs.resolve(c, sd).await?;
            let d = fs.resolve(c, dd).await?;
            fs.rename(c, s, sn, d, dn).await
        }
        Step::Fsync(p) => {
            let ino = fs.resolve(c, p).await?;
            fs.fsync(c, ino).await
        }
        Step::Sync => fs.sync(c).await,
        Step::Remount => {
            *fs = remount(fs.clone(), machine, c).await?;
            Ok(())
        }
    }
}

impl Step {
    fn kind(&self) -> &'static str {
        match self {
            Step::Create(..) => "create",
            Step::Mkdir(..) => "mkdir",
            Step::Symlink(..) => "symlink",
            Step::Write(..) => "write",
            Step::Truncate(..) => "truncate",
            Step::Link(..) => "link",
            Step::Unlink(..) => "unlink",
            Step::Rmdir(..) => "rmdir",
            Step::Rename(..) => "rename",
            Step::Fsync(..) => "fsync",
            Step::Sync => "sync",
            Step::Remount => "remount",
        }
    }
}

thread_local! {
    /// Outcomes by (operation, result), printed with `MQFS_MODEL_STATS=1`.
    static STATS: std::cell::RefCell<BTreeMap<(&'static str, String), u32>> = Default::default();
}

fn count(step: &Step, r: &Result<(), FsError>) {
    let r = match r {
        Ok(()) => "ok".to_string(),
        Err(e) => format!("{e:?}").split('(').next().unwrap_or("").to_string(),
    };
    STATS.with(|s| *s.borrow_mut().entry((step.kind(), r)).or_insert(0) += 1);
}

fn print_stats(what: &str) {
    let show = std::env::var("MQFS_MODEL_STATS").is_ok_and(|v| v == "1");
    STATS.with(|s| {
        if show {
            let line: Vec<String> = s
                .borrow()
                .iter()
                .map(|((k, r), n)| format!("{k} {r}: {n}"))
                .collect();
            eprintln!("{what}: {}", line.join(", "));
        }
        s.borrow_mut().clear();
    });
}

/// Same success, or the same error variant.
fn same(a: &Result<(), FsError>, b: &Result<(), FsError>) -> bool {
    match (a, b) {
        (Ok(()), Ok(())) => true,
        (Err(x), Err(y)) => discriminant(x) == discriminant(y),
        _ => false,
    }
}

// ---- generators ----

fn sel() -> impl Strategy<Value = Sel> {
    prop_oneof![
        4 => any::<u8>().prop_map(Sel::Typed),
        2 => any::<u8>().prop_map(Sel::Existing),
        1 => any::<u8>().prop_map(Sel::Fixed),
    ]
}

fn name() -> impl Strategy<Value = Name> {
    prop_oneof![
        24 => (0u8..4).prop_map(Name::Short),
        1 => Just(Name::Max),
        1 => Just(Name::TooLong),
        1 => Just(Name::Empty),
        1 => Just(Name::Slash),
    ]
}

fn dst() -> impl Strategy<Value = Dst> {
    prop_oneof![3 => (sel(), name()).prop_map(|(s, n)| Dst::In(s, n)), 1 => sel().prop_map(Dst::Path)]
}

fn write_len() -> impl Strategy<Value = u32> {
    prop_oneof![1 => Just(0u32), 2 => 1u32..64, 6 => 1u32..12288, 1 => 12288u32..40960]
}

fn offset() -> impl Strategy<Value = u32> {
    prop_oneof![3 => 0u32..81920, 1 => (0u32..20).prop_map(|b| b * 4096)]
}

fn op(concurrent: bool) -> BoxedStrategy<Op> {
    let size = prop_oneof![3 => 0u32..90000, 1 => (0u32..23).prop_map(|b| b * 4096)];
    let tlen = prop_oneof![3 => 1u16..=128, 2 => 129u16..600, 1 => Just(128u16), 1 => Just(129u16)];
    let common = prop_oneof![
        6 => dst().prop_map(Op::CreateFile),
        5 => dst().prop_map(Op::Mkdir),
        9 => (sel(), offset(), write_len(), any::<u8>()).prop_map(|(s, o, l, b)| Op::Write(s, o, l, b)),
        3 => (sel(), size).prop_map(|(s, n)| Op::Truncate(s, n)),
        3 => (sel(), dst()).prop_map(|(s, d)| Op::Link(s, d)),
        3 => sel().prop_map(Op::Unlink),
        2 => sel().prop_map(Op::Rmdir),
        6 => (sel(), dst()).prop_map(|(s, d)| Op::Rename(s, d)),
        // Onto an existing path: the replace and refuse cases.
        3 => (sel(), sel()).prop_map(|(s, d)| Op::Rename(s, Dst::Path(d))),
        2 => (dst(), tlen, any::<u8>()).prop_map(|(d, l, b)| Op::Symlink(d, l, b)),
        2 => sel().prop_map(Op::Fsync),
        1 => Just(Op::Sync),
    ];
    if concurrent {
        prop_oneof![
            10 => common,
            1 => any::<u8>().prop_map(Op::SharedCreate),
            1 => (any::<u8>(), offset(), write_len(), any::<u8>())
                .prop_map(|(k, o, l, b)| Op::SharedWrite(k, o, l, b)),
            1 => any::<u8>().prop_map(Op::SharedUnlink),
        ]
        .boxed()
    } else {
        prop_oneof![20 => common, 1 => Just(Op::Remount)].boxed()
    }
}

/// Creates at the start of a sequence, so that the random operations find
/// files and directories to work on.
fn seed_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (any::<u8>(), 0u8..4).prop_map(|(d, n)| Op::CreateFile(Dst::In(Sel::Typed(d), Name::Short(n)))),
        (any::<u8>(), 0u8..4).prop_map(|(d, n)| Op::Mkdir(Dst::In(Sel::Typed(d), Name::Short(n)))),
    ]
}

/// A sequence: up to 5 creates, then `len` random operations.
fn sequence<T: Debug + Clone>(
    seed: impl Strategy<Value = T>,
    op: impl Strategy<Value = T>,
    len: std::ops::Range<usize>,
) -> impl Strategy<Value = Vec<T>> {
    (vec(seed, 0..6), vec(op, len)).prop_map(|(mut a, b)| {
        a.extend(b);
        a
    })
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn runner(default_cases: u32) -> TestRunner {
    let config = Config {
        cases: env_u64("MQFS_MODEL_CASES").map_or(default_cases, |n| n as u32),
        failure_persistence: None,
        max_shrink_iters: 4096,
        ..Config::default()
    };
    let rng = match env_u64("MQFS_MODEL_SEED") {
        Some(seed) => {
            let mut bytes = [0u8; 32];
            bytes[..8].copy_from_slice(&seed.to_le_bytes());
            TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
        }
        None => TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    };
    TestRunner::new_with_rng(config, rng)
}

fn supported(mode: Mode, cores: usize) -> bool {
    setup(mode, BLOCKS, cores).is_some()
}

// ---- one thread ----

/// Cores of the sequential test: each operation runs on the one it names
/// (in `mq` mode, each core journals in its own area).
const CORES: usize = 2;

/// Runs `ops` (each on its core) on the model and on a fresh file system
/// of `mode`, comparing each result and, after each operation, the whole
/// tree; then remounts and compares again.
fn run_sequence(mode: Mode, ops: &[(usize, Op)]) -> Result<(), String> {
    let t = setup(mode, BLOCKS, CORES).ok_or("mode not supported")?;
    let machine = t.machine.clone();
    let fs = t.fs.clone();
    let ops = ops.to_vec();
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        let mut fs = fs;
        let mut model = Model::new();
        let scope = Scope::whole();
        for (i, (core, op)) in ops.iter().enumerate() {
            let step = scope.step(&model, op);
            let want = model.apply(&step);
            let got = exec(&mut fs, &machine, Ctx::on(*core), &step).await;
            count(&step, &got);
            if !same(&want, &got) {
                return Err(format!(
                    "op {i} {step:?} on core {core}: file system {got:?}, model {want:?}"
                ));
            }
            check(&fs, c, &model)
                .await
                .map_err(|e| format!("after op {i} {step:?}:\n{e}"))?;
        }
        let fs = remount(fs, &machine, c)
            .await
            .map_err(|e| format!("final remount: {e}"))?;
        check(&fs, c, &model)
            .await
            .map_err(|e| format!("after the final remount:\n{e}"))
    })
    .map_err(|e| format!("simulation: {e}"))?
}

#[test]
fn random_operations_match_the_model_across_remounts() {
    // Every mode runs; the failures are reported together.
    let mut failed = Vec::new();
    for mode in modes() {
        if !supported(mode, CORES) {
            continue;
        }
        let start = Instant::now();
        let mut r = runner(64);
        // Each operation names its core (shrinking keeps the pairs).
        let seqs = sequence((0..CORES, seed_op()), (0..CORES, op(false)), 1..40);
        let res = r.run(&seqs, |ops| run_sequence(mode, &ops).map_err(TestCaseError::fail));
        match res {
            Ok(()) => eprintln!("{mode:?}: model test passed in {:?}", start.elapsed()),
            Err(e) => failed.push(format!("{mode:?}: {e}")),
        }
        print_stats(&format!("{mode:?} outcomes"));
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

// ---- concurrent threads ----

/// `threads` simulated threads, each on its own core, each running its
/// sequence on its own subtree `/t<i>` and on its own names in `/shared`.
/// The subtrees are disjoint, so each result and the final tree do not
/// depend on the interleaving: the model applies the threads one after the
/// other.
fn run_concurrent(mode: Mode, threads: &[Vec<Op>]) -> Result<(), String> {
    let n = threads.len();
    let t = setup(mode, BLOCKS, n).ok_or("mode not supported")?;
    let machine = t.machine.clone();
    let fs = t.fs.clone();
    let mut model = Model::new();
    let mut setup_steps: Vec<Step> = (0..n).map(|i| Step::Mkdir("/".into(), format!("t{i}"))).collect();
    setup_steps.push(Step::Mkdir("/".into(), "shared".into()));
    for s in &setup_steps {
        model.apply(s).map_err(|e| format!("model setup {s:?}: {e}"))?;
    }
    // Each thread's steps and expected results, decided in order.
    let mut plans = Vec::new();
    for (i, ops) in threads.iter().enumerate() {
        let scope = Scope {
            root: format!("/t{i}"),
            shared: Some(("/shared".into(), format!("t{i}_"))),
        };
        let mut plan = Vec::new();
        for op in ops {
            let step = scope.step(&model, op);
            let want = model.apply(&step);
            plan.push((step, want));
        }
        plans.push(plan);
    }
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        let mut fs = fs;
        for s in &setup_steps {
            exec(&mut fs, &machine, c, s)
                .await
                .map_err(|e| format!("setup {s:?}: {e}"))?;
        }
        let sim = machine.sim();
        let handles: Vec<_> = plans
            .into_iter()
            .enumerate()
            .map(|(i, plan)| {
                let mut fs = fs.clone();
                let machine = machine.clone();
                sim.spawn(async move {
                    let c = Ctx::on(i);
                    let mut bad = Vec::new();
                    for (k, (step, want)) in plan.iter().enumerate() {
                        let got = exec(&mut fs, &machine, c, step).await;
                        count(step, &got);
                        if !same(want, &got) {
                            bad.push(format!(
                                "thread {i} op {k} {step:?}: file system {got:?}, model {want:?}"
                            ));
                        }
                    }
                    bad
                })
            })
            .collect();
        let bad: Vec<String> = join_all(handles).await.into_iter().flatten().collect();
        if !bad.is_empty() {
            return Err(bad.join("\n"));
        }
        check(&fs, c, &model)
            .await
            .map_err(|e| format!("after the threads:\n{e}"))?;
        let fs = remount(fs, &machine, c)
            .await
            .map_err(|e| format!("remount: {e}"))?;
        check(&fs, c, &model)
            .await
            .map_err(|e| format!("after the remount:\n{e}"))
    })
    .map_err(|e| format!("simulation: {e}"))?
}

#[test]
fn concurrent_threads_on_disjoint_subtrees_match_the_model() {
    let threads = (2usize..=4).prop_flat_map(|n| vec(sequence(seed_op(), op(true), 1..30), n));
    let mut failed = Vec::new();
    for mode in modes() {
        if !supported(mode, 4) {
            continue;
        }
        let start = Instant::now();
        let mut r = runner(24);
        let res = r.run(&threads, |ts| {
            run_concurrent(mode, &ts).map_err(TestCaseError::fail)
        });
        match res {
            Ok(()) => eprintln!("{mode:?}: concurrent model test passed in {:?}", start.elapsed()),
            Err(e) => failed.push(format!("{mode:?}: {e}")),
        }
        print_stats(&format!("{mode:?} concurrent outcomes"));
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

// ---- reproductions of bugs the tests above found ----

/// Found by both model tests in `mq` mode, reduced (the sequential test's
/// shrunk case): a block journaled on one core's area and later, newer, on
/// another's must end up home in its newest version after a clean unmount.
/// Here the root directory's block: core 1's fsync journals it with "a",
/// core 0's unlink and the unmount's sync journal it without; "a" must
/// stay gone.
#[test]
fn mq_unmount_keeps_the_newest_version_of_a_block_journaled_on_two_cores() {
    let Some(t) = setup(Mode::Mq, BLOCKS, 2) else {
        return;
    };
    let machine = t.machine.clone();
    let fs = t.fs.clone();
    t.ex.block_on(async move {
        let (c0, c1) = (Ctx::on(0), Ctx::on(1));
        fs.create_path(c0, "/a").await.unwrap();
        fs.fsync_path(c1, "/a").await.unwrap();
        fs.unlink_path(c0, "/a").await.unwrap();
        let fs = remount(fs, &machine, c0).await.unwrap();
        let names: Vec<String> = fs
            .readdir(c0, common::ROOT)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.0)
            .collect();
        assert_eq!(names, [".", ".."], "the unlinked /a is back");
        snapshot(&fs, c0).await.unwrap();
    })
    .unwrap();
}
