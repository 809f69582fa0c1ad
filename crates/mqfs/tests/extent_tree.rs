//! The extent tree at scale and against a model: files with tens of
//! thousands of extents (concurrent appenders whose blocks interleave, a
//! random writer) grow the tree to depth 2 and read back after a remount,
//! fsck clean; random writes, punches and truncates on one file agree with
//! a block-to-content model, fsck clean after each group.
//!
//! Layout 2 held at most 255 extents per file: the appenders died with
//! EFBIG near 1 MiB each, the random writer after 1020 KiB.

mod common;

use std::collections::BTreeMap;
use std::rc::Rc;

use common::{modes, remount, setup, setup_profile};
use mqfs::fsck::fsck;
use mqfs::{Ctx, FallocMode, Fs, FsProfile, Ino, Mode};
use pcie_sim::join_all;
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::SeedableRng;

const B: u64 = 4096;

/// The content of block `fb` of file `file`: both numbers up front, so a
/// block read from the wrong place or file is seen.
fn pattern(file: u64, fb: u64) -> Vec<u8> {
    let mut v = vec![(file * 31 + fb) as u8; B as usize];
    v[..8].copy_from_slice(&file.to_le_bytes());
    v[8..16].copy_from_slice(&fb.to_le_bytes());
    v
}

/// MiB each file reaches (`MQFS_EXTENT_MIB`, default 64).
fn file_mib() -> u64 {
    std::env::var("MQFS_EXTENT_MIB")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64)
}

/// The modes of the big test: `MQFS_MODES` if set (each mode passes, about
/// 16 s and 2 GB apiece), else classic alone.
fn big_modes() -> Vec<Mode> {
    match std::env::var_os("MQFS_MODES") {
        Some(_) => modes(),
        None => vec![Mode::Classic],
    }
}

/// 8 appenders (4 KiB at a time, each on its own file, so their blocks
/// interleave on the device and every block is an extent: the allocator's
/// preallocation windows are off, `FsProfile::mb_prealloc`, as they would
/// keep each file contiguous, `tests/mballoc.rs`) and one random
/// writer (every block once, in a shuffled order) each reach the file
/// size; the trees grow to depth 2, the image is fsck clean, and after a
/// remount every block reads back.
#[test]
fn interleaved_appenders_and_a_random_writer_grow_deep_trees() {
    for mode in big_modes() {
        grow_deep_trees(mode);
    }
}

fn grow_deep_trees(mode: Mode) {
    const APPENDERS: u64 = 8;
    let mib = file_mib();
    let blocks = mib * 256;
    // The nine files, the metadata, the journal (an eighth) and slack.
    let device = ((APPENDERS + 1) * blocks * 5 / 4 + 16384).next_power_of_two();
    let profile = FsProfile {
        mb_prealloc: false,
        ..FsProfile::default()
    };
    let Some(t) = setup_profile(mode, device, 4, 16384, profile) else {
        return;
    };
    let (fs, machine) = (t.fs.clone(), t.machine.clone());
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        let mut inos = Vec::new();
        for f in 0..=APPENDERS {
            inos.push(fs.create_path(c, &format!("/f{f}")).await.unwrap().ino);
        }
        let sim = machine.sim();
        let handles: Vec<_> = (0..=APPENDERS)
            .map(|f| {
                let fs: Rc<Fs> = fs.clone();
                let ino = inos[f as usize];
                sim.spawn(async move {
                    let c = Ctx::on(f as usize % 4);
                    let mut order: Vec<u64> = (0..blocks).collect();
                    if f == APPENDERS {
                        order.shuffle(&mut rand_chacha::ChaCha8Rng::seed_from_u64(7));
                    }
                    for (k, fb) in order.into_iter().enumerate() {
                        let n = fs.write(c, ino, fb * B, &pattern(f, fb)).await;
                        assert_eq!(n, Ok(B as usize), "file {f} block {fb}");
                        if k % 4096 == 4095 {
                            fs.fsync(c, ino).await.unwrap();
                        }
                    }
                    fs.fsync(c, ino).await.unwrap();
                })
            })
            .collect();
        join_all(handles).await;
        eprintln!(
            "{mode:?}: {} MiB x 9 written by simulated {:?}",
            mib,
            machine.sim().now()
        );
        for (f, &ino) in inos.iter().enumerate() {
            let st = fs.iget(c, ino).await.unwrap();
            let i = st.inode.borrow();
            let extents = i.tree.extents().len();
            eprintln!(
                "{mode:?} file {f}: {} extents, depth {}, {} tree blocks",
                extents,
                i.tree.depth(),
                i.tree.node_count()
            );
            assert_eq!(i.size, blocks * B);
            if mib >= 64 {
                assert!(extents > 2032, "{mode:?} file {f}: {extents} extents fit depth 1");
                assert_eq!(i.tree.depth(), 2, "{mode:?} file {f}");
            }
        }
        let fs = remount(fs, &machine, c).await.unwrap();
        check_contents(&fs, c, &inos, blocks).await;
        fs.unmount(c).await.unwrap();
    })
    .unwrap();
    let r = fsck(t.ctrl.backend()).unwrap();
    assert!(r.is_spotless(), "{mode:?}: {r}");
}

