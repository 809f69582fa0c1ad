//! Built-in workloads: the four of ccNVMe Table 4, written from their
//! sources (see `docs/crash-workloads.md`), ACE-style bounded spaces of one
//! and two core operations, seeded random multi-threaded workloads, and the
//! cross-queue workload that exposes the paper-literal recovery rule.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::error::Error;
use crate::workload::{parse, Op, Workload};

fn s(p: &str) -> String {
    p.to_string()
}

/// CrashMonkey `create_delete` (version A: 10 files of 1 KiB): create and
/// fsync each file, write and fsync it; then remove each and sync.
pub fn create_delete() -> Workload {
    let mut ops = Vec::new();
    for i in 0..10 {
        let f = format!("/test_dir/test_file{i}");
        ops.push(Op::Create(f.clone()));
        ops.push(Op::Fsync(f.clone()));
        ops.push(Op::Write(f.clone(), 0, 1024, i as u8));
        ops.push(Op::Fsync(f));
    }
    for i in 0..10 {
        ops.push(Op::Unlink(format!("/test_dir/test_file{i}")));
        ops.push(Op::Sync);
    }
    Workload::single(
        "create_delete",
        vec![Op::Mkdir(s("/test_dir")), Op::Fsync(s("/test_dir")), Op::Sync],
        ops,
    )
}

/// xfstests generic/035 as CrashMonkey ports it (`generic_035_1` then
/// `_2`): rename over an existing file, fsync it; rename over an empty
/// directory, fsync it.
pub fn generic_035() -> Workload {
    Workload::single(
        "generic_035",
        vec![
            Op::Mkdir(s("/test_dir_a")),
            Op::Create(s("/test_dir_a/file1")),
            Op::Write(s("/test_dir_a/file1"), 0, 4096, 1),
            Op::Create(s("/test_dir_a/file2")),
            Op::Mkdir(s("/test_dir_b")),
            Op::Mkdir(s("/test_dir_b/test_dir_b")),
            Op::Mkdir(s("/test_dir_b/test_dir_c")),
            Op::Sync,
        ],
        vec![
            Op::Rename(s("/test_dir_a/file1"), s("/test_dir_a/file2")),
            Op::Fsync(s("/test_dir_a/file2")),
            Op::Rename(s("/test_dir_b/test_dir_b"), s("/test_dir_b/test_dir_c")),
            Op::Fsync(s("/test_dir_b/test_dir_c")),
        ],
    )
}

/// xfstests generic/106 (CrashMonkey's newer port): link, sync, unlink the
/// link, fsync the file.
pub fn generic_106() -> Workload {
    Workload::single(
        "generic_106",
        vec![
            Op::Mkdir(s("/test_dir_a")),
            Op::Create(s("/test_dir_a/foo")),
            Op::Sync,
        ],
        vec![
            Op::Link(s("/test_dir_a/foo"), s("/test_dir_a/foo_link_")),
            Op::Sync,
            Op::Unlink(s("/test_dir_a/foo_link_")),
            Op::Fsync(s("/test_dir_a/foo")),
        ],
    )
}

/// xfstests generic/321, sub-tests 1 and 2: fsync a new directory; rename a
/// file into a new directory, fsync the directory then the file.
pub fn generic_321() -> Workload {
    Workload::single(
        "generic_321",
        vec![],
        vec![
            Op::Mkdir(s("/bar")),
            Op::Fsync(s("/bar")),
            Op::Create(s("/foo")),
            Op::Mkdir(s("/baz")),
            Op::Fsync(s("/foo")),
            Op::Rename(s("/foo"), s("/baz/foo")),
            Op::Fsync(s("/baz")),
            Op::Fsync(s("/baz/foo")),
        ],
    )
}

/// The four Table 4 workloads.
pub fn table4() -> Vec<Workload> {
    vec![create_delete(), generic_035(), generic_106(), generic_321()]
}

