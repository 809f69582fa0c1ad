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
//! - a file's or directory's extended attributes, where promised (fsync,
//!   sync, not fdatasync): the whole set of one of its versions.
//!
//! A promise holds from the trace position where its operation returned
//! until a later operation that touches the same paths starts (after that
//! the state may legitimately be anything in between). The structural
//! checks (mount, fsck) and CrashMonkey's sanity check (a file can be made
//! in every directory and everything removed) apply at every point.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use mqfs::data::PageSource;
use mqfs::{Ctx, FileType, Fs, FsError};
use serde::{Deserialize, Serialize};

use crate::blockwise::{block_fits, BlockJudge};
use crate::content::Content;
use crate::model::Kind;

/// A node's extended attributes: name (with its namespace prefix) ->
/// value. Shared, so that cloning a state does not copy values.
pub type Xattrs = Arc<BTreeMap<String, Vec<u8>>>;

/// One allowed state of a name, as the oracle compares it. `None`
/// fields are not promised (a directory fsync promises its entries' link
/// counts, not their contents; fdatasync a file's data, not its link
/// count nor its extended attributes).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Node {
    /// A regular file.
    File {
        /// Its bytes (and so its size).
        content: Option<Arc<Content>>,
        /// Its link count.
        nlink: Option<u16>,
        /// Its permission bits.
        perm: Option<u16>,
        /// Its extended attributes, all of them (inode metadata: ext4
        /// journals them with the inode, so fsync commits them).
        xattrs: Option<Xattrs>,
    },
    /// A directory.
    Dir {
        /// Its extended attributes, as for a file.
        xattrs: Option<Xattrs>,
    },
    /// A symbolic link to this target (its attributes, `trusted.` and
    /// `security.` only in Linux, are not checked).
    Symlink(String),
}

impl Node {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            Node::File { .. } => Kind::File,
            Node::Dir { .. } => Kind::Dir,
            Node::Symlink(_) => Kind::Symlink,
        }
    }

    /// A directory entry's form of a directory: its kind only.
    pub const DIR: Node = Node::Dir { xattrs: None };

    /// The same state with only what a directory's fsync promises about
    /// an entry: kind, and a file's link count.
    pub fn as_entry(&self) -> Node {
        match self {
            Node::File { nlink, .. } => Node::File {
                content: None,
                nlink: *nlink,
                perm: None,
                xattrs: None,
            },
            Node::Dir { .. } => Node::DIR,
            n => n.clone(),
        }
    }

    /// The same state with only what fdatasync persists: without the link
    /// count and the extended attributes. fdatasync(2) "does not flush
    /// modified metadata unless that metadata is needed in order to allow
    /// a subsequent data retrieval to be correctly handled": ext4's
    /// `ext4_fsync_journal` (fs/ext4/fsync.c) commits up to the inode's
    /// `i_datasync_tid` for fdatasync, which `ext4_do_update_inode`
    /// (fs/ext4/inode.c) advances only when the on-disk size changes
    /// (`need_datasync`), never for an attribute change.
    pub fn data_only(&self) -> Node {
        match self {
            Node::File { content, perm, .. } => Node::File {
                content: content.clone(),
                nlink: None,
                perm: *perm,
                xattrs: None,
            },
            Node::Dir { .. } => Node::DIR,
            n => n.clone(),
        }
    }

    /// Its extended attributes, if promised (never for a symbolic link).
    pub fn xattrs(&self) -> Option<&Xattrs> {
        match self {
            Node::File { xattrs, .. } | Node::Dir { xattrs } => xattrs.as_ref(),
            Node::Symlink(_) => None,
        }
    }
}

