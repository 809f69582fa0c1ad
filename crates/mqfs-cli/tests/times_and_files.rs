//! The mount as people use it: timestamps follow the host's clock and never
//! go back across remounts (`docs/decisions.md` M17), `touch` sets the
//! current time; mkfifo, mknod and sockets make special files; an unlinked
//! open file reports no link, and a crash while it is open leaks nothing
//! (the next mount frees it from the orphan list).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime};

use common::{fsck_ok, mkfs, ok, Mount, TempDir};

fn mtime(p: &Path) -> SystemTime {
    std::fs::metadata(p).unwrap().modified().unwrap()
}

/// True if `t` is within an hour of the host's time now (the file
/// system's clock is the host time at mount plus simulated time since).
fn near_now(t: SystemTime) -> bool {
    let now = SystemTime::now();
    let d = now.duration_since(t).unwrap_or_else(|e| e.duration());
    d < Duration::from_secs(3600)
}

#[test]
fn a_file_written_after_a_remount_is_newer_than_one_written_before() {
    let t = TempDir::new("times-remount");
    let img = mkfs(&t, "img", &["--size", "32M", "--mode", "classic"]);
    let mnt = t.dir("mnt");
    let m = Mount::start(&img, &mnt, &[]);
    std::fs::write(m.join("old.c"), b"int main() { return 0; }\n").unwrap();
    let old = mtime(&m.join("old.c"));
    m.unmount();
    let m = Mount::start(&img, &mnt, &[]);
    assert_eq!(mtime(&m.join("old.c")), old, "the timestamp survives the remount");
    std::fs::write(m.join("new.o"), b"object").unwrap();
    let new = mtime(&m.join("new.o"));
    assert!(new > old, "written after the remount: {new:?} <= {old:?}");
    assert!(near_now(old) && near_now(new), "host time: {old:?} {new:?}");
    // make's question: is the target newer than its source?
    std::fs::write(m.join("old.c"), b"int main() { return 1; }\n").unwrap();
    assert!(
        mtime(&m.join("old.c")) > new,
        "an edited source is newer than its object"
    );
    m.unmount();
    fsck_ok(&img);
}

#[test]
fn touch_sets_the_current_time() {
    let t = TempDir::new("times-touch");
    let img = mkfs(&t, "img", &["--size", "32M", "--mode", "mq", "--queues", "2"]);
    let m = Mount::start(&img, &t.dir("mnt"), &[]);
    let f = m.join("f");
    std::fs::write(&f, b"x").unwrap();
    // An explicit time (utimensat with a time)...
    ok(Command::new("touch")
        .args(["-d", "2001-02-03 04:05:06 UTC"])
        .arg(&f));
    let past = mtime(&f);
    assert_eq!(
        past.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs(),
        981_173_106
    );
    // ... then UTIME_NOW: the file system's clock, near the host's now.
    ok(Command::new("touch").arg(&f));
    let touched = mtime(&f);
    assert!(touched > past);
    assert!(near_now(touched), "touch sets now: {touched:?}");
    let atime = std::fs::metadata(&f).unwrap().accessed().unwrap();
    assert!(near_now(atime), "touch sets atime too: {atime:?}");
    m.unmount();
}

