//! MQFS's own refusals: on symlinks, on the dot entries, where POSIX
//! leaves MQFS a choice, and on a full disk or without a free inode; each
//! gets its POSIX error and changes nothing. (The refusals every file
//! system shares -- a missing parent, a non-empty directory, a name too
//! long... -- are `fsapi::testing::posix`'s, run by tests/posix.rs.)
//!
//! Each failing call is checked for its exact [`FsError`] variant and
//! `errno()`, and for changing nothing: the full tree (every path, type,
//! link count, size, content, symlink target and block count, see
//! `common::snapshot`) and `statfs`'s free blocks and inodes are the same
//! before and after. Every test ends with a remount and the same tree.
//!
//! # Full-disk semantics
//!
//! `write` allocates block by block. The semantics asked of it are
//! POSIX's: "if a write() requests that more bytes be written than there
//! is room for, only as many bytes as there is room for shall be written"
//! -- a write that runs out of blocks part-way returns the short count,
//! with the prefix written and the size extended to its end; one that
//! cannot write a single byte returns `NoSpace` and changes nothing. The
//! tests also accept `NoSpace` with nothing changed for a write that could
//! have written a prefix (all or nothing), but never `NoSpace` with
//! something changed, and in every case the blocks the bitmaps mark used
//! are exactly those the reachable inodes hold. A `mkdir`, `create` or
//! `symlink` that finds no block (for the new directory, a long symlink's
//! target, or a new block of the parent directory) or no inode returns
//! `NoSpace` and leaks neither; so do `link` and `rename` into a directory
//! whose block is full.

mod common;

use std::fmt::Debug;
use std::future::Future;
use std::mem::discriminant;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;

use common::{diff, modes, remount, setup_with, snapshot, Snap, ROOT};
use mqfs::testing::TestFs;
use mqfs::{Ctx, Fs, FsError, Ino, StatFs};
use pcie_sim::Machine;

/// A device big enough for the plain error cases.
const BLOCKS: u64 = 16384;
/// A tiny device for the full-disk cases: 2048 blocks, 256 of journal.
const TINY: u64 = 2048;

const C: Ctx = Ctx { core: 0 };

/// Runs `body` on a fresh file system of every mode (skipping modes not
/// built yet), then remounts and checks that the tree is unchanged. Every
/// mode runs; the test fails at the end naming the modes that failed.
fn each_mode<F, Fut>(blocks: u64, bytes_per_inode: u64, body: F)
where
    F: Fn(Rc<Fs>) -> Fut,
    Fut: Future<Output = ()> + 'static,
{
    let mut failed = Vec::new();
    for mode in modes() {
        let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let Some(t) = setup_with(mode, blocks, 2, bytes_per_inode) else {
                return;
            };
            let TestFs { ex, machine, fs, .. } = t;
            let work = body(fs.clone());
            ex.block_on(async move {
                work.await;
                check_remount(fs, &machine).await;
            })
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        }));
        if let Err(p) = run {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            let tag = format!("{mode:?}");
            failed.push(if msg.starts_with(&tag) {
                msg
            } else {
                format!("{tag}: {msg}")
            });
        }
    }
    assert!(
        failed.is_empty(),
        "failed in {} mode(s):\n{}",
        failed.len(),
        failed.join("\n")
    );
}

async fn check_remount(fs: Rc<Fs>, machine: &Machine) {
    let mode = fs.mode();
    let before = snap(&fs).await;
    let fs = remount(fs, machine, C)
        .await
        .unwrap_or_else(|e| panic!("{mode:?}: remount: {e}"));
    let after = snap(&fs).await;
    assert_same(&before, &after, &format!("{mode:?}: after remount"));
}

async fn snap(fs: &Fs) -> Snap {
    snapshot(fs, C)
        .await
        .unwrap_or_else(|e| panic!("{:?}: inconsistent tree: {e}", fs.mode()))
}

async fn usage(fs: &Fs) -> (u64, u64) {
    let s: StatFs = fs.statfs(C).await.unwrap();
    (s.free_blocks, s.free_inodes)
}

fn assert_same(before: &Snap, after: &Snap, what: &str) {
    let d = diff(before, after);
    assert!(d.is_empty(), "{what}: the tree changed:\n{}", d.join("\n"));
    assert_eq!(before.blocks, after.blocks, "{what}: block counts changed");
}

