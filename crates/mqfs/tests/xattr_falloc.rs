//! Extended attributes and fallocate in every mode: each operation and
//! error, persistence across unmount and mount, fsck clean, a damaged
//! xattr block giving a typed error and a finding (not a panic), fsync
//! durability across a power failure in a journaled mode, and a model
//! check of write / fallocate / truncate against a byte vector.

mod common;

use std::sync::Arc;

use ccnvme::BlockDevice;
use common::{modes, remount, setup, snapshot};
use mqfs::fsck::{fsck, fsck_with, FindingKind, MetaKind, Options};
use mqfs::layout::BLOCK;
use mqfs::testing::{format_and_mount, machine, machine_over};
use mqfs::{mount, probe_options, Ctx, FallocMode, Fs, FsError, FsProfile, Ino, Mode, XattrFlags};
use nvme_ctrl::{Controller, Image, Media, MediaCursor, SsdProfile};
use pcie_sim::TraceMode;
use proptest::prelude::*;

const C: Ctx = Ctx { core: 0 };
const BLOCKS: u64 = 8192;
const B: u64 = BLOCK as u64;

/// The whole media of `ctrl` as an in-memory store.
fn media_of(ctrl: &Controller) -> Media {
    let mut m = Media::memory(BLOCKS);
    let mut buf = [0u8; BLOCK];
    for b in 0..BLOCKS {
        ctrl.backend().peek(b, &mut buf);
        if buf.iter().any(|x| *x != 0) {
            m.write(b, &Arc::new(buf));
        }
    }
    m
}

async fn free_blocks(fs: &Fs) -> u64 {
    fs.statfs(C).await.unwrap().free_blocks
}