/// The core operations of the ACE space, with their arguments over the
/// file set {foo, A/foo, bar, A/bar} and directories {A, B}.
fn ace_ops() -> Vec<Op> {
    let files = ["/foo", "/A/foo"];
    let seconds = ["/bar", "/A/bar"];
    let mut v = Vec::new();
    // The setup made the first names: a create acts on the second ones
    // (a create of an existing name is refused, EEXIST, and tests nothing).
    for f in seconds {
        v.push(Op::Create(s(f)));
    }
    v.push(Op::Mkdir(s("/B")));
    for f in files {
        // append, overlap at an unaligned start, overlap extending the end
        v.push(Op::Write(s(f), 32768, 32768, 2));
        v.push(Op::Write(s(f), 0, 5000, 3));
        v.push(Op::Write(s(f), 30768, 5000, 4));
    }
    for f in files {
        for t in seconds {
            v.push(Op::Link(s(f), s(t)));
        }
    }
    for f in files {
        v.push(Op::Unlink(s(f)));
    }
    for f in files {
        for t in seconds {
            v.push(Op::Rename(s(f), s(t)));
        }
    }
    v.push(Op::Rename(s("/A"), s("/B")));
    for f in files {
        v.push(Op::Truncate(s(f), 0));
        v.push(Op::Truncate(s(f), 2500));
    }
    v
}

/// Persistence after an ACE operation on `target`.
fn persist(target: &str, which: usize) -> Option<Op> {
    let parent = match target.rfind('/') {
        Some(0) | None => "/".to_string(),
        Some(i) => target[..i].to_string(),
    };
    match which {
        0 => Some(Op::Fsync(target.to_string())),
        1 => Some(Op::Fdatasync(target.to_string())),
        2 => {
            if parent == "/" {
                Some(Op::Sync)
            } else {
                Some(Op::Fsync(parent))
            }
        }
        3 => Some(Op::Sync),
        _ => None,
    }
}

/// The path an ACE operation leaves changed (a link's or rename's target).
fn target(op: &Op) -> &str {
    op.changed_paths().last().copied().unwrap_or("/")
}

/// Setup that every ACE workload starts from: the file set exists, so
/// every operation has something to act on (ACE inserts these
/// dependencies per workload; a common setup gives the same coverage).
fn ace_setup() -> Vec<Op> {
    vec![
        Op::Mkdir(s("/A")),
        Op::Create(s("/foo")),
        Op::Write(s("/foo"), 0, 32768, 1),
        Op::Create(s("/A/foo")),
        Op::Write(s("/A/foo"), 0, 32768, 1),
        Op::Sync,
    ]
}

/// ACE's seq-1 space: every core operation, followed by each persistence
/// choice (fsync of the target, fdatasync, fsync of the parent, sync).
pub fn ace_seq1() -> Vec<Workload> {
    let mut out = Vec::new();
    for (i, op) in ace_ops().into_iter().enumerate() {
        for p in 0..4 {
            let Some(sync) = persist(target(&op), p) else {
                continue;
            };
            if matches!(op, Op::Unlink(_)) && matches!(sync, Op::Fsync(_) | Op::Fdatasync(_)) && p < 2 {
                continue; // the target is gone: nothing to fsync
            }
            out.push(Workload::single(
                &format!("ace1-{i:02}-{p}"),
                ace_setup(),
                vec![op.clone(), sync],
            ));
        }
    }
    out
}

/// ACE's seq-2 space: every pair of core operations; the first followed by
/// nothing or an fsync of its target, the second by an fsync of its target
/// or a sync (ACE: the last operation always persists).
pub fn ace_seq2() -> Vec<Workload> {
    let ops = ace_ops();
    let mut out = Vec::new();
    for (i, a) in ops.iter().enumerate() {
        for (j, b) in ops.iter().enumerate() {
            for pa in [0usize, 4] {
                for pb in [0usize, 3] {
                    let mut v = vec![a.clone()];
                    if let Some(x) = persist(target(a), pa) {
                        if !matches!(a, Op::Unlink(_)) {
                            v.push(x);
                        }
                    }
                    v.push(b.clone());
                    let last = if matches!(b, Op::Unlink(_)) {
                        Some(Op::Sync)
                    } else {
                        persist(target(b), pb)
                    };
                    if let Some(x) = last {
                        v.push(x);
                    }
                    out.push(Workload::single(
                        &format!("ace2-{i:02}-{j:02}-{pa}{pb}"),
                        ace_setup(),
                        v,
                    ));
                }
            }
        }
    }
    out
}