/// Runs `op`, which must fail with `want` (errno `errno`), and checks that
/// it changed nothing.
async fn fails<T: Debug>(
    fs: &Fs,
    what: &str,
    want: FsError,
    errno: i32,
    op: impl Future<Output = Result<T, FsError>>,
) {
    let what = format!("{:?}: {what}", fs.mode());
    let before = snap(fs).await;
    let free = usage(fs).await;
    match op.await {
        Err(e) if discriminant(&e) == discriminant(&want) => {
            assert_eq!(e.errno(), errno, "{what}: errno of {e:?}")
        }
        other => panic!("{what}: got {other:?}, want {want:?}"),
    }
    let after = snapshot(fs, C)
        .await
        .unwrap_or_else(|e| panic!("{what}: inconsistent after the call: {e}"));
    assert_same(&before, &after, &what);
    assert_eq!(usage(fs).await, free, "{what}: free (blocks, inodes) changed");
}

async fn ino(fs: &Fs, path: &str) -> Ino {
    fs.resolve(C, path)
        .await
        .unwrap_or_else(|e| panic!("resolve {path}: {e}"))
}

/// /d (dir) holding f (a file with data) and sub (an empty dir), /e (empty
/// dir), /g (file), /s (symlink to /d/f), /h (a second name of /d/f).
async fn populate(fs: &Fs) {
    fs.mkdir_path(C, "/d").await.unwrap();
    fs.create_path(C, "/d/f").await.unwrap();
    fs.write_path(C, "/d/f", 0, &[7u8; 5000]).await.unwrap();
    fs.mkdir_path(C, "/d/sub").await.unwrap();
    fs.mkdir_path(C, "/e").await.unwrap();
    fs.create_path(C, "/g").await.unwrap();
    fs.write_path(C, "/g", 0, b"gg").await.unwrap();
    fs.symlink(C, ROOT, "s", "/d/f").await.unwrap();
    fs.link_path(C, "/d/f", "/h").await.unwrap();
}

// The POSIX refusals any file system gives (ENOENT, EEXIST, ENOTDIR,
// EISDIR, ENOTEMPTY, EINVAL, ENAMETOOLONG, that each changes nothing, and
// an empty write past the end) are checked once for every file system, in
// `fsapi::testing::posix` (tests/posix.rs runs them in each mode). What
// stays here is MQFS's own: symlinks, the dot entries (which MQFS looks
// up), the answers where POSIX leaves a choice (EEXIST for making `.` or
// `..`, EISDIR for a hard link to a directory), and full disks.

#[test]
fn a_symlink_name_too_long_is_enametoolong_and_changes_nothing() {
    each_mode(BLOCKS, 16384, |fs| async move {
        populate(&fs).await;
        let d = ino(&fs, "/d").await;
        let long = "x".repeat(256);
        fails(
            &fs,
            "symlink",
            FsError::NameTooLong,
            36,
            fs.symlink(C, d, &long, "t"),
        )
        .await;
        // 255 bytes is fine.
        fs.symlink(C, d, &"m".repeat(255), "t").await.unwrap();
        snap(&fs).await;
    });
}

#[test]
fn an_existing_name_is_eexist_for_symlinks_and_dot_entries_and_changes_nothing() {
    each_mode(BLOCKS, 16384, |fs| async move {
        populate(&fs).await;
        let (d, f) = (ino(&fs, "/d").await, ino(&fs, "/d/f").await);
        let e = || FsError::Exists;
        fails(
            &fs,
            "mkdir over a symlink",
            e(),
            17,
            fs.mkdir(C, ROOT, "s", 0o755),
        )
        .await;
        fails(&fs, "symlink over a file", e(), 17, fs.symlink(C, ROOT, "g", "x")).await;
        // "." and ".." exist in every directory (Linux's mkdir says
        // EEXIST too).
        fails(&fs, "mkdir .", e(), 17, fs.mkdir(C, d, ".", 0o755)).await;
        fails(&fs, "create ..", e(), 17, fs.create(C, d, "..", 0o644)).await;
        fails(&fs, "link ..", e(), 17, fs.link(C, f, d, "..")).await;
        fails(&fs, "symlink .", e(), 17, fs.symlink(C, d, ".", "x")).await;
    });
}

#[test]
fn a_symlink_where_a_directory_is_needed_is_enotdir_and_changes_nothing() {
    each_mode(BLOCKS, 16384, |fs| async move {
        populate(&fs).await;
        let (f, s) = (ino(&fs, "/d/f").await, ino(&fs, "/s").await);
        let e = || FsError::NotDir;
        fails(&fs, "mkdir in a symlink", e(), 20, fs.mkdir(C, s, "x", 0o755)).await;
        fails(&fs, "symlink in a file", e(), 20, fs.symlink(C, f, "x", "y")).await;
        fails(&fs, "rmdir of a symlink", e(), 20, fs.rmdir(C, ROOT, "s")).await;
        fails(
            &fs,
            "rename a dir over a symlink",
            e(),
            20,
            fs.rename_path(C, "/e", "/s"),
        )
        .await;
    });
}

