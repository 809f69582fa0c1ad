//! The reference model: random operations on a small namespace run
//! against a file system and a model that advances with every operation
//! that returned (the file systems are durable at return), with power
//! failures (the run's own persistent image, remounted) in between.

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{random_op, Adapter, Env, Op, CTX};
use crate::{FileSystem, FileType, Node, Tree};

/// The model's answer to an operation POSIX refuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused;

/// The reference: paths to directories or files (files by id, so hard
/// links share content).
#[derive(Clone, Debug, Default)]
pub struct Model {
    /// Every path: `None` a directory, `Some` a file's id.
    paths: BTreeMap<String, Option<u32>>,
    /// Each file's content.
    files: BTreeMap<u32, Vec<u8>>,
    /// The last file id given.
    next: u32,
}

fn parent(p: &str) -> &str {
    &p[..p.rfind('/').unwrap_or(0)]
}

impl Model {
    fn is_dir(&self, p: &str) -> bool {
        p.is_empty() || matches!(self.paths.get(p), Some(None))
    }
    fn children(&self, p: &str) -> usize {
        self.paths.keys().filter(|k| parent(k) == p).count()
    }
    fn file(&self, p: &str) -> Result<u32, Refused> {
        match self.paths.get(p) {
            Some(Some(id)) => Ok(*id),
            _ => Err(Refused),
        }
    }
    fn new_entry(&self, p: &str) -> Result<(), Refused> {
        if self.is_dir(parent(p)) && !self.paths.contains_key(p) {
            Ok(())
        } else {
            Err(Refused)
        }
    }

    /// Applies `op`; `Err` if POSIX refuses it.
    pub fn apply(&mut self, op: &Op) -> Result<(), Refused> {
        match *op {
            Op::Create(p) | Op::Mkdir(p) => {
                self.new_entry(p)?;
                let v = if let Op::Create(_) = op {
                    self.next += 1;
                    self.files.insert(self.next, Vec::new());
                    Some(self.next)
                } else {
                    None
                };
                self.paths.insert(p.into(), v);
            }
            Op::Write(p, off, len, b) => {
                let id = self.file(p)?;
                let d = self.files.entry(id).or_default();
                let end = off as usize + len;
                if d.len() < end {
                    d.resize(end, 0);
                }
                d[off as usize..end].fill(b);
            }
            Op::Truncate(p, s) => {
                let id = self.file(p)?;
                self.files.entry(id).or_default().resize(s as usize, 0);
            }
            Op::Link(a, b) => {
                let id = self.file(a)?;
                self.new_entry(b)?;
                self.paths.insert(b.into(), Some(id));
            }
            Op::Unlink(p) => {
                self.file(p)?;
                self.paths.remove(p);
            }
            Op::Rmdir(p) => {
                if !self.paths.contains_key(p) || !self.is_dir(p) || self.children(p) > 0 {
                    return Err(Refused);
                }
                self.paths.remove(p);
            }
            Op::Rename(a, b) => {
                let src = *self.paths.get(a).ok_or(Refused)?;
                if a == b && self.is_dir(parent(b)) {
                    return Ok(());
                }
                if !self.is_dir(parent(b)) || (src.is_none() && (b == a || b.starts_with(&format!("{a}/")))) {
                    return Err(Refused);
                }
                if let Some(&dst) = self.paths.get(b) {
                    if dst == src && dst.is_some() {
                        return Ok(());
                    }
                    if src.is_none() != dst.is_none() || (dst.is_none() && self.children(b) > 0) {
                        return Err(Refused);
                    }
                }
                let moved: Vec<(String, Option<u32>)> = self
                    .paths
                    .range(a.to_string()..)
                    .take_while(|(k, _)| *k == a || k.starts_with(&format!("{a}/")))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect();
                self.paths.remove(b);
                for (k, v) in moved {
                    self.paths.remove(&k);
                    self.paths.insert(format!("{b}{}", &k[a.len()..]), v);
                }
            }
        }
        Ok(())
    }

    /// The tree the file system should have.
    pub fn tree(&self) -> Tree {
        let mut t = Tree::new();
        for (p, v) in &self.paths {
            let node = match v {
                None => Node {
                    ftype: FileType::Dir,
                    perm: 0o755,
                    links: 2 + self
                        .paths
                        .iter()
                        .filter(|(k, v)| v.is_none() && parent(k) == p)
                        .count() as u32,
                    data: Vec::new(),
                },
                Some(id) => Node {
                    ftype: FileType::File,
                    perm: 0o644,
                    links: self.paths.values().filter(|w| **w == Some(*id)).count() as u32,
                    data: self.files.get(id).cloned().unwrap_or_default(),
                },
            };
            t.insert(p.clone(), node);
        }
        t
    }
}

/// For each seed of `seeds`: 5 rounds of 40 random operations, each of
/// which must agree with the model on success or failure, with the trees
/// equal after every step and after every power failure between rounds.
pub fn agree_with_the_model<A: Adapter>(seeds: std::ops::Range<u64>) {
    for seed in seeds {
        let mut env = Env::<A>::formatted(seed);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut model = Model::default();
        for round in 0..5 {
            let ops: Vec<Op> = (0..40).map(|_| random_op(&mut rng)).collect();
            let before = model.clone();
            let expect: Vec<bool> = ops.iter().map(|op| model.apply(op).is_ok()).collect();
            let trees: Vec<Tree> = {
                let mut m = before;
                ops.iter()
                    .map(|op| {
                        let _ = m.apply(op);
                        m.tree()
                    })
                    .collect()
            };
            let ops2 = ops.clone();
            env.run(A::Mount::default(), move |fs| async move {
                for (i, op) in ops2.iter().enumerate() {
                    let got = op.run(&fs).await;
                    assert_eq!(
                        got.is_ok(),
                        expect[i],
                        "seed {seed} round {round} op {i} {op:?}: {got:?}"
                    );
                    assert_eq!(
                        fs.snapshot(CTX).await?,
                        trees[i],
                        "seed {seed} round {round} op {i} {op:?}"
                    );
                }
                Ok(())
            })
            .expect("the run mounts and snapshots");
            // A power failure: what this run made persistent is what
            // returned.
            env.power_cycle();
            let got = env.run(A::Mount::default(), |fs| async move { fs.snapshot(CTX).await });
            assert_eq!(
                got.expect("the remount snapshots"),
                model.tree(),
                "seed {seed} after round {round}"
            );
        }
    }
}