/// A random multi-threaded workload: `threads` threads, each creating,
/// writing, renaming and syncing files in its own directory and in a
/// shared one.
pub fn random(seed: u64, threads: usize, ops_per_thread: usize) -> Workload {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut setup = vec![Op::Mkdir(s("/shared"))];
    let mut per = Vec::new();
    for t in 0..threads {
        setup.push(Op::Mkdir(format!("/t{t}")));
        let mut ops = Vec::new();
        let mut files: Vec<String> = Vec::new();
        for n in 0..ops_per_thread {
            let dir = if rng.gen_bool(0.3) {
                "/shared".to_string()
            } else {
                format!("/t{t}")
            };
            match rng.gen_range(0..6) {
                0 | 1 if files.len() < 6 => {
                    let f = format!("{dir}/f{t}_{n}");
                    ops.push(Op::Create(f.clone()));
                    files.push(f);
                }
                2 if !files.is_empty() => {
                    let f = files[rng.gen_range(0..files.len())].clone();
                    let off = rng.gen_range(0..4u64) * 4096;
                    ops.push(Op::Write(f, off, rng.gen_range(1..3u64) * 4096, rng.gen()));
                }
                3 if !files.is_empty() => {
                    let i = rng.gen_range(0..files.len());
                    let to = format!("{dir}/r{t}_{n}");
                    ops.push(Op::Rename(files[i].clone(), to.clone()));
                    files[i] = to;
                }
                4 if files.len() > 1 => {
                    let f = files.remove(rng.gen_range(0..files.len()));
                    ops.push(Op::Unlink(f));
                }
                _ if !files.is_empty() => {
                    let f = files[rng.gen_range(0..files.len())].clone();
                    ops.push(if rng.gen_bool(0.5) {
                        Op::Fsync(f)
                    } else {
                        Op::Fatomic(f)
                    });
                }
                _ => ops.push(Op::Sync),
            }
        }
        if let Some(f) = files.last() {
            ops.push(Op::Fsync(f.clone()));
        }
        per.push(ops);
    }
    setup.push(Op::Sync);
    Workload {
        name: format!("random-{seed}-{threads}x{ops_per_thread}"),
        setup,
        threads: per,
        expect: Vec::new(),
        lines: Vec::new(),
    }
}

/// The cross-queue anomaly of `docs/decisions.md` M9: thread 0 makes directory A
/// and a file in it with 256 KiB of data, and calls fatomic on the file
/// (one long transaction that also holds A's entry in /root); thread 1
/// waits for A/B, then until that transaction is under way, creates A/C and fsyncs it
/// (a short transaction on its own queue that completes first). Under the
/// paper's literal rule a crash in between discards the first and replays
/// the second: C's directory is then not in its parent and the fsync's
/// promise is broken. The global-prefix rule keeps it.
pub fn m9_cross_queue() -> Workload {
    Workload {
        name: "m9_cross_queue".into(),
        setup: vec![Op::Mkdir(s("/root")), Op::Sync],
        threads: vec![
            vec![
                Op::Mkdir(s("/root/A")),
                Op::Create(s("/root/A/B")),
                Op::Write(s("/root/A/B"), 0, 256 << 10, 9),
                Op::Fatomic(s("/root/A/B")),
            ],
            vec![
                Op::WaitFor(s("/root/A/B")),
                Op::Sleep(M9_DELAY_US),
                Op::Create(s("/root/A/C")),
                Op::Fsync(s("/root/A/C")),
            ],
        ],
        expect: Vec::new(),
        lines: Vec::new(),
    }
}

/// How long thread 1 of [`m9_cross_queue`] waits once A/B exists: past
/// thread 0's 256 KiB page-cache write, the preparation of its 64 pages
/// (0.8 us each) and its fatomic snapshot, well
/// before that 64-block transaction completes.
const M9_DELAY_US: u64 = 100;

/// Two transactions in flight on one queue, the first long: a 1 MiB
/// fatomic, then a one-block fatomic that completes first. In-order
/// completion keeps the first unfinished until all of its commands are
/// done; without it, P-SQ-head passes the first while its data is still
/// being written, and recovery replays it half-written.
pub fn canary_out_of_order() -> Workload {
    Workload::single(
        "canary_out_of_order",
        vec![Op::Create(s("/big")), Op::Create(s("/small"))],
        vec![
            Op::Write(s("/big"), 0, 1 << 20, 3),
            Op::Fatomic(s("/big")),
            Op::Write(s("/small"), 0, 4096, 5),
            Op::Fatomic(s("/small")),
            Op::Sleep(2000),
        ],
    )
}