#[test]
fn a_directory_where_a_file_is_needed_is_eisdir_for_links_and_symlinks_and_changes_nothing() {
    each_mode(BLOCKS, 16384, |fs| async move {
        populate(&fs).await;
        let d = ino(&fs, "/d").await;
        let e = || FsError::IsDir;
        // POSIX says EPERM; MQFS says EISDIR (see model.rs).
        fails(&fs, "link a dir", e(), 21, fs.link(C, d, ROOT, "l")).await;
        fails(
            &fs,
            "rename a symlink over a dir",
            e(),
            21,
            fs.rename_path(C, "/s", "/e"),
        )
        .await;
    });
}

#[test]
fn bad_symlinks_and_relative_paths_are_einval_and_dot_entries_resolve() {
    each_mode(BLOCKS, 16384, |fs| async move {
        populate(&fs).await;
        let (d, sub, s) = (
            ino(&fs, "/d").await,
            ino(&fs, "/d/sub").await,
            ino(&fs, "/s").await,
        );
        let f = ino(&fs, "/d/f").await;
        let e = || FsError::Invalid(String::new());
        fails(&fs, "symlink to ''", e(), 22, fs.symlink(C, d, "l", "")).await;
        let huge = "t".repeat(4097);
        fails(
            &fs,
            "symlink to 4097 bytes",
            e(),
            22,
            fs.symlink(C, d, "l", &huge),
        )
        .await;
        fails(&fs, "readlink of a file", e(), 22, fs.readlink(C, f)).await;
        fails(&fs, "write a symlink", e(), 22, fs.write(C, s, 0, b"x")).await;
        fails(&fs, "truncate a symlink", e(), 22, fs.truncate(C, s, 0)).await;
        fails(&fs, "relative path", e(), 22, fs.resolve(C, "d/f")).await;
        // "." and ".." resolve to the directory and its parent.
        assert_eq!(fs.lookup(C, d, ".").await.unwrap().ino, d);
        assert_eq!(fs.lookup(C, d, "..").await.unwrap().ino, ROOT);
        assert_eq!(fs.lookup(C, sub, "..").await.unwrap().ino, d);
        assert_eq!(fs.lookup(C, ROOT, "..").await.unwrap().ino, ROOT);
        assert_eq!(fs.resolve(C, "/d/./sub/../f").await.unwrap(), f);
        // A 4096-byte target is the longest.
        fs.symlink(C, d, "l", &huge[..4096]).await.unwrap();
        assert_eq!(fs.readlink(C, ino(&fs, "/d/l").await).await.unwrap().len(), 4096);
    });
}

// ---- full disk and no inodes ----

/// A deterministic payload.
fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| ((i as u8).wrapping_mul(13) ^ seed) | 1)
        .collect()
}

/// Appends to `path` until the disk is full; returns the file's content.
async fn fill(fs: &Fs, path: &str) -> Vec<u8> {
    let f = ino(fs, path).await;
    let mut content = fs.read_path(C, path).await.unwrap();
    loop {
        // 13 blocks and a bit: the last write runs out part-way.
        let chunk = bytes(13 * 4096 + 1000, content.len() as u8);
        let off = content.len() as u64;
        let before = snap(fs).await;
        let r = fs.write(C, f, off, &chunk).await;
        if r.is_ok() {
            // Durable as it goes (an fsync of a few blocks at a time).
            fs.fsync(C, f).await.unwrap();
        }
        match r {
            Ok(n) if n == chunk.len() => content.extend_from_slice(&chunk),
            Ok(n) => {
                // A short write: the prefix that fitted.
                assert!(n > 0 && n < chunk.len(), "write returned {n}");
                content.extend_from_slice(&chunk[..n]);
            }
            Err(FsError::NoSpace) => {
                let what = format!("{:?}: a write that failed with NoSpace", fs.mode());
                assert_same(&before, &snap(fs).await, &what);
                break;
            }
            Err(e) => panic!("fill: {e}"),
        }
        assert_eq!(fs.read_path(C, path).await.unwrap(), content, "fill: content");
    }
    content
}

