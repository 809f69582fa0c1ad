//! The read-set tree: the crash states of one crash point enumerated by
//! what their checks read, so that every state the envelope allows gets a
//! verdict while only a few are checked. Written once, here, for every
//! store whose checks log what they read ([`crate::observe`]): the NVMe
//! drives (PMR lines and media blocks, `crashfuzz::observe`) and
//! persistent memory on the memory bus (64-byte lines,
//! [`crate::pmem::explore_read_sets`]). It lives in the lowest crate both
//! reach: the drive side's explorer (`crashfuzz`) sits above the PM
//! harness (`fsapi::crash`), which the PM file systems' own crash tests
//! use, and both sit above this crate.
//!
//! # Why a leaf's verdict is every one of its states'
//!
//! A check is a deterministic program whose only inputs are the state's
//! bytes; it logs the *units* it read before writing them itself. Two
//! states that hold the same bytes at every unit one of their checks read
//! take the same steps and get the same verdict (induction over the
//! reads: each returns the same bytes).
//!
//! The pending items of a point each write one unit; a unit's *class* in
//! a state ([`ClassSpace::classes`]) is what decides its bytes there:
//! equal classes, equal bytes. A node of the tree is a constraint, the set
//! of allowed states meeting it; its state is the least one
//! ([`ClassSpace::least`]). When its check read units `u1, u2, ...`, the
//! node's states split, without overlap, into those in the state's class
//! at every `u_i` (the leaf: all get the state's verdict) and, for each
//! `j` and each other class `a` of `u_j`, those in the state's classes at
//! `u_1..u_{j-1}` and in `a` at `u_j` (a child, explored alike if a state
//! meets it). Units no pending item writes hold the same bytes in every
//! state: no split. Every child fixes a class its parent left open, so
//! the tree is finite, and its leaves cover every allowed state exactly
//! once. The order of the reads only shapes the tree.
//!
//! A unit with too many classes to list is not split
//! ([`ReadSetTree::too_wide`]): its point has states no verdict covers,
//! and the caller counts them as not visited; so does a caller that stops
//! handing out nodes at a budget ([`ReadSetTree::open`] nodes are left).

/// How a unit's states divide ([`ClassSpace::classes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Classes<C> {
    /// No pending item writes the unit: it holds the same bytes in every
    /// state.
    One,
    /// More classes than the space lists: the unit is not split.
    TooMany,
    /// The class the state is in, and every other class.
    Split {
        /// The state's class.
        mine: C,
        /// The unit's other classes (each a constraint on that unit only).
        others: Vec<C>,
    },
}

/// The crash states of one point, as the tree needs them: constraints
/// (sets of allowed states), their least states, and the classes of a
/// unit.
pub trait ClassSpace {
    /// A unit a check reads (a line, a block).
    type Unit: Copy;
    /// A set of states: what they have landed at some units.
    type Constraint: Clone + Default + PartialEq + std::fmt::Debug;
    /// One state.
    type Choice: Clone + std::fmt::Debug;
    /// The least allowed state meeting `c`; `None` if none does.
    fn least(&self, c: &Self::Constraint) -> Option<Self::Choice>;
    /// The states meeting both.
    fn and(&self, a: &Self::Constraint, b: &Self::Constraint) -> Self::Constraint;
    /// Narrows `a` to the states meeting `b` too (a space may do it in
    /// place).
    fn and_in(&self, a: &mut Self::Constraint, b: &Self::Constraint) {
        *a = self.and(a, b);
    }
    /// True if every state meeting `c` is in one class at `u` (a space may
    /// say so to spare a split whose children no state meets).
    fn fixed(&self, c: &Self::Constraint, u: Self::Unit) -> bool {
        let _ = (c, u);
        false
    }
    /// True if some allowed state meets `c` (a space may tell faster than
    /// building the least).
    fn met(&self, c: &Self::Constraint) -> bool {
        self.least(c).is_some()
    }
    /// The class `choice` puts `u` in and `u`'s other classes.
    fn classes(&self, u: Self::Unit, choice: &Self::Choice) -> Classes<Self::Constraint>;
}

/// One node handed out: its constraint, its state, and whether it is a
/// witness (checked alone, never split).
struct Node<S: ClassSpace> {
    constraint: S::Constraint,
    choice: S::Choice,
    witness: bool,
}

/// One crash point's tree (the module doc's argument): hands out node
/// states to check and splits each node by what its check read.
pub struct ReadSetTree<S: ClassSpace> {
    open: Vec<S::Constraint>,
    witnesses: Vec<S::Constraint>,
    nodes: Vec<Node<S>>,
    /// A read unit had too many classes to split: states left unjudged.
    pub too_wide: bool,
}

impl<S: ClassSpace> std::fmt::Debug for ReadSetTree<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadSetTree")
            .field("open", &self.open)
            .field("witnesses", &self.witnesses)
            .field("nodes", &self.nodes)
            .field("too_wide", &self.too_wide)
            .finish()
    }
}

impl<S: ClassSpace> std::fmt::Debug for Node<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("constraint", &self.constraint)
            .field("choice", &self.choice)
            .field("witness", &self.witness)
            .finish()
    }
}

impl<S: ClassSpace> Default for ReadSetTree<S> {
    fn default() -> Self {
        ReadSetTree::new()
    }
}

impl<S: ClassSpace> ReadSetTree<S> {
    /// A tree whose root holds every allowed state.
    pub fn new() -> Self {
        ReadSetTree {
            open: vec![S::Constraint::default()],
            witnesses: Vec::new(),
            nodes: Vec::new(),
            too_wide: false,
        }
    }