/// A journaled directory block freed and reused at once as file data (the
/// setup fills the disk but for a hole, so the allocator wraps into the
/// freed block). Without revocation, recovery replays the stale directory
/// block over the file's fsynced data.
pub fn canary_block_reuse() -> Workload {
    Workload::single(
        "canary_block_reuse",
        vec![
            Op::Mkdir(s("/d")),
            Op::Create(s("/hole")),
            Op::Write(s("/hole"), 0, 10 * 4096, 1),
            Op::Create(s("/fill")),
            Op::Fill(s("/fill")),
            Op::Unlink(s("/hole")),
            Op::Sync,
        ],
        vec![
            Op::Mkdir(s("/d/sub")),
            Op::Create(s("/d/sub/y")),
            Op::Fsync(s("/d/sub")),
            Op::Unlink(s("/d/sub/y")),
            Op::Rmdir(s("/d/sub")),
            Op::Fsync(s("/d")),
            // Let the freeing's durability be noted first: a block reused
            // before that is journaled anyway (see mqfs's note_reused).
            Op::Sleep(50),
            Op::Create(s("/f")),
            Op::Write(s("/f"), 0, 10 * 4096, 7),
            Op::Fsync(s("/f")),
        ],
    )
}

/// A transaction larger than a persistent submission queue (300 blocks
/// against the default 256 slots): the journal must split it over several
/// descriptors and the driver must not wrap a P-SQ over its own
/// uncommitted entries. A small synced file follows, so a crash in the
/// big one's tail meets a later promise too.
pub fn stress_big_tx() -> Workload {
    Workload::single(
        "stress_big_tx",
        vec![Op::Create(s("/big")), Op::Create(s("/small"))],
        vec![
            Op::Write(s("/big"), 0, 300 * 4096, 11),
            Op::Fsync(s("/big")),
            Op::Write(s("/small"), 0, 4096, 12),
            Op::Fsync(s("/small")),
        ],
    )
}

/// Many scattered overwrites, then one fsync: on a drive with a volatile
/// cache every overwritten block is pending until the fsync's Flush, in
/// any combination, whatever order the drive destaged them in.
pub fn stress_scattered() -> Workload {
    let blocks = 64u64;
    let mut run = Vec::new();
    // A fixed stride coprime with the file's size visits its blocks out of
    // order.
    for i in 0..24u64 {
        let b = (i * 37) % blocks;
        run.push(Op::Write(s("/f"), b * 4096, 4096, 100 + i as u8));
    }
    run.push(Op::Fsync(s("/f")));
    Workload::single(
        "stress_scattered",
        vec![Op::Create(s("/f")), Op::Write(s("/f"), 0, blocks * 4096, 1)],
        run,
    )
}

/// HoRAE's ordering primitives (Table 1: `fbarrier`, `fdatabarrier`): a
/// file's data and metadata ordered by fbarrier, another file's data by
/// fdatabarrier, a new file made and barriered, then a third file fsynced:
/// in the `horae` mode that fsync makes the three barriers durable (their
/// promises start at its return); a last fbarrier that no sync follows
/// promises nothing durable. Elsewhere the barriers are fsync and
/// fdatasync.
pub fn barriers() -> Workload {
    Workload::single(
        "barriers",
        vec![Op::Create(s("/a")), Op::Create(s("/b")), Op::Create(s("/c"))],
        vec![
            Op::Write(s("/a"), 0, 2 * 4096, 3),
            Op::Fbarrier(s("/a")),
            Op::Write(s("/b"), 0, 4096, 4),
            Op::Fdatabarrier(s("/b")),
            Op::Create(s("/d")),
            Op::Write(s("/d"), 0, 4096, 5),
            Op::Fbarrier(s("/d")),
            Op::Write(s("/c"), 0, 4096, 6),
            Op::Fsync(s("/c")),
            Op::Write(s("/a"), 2 * 4096, 4096, 7),
            Op::Fbarrier(s("/a")),
        ],
    )
}