#[test]
fn xattr_operations_and_errors_in_every_mode() {
    for mode in modes() {
        let Some(t) = setup(mode, BLOCKS, 2) else { continue };
        let fs = t.fs.clone();
        t.ex.block_on(async move {
            let f = fs.create_path(C, "/f").await.unwrap().ino;
            let free0 = free_blocks(&fs).await;
            assert_eq!(fs.listxattr(C, f).await.unwrap(), Vec::<String>::new());
            assert_eq!(fs.getxattr(C, f, "user.a").await, Err(FsError::NoData));
            fs.setxattr(C, f, "user.b", b"2", XattrFlags::Any).await.unwrap();
            assert_eq!(free_blocks(&fs).await, free0 - 1, "{mode:?}: one EA block");
            fs.setxattr(C, f, "user.a", b"1", XattrFlags::Create)
                .await
                .unwrap();
            fs.setxattr(C, f, "security.s", &[0u8; 100], XattrFlags::Any)
                .await
                .unwrap();
            fs.setxattr(C, f, "trusted.t", b"", XattrFlags::Any)
                .await
                .unwrap();
            fs.setxattr(C, f, "system.x", b"sys", XattrFlags::Any)
                .await
                .unwrap();
            assert_eq!(
                fs.listxattr(C, f).await.unwrap(),
                ["security.s", "system.x", "trusted.t", "user.a", "user.b"]
            );
            assert_eq!(fs.getxattr(C, f, "user.a").await.unwrap(), b"1");
            assert_eq!(fs.getxattr(C, f, "trusted.t").await.unwrap(), b"");
            assert_eq!(fs.getattr(C, f).await.unwrap().blocks, 1, "the EA block counts");
            // setxattr(2) flags.
            let e = fs.setxattr(C, f, "user.a", b"x", XattrFlags::Create).await;
            assert_eq!(e, Err(FsError::Exists));
            let e = fs.setxattr(C, f, "user.zz", b"x", XattrFlags::Replace).await;
            assert_eq!(e.map_err(|e| e.errno()), Err(61), "ENODATA");
            fs.setxattr(C, f, "user.a", b"one", XattrFlags::Replace)
                .await
                .unwrap();
            assert_eq!(fs.getxattr(C, f, "user.a").await.unwrap(), b"one");
            // Names.
            let errno = |r: Result<(), FsError>| r.map_err(|e| e.errno());
            assert_eq!(
                errno(fs.setxattr(C, f, "foo.bar", b"", XattrFlags::Any).await),
                Err(95)
            );
            assert_eq!(errno(fs.setxattr(C, f, "", b"", XattrFlags::Any).await), Err(34));
            let long = format!("user.{}", "n".repeat(251));
            assert_eq!(
                errno(fs.setxattr(C, f, &long, b"", XattrFlags::Any).await),
                Err(34)
            );
            let longest = format!("user.{}", "n".repeat(250));
            fs.setxattr(C, f, &longest, b"v", XattrFlags::Any).await.unwrap();
            assert_eq!(
                errno(fs.setxattr(C, f, "user.", b"", XattrFlags::Any).await),
                Err(22)
            );
            assert_eq!(fs.getxattr(C, f, "bogus").await.map_err(|e| e.errno()), Err(95));
            let acl = fs
                .setxattr(C, f, "system.posix_acl_access", b"", XattrFlags::Any)
                .await;
            assert_eq!(errno(acl), Err(95), "no ACLs: cp -a falls back to chmod");
            // Values: over 64 KiB is E2BIG; over the block is ENOSPC, and
            // changes nothing.
            let e = fs
                .setxattr(C, f, "user.big", &vec![1u8; 65537], XattrFlags::Any)
                .await;
            assert_eq!(errno(e), Err(7));
            let e = fs
                .setxattr(C, f, "user.big", &vec![1u8; 4000], XattrFlags::Any)
                .await;
            assert_eq!(errno(e), Err(28));
            assert_eq!(fs.getxattr(C, f, "user.big").await, Err(FsError::NoData));
            assert_eq!(fs.listxattr(C, f).await.unwrap().len(), 6);
            // user. on a symlink: EPERM (xattr_permission); other
            // namespaces are fine.
            let l = fs.symlink(C, 2, "l", "f").await.unwrap().ino;
            assert_eq!(
                errno(fs.setxattr(C, l, "user.a", b"", XattrFlags::Any).await),
                Err(1)
            );
            fs.setxattr(C, l, "security.a", b"lbl", XattrFlags::Any)
                .await
                .unwrap();
            // Directories too.
            let d = fs.mkdir_path(C, "/d").await.unwrap().ino;
            fs.setxattr(C, d, "user.d", b"dir", XattrFlags::Any)
                .await
                .unwrap();
            // Remove: ENODATA if absent; the last one frees the block.
            assert_eq!(fs.removexattr(C, f, "user.nope").await, Err(FsError::NoData));
            let before = free_blocks(&fs).await;
            for n in fs.listxattr(C, f).await.unwrap() {
                fs.removexattr(C, f, &n).await.unwrap();
            }
            assert_eq!(free_blocks(&fs).await, before + 1, "{mode:?}: EA block freed");
            assert_eq!(fs.getattr(C, f).await.unwrap().blocks, 0);
            // Unlinking frees the block with the inode.
            fs.setxattr(C, f, "user.a", b"again", XattrFlags::Any)
                .await
                .unwrap();
            let before = free_blocks(&fs).await;
            fs.unlink_path(C, "/f").await.unwrap();
            assert_eq!(
                free_blocks(&fs).await,
                before + 1,
                "{mode:?}: unlink frees the EA block"
            );
            snapshot(&fs, C).await.unwrap();
        })
        .unwrap();
    }
}

