//! Random damage to the metadata of a populated, cleanly unmounted image:
//! fsck never panics and gives a report or a typed error; mount on a fresh
//! machine over the damaged image never panics or hangs, and when it
//! succeeds, walking and reading everything never panics either (and fails
//! nowhere when fsck found no error).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};

use ccnvme::BlockDevice;
use mqfs::extent_tree::{Entries, ExtentTree, IndexEntry};
use mqfs::fsck::{fsck, fsck_with, FindingKind, MetaBlock, MetaKind, Options, Report};
use mqfs::htree::{decode_dx_root, encode_dx_root, DxRoot};
use mqfs::layout::{
    crc, encode_dir_block, encode_node, seal_dir_block, DirEntry, Extent, Inode, Superblock, BLOCK,
    DIR_SPACE, FLAG_INLINE_SYMLINK, INODE_SIZE, ROOT_INO,
};
use mqfs::testing::{machine_over, new_fs};
use mqfs::{mount, probe_options, Ctx, FallocMode, FileType, Fs, FsError, FsProfile, Mode, XattrFlags};
use nvme_ctrl::{Block, Image, Media, SsdProfile};
use pcie_sim::{RunError, SimTime, TraceMode};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const BLOCKS: u64 = 8192;
/// The modes checked: none, classic and horae, and mq once it mounts.
fn modes() -> &'static [Mode] {
    static M: OnceLock<Vec<Mode>> = OnceLock::new();
    M.get_or_init(|| {
        let mut v = vec![Mode::None, Mode::Classic, Mode::Horae];
        if new_fs(Mode::Mq, SsdProfile::optane_905p(), 4096, 2).is_ok() {
            v.push(Mode::Mq);
        }
        v
    })
}
/// Simulated time a mount plus a full walk may take before it counts as a
/// hang (a clean one takes a few milliseconds).
const LIMIT_PS: u64 = 120 * 1_000_000_000_000;

/// A populated, cleanly unmounted image and its metadata blocks.
struct Base {
    mode: Mode,
    /// The image's non-zero blocks.
    blocks: BTreeMap<u64, Block>,
    meta: Vec<MetaBlock>,
    kinds: Vec<MetaKind>,
}

impl Base {
    fn read(&self, b: u64, buf: &mut [u8; BLOCK]) {
        match self.blocks.get(&b) {
            Some(x) => buf.copy_from_slice(&x[..]),
            None => buf.fill(0),
        }
    }

    /// Media holding the image with `delta` over it.
    fn media(&self, delta: &Delta) -> Media {
        let mut m = Media::memory(BLOCKS);
        for (b, x) in self.blocks.iter().chain(delta.iter()) {
            m.write(*b, x);
        }
        m
    }
}

