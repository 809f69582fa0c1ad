//! The semantic oracle (`docs/architecture.md` 6, after CrashMonkey): what each
//! completed persistence point promised, and the check of a recovered
//! file system against the promises in force at a crash point.
//!
//! - fsync / fdatasync of a file: the path holds exactly the synced bytes.
//! - fsync of a directory: its entries are exactly the synced ones.
//! - sync: the whole tree is the synced tree.
//! - fatomic / fdataatomic: the file, if present, is wholly one of the
//!   versions it had at a persistence point, never a mix.
//! - rename of a durable file: it is found under exactly one of its names.
//!
//! A promise holds from the trace position where its operation returned
//! until a later operation that touches the same paths starts (after that
//! the state may legitimately be anything in between). The structural
//! checks (mount, fsck) and CrashMonkey's sanity check (a file can be made
//! in every directory and everything removed) apply at every point.

use std::collections::BTreeMap;

use mqfs::{Ctx, FileType, Fs, FsError};
use serde::{Deserialize, Serialize};

use crate::model::Kind;

/// What a promise says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Expect {
    /// A regular file at the path with exactly these bytes.
    File {
        /// Path.
        path: String,
        /// Bytes.
        content: Vec<u8>,
        /// The name itself was not promised (an fdatasync of a name made
        /// since its directory was last made durable): if the path is
        /// missing, that is allowed.
        if_present: bool,
    },
    /// A directory at the path with exactly these entries.
    Dir {
        /// Path.
        path: String,
        /// Name -> kind.
        entries: BTreeMap<String, Kind>,
        /// As for [`Expect::File`].
        if_present: bool,
    },
    /// The whole tree.
    Tree(Vec<(String, Kind, Option<Vec<u8>>)>),
    /// The file, if present, holds one of these versions.
    Atomic {
        /// Path.
        path: String,
        /// Allowed contents.
        versions: Vec<Vec<u8>>,
    },
    /// The file is under exactly one of the two names with this content.
    Rename {
        /// Old name.
        from: String,
        /// New name.
        to: String,
        /// Its content.
        content: Vec<u8>,
    },
}

impl Expect {
    /// Paths whose later change ends the promise.
    pub fn paths(&self) -> Vec<&str> {
        match self {
            Expect::File { path, .. } | Expect::Dir { path, .. } | Expect::Atomic { path, .. } => vec![path],
            Expect::Tree(_) => vec!["/"],
            Expect::Rename { from, to, .. } => vec![from, to],
        }
    }
}

/// A promise and the crash points it covers: after `from` trace entries
/// and before `until`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Promise {
    /// What must hold.
    pub expect: Expect,
    /// Holds once this many trace entries happened.
    pub from: usize,
    /// Stops holding once this many happened. A change that starts after
    /// `s` entries ends a promise at `s + 1`: the state after `s` entries
    /// has none of its effects (the change's first bus transaction is
    /// entry `s`), so the promise still covers it, even when nothing
    /// happened on the bus between the sync and the change.
    pub until: usize,
    /// The operation that made it (for reports).
    pub op: String,
}

impl Promise {
    /// True if it covers the crash after `applied` trace entries.
    pub fn covers(&self, applied: usize) -> bool {
        applied >= self.from && applied < self.until
    }
}

/// A 128-bit key of the set of promises in force after `applied` trace
/// entries. Crash states are told apart by their content combined with
/// this key: the same content can pass before an fsync returns and fail
/// after, so it is checked once per set of promises.
pub fn promises_key(promises: &[Promise], applied: usize) -> pcie_sim::content_hash::ContentHash {
    let mut bytes = Vec::new();
    for (i, _) in promises.iter().enumerate().filter(|(_, p)| p.covers(applied)) {
        bytes.extend_from_slice(&(i as u64).to_le_bytes());
    }
    xxhash_rust::xxh3::xxh3_128(&bytes)
}

/// True if an operation on `op_path` can change what a promise about
/// `promised` says (same path, one inside the other).
pub fn touches(op_path: &str, promised: &str) -> bool {
    if promised == "/" {
        return true;
    }
    let inside = |a: &str, b: &str| a == b || a.starts_with(&format!("{b}/"));
    inside(op_path, promised) || inside(promised, op_path) || parent(op_path) == promised
}

fn parent(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) => "/",
        Some(i) => &p[..i],
        None => "/",
    }
}