#[test]
fn fallocate_modes_and_errors_in_every_mode() {
    for mode in modes() {
        let Some(t) = setup(mode, BLOCKS, 2) else { continue };
        let fs = t.fs.clone();
        t.ex.block_on(async move {
            let f = fs.create_path(C, "/f").await.unwrap().ino;
            let errno = |r: Result<(), FsError>| r.map_err(|e| e.errno());
            assert_eq!(
                errno(fs.fallocate(C, f, FallocMode::Allocate, 0, 0).await),
                Err(22)
            );
            assert_eq!(
                errno(fs.fallocate(C, f, FallocMode::Allocate, u64::MAX, 2).await),
                Err(27)
            );
            assert_eq!(
                errno(fs.fallocate(C, f, FallocMode::Allocate, 1 << 50, 1).await),
                Err(27)
            );
            let d = fs.mkdir_path(C, "/d").await.unwrap().ino;
            assert_eq!(
                errno(fs.fallocate(C, d, FallocMode::Allocate, 0, 1).await),
                Err(21)
            );
            let l = fs.symlink(C, 2, "l", "f").await.unwrap().ino;
            assert_eq!(
                errno(fs.fallocate(C, l, FallocMode::Allocate, 0, 1).await),
                Err(19)
            );

            // Allocate: size grows, blocks reserved, reads zeros.
            let free0 = free_blocks(&fs).await;
            fs.fallocate(C, f, FallocMode::Allocate, 100, 3 * B)
                .await
                .unwrap();
            let a = fs.getattr(C, f).await.unwrap();
            assert_eq!((a.size, a.blocks), (100 + 3 * B, 4));
            assert_eq!(free_blocks(&fs).await, free0 - 4);
            assert_eq!(
                fs.read(C, f, 0, 5 * B as usize).await.unwrap(),
                vec![0u8; (100 + 3 * B) as usize]
            );
            // A write into it converts what it writes.
            fs.write(C, f, B + 10, &[7u8; 20]).await.unwrap();
            let mut want = vec![0u8; (100 + 3 * B) as usize];
            want[(B + 10) as usize..(B + 30) as usize].fill(7);
            assert_eq!(fs.read(C, f, 0, want.len()).await.unwrap(), want);
            assert_eq!(
                free_blocks(&fs).await,
                free0 - 4,
                "no new block for a preallocated one"
            );
            // KeepSize: past the end, size unchanged.
            fs.fallocate(C, f, FallocMode::KeepSize, 6 * B, 2 * B)
                .await
                .unwrap();
            let a = fs.getattr(C, f).await.unwrap();
            assert_eq!((a.size, a.blocks), (100 + 3 * B, 6));
            // Extending over the preallocation reads zeros.
            fs.truncate(C, f, 8 * B).await.unwrap();
            want.resize(8 * B as usize, 0);
            assert_eq!(fs.read(C, f, 0, want.len()).await.unwrap(), want);
            // Written data everywhere, then punch: whole blocks freed,
            // partial ones zeroed, size kept.
            let data: Vec<u8> = (0..8 * B).map(|i| (i % 251) as u8 + 1).collect();
            fs.write(C, f, 0, &data).await.unwrap();
            want.copy_from_slice(&data);
            let before = free_blocks(&fs).await;
            fs.fallocate(C, f, FallocMode::PunchHole, B + 5, 3 * B)
                .await
                .unwrap();
            want[(B + 5) as usize..(4 * B + 5) as usize].fill(0);
            assert_eq!(free_blocks(&fs).await, before + 2, "blocks 2 and 3 freed");
            assert_eq!(fs.getattr(C, f).await.unwrap().size, 8 * B);
            assert_eq!(fs.read(C, f, 0, want.len()).await.unwrap(), want);
            // Punching past the end changes nothing.
            fs.fallocate(C, f, FallocMode::PunchHole, 20 * B, B)
                .await
                .unwrap();
            // ZeroRange: reads zeros, whole blocks stay allocated (unwritten),
            // holes in the range allocated; extends the size.
            let before = free_blocks(&fs).await;
            fs.fallocate(C, f, FallocMode::ZeroRange, 10, 9 * B)
                .await
                .unwrap();
            want[10..].fill(0);
            want.resize((9 * B + 10) as usize, 0);
            assert_eq!(fs.getattr(C, f).await.unwrap().size, 9 * B + 10);
            assert_eq!(fs.read(C, f, 0, want.len() + 9).await.unwrap(), want);
            assert_eq!(
                free_blocks(&fs).await,
                before - 4,
                "holes 2, 3, 8 and 9 allocated"
            );
            fs.write(C, f, 3 * B, b"abc").await.unwrap();
            want[(3 * B) as usize..(3 * B + 3) as usize].copy_from_slice(b"abc");
            fs.fallocate(C, f, FallocMode::ZeroRangeKeepSize, 3 * B + 1, 20 * B)
                .await
                .unwrap();
            want[(3 * B + 1) as usize..].fill(0);
            assert_eq!(fs.getattr(C, f).await.unwrap().size, 9 * B + 10);
            assert_eq!(fs.read(C, f, 0, want.len()).await.unwrap(), want);
            // ENOSPC: all or nothing.
            let g = fs.create_path(C, "/g").await.unwrap().ino;
            let free = free_blocks(&fs).await;
            let e = fs.fallocate(C, g, FallocMode::Allocate, 0, (free + 1) * B).await;
            assert_eq!(e, Err(FsError::NoSpace));
            assert_eq!(
                free_blocks(&fs).await,
                free,
                "{mode:?}: a failed fallocate leaks nothing"
            );
            assert_eq!(fs.getattr(C, g).await.unwrap().size, 0);
            snapshot(&fs, C).await.unwrap();
            // Persistence across a remount, and fsck spotless.
            let attr = fs.getattr(C, f).await.unwrap();
            let fs = remount(fs, &t.machine, C).await.unwrap();
            assert_eq!(fs.read(C, f, 0, want.len()).await.unwrap(), want, "{mode:?}");
            assert_eq!(fs.getattr(C, f).await.unwrap(), attr);
            fs.unmount(C).await.unwrap();
            let r = fsck(t.ctrl.backend()).unwrap();
            assert!(r.is_spotless(), "{mode:?}: {r}");
        })
        .unwrap();
    }
}

