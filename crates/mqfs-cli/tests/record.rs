//! `mqfs mount --record`: a run of real system calls saved as a crashfuzz
//! saved run, explored with the crash explorer's library (what `crashfuzz
//! explore --trace FILE` runs) without a violation, and so is a run of
//! sqlite3 committing transactions in WAL mode; a tampered promise is
//! caught, so the promises are checked; a recording file that cannot be
//! written is refused before anything is mounted.

mod common;

use std::fmt::Write as _;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use common::{fsck_ok, image_bytes, is_mounted, mkfs, mqfs, ok, output, require, Mount, TempDir};
use crashfuzz::{explore_recording, explore_saved, Expect, ExploreOptions, ExploreReport, SavedRun};
use mqfs_cli::ioctl::fatomic;

/// The default enumeration (by what the checks read) on two workers:
/// each exploration takes about a second.
fn options() -> ExploreOptions {
    ExploreOptions {
        jobs: 2,
        ..ExploreOptions::default()
    }
}

/// The bytes the test writes to `/data`, in three writes.
fn data() -> Vec<u8> {
    (0..3u8).flat_map(|i| vec![b'a' + i; 3000]).collect()
}

/// Mounts `img` with `--record run`, runs a few writes and syncs through
/// the kernel, and unmounts (`signal`: with that signal, else with
/// `fusermount3 -u`). Returns the mount's stdout.
fn record(t: &TempDir, img: &Path, run: &Path, signal: Option<&str>) -> String {
    let m = Mount::start(img, &t.dir("mnt"), &["--record", run.to_str().unwrap()]);
    let mut f = File::create(m.join("data")).unwrap();
    for chunk in data().chunks(3000) {
        f.write_all(chunk).unwrap();
    }
    f.sync_all().unwrap();
    std::fs::create_dir(m.join("d")).unwrap();
    File::open(m.join("d")).unwrap().sync_all().unwrap();
    // Traffic while the promise about /d holds (a change inside /d would
    // end it).
    let mut a = File::create(m.join("atom")).unwrap();
    a.write_all(b"all or nothing").unwrap();
    fatomic(&a).unwrap();
    let mut g = File::create(m.join("d/notes")).unwrap();
    g.write_all(b"fdatasync me").unwrap();
    g.sync_data().unwrap();
    drop((f, g, a));
    match signal {
        Some(s) => m.signal(s),
        None => m.unmount(),
    }
}

fn explored(run: &Path) -> ExploreReport {
    let r = explore_saved(run, &options()).unwrap();
    eprintln!(
        "{}: {} points, {} states, {} checked, {} violations in {:.2} s",
        r.workload,
        r.crash_points,
        r.states_total,
        r.states_checked,
        r.violations.len(),
        r.wall_seconds
    );
    r
}

#[test]
fn a_recorded_mount_explores_without_violations() {
    for (mode, signal) in [("mq", None), ("classic", Some("INT"))] {
        let t = TempDir::new(&format!("rec-{mode}"));
        let img = mkfs(
            &t,
            "img",
            &[
                "--size",
                "16M",
                "--mode",
                mode,
                "--queues",
                "2",
                "--profile",
                "flash-vwc",
            ],
        );
        let run = t.join("run.cfz");
        let out = record(&t, &img, &run, signal);
        assert!(out.contains("unmounted cleanly"), "{out}");
        assert!(
            out.contains("mqfs: recorded ") && out.contains("run.cfz"),
            "{out}"
        );
        assert!(run.is_file());
        fsck_ok(&img);

        let saved = SavedRun::load(&run).unwrap();
        assert_eq!(saved.config.mode.name(), mode);
        assert_eq!((saved.config.cores, saved.config.profile.name), (2, "flash-vwc"));
        let rec = &saved.recording;
        let ops: Vec<&str> = rec.ops.iter().map(|o| o.op.as_str()).collect();
        for want in [
            "mount",
            "create /data",
            "write /data 0 3000",
            "fsync /data",
            "mkdir /d",
            "fsync /d",
            "fdatasync /d/notes",
            "fatomic /atom",
            "unmount",
        ] {
            assert!(ops.contains(&want), "{want} missing from {ops:?}");
        }
        let promised = |f: &dyn Fn(&Expect) -> bool| rec.promises.iter().any(|p| f(&p.expect));
        assert!(promised(
            &|e| matches!(e, Expect::File { path, content, if_present: false } if path == "/data" && *content == data())
        ));
        assert!(promised(
            &|e| matches!(e, Expect::Dir { path, entries, .. } if path == "/d" && entries.is_empty())
        ));
        assert!(promised(
            &|e| matches!(e, Expect::File { path, if_present: true, .. } if path == "/d/notes")
        ));
        // fatomic: atomic only in mq mode, fsync's promise elsewhere.
        assert!(promised(&|e| match e {
            Expect::Atomic { path, versions } => mode == "mq" && path == "/atom" && versions.len() == 2,
            Expect::File { path, .. } => mode != "mq" && path == "/atom",
            _ => false,
        }));

        let r = explored(&run);
        assert!(r.states_checked > 0 && r.crash_points == rec.trace.entries().len());
        assert!(
            r.violations.is_empty(),
            "{:#?}",
            &r.violations[..r.violations.len().min(3)]
        );
    }
}