    /// The next node to check (witnesses first): its number and its state
    /// (the least meeting its constraint); `None` when none is open (more
    /// may open as checks report their reads).
    pub fn next_node(&mut self, space: &S) -> Option<(usize, S::Choice)> {
        loop {
            let witness = !self.witnesses.is_empty();
            let c = self.witnesses.pop().or_else(|| self.open.pop())?;
            // Open nodes are pushed only when a state meets them; a
            // constraint no state meets is passed over all the same.
            let Some(choice) = space.least(&c) else {
                continue;
            };
            self.nodes.push(Node {
                constraint: c,
                choice: choice.clone(),
                witness,
            });
            return Some((self.nodes.len() - 1, choice));
        }
    }

    /// Nodes handed out so far.
    pub fn nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Nodes and witnesses open (not handed out yet).
    pub fn open(&self) -> usize {
        self.open.len() + self.witnesses.len()
    }

    /// True if node `id` is a witness.
    pub fn is_witness(&self, id: usize) -> bool {
        self.nodes[id].witness
    }

    /// Witnesses handed out so far.
    pub fn witnesses(&self) -> usize {
        self.nodes.iter().filter(|n| n.witness).count()
    }

    /// Node `id`'s state.
    pub fn choice(&self, id: usize) -> &S::Choice {
        &self.nodes[id].choice
    }

    /// Splits node `id` by what its check read (`reads`, in the order
    /// read): the node's states in another class than its state's at a
    /// read unit become open nodes. Returns the leaf (the node's states in
    /// its state's class at every read unit), or `None` for a witness
    /// (its states are in its leaf's already: not split).
    pub fn read(&mut self, space: &S, id: usize, reads: &[S::Unit]) -> Option<S::Constraint> {
        let node = &self.nodes[id];
        if node.witness {
            return None;
        }
        let mut prefix = node.constraint.clone();
        let choice = node.choice.clone();
        for &u in reads {
            if space.fixed(&prefix, u) {
                continue;
            }
            match space.classes(u, &choice) {
                Classes::One => {}
                Classes::TooMany => self.too_wide = true,
                Classes::Split { mine, others } => {
                    for other in others {
                        let child = space.and(&prefix, &other);
                        if space.met(&child) {
                            self.open.push(child);
                        }
                    }
                    space.and_in(&mut prefix, &mine);
                }
            }
        }
        Some(prefix)
    }

    /// Adds a witness: a state of a leaf judged already, checked alone
    /// (its verdict must agree with the leaf's judgement of it), unless
    /// one with that constraint is waiting already.
    pub fn add_witness(&mut self, c: S::Constraint) {
        if !self.witnesses.contains(&c) {
            self.witnesses.push(c);
        }
    }

    /// The leaf of node `id` given what its check read, without splitting
    /// anything (for tests: is a state in it?).
    pub fn leaf(&self, space: &S, id: usize, reads: &[S::Unit]) -> S::Constraint {
        let node = &self.nodes[id];
        let mut all = node.constraint.clone();
        for &u in reads {
            if let Classes::Split { mine, .. } = space.classes(u, &node.choice) {
                space.and_in(&mut all, &mine);
            }
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Three units, unit `u` with `u + 2` classes; a state is one class
    /// per unit; a constraint fixes some units.
    struct Grid;

    impl ClassSpace for Grid {
        type Unit = usize;
        type Constraint = BTreeMap<usize, usize>;
        type Choice = [usize; 3];
        fn least(&self, c: &BTreeMap<usize, usize>) -> Option<[usize; 3]> {
            let mut s = [0; 3];
            for (&u, &k) in c {
                if k == usize::MAX {
                    return None;
                }
                s[u] = k;
            }
            Some(s)
        }
        fn and(&self, a: &BTreeMap<usize, usize>, b: &BTreeMap<usize, usize>) -> BTreeMap<usize, usize> {
            let mut out = a.clone();
            for (&u, &k) in b {
                let e = out.entry(u).or_insert(k);
                if *e != k {
                    *e = usize::MAX;
                }
            }
            out
        }
        fn classes(&self, u: usize, choice: &[usize; 3]) -> Classes<BTreeMap<usize, usize>> {
            Classes::Split {
                mine: BTreeMap::from([(u, choice[u])]),
                others: (0..u + 2)
                    .filter(|&k| k != choice[u])
                    .map(|k| BTreeMap::from([(u, k)]))
                    .collect(),
            }
        }
    }

    #[test]
    fn the_leaves_cover_every_state_once() {
        // The check of state s reads unit 0, and unit 2 only if s[0] == 1:
        // 1 + 1 + 4 = 6 leaves for 2 * 3 * 4 = 24 states.
        let mut tree = ReadSetTree::<Grid>::new();
        let mut leaves = Vec::new();
        while let Some((id, s)) = tree.next_node(&Grid) {
            let reads: Vec<usize> = if s[0] == 1 { vec![0, 2] } else { vec![0] };
            leaves.push(tree.read(&Grid, id, &reads).unwrap());
        }
        assert_eq!(leaves.len(), 2 + 3);
        for a in 0..2 {
            for b in 0..3 {
                for c in 0..4 {
                    let s = BTreeMap::from([(0, a), (1, b), (2, c)]);
                    let n = leaves
                        .iter()
                        .filter(|l| Grid.least(&Grid.and(l, &s)).is_some())
                        .count();
                    assert_eq!(n, 1, "state {a}{b}{c}");
                }
            }
        }
    }
}
