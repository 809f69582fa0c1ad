//! The file systems on persistent memory through `mqfs mkfs --fs` and
//! `mqfs mount`: real programs' calls reach WOFS, SoupFS and the PMFS
//! baseline through the one FUSE adapter, the image keeps what they made
//! across an unmount, a SIGKILL of the mount is a power failure that keeps
//! every fsynced byte, and what they lack is refused with EOPNOTSUPP.

mod common;

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;

use common::{mqfs, output, stat, Mount, TempDir};

const FILE_SYSTEMS: [&str; 3] = ["wofs", "soupfs", "pmfs"];

/// (blocks in all, free blocks) that statfs(2) reports for `dir`.
fn blocks(dir: &std::path::Path) -> (u64, u64) {
    let out = common::ok(
        std::process::Command::new("stat")
            .args(["-f", "-c", "%b %f"])
            .arg(dir),
    );
    let v: Vec<u64> = out.split_whitespace().map(|x| x.parse().unwrap()).collect();
    (v[0], v[1])
}

/// Bytes of a file the test writes (PMFS maps at most 48 KiB a file).
fn content(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn each_file_system_serves_programs_and_keeps_its_tree_across_mounts() {
    for fs_name in FILE_SYSTEMS {
        let dir = TempDir::new(&format!("pm-mount-{fs_name}"));
        let img = common::mkfs(&dir, "img", &["--fs", fs_name, "--size", "16M"]);
        let header = fs::read_to_string(dir.join("img.hdr")).unwrap();
        assert!(header.contains(&format!("fs = {fs_name}\n")), "{header}");
        let mnt = dir.dir("mnt");
        let m = Mount::start(&img, &mnt, &[]);
        let (total, free) = blocks(&mnt);
        assert!(total > 3000 && free <= total, "{fs_name}: {total} {free}");
        fs::create_dir(m.join("d")).unwrap();
        fs::write(m.join("d/a"), content(1, 20_000)).unwrap();
        let (_, after) = blocks(&mnt);
        assert!(
            after + 5 <= free,
            "{fs_name}: 20 KB take 5 pages: {free} -> {after}"
        );
        let mut f = OpenOptions::new().append(true).open(m.join("d/a")).unwrap();
        f.write_all(&content(2, 3000)).unwrap();
        drop(f);
        fs::rename(m.join("d/a"), m.join("b")).unwrap();
        fs::hard_link(m.join("b"), m.join("d/c")).unwrap();
        fs::write(m.join("gone"), b"x").unwrap();
        fs::remove_file(m.join("gone")).unwrap();
        let sh = output(
            std::process::Command::new("sh")
                .arg("-c")
                .arg("echo one > e && echo two >> e && cat e")
                .current_dir(&mnt),
        );
        assert_eq!(String::from_utf8_lossy(&sh.stdout), "one\ntwo\n", "{fs_name}");
        let want = [content(1, 20_000), content(2, 3000)].concat();
        assert_eq!(fs::read(m.join("d/c")).unwrap(), want, "{fs_name}");
        assert_eq!(fs::metadata(m.join("b")).unwrap().len(), 23_000);
        let stats = m.stats();
        assert!(stat(&stats, "pm_stores") > 0, "{fs_name}: {stats:?}");
        assert_eq!(stat(&stats, "mmio"), 0, "{fs_name}: no drive");
        m.unmount();

        let m = Mount::start(&img, &mnt, &[]);
        let mut names: Vec<String> = fs::read_dir(&mnt)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["b", "d", "e"], "{fs_name}");
        assert_eq!(fs::read(m.join("b")).unwrap(), want, "{fs_name}");
        assert_eq!(fs::read_to_string(m.join("e")).unwrap(), "one\ntwo\n");
        m.unmount();
    }
}

#[test]
fn a_killed_mount_keeps_every_fsynced_byte() {
    for fs_name in FILE_SYSTEMS {
        let dir = TempDir::new(&format!("pm-kill-{fs_name}"));
        let img = common::mkfs(&dir, "img", &["--fs", fs_name, "--size", "16M"]);
        let mnt = dir.dir("mnt");
        let m = Mount::start(&img, &mnt, &[]);
        fs::create_dir(m.join("d")).unwrap();
        for i in 0..8u8 {
            let mut f = File::create(m.join(&format!("d/f{i}"))).unwrap();
            f.write_all(&content(i, 5000 + usize::from(i) * 100)).unwrap();
            f.sync_all().unwrap();
        }
        File::open(m.join("d")).unwrap().sync_all().unwrap();
        m.kill();
        let m = Mount::start(&img, &mnt, &[]);
        for i in 0..8u8 {
            let got = fs::read(m.join(&format!("d/f{i}"))).unwrap();
            assert_eq!(got, content(i, 5000 + usize::from(i) * 100), "{fs_name}: f{i}");
        }
        m.unmount();
    }
}