fn populate(mode: Mode) -> Base {
    let t = new_fs(mode, SsdProfile::optane_905p(), BLOCKS, 2).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    let fs = t.fs.clone();
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        for d in ["/a", "/a/b", "/c", "/c/d"] {
            fs.mkdir_path(c, d).await.unwrap();
        }
        for i in 0..40 {
            let p = format!("/c/file-with-a-longish-name-number-{i:03}-to-need-blocks-xxxxxxxxxxxx");
            fs.create_path(c, &p).await.unwrap();
            fs.write_path(c, &p, 0, format!("content {i}").as_bytes())
                .await
                .unwrap();
        }
        // An indexed directory (mqfs::htree): root and several leaves.
        fs.mkdir_path(c, "/i").await.unwrap();
        for i in 0..160 {
            let p = format!("/i/an-indexed-entry-with-a-name-long-enough-to-split-leaves-{i:03}");
            fs.create_path(c, &p).await.unwrap();
        }
        fs.create_path(c, "/a/many").await.unwrap();
        for i in 0..14u64 {
            fs.write_path(c, "/a/many", 2 * i * BLOCK as u64, &[i as u8 + 1; BLOCK])
                .await
                .unwrap();
        }
        fs.create_path(c, "/a/b/small").await.unwrap();
        fs.write_path(c, "/a/b/small", 0, &[7u8; 9000]).await.unwrap();
        fs.link_path(c, "/a/b/small", "/c/d/hard").await.unwrap();
        let small = fs.resolve(c, "/a/b/small").await.unwrap();
        fs.setxattr(c, small, "user.colour", b"blue", XattrFlags::Any)
            .await
            .unwrap();
        fs.setxattr(c, small, "security.label", &[9u8; 300], XattrFlags::Any)
            .await
            .unwrap();
        let dir = fs.resolve(c, "/a").await.unwrap();
        fs.setxattr(c, dir, "trusted.t", b"", XattrFlags::Any)
            .await
            .unwrap();
        fs.create_path(c, "/a/prealloc").await.unwrap();
        let pre = fs.resolve(c, "/a/prealloc").await.unwrap();
        fs.write_path(c, "/a/prealloc", 0, &[3u8; 100]).await.unwrap();
        fs.fallocate(c, pre, FallocMode::KeepSize, 0, 6 * BLOCK as u64)
            .await
            .unwrap();
        fs.symlink(c, ROOT_INO, "short", "a/b/small").await.unwrap();
        fs.symlink(c, ROOT_INO, "long", &"l/".repeat(100)).await.unwrap();
        fs.rename_path(c, "/c/d", "/a/d").await.unwrap();
        fs.unlink_path(
            c,
            "/c/file-with-a-longish-name-number-007-to-need-blocks-xxxxxxxxxxxx",
        )
        .await
        .unwrap();
        fs.unmount(c).await.unwrap();
    })
    .unwrap();
    let backend = t.ctrl.backend();
    let mut blocks = BTreeMap::new();
    let mut buf = [0u8; BLOCK];
    for b in 0..BLOCKS {
        backend.peek(b, &mut buf);
        if buf.iter().any(|x| *x != 0) {
            blocks.insert(b, Arc::new(buf));
        }
    }
    let image = Image::from_blocks(BLOCKS, blocks.clone());
    let r = fsck_with(
        &image,
        &Options {
            collect_metadata: true,
            ..Options::default()
        },
    )
    .unwrap();
    assert!(r.is_spotless(), "{mode:?}: {r}");
    let mut kinds: Vec<MetaKind> = r.metadata.iter().map(|m| m.kind).collect();
    kinds.dedup();
    for k in [
        MetaKind::Superblock,
        MetaKind::BlockBitmap,
        MetaKind::InodeBitmap,
        MetaKind::InodeTable,
        MetaKind::Directory,
        MetaKind::ExtentNode,
        MetaKind::JournalSuper,
        MetaKind::Xattr,
    ] {
        assert!(kinds.contains(&k), "{mode:?}: no {k:?} block");
    }
    Base {
        mode,
        blocks,
        meta: r.metadata,
        kinds,
    }
}

/// The image of mode `ix` (modulo the modes checked).
fn base(ix: usize) -> &'static Base {
    static B: [OnceLock<Base>; 4] = [OnceLock::new(), OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let ix = ix % modes().len();
    B[ix].get_or_init(|| populate(modes()[ix]))
}

/// Replaced blocks.
type Delta = BTreeMap<u64, Block>;
/// What one damage hit: the kind of block, the offset, resealed or not.
type Hit = (MetaKind, usize, bool);

/// One damage: in the `pick`-th block of the `kind`-th kind, XOR `len`
/// bytes from `off` with `xor`; `reseal` recomputes the structure's
/// checksum so the damage is structural rather than a checksum failure.
#[derive(Clone, Debug)]
struct Damage {
    kind: usize,
    pick: usize,
    off: usize,
    len: usize,
    xor: u8,
    reseal: bool,
}

fn damage() -> impl Strategy<Value = Damage> {
    (
        any::<usize>(),
        any::<usize>(),
        prop_oneof![0usize..128, 0usize..BLOCK],
        1usize..=4,
        1u8..=255,
        any::<bool>(),
    )
        .prop_map(|(kind, pick, off, len, xor, reseal)| Damage {
            kind,
            pick,
            off,
            len,
            xor,
            reseal,
        })
}