#[test]
fn tampered_promises_are_caught() {
    let t = TempDir::new("rec-tamper");
    let img = mkfs(
        &t,
        "img",
        &[
            "--size",
            "16M",
            "--mode",
            "mq",
            "--queues",
            "2",
            "--profile",
            "flash-vwc",
        ],
    );
    let run = t.join("run.cfz");
    record(&t, &img, &run, None);
    let saved = SavedRun::load(&run).unwrap();
    let explore = |s: &SavedRun| explore_recording(&s.recording, &s.config, &options(), "tampered").unwrap();
    let is_data = |e: &Expect| matches!(e, Expect::File { path, .. } if path == "/data");

    // One byte of the synced content changed: every state where the
    // promise holds fails.
    let mut bad = saved.clone();
    let p = bad
        .recording
        .promises
        .iter_mut()
        .find(|p| is_data(&p.expect))
        .unwrap();
    if let Expect::File { content, .. } = &mut p.expect {
        content[4500] ^= 1;
    }
    let r = explore(&bad);
    assert!(!r.violations.is_empty(), "a wrong content passed");
    assert!(
        r.violations
            .iter()
            .all(|v| v.check == "durable-data" && v.detail.contains("/data")),
        "{:?}",
        r.violations[0]
    );

    // The promise moved to before the file was made: the states between
    // lack the file.
    let mut early = saved.clone();
    let p = early
        .recording
        .promises
        .iter_mut()
        .find(|p| is_data(&p.expect))
        .unwrap();
    p.from = 0;
    let r = explore(&early);
    assert!(
        r.violations.iter().any(|v| v.detail.contains("/data lost")),
        "{:?}",
        r.violations
    );

    // A directory entry that was never made.
    let mut phantom = saved;
    let p = phantom
        .recording
        .promises
        .iter_mut()
        .find(|p| matches!(p.expect, Expect::Dir { .. }))
        .unwrap();
    if let Expect::Dir { entries, .. } = &mut p.expect {
        entries.insert("ghost".into(), crashfuzz::Kind::File);
    }
    let r = explore(&phantom);
    assert!(
        r.violations.iter().any(|v| v.check == "durable-dir"),
        "{:?}",
        r.violations
    );
}

/// sqlite3 in WAL mode with `synchronous=FULL`: a table, then each row
/// inserted in its own transaction, so that each commit syncs the WAL.
fn sqlite_script(rows: usize) -> String {
    let mut script = String::from(
        "PRAGMA journal_mode=WAL;\nPRAGMA synchronous=FULL;\nCREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);\n",
    );
    for i in 0..rows {
        let _ = writeln!(script, "BEGIN; INSERT INTO t(v) VALUES ('row {i}'); COMMIT;");
    }
    script
}

