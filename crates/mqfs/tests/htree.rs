//! Indexed directories (ext4's dir_index, `mqfs::htree`): conversion,
//! leaf splits, the second index level, unlink and rename against a model,
//! fsck, remount, and the cost of a create staying flat as a directory
//! grows to 100,000 entries.

mod common;

use std::collections::BTreeMap;

use common::{modes, remount, setup, setup_with, ROOT};
use mqfs::fsck::fsck;
use mqfs::{Ctx, FileType, FsError, Mode};
use proptest::prelude::*;

fn long(i: usize) -> String {
    // 200 bytes: 19 entries a leaf, so two index levels come early.
    format!("{i:06}{}", "x".repeat(194))
}

#[test]
fn a_directory_grows_through_splits_and_a_second_level_and_survives_remount() {
    for mode in modes() {
        let Some(t) = setup(mode, 65536, 2) else { continue };
        let fs = t.fs.clone();
        let m = t.machine.clone();
        let n = 11_000;
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            let d = fs.mkdir(c, ROOT, "d", 0o755).await?.ino;
            let mut inos = BTreeMap::new();
            for i in 0..n {
                let a = fs.create(c, d, &long(i), 0o644).await?;
                inos.insert(long(i), a.ino);
            }
            // Unlink every third one.
            for i in (0..n).step_by(3) {
                fs.unlink(c, d, &long(i)).await?;
                inos.remove(&long(i));
            }
            let size = fs.getattr(c, d).await?.size;
            // 11,000 entries of 208 bytes: over 506 leaves, two levels.
            assert!(size > 520 * 4096, "{mode:?}: directory of {size} bytes");
            let fs = remount(fs, &m, c).await?;
            for i in 0..n {
                let got = fs.lookup(c, d, &long(i)).await;
                match inos.get(&long(i)) {
                    Some(ino) => assert_eq!(got?.ino, *ino, "{mode:?}: {i}"),
                    None => assert_eq!(got, Err(FsError::NotFound), "{mode:?}: {i}"),
                }
            }
            let listed = fs.readdir(c, d).await?;
            assert_eq!(listed.len(), inos.len() + 2, "{mode:?}");
            assert_eq!(fs.lookup(c, d, "..").await?.ino, ROOT);
            fs.unmount(c).await?;
            Ok::<_, FsError>(())
        })
        .unwrap_or_else(|e| panic!("{mode:?}: {e}"))
        .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        let r = fsck(&**t.ctrl.backend()).unwrap();
        assert!(r.is_clean(), "{mode:?}: {:?}", r.findings);
    }
}

#[test]
fn a_moved_indexed_directory_keeps_its_index_and_rmdir_empties_it() {
    let Some(t) = setup(Mode::Mq, 16384, 2) else {
        return;
    };
    let fs = t.fs.clone();
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        let a = fs.mkdir(c, ROOT, "a", 0o755).await?.ino;
        let b = fs.mkdir(c, ROOT, "b", 0o755).await?.ino;
        let d = fs.mkdir(c, a, "d", 0o755).await?.ino;
        for i in 0..300 {
            fs.create(c, d, &format!("f{i}"), 0o644).await?;
        }
        fs.rename(c, a, "d", b, "d").await?;
        assert_eq!(fs.lookup(c, d, "..").await?.ino, b);
        assert_eq!(
            fs.lookup(c, d, "f299").await?.ino,
            fs.lookup(c, d, "f299").await?.ino
        );
        assert_eq!(fs.rmdir(c, b, "d").await, Err(FsError::NotEmpty));
        for i in 0..300 {
            fs.unlink(c, d, &format!("f{i}")).await?;
        }
        fs.rmdir(c, b, "d").await?;
        fs.unmount(c).await?;
        Ok::<_, FsError>(())
    })
    .unwrap()
    .unwrap();
    let r = fsck(&**t.ctrl.backend()).unwrap();
    assert!(r.is_clean(), "{:?}", r.findings);
}