/// The shape crashfuzz's `extent_split` workload relies on: 8 x 254
/// one-block extents fill the root with full leaves; one more extent splits
/// the last leaf and grows the tree to depth 2; a write into a gap splits a
/// full leaf in the middle; a truncate to 301 extents frees the emptied
/// leaves and the index block (the root takes its entries back); unlink
/// frees a whole depth-2 tree. The block count follows every tree block,
/// and fsck agrees.
#[test]
fn a_full_root_grows_a_level_and_a_truncate_gives_it_back() {
    let t = setup(Mode::Classic, 1 << 15, 2).unwrap();
    let fs = t.fs.clone();
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        let free = fs.statfs(c).await.unwrap().free_blocks;
        let f = fs.create_path(c, "/frag").await.unwrap().ino;
        let shape = |fs: Rc<Fs>| async move {
            let st = fs.iget(c, f).await.unwrap();
            let i = st.inode.borrow();
            (
                i.tree.depth(),
                i.tree.node_count(),
                i.tree.extents().len(),
                i.nblocks,
            )
        };
        for k in 0..8 * 254 {
            fs.write(c, f, 2 * k * B, &pattern(0, 2 * k)).await.unwrap();
        }
        assert_eq!(shape(fs.clone()).await, (1, 8, 2032, 2032 + 8));
        fs.write(c, f, 2 * 2032 * B, &pattern(0, 4064)).await.unwrap();
        assert_eq!(
            shape(fs.clone()).await,
            (2, 10, 2033, 2033 + 10),
            "a leaf and an index block more"
        );
        fs.write(c, f, 201 * B, &pattern(0, 201)).await.unwrap();
        assert_eq!(
            shape(fs.clone()).await,
            (2, 11, 2034, 2034 + 11),
            "a full leaf split in the middle"
        );
        fs.truncate(c, f, 600 * B).await.unwrap();
        // Blocks 0, 2, .., 598 and 201: 301 extents in three leaves (the
        // first one split in two).
        assert_eq!(
            shape(fs.clone()).await,
            (1, 3, 301, 301 + 3),
            "the root took the index back"
        );
        // A second tree at depth 2 goes whole with its file.
        let g = fs.create_path(c, "/frag2").await.unwrap().ino;
        for k in 0..2100 {
            fs.write(c, g, 2 * k * B, &pattern(1, 2 * k)).await.unwrap();
        }
        assert_eq!(fs.iget(c, g).await.unwrap().inode.borrow().tree.depth(), 2);
        fs.unlink_path(c, "/frag2").await.unwrap();
        fs.unlink_path(c, "/frag").await.unwrap();
        assert_eq!(
            fs.statfs(c).await.unwrap().free_blocks,
            free,
            "every tree block freed"
        );
        fs.unmount(c).await.unwrap();
    })
    .unwrap();
    let r = fsck(t.ctrl.backend()).unwrap();
    assert!(r.is_spotless(), "{r}");
}

