//! Bad input: bad arguments of every subcommand, bad paths (a missing
//! image, a directory, a file the user cannot read or write), a corrupt
//! image, a mountpoint that does not exist or is already a live mount, an
//! image already in use. Each is one line on stderr and exit status 2 (no
//! usage screen: that is for `--help`), and the image files are untouched.

mod common;

use std::path::Path;
use std::process::Command;

use common::{image_bytes, is_mounted, mkfs, mqfs, output, Mount, TempDir};

/// Runs `mqfs` with `args`; it must fail with status 2 and one line on
/// stderr mentioning `want`, leaving `img` as it was.
fn refused(img: &Path, args: &mut Command, want: &str) {
    let before = image_bytes(img);
    let o = output(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(
        err.starts_with("mqfs: ") && err.contains(want),
        "{err:?} should mention {want:?}"
    );
    assert!(image_bytes(img) == before, "{args:?} changed the image");
}

fn mount_cmd(img: &Path, dir: &Path) -> Command {
    let mut c = mqfs();
    c.arg("mount").arg(img).arg(dir);
    c
}

#[test]
fn a_missing_mountpoint_is_refused() {
    let t = TempDir::new("bad-mountpoint");
    let img = mkfs(&t, "img", &["--size", "16M", "--mode", "mq"]);
    refused(
        &img,
        &mut mount_cmd(&img, &t.join("nowhere")),
        "mountpoint is not an existing directory",
    );
    std::fs::write(t.join("file"), b"x").unwrap();
    refused(&img, &mut mount_cmd(&img, &t.join("file")), "mountpoint");
}

#[test]
fn corrupt_images_are_refused_untouched() {
    let t = TempDir::new("bad-corrupt");
    let mnt = t.dir("mnt");
    for mode in common::MODES {
        let img = mkfs(&t, &format!("{mode}.img"), &["--size", "16M", "--mode", mode]);
        let pristine = image_bytes(&img);
        let restore = || {
            for (ext, bytes) in [".pmr", ".hdr", ""].iter().zip(&pristine) {
                let mut p = img.as_os_str().to_owned();
                p.push(ext);
                std::fs::write(std::path::PathBuf::from(p), bytes).unwrap();
            }
        };
        let media = std::fs::read(&img).unwrap();
        // A garbage superblock.
        let mut bad = media.clone();
        bad[..4096]
            .iter_mut()
            .enumerate()
            .for_each(|(i, b)| *b = (i * 7) as u8);
        std::fs::write(&img, &bad).unwrap();
        refused(&img, &mut mount_cmd(&img, &mnt), "cannot mount");
        refused(&img, mqfs().arg("fsck").arg(&img), "MQFS");
        restore();
        // A garbage inode table (the root directory's inode is in it):
        // the sandbox mount or its fsck finds it.
        let mut bad = media.clone();
        bad[3 * 4096..4 * 4096].fill(0xa5);
        std::fs::write(&img, &bad).unwrap();
        refused(&img, &mut mount_cmd(&img, &mnt), "cannot mount");
        restore();
        // A truncated media file.
        std::fs::write(&img, &media[..media.len() / 2]).unwrap();
        refused(&img, &mut mount_cmd(&img, &mnt), "not an mqfs image");
        restore();
        // A damaged header.
        let mut hdr = img.as_os_str().to_owned();
        hdr.push(".hdr");
        std::fs::write(
            std::path::PathBuf::from(&hdr),
            "format = mqfs-image-1\nmode = zfs\n",
        )
        .unwrap();
        refused(&img, &mut mount_cmd(&img, &mnt), "unknown mode");
        std::fs::remove_file(std::path::PathBuf::from(&hdr)).unwrap();
        refused(&img, &mut mount_cmd(&img, &mnt), "no header file");
        restore();
        assert!(!is_mounted(&mnt));
    }
    // A PMR whose ccNVMe header is damaged (mq keeps its queues there).
    let img = t.join("mq.img");
    let mut pmr = img.as_os_str().to_owned();
    pmr.push(".pmr");
    let pmr = std::path::PathBuf::from(pmr);
    let mut bytes = std::fs::read(&pmr).unwrap();
    let pristine_pmr = bytes.clone();
    bytes[..64].iter_mut().for_each(|b| *b ^= 0x5a);
    std::fs::write(&pmr, &bytes).unwrap();
    refused(&img, &mut mount_cmd(&img, &mnt), "cannot mount");
    // fsck does not pass what mount refuses: the damaged PMR of a clean
    // image, then a header whose mode is not the superblock's.
    fsck_fails(&img, "mount refuses the image");
    std::fs::write(&pmr, &pristine_pmr).unwrap();
    common::fsck_ok(&img);
    let mut hdr = img.as_os_str().to_owned();
    hdr.push(".hdr");
    let hdr = std::path::PathBuf::from(hdr);
    let text = std::fs::read_to_string(&hdr).unwrap();
    std::fs::write(&hdr, text.replace("mode = mq", "mode = classic")).unwrap();
    fsck_fails(&img, "mount refuses the image");
}

/// `mqfs fsck img` finds errors (status 1), its report mentioning `want`,
/// and leaves the image as it was.
fn fsck_fails(img: &Path, want: &str) {
    let before = image_bytes(img);
    let o = output(mqfs().arg("fsck").arg(img));
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains(want), "{out:?} should mention {want:?}");
    assert!(image_bytes(img) == before, "fsck changed the image");
}