/// 100,000 creates in one directory: after the conversion, the simulated
/// time of the last 1,000 creates is at most twice the first 1,000's (a
/// linear directory's would be ~50 times). In `classic` (`MQFS_BIG_DIR_MODE`
/// picks another; `mq` takes about 5 s of host time for the whole test
/// since its entanglement closure is indexed, `docs/decisions.md` M22).
/// `MQFS_BIG_DIR` sets the count.
#[test]
fn create_cost_stays_flat_to_100k_entries() {
    let n: usize = std::env::var("MQFS_BIG_DIR")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let mode = std::env::var("MQFS_BIG_DIR_MODE")
        .ok()
        .and_then(|m| Mode::from_name(&m))
        .unwrap_or(Mode::Classic);
    let Some(t) = setup_with(mode, 1 << 20, 2, 4096) else {
        return;
    };
    let fs = t.fs.clone();
    let m = t.machine.clone();
    let (first, last) =
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            let d = fs.mkdir(c, ROOT, "big", 0o755).await?.ino;
            let now = || m.sim().now().as_ps();
            let mut first = 0;
            let mut last = 0;
            for i in 0..n {
                if i == 1000 {
                    first = now();
                }
                if i == 2000 {
                    first = now() - first;
                }
                if i == n - 1000 {
                    last = now();
                }
                fs.create(c, d, &format!("file{i:06}"), 0o644).await?;
            }
            last = now() - last;
            assert_eq!(
                fs.lookup(c, d, &format!("file{:06}", n / 2)).await?.ino,
                fs.lookup(c, d, &format!("file{:06}", n / 2)).await?.ino
            );
            fs.unmount(c).await?;
            Ok::<_, FsError>((first, last))
        })
        .unwrap()
        .unwrap();
    eprintln!(
        "creates 1000..2000: {} ns, 99000..100000: {} ns",
        first / 1000,
        last / 1000
    );
    assert!(last <= 2 * first, "first {first} ps, last {last} ps");
    let r = fsck(&**t.ctrl.backend()).unwrap();
    assert!(r.is_clean(), "{:?}", r.findings);
}

#[derive(Clone, Debug)]
enum DirOp {
    Create(u16),
    Unlink(u16),
    Rename(u16, u16),
}

fn dir_op() -> impl Strategy<Value = DirOp> {
    prop_oneof![
        6 => (0u16..600).prop_map(DirOp::Create),
        2 => (0u16..600).prop_map(DirOp::Unlink),
        2 => (0u16..600, 0u16..600).prop_map(|(a, b)| DirOp::Rename(a, b)),
    ]
}

fn pname(i: u16) -> String {
    // Lengths 1..=120: leaves of a few to a few hundred entries.
    let len = 1 + (i as usize * 37) % 120;
    let mut s = format!("{i}_");
    while s.len() < len {
        s.push((b'a' + (s.len() % 26) as u8) as char);
    }
    s
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    /// A random sequence of create, unlink and rename in one directory
    /// matches a BTreeMap, through remount, and fsck finds the image clean.
    #[test]
    fn one_directory_matches_a_map(ops in proptest::collection::vec(dir_op(), 200..1500)) {
        let t = setup(Mode::Mq, 16384, 2).expect("mq mode");
        let fs = t.fs.clone();
        let m = t.machine.clone();
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            let d = fs.mkdir(c, ROOT, "d", 0o755).await?.ino;
            let mut model: BTreeMap<String, u32> = BTreeMap::new();
            let mut most = 0;
            for op in ops {
                most = most.max(model.len());
                match op {
                    DirOp::Create(i) => {
                        let r = fs.create(c, d, &pname(i), 0o644).await;
                        match model.get(&pname(i)) {
                            Some(_) => assert_eq!(r.map(|a| a.ino), Err(FsError::Exists)),
                            None => { model.insert(pname(i), r?.ino); }
                        }
                    }
                    DirOp::Unlink(i) => {
                        let r = fs.unlink(c, d, &pname(i)).await;
                        match model.remove(&pname(i)) {
                            Some(_) => r?,
                            None => assert_eq!(r, Err(FsError::NotFound)),
                        }
                    }
                    DirOp::Rename(a, b) => {
                        let r = fs.rename(c, d, &pname(a), d, &pname(b)).await;
                        match model.get(&pname(a)).copied() {
                            Some(ino) => {
                                r?;
                                model.remove(&pname(a));
                                model.insert(pname(b), ino);
                            }
                            None => assert_eq!(r, Err(FsError::NotFound)),
                        }
                    }
                }
            }
            // Past ~60 entries the directory was converted and split.
            if most > 120 {
                assert!(fs.getattr(c, d).await?.size >= 4 * 4096, "{most} entries, still linear?");
            }
            let fs = remount(fs, &m, c).await?;
            let listed: BTreeMap<String, u32> = fs
                .readdir(c, d)
                .await?
                .into_iter()
                .filter(|(n, _, t)| n != "." && n != ".." && *t == FileType::File)
                .map(|(n, i, _)| (n, i))
                .collect();
            assert_eq!(listed, model);
            for (n, ino) in &model {
                assert_eq!(fs.lookup(c, d, n).await?.ino, *ino);
            }
            fs.unmount(c).await?;
            Ok::<_, FsError>(())
        })
        .unwrap()
        .unwrap();
        let r = fsck(&**t.ctrl.backend()).unwrap();
        prop_assert!(r.is_clean(), "{:?}", r.findings);
    }
}