fn reseal(kind: MetaKind, b: &mut [u8; BLOCK], off: usize) {
    match kind {
        MetaKind::Superblock | MetaKind::JournalSuper | MetaKind::Xattr => {
            let c = crc(&b[..BLOCK - 4]);
            b[BLOCK - 4..].copy_from_slice(&c.to_le_bytes());
        }
        MetaKind::InodeTable => {
            let s = off / INODE_SIZE * INODE_SIZE;
            let c = crc(&b[s..s + INODE_SIZE - 4]);
            b[s + INODE_SIZE - 4..s + INODE_SIZE].copy_from_slice(&c.to_le_bytes());
        }
        MetaKind::Directory => {
            let c = crc(&b[..DIR_SPACE]);
            b[DIR_SPACE + 8..DIR_SPACE + 12].copy_from_slice(&c.to_le_bytes());
        }
        MetaKind::ExtentNode => {
            let c = crc(&b[..BLOCK - 4]);
            b[BLOCK - 4..].copy_from_slice(&c.to_le_bytes());
        }
        MetaKind::BlockBitmap | MetaKind::InodeBitmap => {}
    }
}

/// Applies the damages; returns the damaged blocks and what single damage
/// (if only one) hit.
fn apply(base: &Base, damages: &[Damage]) -> (Delta, Vec<Hit>) {
    let mut delta: Delta = BTreeMap::new();
    let mut hits = Vec::new();
    for d in damages {
        let kind = base.kinds[d.kind % base.kinds.len()];
        let of_kind: Vec<&MetaBlock> = base.meta.iter().filter(|m| m.kind == kind).collect();
        let m = of_kind[d.pick % of_kind.len()];
        let mut b = [0u8; BLOCK];
        match delta.get(&m.block) {
            Some(x) => b.copy_from_slice(&x[..]),
            None => base.read(m.block, &mut b),
        }
        let end = (d.off + d.len).min(BLOCK);
        for x in &mut b[d.off..end] {
            *x ^= d.xor;
        }
        if d.reseal {
            reseal(kind, &mut b, d.off);
        }
        delta.insert(m.block, Arc::new(b));
        hits.push((kind, d.off, d.reseal));
    }
    (delta, hits)
}

/// What a walk saw: operations that failed (with the error) and done.
#[derive(Debug, Default)]
struct Walk {
    failures: Vec<String>,
    ops: usize,
}

/// Reads the whole tree (bounded), recording failures.
async fn walk(fs: Rc<Fs>, c: Ctx) -> Walk {
    fn note(w: &mut Walk, what: String, r: Result<(), FsError>) {
        w.ops += 1;
        if let Err(e) = r {
            w.failures.push(format!("{what}: {e}"));
        }
    }
    let mut w = Walk::default();
    let mut stack = vec![(ROOT_INO, 0u32)];
    let mut seen = std::collections::BTreeSet::new();
    seen.insert(ROOT_INO);
    while let Some((d, depth)) = stack.pop() {
        let entries = match fs.readdir(c, d).await {
            Ok(e) => e,
            Err(e) => {
                note(&mut w, format!("readdir {d}"), Err(e));
                continue;
            }
        };
        note(&mut w, String::new(), Ok(()));
        for (name, ino, ft) in entries {
            if name == "." || name == ".." || w.ops > 4000 {
                continue;
            }
            let r = fs.lookup(c, d, &name).await.map(|_| ());
            note(&mut w, format!("lookup {d}/{name:?}"), r);
            if !seen.insert(ino) {
                continue;
            }
            let attr = match fs.getattr(c, ino).await {
                Ok(a) => a,
                Err(e) => {
                    note(&mut w, format!("getattr {ino}"), Err(e));
                    continue;
                }
            };
            match fs.listxattr(c, ino).await {
                Ok(names) => {
                    for n in names {
                        let r = fs.getxattr(c, ino, &n).await.map(|_| ());
                        note(&mut w, format!("getxattr {ino} {n:?}"), r);
                    }
                }
                Err(e) => note(&mut w, format!("listxattr {ino}"), Err(e)),
            }
            match ft {
                FileType::Dir if depth < 32 => stack.push((ino, depth + 1)),
                FileType::Dir => {}
                FileType::File => {
                    let n = attr.size.min(256 << 10) as usize;
                    let r = fs.read(c, ino, 0, n).await.map(|_| ());
                    note(&mut w, format!("read {ino}"), r);
                }
                FileType::Symlink => {
                    let r = fs.readlink(c, ino).await.map(|_| ());
                    note(&mut w, format!("readlink {ino}"), r);
                }
                FileType::Fifo | FileType::CharDev | FileType::BlockDev | FileType::Socket => {}
            }
        }
    }
    w
}