#[test]
fn a_write_on_a_full_disk_is_short_or_enospc_and_leaks_nothing() {
    each_mode(TINY, 16384, |fs| async move {
        fs.create_path(C, "/big").await.unwrap();
        let big = ino(&fs, "/big").await;
        let mut content = fill(&fs, "/big").await;
        assert_eq!(usage(&fs).await.0, 0, "filled");
        // Nothing left: a write into a hole or past the end cannot write
        // a byte.
        let end = content.len() as u64;
        fails(
            &fs,
            "append",
            FsError::NoSpace,
            28,
            fs.write(C, big, end + 8192, b"x"),
        )
        .await;
        fs.create_path(C, "/small").await.unwrap();
        let small = ino(&fs, "/small").await;
        fails(
            &fs,
            "write a new file",
            FsError::NoSpace,
            28,
            fs.write(C, small, 0, b"x"),
        )
        .await;
        // Overwrites need no block.
        fs.write(C, big, 100, b"over").await.unwrap();
        content[100..104].copy_from_slice(b"over");
        // A shrink frees blocks, and they can be written again.
        let keep = content.len() - 5 * 4096 - 10;
        fs.truncate(C, big, keep as u64).await.unwrap();
        content.truncate(keep);
        assert!(usage(&fs).await.0 >= 5);
        fs.write(C, small, 0, &[3u8; 4096]).await.unwrap();
        assert_eq!(fs.read_path(C, "/big").await.unwrap(), content);
        snap(&fs).await;
    });
}

/// Fills the disk so that exactly `left` blocks stay free, with `/filler`.
async fn fill_to(fs: &Fs, left: u64) {
    fs.create_path(C, "/filler").await.unwrap();
    let f = ino(fs, "/filler").await;
    let free = usage(fs).await.0;
    assert!(free > left + 16);
    // The filler's blocks are contiguous, so it needs no extent leaf;
    // an fsync after each 128 blocks keeps transactions small.
    let mut off = 0u64;
    while usage(fs).await.0 > left {
        let n = (usage(fs).await.0 - left).min(128) as usize;
        fs.write(C, f, off, &vec![1u8; n * 4096]).await.unwrap();
        fs.fsync(C, f).await.unwrap();
        off += n as u64 * 4096;
    }
    assert_eq!(usage(fs).await.0, left);
}

/// The reduced case of the full-disk write bug: a write that needs two
/// blocks when one is free.
#[test]
fn a_write_that_runs_out_of_blocks_part_way_leaves_a_consistent_file() {
    each_mode(TINY, 16384, |fs| async move {
        fs.create_path(C, "/f").await.unwrap();
        let f = ino(&fs, "/f").await;
        fs.write(C, f, 0, &[5u8; 100]).await.unwrap();
        fill_to(&fs, 1).await;
        let before = snap(&fs).await;
        let data = bytes(3 * 4096, 9);
        // Block 0 exists; blocks 1 and 2 need new blocks, one is free.
        match fs.write(C, f, 50, &data).await {
            Ok(n) => {
                assert!(n > 0 && n < data.len(), "wrote {n} with one free block");
                let mut want = vec![5u8; 50];
                want.extend_from_slice(&data[..n]);
                assert_eq!(fs.read_path(C, "/f").await.unwrap(), want, "the prefix");
            }
            Err(e) => {
                assert_eq!(e, FsError::NoSpace);
                let what = format!("{:?}: a write that failed with NoSpace", fs.mode());
                assert_same(&before, &snap(&fs).await, &what);
            }
        }
        snap(&fs).await;
    });
}

/// A file of 8 extents (the most the inode holds) whose next write takes
/// the last free block as a 9th extent: the extent leaf finds no block.
#[test]
fn a_write_that_needs_an_extent_leaf_on_a_full_disk_leaves_a_consistent_file() {
    each_mode(TINY, 16384, |fs| async move {
        fs.create_path(C, "/f").await.unwrap();
        let f = ino(&fs, "/f").await;
        for k in 0..8u64 {
            // Every other file block: 8 extents.
            fs.write(C, f, k * 2 * 4096, &[k as u8 + 1; 4096]).await.unwrap();
        }
        assert_eq!(fs.getattr(C, f).await.unwrap().blocks, 8, "no leaf yet");
        fill_to(&fs, 1).await;
        let before = snap(&fs).await;
        match fs.write(C, f, 16 * 4096, &[9u8; 4096]).await {
            Ok(n) => panic!("wrote {n} bytes with no block for the extent leaf"),
            Err(e) => {
                assert_eq!(e, FsError::NoSpace);
                let what = format!("{:?}: a write that failed with NoSpace", fs.mode());
                assert_same(&before, &snap(&fs).await, &what);
            }
        }
    });
}

