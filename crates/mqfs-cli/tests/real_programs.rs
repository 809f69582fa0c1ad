//! Real programs on a mounted image, in every journaling mode: fio appends
//! with fsync from several jobs, sqlite3 transactions in WAL mode checked
//! after an unmount and a remount, and a tree copied in with `cp -a` and
//! compared with `diff -r`. After each, the image passes fsck.

mod common;

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use common::{fsck_ok, mkfs, ok, require, stat, Mount, TempDir};

fn image(dir: &TempDir, mode: &str) -> std::path::PathBuf {
    mkfs(dir, "img", &["--size", "96M", "--mode", mode, "--queues", "2"])
}

/// fio: 4 jobs, each appending 4 KiB writes with an fsync after each.
/// (256 KiB per job: interleaved appenders fragment files, and an MQFS
/// file holds at most 255 extents.)
fn fio_appends(mode: &str) {
    require("fio");
    let t = TempDir::new(&format!("fio-{mode}"));
    let img = image(&t, mode);
    let m = Mount::start(&img, &t.dir("mnt"), &[]);
    let out = ok(Command::new("fio")
        .args([
            "--name=append",
            "--rw=write",
            "--bs=4k",
            "--size=256k",
            "--fsync=1",
            "--numjobs=4",
            "--ioengine=psync",
            "--fallocate=none",
            "--group_reporting",
        ])
        .arg(format!("--directory={}", m.dir.display())));
    assert!(out.contains("issued rwts: total=0,256,"), "{out}");
    let stats = m.stats();
    assert!(stat(&stats, "block_io") >= 256, "{stats:?}");
    assert!(stat(&stats, "simulated_time_ns") > 0);
    for j in 0..4 {
        let len = std::fs::metadata(m.join(&format!("append.{j}.0"))).unwrap().len();
        assert_eq!(len, 256 << 10);
    }
    m.unmount();
    fsck_ok(&img);
}

/// sqlite3: a few thousand transactions in WAL mode; after unmount and
/// remount every row is there and the integrity check passes.
fn sqlite_wal(mode: &str) {
    require("sqlite3");
    let t = TempDir::new(&format!("sqlite-{mode}"));
    let img = image(&t, mode);
    let mnt = t.dir("mnt");
    const TX: usize = 2000;
    let mut script = String::from(
        "PRAGMA journal_mode=WAL;\nPRAGMA synchronous=FULL;\nCREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);\nCREATE INDEX tv ON t(v);\n",
    );
    for i in 0..TX {
        let _ = writeln!(
            script,
            "BEGIN; INSERT INTO t(v) VALUES (printf('%08d-%s', {i}, hex(randomblob(64)))); UPDATE t SET v = v || 'x' WHERE id = {}; COMMIT;",
            i / 2 + 1
        );
    }
    let sql = t.join("tx.sql");
    std::fs::write(&sql, script).unwrap();
    let db = |m: &Mount| m.join("t.db");
    {
        let m = Mount::start(&img, &mnt, &[]);
        let o = ok(Command::new("sqlite3")
            .arg(db(&m))
            .stdin(std::fs::File::open(&sql).unwrap()));
        assert!(o.starts_with("wal"), "{o}");
        m.unmount();
    }
    fsck_ok(&img);
    let m = Mount::start(&img, &mnt, &[]);
    let o = ok(Command::new("sqlite3").arg(db(&m)).arg(
        "PRAGMA integrity_check; SELECT count(*) FROM t; SELECT count(*) FROM t WHERE v LIKE '%x'; PRAGMA journal_mode;",
    ));
    assert_eq!(o, format!("ok\n{TX}\n{}\nwal\n", TX / 2), "{o}");
    m.unmount();
    fsck_ok(&img);
}

/// A modest tree: nested directories, files of many sizes (holes, partial
/// blocks, several extents), symlinks, a hard link, odd permissions.
fn make_tree(root: &Path) {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for d in 0..6 {
        let dir = root.join(format!("dir{d}/sub{}", d % 3));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..20 {
            let len = match f % 5 {
                0 => 0,
                1 => (next() % 100) as usize,
                2 => 4096,
                3 => (next() % 70_000) as usize,
                _ => 4096 * 9 + 17,
            };
            let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            std::fs::write(dir.join(format!("f{f}.bin")), data).unwrap();
        }
    }
    std::fs::create_dir_all(root.join("empty")).unwrap();
    std::os::unix::fs::symlink("dir0/sub0/f3.bin", root.join("link")).unwrap();
    std::os::unix::fs::symlink("../dir1", root.join("dir2/up")).unwrap();
    std::fs::hard_link(root.join("dir1/sub1/f2.bin"), root.join("hard")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(
        root.join("dir3/sub0/f4.bin"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    std::fs::set_permissions(root.join("dir4"), std::fs::Permissions::from_mode(0o700)).unwrap();
}

/// Every entry under `root`: path, type, mode, size, link target, mtime.
fn listing(root: &Path) -> String {
    ok(Command::new("find")
        .arg(root)
        .arg("-mindepth")
        .arg("1")
        .arg("-printf")
        .arg("%P %y %m %s %l %T@\n"))
    .lines()
    .map(|l| {
        // Directory sizes differ between file systems.
        let mut f: Vec<&str> = l.split(' ').collect();
        if f[1] == "d" {
            f[3] = "-";
        }
        f.join(" ")
    })
    .collect::<std::collections::BTreeSet<_>>()
    .into_iter()
    .collect::<Vec<_>>()
    .join("\n")
}

/// cp -a of a tree in, diff -r against the source, before and after a
/// remount; names, types, modes, sizes, link targets and times kept.
fn cp_a_tree(mode: &str) {
    require("cp");
    let t = TempDir::new(&format!("cp-{mode}"));
    let src = t.dir("src");
    make_tree(&src);
    let img = image(&t, mode);
    let mnt = t.dir("mnt");
    {
        let m = Mount::start(&img, &mnt, &[]);
        ok(Command::new("cp").arg("-a").arg(&src).arg(&m.dir));
        ok(Command::new("diff").arg("-r").arg(&src).arg(m.join("src")));
        assert_eq!(listing(&m.join("src")), listing(&src));
        m.unmount();
    }
    fsck_ok(&img);
    let m = Mount::start(&img, &mnt, &[]);
    ok(Command::new("diff").arg("-r").arg(&src).arg(m.join("src")));
    assert_eq!(listing(&m.join("src")), listing(&src));
    m.unmount();
}

macro_rules! in_every_mode {
    ($($name:ident: $f:ident($mode:literal);)*) => {$(
        #[test]
        fn $name() {
            $f($mode);
        }
    )*};
}

in_every_mode! {
    fio_appends_with_fsync_classic: fio_appends("classic");
    fio_appends_with_fsync_horae: fio_appends("horae");
    fio_appends_with_fsync_mq: fio_appends("mq");
    sqlite_wal_survives_remount_classic: sqlite_wal("classic");
    sqlite_wal_survives_remount_horae: sqlite_wal("horae");
    sqlite_wal_survives_remount_mq: sqlite_wal("mq");
    cp_a_tree_matches_source_classic: cp_a_tree("classic");
    cp_a_tree_matches_source_horae: cp_a_tree("horae");
    cp_a_tree_matches_source_mq: cp_a_tree("mq");
}

#[test]
fn every_journaling_mode_is_covered() {
    assert_eq!(common::MODES, ["classic", "horae", "mq"]);
}
