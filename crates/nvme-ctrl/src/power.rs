//! Power failure of the media: which media states a crash after trace
//! entry `k` may leave. This is the media half of the persistence envelope
//! (`docs/architecture.md` 4, `docs/persistence.md`): what the NVMe
//! specification allows, whatever the simulated destage timing did.
//!
//! Replayed from the controller's own trace events ([`crate::events`]):
//!
//! - A block version of a submitted command is *pending*: it may or may
//!   not be on the media at a crash. The specification promises nothing
//!   of a command before its completion, and "each command is processed
//!   as an independent entity without reference to other commands
//!   submitted to the same I/O Submission Queue or to commands submitted
//!   to other I/O Submission Queues" (NVMe 1.4 6.3, Command Ordering
//!   Requirements), so neither the order in which this run's controller
//!   fetched the commands nor the order in which their data arrived
//!   ([`events::DATA_IN`]) proves anything: the state "a later command's
//!   block landed, an earlier command's not" is one of the envelope's while
//!   both are uncompleted, whatever this run's timing did. A version is
//!   pending from its command's submission (its queue's doorbell took
//!   effect; [`events::SUBMITTED`] points back at it), even at crash
//!   points before its data arrived here: another timing fetched it
//!   first. Its content is the one that arrived later, which is what the
//!   host's buffer held all along (the host leaves a write's buffer alone
//!   until its completion; a host that changed it meanwhile would have
//!   given a controller that fetched it earlier other bytes, which this
//!   model does not offer).
//! - A version becomes durable when
//!   - its command completes durable ([`events::WRITE_DONE_DURABLE`]): with
//!     FUA, with the cache disabled, or on a drive whose cache is
//!     power-loss protected or that has none (NVMe 1.4 6.15 and 5.21.1.6;
//!     the controller decides which completions are durable, and the
//!     cursor takes its word), or
//!   - a Flush completes that was submitted after its command completed
//!     ([`events::FLUSH_DONE`] carries how many completions preceded the
//!     Flush's submission; NVMe 1.4 6.8: "the flush applies to all commands
//!     ... completed by the controller prior to the submission of the Flush
//!     command").
//!
//!   A completion without FUA ([`events::WRITE_DONE`]) and the drive's own
//!   destaging ([`events::MEDIA_WRITE`]) promise nothing: a block may hold
//!   its durable content or any pending version newer than it (the cache
//!   destages a block's versions in order; the last one destaged is on the
//!   media). A version made durable ends every older pending version of
//!   its block.
//! - A write of several blocks tears at block granularity: each block has
//!   its own events and versions.
//!
//! Durable content is kept as a persistent map of blocks over the image the
//! run started from, so a crash state is that map (cloned in O(1)) plus the
//! chosen pending versions.

use std::collections::BTreeMap;
use std::sync::Arc;

use pcie_sim::content_hash::{unit_term, ContentHash, Space};
use pcie_sim::{BusTrace, EventKind, TraceMode};

use crate::error::CtrlError;
use crate::events;
use crate::media::{Block, Image, Media, BLOCK};

/// A block version that may or may not be on the media at the crash point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingBlock {
    /// Media block number.
    pub block: u64,
    /// The version's content.
    pub data: Block,
    /// Trace index of the `DATA_IN` event that brought it.
    pub data_in: usize,
    /// Its contribution to a media delta's hash.
    pub hash: ContentHash,
}

/// The contribution of block `lba` holding `data` to a delta's hash
/// ([`pcie_sim::content_hash`]).
pub fn block_hash(lba: u64, data: &[u8]) -> ContentHash {
    unit_term(Space::MediaBlock, lba, data)
}

/// The media of one crash state ([`MediaCursor::state`]).
#[derive(Clone, Debug)]
pub struct MediaState {
    /// Blocks that differ from the starting image.
    pub delta: imbl::HashMap<u64, Block>,
    /// Hash of the delta (XOR of `block_hashes`).
    pub hash: ContentHash,
    /// Each delta block's contribution to `hash`.
    pub block_hashes: imbl::HashMap<u64, ContentHash>,
}

/// A pending block version: its block and the trace index of its
/// `DATA_IN` (versions of a block are ordered by it).
type VersionKey = (u64, usize);

