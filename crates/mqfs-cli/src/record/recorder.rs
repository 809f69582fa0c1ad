//! The [`Recorder`]: the state of a recording between requests (see the
//! module docs of [`crate::record`] for its contract and limits).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crashfuzz::{Durable, Kind, ModeName, OpId, OpRecord, Promise, PromiseBuilder, SavedRun};
use mqfs::{FileType, Ino, Mode, SyncKind};
use pcie_sim::BusTrace;

use super::names::{kind_of, History, Names};
use super::{At, Begun, Make, Read, Recorded, Req, Wanted};
use crate::error::CliError;

/// A sync that returned without error, waiting for what it promises.
#[derive(Debug)]
struct Synced {
    id: OpId,
    ino: Ino,
    kind: SyncKind,
    path: String,
    label: String,
}

/// Records a mounted run; see the module docs for its contract and limits.
#[derive(Debug)]
pub struct Recorder {
    run: SavedRun,
    file: PathBuf,
    names: Names,
    history: History,
    /// The promises, and the operations whose start ends them.
    promises: PromiseBuilder,
    synced: Option<Synced>,
    /// Files with a known history written since their content was last
    /// noted (`mq` mode only: nothing else needs versions).
    dirty: BTreeSet<Ino>,
    /// The last operation was a sync that returned without error.
    sync_returned: bool,
}

fn sync_name(k: SyncKind) -> &'static str {
    match k {
        SyncKind::Fsync => "fsync",
        SyncKind::Fdatasync => "fdatasync",
        SyncKind::Fatomic => "fatomic",
        SyncKind::Fdataatomic => "fdataatomic",
    }
}

impl Recorder {
    /// A recorder adding to `run` (no trace yet), saving to `file`, for a
    /// file system in `mode`.
    pub fn new(run: SavedRun, file: &Path, mode: Mode) -> Recorder {
        Recorder {
            run,
            file: file.to_path_buf(),
            names: Names::default(),
            history: History::default(),
            promises: PromiseBuilder::new(ModeName::of_fs_mode(mode)),
            synced: None,
            dirty: BTreeSet::new(),
            sync_returned: false,
        }
    }

    /// The run so far (its promises are added at [`Recorder::finish`]).
    pub fn run(&self) -> &SavedRun {
        &self.run
    }

    /// The promises so far.
    pub fn promises(&self) -> &[Promise] {
        self.promises.promises()
    }

    /// True if versions of files are kept: fatomic promises atomicity
    /// only (`mq` mode; elsewhere it is fsync).
    fn keeps_versions(&self) -> bool {
        self.promises.atomic_only(SyncKind::Fatomic)
    }

    /// A reply told the kernel that `parent/name` is `ino`; `looked_up`
    /// if it was found rather than made.
    pub fn learned(&mut self, parent: Ino, name: &str, ino: Ino, ftype: FileType, looked_up: bool) {
        self.names.learn(parent, name, ino, kind_of(ftype));
        if looked_up && ftype == FileType::File {
            if let Some(p) = self.names.path(parent, name) {
                self.history.existing(&p);
            }
        }
    }

    /// Records an operation outside the requests (the mount).
    pub fn op(&mut self, label: &str, core: usize, start: At, end: At) {
        self.push_op(label.into(), core, start, end, None);
    }

    fn push_op(&mut self, op: String, thread: usize, start: At, end: At, error: Option<String>) {
        self.run.push_op(OpRecord {
            thread,
            op,
            start: start.entries,
            end: end.entries,
            start_time: start.time.to_string(),
            end_time: end.time.to_string(),
            start_ps: start.time.as_ps(),
            end_ps: end.time.as_ps(),
            error,
        });
    }

    /// The operation's label, the paths it changes, and for a sync its
    /// path.
    fn describe(&self, req: &Req) -> (String, Vec<String>, Option<String>) {
        let of = |ino: Ino| self.names.sync_path(ino).unwrap_or_else(|| format!("#{ino}"));
        let at = |p: Ino, n: &str| self.names.path(p, n).unwrap_or_else(|| format!("#{p}/{n}"));
        match req {
            Req::Query => ("read".into(), Vec::new(), None),
            Req::Unmount => ("unmount".into(), Vec::new(), None),
            Req::Make(m, p, n) => {
                let path = at(*p, n);
                let label = match m {
                    Make::File => format!("create {path}"),
                    Make::Dir => format!("mkdir {path}"),
                    Make::Symlink => format!("symlink {path}"),
                    Make::Link(ino) => format!("link {} {path}", of(*ino)),
                };
                let mut changed = vec![path];
                if let Make::Link(ino) = m {
                    changed.extend(self.names.paths_of(*ino));
                }
                (label, changed, None)
            }
            Req::Unlink(p, n) => (format!("unlink {}", at(*p, n)), vec![at(*p, n)], None),
            Req::Rmdir(p, n) => (format!("rmdir {}", at(*p, n)), vec![at(*p, n)], None),
            Req::Rename(p, n, np, nn) => {
                let (a, b) = (at(*p, n), at(*np, nn));
                (format!("rename {a} {b}"), vec![a, b], None)
            }
            Req::Write(ino, off, len) => (
                format!("write {} {off} {len}", of(*ino)),
                self.names.paths_of(*ino),
                None,
            ),
            Req::Setattr(ino, Some(size)) => (
                format!("truncate {} {size}", of(*ino)),
                self.names.paths_of(*ino),
                None,
            ),
            // Promises are about contents and names, which these keep.
            Req::Setattr(ino, None) => (format!("setattr {}", of(*ino)), Vec::new(), None),
            Req::Sync(ino, k) => (
                format!("{} {}", sync_name(*k), of(*ino)),
                Vec::new(),
                self.names.sync_path(*ino),
            ),
        }
    }