#[test]
fn an_image_in_use_is_refused() {
    let t = TempDir::new("bad-busy");
    let img = mkfs(&t, "img", &["--size", "16M", "--mode", "classic"]);
    let m = Mount::start(&img, &t.dir("mnt"), &[]);
    std::fs::write(m.join("f"), b"hello").unwrap();
    // The mount is idle: nothing changes the image while the others try.
    let other = t.dir("other");
    refused(&img, &mut mount_cmd(&img, &other), "in use");
    refused(&img, mqfs().arg("fsck").arg(&img), "in use");
    refused(&img, mqfs().arg("stat").arg(&img), "in use");
    refused(
        &img,
        mqfs().args(["mkfs", "--force", "--size", "16M"]).arg(&img),
        "in use",
    );
    assert!(!is_mounted(&other));
    // Another image on the live mount's mountpoint: refused before the
    // second image is even opened.
    let img2 = mkfs(&t, "img2", &["--size", "16M", "--mode", "mq"]);
    refused(&img2, &mut mount_cmd(&img2, &m.join("")), "already an mqfs mount");
    assert_eq!(
        std::fs::read(m.join("f")).unwrap(),
        b"hello",
        "the first mount still serves"
    );
    m.unmount();
    common::fsck_ok(&img);
}

#[test]
fn mkfs_refuses_to_overwrite_and_bad_arguments() {
    let t = TempDir::new("bad-mkfs");
    let img = mkfs(&t, "img", &["--size", "16M"]);
    refused(
        &img,
        mqfs().args(["mkfs", "--size", "16M"]).arg(&img),
        "already exists",
    );
    refused(
        &img,
        mqfs().args(["mkfs", "--force", "--size", "12345"]).arg(&img),
        "multiple of 4096",
    );
    refused(
        &img,
        mqfs().args(["mkfs", "--force", "--mode", "ext4"]).arg(&img),
        "unknown mode",
    );
    refused(
        &img,
        mqfs().args(["mkfs", "--force", "--profile", "floppy"]).arg(&img),
        "unknown profile",
    );
    refused(
        &img,
        mqfs().args(["mkfs", "--force", "--size", "64K"]).arg(&img),
        "too small",
    );
    common::fsck_ok(&img);
    // --force replaces it.
    common::ok(
        mqfs()
            .args(["mkfs", "--force", "--size", "16M", "--mode", "horae"])
            .arg(&img),
    );
    assert!(common::ok(mqfs().arg("stat").arg(&img)).contains("horae mode"));
}