/// A version not yet durable.
#[derive(Debug)]
struct Version {
    data: Block,
    hash: ContentHash,
    /// The sequence number of its command's completion, once completed.
    completed: Option<u64>,
}

/// Replays a controller's events from a trace.
#[derive(Debug)]
pub struct MediaCursor<'t> {
    trace: &'t BusTrace,
    port: u8,
    applied: usize,
    durable: imbl::HashMap<u64, Block>,
    /// XOR of the hash contributions of the durable blocks, and each one's.
    durable_hash: ContentHash,
    durable_hashes: imbl::HashMap<u64, ContentHash>,
    /// Versions that arrived and are not durable.
    pending: BTreeMap<VersionKey, Version>,
    /// Per command (its trace attribution), the versions it brought and
    /// that have not completed.
    in_command: BTreeMap<u32, Vec<VersionKey>>,
    /// Write-type completions seen.
    completions: u64,
    /// Bumped whenever the durable or pending blocks change.
    changes: u64,
    /// Versions pending before their data arrived: (the crash point from
    /// which their command was submitted, the trace index of their
    /// `DATA_IN`), in submission order.
    early: Vec<(usize, usize)>,
    /// How many of `early` are pending (or arrived) by now.
    early_offered: usize,
    /// Versions whose command has no `SUBMITTED` before their arrival.
    arrival_only: usize,
}

fn block_of(payload: &[u8]) -> Option<Block> {
    if payload.len() != BLOCK {
        return None;
    }
    let mut b = [0u8; BLOCK];
    b.copy_from_slice(payload);
    Some(Arc::new(b))
}

impl<'t> MediaCursor<'t> {
    /// A cursor before the first entry of `trace` (recorded in `Full`
    /// mode) for the controller on `port`.
    pub fn new(trace: &'t BusTrace, port: u8) -> Result<Self, CtrlError> {
        if trace.mode() != TraceMode::Full {
            return Err(CtrlError::Crash("the trace was recorded without payloads".into()));
        }
        let (early, arrival_only) = Self::submitted_versions(trace, port);
        Ok(MediaCursor {
            trace,
            port,
            applied: 0,
            durable: imbl::HashMap::new(),
            durable_hash: 0,
            durable_hashes: Default::default(),
            pending: BTreeMap::new(),
            in_command: BTreeMap::new(),
            completions: 0,
            changes: 0,
            early,
            early_offered: 0,
            arrival_only,
        })
    }

    /// Block versions offered only from their data's arrival: their
    /// command recorded no submission ([`events::SUBMITTED`]), as in a
    /// trace saved by a build older than that event. Each is a narrower
    /// envelope than NVMe 1.4 6.3 allows (submitted but not yet fetched
    /// here, it may have landed first in another timing); 0 for a trace
    /// this build recorded, and re-recording the run gives the whole
    /// envelope.
    pub fn arrivals_without_submission(&self) -> usize {
        self.arrival_only
    }

    /// Every version whose command was submitted before its data arrived:
    /// (the submission's crash point, its `DATA_IN` index), ordered by
    /// submission. One pass over the trace: a command's `SUBMITTED` opens
    /// it (the last one wins when a command identifier is reused), its
    /// completion closes it, and each of its `DATA_IN`s in between is one
    /// version. Also counts the `DATA_IN`s with no submission open.
    fn submitted_versions(trace: &BusTrace, port: u8) -> (Vec<(usize, usize)>, usize) {
        let mut open: BTreeMap<u32, usize> = BTreeMap::new();
        let mut out = Vec::new();
        let mut arrival_only = 0;
        for (i, e) in trace.entries().iter().enumerate() {
            if e.kind != EventKind::Device || e.source != port {
                continue;
            }
            match e.code {
                events::SUBMITTED => {
                    // The doorbell took effect before the fetch, so `addr`
                    // points back; a saved trace that says otherwise (bad
                    // input) is taken as submitting at this entry.
                    open.insert(e.attr, (e.addr as usize).min(i));
                }
                events::DATA_IN => match open.get(&e.attr) {
                    Some(&at) => out.push((at, i)),
                    None => arrival_only += 1,
                },
                events::WRITE_DONE | events::WRITE_DONE_DURABLE => {
                    open.remove(&e.attr);
                }
                _ => {}
            }
        }
        // Stable: versions submitted at one point stay in arrival order.
        out.sort_by_key(|&(at, _)| at);
        (out, arrival_only)
    }

