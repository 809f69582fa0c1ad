//! The mount as people use it, under heavier programs, in every journaling
//! mode: fio with 8 concurrent jobs each writing 64 MiB with an fsync after
//! every write (files used to stop at about 1 MiB, EFBIG after 255
//! extents, before the extent tree); an fsx-style random exerciser of one
//! sparse file checked against an in-memory shadow, across a remount; and
//! `make` rebuilding exactly what an edit made stale after a remount; and
//! a flipped byte in a live journal block after a SIGKILL, which loses no
//! earlier fsync and which fsck reports. After each, the image passes fsck
//! (or, with the damaged journal, reports just that damage).
//! fsx runs 100,000 operations per mode (about a minute for the three
//! modes on two cores).

mod common;

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use common::{fsck_ok, mkfs, ok, output, require, Mount, TempDir};

// ---------------------------------------------------------------- fio

/// fio: `jobs` concurrent jobs, each writing `mib` MiB sequentially in
/// `bs_kib` KiB writes with an fsync after each, then reading it back and
/// checking every block's crc32c. Every file has its full length, and
/// the image passes fsck after the unmount.
fn fio_fsync_jobs(mode: &str, jobs: u64, mib: u64, bs_kib: u64) {
    require("fio");
    let t = TempDir::new(&format!("heavy-fio-{mode}-{jobs}x{mib}"));
    // Room for all the data plus metadata and journal.
    let size = format!("{}M", jobs * mib + jobs * mib / 2 + 64);
    let img = mkfs(&t, "img", &["--size", &size, "--mode", mode, "--queues", "2"]);
    let m = Mount::start(&img, &t.dir("mnt"), &[]);
    let out = ok(Command::new("fio")
        .args([
            "--name=big",
            "--rw=write",
            "--fsync=1",
            "--ioengine=psync",
            "--fallocate=none",
            "--verify=crc32c",
            "--do_verify=1",
            // No verify state files in the working directory.
            "--verify_state_save=0",
            "--group_reporting",
        ])
        .arg(format!("--bs={bs_kib}k"))
        .arg(format!("--size={mib}m"))
        .arg(format!("--numjobs={jobs}"))
        .arg(format!("--directory={}", m.dir.display())));
    // Every job issued every write, and the verify read found no bad block.
    let ios = jobs * (mib << 10) / bs_kib;
    assert!(out.contains(&format!("issued rwts: total={ios},{ios},")), "{out}");
    assert!(!out.contains("verify: bad"), "{out}");
    for j in 0..jobs {
        let len = std::fs::metadata(m.join(&format!("big.{j}.0"))).unwrap().len();
        assert_eq!(len, mib << 20, "job {j}'s file");
    }
    m.unmount();
    let report = fsck_ok(&img);
    assert!(report.contains("0 errors"), "{report}");
    // Beyond the data blocks (and the root directory's), every file holds
    // an extent-tree block, the test's premise (more extents than an inode
    // holds): the allocator's windows (docs/decisions.md M23) keep each
    // appender's file to a few dozen extents, up to 8 MiB each, but the
    // interleaved jobs' windows are not adjacent, so they do not merge.
    let blocks: u64 = report
        .split(" blocks")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no block count in {report}"));
    let data = jobs * (mib << 20) / 4096;
    assert!(
        blocks >= data + 1 + jobs,
        "{blocks} blocks for {data} data blocks: {report}"
    );
}

// ---------------------------------------------------------------- fsx

/// xorshift64*: a small deterministic generator (the run is reproducible
/// from its seed).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const PAGE: u64 = 4096;
/// The largest offset the exerciser touches: files grow sparse up to here.
const FAR: u64 = 1 << 30;
/// Most operations stay near the start of the file, where they overlap.
const NEAR: u64 = 8 << 20;

/// What the file must hold: its size and its non-zero pages (a hole or a
/// page not present reads as zeros).
#[derive(Default)]
struct Shadow {
    pages: BTreeMap<u64, Box<[u8; PAGE as usize]>>,
    size: u64,
}

