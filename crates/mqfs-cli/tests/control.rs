//! The mount itself: live figures under the hidden control directory and
//! at unmount, a clean unmount on SIGINT and SIGTERM, fatomic and
//! fdataatomic through the ioctls, errno mapping, and files unlinked while
//! open.

mod common;

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

use common::{fsck_ok, mkfs, ok, parse_stats, stat, Mount, TempDir};
use mqfs_cli::ioctl::{fatomic, fdataatomic, io, raw, MAGIC};

#[test]
fn live_figures_grow_and_are_printed_at_unmount() {
    let t = TempDir::new("ctl-stats");
    let img = mkfs(&t, "img", &["--size", "32M", "--mode", "mq", "--queues", "2"]);
    let m = Mount::start(&img, &t.dir("mnt"), &[]);
    let before = m.stats();
    let names: Vec<&str> = before.iter().map(|(k, _)| k.as_str()).collect();
    for n in [
        "simulated_time_ns",
        "fuse_requests",
        "mmio",
        "dma_q",
        "block_io",
        "irq",
        "tlps",
        "wire_bytes",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    let mut f = File::create(m.join("data")).unwrap();
    f.write_all(&[7u8; 3 * 4096]).unwrap();
    f.sync_all().unwrap();
    let after = m.stats();
    for n in [
        "simulated_time_ns",
        "fuse_requests",
        "mmio",
        "block_io",
        "irq",
        "tlps",
        "wire_bytes",
    ] {
        assert!(stat(&after, n) > stat(&before, n), "{n}: {before:?} -> {after:?}");
    }
    assert!(stat(&after, "block_io") - stat(&before, "block_io") >= 3);
    // Hidden: not listed, reserved.
    let names: Vec<String> = std::fs::read_dir(&m.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["data"]);
    assert_eq!(
        std::fs::read_dir(m.join(".mqfs")).unwrap().count(),
        1,
        "the control directory lists the stats file"
    );
    assert!(File::create(m.join(".mqfs")).is_err());
    assert!(OpenOptions::new()
        .write(true)
        .open(m.join(".mqfs/stats"))
        .is_err());
    drop(f);
    let out = m.unmount();
    assert!(out.contains("unmounted cleanly"), "{out}");
    let last = parse_stats(&out);
    assert!(stat(&last, "block_io") >= stat(&after, "block_io"));
    assert!(stat(&last, "simulated_time_ns") > stat(&after, "simulated_time_ns"));
    fsck_ok(&img);
}

#[test]
fn sigint_and_sigterm_unmount_cleanly() {
    let t = TempDir::new("ctl-signal");
    let img = mkfs(&t, "img", &["--size", "32M", "--mode", "horae"]);
    let mnt = t.dir("mnt");
    for sig in ["INT", "TERM"] {
        let m = Mount::start(&img, &mnt, &[]);
        std::fs::write(m.join(sig), sig.repeat(5000)).unwrap();
        let out = m.signal(sig);
        assert!(out.contains("unmounted cleanly"), "{out}");
        let st = ok(common::mqfs().arg("stat").arg(&img));
        assert!(st.contains("state: clean"), "{st}");
    }
    let m = Mount::start(&img, &mnt, &[]);
    assert_eq!(
        std::fs::read(m.join("INT")).unwrap(),
        "INT".repeat(5000).as_bytes()
    );
    assert_eq!(
        std::fs::read(m.join("TERM")).unwrap(),
        "TERM".repeat(5000).as_bytes()
    );
    m.unmount();
}

#[test]
fn fatomic_and_fdataatomic_through_ioctl() {
    for mode in common::MODES {
        let t = TempDir::new(&format!("ctl-ioctl-{mode}"));
        let img = mkfs(&t, "img", &["--size", "32M", "--mode", mode, "--queues", "2"]);
        let m = Mount::start(&img, &t.dir("mnt"), &[]);
        let mut f = File::create(m.join("a")).unwrap();
        f.write_all(b"first version").unwrap();
        let before = stat(&m.stats(), "mmio");
        fatomic(&f).unwrap();
        assert!(stat(&m.stats(), "mmio") > before, "fatomic reached the drive");
        f.write_all_at(b"SECOND", 0).unwrap();
        fdataatomic(&f).unwrap();
        // A request MQFS does not know: ENOTTY.
        let e = raw(&f, io(MAGIC, 9)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOTTY));
        drop(f);
        m.unmount();
        let m = Mount::start(&img, &t.join("mnt"), &[]);
        assert_eq!(std::fs::read(m.join("a")).unwrap(), b"SECONDversion");
        m.unmount();
    }
}