    /// Moves to "just after entry `k`" (forward only).
    pub fn advance_past(&mut self, k: usize) -> Result<(), CtrlError> {
        let entries = self.trace.entries();
        if k >= entries.len() {
            return Err(CtrlError::Crash(format!(
                "crash point {k} past the end ({})",
                entries.len()
            )));
        }
        if k + 1 < self.applied {
            return Err(CtrlError::Crash("crash points only move forward".into()));
        }
        while self.applied <= k {
            let i = self.applied;
            self.apply(i);
            self.applied += 1;
            while let Some(&(at, data_in)) = self.early.get(self.early_offered) {
                if at > i {
                    break;
                }
                self.early_offered += 1;
                self.offer_before_arrival(data_in);
            }
        }
        Ok(())
    }

    /// The version `DATA_IN` entry `i` brings is pending from now on,
    /// before its data arrived in this run (see the module doc).
    fn offer_before_arrival(&mut self, i: usize) {
        // Entry `i` applied already: submitted and arrived at one point.
        if i >= self.applied {
            // Nothing ends it before its arrival: only a newer version made
            // durable ends an older one, and a newer one arrives after it.
            self.insert_version(i);
        }
    }

    /// Makes the version `DATA_IN` entry `i` brings pending; false if its
    /// payload is not one block (then it is no version).
    fn insert_version(&mut self, i: usize) -> bool {
        let e = &self.trace.entries()[i];
        let payload = self.trace.payload(e);
        let Some(data) = block_of(payload) else {
            return false;
        };
        let hash = block_hash(e.addr, payload);
        self.changes += 1;
        self.pending.insert(
            (e.addr, i),
            Version {
                data,
                hash,
                completed: None,
            },
        );
        true
    }

    fn apply(&mut self, i: usize) {
        let e = &self.trace.entries()[i];
        if e.kind != EventKind::Device || e.source != self.port {
            return;
        }
        match e.code {
            events::DATA_IN => {
                let key = (e.addr, i);
                // Pending already if offered from its submission; else (no
                // `SUBMITTED` before it: a trace saved by a controller that
                // recorded none) from now.
                if !self.pending.contains_key(&key) && !self.insert_version(i) {
                    return;
                }
                self.in_command.entry(e.attr).or_default().push(key);
            }
            events::WRITE_DONE | events::WRITE_DONE_DURABLE => {
                let seq = self.completions;
                self.completions += 1;
                let keys = self.in_command.remove(&e.attr).unwrap_or_default();
                if e.code == events::WRITE_DONE_DURABLE {
                    for key in keys {
                        self.version_durable(key);
                    }
                } else {
                    for key in keys {
                        if let Some(v) = self.pending.get_mut(&key) {
                            v.completed = Some(seq);
                        }
                    }
                }
                self.changes += 1;
            }
            events::FLUSH_DONE => {
                let covered: Vec<VersionKey> = self
                    .pending
                    .iter()
                    .filter(|(_, v)| v.completed.is_some_and(|c| c < e.addr))
                    .map(|(k, _)| *k)
                    .collect();
                // In key order: a block's newer version is made durable
                // last, so it is what stays.
                for key in covered {
                    self.version_durable(key);
                }
                self.changes += 1;
            }
            _ => {}
        }
    }

    /// Pending version `key` is on the media for certain: it becomes the
    /// block's durable content and ends every older pending version.
    fn version_durable(&mut self, key: VersionKey) {
        let (block, _) = key;
        let Some(v) = self.pending.remove(&key) else {
            // Already ended by a newer durable version of its block.
            return;
        };
        let older: Vec<VersionKey> = self.pending.range((block, 0)..key).map(|(k, _)| *k).collect();
        for k in older {
            self.pending.remove(&k);
        }
        self.make_durable(block, v.data, v.hash);
    }

    /// A counter of changes to the durable and pending blocks. Equal at
    /// two points means equal media states at both.
    pub fn changes(&self) -> u64 {
        self.changes
    }

