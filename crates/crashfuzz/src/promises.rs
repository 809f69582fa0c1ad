//! The [`PromiseBuilder`]: what the persistence points of a run promise,
//! and how later operations widen it. Both recorders feed it: crashfuzz's
//! own ([`mod@crate::record`], operations of a built-in workload against
//! the reference model, which gives each operation's outcome) and `mqfs
//! mount --record` (requests of real programs through FUSE, outcomes
//! unknown). The builder owns the rules; [`crate::oracle::check`] only
//! compares a recovered name with its allowed states.
//!
//! # What is promised (after CrashMonkey's oracle and ext4's semantics)
//!
//! - **fsync of a file**: its bytes (so its size), link count, mode, its
//!   extended attributes (all of them: names and values), and its name at
//!   the synced path (ext4 commits the running transaction, which holds
//!   the name's creation and the inode's attribute changes: attributes
//!   are inode metadata, journaled with the inode by
//!   `ext4_xattr_set_handle`, fs/ext4/xattr.c; `Durable::States`);
//! - **fdatasync**: its bytes, not its link count nor its attributes
//!   (fdatasync(2) skips metadata not needed to read the data back; ext4's
//!   `ext4_fsync_journal`, fs/ext4/fsync.c, waits for `i_datasync_tid`
//!   only, which `ext4_do_update_inode`, fs/ext4/inode.c, advances only
//!   when the on-disk size changes); nor the name unless
//!   the caller knows it was durable already (then the path may be
//!   absent);
//! - **fsync of a directory**: its entries, each one's kind and (for a
//!   file) link count, that it holds no other names, and its own
//!   attributes;
//! - **sync, and the setup** (which ends with a clean unmount): the whole
//!   tree, every file's bytes, link count, mode and attributes, every
//!   directory's attributes and listing ([`PromiseBuilder::base`],
//!   [`PromiseBuilder::synced_tree`]);
//!   setup files over [`BASE_CONTENT_LIMIT`] are promised without their
//!   bytes (reading them at every crash state would cost more than the
//!   rest of the check);
//! - **fatomic / fdataatomic** (ccNVMe 5.1): in the MQFS modes atomicity
//!   only ([`PromiseBuilder::atomic`]: the file, if present, is wholly one
//!   of its versions, from the call's start); elsewhere fsync / fdatasync;
//! - **fbarrier / fdatabarrier** (HoRAE Table 1, 5.6): in the `horae`
//!   mode ordering only: the file's state at the barrier is ordered before
//!   every later write but not durable, so fsync's (fdatasync's) promise
//!   is deferred ([`PromiseBuilder::synced`] of a [`PromiseBuilder::barrier`]) until a later sync
//!   that began after the barrier returned comes back: HoraeFS's fsync,
//!   fdatasync and sync wait until every transaction committed before
//!   theirs is durable (`mqfs` `Jbd::commit_and_wait`: the target is the
//!   running transaction, or the last one when nothing runs), and a later
//!   durable write implies the barrier's writes by their order. Before
//!   that, a name first made after the barrier binds it: where the name
//!   exists, so does the barrier's state ([`PromiseBuilder::ordered_by`],
//!   [`Expect::Ordered`]). Elsewhere the barriers are fsync and fdatasync;
//! - **atomicity before durability** ([`PromiseBuilder::atomic_op`]): in
//!   the journaled modes (not Ext4-NJ) rename and link of names whose state
//!   is durable are seen wholly or not at all at every crash point from
//!   the operation's start, before any fsync: the two names are in their
//!   state before or after, never half (a file under both names after a
//!   rename, or under neither). JBD2 logs a rename's two entries and the
//!   inode in one handle, and so does MQFS's transaction; single-name
//!   operations (create, unlink, mkdir, rmdir, symlink) are all or
//!   nothing by the per-name rule below, their name and inode state being
//!   one allowed state.
//!
//! # Later operations widen, they do not end (CrashMonkey: "a persisted
//! # file must match its persisted state unless a later operation changed
//! # it, in which case it matches either")
//!
//! A promise holds for the rest of the run. An operation that changes a
//! promised name adds, from its start (it may be in flight at the crash),
//! the state it leaves the name in ([`PromiseBuilder::begin_op`], with the
//! model's outcome) to the name's allowed states; the promise is ended and
//! its widened copy starts there, so a crash point is checked against
//! exactly what was allowed at it. Per kind of object:
//!
//! - **file content**: any version the file had between operations, block
//!   by block (4 KiB blocks reach the media independently and a block in
//!   flight may be old or new; see [`crate::oracle::content_allowed`]);
//!   the size is one of the versions' sizes, or a page boundary between
//!   them (Linux grows `i_size` page by page while it copies a write);
//! - **file metadata** (link count, mode): any value of its versions;
//! - **extended attributes** (of a file or directory): the whole set of
//!   one of its versions, never a mix within the set nor a torn value: a
//!   setxattr or removexattr rewrites the attribute block and the inode in
//!   one journal transaction (JBD2 in ext4, the inode's transaction in
//!   MQFS), so each is all or nothing, and versions are the sets the
//!   node had between operations;
//! - **directory entries**: a promised name may also be in any state a
//!   later operation left it in (absent included); a name a later
//!   operation made in a listed directory is allowed, with its kind and
//!   link count;
//! - **name existence**: absent is allowed once an operation removed or
//!   renamed it away; present once one made it;
//! - **all-or-nothing sets** ([`Expect::OneOf`]): each later operation on
//!   one of the names adds the combination it leaves.
//!
//! A later sync whose promise implies an earlier one (each name's new
//! states among its old, every listed directory still listed) ends the
//! earlier one: the newer promise then speaks for the object. A recorder
//! that cannot tell an operation's outcome ([`PromiseBuilder::begin`],
//! `mqfs mount --record`) ends the promises it touches instead, as before:
//! an unknown outcome allows anything.
//!
//! # Concurrency
//!
//! A sync that an operation changing its path overlapped promises nothing
//! (what it persisted is not determined); an operation that fails
//! promises nothing. An outcome computed when an operation starts misses
//! another in flight on the same file; when it ends, the outcome the
//! model reached is added too ([`PromiseBuilder::settled`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use mqfs::SyncKind;