/// The allowed states of each promised name (`None`: absent), and the
/// directories whose listing is promised (`docs/architecture.md` 6, and
/// the rules in [`mod@crate::promises`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct States {
    /// Path -> its allowed states (`None`: the name is absent).
    pub paths: BTreeMap<String, Vec<Option<Node>>>,
    /// Directories that, where present, hold no names but those in
    /// `paths` (their listing was made durable).
    pub listed: BTreeSet<String>,
}

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
    /// Each name is in one of its allowed states: what a file or
    /// directory fsync, a `sync` or the setup made durable, widened by
    /// every later operation that changed it.
    States(States),
    /// The names, taken together, are in one of these states (per name
    /// as in [`Expect::States`]; `None` fields unchecked): an operation
    /// the journal makes atomic is seen wholly or not at all.
    OneOf {
        /// The names.
        paths: Vec<String>,
        /// Allowed combinations, one state per name.
        tuples: Vec<Vec<Option<Node>>>,
    },
    /// Order (HoRAE's fbarrier): if `marker` exists, `then` holds. The
    /// marker is a name first made by an operation that began after a
    /// barrier returned, so it exists only if a transaction ordered after
    /// the barrier's writes is durable, and they are then durable too.
    Ordered {
        /// The name whose existence shows a later write durable.
        marker: String,
        /// What the barrier ordered (as [`Expect::States`]).
        then: States,
    },
}