/// The stress workloads: what the simulator's timing once hid.
pub fn stress() -> Vec<Workload> {
    vec![stress_big_tx(), stress_scattered()]
}

/// O_DIRECT writes: overwrites of durable blocks made durable by
/// fdatasync (no transaction: only the FLUSH fsync owes the data written
/// outside a sync makes them durable), an extending one made durable by
/// fsync, an unaligned one refused (EINVAL, as Linux), and a directory
/// fsync of the root.
pub fn direct_io() -> Workload {
    Workload::single(
        "direct_io",
        vec![Op::Create(s("/d")), Op::Write(s("/d"), 0, 8192, 1)],
        vec![
            Op::Dwrite(s("/d"), 0, 4096, 2),
            Op::Fdatasync(s("/d")),
            Op::Dwrite(s("/d"), 4096, 4096, 3),
            Op::Dwrite(s("/d"), 12288, 4096, 4),
            Op::Fsync(s("/d")),
            Op::Dwrite(s("/d"), 1, 4096, 5),
            Op::Create(s("/n")),
            Op::Fsync(s("/")),
        ],
    )
}

/// sync_file_range: buffered overwrites written home by it (no FLUSH, no
/// promise), then fdatasync, which finds nothing dirty and must still
/// flush what it wrote.
pub fn sfr_writeback() -> Workload {
    Workload::single(
        "sfr_writeback",
        vec![Op::Create(s("/s")), Op::Write(s("/s"), 0, 16384, 1)],
        vec![
            Op::Write(s("/s"), 0, 8192, 2),
            Op::Sfr(s("/s"), 0, 8192),
            Op::Write(s("/s"), 8192, 4096, 3),
            Op::Sfr(s("/s"), 0, 0),
            Op::Fdatasync(s("/s")),
        ],
    )
}

/// Stores through a shared mapping and msync(MS_SYNC): one store past the
/// end of the file is refused (SIGBUS in Linux), the others are made
/// durable as fdatasync makes them.
pub fn mmap_msync() -> Workload {
    Workload::single(
        "mmap_msync",
        vec![Op::Create(s("/m")), Op::Write(s("/m"), 0, 8192, 1)],
        vec![
            Op::Mwrite(s("/m"), 100, 200, 2),
            Op::Msync(s("/m"), 0, 4096),
            Op::Mwrite(s("/m"), 8000, 400, 3),
            Op::Mwrite(s("/m"), 4096, 4096, 4),
            Op::Msync(s("/m"), 4096, 4096),
        ],
    )
}

/// File descriptors: writes and syncs through them, after a rename and
/// after the last unlink (the file lives on, an orphan, until its last
/// close; fsync through it then promises nothing visible), fstat checked
/// against the model, and a file still open and nameless when the run
/// ends, made durable as an orphan by sync: recovery must free it.
pub fn fd_unlinked() -> Workload {
    Workload::single(
        "fd_unlinked",
        vec![
            Op::Create(s("/a")),
            Op::Write(s("/a"), 0, 8192, 1),
            Op::Create(s("/b")),
        ],
        vec![
            Op::Open(1, s("/a")),
            Op::Open(2, s("/b")),
            Op::Fdwrite(2, 0, 4096, 2),
            Op::Fdfsync(2),
            Op::Unlink(s("/a")),
            Op::Fdwrite(1, 0, 4096, 3),
            Op::Fdfsync(1),
            Op::Fstat(1),
            Op::Fstat(2),
            Op::Close(1),
            Op::Rename(s("/b"), s("/c")),
            Op::Fdwrite(2, 4096, 100, 4),
            Op::Fdfdatasync(2),
            Op::Unlink(s("/c")),
            Op::Sync,
        ],
    )
}

/// The workloads of the I/O paths besides write and fsync: O_DIRECT,
/// sync_file_range, mmap and msync, file descriptors.
pub fn io_paths() -> Vec<Workload> {
    vec![
        direct_io(),
        sfr_writeback(),
        mmap_msync(),
        fd_unlinked(),
        fallocate_modes(),
    ]
}

