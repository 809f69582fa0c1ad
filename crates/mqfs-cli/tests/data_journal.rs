//! `mqfs mount -o data=journal`: ext4's data-journaling mode on a classic
//! image; a program's fsynced file survives the unmount and fsck is
//! clean; an MQFS image refuses the option in one line, untouched.

mod common;

use std::io::Write;

use common::{fsck_ok, image_bytes, mkfs, mqfs, output, Mount, TempDir};

#[test]
fn a_classic_image_mounts_with_data_journal() {
    let t = TempDir::new("data-journal");
    let img = mkfs(&t, "img", &["--size", "32M", "--mode", "classic"]);
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let m = Mount::start(&img, &t.dir("mnt"), &["-o", "data=journal"]);
    {
        let mut f = std::fs::File::create(m.join("f")).unwrap();
        f.write_all(&data).unwrap();
        f.sync_all().unwrap();
    }
    m.unmount();
    fsck_ok(&img);
    // Mounted again in ordered mode: the data the checkpoint wrote home.
    let m = Mount::start(&img, &t.dir("mnt"), &[]);
    assert!(std::fs::read(m.join("f")).unwrap() == data, "the file reads back");
    m.unmount();
}

#[test]
fn an_mqfs_image_refuses_data_journal() {
    let t = TempDir::new("data-journal-mq");
    let img = mkfs(&t, "img", &["--size", "16M", "--mode", "mq"]);
    let before = image_bytes(&img);
    let o = output(
        mqfs()
            .arg("mount")
            .arg(&img)
            .arg(t.dir("mnt"))
            .args(["-o", "data=journal"]),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.contains("data=journal"), "{err}");
    assert!(image_bytes(&img) == before, "the image is untouched");
}