    fn make_durable(&mut self, lba: u64, data: Block, hash: ContentHash) {
        self.durable.insert(lba, data);
        if let Some(old) = self.durable_hashes.insert(lba, hash) {
            self.durable_hash ^= old;
        }
        self.durable_hash ^= hash;
    }

    /// The version each block ends with when the pending versions at
    /// `landed` (indices into [`MediaCursor::pending`]) were destaged: for
    /// each block, the newest landed version.
    fn chosen<'p>(pending: &'p [PendingBlock], landed: &[usize]) -> BTreeMap<u64, &'p PendingBlock> {
        let mut out: BTreeMap<u64, &PendingBlock> = BTreeMap::new();
        for p in landed.iter().filter_map(|&i| pending.get(i)) {
            let newer = out.get(&p.block).is_none_or(|q| q.data_in < p.data_in);
            if newer {
                out.insert(p.block, p);
            }
        }
        out
    }

    /// Blocks that are on the media for certain, over the starting image.
    pub fn durable(&self) -> &imbl::HashMap<u64, Block> {
        &self.durable
    }

    /// Block versions that may or may not be on the media, ordered by
    /// block and then by arrival (oldest first).
    pub fn pending(&self) -> Vec<PendingBlock> {
        self.pending
            .iter()
            .map(|(&(block, data_in), v)| PendingBlock {
                block,
                data: v.data.clone(),
                data_in,
                hash: v.hash,
            })
            .collect()
    }

    /// The media delta of one crash state: the durable blocks, and for
    /// each block with versions at `landed` (indices into
    /// [`MediaCursor::pending`]) the newest of them.
    pub fn materialize(
        &self,
        pending: &[PendingBlock],
        landed: &[usize],
    ) -> Result<imbl::HashMap<u64, Block>, CtrlError> {
        Ok(self.state(pending, landed)?.delta)
    }

    /// One crash state's media: its delta, the delta's hash (equal for
    /// equal content) and each delta block's hash contribution, with each
    /// block's version chosen once. Cheap: shares structure with the
    /// cursor.
    pub fn state(&self, pending: &[PendingBlock], landed: &[usize]) -> Result<MediaState, CtrlError> {
        if let Some(&i) = landed.iter().find(|&&i| i >= pending.len()) {
            return Err(CtrlError::Crash(format!("no pending block {i}")));
        }
        let mut out = MediaState {
            delta: self.durable.clone(),
            hash: self.durable_hash,
            block_hashes: self.durable_hashes.clone(),
        };
        for (b, p) in Self::chosen(pending, landed) {
            out.delta.insert(b, p.data.clone());
            if let Some(old) = out.block_hashes.insert(b, p.hash) {
                out.hash ^= old;
            }
            out.hash ^= p.hash;
        }
        Ok(out)
    }

    /// A media store for a fresh controller booting over a crash state.
    pub fn media(base: &Arc<Image>, delta: imbl::HashMap<u64, Block>) -> Media {
        Media::cow(base.clone(), delta)
    }
}

#[cfg(test)]
mod envelope_tests {
    //! The write-cache rules against a brute-force statement of them.
    //!
    //! Random small histories of block versions arriving, commands
    //! completing (with or without FUA) and Flushes completing are recorded
    //! as device events; at every crash point the cursor's states (every
    //! subset of its pending versions) must equal the states the NVMe rules
    //! allow, computed directly: each block holds its newest version that is
    //! certainly durable (completed with FUA, or completed before a
    //! completed Flush was submitted; else its starting content) or any
    //! version that arrived after that one, or that will arrive for a
    //! command submitted by then and not completed since. A drive without
    //! a volatile cache is the case where every completion is durable.

    use std::collections::BTreeSet;

