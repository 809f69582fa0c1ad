//! A directory of many entries through the mount: creates stay fast
//! because the directory is indexed (`mqfs::htree`, ext4's dir_index), so
//! each create looks up and inserts in one leaf instead of scanning every
//! block. `MQFS_BIG_DIR_FILES` sets the count (default 20,000) and
//! `MQFS_BIG_DIR_MODE` the mode (default mq) and `MQFS_BIG_DIR_SIZE` the
//! image size (default 1G: 65,536 inodes) for measuring.

mod common;

use std::time::Instant;

use common::{fsck_ok, mkfs, Mount, TempDir};

#[test]
fn twenty_thousand_files_in_one_directory_take_seconds() {
    let n: usize = std::env::var("MQFS_BIG_DIR_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let mode = std::env::var("MQFS_BIG_DIR_MODE").unwrap_or_else(|_| "mq".into());
    let size = std::env::var("MQFS_BIG_DIR_SIZE").unwrap_or_else(|_| "1G".into());
    let t = TempDir::new("big-dir");
    let img = mkfs(&t, "img", &["--size", &size, "--mode", &mode]);
    let m = Mount::start(&img, &t.dir("mnt"), &[]);
    let d = m.join("d");
    std::fs::create_dir(&d).unwrap();
    let start = Instant::now();
    for i in 0..n {
        if let Err(e) = std::fs::File::create(d.join(format!("file{i:06}"))) {
            panic!("create {i}: {e}");
        }
    }
    let created = start.elapsed();
    // A listing interrupted by creates (and reaching past them: readdir
    // is served in chunks) neither skips nor repeats an entry that
    // existed throughout (POSIX readdir(3)).
    let mut it = std::fs::read_dir(&d).unwrap();
    let mut seen: Vec<String> = Vec::with_capacity(n);
    for e in it.by_ref().take(n / 3) {
        seen.push(e.unwrap().file_name().into_string().unwrap());
    }
    for i in 0..500 {
        std::fs::File::create(d.join(format!("late{i:03}"))).unwrap();
    }
    seen.extend(it.map(|e| e.unwrap().file_name().into_string().unwrap()));
    let mut old: Vec<&String> = seen.iter().filter(|s| s.starts_with("file")).collect();
    old.sort();
    let before = old.len();
    old.dedup();
    assert_eq!((before, old.len()), (n, n), "an entry skipped or repeated");
    assert_eq!(std::fs::read_dir(&d).unwrap().count(), n + 500);
    for i in (0..n).step_by(997) {
        assert!(d.join(format!("file{i:06}")).exists(), "file{i:06}");
    }
    assert!(!d.join("file-none").exists());
    eprintln!("{mode}: {n} creates in one directory through the mount: {created:.2?}");
    let start = Instant::now();
    m.unmount();
    eprintln!("{mode}: unmount {:.2?}", start.elapsed());
    fsck_ok(&img);
    // Seconds, not minutes: a linear directory took 11.5 s for 8,000.
    assert!(created.as_secs() < 120, "{n} creates took {created:?}");
}