/// Punching every other block of a preallocated file needs one extent per
/// piece: past one leaf (254 extents) the tree splits the leaf (layout 2
/// failed here with EFBIG at 255 extents); the block count holds the two
/// leaves, and the image is clean.
#[test]
fn punching_past_one_leaf_of_extents_splits_the_leaf() {
    let Some(t) = setup(Mode::Classic, BLOCKS, 2) else {
        return;
    };
    let fs = t.fs.clone();
    t.ex.block_on(async move {
        let f = fs.create_path(C, "/f").await.unwrap().ino;
        fs.fallocate(C, f, FallocMode::Allocate, 0, 600 * B)
            .await
            .unwrap();
        for hole in 0..299 {
            fs.fallocate(C, f, FallocMode::PunchHole, (2 * hole + 1) * B, B)
                .await
                .unwrap();
        }
        let a = fs.getattr(C, f).await.unwrap();
        // 300 one-block pieces: two leaves under the inode's root.
        assert_eq!(a.blocks, 600 - 299 + 2, "the two leaves count");
        // Writes into the pieces convert them (no new extent).
        fs.write(C, f, 0, b"x").await.unwrap();
        snapshot(&fs, C).await.unwrap();
        fs.unmount(C).await.unwrap();
        let r = fsck(t.ctrl.backend()).unwrap();
        assert!(r.is_spotless(), "{r}");
    })
    .unwrap();
}

