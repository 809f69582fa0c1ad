//! mkfs writes only metadata: a 64 GiB image is made in well under a few
//! seconds, occupies a few MiB on the host, and mounts, takes a file and
//! checks clean.

mod common;

use std::os::unix::fs::MetadataExt;
use std::time::{Duration, Instant};

use common::{fsck_ok, mkfs, Mount, TempDir};

#[test]
fn a_64_gib_image_is_made_in_seconds_and_stays_sparse() {
    let t = TempDir::new("sparse-mkfs");
    let start = Instant::now();
    let img = mkfs(&t, "big.img", &["--size", "64G", "--mode", "classic"]);
    let took = start.elapsed();
    assert!(took < Duration::from_secs(5), "mkfs of 64 GiB took {took:?}");
    let meta = std::fs::metadata(&img).unwrap();
    assert_eq!(meta.len(), 64 << 30);
    let on_disk = meta.blocks() * 512;
    assert!(
        on_disk < 64 << 20,
        "the image occupies {on_disk} bytes on the host"
    );
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 241) as u8).collect();
    let mnt = t.dir("mnt");
    let m = Mount::start(&img, &mnt, &[]);
    std::fs::write(m.join("f"), &data).unwrap();
    m.unmount();
    let report = fsck_ok(&img);
    assert!(report.contains(" 0 errors, 0 warnings; 1 files"), "{report}");
    let m = Mount::start(&img, &mnt, &[]);
    assert_eq!(std::fs::read(m.join("f")).unwrap(), data);
    m.unmount();
}
