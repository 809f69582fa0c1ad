//! Recovery reuse: a crash state that holds, wherever a recovery looked,
//! what an already recovered state held recovers the same way, so its
//! recovered drive is known without booting a machine.
//!
//! # Why this keeps every verdict
//!
//! A checker machine is a deterministic program whose only inputs are the
//! crash state's PMR bytes and media blocks: the run's configuration (drive
//! and machine profiles, mode, fault, executor seed) is the same for every
//! state of a run, host memory starts zeroed and the drive's volatile cache
//! starts empty. So the block a recovery reads next is a function of what
//! its earlier reads returned (and of the PMR), and once two boots have
//! read the same values they take the same steps (induction over the event
//! sequence). The checker logs every media block a read reaches from boot
//! until the mount returns, each once, in the order first read (a block
//! read again returns what it held the first time or what the recovery
//! wrote there, both the same in two boots that agree so far).
//!
//! The memo is that decision tree: its root branches on the content hash
//! of every drive's PMR, each inner node is "the next block read is `b` of
//! the drive on port `p`" and branches on what the state holds there (its
//! delta's hash term, or "the base's"), and each leaf is what that
//! recovery did. One drive and several ([`BootState`]) share the tree. A state that walks
//! down to a leaf agrees with the recovered state on every value its
//! recovery read, so recovery over it reads the same, writes the same
//! blocks with the same content and leaves the file system in the same
//! state: its recovered drives are the state with those writes laid over
//! it. Their hash ([`BootState::recovered_hash`]) is computed from exactly
//! that, by the function the full check uses, and the verdict table is
//! keyed by that hash and the promises in force, so a state takes a stored
//! verdict only where a full check would have taken the same one; else it
//! is checked in full. The comparison of a block's hash term is the same
//! 128-bit comparison state deduplication makes.
//!
//! Recoveries that fail (probe or mount refused the image, or hung) are
//! not remembered: such a state is always checked in full.
//!
//! `tests/reductions.rs` compares runs with and without reuse (and by brute force), fault
//! modes included, and finds the same states and the same violations.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use mqfs::JournalLogArea;
use nvme_ctrl::crash::{BootState, Unit};
use pcie_sim::content_hash::ContentHash;

/// Nodes kept per run (past this, new recoveries are not remembered, and
/// their states are checked in full): about 100 MB.
const NODES_KEPT: usize = 1 << 20;

/// What one recovery did to the drive: enough to know the recovered drive
/// of any state it applies to.
#[derive(Debug, Clone)]
pub struct Recovered {
    /// Per drive (by port): each block recovery wrote, with the hash term
    /// of what it holds now.
    pub written: Vec<BTreeMap<u64, ContentHash>>,
    /// The journal's log blocks, left out of the recovered drive's hash
    /// (one drive only: on a striped volume every block counts, which can
    /// only tell more images apart).
    pub log_area: Option<JournalLogArea>,
    /// The recovery's log lines (for replays and reports).
    pub log: Vec<String>,
    /// What the recovery observed of the state ([`crate::observe`]), in
    /// the order first read (PMR lines first, then blocks).
    pub reads: Arc<[Unit]>,
    /// The units the recovery wrote (their content is no longer the
    /// state's).
    pub wrote: Arc<BTreeSet<Unit>>,
}

impl Recovered {
    /// The hash of the recovered drives of `state` (which must be a
    /// state this recovery applies to, or the one it ran on).
    pub fn drive_hash(&self, state: &impl BootState) -> ContentHash {
        let log = self.log_area.as_ref();
        state.recovered_hash(&self.written, &|port, b| {
            !(port == 0 && log.is_some_and(|l| l.contains(b)))
        })
    }
}

/// The recoveries of one run as a decision tree over what they read
/// (shared by the workers).
#[derive(Debug, Default)]
pub struct RecoveryMemo {
    tree: Mutex<Tree>,
}

#[derive(Debug, Default)]
struct Tree {
    /// The first node by the PMRs' content hash.
    roots: BTreeMap<ContentHash, usize>,
    nodes: Vec<Node>,
    recoveries: usize,
}

/// What a state holds at a block: its delta's hash term, or `None` for
/// the base image's content (the same in every state of a run).
type Held = Option<ContentHash>;

#[derive(Debug)]
enum Node {
    /// The recovery reads `block` (port, LBA) next; the next node by what
    /// the state holds there.
    Read {
        block: Block,
        next: BTreeMap<Held, usize>,
    },
    /// The recovery ended, having done this.
    Done(Arc<Recovered>),
}

/// Where a new node hangs.
#[derive(Clone, Copy)]
enum Link {
    Root(ContentHash),
    Child(usize, Held),
}

/// A media block of one drive: (port, LBA).
pub type Block = (u8, u64);

fn held(state: &impl BootState, (port, lba): Block) -> Held {
    state.held(port, lba)
}

impl Tree {
    fn attach(&mut self, at: Link, node: Node) -> usize {
        let id = self.nodes.len();
        self.nodes.push(node);
        match at {
            Link::Root(pmr) => {
                self.roots.insert(pmr, id);
            }
            Link::Child(parent, v) => {
                if let Node::Read { next, .. } = &mut self.nodes[parent] {
                    next.insert(v, id);
                }
            }
        }
        id
    }
}

