//! The [`PromiseBuilder`]: what the persistence points of a run promise,
//! and until when. Both recorders feed it: crashfuzz's own
//! ([`mod@crate::record`], operations of a built-in workload against the
//! reference model) and `mqfs mount --record` (requests of real programs
//! through FUSE). Each recorder knows the tree its own way and hands the
//! builder paths and contents; the builder owns the rules:
//!
//! - **windows.** A promise holds from where its operation returned (or,
//!   for fatomic, started) until an operation that can change one of its
//!   paths starts ([`PromiseBuilder::begin`], [`Promise::until`]);
//! - **fsync / fdatasync of a file** ([`PromiseBuilder::synced`] with
//!   [`Durable::File`]): the path holds exactly the synced bytes;
//!   fdatasync persists data, not the name, so the promise is
//!   `if_present` unless the caller knows the name was durable already;
//! - **fsync of a directory** ([`Durable::Dir`]): its entries;
//! - **fatomic / fdataatomic** (ccNVMe 5.1): in the MQFS modes atomicity
//!   only ([`PromiseBuilder::atomic`]: the file, if present, is one of its
//!   versions, from the call's start); in the other modes they are fsync /
//!   fdatasync;
//! - **rename of a durable file** ([`PromiseBuilder::renamed`]): it is
//!   under exactly one of its names (not in Ext4-NJ, which has no
//!   journal to make a rename atomic);
//! - **sync** ([`PromiseBuilder::synced_tree`]): the whole tree;
//! - **concurrency.** A sync that an operation changing its path
//!   overlapped promises nothing (what it persisted is not determined);
//!   an operation that fails promises nothing.

use std::collections::BTreeMap;

use mqfs::SyncKind;

use crate::model::Kind;
use crate::oracle::{touches, Expect, Promise};
use crate::record::ModeName;

/// An operation the builder was told about, from [`PromiseBuilder::begin`]
/// to [`PromiseBuilder::end`] (and, for its promise, until the next
/// operation begins).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OpId(u64);

/// What a sync found durable: the content of a file or the entries of a
/// directory, as the recorder's model or a read after the sync says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Durable {
    /// A file's whole content.
    File(Vec<u8>),
    /// A directory's entries (without `.` and `..`): name -> kind.
    Dir(BTreeMap<String, Kind>),
}

/// When an operation ran and what it changes.
#[derive(Debug)]
struct Span {
    start: usize,
    /// `None` while it runs.
    end: Option<usize>,
    /// The paths it changes (every name of a file it writes).
    paths: Vec<String>,
    /// The promise it made when it started (fatomic's), withdrawn if it
    /// fails.
    early: Option<usize>,
}

/// Ends every promise in force about a path an operation changing `path`
/// can change, when that operation starts after `at` trace entries: the
/// state after `at` entries has none of the operation's effects, so the
/// promise still covers it ([`Promise::until`] = `at + 1`).
pub(crate) fn end_promises(promises: &mut [Promise], path: &str, at: usize) {
    for p in promises.iter_mut().filter(|p| p.until == usize::MAX) {
        if p.expect.paths().iter().any(|pp| touches(path, pp)) {
            p.until = (at + 1).max(p.from);
        }
    }
}

/// Builds the promises of a run from its operations (as they begin and
/// end, in trace order) and its persistence points. See the module docs
/// for the rules.
#[derive(Debug)]
pub struct PromiseBuilder {
    mode: ModeName,
    promises: Vec<Promise>,
    spans: BTreeMap<u64, Span>,
    next: u64,
}

impl PromiseBuilder {
    /// A builder for a run of a file system in `mode`.
    pub fn new(mode: ModeName) -> PromiseBuilder {
        PromiseBuilder {
            mode,
            promises: Vec::new(),
            spans: BTreeMap::new(),
            next: 0,
        }
    }

    /// The promises so far.
    pub fn promises(&self) -> &[Promise] {
        &self.promises
    }

    /// The promises, for the recording.
    pub fn into_promises(self) -> Vec<Promise> {
        self.promises
    }