impl Expect {
    /// Paths whose later change ends or widens the promise.
    pub fn paths(&self) -> Vec<&str> {
        match self {
            Expect::File { path, .. } | Expect::Dir { path, .. } | Expect::Atomic { path, .. } => vec![path],
            Expect::Tree(_) => vec!["/"],
            Expect::Rename { from, to, .. } => vec![from, to],
            Expect::States(s) | Expect::Ordered { then: s, .. } => {
                s.paths.keys().chain(&s.listed).map(String::as_str).collect()
            }
            Expect::OneOf { paths, .. } => paths.iter().map(String::as_str).collect(),
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
    /// Made by a data-block judgement the explorer evaluates apart
    /// ([`crate::blockwise::BlockJudgement::failure`]), not by a read of
    /// the state.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub judged: bool,
}

impl Failure {
    /// A failure of `check` found by reading the state.
    pub fn new(check: &str, detail: impl Into<String>) -> Failure {
        Failure {
            check: check.to_string(),
            detail: detail.into(),
            judged: false,
        }
    }
}

/// The checks that fail when a promise is broken (as opposed to a
/// recovery, fsck or sanity failure, which a broken image alone causes).
pub const PROMISE_CHECKS: [&str; 8] = [
    "durable-data",
    "durable-meta",
    "durable-dir",
    "durable-tree",
    "atomic",
    "rename-atomic",
    "op-atomic",
    "ordered",
];

/// True if `check` is a broken promise ([`PROMISE_CHECKS`]).
pub fn is_promise_check(check: &str) -> bool {
    PROMISE_CHECKS.contains(&check)
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

/// The model's kind of a file type. The model knows regular files,
/// directories and symlinks; a fifo, device or socket (only a recorded
/// `mqfs mount` run makes them) holds no data and counts as an empty
/// regular file, which keeps the saved-run format as it is.
pub fn kind_of(t: FileType) -> Kind {
    match t {
        FileType::File | FileType::Fifo | FileType::CharDev | FileType::BlockDev | FileType::Socket => {
            Kind::File
        }
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
                FileType::Fifo | FileType::CharDev | FileType::BlockDev | FileType::Socket => {
                    out.push((p, kind_of(t), contents.then(Vec::new)))
                }
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Checks one promise on a mounted, recovered file system.
pub async fn check(fs: &Fs, c: Ctx, p: &Promise) -> Result<Option<Failure>, FsError> {
    check_with(fs, c, p, &mut Lookups::default()).await
}

/// What the checks of one recovered state looked up, so that the
/// promises in force read each name and listing once: the checks only
/// read, so the file system does not change between them.
#[derive(Debug, Default)]
pub struct Lookups<'j> {
    names: BTreeMap<String, Option<Seen>>,
    listings: BTreeMap<String, Option<BTreeMap<String, Kind>>>,
    judge: Option<BlockJudge<'j>>,
}

impl<'j> Lookups<'j> {
    /// Lookups that judge the data blocks of files promised block by
    /// block instead of reading them ([`crate::blockwise`]).
    pub fn judging(judge: BlockJudge<'j>) -> Self {
        Lookups {
            judge: Some(judge),
            ..Lookups::default()
        }
    }

    /// The block judgements made (none without a judge).
    pub fn into_judgements(self) -> Vec<crate::blockwise::BlockJudgement> {
        self.judge.map(|j| j.judgements).unwrap_or_default()
    }

    /// `path` as [`seen`] finds it, from an earlier lookup if that one
    /// read what `wanted` needs.
    async fn seen(&mut self, fs: &Fs, c: Ctx, path: &str, wanted: Reads) -> Result<Option<&Seen>, FsError> {
        // Page sources stand for bytes only where a judge takes them.
        let pages = self.judge.is_some() && !wanted.bytes;
        let (fresh, had) = match self.names.get(path) {
            Some(Some(s)) => (
                (wanted.content
                    && s.kind == Kind::File
                    && match &s.content {
                        None => true,
                        Some(FileData::Pages { .. }) => !pages,
                        Some(FileData::Bytes(_)) => false,
                    })
                    || (wanted.xattrs && s.kind != Kind::Symlink && s.xattrs.is_none()),
                Reads {
                    content: s.content.is_some(),
                    xattrs: s.xattrs.is_some(),
                    bytes: false,
                },
            ),
            Some(None) => (false, Reads::default()),
            None => (true, Reads::default()),
        };
        if fresh {
            // What was read before stays read.
            let wanted = Reads {
                content: wanted.content || had.content,
                xattrs: wanted.xattrs || had.xattrs,
                bytes: wanted.bytes,
            };
            let s = seen(fs, c, path, wanted, pages).await?;
            self.names.insert(path.to_string(), s);
        }
        Ok(self.names.get(path).and_then(Option::as_ref))
    }

    /// The listing of `path` as [`entries`] finds it, once.
    async fn entries(
        &mut self,
        fs: &Fs,
        c: Ctx,
        path: &str,
    ) -> Result<Option<&BTreeMap<String, Kind>>, FsError> {
        if !self.listings.contains_key(path) {
            let e = entries(fs, c, path).await?;
            self.listings.insert(path.to_string(), e);
        }
        Ok(self.listings.get(path).and_then(Option::as_ref))
    }
}

/// [`check`], with the lookups of the other promises checked on the same
/// recovered state.
pub async fn check_with(
    fs: &Fs,
    c: Ctx,
    p: &Promise,
    looked: &mut Lookups<'_>,
) -> Result<Option<Failure>, FsError> {
    Ok(match &p.expect {
        Expect::File {
            path,
            content,
            if_present,
        } => match read_file(fs, c, path).await? {
            Some((FileType::File, got)) if &got == content => None,
            Some((FileType::File, got)) => Some(Failure::new(
                "durable-data",
                format!(
                    "{path} after `{}`: {} bytes, expected {}{}",
                    p.op,
                    got.len(),
                    content.len(),
                    diff_hint(&got, content)
                ),
            )),
            Some((t, _)) => Some(Failure::new(
                "durable-data",
                format!("{path} after `{}` is a {t:?}", p.op),
            )),
            None if *if_present => None,
            None => Some(Failure::new(
                "durable-data",
                format!("{path} lost after `{}`", p.op),
            )),
        },
        Expect::Dir {
            path,
            entries: want,
            if_present,
        } => match entries(fs, c, path).await? {
            Some(got) if &got == want => None,
            Some(got) => Some(Failure::new(
                "durable-dir",
                format!(
                    "{path} after `{}`: entries {:?}, expected {:?}",
                    p.op,
                    got.keys().collect::<Vec<_>>(),
                    want.keys().collect::<Vec<_>>()
                ),
            )),
            None if *if_present => None,
            None => Some(Failure::new(
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
                Some(Failure::new(
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
            Some((FileType::File, got)) => Some(Failure::new(
                "atomic",
                format!(
                    "{path} after `{}`: {} bytes that are none of its {} synced versions",
                    p.op,
                    got.len(),
                    versions.len()
                ),
            )),
            Some((t, _)) => Some(Failure::new(
                "atomic",
                format!("{path} after `{}` is a {t:?}", p.op),
            )),
        },
        Expect::Rename { from, to, content } => {
            let a = matches!(read_file(fs, c, from).await?, Some((FileType::File, ref d)) if d == content);
            let b = matches!(read_file(fs, c, to).await?, Some((FileType::File, ref d)) if d == content);
            match (a, b) {
                (true, false) | (false, true) => None,
                (false, false) => Some(Failure::new(
                    "rename-atomic",
                    format!("`{}`: the file is under neither name", p.op),
                )),
                (true, true) => Some(Failure::new(
                    "rename-atomic",
                    format!("`{}`: the file is under both names", p.op),
                )),
            }
        }
        Expect::States(st) => check_states(fs, c, st, &p.op, looked).await?,
        Expect::OneOf { paths, tuples } => check_one_of(fs, c, paths, tuples, &p.op, looked).await?,
        Expect::Ordered { marker, then } => {
            if looked.seen(fs, c, marker, Reads::default()).await?.is_none() {
                None
            } else {
                // Read in full, not judged block by block: a block's
                // judgement holds for every state of its class, and this
                // promise binds only the states where the marker exists.
                let judge = looked.judge.take();
                let r = check_states(fs, c, then, &p.op, looked).await;
                looked.judge = judge;
                r?.map(|f| {
                    Failure::new(
                        "ordered",
                        format!("{} ({marker} exists, made after it)", f.detail),
                    )
                })
            }
        }
    })
}

/// A name as recovered: its kind, link count, permission bits and, if
/// read, a file's bytes, a link's target and a file's or directory's
/// extended attributes.
#[derive(Debug)]
struct Seen {
    kind: Kind,
    nlink: u16,
    perm: u16,
    target: Option<String>,
    content: Option<FileData>,
    xattrs: Option<BTreeMap<String, Vec<u8>>>,
}

/// A recovered file's data as the oracle holds it: its bytes, or, for a
/// judge ([`crate::blockwise`]), its size and where each block's bytes
/// come from.
#[derive(Debug)]
enum FileData {
    Bytes(Vec<u8>),
    Pages { size: u64, pages: Vec<PageSource> },
}

/// What of a name the allowed states promise, beyond what `getattr`
/// gives: a file's bytes, a node's extended attributes.
#[derive(Clone, Copy, Debug, Default)]
struct Reads {
    content: bool,
    xattrs: bool,
    /// The content as bytes even where a judge would take page sources
    /// (a check that is not a conjunction over blocks).
    bytes: bool,
}

impl Reads {
    /// What some state in `allowed` promises.
    fn of(allowed: &[Option<Node>]) -> Reads {
        let nodes = || allowed.iter().flatten();
        Reads {
            content: nodes().any(|n| matches!(n, Node::File { content: Some(_), .. })),
            xattrs: nodes().any(|n| n.xattrs().is_some()),
            bytes: false,
        }
    }
}

/// Looks `path` up; reads a file's bytes (or, with `pages`, where they
/// come from) and a node's attributes (listxattr(2), then getxattr(2) of
/// each) only as `wanted`.
async fn seen(fs: &Fs, c: Ctx, path: &str, wanted: Reads, pages: bool) -> Result<Option<Seen>, FsError> {
    let ino = match fs.resolve(c, path).await {
        Ok(i) => i,
        Err(FsError::NotFound) | Err(FsError::NotDir) => return Ok(None),
        Err(e) => return Err(e),
    };
    let a = fs.getattr(c, ino).await?;
    let content = if !wanted.content || a.ftype != FileType::File {
        None
    } else if pages {
        let (size, pages) = fs.page_sources(c, ino).await?;
        Some(FileData::Pages { size, pages })
    } else {
        Some(FileData::Bytes(fs.read(c, ino, 0, a.size as usize).await?))
    };
    let target = if a.ftype == FileType::Symlink {
        Some(fs.readlink(c, ino).await?)
    } else {
        None
    };
    let xattrs = if wanted.xattrs && a.ftype != FileType::Symlink {
        let mut m = BTreeMap::new();
        for name in fs.listxattr(c, ino).await? {
            let v = fs.getxattr(c, ino, &name).await?;
            m.insert(name, v);
        }
        Some(m)
    } else {
        None
    };
    Ok(Some(Seen {
        kind: kind_of(a.ftype),
        nlink: a.links,
        perm: a.perm,
        target,
        content,
        xattrs,
    }))
}

/// Whether a recovered file's bytes are allowed by its versions: its size
/// is one of theirs, or a block boundary between the smallest and the
/// largest (Linux updates `i_size` page by page while it copies a write,
/// `generic_perform_write` in mm/filemap.c, so a crash within an
/// extending write can leave any page-aligned size in between); and each
/// 4 KiB block holds the bytes of that block in one of the versions
/// (bytes past a version's end are zeros: a hole or a truncation), since
/// blocks reach the media independently and a block write may be torn
/// from its neighbours. With one version this is equality.
pub fn content_allowed(got: &[u8], versions: &[&Content]) -> Result<(), String> {
    size_allowed(got.len(), versions)?;
    for start in (0..got.len()).step_by(BLOCK) {
        let end = (start + BLOCK).min(got.len());
        block_allowed(&got[start..end], start, got.len(), versions)?;
    }
    Ok(())
}

const BLOCK: usize = mqfs::layout::BLOCK;

/// The size half of [`content_allowed`].
fn size_allowed(size: usize, versions: &[&Content]) -> Result<(), String> {
    let (lo, hi) = (
        versions.iter().map(|v| v.len()).min().unwrap_or(0),
        versions.iter().map(|v| v.len()).max().unwrap_or(0),
    );
    if versions.iter().any(|v| v.len() == size) || (size % BLOCK == 0 && lo < size && size < hi) {
        return Ok(());
    }
    let mut sizes: Vec<usize> = versions.iter().map(|v| v.len()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    Err(format!("{size} bytes, expected one of the sizes {sizes:?}"))
}

/// The rule of [`content_allowed`] for the block at byte `start` of a
/// file of `size` bytes holding `got`.
fn block_allowed(got: &[u8], start: usize, size: usize, versions: &[&Content]) -> Result<(), String> {
    if versions.iter().any(|v| block_fits(got, v, start)) {
        return Ok(());
    }
    let end = start + got.len();
    let hint = versions
        .first()
        .map(|v| diff_hint(got, &v.range(start, end)))
        .unwrap_or_default();
    Err(format!(
        "{size} bytes; block {} (bytes {start}..{end}) is in none of its {} version(s){hint}",
        start / BLOCK,
        versions.len()
    ))
}

/// [`content_allowed`] over page sources: blocks in the page cache or
/// holes are judged here, device blocks are left to `judge`.
fn pages_allowed(
    size: u64,
    pages: &[PageSource],
    same_kind: &[&Node],
    judge: &mut BlockJudge<'_>,
    what: &str,
) -> Result<(), String> {
    let owned: Arc<[Arc<Content>]> = same_kind
        .iter()
        .filter_map(|n| match n {
            Node::File { content: Some(c), .. } => Some(c.clone()),
            _ => None,
        })
        .collect();
    let versions: Vec<&Content> = owned.iter().map(|v| &**v).collect();
    let size = size as usize;
    size_allowed(size, &versions)?;
    let what: Arc<str> = what.into();
    let zeros = [0u8; BLOCK];
    for (i, p) in pages.iter().enumerate() {
        let start = i * BLOCK;
        let len = BLOCK.min(size - start);
        match p {
            PageSource::Cached(page) => block_allowed(&page.data()[..len], start, size, &versions)?,
            PageSource::Zeros => block_allowed(&zeros[..len], start, size, &versions)?,
            PageSource::Device(b) => judge.judge(*b, &owned, start, len, &what),
        }
    }
    Ok(())
}

/// Why a recovered name is in none of its allowed states (`None`: it is
/// in one), and the check that fails.
///
/// With `defer`, a judge and the promise's text, device blocks of a file
/// read as page sources are judged there ([`crate::blockwise`]); without,
/// a file's content must have been read as bytes.
fn state_mismatch(
    got: Option<&Seen>,
    allowed: &[Option<Node>],
    defer: Option<(&mut BlockJudge<'_>, &str)>,
) -> Option<(&'static str, String)> {
    let Some(got) = got else {
        if allowed.contains(&None) {
            return None;
        }
        let dir = allowed.iter().flatten().all(|n| n.kind() != Kind::File);
        return Some((if dir { "durable-dir" } else { "durable-data" }, "lost".into()));
    };
    let same_kind: Vec<&Node> = allowed
        .iter()
        .flatten()
        .filter(|n| n.kind() == got.kind)
        .collect();
    if same_kind.is_empty() {
        return Some((
            "durable-meta",
            format!("is a {:?}, expected {:?}", got.kind, allowed),
        ));
    }
    // Attributes first: they are the directory's only promised field,
    // and a file's are checked like its link count and mode.
    if let Some(v) = promised(&same_kind, |n| n.xattrs().cloned()) {
        let got_x = got.xattrs.as_ref();
        if !v.iter().any(|x| Some(&**x) == got_x) {
            return Some((
                "durable-meta",
                format!(
                    "extended attributes {}, expected one of [{}]",
                    got_x.map_or("unread".into(), xattrs_text),
                    v.iter().map(|x| xattrs_text(x)).collect::<Vec<_>>().join(", ")
                ),
            ));
        }
    }
    match got.kind {
        Kind::Dir => None,
        Kind::Symlink => {
            let ok = same_kind
                .iter()
                .any(|n| matches!(n, Node::Symlink(t) if Some(t) == got.target.as_ref()));
            (!ok).then(|| ("durable-data", format!("links to {:?}", got.target)))
        }
        Kind::File => {
            let nlink = |n: &Node| match n {
                Node::File { nlink, .. } => *nlink,
                _ => None,
            };
            let perm = |n: &Node| match n {
                Node::File { perm, .. } => *perm,
                _ => None,
            };
            if let Some(v) = promised(&same_kind, nlink) {
                if !v.contains(&got.nlink) {
                    return Some((
                        "durable-meta",
                        format!("link count {}, expected one of {v:?}", got.nlink),
                    ));
                }
            }
            if let Some(v) = promised(&same_kind, perm) {
                if !v.contains(&got.perm) {
                    return Some((
                        "durable-meta",
                        format!(
                            "mode {:o}, expected {:o}",
                            got.perm,
                            v.first().copied().unwrap_or(0)
                        ),
                    ));
                }
            }
            let versions: Option<Vec<&Content>> = same_kind
                .iter()
                .map(|n| match n {
                    Node::File { content: Some(c), .. } => Some(&**c),
                    _ => None,
                })
                .collect();
            let err = match (versions, &got.content) {
                (Some(v), Some(FileData::Bytes(data))) => content_allowed(data, &v).err(),
                (Some(_), Some(FileData::Pages { size, pages })) => match defer {
                    Some((judge, what)) => pages_allowed(*size, pages, &same_kind, judge, what).err(),
                    None => unreachable!("a file is read as page sources only for a judge's conjunction"),
                },
                _ => None,
            };
            err.map(|e| ("durable-data", e))
        }
    }
}

/// The values of one field over the allowed states of the recovered
/// kind, if every one of them promises it (a state that leaves it `None`
/// allows any value).
fn promised<T>(same_kind: &[&Node], field: impl Fn(&Node) -> Option<T>) -> Option<Vec<T>> {
    same_kind.iter().map(|n| field(n)).collect()
}

/// Attributes for a report: each name with its value's length and
/// CRC-32.
fn xattrs_text(x: &BTreeMap<String, Vec<u8>>) -> String {
    let items: Vec<String> = x
        .iter()
        .map(|(n, v)| format!("{n}: {} bytes crc {:08x}", v.len(), crc32fast::hash(v)))
        .collect();
    format!("{{{}}}", items.join(", "))
}

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Checks an [`Expect::States`] promise.
async fn check_states(
    fs: &Fs,
    c: Ctx,
    st: &States,
    op: &str,
    looked: &mut Lookups<'_>,
) -> Result<Option<Failure>, FsError> {
    // Names under a directory that is absent, as allowed, are absent
    // with it (an fdatasync of a directory does not promise its name).
    let mut gone: Vec<&str> = Vec::new();
    for (path, allowed) in &st.paths {
        if looked.seen(fs, c, path, Reads::of(allowed)).await?.is_none() {
            let under_gone = gone.iter().any(|g| path.starts_with(&format!("{g}/")));
            if under_gone || allowed.contains(&None) {
                gone.push(path);
                continue;
            }
        }
        let got = looked.names.get(path.as_str()).and_then(Option::as_ref);
        let what = format!("{path} after `{op}`");
        let defer = looked.judge.as_mut().map(|j| (j, what.as_str()));
        if let Some((check, why)) = state_mismatch(got, allowed, defer) {
            return Ok(Some(Failure::new(check, format!("{path} after `{op}`: {why}"))));
        }
    }
    for dir in &st.listed {
        let Some(names) = looked.entries(fs, c, dir).await? else {
            continue;
        };
        for name in names.keys() {
            let p = join(dir, name);
            let allowed = st.paths.get(&p).is_some_and(|a| a.iter().any(Option::is_some));
            if !allowed {
                return Ok(Some(Failure::new(
                    "durable-dir",
                    format!("{dir} after `{op}`: entry {name:?}, which it never held since"),
                )));
            }
        }
    }
    Ok(None)
}

/// True if the recovered names `got` are, together, in one of the
/// allowed combinations.
fn tuple_fits(got: &[Option<&Seen>], tuples: &[Vec<Option<Node>>]) -> bool {
    tuples.iter().any(|t| {
        t.len() == got.len()
            && got
                .iter()
                .zip(t)
                .all(|(g, n)| state_mismatch(*g, std::slice::from_ref(n), None).is_none())
    })
}

/// Checks an [`Expect::OneOf`] promise.
async fn check_one_of(
    fs: &Fs,
    c: Ctx,
    paths: &[String],
    tuples: &[Vec<Option<Node>>],
    op: &str,
    looked: &mut Lookups<'_>,
) -> Result<Option<Failure>, FsError> {
    for (i, p) in paths.iter().enumerate() {
        let column: Vec<Option<Node>> = tuples.iter().filter_map(|t| t.get(i).cloned()).collect();
        // A disjunction of combinations: the bytes, not judgements.
        let wanted = Reads {
            bytes: true,
            ..Reads::of(&column)
        };
        looked.seen(fs, c, p, wanted).await?;
    }
    let got: Vec<Option<&Seen>> = paths
        .iter()
        .map(|p| looked.names.get(p).and_then(Option::as_ref))
        .collect();
    if tuple_fits(&got, tuples) {
        return Ok(None);
    }
    let seen: Vec<String> = paths
        .iter()
        .zip(&got)
        .map(|(p, g)| match g {
            Some(s) => format!("{p}: {:?} with {} link(s)", s.kind, s.nlink),
            None => format!("{p}: absent"),
        })
        .collect();
    Ok(Some(Failure::new(
        "op-atomic",
        format!(
            "`{op}` half done: {}; allowed {} combination(s)",
            seen.join(", "),
            tuples.len()
        ),
    )))
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
            return Ok(Some(Failure::new("sanity", format!("cannot create {p}: {e}"))));
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
            return Ok(Some(Failure::new("sanity", format!("cannot remove {p}: {e}"))));
        }
    }
    Ok(None)
}

/// What the oracle's and the promise builder's tests share.
#[cfg(test)]
pub(crate) mod test_support {
    use super::{Arc, Content, Node};

    /// A regular file promised with `content` and `nlink` links, mode
    /// 0644, attributes not promised.
    pub(crate) fn promised(content: &[u8], nlink: u16) -> Option<Node> {
        Some(Node::File {
            content: Some(Arc::new(Content::from(content))),
            nlink: Some(nlink),
            perm: Some(0o644),
            xattrs: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(content: &[u8], nlink: u16) -> Seen {
        Seen {
            kind: Kind::File,
            nlink,
            perm: 0o644,
            target: None,
            content: Some(FileData::Bytes(content.to_vec())),
            xattrs: None,
        }
    }

    use super::test_support::promised;

    #[test]
    fn content_is_checked_block_by_block_against_the_versions() {
        let b = mqfs::layout::BLOCK;
        let old = vec![b'o'; 2 * b];
        let new = vec![b'n'; 2 * b];
        // One version: equality.
        assert!(content_allowed(&old, &[&Content::from(old.as_slice())]).is_ok());
        assert!(content_allowed(&new, &[&Content::from(old.as_slice())]).is_err());
        // A torn two-block write: each block old or new.
        let mut torn = old.clone();
        torn[b..].fill(b'n');
        assert!(content_allowed(
            &torn,
            &[&Content::from(old.as_slice()), &Content::from(new.as_slice())]
        )
        .is_ok());
        // A block mixing the two within itself is neither.
        let mut mixed = old.clone();
        mixed[10] = b'n';
        let e = content_allowed(
            &mixed,
            &[&Content::from(old.as_slice()), &Content::from(new.as_slice())],
        )
        .unwrap_err();
        assert!(e.contains("block 0"), "{e}");
        // Sizes: a version's, or a page boundary between them (an
        // extending write in flight); bytes past a version's end are zeros.
        let short = vec![b'o'; 10];
        let long = vec![b'o'; 3 * b];
        assert!(content_allowed(
            &long[..2 * b],
            &[&Content::from(short.as_slice()), &Content::from(long.as_slice())]
        )
        .is_ok());
        assert!(content_allowed(
            &long[..2 * b + 1],
            &[&Content::from(short.as_slice()), &Content::from(long.as_slice())]
        )
        .is_err());
        let mut zeros = vec![0u8; b];
        zeros[..10].fill(b'o');
        assert!(content_allowed(
            &zeros,
            &[&Content::from(short.as_slice()), &Content::from(long.as_slice())]
        )
        .is_ok());
    }

    #[test]
    fn a_wrong_link_count_of_a_synced_file_is_caught() {
        // The old oracle (Expect::File) compared bytes only: a file whose
        // link count recovered wrong passed.
        let allowed = [promised(b"x", 2)];
        assert_eq!(state_mismatch(Some(&file(b"x", 2)), &allowed, None), None);
        let (check, why) = state_mismatch(Some(&file(b"x", 1)), &allowed, None).expect("caught");
        assert_eq!(check, "durable-meta");
        assert!(why.contains("link count 1"), "{why}");
        // Mode too.
        let mut wrong_mode = file(b"x", 2);
        wrong_mode.perm = 0o600;
        assert_eq!(
            state_mismatch(Some(&wrong_mode), &allowed, None).map(|x| x.0),
            Some("durable-meta")
        );
        // A later link widened it: either count.
        let widened = [promised(b"x", 2), promised(b"x", 3)];
        assert_eq!(state_mismatch(Some(&file(b"x", 3)), &widened, None), None);
        // Lost, unless a later operation removed it.
        assert_eq!(
            state_mismatch(None, &allowed, None).map(|x| x.0),
            Some("durable-data")
        );
        assert_eq!(state_mismatch(None, &[promised(b"x", 2), None], None), None);
        // A directory's entry promises no bytes.
        let entry = [Some(promised(b"x", 2).unwrap().as_entry())];
        assert_eq!(state_mismatch(Some(&file(b"other", 2)), &entry, None), None);
    }

    #[test]
    fn a_half_done_rename_is_caught() {
        let e = promised(b"x", 1).map(|n| n.as_entry());
        let tuples = vec![vec![e.clone(), None], vec![None, e]];
        assert!(tuple_fits(&[Some(&file(b"x", 1)), None], &tuples));
        assert!(tuple_fits(&[None, Some(&file(b"x", 1))], &tuples));
        // Under both names, or under neither: half done.
        assert!(!tuple_fits(
            &[Some(&file(b"x", 1)), Some(&file(b"x", 1))],
            &tuples
        ));
        assert!(!tuple_fits(&[None, None], &tuples));
        // A link's halves differ by the link count.
        let (one, two) = (
            promised(b"x", 1).map(|n| n.as_entry()),
            promised(b"x", 2).map(|n| n.as_entry()),
        );
        let link = vec![vec![one, None], vec![two.clone(), two]];
        assert!(tuple_fits(&[Some(&file(b"x", 2)), Some(&file(b"x", 2))], &link));
        assert!(!tuple_fits(&[Some(&file(b"x", 1)), Some(&file(b"x", 1))], &link));
    }

    #[test]
    fn every_new_check_is_a_promise_check() {
        for c in ["durable-meta", "op-atomic", "durable-data", "durable-dir"] {
            assert!(is_promise_check(c), "{c}");
        }
        assert!(!is_promise_check("fsck"));
    }
}