use crate::content::Content;
use crate::model::Kind;
use crate::oracle::{touches, Expect, Node, Promise, States};
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
    /// What the model says the sync made durable: each name's state, and
    /// the directories whose listing it made durable.
    States(States),
}

/// What an fsync of the file at `path` in `state` (the model's) makes
/// durable: the name, and its content, link count and mode.
pub fn file_durable(path: &str, state: Option<Node>) -> States {
    States {
        paths: [(path.to_string(), vec![state])].into(),
        listed: Default::default(),
    }
}

/// What an fsync of the directory at `path` in `state` (the model's)
/// holding `entries` (the model's states of its names) makes durable: its
/// name and extended attributes, its listing, and each entry's kind and
/// link count (not a file's bytes nor an entry's attributes).
pub fn dir_durable(path: &str, state: Option<Node>, entries: Vec<(String, Option<Node>)>) -> States {
    let mut paths: BTreeMap<String, Vec<Option<Node>>> = [(path.to_string(), vec![state])].into();
    for (q, s) in entries {
        paths.insert(q, vec![s.map(|n| n.as_entry())]);
    }
    States {
        paths,
        listed: [path.to_string()].into(),
    }
}

/// What a sync (or the setup) of the tree `all` (every name with its
/// state, the root included) makes durable: all of it, every directory
/// listed; files over `content_limit` bytes without their bytes.
pub fn tree_durable(all: Vec<(String, Option<Node>)>, content_limit: Option<usize>) -> States {
    let mut st = States::default();
    for (q, s) in all {
        let s = match s {
            Some(Node::File {
                content: Some(c),
                nlink,
                perm,
                xattrs,
            }) if content_limit.is_some_and(|l| c.len() > l) => Some(Node::File {
                content: None,
                nlink,
                perm,
                xattrs,
            }),
            s => s,
        };
        if matches!(s, Some(Node::Dir { .. })) {
            st.listed.insert(q.clone());
        }
        st.paths.insert(q, vec![s]);
    }
    st
}

/// Setup files larger than this are promised without their bytes (see
/// the module docs).
pub const BASE_CONTENT_LIMIT: usize = 1 << 20;

/// A name's state reduced to what `template` promises (its `None` fields
/// dropped); entry form (kind and link count) without a template.
fn like(state: &Option<Node>, template: Option<&Node>) -> Option<Node> {
    let n = state.as_ref()?;
    Some(match (n, template) {
        (
            Node::File {
                content,
                nlink,
                perm,
                xattrs,
            },
            Some(Node::File {
                content: tc,
                nlink: tn,
                perm: tp,
                xattrs: tx,
            }),
        ) => Node::File {
            content: tc.as_ref().and(content.clone()),
            nlink: tn.and(*nlink),
            perm: tp.and(*perm),
            xattrs: tx.as_ref().and(xattrs.clone()),
        },
        (Node::Dir { xattrs }, Some(Node::Dir { xattrs: tx })) => Node::Dir {
            xattrs: tx.as_ref().and(xattrs.clone()),
        },
        (n, _) => n.as_entry(),
    })
}

fn parent_of(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &p[..i],
    }
}

/// `st` with `effects` (names and the states an operation leaves them
/// in) added to the allowed states of the names it promises, or of new
/// names in its listed directories; `None` if nothing changes.
fn widen(st: &States, effects: &[(String, Option<Node>)]) -> Option<States> {
    let mut out = st.clone();
    let mut changed = false;
    for (q, state) in effects {
        if let Some(allowed) = out.paths.get_mut(q) {
            let template = allowed
                .iter()
                .flatten()
                .find(|n| state.as_ref().is_some_and(|s| s.kind() == n.kind()))
                .cloned();
            let s = like(state, template.as_ref());
            if !allowed.contains(&s) {
                allowed.push(s);
                changed = true;
            }
        } else if st.listed.contains(parent_of(q)) && q != "/" {
            // A name the listing did not hold: absent, or what it became.
            let s = like(state, None);
            if s.is_some() {
                out.paths.insert(q.clone(), vec![None, s]);
                changed = true;
            }
        }
    }
    changed.then_some(out)
}