/// A failed check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Which check failed.
    pub check: String,
    /// Details.
    pub detail: String,
}

/// The checks that fail when a promise is broken (as opposed to a
/// recovery, fsck or sanity failure, which a broken image alone causes).
pub const PROMISE_CHECKS: [&str; 5] = [
    "durable-data",
    "durable-dir",
    "durable-tree",
    "atomic",
    "rename-atomic",
];

/// True if `check` is a broken promise ([`PROMISE_CHECKS`]).
pub fn is_promise_check(check: &str) -> bool {
    PROMISE_CHECKS.contains(&check)
}

fn fail(check: &str, detail: String) -> Failure {
    Failure {
        check: check.to_string(),
        detail,
    }
}

async fn read_file(fs: &Fs, c: Ctx, path: &str) -> Result<Option<(FileType, Vec<u8>)>, FsError> {
    let ino = match fs.resolve(c, path).await {
        Ok(i) => i,
        Err(FsError::NotFound) | Err(FsError::NotDir) => return Ok(None),
        Err(e) => return Err(e),
    };
    let a = fs.getattr(c, ino).await?;
    if a.ftype != FileType::File {
        return Ok(Some((a.ftype, Vec::new())));
    }
    let data = fs.read(c, ino, 0, a.size as usize).await?;
    Ok(Some((a.ftype, data)))
}

fn kind_of(t: FileType) -> Kind {
    match t {
        FileType::File => Kind::File,
        FileType::Dir => Kind::Dir,
        FileType::Symlink => Kind::Symlink,
    }
}

async fn entries(fs: &Fs, c: Ctx, path: &str) -> Result<Option<BTreeMap<String, Kind>>, FsError> {
    let ino = match fs.resolve(c, path).await {
        Ok(i) => i,
        Err(FsError::NotFound) | Err(FsError::NotDir) => return Ok(None),
        Err(e) => return Err(e),
    };
    if fs.getattr(c, ino).await?.ftype != FileType::Dir {
        return Ok(None);
    }
    Ok(Some(
        fs.readdir(c, ino)
            .await?
            .into_iter()
            .filter(|(n, _, _)| n != "." && n != "..")
            .map(|(n, _, t)| (n, kind_of(t)))
            .collect(),
    ))
}

/// The whole tree of a mounted file system, as the model lists it.
pub async fn tree(fs: &Fs, c: Ctx) -> Result<Vec<(String, Kind, Option<Vec<u8>>)>, FsError> {
    walk(fs, c, true).await
}

/// Every path and its kind, without reading contents.
async fn shape(fs: &Fs, c: Ctx) -> Result<Vec<(String, Kind)>, FsError> {
    Ok(walk(fs, c, false)
        .await?
        .into_iter()
        .map(|x| (x.0, x.1))
        .collect())
}