#[test]
fn what_they_lack_is_eopnotsupp_and_bad_uses_are_usage_errors() {
    let dir = TempDir::new("pm-refusals");
    let img = common::mkfs(&dir, "img", &["--fs", "wofs", "--size", "4M"]);
    let mnt = dir.dir("mnt");
    let m = Mount::start(&img, &mnt, &[]);
    fs::write(m.join("f"), b"x").unwrap();
    let eopnotsupp = |r: std::io::Result<()>| r.unwrap_err().raw_os_error() == Some(libc::EOPNOTSUPP);
    assert!(eopnotsupp(fs::set_permissions(
        m.join("f"),
        fs::Permissions::from_mode(0o600)
    )));
    assert!(eopnotsupp(std::os::unix::fs::symlink("f", m.join("l"))));
    // A WOFS file maps at most `wofs::MAX_SIZE` bytes.
    let big = fs::write(m.join("big"), vec![1u8; wofs::MAX_SIZE as usize + 4096]);
    assert_eq!(big.unwrap_err().raw_os_error(), Some(libc::EFBIG));
    // A time change is accepted and not kept (touch works).
    assert!(output(std::process::Command::new("touch").arg(m.join("f")))
        .status
        .success());
    m.unmount();

    let usage = |args: &[&str]| {
        let o = output(mqfs().args(args));
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
        err
    };
    let i = img.to_str().unwrap();
    let n = dir.join("new");
    let n = n.to_str().unwrap();
    assert!(usage(&["mkfs", n, "--fs", "wofs", "--mode", "mq"]).contains("--mode"));
    assert!(usage(&["mkfs", n, "--fs", "pmfs", "--profile", "optane-905p"]).contains("profile"));
    assert!(usage(&["mkfs", n, "--fs", "ext4"]).contains("unknown fs"));
    assert!(usage(&["fsck", i]).contains("persistent memory"));
    let stat = common::ok(mqfs().arg("stat").arg(&img));
    assert!(
        stat.contains("machine: wofs on persistent memory, 4194304 bytes (pm-adr)"),
        "{stat}"
    );
    let rec = dir.join("run.cfz");
    let m2 = dir.dir("mnt2");
    assert!(usage(&[
        "mount",
        i,
        m2.to_str().unwrap(),
        "--record",
        rec.to_str().unwrap()
    ])
    .contains("--record"));
}

/// fio's random writes with fsyncs and a verify pass, two jobs, on SoupFS
/// (whose files grow until the memory is full; WOFS and the baseline cap a
/// file below fio's 1 MiB).
#[test]
fn fio_writes_and_verifies_on_soupfs() {
    common::require("fio");
    let dir = TempDir::new("pm-fio");
    let img = common::mkfs(&dir, "img", &["--fs", "soupfs", "--size", "32M"]);
    let mnt = dir.dir("mnt");
    let m = Mount::start(&img, &mnt, &[]);
    let o = output(
        std::process::Command::new("fio")
            .args([
                "--name=w",
                "--rw=randwrite",
                "--bs=4k",
                "--size=1M",
                "--fsync=8",
                "--ioengine=psync",
                "--numjobs=2",
                "--verify=crc32c",
                // No verify-state files in the working directory (the
                // crate's, under cargo test), as heavy_programs.rs does.
                "--verify_state_save=0",
            ])
            .arg(format!("--directory={}", mnt.display())),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(out.matches("err= 0").count(), 2, "{out}");
    assert!(stat(&m.stats(), "pm_flushes") > 0);
    m.unmount();
}

/// On one core, SoupFS's persister shares it with the calls: the image
/// mounts, and what an fsync persisted is there after a kill.
#[test]
fn soupfs_on_one_core_shares_it_with_its_persister() {
    let dir = TempDir::new("pm-one-core");
    let img = common::mkfs(&dir, "img", &["--fs", "soupfs", "--size", "4M", "--queues", "1"]);
    let mnt = dir.dir("mnt");
    let m = Mount::start(&img, &mnt, &[]);
    let mut f = File::create(m.join("a")).unwrap();
    f.write_all(b"one core").unwrap();
    f.sync_all().unwrap();
    drop(f);
    m.kill();
    let m = Mount::start(&img, &mnt, &[]);
    assert_eq!(fs::read(m.join("a")).unwrap(), b"one core");
    m.unmount();
}