/// Runs `cmd`: status 2 and one line on stderr mentioning `want`.
fn rejected(cmd: &mut Command, want: &str) {
    let o = output(cmd);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{cmd:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{cmd:?}: one line: {err:?}");
    assert!(
        err.starts_with("mqfs: ") && err.contains(want),
        "{cmd:?}: {err:?} should mention {want:?}"
    );
    assert!(
        o.stdout.is_empty(),
        "{cmd:?}: no usage screen: {:?}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn bad_arguments_are_one_line_without_a_usage_screen() {
    let cases: &[(&[&str], &str)] = &[
        (&[], "no subcommand"),
        (&["bogus"], "'bogus'"),
        (&["mkfs"], "<IMAGE>"),
        (&["mkfs", "--queues", "abc", "x.img"], "--queues"),
        (&["mkfs", "--size", "12Q", "x.img"], "bad size"),
        (&["mkfs", "--frob", "x.img"], "'--frob'"),
        (&["mount"], "<IMAGE> <MOUNTPOINT>"),
        (&["mount", "a.img"], "<MOUNTPOINT>"),
        (&["mount", "--record"], "--record"),
        (&["fsck"], "<IMAGE>"),
        (&["fsck", "a.img", "b.img"], "'b.img'"),
        (&["fsck", "--fix", "a.img"], "'--fix'"),
        (&["stat"], "<IMAGE>"),
        (&["stat", "-x", "a.img"], "'-x'"),
    ];
    for (args, want) in cases {
        rejected(mqfs().args(*args), want);
    }
    // Usage screens are for --help (status 0, on stdout).
    for args in [
        &["--help"][..],
        &["fsck", "--help"],
        &["mount", "--help"],
        &["help", "mkfs"],
    ] {
        let o = output(mqfs().args(args));
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stdout).contains("Usage:"), "{args:?}");
    }
}

#[test]
fn bad_paths_are_one_line_for_every_subcommand() {
    let t = TempDir::new("bad-paths");
    let img = mkfs(&t, "img", &["--size", "16M", "--mode", "classic"]);
    let dir = t.dir("adir");
    let mnt = t.dir("mnt");
    let missing = t.join("missing.img");
    for (path, want) in [(&missing, "no such file"), (&dir, "a directory")] {
        rejected(mqfs().arg("fsck").arg(path), want);
        rejected(mqfs().args(["fsck", "--repair"]).arg(path), want);
        rejected(mqfs().arg("stat").arg(path), want);
        rejected(&mut mount_cmd(path, &mnt), want);
    }
    rejected(mqfs().arg("mkfs").arg(&dir), "a directory");
    rejected(mqfs().arg("mkfs").arg(t.join("no/such/dir.img")), "cannot open");
    rejected(
        &mut mount_cmd(&img, &missing),
        "mountpoint is not an existing directory",
    );
    // Files the user cannot read or write: run as nobody (root reads
    // everything).
    common::require("setpriv");
    let as_nobody = |args: &[&std::ffi::OsStr]| {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(env!("CARGO_BIN_EXE_mqfs"))
            .args(args);
        c
    };
    std::fs::set_permissions(&mnt, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let before = image_bytes(&img);
    // Readable but not writable by nobody: mount needs to write it.
    rejected(
        &mut as_nobody(&["mount".as_ref(), img.as_os_str(), mnt.as_os_str()]),
        "cannot open: Permission denied",
    );
    std::fs::set_permissions(&img, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
    for sub in [&["fsck"][..], &["fsck", "--repair"], &["stat"]] {
        let mut args: Vec<&std::ffi::OsStr> = sub.iter().map(|s| s.as_ref()).collect();
        args.push(img.as_os_str());
        rejected(&mut as_nobody(&args), "cannot open: Permission denied");
    }
    rejected(
        &mut as_nobody(&["mkfs".as_ref(), "--force".as_ref(), img.as_os_str()]),
        "cannot open: Permission denied",
    );
    std::fs::set_permissions(&img, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    assert!(image_bytes(&img) == before, "a refused command changed the image");
    assert!(!is_mounted(&mnt));
}