/// fallocate in each mode (fallocate(2)), each change made durable by an
/// fsync or fdatasync, and a write into a preallocated (unwritten) range:
/// the zeros and sizes each mode leaves must survive a crash as promised.
pub fn fallocate_modes() -> Workload {
    use crate::workload::Falloc;
    let f = || s("/f");
    Workload::single(
        "fallocate_modes",
        vec![Op::Create(f()), Op::Write(f(), 0, 16384, 1)],
        vec![
            Op::Fallocate(f(), Falloc::PunchHole, 1000, 6000),
            Op::Fsync(f()),
            Op::Fallocate(f(), Falloc::Alloc, 16384, 8192),
            Op::Fdatasync(f()),
            Op::Fallocate(f(), Falloc::KeepSize, 24576, 8192),
            Op::Fallocate(f(), Falloc::ZeroRange, 2000, 30000),
            Op::Write(f(), 26000, 3000, 2),
            Op::Fsync(f()),
            Op::Fallocate(f(), Falloc::ZeroRangeKeepSize, 20000, 20000),
            Op::Fdatasync(f()),
        ],
    )
}

/// Extended attributes (setxattr(2), removexattr(2)) of a file and a
/// directory: a set before and after an fsync, a replace, a create, a
/// removal, each refusal Linux gives (EEXIST for `create` of an existing
/// name, ENODATA for a removal of an absent one, ENOSPC when the set
/// outgrows its block), a value that fills most of the block (in ext4 too
/// large for the in-inode area, so in the external EA block; in MQFS every
/// attribute is there), a hard link sharing them, an fdatasync (which
/// promises none of them) and a directory's attributes made durable by
/// its fsync, then a sync. Every promise about them must hold at every
/// crash point: after the fsync the set as synced; in between, the sets
/// the node had between operations, each change all or nothing.
pub fn xattrs() -> Workload {
    use crate::workload::XattrHow::{Any, Create, Replace};
    let (f, d) = (|| s("/f"), || s("/d"));
    let set = |p: String, n: &str, len, seed, how| Op::Setxattr(p, s(n), len, seed, how);
    Workload::single(
        "xattrs",
        vec![
            Op::Create(f()),
            Op::Write(f(), 0, 4096, 1),
            Op::Mkdir(d()),
            set(f(), "user.old", 20, 1, Any),
        ],
        vec![
            set(f(), "user.a", 100, 2, Any),
            Op::Fsync(f()),
            set(f(), "user.a", 50, 3, Replace),
            set(f(), "user.b", 10, 4, Create),
            set(f(), "user.b", 10, 5, Create),
            Op::Removexattr(f(), s("user.old")),
            Op::Removexattr(f(), s("user.nope")),
            Op::Fdatasync(f()),
            set(d(), "user.dir", 30, 6, Any),
            Op::Fsync(d()),
            set(f(), "user.big", 3500, 7, Any),
            set(f(), "user.huge", 2000, 8, Any),
            Op::Fsync(f()),
            Op::Link(f(), s("/d/g")),
            set(s("/d/g"), "user.c", 5, 9, Any),
            Op::Fsync(s("/d/g")),
            Op::Removexattr(d(), s("user.dir")),
            Op::Removexattr(f(), s("user.big")),
            Op::Sync,
        ],
    )
}

/// Extent-tree splits across a crash (Linux `fs/ext4/extents.c`): setup
/// fills a file with one-block extents (every other block) until the
/// inode's root holds 8 full leaves (8 x 254 extents); then one appended
/// extent splits the last leaf and, the root being full, grows the tree to
/// depth 2 (its index entries move into a new index block); a write into a
/// gap splits a full leaf in the middle; a truncate empties leaves, whose
/// blocks are freed and the tree shrinks back to depth 1. Each is made
/// durable by an fsync: the tree blocks are journaled metadata.
pub fn extent_split() -> Workload {
    const ROOT_FULL: u64 = 8 * 254;
    let (f, b) = (|| s("/frag"), 4096u64);
    let mut setup = vec![Op::Create(f())];
    setup.extend((0..ROOT_FULL).map(|k| Op::Write(f(), 2 * k * b, b, 1)));
    Workload::single(
        "extent_split",
        setup,
        vec![
            Op::Write(f(), 2 * ROOT_FULL * b, b, 2),
            Op::Fsync(f()),
            Op::Write(f(), 201 * b, b, 3),
            Op::Fsync(f()),
            Op::Truncate(f(), 600 * b),
            Op::Fsync(f()),
        ],
    )
}