/// True if every state `new` allows for each name is one `old` allows
/// (an old `None` field accepts any value), and every directory `old`
/// lists `new` lists too: then `new` says at least what `old` says.
fn implies(new: &States, old: &States) -> bool {
    let fits = |n: &Option<Node>, o: &Option<Node>| match (n, o) {
        (None, None) => true,
        (Some(n), Some(o)) => like(&Some(n.clone()), Some(o)).as_ref() == Some(o),
        _ => false,
    };
    old.listed.is_subset(&new.listed)
        && old.paths.iter().all(|(q, o)| match new.paths.get(q) {
            Some(n) => n.iter().all(|ns| o.iter().any(|os| fits(ns, os))),
            // Absent where a listed directory is present, as old allows.
            None => new.listed.contains(parent_of(q)) && o.contains(&None),
        })
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
    /// A barrier (fbarrier, fdatabarrier: [`PromiseBuilder::barrier`]).
    barrier: bool,
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
    /// Promises not in force yet (a barrier's, [`Self::synced`]),
    /// by index, with the trace position their barrier returned at; a
    /// widened copy of one is deferred with it.
    deferred: BTreeMap<usize, usize>,
}

impl PromiseBuilder {
    /// A builder for a run of a file system in `mode`.
    pub fn new(mode: ModeName) -> PromiseBuilder {
        PromiseBuilder {
            mode,
            promises: Vec::new(),
            spans: BTreeMap::new(),
            next: 0,
            deferred: BTreeMap::new(),
        }
    }

    /// The promises so far, as recorded: a barrier's that no later sync
    /// has made durable yet is among them with the window it will have
    /// ([`Self::in_force`] leaves it out).
    pub fn promises(&self) -> &[Promise] {
        &self.promises
    }

    /// The promises in force after `at` trace entries, as the run stands
    /// now: without the barriers' promises still waiting for a sync.
    pub fn in_force(&self, at: usize) -> impl DoubleEndedIterator<Item = &Promise> {
        self.promises
            .iter()
            .enumerate()
            .filter(move |(i, p)| p.covers(at) && !self.deferred.contains_key(i))
            .map(|(_, p)| p)
    }

    /// The promises, for the recording. A barrier's promise that no later
    /// sync made durable holds nowhere.
    pub fn into_promises(mut self) -> Vec<Promise> {
        for i in std::mem::take(&mut self.deferred).into_keys() {
            let p = &mut self.promises[i];
            p.until = p.from;
        }
        self.promises
    }

    /// True if a barrier's promise waits for a later sync (see
    /// [`Self::synced`]): in the `horae` mode, whose barriers order without
    /// making durable; elsewhere they are syncs.
    fn defers_barriers(&self) -> bool {
        self.mode.is_horae()
    }