    /// True if a sync of `kind` promises atomicity only (fatomic and
    /// fdataatomic in the MQFS modes); elsewhere they are fsync and
    /// fdatasync.
    pub fn atomic_only(&self, kind: SyncKind) -> bool {
        self.mode.is_mq() && matches!(kind, SyncKind::Fatomic | SyncKind::Fdataatomic)
    }

    /// An operation that changes `paths` (every name of a file it writes:
    /// a write through one hard link changes them all; none for a sync)
    /// starts after `at` trace entries: the promises about what it can
    /// change stop holding.
    pub fn begin(&mut self, paths: Vec<String>, at: usize) -> OpId {
        // Ended spans matter only to syncs that ran with them; once none
        // runs, none can.
        if self.spans.values().all(|s| s.end.is_some()) {
            self.spans.clear();
        }
        for p in &paths {
            end_promises(&mut self.promises, p, at);
        }
        let id = self.next;
        self.next += 1;
        self.spans.insert(
            id,
            Span {
                start: at,
                end: None,
                paths,
                early: None,
            },
        );
        OpId(id)
    }

    /// Operation `id` returned after `at` trace entries; `ok` if it
    /// succeeded. A failed operation's early promise (fatomic's) is
    /// withdrawn.
    pub fn end(&mut self, id: OpId, at: usize, ok: bool) {
        let Some(s) = self.spans.get_mut(&id.0) else {
            return;
        };
        s.end = Some(at);
        if !ok {
            if let Some(p) = s.early.and_then(|i| self.promises.get_mut(i)) {
                p.until = p.from;
            }
        }
    }

    /// True if an operation other than `id` that changes something
    /// touching `path` (`"/"`: anything) ran at any moment while `id` ran.
    pub fn overlapped(&self, id: OpId, path: &str) -> bool {
        let Some(me) = self.spans.get(&id.0) else {
            return false;
        };
        self.spans.iter().any(|(i, s)| {
            *i != id.0 && s.end.is_none_or(|e| e > me.start) && s.paths.iter().any(|q| touches(q, path))
        })
    }

    fn push(&mut self, expect: Expect, from: usize, op: String) -> usize {
        self.promises.push(Promise {
            expect,
            from,
            until: usize::MAX,
            op,
        });
        self.promises.len() - 1
    }

    /// Sync `id` of `kind` on `path` returned with `state` durable; the
    /// name was durable before (`name_durable`: a data-only sync does
    /// not persist it). Promises `state` from the sync's return, unless
    /// the sync promises atomicity only ([`PromiseBuilder::atomic`]) or a
    /// change of `path` overlapped it. Returns true if it promised.
    pub fn synced(
        &mut self,
        id: OpId,
        kind: SyncKind,
        path: &str,
        state: Durable,
        name_durable: bool,
        op: String,
    ) -> bool {
        let Some(end) = self.spans.get(&id.0).and_then(|s| s.end) else {
            return false;
        };
        if self.atomic_only(kind) || self.overlapped(id, path) {
            return false;
        }
        let if_present = matches!(kind, SyncKind::Fdatasync | SyncKind::Fdataatomic) && !name_durable;
        let path = path.to_string();
        let expect = match state {
            Durable::File(content) => Expect::File {
                path,
                content,
                if_present,
            },
            Durable::Dir(entries) => Expect::Dir {
                path,
                entries,
                if_present,
            },
        };
        self.push(expect, end, op);
        true
    }

    /// Atomic sync `id` (fatomic / fdataatomic, in a mode where it
    /// promises atomicity only) of the file at `path`: from the call's
    /// start the file, if present, is empty, one of its `earlier` contents
    /// (at its earlier persistence points) or its content at the call.
    /// Versions may repeat (the check is membership). Withdrawn if the
    /// call fails.
    pub fn atomic(
        &mut self,
        id: OpId,
        path: &str,
        earlier: Vec<Vec<u8>>,
        at_call: Option<Vec<u8>>,
        op: String,
    ) {
        let Some(start) = self.spans.get(&id.0).map(|s| s.start) else {
            return;
        };
        let mut versions = earlier;
        versions.push(Vec::new());
        versions.extend(at_call);
        let i = self.push(
            Expect::Atomic {
                path: path.to_string(),
                versions,
            },
            start,
            op,
        );
        if let Some(s) = self.spans.get_mut(&id.0) {
            s.early = Some(i);
        }
    }