    use pcie_sim::trace::NO_PAYLOAD;
    use pcie_sim::{BusTrace, EventKind, Purpose, SimTime, TraceEntry, TraceMode};
    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Step {
        /// Command `cmd` brings a new version of `block`.
        Arrive { cmd: u32, block: u64 },
        /// Command `cmd` completes; `fua`: durable at completion.
        Complete { cmd: u32, fua: bool },
        /// A Flush submitted when `back` fewer completions had happened
        /// than now completes.
        Flush { back: u64 },
        /// Command `cmd` is fetched; its doorbell took effect `back`
        /// entries ago.
        Submit { cmd: u32, back: usize },
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u32..3, 0u64..3).prop_map(|(cmd, block)| Step::Arrive { cmd, block }),
            (0u32..3, any::<bool>()).prop_map(|(cmd, fua)| Step::Complete { cmd, fua }),
            (0u64..3).prop_map(|back| Step::Flush { back }),
            (0u32..3, 0usize..3).prop_map(|(cmd, back)| Step::Submit { cmd, back }),
        ]
    }

    /// One arrived version: block, content byte, command, completion
    /// sequence, durable at completion.
    #[derive(Clone, Debug)]
    struct V {
        block: u64,
        value: u8,
        cmd: u32,
        completed: Option<u64>,
        fua: bool,
        /// Covered by a completed Flush (set per crash point).
        flushed: bool,
        /// The step it arrived at.
        arrived: usize,
        /// The crash point from which its command was submitted, if a
        /// submission since the command's last completion precedes it.
        submitted: Option<usize>,
    }

    type State = BTreeSet<(u64, u8)>;

    fn record(trace: &mut BusTrace, code: u16, addr: u64, attr: u32, payload: &[u8]) {
        trace.record(
            TraceEntry {
                time: SimTime::ZERO,
                effect: SimTime::ZERO,
                addr,
                payload: NO_PAYLOAD,
                len: payload.len() as u32,
                attr,
                kind: EventKind::Device,
                purpose: Purpose::UNTAGGED,
                source: 0,
                flags: 0,
                code,
                wire_bytes: 0,
            },
            payload,
        );
    }

    /// The brute-force states after the versions in `vs`.
    fn allowed(vs: &[V]) -> BTreeSet<State> {
        let mut per_block: BTreeMap<u64, Vec<Option<u8>>> = BTreeMap::new();
        for b in 0..3u64 {
            let mine: Vec<&V> = vs.iter().filter(|v| v.block == b).collect();
            let sure = mine
                .iter()
                .rposition(|v| v.flushed || (v.fua && v.completed.is_some()));
            let mut options = vec![sure.map(|i| mine[i].value)];
            let after = sure.map_or(0, |i| i + 1);
            options.extend(mine[after..].iter().map(|v| Some(v.value)));
            per_block.insert(b, options);
        }
        let mut out = BTreeSet::from([State::new()]);
        for (b, options) in per_block {
            let mut next = BTreeSet::new();
            for s in &out {
                for o in &options {
                    let mut s = s.clone();
                    if let Some(x) = o {
                        s.insert((b, *x));
                    }
                    next.insert(s);
                }
            }
            out = next;
        }
        out
    }

    /// The cursor's states at its current point.
    fn enumerated(cur: &MediaCursor<'_>) -> BTreeSet<State> {
        let pending = cur.pending();
        let n = pending.len();
        let mut out = BTreeSet::new();
        for mask in 0u32..(1 << n) {
            let landed: Vec<usize> = (0..n).filter(|i| mask & (1 << i) != 0).collect();
            let delta = cur.materialize(&pending, &landed).expect("valid choice");
            out.insert(delta.iter().map(|(b, d)| (*b, d[0])).collect());
        }
        out
    }

    proptest! {
        #[test]
        fn media_states_are_exactly_what_nvme_allows(steps in prop::collection::vec(step(), 1..14)) {
            let mut trace = BusTrace::new(TraceMode::Full);
            let mut vs: Vec<V> = Vec::new();
            let mut completions = 0u64;
            let mut value = 0u8;
            let mut open: BTreeMap<u32, usize> = BTreeMap::new();
            for (k, s) in steps.iter().enumerate() {
                match *s {
                    Step::Arrive { cmd, block } => {
                        value += 1;
                        record(&mut trace, events::DATA_IN, block, cmd, &[value; BLOCK]);
                        let submitted = open.get(&cmd).copied();
                        vs.push(V { block, value, cmd, completed: None, fua: false, flushed: false, arrived: k, submitted });
                    }
                    Step::Submit { cmd, back } => {
                        let at = k.saturating_sub(back);
                        record(&mut trace, events::SUBMITTED, at as u64, cmd, &[]);
                        open.insert(cmd, at);
                    }
                    Step::Complete { cmd, fua } => {
                        open.remove(&cmd);
                        let code = if fua { events::WRITE_DONE_DURABLE } else { events::WRITE_DONE };
                        record(&mut trace, code, 0, cmd, &[]);
                        for v in vs.iter_mut().filter(|v| v.cmd == cmd && v.completed.is_none()) {
                            v.completed = Some(completions);
                            v.fua = fua;
                        }
                        completions += 1;
                    }
                    Step::Flush { back } => {
                        let covered = completions.saturating_sub(back);
                        record(&mut trace, events::FLUSH_DONE, covered, 0, &[]);
                    }
                }
            }
            let mut cur = MediaCursor::new(&trace, 0).expect("full trace");
            // Replay the brute force step by step alongside the cursor.
            let mut completions = 0u64;
            for (k, s) in steps.iter().enumerate() {
                if let Step::Complete { .. } = *s {
                    completions += 1;
                }
                // The brute force at point k: versions arrived so far or
                // submitted by then, with completion and flush facts as of
                // point k.
                let now: Vec<V> = vs
                    .iter()
                    .filter(|v| v.arrived <= k || v.submitted.is_some_and(|at| at <= k))
                    .map(|v| {
                        let mut v = v.clone();
                        if v.completed.is_some_and(|c| c >= completions) {
                            v.completed = None;
                        }
                        v.flushed = flushed_by(&steps[..=k], &v);
                        v
                    })
                    .collect();
                cur.advance_past(k).expect("in range");
                prop_assert_eq!(enumerated(&cur), allowed(&now), "after step {}", k);
            }
        }
    }

    /// A saved trace whose `SUBMITTED` points forward (bad input) is taken
    /// as submitting at its own entry: no panic, and the version is pending
    /// from there, not before.
    #[test]
    fn a_submission_pointing_forward_submits_at_its_own_entry() {
        let mut trace = BusTrace::new(TraceMode::Full);
        record(&mut trace, events::FLUSH_DONE, 0, 9, &[]);
        record(&mut trace, events::SUBMITTED, 99, 1, &[]);
        record(&mut trace, events::FLUSH_DONE, 0, 9, &[]);
        record(&mut trace, events::DATA_IN, 7, 1, &[5; BLOCK]);
        let mut cur = MediaCursor::new(&trace, 0).expect("full trace");
        cur.advance_past(0).expect("in range");
        assert!(cur.pending().is_empty());
        cur.advance_past(1).expect("in range");
        let p = cur.pending();
        assert_eq!((p.len(), p[0].block, p[0].data_in), (1, 7, 3));
        cur.advance_past(3).expect("in range");
        assert_eq!(cur.pending().len(), 1, "its arrival adds no second version");
    }

    #[test]
    fn arrivals_without_a_submission_are_counted() {
        let mut trace = BusTrace::new(TraceMode::Full);
        record(&mut trace, events::DATA_IN, 7, 1, &[5; BLOCK]);
        record(&mut trace, events::SUBMITTED, 0, 2, &[]);
        record(&mut trace, events::DATA_IN, 8, 2, &[6; BLOCK]);
        let cur = MediaCursor::new(&trace, 0).expect("full trace");
        assert_eq!(
            cur.arrivals_without_submission(),
            1,
            "command 1 was never submitted"
        );
        let other = MediaCursor::new(&trace, 1).expect("full trace");
        assert_eq!(
            other.arrivals_without_submission(),
            0,
            "another port wrote nothing"
        );
    }

    /// True if version `v` (whose completion sequence is fixed by the whole
    /// history) is covered by a Flush among `prefix`.
    fn flushed_by(prefix: &[Step], v: &V) -> bool {
        let Some(c) = v.completed else { return false };
        let mut completions = 0u64;
        for s in prefix {
            match *s {
                Step::Complete { .. } => completions += 1,
                Step::Flush { back } => {
                    if c < completions.saturating_sub(back) {
                        return true;
                    }
                }
                Step::Arrive { .. } | Step::Submit { .. } => {}
            }
        }
        false
    }
}