    /// Operation `id` is a barrier (fbarrier, fdatabarrier): what its
    /// [`Self::synced`] promises waits for a later durable sync where the
    /// mode's barriers only order.
    pub fn barrier(&mut self, id: OpId) {
        if let Some(s) = self.spans.get_mut(&id.0) {
            s.barrier = true;
        }
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
        // Ended spans matter only to syncs that ran with them, and to an
        // atomic operation begun at the trace position they ended at
        // ([`PromiseBuilder::atomic_op`]); once none runs and none ended
        // here, none can.
        if self.spans.values().all(|s| s.end.is_some_and(|e| e < at)) {
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
                barrier: false,
            },
        );
        OpId(id)
    }

    /// An operation that changes `paths` starts after `at` trace entries,
    /// and `effects` are the states it leaves the names it can change in
    /// (the model's outcome): promises about those names are widened (see
    /// the module docs); promises of the kinds another recorder makes
    /// ([`Expect::File`], [`Expect::Dir`], [`Expect::Tree`],
    /// [`Expect::Rename`]) end as with [`PromiseBuilder::begin`].
    pub fn begin_op(&mut self, paths: Vec<String>, at: usize, effects: &[(String, Option<Node>)]) -> OpId {
        let legacy: Vec<String> = paths.clone();
        let id = self.begin(Vec::new(), at);
        if let Some(s) = self.spans.get_mut(&id.0) {
            s.paths = paths;
        }
        let from = at + 1;
        let n = self.promises.len();
        for i in 0..n {
            let p = &self.promises[i];
            if p.until != usize::MAX {
                continue;
            }
            let widened = match &p.expect {
                Expect::States(st) => widen(st, effects).map(Expect::States),
                Expect::Atomic { path, versions } if effects.iter().any(|(q, _)| q == path) => {
                    // Wholly one version until the file changes; then
                    // block by block, like any content.
                    let mut allowed: Vec<Option<Node>> = vec![None];
                    allowed.extend(versions.iter().map(|v| {
                        Some(Node::File {
                            content: Some(Arc::new(Content::from(v.as_slice()))),
                            nlink: None,
                            perm: None,
                            xattrs: None,
                        })
                    }));
                    let st = States {
                        paths: [(path.clone(), allowed)].into(),
                        listed: Default::default(),
                    };
                    Some(Expect::States(widen(&st, effects).unwrap_or(st)))
                }
                Expect::Ordered { marker, then } => widen(then, effects).map(|then| Expect::Ordered {
                    marker: marker.clone(),
                    then,
                }),
                Expect::OneOf { paths, tuples } => {
                    let hit = effects.iter().any(|(q, _)| paths.contains(q));
                    match tuples.last() {
                        Some(last) if hit => {
                            let t: Vec<Option<Node>> = paths
                                .iter()
                                .zip(last)
                                .map(|(q, old)| match effects.iter().find(|(e, _)| e == q) {
                                    Some((_, s)) => like(s, None),
                                    None => old.clone(),
                                })
                                .collect();
                            (!tuples.contains(&t)).then(|| {
                                let mut tuples = tuples.clone();
                                tuples.push(t);
                                Expect::OneOf {
                                    paths: paths.clone(),
                                    tuples,
                                }
                            })
                        }
                        _ => None,
                    }
                }
                _ => None,
            };
            if let Some(expect) = widened {
                self.replace(i, expect, from);
            }
        }
        // The other recorder's kinds: the outcome is not theirs to widen.
        for p in &legacy {
            for q in self.promises.iter_mut().filter(|q| {
                q.until == usize::MAX
                    && matches!(
                        q.expect,
                        Expect::File { .. } | Expect::Dir { .. } | Expect::Tree(_) | Expect::Rename { .. }
                    )
            }) {
                if q.expect.paths().iter().any(|pp| touches(p, pp)) {
                    q.until = (at + 1).max(q.from);
                }
            }
        }
        id
    }

    /// Promise `i` gives way to `expect` from trace position `from` (or
    /// its own start, if later).
    fn replace(&mut self, i: usize, expect: Expect, from: usize) {
        let p = &mut self.promises[i];
        let start = from.max(p.from);
        p.until = start;
        let op = p.op.clone();
        let barrier = self.deferred.get(&i).copied();
        let j = self.push_as(expect, start, op, barrier.is_some());
        if let Some(at) = barrier {
            self.deferred.insert(j, at);
        }
    }

    /// An operation starting after `at` trace entries may leave the names
    /// in `states`, which its file lost earlier in the run (an unlink or
    /// rename a crash may undo: a write through a descriptor then shows
    /// at the old name). Widens the per-name promises ([`Expect::States`])
    /// only, never an operation's all-or-nothing tuples
    /// ([`Expect::OneOf`]), which describe the world where the loss
    /// happened.
    pub fn widen_lost_names(&mut self, at: usize, states: &[(String, Option<Node>)]) {
        if states.is_empty() {
            return;
        }
        for i in 0..self.promises.len() {
            let p = &self.promises[i];
            if p.until != usize::MAX {
                continue;
            }
            if let Expect::States(st) = &p.expect {
                if let Some(w) = widen(st, states) {
                    self.replace(i, Expect::States(w), at + 1);
                }
            }
        }
    }

    /// Operation `id` (begun with [`PromiseBuilder::begin_op`]) left the
    /// names in `states` as the model now says: states another operation
    /// in flight made differ from those foreseen at its start are added
    /// to the promises in force (in place: they may have been reachable
    /// since that start).
    pub fn settled(&mut self, states: &[(String, Option<Node>)]) {
        for p in self.promises.iter_mut().filter(|p| p.until == usize::MAX) {
            if let Expect::States(st) = &p.expect {
                if let Some(w) = widen(st, states) {
                    p.expect = Expect::States(w);
                }
            }
        }
    }

    /// The state of `path` that a promise in force after `at` trace
    /// entries makes durable (it is the only one allowed), if any:
    /// `Some(None)` for a name durably absent (not held by a listed
    /// directory).
    pub fn durable_state(&self, path: &str, at: usize) -> Option<Option<Node>> {
        self.in_force(at).rev().find_map(|p| match &p.expect {
            Expect::States(st) => match st.paths.get(path) {
                Some(a) if a.len() == 1 => a.first().cloned(),
                Some(_) => None,
                None => st.listed.contains(parent_of(path)).then_some(None),
            },
            _ => None,
        })
    }

    /// Operation `id`, just begun, changes the names `paths` to the states
    /// `after` (the model's outcome), and the file system makes it atomic
    /// (rename, link: module docs). If the mode is journaled, every name's
    /// state is durable and no other operation on them is in flight,
    /// promises that the names are wholly before or after it (their kind
    /// and link count), from its start. Returns true if it promised.
    pub fn atomic_op(&mut self, id: OpId, paths: &[String], after: &[Option<Node>], op: String) -> bool {
        if self.mode == ModeName::None {
            return false;
        }
        let Some(start) = self.spans.get(&id.0).map(|s| s.start) else {
            return false;
        };
        // Busy: another operation on the names is in flight, or began at
        // this same trace position (no bus entry between the two, as for
        // a create just before a rename of the new name): its widening
        // starts after `start`, so the state durable at `start` is not
        // the state before this operation at a later crash (a commit
        // between the two may make the first durable without the second).
        let busy = self.spans.iter().any(|(i, s)| {
            *i != id.0
                && (s.end.is_none() || s.start >= start)
                && s.paths.iter().any(|q| paths.iter().any(|p| touches(q, p)))
        });
        // As durable just before the operation (its own widening starts
        // after its first entry).
        let before: Option<Vec<Option<Node>>> = paths.iter().map(|p| self.durable_state(p, start)).collect();
        let Some(before) = before else {
            return false;
        };
        if busy {
            return false;
        }
        let before: Vec<Option<Node>> = before.iter().map(|s| like(s, None)).collect();
        let after: Vec<Option<Node>> = after.iter().map(|s| like(s, None)).collect();
        self.push(
            Expect::OneOf {
                paths: paths.to_vec(),
                tuples: vec![before, after],
            },
            start + 1,
            op,
        );
        true
    }

    /// The setup's tree, durable from power-on (the setup ends with a
    /// clean unmount; the module docs say what is promised).
    pub fn base(&mut self, states: States) {
        self.push(Expect::States(states), 0, "setup".into());
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
        self.push_as(expect, from, op, false)
    }

    /// Pushes a promise; one in force (`deferred` false) ends the older
    /// ones it implies, a deferred one ends none (it is not in force yet).
    fn push_as(&mut self, expect: Expect, from: usize, op: String, deferred: bool) -> usize {
        if let (Expect::States(new), false) = (&expect, deferred) {
            for p in self
                .promises
                .iter_mut()
                .filter(|p| p.until == usize::MAX && p.from <= from)
            {
                if matches!(&p.expect, Expect::States(old) if implies(new, old)) {
                    p.until = from;
                }
            }
        }
        self.promises.push(Promise {
            expect,
            from,
            until: usize::MAX,
            op,
        });
        self.promises.len() - 1
    }

    /// A durable sync that began after `start` trace entries returned
    /// after `end`: every barrier's promise whose barrier returned by
    /// `start` holds from `end` (its copies ended before then hold
    /// nowhere).
    pub fn durable_from(&mut self, start: usize, end: usize) {
        let ready: Vec<usize> = self
            .deferred
            .iter()
            .filter(|(_, at)| **at <= start)
            .map(|(i, _)| *i)
            .collect();
        for i in ready {
            self.deferred.remove(&i);
            let p = &mut self.promises[i];
            p.from = p.from.max(end);
            p.until = p.until.max(p.from);
        }
    }

    /// An operation that began after `start` trace entries and returned
    /// after `end`, successfully, made `marker`, a name the run never had
    /// before: from its start, every barrier's promise still waiting at
    /// `end` whose barrier returned by `start` holds wherever the marker
    /// exists ([`Expect::Ordered`]; its states as they stand at `end`,
    /// which later operations widened, never narrowed). The operation
    /// joined a transaction committed after the barrier's writes, through
    /// the same ordering layer, so its name survives a crash only if they
    /// did.
    pub fn ordered_by(&mut self, marker: &str, start: usize, end: usize) {
        let from = start + 1;
        let waiting: Vec<(States, String)> = self
            .deferred
            .iter()
            .filter(|(i, at)| **at <= start && self.promises[**i].covers(end))
            .filter_map(|(i, _)| match &self.promises[*i].expect {
                Expect::States(st) => Some((st.clone(), self.promises[*i].op.clone())),
                _ => None,
            })
            .collect();
        for (then, op) in waiting {
            self.push(
                Expect::Ordered {
                    marker: marker.to_string(),
                    then,
                },
                from,
                op,
            );
        }
    }

    /// Where operation `id` began, if known.
    pub fn start_of(&self, id: OpId) -> Option<usize> {
        self.spans.get(&id.0).map(|s| s.start)
    }

    /// Sync `id` of `kind` on `path` returned with `state` durable; the
    /// name was durable before (`name_durable`: a data-only sync does
    /// not persist it). Promises `state` from the sync's return, unless
    /// the sync promises atomicity only ([`PromiseBuilder::atomic`]) or a
    /// change of `path` overlapped it. Returns true if it promised.
    ///
    /// A barrier's ([`Self::barrier`]; fbarrier as `kind` fsync,
    /// fdatabarrier as fdatasync) in the `horae` mode orders `state`
    /// before every later write without making it durable: the promise
    /// waits, in force neither at the barrier's return nor later until a
    /// sync begun after that return comes back ([`Self::durable_from`]),
    /// and binds meanwhile the states where a name made later exists
    /// ([`Self::ordered_by`]).
    pub fn synced(
        &mut self,
        id: OpId,
        kind: SyncKind,
        path: &str,
        state: Durable,
        name_durable: bool,
        op: String,
    ) -> bool {
        let Some((end, barrier)) = self.spans.get(&id.0).and_then(|s| Some((s.end?, s.barrier))) else {
            return false;
        };
        if self.atomic_only(kind) || self.overlapped(id, path) {
            return false;
        }
        let deferred = barrier && self.defers_barriers();
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
            Durable::States(mut st) => {
                let data_only = matches!(kind, SyncKind::Fdatasync | SyncKind::Fdataatomic);
                if let Some(allowed) = st.paths.get_mut(&path) {
                    if data_only {
                        *allowed = allowed.iter().map(|s| s.as_ref().map(Node::data_only)).collect();
                    }
                    if if_present && !allowed.contains(&None) {
                        allowed.push(None);
                    }
                }
                Expect::States(st)
            }
        };
        let i = self.push_as(expect, end, op, deferred);
        if deferred {
            self.deferred.insert(i, end);
        }
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

    /// sync `id` returned with `tree` (every name's state, every
    /// directory listed) durable: promises it, unless a change overlapped
    /// the sync.
    pub fn synced_tree(&mut self, id: OpId, tree: States, op: String) -> bool {
        let Some(end) = self.spans.get(&id.0).and_then(|s| s.end) else {
            return false;
        };
        if self.overlapped(id, "/") {
            return false;
        }
        self.push(Expect::States(tree), end, op);
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
        assert!(!b.synced_tree(s, States::default(), "sync".into()));
        assert!(b.synced(s, SyncKind::Fsync, "/g", file(b"y"), true, "fsync /g".into()));
        assert_eq!(b.promises().len(), 1);
        // Once every operation ended, the next one starts clean.
        let t = b.begin(Vec::new(), 7);
        b.end(t, 8, true);
        assert!(b.synced_tree(t, States::default(), "sync".into()));
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

    use crate::oracle::test_support::promised as f;

    fn states_of(p: &Promise) -> &States {
        match &p.expect {
            Expect::States(st) => st,
            e => panic!("not a States promise: {e:?}"),
        }
    }

    fn in_force(b: &PromiseBuilder, at: usize) -> Vec<&Promise> {
        b.in_force(at).collect()
    }

    /// `fbarrier /f` (operation `bar`) returns after `end` entries with
    /// `/f` holding `content`.
    fn barrier_returns(b: &mut PromiseBuilder, bar: OpId, end: usize, content: &[u8]) {
        b.barrier(bar);
        b.end(bar, end, true);
        let state = Durable::States(file_durable("/f", f(content, 1)));
        assert!(b.synced(bar, SyncKind::Fsync, "/f", state, true, "fbarrier /f".into()));
    }

    #[test]
    fn a_barrier_promises_from_the_return_of_a_sync_begun_after_it_in_the_horae_mode_only() {
        assert!(!PromiseBuilder::new(ModeName::Classic).defers_barriers());
        assert!(!PromiseBuilder::new(ModeName::Mq).defers_barriers());
        let mut b = PromiseBuilder::new(ModeName::Horae);
        assert!(b.defers_barriers());
        let bar = b.begin_op(Vec::new(), 0, &[]);
        // A sync already running when the barrier returns.
        let early = b.begin_op(Vec::new(), 3, &[]);
        barrier_returns(&mut b, bar, 5, b"old");
        assert!(in_force(&b, 6).is_empty(), "ordered, not durable");
        b.end(early, 8, true);
        b.durable_from(3, 8);
        assert!(
            in_force(&b, 9).is_empty(),
            "a sync begun before the barrier returned does not cover it"
        );
        // A write of /f widens the deferred promise; the copy waits too.
        let w = b.begin_op(vec!["/f".into()], 10, &[("/f".into(), f(b"new", 1))]);
        b.end(w, 11, true);
        assert!(in_force(&b, 12).is_empty());
        assert!(
            b.durable_state("/f", 12).is_none(),
            "not durable for the rename rule either"
        );
        let s = b.begin_op(Vec::new(), 20, &[]);
        b.end(s, 30, true);
        b.durable_from(20, 30);
        assert!(in_force(&b, 29).is_empty());
        let now = in_force(&b, 30);
        assert_eq!(now.len(), 1, "{now:?}");
        assert_eq!(now[0].op, "fbarrier /f");
        assert_eq!(states_of(now[0]).paths["/f"], vec![f(b"old", 1), f(b"new", 1)]);
        // A barrier no sync follows holds nowhere.
        let last = b.begin_op(Vec::new(), 40, &[]);
        barrier_returns(&mut b, last, 45, b"new");
        let all = b.into_promises();
        assert!(all.iter().all(|p| !p.covers(50) || p.from == 30), "{all:?}");
        assert_eq!(all.iter().filter(|p| p.covers(1_000)).count(), 1);
    }

    #[test]
    fn a_name_made_after_a_barrier_binds_its_waiting_promise_from_that_operation() {
        let mut b = PromiseBuilder::new(ModeName::Horae);
        let bar = b.begin_op(Vec::new(), 0, &[]);
        barrier_returns(&mut b, bar, 5, b"old");
        // Made by an operation begun before the barrier returned: no order.
        b.ordered_by("/early", 4, 12);
        assert!(in_force(&b, 13).is_empty());
        // Made after it: where /d exists, /f holds the barrier's state.
        let mk = b.begin_op(vec!["/d".into()], 10, &[("/d".into(), f(b"", 1))]);
        b.end(mk, 12, true);
        b.ordered_by("/d", 10, 12);
        assert!(in_force(&b, 10).is_empty());
        let now = in_force(&b, 11);
        assert_eq!(now.len(), 1, "{now:?}");
        match &now[0].expect {
            Expect::Ordered { marker, then } => {
                assert_eq!(marker, "/d");
                assert_eq!(then.paths["/f"], vec![f(b"old", 1)]);
            }
            e => panic!("not an order: {e:?}"),
        }
        // A later write of /f widens it like any promise.
        let w = b.begin_op(vec!["/f".into()], 20, &[("/f".into(), f(b"new", 1))]);
        b.end(w, 21, true);
        match &in_force(&b, 22)[0].expect {
            Expect::Ordered { then, .. } => assert_eq!(then.paths["/f"], vec![f(b"old", 1), f(b"new", 1)]),
            e => panic!("not an order: {e:?}"),
        }
        // Nothing waits in the other modes, so nothing is ordered.
        let mut c = PromiseBuilder::new(ModeName::Classic);
        c.ordered_by("/d", 10, 12);
        assert!(c.promises().is_empty());
    }

    #[test]
    fn a_later_write_widens_a_file_promise_instead_of_ending_it() {
        let mut b = PromiseBuilder::new(ModeName::Classic);
        let s = b.begin_op(Vec::new(), 0, &[]);
        b.end(s, 5, true);
        let fsync = |c: &[u8]| Durable::States(file_durable("/f", f(c, 1)));
        assert!(b.synced(s, SyncKind::Fsync, "/f", fsync(b"old"), true, "fsync /f".into()));
        // An unrelated write: nothing changes.
        let w = b.begin_op(vec!["/g".into()], 10, &[("/g".into(), f(b"g", 1))]);
        b.end(w, 11, true);
        assert_eq!(in_force(&b, 12).len(), 1);
        // A write of /f: from its start, old or new.
        let w = b.begin_op(vec!["/f".into()], 20, &[("/f".into(), f(b"new", 1))]);
        b.end(w, 25, true);
        let before = in_force(&b, 20);
        assert_eq!(states_of(before[0]).paths["/f"], vec![f(b"old", 1)]);
        let during = in_force(&b, 21);
        assert_eq!(during.len(), 1);
        assert_eq!(states_of(during[0]).paths["/f"], vec![f(b"old", 1), f(b"new", 1)]);
        assert_eq!(
            in_force(&b, 1_000_000).len(),
            1,
            "in force for the rest of the run"
        );
        // Its own fsync makes the newer promise, which implies the widened
        // one and ends it.
        let s = b.begin_op(Vec::new(), 30, &[]);
        b.end(s, 35, true);
        b.synced(s, SyncKind::Fsync, "/f", fsync(b"new"), true, "fsync /f".into());
        let after = in_force(&b, 36);
        assert_eq!(after.len(), 1);
        assert_eq!(states_of(after[0]).paths["/f"], vec![f(b"new", 1)]);
    }

    #[test]
    fn a_sync_promise_holds_at_every_later_point_and_widens_per_name() {
        let mut b = PromiseBuilder::new(ModeName::Mq);
        let tree = vec![
            ("/".to_string(), Some(Node::DIR)),
            ("/a".to_string(), f(b"a", 1)),
            ("/d".to_string(), Some(Node::DIR)),
        ];
        let s = b.begin_op(Vec::new(), 0, &[]);
        b.end(s, 3, true);
        assert!(b.synced_tree(s, tree_durable(tree, None), "sync".into()));
        // A new name in a listed directory: absent or made.
        let c = b.begin_op(vec!["/d/x".into()], 10, &[("/d/x".into(), f(b"", 1))]);
        b.end(c, 12, true);
        // Removing /a: present or absent.
        let u = b.begin_op(vec!["/a".into()], 20, &[("/a".into(), None)]);
        b.end(u, 22, true);
        let now = in_force(&b, 500);
        assert_eq!(now.len(), 1);
        // The old rule ended a sync's promise at the first later change.
        assert_eq!(now[0].op, "sync");
        let st = states_of(now[0]);
        assert_eq!(st.paths["/a"], vec![f(b"a", 1), None]);
        // The new name under a listed directory: its kind and link count.
        let entry = Some(Node::File {
            content: None,
            nlink: Some(1),
            perm: None,
            xattrs: None,
        });
        assert_eq!(st.paths["/d/x"], vec![None, entry]);
        assert!(st.listed.contains("/d") && st.listed.contains("/"));
    }

    #[test]
    fn fdatasync_promises_neither_the_link_count_nor_a_fresh_name() {
        let mut b = PromiseBuilder::new(ModeName::Horae);
        let s = b.begin_op(Vec::new(), 0, &[]);
        b.end(s, 1, true);
        let state = Durable::States(file_durable("/f", f(b"x", 2)));
        b.synced(s, SyncKind::Fdatasync, "/f", state, false, "fdatasync /f".into());
        let data = Some(Node::File {
            content: Some(Arc::new(Content::from(&b"x"[..]))),
            nlink: None,
            perm: Some(0o644),
            xattrs: None,
        });
        assert_eq!(states_of(&b.promises()[0]).paths["/f"], vec![data, None]);
    }

    #[test]
    fn a_dir_fsync_promises_entries_with_link_counts_not_contents() {
        let st = dir_durable(
            "/d",
            Some(Node::DIR),
            vec![("/d/f".into(), f(b"data", 2)), ("/d/s".into(), Some(Node::DIR))],
        );
        let entry = Some(Node::File {
            content: None,
            nlink: Some(2),
            perm: None,
            xattrs: None,
        });
        assert_eq!(st.paths["/d/f"], vec![entry]);
        assert_eq!(st.paths["/d"], vec![Some(Node::DIR)]);
        assert!(st.listed.contains("/d") && !st.listed.contains("/d/s"));
        // A later write to /d/f does not widen it: contents are not promised.
        assert!(widen(&st, &[("/d/f".into(), f(b"other", 2))]).is_none());
        // A link does: the link count changes.
        let w = widen(&st, &[("/d/f".into(), f(b"data", 3))]).expect("widened");
        assert_eq!(w.paths["/d/f"].len(), 2);
    }

    #[test]
    fn a_rename_of_durable_names_is_all_or_nothing_in_journaled_modes_only() {
        for mode in [ModeName::Classic, ModeName::None] {
            let mut b = PromiseBuilder::new(mode);
            b.base(tree_durable(
                vec![("/".into(), Some(Node::DIR)), ("/a".into(), f(b"x", 1))],
                None,
            ));
            let paths = ["/a".to_string(), "/b".to_string()];
            let effects = [("/a".to_string(), None), ("/b".to_string(), f(b"x", 1))];
            let r = b.begin_op(paths.to_vec(), 5, &effects);
            let promised = b.atomic_op(r, &paths, &[None, f(b"x", 1)], "rename /a /b".into());
            assert_eq!(promised, mode != ModeName::None, "{mode:?}");
            b.end(r, 9, true);
            if mode == ModeName::None {
                continue;
            }
            let one_of = b
                .promises()
                .iter()
                .find(|p| matches!(p.expect, Expect::OneOf { .. }))
                .expect("promised");
            assert_eq!(one_of.from, 6);
            let entry = Some(Node::File {
                content: None,
                nlink: Some(1),
                perm: None,
                xattrs: None,
            });
            let tuples = vec![vec![entry.clone(), None], vec![None, entry]];
            assert_eq!(
                one_of.expect,
                Expect::OneOf {
                    paths: paths.to_vec(),
                    tuples
                }
            );
            // A rename of a name whose state is not durable promises nothing.
            let w = b.begin_op(vec!["/b".into()], 10, &[("/b".into(), f(b"y", 1))]);
            b.end(w, 11, true);
            let paths = ["/b".to_string(), "/c".to_string()];
            let effects = [("/b".to_string(), None), ("/c".to_string(), f(b"y", 1))];
            let r = b.begin_op(paths.to_vec(), 12, &effects);
            assert!(!b.atomic_op(r, &paths, &[None, f(b"y", 1)], "rename /b /c".into()));
        }
    }

    /// A create and a rename of the new name with no bus entry between
    /// them (found by `classic-cc` on random-1-3x6): a commit between the
    /// two may make the create durable without the rename, so the state
    /// durable at the rename's start is not "before" it for later crashes.
    #[test]
    fn a_rename_begun_where_an_operation_on_its_names_began_promises_nothing() {
        let mut b = PromiseBuilder::new(ModeName::Classic);
        b.base(tree_durable(vec![("/".into(), Some(Node::DIR))], None));
        let c = b.begin_op(vec!["/a".into()], 5, &[("/a".into(), f(b"", 1))]);
        b.end(c, 5, true);
        let paths = ["/a".to_string(), "/b".to_string()];
        let effects = [("/a".to_string(), None), ("/b".to_string(), f(b"", 1))];
        let r = b.begin_op(paths.to_vec(), 5, &effects);
        assert!(!b.atomic_op(r, &paths, &[None, f(b"", 1)], "rename /a /b".into()));
        // One bus entry later, the create's widening is in force and the
        // rename's before-state is not durable either: still nothing.
        let mut b = PromiseBuilder::new(ModeName::Classic);
        b.base(tree_durable(vec![("/".into(), Some(Node::DIR))], None));
        let c = b.begin_op(vec!["/a".into()], 5, &[("/a".into(), f(b"", 1))]);
        b.end(c, 6, true);
        let r = b.begin_op(paths.to_vec(), 6, &effects);
        assert!(!b.atomic_op(r, &paths, &[None, f(b"", 1)], "rename /a /b".into()));
    }

    #[test]
    fn an_atomic_promise_widens_block_by_block_once_the_file_changes() {
        let mut b = PromiseBuilder::new(ModeName::MqAtomic);
        let s = b.begin_op(Vec::new(), 0, &[]);
        b.atomic(
            s,
            "/f",
            vec![b"v1".to_vec()],
            Some(b"v2".to_vec()),
            "fatomic /f".into(),
        );
        b.end(s, 4, true);
        let w = b.begin_op(vec!["/f".into()], 10, &[("/f".into(), f(b"v3", 1))]);
        b.end(w, 12, true);
        let now = in_force(&b, 11);
        assert_eq!(now.len(), 1);
        let allowed = &states_of(now[0]).paths["/f"];
        // Absent, v1, empty, v2 (as promised), and v3.
        assert!(allowed.contains(&None) && allowed.len() == 5, "{allowed:?}");
    }
}