#[test]
fn mkfifo_mknod_and_sockets_make_special_files_that_survive_a_remount() {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let t = TempDir::new("special");
    let img = mkfs(&t, "img", &["--size", "32M", "--mode", "mq", "--queues", "2"]);
    let mnt = t.dir("mnt");
    let m = Mount::start(&img, &mnt, &[]);
    ok(Command::new("mkfifo").arg(m.join("fifo")));
    // mknod(1) with -m sets the mode exactly (mknod(2), then chmod).
    ok(Command::new("mknod")
        .args(["-m", "0666"])
        .arg(m.join("null"))
        .args(["c", "1", "3"]));
    ok(Command::new("mknod")
        .args(["-m", "0660"])
        .arg(m.join("sda1"))
        .args(["b", "8", "1"]));
    let (null, sda1) = (libc::makedev(1, 3), libc::makedev(8, 1));
    let listener = std::os::unix::net::UnixListener::bind(m.join("sock")).unwrap();
    drop(listener);
    let check = |m: &Mount| {
        let md = |p: &str| std::fs::symlink_metadata(m.join(p)).unwrap();
        assert!(md("fifo").file_type().is_fifo());
        assert!(md("null").file_type().is_char_device());
        assert_eq!(md("null").rdev(), null);
        assert!(md("sda1").file_type().is_block_device());
        assert_eq!(md("sda1").rdev(), sda1);
        assert!(md("sock").file_type().is_socket());
        assert_eq!(md("null").mode() & 0o7777, 0o666);
        assert_eq!(md("sda1").mode() & 0o7777, 0o660);
    };
    check(&m);
    // A fifo works: the kernel serves it, the file system only names it.
    let fifo = m.join("fifo");
    let writer = std::thread::spawn(move || std::fs::write(fifo, b"through the pipe").unwrap());
    assert_eq!(std::fs::read(m.join("fifo")).unwrap(), b"through the pipe");
    writer.join().unwrap();
    m.unmount();
    let m = Mount::start(&img, &mnt, &[]);
    check(&m);
    m.unmount();
    fsck_ok(&img);
}

#[test]
fn an_unlinked_open_file_reports_no_link() {
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::os::unix::fs::MetadataExt;
    let t = TempDir::new("nlink0");
    let img = mkfs(&t, "img", &["--size", "32M", "--mode", "classic"]);
    let m = Mount::start(&img, &t.dir("mnt"), &[]);
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(m.join("tmp"))
        .unwrap();
    f.write_all(b"scratch").unwrap();
    assert_eq!(f.metadata().unwrap().nlink(), 1);
    std::fs::remove_file(m.join("tmp")).unwrap();
    assert_eq!(f.metadata().unwrap().nlink(), 0, "fstat after unlink");
    f.seek(SeekFrom::Start(0)).unwrap();
    let mut s = String::new();
    f.read_to_string(&mut s).unwrap();
    assert_eq!(s, "scratch");
    drop(f);
    m.unmount();
    fsck_ok(&img);
}

/// Free blocks of the file system mounted on `dir` (statvfs(3), through
/// `stat -f`).
fn free_blocks(dir: &Path) -> u64 {
    let out = ok(Command::new("stat").args(["-f", "-c", "%f"]).arg(dir));
    out.trim().parse().unwrap()
}

#[test]
fn a_crash_with_an_unlinked_file_open_frees_it_at_the_next_mount() {
    use std::io::Write;
    let t = TempDir::new("orphan-crash");
    let mnt = t.dir("mnt");
    for mode in ["classic", "horae", "mq"] {
        let img = mkfs(&t, &format!("{mode}.img"), &["--size", "32M", "--mode", mode]);
        let m = Mount::start(&img, &mnt, &[]);
        let free0 = free_blocks(&mnt);
        let mut f = std::fs::File::create(m.join("scratch")).unwrap();
        f.write_all(&vec![7u8; 1 << 20]).unwrap();
        f.sync_all().unwrap();
        std::fs::remove_file(m.join("scratch")).unwrap();
        // The unlink (and the orphan-table entry) durable, the file open.
        f.sync_all().unwrap();
        assert!(
            free_blocks(&mnt) + 256 <= free0,
            "{mode}: the open file's blocks are in use"
        );
        m.kill();
        drop(f);
        // After recovery the orphan is listed: fsck accepts it.
        fsck_ok(&img);
        let m = Mount::start(&img, &mnt, &[]);
        assert_eq!(free_blocks(&mnt), free0, "{mode}: the mount frees the orphan");
        m.unmount();
        let report = fsck_ok(&img);
        assert!(report.contains(" 0 errors, 0 warnings"), "{mode}: {report}");
    }
}
