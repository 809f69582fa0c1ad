//! Model-based test: random operations on a small namespace run against
//! PMFS and a reference model that advances with every operation that
//! returned (PMFS is durable at return), with power failures (the run's
//! own persistent image, remounted) in between. Every operation must agree
//! with the model on success or failure, and the trees must be equal
//! after every step and every remount.

mod common;

use fsapi::FileSystem as _;
use std::collections::BTreeMap;

use common::{Env, CTX};
use pmfs::{Faults, FileType, Node, Pmfs, PmfsError, Tree};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const PATHS: [&str; 8] = ["/a", "/b", "/c", "/d", "/d/a", "/d/b", "/d/e", "/d/e/a"];

#[derive(Clone, Debug)]
enum Op {
    Create(&'static str),
    Mkdir(&'static str),
    Write(&'static str, u64, usize, u8),
    Truncate(&'static str, u64),
    Link(&'static str, &'static str),
    Unlink(&'static str),
    Rmdir(&'static str),
    Rename(&'static str, &'static str),
}

fn random_op(r: &mut ChaCha8Rng) -> Op {
    let mut p = || PATHS[r.gen_range(0..PATHS.len())];
    let (a, b) = (p(), p());
    match r.gen_range(0..8) {
        0 => Op::Create(a),
        1 => Op::Mkdir(a),
        2 => Op::Write(
            a,
            r.gen_range(0..9000),
            r.gen_range(1..5000),
            r.gen_range(1..=255),
        ),
        3 => Op::Truncate(a, r.gen_range(0..9000)),
        4 => Op::Link(a, b),
        5 => Op::Unlink(a),
        6 => Op::Rmdir(a),
        _ => Op::Rename(a, b),
    }
}

/// The reference: paths to directories or files (files by id, so hard
/// links share content).
#[derive(Clone, Debug, Default)]
struct Model {
    paths: BTreeMap<String, Option<u32>>,
    files: BTreeMap<u32, Vec<u8>>,
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
    fn file(&self, p: &str) -> Result<u32, ()> {
        match self.paths.get(p) {
            Some(Some(id)) => Ok(*id),
            _ => Err(()),
        }
    }
    fn new_entry(&self, p: &str) -> Result<(), ()> {
        if self.is_dir(parent(p)) && !self.paths.contains_key(p) {
            Ok(())
        } else {
            Err(())
        }
    }

    /// Applies `op`; `Err` if POSIX refuses it.
    fn apply(&mut self, op: &Op) -> Result<(), ()> {
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
                    return Err(());
                }
                self.paths.remove(p);
            }
            Op::Rename(a, b) => {
                let src = *self.paths.get(a).ok_or(())?;
                if a == b && self.is_dir(parent(b)) {
                    return Ok(());
                }
                if !self.is_dir(parent(b)) || (src.is_none() && (b == a || b.starts_with(&format!("{a}/")))) {
                    return Err(());
                }
                if let Some(&dst) = self.paths.get(b) {
                    if dst == src && dst.is_some() {
                        return Ok(());
                    }
                    if src.is_none() != dst.is_none() || (dst.is_none() && self.children(b) > 0) {
                        return Err(());
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

    fn tree(&self) -> Tree {
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

async fn run_op(fs: &Pmfs, op: &Op) -> Result<(), PmfsError> {
    match *op {
        Op::Create(p) => fs.create_path(CTX, p).await.map(drop),
        Op::Mkdir(p) => fs.mkdir_path(CTX, p).await.map(drop),
        Op::Write(p, off, len, b) => fs.write_path(CTX, p, off, &vec![b; len]).await.map(drop),
        Op::Truncate(p, s) => fs.truncate_path(CTX, p, s).await,
        Op::Link(a, b) => fs.link_path(CTX, a, b).await.map(drop),
        Op::Unlink(p) => fs.unlink_path(CTX, p).await,
        Op::Rmdir(p) => fs.rmdir_path(CTX, p).await,
        Op::Rename(a, b) => fs.rename_path(CTX, a, b).await,
    }
}

#[test]
fn random_operations_and_power_failures_agree_with_the_model() {
    for seed in 0..24u64 {
        let mut env = Env::formatted(seed);
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
            env.run(Faults::default(), move |fs| async move {
                for (i, op) in ops2.iter().enumerate() {
                    let got = run_op(&fs, op).await;
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
            .unwrap();
            // A power failure: what this run made persistent is what
            // returned.
            env.power_cycle();
            let got = env.run(Faults::default(), |fs| async move { fs.snapshot(CTX).await });
            assert_eq!(got.unwrap(), model.tree(), "seed {seed} after round {round}");
        }
    }
}