#[test]
fn xattrs_and_allocations_survive_remount_in_every_mode() {
    for mode in modes() {
        let Some(t) = setup(mode, BLOCKS, 2) else { continue };
        let fs = t.fs.clone();
        let machine = t.machine.clone();
        t.ex.block_on(async move {
            let f = fs.create_path(C, "/f").await.unwrap().ino;
            fs.write(C, f, 0, &[5u8; 3 * BLOCK]).await.unwrap();
            fs.setxattr(C, f, "user.k", b"value", XattrFlags::Any)
                .await
                .unwrap();
            fs.setxattr(C, 2, "security.root", &[1, 2, 3], XattrFlags::Any)
                .await
                .unwrap();
            fs.fallocate(C, f, FallocMode::KeepSize, 0, 10 * B).await.unwrap();
            fs.fallocate(C, f, FallocMode::PunchHole, B, B).await.unwrap();
            let fs = remount(fs, &machine, C).await.unwrap();
            assert_eq!(fs.getxattr(C, f, "user.k").await.unwrap(), b"value", "{mode:?}");
            assert_eq!(fs.listxattr(C, 2).await.unwrap(), ["security.root"]);
            let mut want = vec![5u8; 3 * BLOCK];
            want[BLOCK..2 * BLOCK].fill(0);
            assert_eq!(fs.read(C, f, 0, 4 * BLOCK).await.unwrap(), want);
            let a = fs.getattr(C, f).await.unwrap();
            assert_eq!(
                (a.size, a.blocks),
                (3 * B, 9 + 1),
                "{mode:?}: 9 data blocks and the EA block"
            );
        })
        .unwrap();
        let r = fsck(t.ctrl.backend()).unwrap();
        assert!(r.is_clean(), "{mode:?}: {r}");
    }
}

/// A damaged xattr block: fsck reports it, getxattr and listxattr give a
/// typed error (EUCLEAN), the rest of the file system works, and nothing
/// panics.
#[test]
fn a_damaged_xattr_block_is_a_finding_and_a_typed_error() {
    for mode in modes() {
        let Some(t) = setup(mode, BLOCKS, 2) else { continue };
        let fs = t.fs.clone();
        let f =
            t.ex.block_on(async move {
                let f = fs.create_path(C, "/f").await.unwrap().ino;
                fs.write(C, f, 0, b"data").await.unwrap();
                fs.setxattr(C, f, "user.k", b"value", XattrFlags::Any)
                    .await
                    .unwrap();
                fs.unmount(C).await.unwrap();
                f
            })
            .unwrap();
        let mut media = media_of(&t.ctrl);
        let r = fsck_with(
            &media,
            &Options {
                collect_metadata: true,
                ..Options::default()
            },
        )
        .unwrap();
        assert!(r.is_spotless(), "{mode:?}: {r}");
        let xb = r
            .metadata
            .iter()
            .find(|m| m.kind == MetaKind::Xattr)
            .unwrap()
            .block;
        let mut buf = [0u8; BLOCK];
        media.read(xb, &mut buf);
        buf[20] ^= 0x5a;
        media.write(xb, &Arc::new(buf));
        let r = fsck(&media).unwrap();
        assert!(
            r.errors()
                .any(|e| e.kind == FindingKind::XattrBlockCorrupt && e.ino == Some(f)),
            "{mode:?}: {r}"
        );
        let (ex, m, _ctrl) = machine_over(SsdProfile::optane_905p(), media, 2, TraceMode::Off, 3);
        ex.block_on(async move {
            let dev = BlockDevice::probe(&m, 0, probe_options(mode)).await.unwrap();
            let fs = mount(&dev, C, FsProfile::default()).await.unwrap();
            assert_eq!(fs.getxattr(C, f, "user.k").await.map_err(|e| e.errno()), Err(117));
            assert!(matches!(fs.listxattr(C, f).await, Err(FsError::Corrupt(_))));
            assert_eq!(fs.read(C, f, 0, 10).await.unwrap(), b"data");
            fs.unmount(C).await.unwrap();
        })
        .unwrap();
    }
}