impl RecoveryMemo {
    /// The recovery of an earlier state that read what `state` holds
    /// (`pmr` is its PMRs' content hash, [`BootState::pmr_hash`]), if one
    /// is known.
    pub fn lookup(&self, state: &impl BootState, pmr: ContentHash) -> Option<Arc<Recovered>> {
        let t = self.tree.lock().ok()?;
        let mut at = *t.roots.get(&pmr)?;
        loop {
            match &t.nodes[at] {
                Node::Done(r) => return Some(r.clone()),
                Node::Read { block, next } => at = *next.get(&held(state, *block))?,
            }
        }
    }

    /// Remembers that recovery over `state` (PMRs' content hash `pmr`)
    /// read the media blocks `reads`, each once in the order first read,
    /// and did `recovered`.
    pub fn remember(&self, state: &impl BootState, pmr: ContentHash, reads: &[Block], recovered: Recovered) {
        let Ok(mut t) = self.tree.lock() else {
            return;
        };
        if t.nodes.len() + reads.len() + 1 > NODES_KEPT {
            return;
        }
        let mut link = Link::Root(pmr);
        let mut at = t.roots.get(&pmr).copied();
        for &b in reads {
            let v = held(state, b);
            let node = match at {
                Some(n) => n,
                None => t.attach(
                    link,
                    Node::Read {
                        block: b,
                        next: BTreeMap::new(),
                    },
                ),
            };
            match &t.nodes[node] {
                Node::Read { block, next } if *block == b => {
                    at = next.get(&v).copied();
                    link = Link::Child(node, v);
                }
                _ => {
                    debug_assert!(
                        false,
                        "two recoveries that read the same values went on differently: the checker is not deterministic"
                    );
                    return;
                }
            }
        }
        match at {
            None => {
                t.attach(link, Node::Done(Arc::new(recovered)));
                t.recoveries += 1;
            }
            Some(n) => debug_assert!(
                matches!(t.nodes[n], Node::Done(_)),
                "a recovery ended where an equal one read on: the checker is not deterministic"
            ),
        }
    }

    /// Distinct recoveries remembered.
    pub fn recoveries(&self) -> usize {
        self.tree.lock().map_or(0, |t| t.recoveries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nvme_ctrl::crash::CrashState;
    use pcie_sim::PageStore;

    /// A state changing the blocks `changed` (block, hash term).
    fn state(changed: &[(u64, ContentHash)]) -> CrashState {
        CrashState {
            point: 0,
            choice: Default::default(),
            pmr: PageStore::zeroed(4096),
            media: imbl::HashMap::new(),
            media_hash: 0,
            block_hashes: changed.iter().copied().collect(),
        }
    }

    fn recovered() -> Recovered {
        Recovered {
            written: vec![BTreeMap::from([(9, 99)])],
            log_area: Some(mqfs::JournalLogArea::default()),
            log: vec!["recovered".into()],
            reads: Arc::from(Vec::new()),
            wrote: Arc::default(),
        }
    }

    #[test]
    fn a_state_takes_a_recovery_only_where_it_agrees_on_what_was_read() {
        let memo = RecoveryMemo::default();
        // Recovery read block 1 then block 2 (unchanged: the base's).
        memo.remember(&state(&[(1, 11), (7, 77)]), 5, &[(0, 1), (0, 2)], recovered());
        assert!(
            memo.lookup(&state(&[(1, 11)]), 5).is_some(),
            "block 7 was not read"
        );
        assert!(
            memo.lookup(&state(&[(1, 11), (7, 70)]), 5).is_some(),
            "block 7 was not read"
        );
        assert!(memo.lookup(&state(&[(1, 12)]), 5).is_none(), "block 1 was");
        assert!(
            memo.lookup(&state(&[(1, 11), (2, 0)]), 5).is_none(),
            "block 2 was read as the base's"
        );
        assert!(memo.lookup(&state(&[(1, 11)]), 6).is_none(), "the PMR differs");
        assert_eq!(memo.recoveries(), 1);
    }

    #[test]
    fn recoveries_that_read_apart_share_what_they_read_first() {
        let memo = RecoveryMemo::default();
        // Block 1's content decides what is read next: 2 or 3.
        memo.remember(&state(&[(1, 11)]), 5, &[(0, 1), (0, 2)], recovered());
        memo.remember(&state(&[(1, 12)]), 5, &[(0, 1), (0, 3)], recovered());
        memo.remember(&state(&[(1, 12), (3, 33)]), 5, &[(0, 1), (0, 3)], recovered());
        assert_eq!(memo.recoveries(), 3);
        assert!(
            memo.lookup(&state(&[(1, 12), (2, 1)]), 5).is_some(),
            "2 is not read after 12"
        );
        assert!(memo.lookup(&state(&[(1, 12), (3, 34)]), 5).is_none(), "3 is");
        // The same recovery again adds nothing.
        memo.remember(&state(&[(1, 11)]), 5, &[(0, 1), (0, 2)], recovered());
        assert_eq!(memo.recoveries(), 3);
    }
}