#[test]
fn mkdir_on_a_full_disk_is_enospc_and_leaks_no_inode() {
    each_mode(TINY, 16384, |fs| async move {
        fill_to(&fs, 0).await;
        fails(&fs, "mkdir", FsError::NoSpace, 28, fs.mkdir(C, ROOT, "x", 0o755)).await;
        // What needs no block still works.
        fs.create(C, ROOT, "x", 0o644).await.unwrap();
        snap(&fs).await;
    });
}

#[test]
fn a_long_symlink_on_a_full_disk_is_enospc_and_leaks_no_inode() {
    each_mode(TINY, 16384, |fs| async move {
        fill_to(&fs, 0).await;
        let long = "t".repeat(200);
        fails(
            &fs,
            "long symlink",
            FsError::NoSpace,
            28,
            fs.symlink(C, ROOT, "x", &long),
        )
        .await;
        // A target that fits in the inode needs no block.
        fs.symlink(C, ROOT, "x", "short").await.unwrap();
        snap(&fs).await;
    });
}

#[test]
fn a_create_that_must_grow_its_directory_on_a_full_disk_is_enospc_and_leaks_no_inode() {
    each_mode(TINY, 16384, |fs| async move {
        // /full: a directory whose only block is full to the byte: "."
        // and ".." (12 bytes each), 15 entries of 255-byte names (264
        // each) and one of 92 (100): 4084 bytes.
        fs.mkdir_path(C, "/full").await.unwrap();
        let full = ino(&fs, "/full").await;
        for k in 0..15u8 {
            let name = format!("{k:02}{}", "n".repeat(253));
            fs.create(C, full, &name, 0o644).await.unwrap();
        }
        fs.create(C, full, &"z".repeat(92), 0o644).await.unwrap();
        assert_eq!(fs.getattr(C, full).await.unwrap().size, 4096);
        fill_to(&fs, 0).await;
        let e = || FsError::NoSpace;
        fails(
            &fs,
            "create in a full dir block",
            e(),
            28,
            fs.create(C, full, "x", 0o644),
        )
        .await;
        let f = ino(&fs, "/filler").await;
        fails(&fs, "link in a full dir block", e(), 28, fs.link(C, f, full, "x")).await;
        fails(
            &fs,
            "rename into a full dir block",
            e(),
            28,
            fs.rename(C, ROOT, "filler", full, "x"),
        )
        .await;
        // Where the directory has room, it works.
        fs.create(C, ROOT, "x", 0o644).await.unwrap();
        snap(&fs).await;
    });
}

#[test]
fn creates_without_a_free_inode_are_enospc_and_change_nothing() {
    // A huge bytes-per-inode ratio: one inode-table block, 16 inodes, of
    // which 1..=10 are reserved.
    each_mode(TINY, 1 << 40, |fs| async move {
        let st = fs.statfs(C).await.unwrap();
        assert_eq!(st.inodes, 16);
        let mut made = 0;
        while fs.create(C, ROOT, &format!("f{made}"), 0o644).await.is_ok() {
            made += 1;
        }
        assert_eq!(made, 6, "16 inodes, 10 reserved");
        snap(&fs).await;
        let e = || FsError::NoSpace;
        fails(&fs, "create", e(), 28, fs.create(C, ROOT, "x", 0o644)).await;
        fails(&fs, "mkdir", e(), 28, fs.mkdir(C, ROOT, "x", 0o755)).await;
        fails(&fs, "symlink", e(), 28, fs.symlink(C, ROOT, "x", "t")).await;
        // A link needs no inode; a freed inode can be used again.
        fs.link_path(C, "/f0", "/l").await.unwrap();
        fs.unlink_path(C, "/f1").await.unwrap();
        fs.mkdir_path(C, "/x").await.unwrap();
        snap(&fs).await;
    });
}

// ---- reproductions of bugs the tests above found ----

/// Found by `a_write_on_a_full_disk_is_short_or_enospc_and_leaks_nothing`
/// in `mq` mode (its unmount failed): an fsync of a file with more dirty
/// blocks than one ccNVMe transaction holds (255 commands).
#[test]
fn mq_fsync_of_a_file_with_300_dirty_blocks_succeeds() {
    let Some(t) = common::setup(mqfs::Mode::Mq, BLOCKS, 2) else {
        return;
    };
    let TestFs { ex, machine, fs, .. } = t;
    ex.block_on(async move {
        fs.create_path(C, "/f").await.unwrap();
        let data = bytes(300 * 4096, 1);
        fs.write_path(C, "/f", 0, &data).await.unwrap();
        fs.fsync_path(C, "/f").await.unwrap();
        let fs = remount(fs, &machine, C).await.unwrap();
        assert_eq!(fs.read_path(C, "/f").await.unwrap(), data);
    })
    .unwrap();
}