/// Directory index splits across a crash (Linux `fs/ext4/namei.c`,
/// `mqfs::htree`): names of 100 bytes, 37 to a block. Setup fills most of
/// `/d`'s one linear block; the workload's creates convert it to an
/// indexed directory (`make_indexed_dir`: root and two leaves), then
/// split leaves again and again, with fsyncs of new files, of a file
/// synced before the splits moved its entry, and of the directory,
/// unlinks and renames in between.
pub fn dir_index() -> Workload {
    let f = |i: usize| format!("/d/{i:03}{}", "n".repeat(97));
    let mut setup = vec![Op::Mkdir(s("/d"))];
    setup.extend((0..30).map(|i| Op::Create(f(i))));
    setup.push(Op::Sync);
    let mut ops = Vec::new();
    for i in 30..110 {
        ops.push(Op::Create(f(i)));
        if i % 9 == 0 {
            ops.push(Op::Fsync(f(i)));
        }
        if i == 60 {
            ops.push(Op::Fsync(f(3)));
        }
    }
    ops.push(Op::Unlink(f(5)));
    ops.push(Op::Rename(f(40), f(200)));
    ops.push(Op::Fsync(s("/d")));
    ops.push(Op::Fsync(f(31)));
    ops.push(Op::Rename(f(7), f(41)));
    ops.push(Op::Fsync(f(41)));
    Workload::single("dir_index", setup, ops)
}

/// The PM modes' canary (`crashfuzz::pm`): one thread, every operation
/// the file systems on persistent memory have, inodes and pages reused, a
/// file replaced by rename, fsyncs (SoupFS promises at fsync only) and
/// pauses for SoupFS's persister. Each PM fault switch is caught on it.
pub fn pm_canary() -> Workload {
    let ops = vec![
        Op::Mkdir(s("/d")),
        Op::Create(s("/d/a")),
        Op::Write(s("/d/a"), 0, 5000, 1),
        Op::Fsync(s("/d/a")),
        Op::Create(s("/b")),
        Op::Link(s("/d/a"), s("/c")),
        Op::Write(s("/b"), 100, 100, 2),
        Op::Sleep(1500),
        Op::Mkdir(s("/e")),
        // A file fsynced before moves to another directory after a sync:
        // the old name or the new one must hold it at every crash.
        Op::Sync,
        Op::Create(s("/d/tmp")),
        Op::Rename(s("/d/a"), s("/e/a2")),
        Op::Sleep(1500),
        Op::Rename(s("/e/a2"), s("/b")),
        Op::Unlink(s("/c")),
        Op::Truncate(s("/b"), 10),
        Op::Write(s("/b"), 4090, 20, 3),
        Op::Truncate(s("/b"), 9000),
        Op::Fsync(s("/b")),
        Op::Mkdir(s("/d/x")),
        Op::Mkdir(s("/h")),
        Op::Rename(s("/h"), s("/d/x")),
        Op::Rmdir(s("/d/x")),
        Op::Rename(s("/d"), s("/f")),
        Op::Unlink(s("/b")),
        Op::Create(s("/f/g")),
        Op::Write(s("/f/g"), 0, 64, 4),
        Op::Fsync(s("/f/g")),
        Op::Sleep(1500),
    ];
    Workload::single("pm_canary", Vec::new(), ops)
}