    /// An operation starts (`at`: just before it runs) on `core`: the
    /// promises about what it changes stop holding. `None` for reads.
    pub fn begin(&mut self, req: Req, core: usize, at: At) -> Option<Begun> {
        if req == Req::Query {
            return None;
        }
        self.synced = None;
        self.sync_returned = false;
        let (label, paths, sync_path) = self.describe(&req);
        let id = self.promises.begin(paths, at.entries);
        Some(Begun {
            id,
            req,
            label,
            core,
            start: at,
            sync_path,
        })
    }

    /// The operation returned (`at`: just after), with `error` if it
    /// failed.
    pub fn end(&mut self, b: Begun, at: At, error: Option<String>) {
        let ok = error.is_none();
        self.promises.end(b.id, at.entries, ok);
        self.push_op(b.label.clone(), b.core, b.start, at, error);
        if ok {
            self.changed(&b);
        }
    }

    /// Keeps the names and histories after operation `b` succeeded.
    fn changed(&mut self, b: &Begun) {
        match &b.req {
            Req::Make(Make::File, p, n) => {
                if let Some(path) = self.names.path(*p, n) {
                    self.history.made(&path);
                }
            }
            Req::Make(Make::Link(ino), p, n) => {
                if let Some(path) = self.names.path(*p, n) {
                    let others = self.names.paths_of(*ino);
                    self.history.linked(&path, &others);
                }
            }
            Req::Unlink(p, n) | Req::Rmdir(p, n) => {
                self.names.forget(*p, n);
            }
            Req::Write(ino, ..) | Req::Setattr(ino, Some(_)) => {
                let known = |p: &String| self.history.versions(p).is_some();
                if self.keeps_versions() && self.names.paths_of(*ino).iter().any(known) {
                    self.dirty.insert(*ino);
                }
            }
            Req::Rename(p, n, np, nn) => {
                let dir = self.names.lookup(*p, n).and_then(|i| self.names.kind(i)) == Some(Kind::Dir);
                let (a, c) = (self.names.path(*p, n), self.names.path(*np, nn));
                if self.names.rename((*p, n), (*np, nn)) {
                    if let (Some(a), Some(c)) = (a, c) {
                        self.history.renamed(&a, &c, dir);
                    }
                }
            }
            Req::Sync(ino, kind) => {
                self.sync_returned = true;
                let Some(path) = b.sync_path.clone() else { return };
                if !self.promises.overlapped(b.id, &path) {
                    self.synced = Some(Synced {
                        id: b.id,
                        ino: *ino,
                        kind: *kind,
                        path,
                        label: b.label.clone(),
                    });
                }
            }
            _ => {}
        }
    }

    /// What to read for the promise of the sync that just returned, if it
    /// promises anything.
    pub fn wanted(&self) -> Option<Wanted> {
        let s = self.synced.as_ref()?;
        match self.names.kind(s.ino)? {
            Kind::File => Some(Wanted::File(s.ino)),
            Kind::Dir => Some(Wanted::Dir(s.ino)),
            Kind::Symlink => None,
        }
    }

    /// The promise of the sync that just returned, given what
    /// [`Recorder::wanted`] asked for.
    pub fn promise(&mut self, read: Read) {
        let Some(s) = self.synced.take() else { return };
        let atomic = self.promises.atomic_only(s.kind);
        match read {
            // fatomic of a directory: its changes are atomic with the
            // files' in the same transaction; nothing to promise alone.
            Read::Dir(_) if atomic => {}
            Read::Dir(entries) => {
                self.promises
                    .synced(s.id, s.kind, &s.path, Durable::Dir(entries), false, s.label);
            }
            Read::File(content) => {
                let before = self.history.versions(&s.path);
                self.note(s.ino, &content);
                if !atomic {
                    self.promises
                        .synced(s.id, s.kind, &s.path, Durable::File(content), false, s.label);
                } else if let Some(before) = before {
                    self.promises
                        .atomic(s.id, &s.path, before, Some(content), s.label);
                }
            }
        }
    }

    /// The files to read after the sync that just returned: written since
    /// their content was last noted, so that sync may have made their
    /// current content durable (see the module docs).
    pub fn unnoted(&self) -> Vec<Ino> {
        if !self.sync_returned {
            return Vec::new();
        }
        let named = |i: &&Ino| !self.names.paths_of(**i).is_empty();
        self.dirty.iter().filter(named).copied().collect()
    }

    /// File `ino` holds `content` at a persistence point: a version of
    /// each of its names.
    pub fn note(&mut self, ino: Ino, content: &[u8]) {
        self.history.synced(&self.names.paths_of(ino), content);
        self.dirty.remove(&ino);
    }

    /// Sets the run's trace (the whole trace from power-on) and saves the
    /// run.
    pub fn finish(mut self, trace: BusTrace) -> Result<Recorded, CliError> {
        let entries = trace.entries().len();
        for p in self.promises.into_promises() {
            self.run.push_promise(p);
        }
        self.run.finish(trace).map_err(CliError::Record)?;
        let bytes = self.run.save(&self.file).map_err(CliError::Record)?;
        let r = &self.run.recording;
        Ok(Recorded {
            path: self.file,
            entries,
            promises: r.promises.len(),
            ops: r.ops.len(),
            bytes,
        })
    }
}