/// The acceptance criterion: a crash exploration of a recorded
/// sqlite3 run finds no violation in `mq` mode, and reports how many
/// states it checked (`--nocapture` shows the figures). With the bounds
/// of [`options`] it checks about 1,700 states in about 2.5 s.
#[test]
fn a_recorded_sqlite3_run_explores_without_violations_in_mq_mode() {
    require("sqlite3");
    const ROWS: usize = 40;
    let started = Instant::now();
    let t = TempDir::new("rec-sqlite");
    let img = mkfs(
        &t,
        "img",
        &[
            "--size",
            "16M",
            "--mode",
            "mq",
            "--queues",
            "2",
            "--profile",
            "flash-vwc",
        ],
    );
    let mnt = t.dir("mnt");
    let run = t.join("run.cfz");
    let sql = t.join("tx.sql");
    std::fs::write(&sql, sqlite_script(ROWS)).unwrap();
    let m = Mount::start(&img, &mnt, &["--record", run.to_str().unwrap()]);
    let o = ok(Command::new("sqlite3")
        .arg(m.join("t.db"))
        .stdin(File::open(&sql).unwrap()));
    assert!(o.starts_with("wal"), "{o}");
    let out = m.unmount();
    assert!(out.contains("mqfs: recorded "), "{out}");
    fsck_ok(&img);
    // The run itself went right (checked outside the recording).
    let m = Mount::start(&img, &mnt, &[]);
    let o = ok(Command::new("sqlite3")
        .arg(m.join("t.db"))
        .arg("PRAGMA integrity_check; SELECT count(*) FROM t;"));
    assert_eq!(o, format!("ok\n{ROWS}\n"));
    m.unmount();

    let saved = SavedRun::load(&run).unwrap();
    assert_eq!(saved.config.mode.name(), "mq");
    let rec = &saved.recording;
    // sqlite syncs the WAL at each commit (fdatasync where the C library
    // has it, as Linux's does).
    let wal_syncs = rec
        .promises
        .iter()
        .filter(|p| {
            matches!(&p.expect, Expect::File { path, .. } if path == "/t.db-wal")
                && (p.op.starts_with("fsync ") || p.op.starts_with("fdatasync "))
        })
        .count();
    assert!(wal_syncs >= ROWS, "{wal_syncs} syncs of the WAL promised");
    // Every promise holds at some crash point: a commit's promise ends
    // where the next transaction's first write starts, and still covers
    // the state just before it.
    let covering = rec.promises.iter().filter(|p| p.from < p.until).count();
    assert_eq!(covering, rec.promises.len(), "promises that cover no crash point");

    let r = explore_saved(&run, &options()).unwrap();
    eprintln!(
        "sqlite3 ({ROWS} transactions) in mq mode: {} trace entries, {} operations, {} promises \
         ({wal_syncs} WAL syncs, {covering} holding at some crash point), {} crash points, \
         {} states total, {} checked ({} deduplicated, {} judged by read set), {} violations; exploring took {:.2} s, \
         the whole test {:.2} s",
        rec.trace.entries().len(),
        rec.ops.len(),
        rec.promises.len(),
        r.crash_points,
        r.states_total,
        r.states_checked,
        r.states_deduplicated,
        r.states_by_read_set,
        r.violations.len(),
        r.wall_seconds,
        started.elapsed().as_secs_f64()
    );
    assert_eq!(r.crash_points, rec.trace.entries().len());
    // Measured (read-set enumeration): 467 checked; every state judged.
    assert!(r.states_checked > 200, "only {} states checked", r.states_checked);
    assert_eq!(r.states_not_visited, 0, "every state judged");
    assert!(
        r.violations.is_empty(),
        "{:#?}",
        &r.violations[..r.violations.len().min(3)]
    );
}

#[test]
fn an_unwritable_recording_file_is_refused_before_mounting() {
    let t = TempDir::new("rec-bad");
    let img = mkfs(&t, "img", &["--size", "16M", "--mode", "mq"]);
    let mnt = t.dir("mnt");
    let before = image_bytes(&img);
    for (file, want) in [
        (t.join("nowhere/run.cfz"), "does not exist"),
        (t.dir("a-directory"), "is a directory"),
    ] {
        let o = output(mqfs().arg("mount").arg(&img).arg(&mnt).arg("--record").arg(&file));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err:?}");
        assert!(
            err.starts_with("mqfs: --record ") && err.contains(want),
            "{err:?}"
        );
        assert!(!is_mounted(&mnt));
    }
    assert!(image_bytes(&img) == before, "the image changed");
}