    /// Rename `id` of the file at `from` (holding `content`) to `to`,
    /// just begun. If the file's name and content were durable (a
    /// non-optional promise of exactly that content at `from` was ended
    /// by this rename), it must be under exactly one of its names from
    /// now on. A promise ended at the same trace position by an earlier
    /// operation that changed the content (a buffered write) does not
    /// count: the content is then not durable.
    pub fn renamed(&mut self, id: OpId, from: &str, to: &str, content: Vec<u8>, op: String) {
        let Some(start) = self.spans.get(&id.0).map(|s| s.start) else {
            return;
        };
        if self.mode == ModeName::None {
            return;
        }
        let durable = self.promises.iter().any(|p| {
            p.until == start + 1
                && matches!(&p.expect, Expect::File { path, content: c, if_present: false }
                    if path == from && *c == content)
        });
        if durable {
            self.push(
                Expect::Rename {
                    from: from.to_string(),
                    to: to.to_string(),
                    content,
                },
                start,
                op,
            );
        }
    }

    /// sync `id` returned with `tree` (every path, kind and content)
    /// durable: promises it, unless a change overlapped the sync.
    pub fn synced_tree(&mut self, id: OpId, tree: Vec<(String, Kind, Option<Vec<u8>>)>, op: String) -> bool {
        let Some(end) = self.spans.get(&id.0).and_then(|s| s.end) else {
            return false;
        };
        if self.overlapped(id, "/") {
            return false;
        }
        self.push(Expect::Tree(tree), end, op);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(content: &[u8]) -> Durable {
        Durable::File(content.to_vec())
    }

    #[test]
    fn a_change_of_a_promised_path_ends_the_window_after_its_start() {
        let mut b = PromiseBuilder::new(ModeName::Classic);
        let s = b.begin(Vec::new(), 10);
        b.end(s, 20, true);
        assert!(b.synced(s, SyncKind::Fsync, "/d/f", file(b"x"), true, "fsync /d/f".into()));
        // Another file, and an attribute-only change: the promise holds.
        let o = b.begin(vec!["/d/g".into()], 30);
        b.end(o, 31, true);
        let o = b.begin(Vec::new(), 32);
        b.end(o, 33, true);
        assert_eq!((b.promises()[0].from, b.promises()[0].until), (20, usize::MAX));
        // Renaming the parent away changes the file's path.
        let o = b.begin(vec!["/d".into(), "/e".into()], 40);
        b.end(o, 41, true);
        assert_eq!(b.promises()[0].until, 41);
        assert!(b.promises()[0].covers(40) && !b.promises()[0].covers(41));
    }

    #[test]
    fn fdatasync_promises_the_name_only_if_it_was_durable() {
        let mut b = PromiseBuilder::new(ModeName::Horae);
        for durable in [true, false] {
            let s = b.begin(Vec::new(), 0);
            b.end(s, 1, true);
            b.synced(
                s,
                SyncKind::Fdatasync,
                "/f",
                file(b"x"),
                durable,
                "fdatasync /f".into(),
            );
        }
        let if_present: Vec<bool> = b
            .promises()
            .iter()
            .map(|p| matches!(p.expect, Expect::File { if_present: true, .. }))
            .collect();
        assert_eq!(if_present, [false, true]);
    }

    #[test]
    fn a_sync_overlapped_by_a_change_of_its_path_promises_nothing() {
        let mut b = PromiseBuilder::new(ModeName::Mq);
        let w = b.begin(vec!["/f".into()], 0);
        let s = b.begin(Vec::new(), 2);
        b.end(w, 4, true);
        b.end(s, 6, true);
        assert!(b.overlapped(s, "/f") && b.overlapped(s, "/"));
        assert!(!b.overlapped(s, "/g"));
        assert!(!b.synced(s, SyncKind::Fsync, "/f", file(b"x"), true, "fsync /f".into()));
        assert!(!b.synced_tree(s, Vec::new(), "sync".into()));
        assert!(b.synced(s, SyncKind::Fsync, "/g", file(b"y"), true, "fsync /g".into()));
        assert_eq!(b.promises().len(), 1);
        // Once every operation ended, the next one starts clean.
        let t = b.begin(Vec::new(), 7);
        b.end(t, 8, true);
        assert!(b.synced_tree(t, Vec::new(), "sync".into()));
    }

    #[test]
    fn a_refused_atomic_sync_withdraws_its_own_promise_only() {
        // ace2-17-06-00 in mq-atomic: `fatomic /bar` succeeds, then a
        // `fatomic /A/foo` of a name that is gone is refused. Its refusal
        // once withdrew the last atomic promise, /bar's.
        let mut b = PromiseBuilder::new(ModeName::MqAtomic);
        let ok = b.begin(Vec::new(), 415);
        assert!(b.atomic_only(SyncKind::Fatomic));
        b.atomic(
            ok,
            "/bar",
            vec![b"v1".to_vec()],
            Some(b"v2".to_vec()),
            "fatomic /bar".into(),
        );
        b.end(ok, 429, true);
        assert!(!b.synced(
            ok,
            SyncKind::Fatomic,
            "/bar",
            file(b"v2"),
            true,
            "fatomic /bar".into()
        ));
        let refused = b.begin(Vec::new(), 429);
        b.end(refused, 429, false);
        let p = &b.promises()[0];
        assert_eq!((p.from, p.until), (415, usize::MAX));
        assert_eq!(
            p.expect,
            Expect::Atomic {
                path: "/bar".into(),
                versions: vec![b"v1".to_vec(), Vec::new(), b"v2".to_vec()]
            }
        );
        // A refused call withdraws the promise it made.
        let bad = b.begin(Vec::new(), 430);
        b.atomic(bad, "/baz", Vec::new(), None, "fatomic /baz".into());
        b.end(bad, 431, false);
        assert!(!b.promises()[1].covers(430));
        // Outside the MQFS modes fatomic is fsync.
        let mut b = PromiseBuilder::new(ModeName::Classic);
        let s = b.begin(Vec::new(), 0);
        b.end(s, 1, true);
        assert!(b.synced(s, SyncKind::Fatomic, "/f", file(b"x"), true, "fatomic /f".into()));
    }

    #[test]
    fn a_rename_promises_one_name_only_for_a_durable_file() {
        for mode in [ModeName::Classic, ModeName::None] {
            let mut b = PromiseBuilder::new(mode);
            let s = b.begin(Vec::new(), 0);
            b.end(s, 1, true);
            b.synced(s, SyncKind::Fsync, "/a", file(b"x"), true, "fsync /a".into());
            // Different content than synced: not durable.
            let r = b.begin(vec!["/a".into(), "/b".into()], 5);
            b.renamed(r, "/a", "/b", b"y".to_vec(), "rename /a /b".into());
            b.end(r, 6, true);
            assert_eq!(b.promises().len(), 1);
            let s = b.begin(Vec::new(), 7);
            b.end(s, 8, true);
            b.synced(s, SyncKind::Fsync, "/b", file(b"y"), true, "fsync /b".into());
            let r = b.begin(vec!["/b".into(), "/c".into()], 9);
            b.renamed(r, "/b", "/c", b"y".to_vec(), "rename /b /c".into());
            b.end(r, 10, true);
            let renames = b
                .promises()
                .iter()
                .filter(|p| matches!(p.expect, Expect::Rename { .. }))
                .count();
            // Ext4-NJ has no journal to make a rename atomic.
            assert_eq!(renames, usize::from(mode != ModeName::None), "{mode:?}");
        }
    }
}