impl Shadow {
    fn write(&mut self, off: u64, data: &[u8]) {
        let mut done = 0;
        while done < data.len() {
            let pos = off + done as u64;
            let in_page = (pos % PAGE) as usize;
            let n = (PAGE as usize - in_page).min(data.len() - done);
            let page = self
                .pages
                .entry(pos / PAGE)
                .or_insert_with(|| Box::new([0; PAGE as usize]));
            page[in_page..in_page + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        self.size = self.size.max(off + data.len() as u64);
    }

    /// Zeros `[off, end)` (clipped to the size), dropping whole pages.
    fn zero(&mut self, off: u64, end: u64) {
        let end = end.min(self.size);
        let mut pos = off;
        while pos < end {
            let idx = pos / PAGE;
            let in_page = (pos % PAGE) as usize;
            let n = ((PAGE - in_page as u64).min(end - pos)) as usize;
            if n == PAGE as usize {
                self.pages.remove(&idx);
            } else if let Some(p) = self.pages.get_mut(&idx) {
                p[in_page..in_page + n].fill(0);
            }
            pos += n as u64;
        }
    }

    fn truncate(&mut self, size: u64) {
        if size < self.size {
            self.zero(size, self.size);
            let first_gone = size.div_ceil(PAGE);
            self.pages.split_off(&first_gone);
        }
        self.size = size;
    }

    /// What a read of `len` bytes at `off` returns.
    fn read(&self, off: u64, len: u64) -> Vec<u8> {
        let end = (off + len).min(self.size);
        if off >= end {
            return Vec::new();
        }
        let mut out = vec![0u8; (end - off) as usize];
        for (&idx, page) in self.pages.range(off / PAGE..=(end - 1) / PAGE) {
            let (ps, pe) = (idx * PAGE, idx * PAGE + PAGE);
            let (s, e) = (ps.max(off), pe.min(end));
            out[(s - off) as usize..(e - off) as usize]
                .copy_from_slice(&page[(s - ps) as usize..(e - ps) as usize]);
        }
        out
    }
}

/// Reads up to `len` bytes at `off` (as many as the file has).
fn read_at(f: &File, off: u64, len: u64) -> Vec<u8> {
    let mut buf = vec![0u8; len as usize];
    let mut got = 0;
    while got < buf.len() {
        match f.read_at(&mut buf[got..], off + got as u64).unwrap() {
            0 => break,
            n => got += n,
        }
    }
    buf.truncate(got);
    buf
}

/// fallocate(1) (util-linux) on `path` with `flags` (the crate's code is
/// free of `unsafe`, so no direct fallocate(2) call here).
fn fallocate(path: &Path, flags: &[&str], off: u64, len: u64) {
    ok(Command::new("fallocate")
        .args(flags)
        .arg("-o")
        .arg(off.to_string())
        .arg("-l")
        .arg(len.to_string())
        .arg(path));
}

/// An offset: near the start mostly, anywhere up to `FAR` sometimes.
fn offset(rng: &mut Rng) -> u64 {
    if rng.below(10) == 0 {
        rng.below(FAR)
    } else {
        rng.below(NEAR)
    }
}

/// Checks that `f` reads as `sh` at `off..off+len`.
fn check_range(f: &File, sh: &Shadow, off: u64, len: u64, what: &dyn Fn() -> String) {
    let got = read_at(f, off, len);
    let want = sh.read(off, len);
    if got != want {
        let first = got
            .iter()
            .zip(&want)
            .position(|(a, b)| a != b)
            .unwrap_or(got.len().min(want.len()));
        panic!(
            "read of {len} at {off}: {} bytes, want {}; first difference at {}: {}",
            got.len(),
            want.len(),
            off + first as u64,
            what()
        );
    }
}

/// The whole file against the shadow: its size, every page the shadow
/// holds, and `samples` random ranges (holes included).
fn check_whole(f: &File, sh: &Shadow, rng: &mut Rng, samples: u64) {
    assert_eq!(f.metadata().unwrap().len(), sh.size, "file size");
    let what = || "whole-file check".to_string();
    for &idx in sh.pages.keys() {
        check_range(f, sh, idx * PAGE, PAGE, &what);
    }
    for _ in 0..samples {
        let off = rng.below(sh.size.max(1) + PAGE);
        check_range(f, sh, off, 1 + rng.below(64 << 10), &what);
    }
}

/// fsx: `ops` random operations on one file (writes at random offsets up
/// to 1 GiB, reads compared with the shadow, truncates up and down,
/// fallocate allocate / keep-size / punch-hole / zero-range), an fsync
/// every 10,000; then unmount, fsck, remount and compare the whole file.
fn fsx(mode: &str, ops: u64) {
    let t = TempDir::new(&format!("heavy-fsx-{mode}-{ops}"));
    let img = mkfs(&t, "img", &["--size", "1G", "--mode", mode, "--queues", "2"]);
    let mnt = t.dir("mnt");
    let mut rng = Rng(0x6a09_e667_f3bc_c908 ^ ops);
    let mut sh = Shadow::default();
    let mut log: Vec<String> = Vec::new();
    let mut counts = [0u64; 8];
    {
        let m = Mount::start(&img, &mnt, &[]);
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(m.join("fsx"))
            .unwrap();
        let path = m.join("fsx");
        for n in 0..ops {
            let kind = rng.below(100);
            let op = match kind {
                0..35 => {
                    let off = offset(&mut rng);
                    let len = 1 + rng.below(32 << 10);
                    let data: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                    f.write_all_at(&data, off).unwrap();
                    sh.write(off, &data);
                    counts[0] += 1;
                    format!("write {off} {len}")
                }
                35..65 => {
                    // Mostly inside the file; sometimes across or past its end.
                    let off = if rng.below(8) == 0 || sh.size == 0 {
                        offset(&mut rng)
                    } else {
                        rng.below(sh.size)
                    };
                    let len = 1 + rng.below(64 << 10);
                    let desc = format!("read {off} {len}");
                    let l = &log;
                    check_range(&f, &sh, off, len, &|| {
                        format!("op {n} ({desc}); last ops:\n{}", l.join("\n"))
                    });
                    counts[1] += 1;
                    desc
                }
                65..75 => {
                    let size = if rng.below(4) == 0 {
                        offset(&mut rng)
                    } else {
                        rng.below(NEAR)
                    };
                    f.set_len(size).unwrap();
                    sh.truncate(size);
                    counts[2] += 1;
                    format!("truncate {size}")
                }
                75..81 => {
                    let (off, len) = (offset(&mut rng), 1 + rng.below(256 << 10));
                    fallocate(&path, &["--punch-hole", "--keep-size"], off, len);
                    sh.zero(off, off + len);
                    counts[3] += 1;
                    format!("punch {off} {len}")
                }
                81..85 => {
                    let (off, len) = (offset(&mut rng), 1 + rng.below(256 << 10));
                    fallocate(&path, &["--keep-size"], off, len);
                    counts[4] += 1;
                    format!("falloc-keep-size {off} {len}")
                }
                85..88 => {
                    let (off, len) = (rng.below(NEAR), 1 + rng.below(256 << 10));
                    fallocate(&path, &[], off, len);
                    sh.size = sh.size.max(off + len);
                    counts[5] += 1;
                    format!("falloc {off} {len}")
                }
                88..91 => {
                    let (off, len) = (offset(&mut rng), 1 + rng.below(256 << 10));
                    fallocate(&path, &["--zero-range"], off, len);
                    sh.zero(off, off + len);
                    sh.size = sh.size.max(off + len);
                    counts[6] += 1;
                    format!("zero-range {off} {len}")
                }
                _ => {
                    // A read of a random whole page (the shadow's or a hole).
                    let off = rng.below(sh.size.max(1)) / PAGE * PAGE;
                    let desc = format!("read-page {off}");
                    let l = &log;
                    check_range(&f, &sh, off, PAGE, &|| {
                        format!("op {n} ({desc}); last ops:\n{}", l.join("\n"))
                    });
                    counts[7] += 1;
                    desc
                }
            };
            if log.len() == 20 {
                log.remove(0);
            }
            log.push(op);
            if (n + 1) % 10_000 == 0 {
                f.sync_all().unwrap();
            }
        }
        f.sync_all().unwrap();
        check_whole(&f, &sh, &mut rng, 200);
        drop(f);
        m.unmount();
    }
    eprintln!(
        "fsx {mode}: {ops} ops: writes {} reads {} truncates {} punches {} keep-size {} allocs {} zero-ranges {} page reads {}; size {}, {} pages",
        counts[0], counts[1], counts[2], counts[3], counts[4], counts[5], counts[6], counts[7], sh.size, sh.pages.len()
    );
    // Every kind of operation ran.
    assert!(counts.iter().all(|&c| c > 0), "{counts:?}");
    let report = fsck_ok(&img);
    assert!(report.contains("0 errors"), "{report}");
    let m = Mount::start(&img, &mnt, &[]);
    let f = File::open(m.join("fsx")).unwrap();
    check_whole(&f, &sh, &mut rng, 2000);
    drop(f);
    m.unmount();
    fsck_ok(&img);
}

// ---------------------------------------------------------------- make

fn mtime(p: &Path) -> SystemTime {
    std::fs::metadata(p).unwrap().modified().unwrap()
}

/// `make` in `dir`; returns its stdout (the commands it ran).
fn make(dir: &Path) -> String {
    ok(Command::new("make")
        .arg("--no-print-directory")
        .arg("-C")
        .arg(dir))
}

const MAKEFILE: &str = "\
CC ?= cc
all: prog
prog: main.o greet.o
\t$(CC) -o prog main.o greet.o
main.o: main.c greet.h
\t$(CC) -c main.c
greet.o: greet.c greet.h
\t$(CC) -c greet.c
";

/// A two-unit C program: build it, unmount, remount, edit one unit (newer
/// than its object), and make rebuilds exactly that object and the
/// program; a second make has nothing to do.
fn make_rebuilds_what_changed(mode: &str) {
    require("make");
    require("cc");
    let t = TempDir::new(&format!("heavy-make-{mode}"));
    let img = mkfs(&t, "img", &["--size", "64M", "--mode", mode, "--queues", "2"]);
    let mnt = t.dir("mnt");
    let src = |m: &Mount| -> PathBuf { m.join("proj") };
    {
        let m = Mount::start(&img, &mnt, &[]);
        let p = src(&m);
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("Makefile"), MAKEFILE).unwrap();
        std::fs::write(p.join("greet.h"), "const char *greeting(void);\n").unwrap();
        std::fs::write(
            p.join("main.c"),
            "#include <stdio.h>\n#include \"greet.h\"\nint main(void) { puts(greeting()); return 0; }\n",
        )
        .unwrap();
        std::fs::write(
            p.join("greet.c"),
            "#include \"greet.h\"\nconst char *greeting(void) { return \"hello\"; }\n",
        )
        .unwrap();
        let out = make(&p);
        assert_eq!(
            out, "cc -c main.c\ncc -c greet.c\ncc -o prog main.o greet.o\n",
            "{out}"
        );
        assert_eq!(ok(&mut Command::new(p.join("prog"))), "hello\n");
        m.unmount();
    }
    fsck_ok(&img);
    let m = Mount::start(&img, &mnt, &[]);
    let p = src(&m);
    // Nothing changed: the remount kept every time make compares.
    let out = make(&p);
    assert!(out.contains("Nothing to be done for 'all'"), "{out}");
    let built = mtime(&p.join("prog"));
    std::fs::write(
        p.join("greet.c"),
        "#include \"greet.h\"\nconst char *greeting(void) { return \"edited\"; }\n",
    )
    .unwrap();
    assert!(
        mtime(&p.join("greet.c")) > built,
        "the edited source is newer than the program"
    );
    let out = make(&p);
    assert_eq!(out, "cc -c greet.c\ncc -o prog main.o greet.o\n", "{out}");
    assert_eq!(ok(&mut Command::new(p.join("prog"))), "edited\n");
    let out = make(&p);
    assert!(out.contains("Nothing to be done for 'all'"), "{out}");
    // make's dry run agrees: nothing is stale.
    let o = output(Command::new("make").arg("-q").arg("-C").arg(&p));
    assert!(o.status.success(), "make -q: {o:?}");
    m.unmount();
    fsck_ok(&img);
}

// ---------------------------------------------------------------- journal

/// The journal areas of `img` as block ranges, from `mqfs stat`.
fn journal_areas(img: &Path) -> Vec<(u64, u64)> {
    let out = ok(common::mqfs().arg("stat").arg(img));
    let areas: Vec<(u64, u64)> = out
        .lines()
        .filter_map(|l| {
            let r = l.trim().strip_prefix("area ")?.split_once(": blocks ")?.1;
            let (a, b) = r.split(',').next()?.split_once("..")?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .collect();
    assert!(!areas.is_empty(), "no journal areas in {out}");
    areas
}

/// The blocks of the journal areas as they are on the media file now.
fn journal_blocks(img: &Path, areas: &[(u64, u64)]) -> BTreeMap<u64, Vec<u8>> {
    let f = File::open(img).unwrap();
    let mut out = BTreeMap::new();
    for &(a, b) in areas {
        for blk in a..b {
            out.insert(blk, read_at(&f, blk * PAGE, PAGE));
        }
    }
    out
}

fn file_content(i: usize) -> Vec<u8> {
    (0..6000u64)
        .map(|x| (x.wrapping_mul(7) ^ i as u64) as u8)
        .collect()
}

/// Three files, each written and fsynced (a transaction each) through the
/// mount, which is then SIGKILLed with the journal live. One byte is
/// flipped in a block the last fsync wrote to the journal (found by
/// comparing the journal areas before and after it). The mount logs the
/// dropped transaction and mounts with a warning (it used to refuse the
/// image for good), the files of the earlier transactions read back whole,
/// and `mqfs fsck` reports the damage before and after the remount.
fn damaged_journal_block(mode: &str) {
    let t = TempDir::new(&format!("heavy-journal-{mode}"));
    let img = mkfs(&t, "img", &["--size", "32M", "--mode", mode, "--queues", "2"]);
    let areas = journal_areas(&img);
    let mnt = t.dir("mnt");
    let m = Mount::start(&img, &mnt, &[]);
    let sync_file = |i: usize| {
        let mut f = File::create(m.join(&format!("f{i}"))).unwrap();
        std::io::Write::write_all(&mut f, &file_content(i)).unwrap();
        f.sync_all().unwrap();
    };
    sync_file(0);
    sync_file(1);
    let before = journal_blocks(&img, &areas);
    sync_file(2);
    let after = journal_blocks(&img, &areas);
    m.kill();
    // The newest transaction's blocks: changed by the last fsync, not an
    // area's own superblock (its first block).
    let starts: Vec<u64> = areas.iter().map(|a| a.0).collect();
    let changed: Vec<u64> = after
        .iter()
        .filter(|(b, d)| !starts.contains(b) && before.get(b) != Some(d))
        .map(|(b, _)| *b)
        .collect();
    assert!(!changed.is_empty(), "the last fsync wrote nothing to the journal");
    let victim = changed[0];
    let media = OpenOptions::new().read(true).write(true).open(&img).unwrap();
    let mut byte = [0u8; 1];
    media.read_exact_at(&mut byte, victim * PAGE + 1000).unwrap();
    media
        .write_all_at(&[byte[0] ^ 0x10], victim * PAGE + 1000)
        .unwrap();
    drop(media);
    let damage = "recovery dropped 1 damaged journal transaction";
    let report = |when: &str| {
        let o = output(common::mqfs().arg("fsck").arg(&img));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(
            !o.status.success(),
            "{when}: fsck passes a damaged journal: {text}"
        );
        assert!(text.contains(damage), "{when}: {text}");
    };
    // fsck recovers in memory (the image unchanged) and finds the damage.
    report("before the remount");
    // The mount comes up, saying what recovery dropped.
    let m = Mount::start(&img, &mnt, &[]);
    assert!(m.stderr().contains("not replayed"), "{}", m.stderr());
    assert!(m.stderr().contains("mounting with errors"), "{}", m.stderr());
    for i in 0..2 {
        let got = std::fs::read(m.join(&format!("f{i}"))).unwrap_or_else(|e| panic!("f{i}: {e}"));
        assert!(got == file_content(i), "f{i} differs");
    }
    m.unmount();
    // The damage is recorded: fsck still reports it.
    report("after the remount");
}

macro_rules! in_every_mode {
    ($($(#[$attr:meta])* $name:ident: $f:ident($($arg:expr),*);)*) => {$(
        #[test]
        $(#[$attr])*
        fn $name() {
            $f($($arg),*);
        }
    )*};
}

in_every_mode! {
    fio_8_jobs_64_mib_with_fsync_classic: fio_fsync_jobs("classic", 8, 64, 64);
    fio_8_jobs_64_mib_with_fsync_horae: fio_fsync_jobs("horae", 8, 64, 64);
    fio_8_jobs_64_mib_with_fsync_mq: fio_fsync_jobs("mq", 8, 64, 64);
    fsx_100k_ops_survive_remount_classic: fsx("classic", 100_000);
    fsx_100k_ops_survive_remount_horae: fsx("horae", 100_000);
    fsx_100k_ops_survive_remount_mq: fsx("mq", 100_000);
    make_rebuilds_what_changed_after_remount_classic: make_rebuilds_what_changed("classic");
    make_rebuilds_what_changed_after_remount_horae: make_rebuilds_what_changed("horae");
    make_rebuilds_what_changed_after_remount_mq: make_rebuilds_what_changed("mq");
    journal_block_damage_keeps_earlier_fsyncs_classic: damaged_journal_block("classic");
    journal_block_damage_keeps_earlier_fsyncs_horae: damaged_journal_block("horae");
    journal_block_damage_keeps_earlier_fsyncs_mq: damaged_journal_block("mq");
}