/// Reads every block of the files back.
async fn check_contents(fs: &Fs, c: Ctx, inos: &[Ino], blocks: u64) {
    for (f, &ino) in inos.iter().enumerate() {
        for fb in 0..blocks {
            let got = fs.read(c, ino, fb * B, B as usize).await.unwrap();
            assert!(
                got == pattern(f as u64, fb),
                "file {f} block {fb} reads back wrong"
            );
        }
    }
}

/// One step on the file of [`a_file_agrees_with_its_block_model`].
#[derive(Clone, Debug)]
enum Op {
    /// Write `len` blocks at block `at`.
    Write { at: u64, len: u64 },
    /// Punch `len` blocks at block `at`.
    Punch { at: u64, len: u64 },
    /// Truncate to `blocks` blocks.
    Truncate { blocks: u64 },
}

fn op() -> impl Strategy<Value = Op> {
    // Mostly single blocks far apart: many extents, so leaves split and
    // merge back.
    prop_oneof![
        6 => (0..3000u64, 1..4u64).prop_map(|(at, len)| Op::Write { at: at * 2, len }),
        2 => (0..6000u64, 1..40u64).prop_map(|(at, len)| Op::Punch { at, len }),
        1 => (0..6000u64).prop_map(|blocks| Op::Truncate { blocks }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    /// Random writes, punches and truncates on one file agree with a model
    /// (block to the step that wrote it); fsck is clean after each group
    /// of steps (synced), and the tree's depth follows the extent count.
    #[test]
    fn a_file_agrees_with_its_block_model(groups in prop::collection::vec(prop::collection::vec(op(), 1..1500), 1..5)) {
        // Mode none: a sync writes everything home, where fsck reads.
        let t = setup(Mode::None, 1 << 16, 2).unwrap();
        let fs = t.fs.clone();
        let ctrl = t.ctrl.clone();
        let r: Result<(), TestCaseError> = t.ex.block_on(async move {
            let c = Ctx::on(0);
            let ino = fs.create_path(c, "/f").await.unwrap().ino;
            // Block -> the step that wrote it (0: zeros).
            let mut model: BTreeMap<u64, u64> = BTreeMap::new();
            let mut size = 0u64;
            let mut step = 0u64;
            for ops in &groups {
                for o in ops {
                    step += 1;
                    match *o {
                        Op::Write { at, len } => {
                            let data: Vec<u8> = (0..len).flat_map(|k| pattern(step, at + k)).collect();
                            fs.write(c, ino, at * B, &data).await.unwrap();
                            for k in 0..len {
                                model.insert(at + k, step);
                            }
                            size = size.max((at + len) * B);
                        }
                        Op::Punch { at, len } => {
                            fs.fallocate(c, ino, FallocMode::PunchHole, at * B, len * B).await.unwrap();
                            // Nothing past the size is punched (the file has
                            // nothing there).
                            for k in at..at + len {
                                model.remove(&k);
                            }
                        }
                        Op::Truncate { blocks } => {
                            fs.truncate(c, ino, blocks * B).await.unwrap();
                            model.retain(|k, _| *k < blocks);
                            size = blocks * B;
                        }
                    }
                }
                let st = fs.iget(c, ino).await.unwrap();
                let (extents, depth) = {
                    let i = st.inode.borrow();
                    (i.tree.extents().len(), i.tree.depth())
                };
                // The shallowest depth that holds them (a shrinking tree may
                // stay a level deeper).
                let expect_depth = match extents {
                    0..=8 => 0,
                    9..=2032 => 1,
                    _ => 2,
                };
                prop_assert!(depth >= expect_depth && depth <= 2, "{extents} extents at depth {depth}");
                prop_assert_eq!(fs.getattr(c, ino).await.unwrap().size, size);
                for fb in 0..size.div_ceil(B) {
                    let got = fs.read(c, ino, fb * B, B as usize).await.unwrap();
                    let want = match model.get(&fb) {
                        Some(s) => pattern(*s, fb),
                        None => vec![0; B as usize],
                    };
                    let n = got.len();
                    prop_assert!(got[..] == want[..n], "block {fb} after step {step}");
                }
                fs.sync(c).await.unwrap();
                let r = fsck(ctrl.backend()).unwrap();
                prop_assert!(r.is_spotless(), "after step {step}: {r}");
            }
            Ok(())
        }).unwrap();
        r?;
    }
}
