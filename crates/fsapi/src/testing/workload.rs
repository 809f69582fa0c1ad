//! Workloads: the operations by path, the crash tests' fixed workloads
//! and the model test's random operations.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::CTX;
use crate::FileSystem;

/// One step of a workload (paths absolute; files created 0644,
/// directories 0755).
#[derive(Clone, Debug)]
pub enum Op {
    /// `mkdir`.
    Mkdir(&'static str),
    /// `creat`.
    Create(&'static str),
    /// Writes `.2` bytes of value `.3` at offset `.1`.
    Write(&'static str, u64, usize, u8),
    /// Sets the size.
    Truncate(&'static str, u64),
    /// Links the first path as the second.
    Link(&'static str, &'static str),
    /// `unlink`.
    Unlink(&'static str),
    /// `rmdir`.
    Rmdir(&'static str),
    /// Renames the first path to the second.
    Rename(&'static str, &'static str),
}

impl From<&Op> for crate::crash::Op {
    fn from(op: &Op) -> crate::crash::Op {
        use crate::crash::Op as C;
        match *op {
            Op::Mkdir(p) => C::Mkdir(p.into()),
            Op::Create(p) => C::Create(p.into()),
            Op::Write(p, off, len, b) => C::Write(p.into(), off, vec![b; len]),
            Op::Truncate(p, s) => C::Truncate(p.into(), s),
            Op::Link(a, b) => C::Link(a.into(), b.into()),
            Op::Unlink(p) => C::Unlink(p.into()),
            Op::Rmdir(p) => C::Rmdir(p.into()),
            Op::Rename(a, b) => C::Rename(a.into(), b.into()),
        }
    }
}

impl Op {
    /// Runs the operation on `fs`.
    pub async fn run<F: FileSystem>(&self, fs: &F) -> Result<(), F::Error> {
        match *self {
            Op::Mkdir(p) => fs.mkdir_path(CTX, p).await.map(drop),
            Op::Create(p) => fs.create_path(CTX, p).await.map(drop),
            Op::Write(p, off, len, b) => fs.write_path(CTX, p, off, &vec![b; len]).await.map(drop),
            Op::Truncate(p, s) => fs.truncate_path(CTX, p, s).await,
            Op::Link(a, b) => fs.link_path(CTX, a, b).await.map(drop),
            Op::Unlink(p) => fs.unlink_path(CTX, p).await,
            Op::Rmdir(p) => fs.rmdir_path(CTX, p).await,
            Op::Rename(a, b) => fs.rename_path(CTX, a, b).await,
        }
    }
}

/// A workload that uses every operation, reuses inodes (slots) and pages,
/// and replaces a file by rename.
pub fn workload() -> Vec<Op> {
    use Op::*;
    vec![
        Mkdir("/d"),
        Create("/d/a"),
        Write("/d/a", 0, 5000, 1),
        Create("/b"),
        Link("/d/a", "/c"),
        Write("/b", 100, 100, 2),
        Rename("/d/a", "/b"),
        Unlink("/c"),
        Create("/e"),
        Truncate("/b", 10),
        Write("/b", 4090, 20, 3),
        Truncate("/b", 9000),
        Mkdir("/d/x"),
        Mkdir("/h"),
        Rename("/h", "/d/x"),
        Rmdir("/d/x"),
        Rename("/d", "/f"),
        Unlink("/b"),
        Create("/f/g"),
        Write("/f/g", 0, 64, 4),
    ]
}

/// Namespace churn: what an operation frees (a WOFS package slot, a PMFS
/// inode or directory slot, a page) is reused soon after, so crash states
/// mix old and new uses of the same place.
pub fn churn() -> Vec<Op> {
    use Op::*;
    let mut ops = vec![Mkdir("/d")];
    for _ in 0..4 {
        ops.extend([
            Create("/t"),
            Link("/t", "/d/u"),
            Unlink("/t"),
            Rename("/d/u", "/t"),
            Create("/d/v"),
            Rename("/d/v", "/t"),
            Unlink("/t"),
        ]);
    }
    ops
}

/// The small namespace the random operations use.
pub const PATHS: [&str; 8] = ["/a", "/b", "/c", "/d", "/d/a", "/d/b", "/d/e", "/d/e/a"];

/// A random operation on [`PATHS`].
pub fn random_op(r: &mut ChaCha8Rng) -> Op {
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