/// fsync makes a file's xattrs, preallocation and punched hole durable in
/// the journaled mode `classic`, on a drive with a volatile write cache:
/// after a power failure right after further unsynced changes, the media
/// holds exactly what is certainly durable; recovery then finds the synced
/// state, and the attribute set after the fsync is gone (the crash really
/// drops what was not synced).
#[test]
fn fsync_makes_xattrs_and_allocation_durable_across_power_failure() {
    let profile = SsdProfile::flash_vwc();
    assert!(profile.volatile_cache());
    let (ex, m, _ctrl) = machine(profile.clone(), BLOCKS, 2, TraceMode::Full, 1);
    let m2 = m.clone();
    let f = ex
        .block_on(async move {
            let (_dev, fs) = format_and_mount(&m2, Mode::Classic, BLOCKS, |_| {}, FsProfile::default())
                .await
                .unwrap();
            let f = fs.create_path(C, "/f").await.unwrap().ino;
            fs.write(C, f, 0, &[9u8; 3 * BLOCK]).await.unwrap();
            fs.fallocate(C, f, FallocMode::KeepSize, 0, 8 * B).await.unwrap();
            fs.fallocate(C, f, FallocMode::PunchHole, B, B).await.unwrap();
            fs.setxattr(C, f, "user.synced", b"yes", XattrFlags::Any)
                .await
                .unwrap();
            fs.fsync(C, f).await.unwrap();
            fs.setxattr(C, f, "user.unsynced", b"no", XattrFlags::Any)
                .await
                .unwrap();
            fs.fallocate(C, f, FallocMode::Allocate, 0, 20 * B).await.unwrap();
            f
        })
        .unwrap();
    let trace = m.take_trace();
    let mut cursor = MediaCursor::new(&trace, 0).unwrap();
    cursor.advance_past(trace.entries().len() - 1).unwrap();
    let media = MediaCursor::media(&Arc::new(Image::zeroed(BLOCKS)), cursor.durable().clone());
    let (ex, m, ctrl) = machine_over(profile, media, 2, TraceMode::Off, 3);
    ex.block_on(async move {
        let dev = BlockDevice::probe(&m, 0, probe_options(Mode::Classic))
            .await
            .unwrap();
        let fs = mount(&dev, C, FsProfile::default()).await.unwrap();
        assert_eq!(fs.getxattr(C, f, "user.synced").await.unwrap(), b"yes");
        assert_eq!(fs.getxattr(C, f, "user.unsynced").await, Err(FsError::NoData));
        let a = fs.getattr(C, f).await.unwrap();
        assert_eq!(
            (a.size, a.blocks),
            (3 * B, 7 + 1),
            "7 data blocks and the EA block"
        );
        let mut want = vec![9u8; 3 * BLOCK];
        want[BLOCK..2 * BLOCK].fill(0);
        assert_eq!(fs.read(C, f, 0, 8 * BLOCK).await.unwrap(), want);
        fs.unmount(C).await.unwrap();
    })
    .unwrap();
    let r = fsck(ctrl.backend()).unwrap();
    assert!(r.is_spotless(), "{r}");
}

/// One step of the model check.
#[derive(Clone, Debug)]
enum Op {
    Write(u64, usize, u8),
    Falloc(FallocMode, u64, u64),
    Truncate(u64),
}

const SPAN: u64 = 20 * B;

fn op() -> impl Strategy<Value = Op> {
    let pos = prop_oneof![0..SPAN, (0..20u64).prop_map(|b| b * B)];
    let len = prop_oneof![1..3 * B, (1..6u64).prop_map(|b| b * B)];
    let mode = prop_oneof![
        Just(FallocMode::Allocate),
        Just(FallocMode::KeepSize),
        Just(FallocMode::PunchHole),
        Just(FallocMode::ZeroRange),
        Just(FallocMode::ZeroRangeKeepSize),
    ];
    prop_oneof![
        (pos.clone(), 1..2 * BLOCK, 1u8..=255).prop_map(|(o, l, v)| Op::Write(o, l, v)),
        (mode, pos.clone(), len).prop_map(|(m, o, l)| Op::Falloc(m, o, l)),
        pos.prop_map(Op::Truncate),
    ]
}

/// What fallocate(2) does to the bytes of a file, as a byte vector.
fn model(file: &mut Vec<u8>, op: &Op) {
    let size = file.len() as u64;
    let zero = |file: &mut Vec<u8>, from: u64, to: u64| {
        let to = to.min(file.len() as u64);
        if from < to {
            file[from as usize..to as usize].fill(0);
        }
    };
    match *op {
        Op::Write(o, l, v) => {
            let end = o as usize + l;
            if file.len() < end {
                file.resize(end, 0);
            }
            file[o as usize..end].fill(v);
        }
        Op::Truncate(s) => file.resize(s as usize, 0),
        Op::Falloc(mode, o, l) => match mode {
            FallocMode::Allocate if o + l > size => file.resize((o + l) as usize, 0),
            FallocMode::Allocate | FallocMode::KeepSize => {}
            FallocMode::PunchHole | FallocMode::ZeroRangeKeepSize => zero(file, o, o + l),
            FallocMode::ZeroRange => {
                zero(file, o, o + l);
                if o + l > size {
                    file.resize((o + l) as usize, 0);
                }
            }
        },
    }
}