/// The tree; file contents and link targets only if `contents`.
async fn walk(fs: &Fs, c: Ctx, contents: bool) -> Result<Vec<(String, Kind, Option<Vec<u8>>)>, FsError> {
    let mut out = Vec::new();
    let mut stack = vec![(String::new(), mqfs::layout::ROOT_INO)];
    let mut budget = 100_000usize;
    while let Some((prefix, ino)) = stack.pop() {
        for (name, child, t) in fs.readdir(c, ino).await? {
            if name == "." || name == ".." {
                continue;
            }
            budget = budget
                .checked_sub(1)
                .ok_or_else(|| FsError::Corrupt("tree too large".into()))?;
            let p = format!("{prefix}/{name}");
            match t {
                FileType::File if !contents => out.push((p, Kind::File, None)),
                FileType::Symlink if !contents => out.push((p, Kind::Symlink, None)),
                FileType::File => {
                    let size = fs.getattr(c, child).await?.size;
                    out.push((p, Kind::File, Some(fs.read(c, child, 0, size as usize).await?)));
                }
                FileType::Symlink => {
                    let target = fs.readlink(c, child).await?;
                    out.push((p, Kind::Symlink, Some(target.into_bytes())));
                }
                FileType::Dir => {
                    out.push((p.clone(), Kind::Dir, None));
                    stack.push((p, child));
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Checks one promise on a mounted, recovered file system.
pub async fn check(fs: &Fs, c: Ctx, p: &Promise) -> Result<Option<Failure>, FsError> {
    Ok(match &p.expect {
        Expect::File {
            path,
            content,
            if_present,
        } => match read_file(fs, c, path).await? {
            Some((FileType::File, got)) if &got == content => None,
            Some((FileType::File, got)) => Some(fail(
                "durable-data",
                format!(
                    "{path} after `{}`: {} bytes, expected {}{}",
                    p.op,
                    got.len(),
                    content.len(),
                    diff_hint(&got, content)
                ),
            )),
            Some((t, _)) => Some(fail(
                "durable-data",
                format!("{path} after `{}` is a {t:?}", p.op),
            )),
            None if *if_present => None,
            None => Some(fail("durable-data", format!("{path} lost after `{}`", p.op))),
        },
        Expect::Dir {
            path,
            entries: want,
            if_present,
        } => match entries(fs, c, path).await? {
            Some(got) if &got == want => None,
            Some(got) => Some(fail(
                "durable-dir",
                format!(
                    "{path} after `{}`: entries {:?}, expected {:?}",
                    p.op,
                    got.keys().collect::<Vec<_>>(),
                    want.keys().collect::<Vec<_>>()
                ),
            )),
            None if *if_present => None,
            None => Some(fail(
                "durable-dir",
                format!("directory {path} lost after `{}`", p.op),
            )),
        },
        Expect::Tree(want) => {
            let got = tree(fs, c).await?;
            if &got == want {
                None
            } else {
                let gp: Vec<&String> = got.iter().map(|x| &x.0).collect();
                let wp: Vec<&String> = want.iter().map(|x| &x.0).collect();
                Some(fail(
                    "durable-tree",
                    format!(
                        "after `{}`: tree {gp:?}, expected {wp:?} (or contents differ)",
                        p.op
                    ),
                ))
            }
        }
        Expect::Atomic { path, versions } => match read_file(fs, c, path).await? {
            None => None,
            Some((FileType::File, got)) if versions.contains(&got) => None,
            Some((FileType::File, got)) => Some(fail(
                "atomic",
                format!(
                    "{path} after `{}`: {} bytes that are none of its {} synced versions",
                    p.op,
                    got.len(),
                    versions.len()
                ),
            )),
            Some((t, _)) => Some(fail("atomic", format!("{path} after `{}` is a {t:?}", p.op))),
        },
        Expect::Rename { from, to, content } => {
            let a = matches!(read_file(fs, c, from).await?, Some((FileType::File, ref d)) if d == content);
            let b = matches!(read_file(fs, c, to).await?, Some((FileType::File, ref d)) if d == content);
            match (a, b) {
                (true, false) | (false, true) => None,
                (false, false) => Some(fail(
                    "rename-atomic",
                    format!("`{}`: the file is under neither name", p.op),
                )),
                (true, true) => Some(fail(
                    "rename-atomic",
                    format!("`{}`: the file is under both names", p.op),
                )),
            }
        }
    })
}

fn diff_hint(got: &[u8], want: &[u8]) -> String {
    match got.iter().zip(want).position(|(a, b)| a != b) {
        Some(i) => format!(" (first difference at byte {i})"),
        None => String::new(),
    }
}

/// CrashMonkey's sanity check: a new file can be created in every
/// directory, and then the whole tree removed.
pub async fn sanity(fs: &Fs, c: Ctx) -> Result<Option<Failure>, FsError> {
    let t = shape(fs, c).await?;
    let mut dirs: Vec<String> = vec![String::new()];
    dirs.extend(t.iter().filter(|x| x.1 == Kind::Dir).map(|x| x.0.clone()));
    for d in &dirs {
        let p = format!("{d}/_dummy");
        if let Err(e) = fs.create_path(c, &p).await {
            return Ok(Some(fail("sanity", format!("cannot create {p}: {e}"))));
        }
    }
    // Remove deepest first.
    let mut all = shape(fs, c).await?;
    all.sort_by_key(|(p, _)| std::cmp::Reverse(p.matches('/').count()));
    for (p, k) in all {
        let r = if k == Kind::Dir {
            fs.rmdir_path(c, &p).await
        } else {
            fs.unlink_path(c, &p).await
        };
        if let Err(e) = r {
            return Ok(Some(fail("sanity", format!("cannot remove {p}: {e}"))));
        }
    }
    Ok(None)
}