#[test]
fn errors_map_to_their_errno() {
    let t = TempDir::new("ctl-errno");
    let img = mkfs(&t, "img", &["--size", "32M", "--mode", "classic"]);
    let m = Mount::start(&img, &t.dir("mnt"), &[]);
    let code = |r: std::io::Result<()>| r.unwrap_err().raw_os_error().unwrap();
    std::fs::create_dir(m.join("d")).unwrap();
    std::fs::write(m.join("d/f"), b"x").unwrap();
    assert_eq!(code(std::fs::create_dir(m.join("d"))), libc::EEXIST);
    assert_eq!(code(std::fs::remove_dir(m.join("d"))), libc::ENOTEMPTY);
    assert_eq!(code(std::fs::remove_dir(m.join("d/f"))), libc::ENOTDIR);
    assert_eq!(code(std::fs::remove_file(m.join("d"))), libc::EISDIR);
    assert_eq!(code(std::fs::remove_file(m.join("nope"))), libc::ENOENT);
    assert_eq!(code(std::fs::write(m.join("d/f/g"), b"")), libc::ENOTDIR);
    assert_eq!(
        code(std::fs::write(m.join(&"n".repeat(256)), b"")),
        libc::ENAMETOOLONG
    );
    assert_eq!(code(std::fs::rename(m.join("d"), m.join("d/sub"))), libc::EINVAL);
    // Special files are made (times_and_files.rs); over a name, EEXIST.
    let fifo = ok(std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("mkfifo {} 2>&1; echo $?", m.join("d/f").display())));
    assert!(fifo.contains("File exists"), "{fifo}");
    // fallocate(2) reaches the file system: a mode it does not support
    // (collapse-range) is EOPNOTSUPP, as Linux answers.
    let falloc = ok(std::process::Command::new("sh").arg("-c").arg(format!(
        "fallocate --collapse-range -o 0 -l 4096 {} 2>&1; echo $?",
        m.join("d/f").display()
    )));
    assert!(falloc.contains("not supported"), "{falloc}");
    ok(std::process::Command::new("fallocate")
        .args(["-l", "8192"])
        .arg(m.join("d/f")));
    assert_eq!(std::fs::metadata(m.join("d/f")).unwrap().len(), 8192);
    m.unmount();
    fsck_ok(&img);
}

#[test]
fn a_file_unlinked_while_open_lives_until_closed() {
    let t = TempDir::new("ctl-orphan");
    let img = mkfs(&t, "img", &["--size", "32M", "--mode", "mq", "--queues", "2"]);
    let mnt = t.dir("mnt");
    let m = Mount::start(&img, &mnt, &[]);
    let mut f = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(m.join("tmp"))
        .unwrap();
    f.write_all(&[1u8; 10000]).unwrap();
    std::fs::remove_file(m.join("tmp")).unwrap();
    assert_eq!(
        std::fs::metadata(m.join("tmp")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
    // A new file must not take its place.
    std::fs::write(m.join("new"), [2u8; 5000]).unwrap();
    f.write_all(&[3u8; 100]).unwrap();
    f.sync_all().unwrap();
    f.seek(SeekFrom::Start(0)).unwrap();
    let mut back = Vec::new();
    f.read_to_end(&mut back).unwrap();
    assert_eq!(back.len(), 10100);
    assert!(back[..10000].iter().all(|b| *b == 1) && back[10000..].iter().all(|b| *b == 3));
    assert_eq!(std::fs::read(m.join("new")).unwrap(), [2u8; 5000]);
    // Killed with the orphan open: the next mount removes it.
    m.kill();
    let m = Mount::start(&img, &mnt, &[]);
    let names: Vec<String> = std::fs::read_dir(&m.dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["new"]);
    // Closed normally: gone at the close.
    let f = File::create(m.join("b")).unwrap();
    std::fs::remove_file(m.join("b")).unwrap();
    drop(f);
    let out = m.unmount();
    assert!(out.contains("unmounted cleanly"));
    let report = fsck_ok(&img);
    assert!(report.contains("1 files, 1 dirs"), "{report}");
}