/// Mounts `media` on a fresh machine and walks it. `Err` for a hang.
fn mount_and_walk(mode: Mode, media: Media) -> Result<Result<Walk, FsError>, RunError> {
    let (ex, m, _ctrl) = machine_over(SsdProfile::optane_905p(), media, 2, TraceMode::Off, 7);
    let m2 = m.clone();
    let limit = SimTime(ex.sim().now().as_ps() + LIMIT_PS);
    ex.block_on_until(
        async move {
            let c = Ctx::on(0);
            let dev = BlockDevice::probe(&m2, 0, probe_options(mode)).await?;
            let fs = mount(&dev, c, FsProfile::default()).await?;
            let w = walk(fs.clone(), c).await;
            // A change and an unmount on top (errors allowed, panics not).
            let _ = fs.create(c, ROOT_INO, "after-damage", 0o644).await;
            let _ = fs.unmount(c).await;
            Ok(w)
        },
        Some(limit),
    )
}

fn check_case(mode_ix: usize, damages: &[Damage]) -> Result<(), TestCaseError> {
    let base = base(mode_ix);
    let (delta, hits) = apply(base, damages);
    let media = base.media(&delta);
    // (1) fsck: a report or a typed error.
    let report: Option<Report> = match fsck(&media) {
        Ok(r) => Some(r),
        // A damaged version field that still checksums (resealed) is a
        // layout this build does not read: refused, typed.
        Err(FsError::NotMqfs) | Err(FsError::Corrupt(_)) | Err(FsError::LayoutVersion { .. }) => None,
        Err(e) => return Err(TestCaseError::fail(format!("fsck: untyped error {e}"))),
    };
    // One unresealed damage to a checksummed structure is always seen.
    if let [(kind, off, false)] = hits[..] {
        let seen = match kind {
            MetaKind::Superblock => report.is_none(),
            // Mode none never reads its journal: a warning there.
            MetaKind::JournalSuper if base.mode == Mode::None => {
                report.as_ref().is_some_and(|r| !r.is_spotless())
            }
            MetaKind::JournalSuper => report.as_ref().is_some_and(|r| !r.is_clean()),
            // The whole xattr block is under its checksum.
            MetaKind::Xattr => report.as_ref().is_some_and(|r| !r.is_clean()),
            // The whole tree block is under its checksum.
            MetaKind::ExtentNode => report.as_ref().is_some_and(|r| !r.is_clean()),
            MetaKind::Directory if !(DIR_SPACE..DIR_SPACE + 4).contains(&off) && off != DIR_SPACE + 6 => {
                report.as_ref().is_some_and(|r| !r.is_clean())
            }
            MetaKind::BlockBitmap | MetaKind::InodeBitmap => {
                report.as_ref().is_some_and(|r| !r.is_spotless())
            }
            _ => true,
        };
        prop_assert!(seen, "{kind:?} damage at {off} not found: {report:?}");
    }
    // (2) mount and walk: never a panic or a hang.
    match mount_and_walk(base.mode, media) {
        Err(e) => return Err(TestCaseError::fail(format!("mount or walk hung: {e}"))),
        Ok(Err(_)) => {}
        Ok(Ok(w)) => {
            if let Some(r) = report.as_ref().filter(|r| r.is_clean()) {
                prop_assert!(
                    w.failures.is_empty(),
                    "fsck found no error but the walk failed: {:?}\n{r}",
                    w.failures
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// Random bytes of random metadata blocks flipped (sometimes with the
    /// checksum recomputed): fsck and mount never panic or hang.
    #[test]
    fn damaged_metadata_never_panics_or_hangs(
        mode in 0usize..4,
        damages in prop::collection::vec(damage(), 1..=3),
    ) {
        check_case(mode, &damages)?;
    }
}

#[test]
fn every_kind_of_metadata_block_survives_damage() {
    // Deterministic sweep: each kind, each mode, plain and resealed.
    for (mode, name) in modes().iter().enumerate() {
        let kinds = base(mode).kinds.clone();
        for (k, kind) in kinds.iter().enumerate() {
            for (off, reseal) in [(0, false), (20, true), (60, true), (100, true), (3000, false)] {
                let d = Damage {
                    kind: k,
                    pick: 1,
                    off,
                    len: 2,
                    xor: 0x41,
                    reseal,
                };
                check_case(mode, &[d]).unwrap_or_else(|e| panic!("{name:?} {kind:?}: {e}"));
            }
        }
    }
}

fn mount_image(mode: Mode, f: impl Fn(&mut [u8; BLOCK])) -> Result<Walk, FsError> {
    let b = base(modes().iter().position(|m| *m == mode).unwrap());
    let mut sb = [0u8; BLOCK];
    b.read(0, &mut sb);
    f(&mut sb);
    let delta = BTreeMap::from([(0, Arc::new(sb))]);
    mount_and_walk(mode, b.media(&delta)).expect("no hang")
}

#[test]
fn mount_without_magic_is_not_mqfs_and_with_a_bad_checksum_is_corrupt() {
    for &mode in modes() {
        assert_eq!(
            mount_image(mode, |b| b[..8].fill(0)).unwrap_err(),
            FsError::NotMqfs
        );
        assert!(matches!(
            mount_image(mode, |b| b[30] ^= 0x10),
            Err(FsError::Corrupt(_))
        ));
        // Geometry that validates against nothing: typed too.
        let r = mount_image(mode, |b| {
            let mut sb = Superblock::decode(&b[..], BLOCKS).unwrap();
            sb.groups = 7;
            b.copy_from_slice(&sb.encode()[..]);
        });
        assert!(matches!(r, Err(FsError::Corrupt(_))), "{r:?}");
        // The undamaged image mounts and reads without a failure.
        let w = mount_image(mode, |_| {}).unwrap();
        assert!(w.failures.is_empty() && w.ops > 40, "{w:?}");
    }
}

/// Damage to an indexed directory's root, resealed so only the index
/// check can see it: fsck reports `DirIndexCorrupt` (a typed finding),
/// and mount and a walk never panic or hang.
#[test]
fn a_damaged_directory_index_is_a_finding_and_never_a_panic() {
    for (ix, &mode) in modes().iter().enumerate() {
        let b = base(ix);
        let mut buf = [0u8; BLOCK];
        let (root_block, root) = b
            .meta
            .iter()
            .filter(|m| m.kind == MetaKind::Directory)
            .find_map(|m| {
                b.read(m.block, &mut buf);
                decode_dx_root(&buf[..]).ok().map(|r| (m.block, r))
            })
            .unwrap_or_else(|| panic!("{mode:?}: no indexed directory in the image"));
        assert!(root.entries.len() >= 3, "{mode:?}: {root:?}");
        let with = |f: &dyn Fn(&mut DxRoot)| {
            let mut r = root.clone();
            f(&mut r);
            *encode_dx_root(&r)
        };
        let damages: Vec<(&str, [u8; BLOCK])> = vec![
            (
                "leaves swapped",
                with(&|r| {
                    let (a, c) = (r.entries[0].block, r.entries[1].block);
                    r.entries[0].block = c;
                    r.entries[1].block = a;
                }),
            ),
            ("child out of range", with(&|r| r.entries[1].block = 60_000)),
            ("leaf twice", with(&|r| r.entries[2].block = r.entries[1].block)),
            ("a level of nodes that are leaves", with(&|r| r.levels = 1)),
            ("a hash out of order", with(&|r| r.entries[1].hash = u32::MAX - 1)),
            ("the root itself as a child", with(&|r| r.entries[1].block = 0)),
            ("count zero", {
                let mut x = with(&|_| {});
                x[34..36].fill(0);
                seal_dir_block(&mut x);
                x
            }),
        ];
        for (what, block) in damages {
            let delta = BTreeMap::from([(root_block, Arc::new(block))]);
            let media = b.media(&delta);
            let r = fsck(&media).unwrap_or_else(|e| panic!("{mode:?} {what}: fsck {e}"));
            assert!(r.has(FindingKind::DirIndexCorrupt), "{mode:?} {what}: {r}");
            match mount_and_walk(mode, b.media(&delta)) {
                Err(e) => panic!("{mode:?} {what}: hung: {e}"),
                Ok(Err(e)) => assert!(matches!(e, FsError::Corrupt(_)), "{mode:?} {what}: {e}"),
                Ok(Ok(_)) => {}
            }
        }
    }
}

// ---- forged structures: plausible metadata with valid checksums ----

fn forge_extents(rng: &mut ChaCha8Rng, sb: &Superblock, n: usize) -> Vec<Extent> {
    let first = sb.first_data(0);
    let mut logical = 0u32;
    (0..n)
        .map(|_| {
            logical += rng.gen_range(0..3);
            let e = Extent {
                logical: if rng.gen_ratio(1, 20) { rng.gen() } else { logical },
                len: match rng.gen_range(0..20) {
                    0 => 0,
                    1 => rng.gen(),
                    _ => rng.gen_range(1..4),
                },
                physical: match rng.gen_range(0..20) {
                    0 => rng.gen(),
                    1 => rng.gen_range(0..first),
                    2..=12 => first + rng.gen_range(0..80),
                    _ => rng.gen_range(first..sb.journal_start),
                },
                unwritten: rng.gen_ratio(1, 10),
            };
            logical = logical.wrapping_add(e.len.min(4));
            e
        })
        .collect()
}

/// Forges 1 to 4 structures with valid checksums over `base`.
fn forge(base: &Base, seed: u64) -> Delta {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut sbb = [0u8; BLOCK];
    base.read(0, &mut sbb);
    let sb = Superblock::decode(&sbb[..], BLOCKS).unwrap();
    let mut delta: Delta = BTreeMap::new();
    let pick = |rng: &mut ChaCha8Rng, k: MetaKind| -> u64 {
        let v: Vec<u64> = base
            .meta
            .iter()
            .filter(|m| m.kind == k)
            .map(|m| m.block)
            .collect();
        v[rng.gen_range(0..v.len())]
    };
    let get = |delta: &Delta, b: u64| -> [u8; BLOCK] {
        let mut buf = [0u8; BLOCK];
        match delta.get(&b) {
            Some(x) => buf.copy_from_slice(&x[..]),
            None => base.read(b, &mut buf),
        }
        buf
    };
    for _ in 0..rng.gen_range(1..=4) {
        match rng.gen_range(0..10) {
            0..=4 => {
                let b = pick(&mut rng, MetaKind::InodeTable);
                let mut blk = get(&delta, b);
                for _ in 0..rng.gen_range(1..=3) {
                    let slot = rng.gen_range(0..16usize);
                    let ft = [FileType::File, FileType::Dir, FileType::Symlink][rng.gen_range(0..3)];
                    let n = rng.gen_range(0..=11);
                    let mut i = Inode {
                        mode: if rng.gen_ratio(1, 10) {
                            rng.gen()
                        } else {
                            ft.mode_bits() | 0o755
                        },
                        links: rng.gen_range(0..4),
                        flags: if rng.gen_ratio(1, 5) {
                            FLAG_INLINE_SYMLINK
                        } else {
                            0
                        },
                        size: match rng.gen_range(0..10) {
                            0 => rng.gen(),
                            1..=4 => rng.gen_range(0..5) * BLOCK as u64,
                            _ => rng.gen_range(0..20000),
                        },
                        nblocks: rng.gen_range(0..12),
                        tree: ExtentTree::default(),
                        inline: (0..rng.gen_range(0..40))
                            .map(|_| rng.gen_range(32..127))
                            .collect(),
                        ..Default::default()
                    };
                    let extents = forge_extents(&mut rng, &sb, n);
                    if n > 8 {
                        // A depth-1 tree whose one leaf is a forged block.
                        let child = if rng.gen_ratio(1, 2) {
                            pick(&mut rng, MetaKind::Directory)
                        } else {
                            sb.first_data(0) + rng.gen_range(0..100)
                        };
                        let logical = if rng.gen() { extents[0].logical } else { rng.gen() };
                        let root = Entries::Index(vec![IndexEntry { logical, child }]);
                        i.tree = ExtentTree::from_root(1, root);
                        let leaf = Entries::Leaf(extents);
                        delta.insert(child, Arc::new(*encode_node(&leaf, 0)));
                    } else {
                        i.tree = ExtentTree::inline(extents);
                    }
                    blk[slot * INODE_SIZE..(slot + 1) * INODE_SIZE].copy_from_slice(&i.encode());
                }
                delta.insert(b, Arc::new(blk));
            }
            5..=7 => {
                let b = pick(&mut rng, MetaKind::Directory);
                let names: [&[u8]; 6] = [b".", b"..", b"a", b"b", b"x/y", b"\xff"];
                let e: Vec<DirEntry> = (0..rng.gen_range(0..10))
                    .map(|_| DirEntry {
                        ino: match rng.gen_range(0..10) {
                            0 => 2,
                            1 => rng.gen(),
                            2 => rng.gen_range(1..11),
                            _ => rng.gen_range(11..70),
                        },
                        ftype: [FileType::File, FileType::Dir, FileType::Symlink][rng.gen_range(0..3)],
                        name: names[rng.gen_range(0..names.len())].to_vec(),
                    })
                    .collect();
                delta.insert(b, Arc::new(*encode_dir_block(&e).unwrap()));
            }
            8 => {
                let b = pick(&mut rng, MetaKind::ExtentNode);
                let n = rng.gen_range(0..20);
                let leaf = Entries::Leaf(forge_extents(&mut rng, &sb, n));
                delta.insert(b, Arc::new(*encode_node(&leaf, 0)));
            }
            _ => {
                let k = if rng.gen() {
                    MetaKind::BlockBitmap
                } else {
                    MetaKind::InodeBitmap
                };
                let b = pick(&mut rng, k);
                let mut blk = get(&delta, b);
                for _ in 0..rng.gen_range(1..8) {
                    let bit = rng.gen_range(0..1200usize);
                    blk[bit / 8] ^= 1 << (bit % 8);
                }
                delta.insert(b, Arc::new(blk));
            }
        }
    }
    delta
}

fn check_forged(mode_ix: usize, seed: u64) -> Result<(), TestCaseError> {
    let base = base(mode_ix);
    let delta = forge(base, seed);
    let media = base.media(&delta);
    let report = match fsck(&media) {
        Ok(r) => r,
        Err(e) => {
            return Err(TestCaseError::fail(format!(
                "fsck refused a valid superblock: {e}"
            )))
        }
    };
    match mount_and_walk(base.mode, media) {
        Err(e) => return Err(TestCaseError::fail(format!("mount or walk hung: {e}"))),
        Ok(Err(_)) => {}
        Ok(Ok(w)) => {
            if report.is_clean() {
                prop_assert!(
                    w.failures.is_empty(),
                    "fsck found no error but the walk failed: {:?}\n{report}",
                    w.failures
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    /// Forged inodes, directory blocks, extent leaves and bitmap bits with
    /// valid checksums: fsck and mount never panic or hang, and where fsck
    /// finds no error every read succeeds.
    #[test]
    fn forged_metadata_never_panics_or_hangs(mode in 0usize..4, seed in any::<u64>()) {
        check_forged(mode, seed)?;
    }
}