/// Every built-in workload by name: the Table 4 four, `ace1`, `ace2`,
/// `random`, `m9_cross_queue` (and `ace1-*` / `ace2-*` for one member).
pub fn by_name(name: &str) -> Option<Vec<Workload>> {
    match name {
        "table4" => Some(table4()),
        "ace1" => Some(ace_seq1()),
        "ace2" => Some(ace_seq2()),
        "random" => Some(vec![random(1, 3, 8)]),
        "m9_cross_queue" => Some(vec![m9_cross_queue()]),
        "canary_out_of_order" => Some(vec![canary_out_of_order()]),
        "canary_block_reuse" => Some(vec![canary_block_reuse()]),
        "stress" => Some(stress()),
        "stress_big_tx" => Some(vec![stress_big_tx()]),
        "stress_scattered" => Some(vec![stress_scattered()]),
        "barriers" => Some(vec![barriers()]),
        "io" => Some(io_paths()),
        "direct_io" => Some(vec![direct_io()]),
        "sfr_writeback" => Some(vec![sfr_writeback()]),
        "mmap_msync" => Some(vec![mmap_msync()]),
        "fd_unlinked" => Some(vec![fd_unlinked()]),
        "fallocate_modes" => Some(vec![fallocate_modes()]),
        "xattrs" => Some(vec![xattrs()]),
        "extent_split" => Some(vec![extent_split()]),
        "dir_index" => Some(vec![dir_index()]),
        "pm_canary" => Some(vec![pm_canary()]),
        n if n.starts_with("ace1-") => ace_seq1().into_iter().find(|w| w.name == n).map(|w| vec![w]),
        n if n.starts_with("ace2-") => ace_seq2().into_iter().find(|w| w.name == n).map(|w| vec![w]),
        n if n.starts_with("random-") => {
            let mut it = n["random-".len()..].split(['-', 'x']);
            let seed = it.next()?.parse().ok()?;
            let threads = it.next()?.parse().ok()?;
            let ops = it.next()?.parse().ok()?;
            Some(vec![random(seed, threads, ops)])
        }
        n => table4().into_iter().find(|w| w.name == n).map(|w| vec![w]),
    }
}

/// The workloads `name` stands for: a built-in name (see [`by_name`]) or
/// the path of a workload file (whose name is then its path, so that a
/// replay id finds it again).
pub fn resolve(name: &str) -> Result<Vec<Workload>, Error> {
    if let Some(w) = by_name(name) {
        return Ok(w);
    }
    let path = std::path::Path::new(name);
    if !path.is_file() {
        return Err(Error::UnknownWorkload(name.into()));
    }
    let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: name.into(),
        source,
    })?;
    let w = parse(name, &text).map_err(|source| Error::Parse {
        path: name.into(),
        source,
    })?;
    Ok(vec![w])
}

/// Names `crashfuzz list` shows.
pub fn names() -> Vec<String> {
    let mut v: Vec<String> = table4().into_iter().map(|w| w.name).collect();
    v.extend(
        [
            "ace1",
            "ace2",
            "random",
            "m9_cross_queue",
            "canary_out_of_order",
            "canary_block_reuse",
            "stress",
            "stress_big_tx",
            "stress_scattered",
            "barriers",
            "io",
            "direct_io",
            "sfr_writeback",
            "mmap_msync",
            "fd_unlinked",
            "fallocate_modes",
            "xattrs",
            "extent_split",
            "dir_index",
            "pm_canary",
            "table4",
        ]
        .map(String::from),
    );
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_big_transaction_is_larger_than_a_psq() {
        let slots = u64::from(ccnvme::DriverProfile::default().psq_slots);
        let blocks = stress_big_tx().threads[0]
            .iter()
            .find_map(|op| match op {
                Op::Write(_, _, len, _) => Some(len / 4096),
                _ => None,
            })
            .expect("a write");
        assert!(blocks > slots, "{blocks} blocks, {slots} slots");
    }

    #[test]
    fn extent_split_fills_the_root_with_full_leaves_in_setup() {
        // 8 leaves of 254 one-block extents: the first recorded append
        // splits the last leaf and grows the tree (mqfs's extent_tree).
        let w = &by_name("extent_split").expect("built in")[0];
        let writes = w.setup.iter().filter(|op| matches!(op, Op::Write(..))).count();
        assert_eq!(writes, 8 * mqfs::extent_tree::LEAF_ENTRIES);
    }

    #[test]
    fn spaces_have_the_expected_sizes() {
        assert_eq!(ace_ops().len(), 24);
        assert!(ace_seq1().len() > 80);
        assert_eq!(ace_seq2().len(), 24 * 24 * 4);
        assert_eq!(by_name("generic_106").unwrap()[0].name, "generic_106");
        assert_eq!(by_name("random-7-2x5").unwrap()[0].threads.len(), 2);
        assert!(by_name("nope").is_none());
    }
}