async fn apply(fs: &Fs, f: Ino, op: &Op) -> Result<(), FsError> {
    match *op {
        Op::Write(o, l, v) => fs.write(C, f, o, &vec![v; l]).await.map(|_| ()),
        Op::Truncate(s) => fs.truncate(C, f, s).await,
        Op::Falloc(mode, o, l) => fs.fallocate(C, f, mode, o, l).await,
    }
}

/// Applies `ops` to a fresh file in `mode` and compares it with a byte
/// vector after every step and after a remount; the image is then fsck'd.
fn run_ops(mode: Mode, ops: &[Op]) -> Result<(), String> {
    let Some(t) = setup(mode, BLOCKS, 2) else {
        return Ok(());
    };
    let fs = t.fs.clone();
    let machine = t.machine.clone();
    let ops = ops.to_vec();
    t.ex.block_on(async move {
        let f = fs.create_path(C, "/f").await.unwrap().ino;
        let mut file = Vec::new();
        for (i, op) in ops.iter().enumerate() {
            apply(&fs, f, op)
                .await
                .map_err(|e| format!("step {i} {op:?}: {e}"))?;
            model(&mut file, op);
            let size = fs.getattr(C, f).await.unwrap().size;
            if size != file.len() as u64 {
                return Err(format!("step {i} {op:?}: size {size}, model {}", file.len()));
            }
            let got = fs.read(C, f, 0, file.len() + BLOCK).await.unwrap();
            if got != file {
                let at = got.iter().zip(&file).position(|(a, b)| a != b);
                return Err(format!("step {i} {op:?}: content differs at {at:?}"));
            }
        }
        snapshot(&fs, C).await?;
        let fs = remount(fs, &machine, C).await.unwrap();
        let got = fs.read(C, f, 0, file.len() + BLOCK).await.unwrap();
        if got != file {
            return Err(format!("{mode:?}: content differs after remount"));
        }
        fs.unmount(C).await.unwrap();
        Ok(())
    })
    .unwrap()
    .map_err(|e| format!("{mode:?}: {e}"))?;
    let r = fsck(t.ctrl.backend()).unwrap();
    if r.is_spotless() {
        Ok(())
    } else {
        Err(format!("{mode:?}: {r}"))
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, .. ProptestConfig::default() })]

    /// Random writes, fallocates of every mode and truncates against a
    /// byte vector: size and content equal after every step, the block
    /// accounting exact, and again after a remount (fsck spotless).
    #[test]
    fn write_fallocate_truncate_match_a_byte_vector(
        mode_ix in 0usize..4,
        ops in prop::collection::vec(op(), 1..30),
    ) {
        let r = run_ops(Mode::ALL[mode_ix], &ops);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

/// A case proptest found: a zero-range fallocate, a truncate that cuts
/// the file inside an extent, then a write into the freed range.
#[test]
fn zero_range_then_truncate_then_write_allocates_each_block_once() {
    use FallocMode::ZeroRange;
    let ops = [
        Op::Write(25476, 3197, 1),
        Op::Write(8192, 1, 1),
        Op::Write(32768, 4097, 1),
        Op::Truncate(32768),
        Op::Write(61440, 4097, 8),
        Op::Falloc(ZeroRange, 4096, 8192),
        Op::Write(32768, 431, 49),
        Op::Truncate(36864),
        Op::Write(12859, 2721, 163),
    ];
    for mode in Mode::ALL {
        if let Err(e) = run_ops(mode, &ops) {
            panic!("{e}");
        }
    }
}
