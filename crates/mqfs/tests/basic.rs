//! Basic operations in each mode, across unmount and mount.

use ccnvme::BlockDevice;
use mqfs::testing::new_fs;
use mqfs::{mount, probe_options, Ctx, FsError, FsProfile, Mode};
use nvme_ctrl::SsdProfile;

#[test]
fn create_write_read_rename_unlink_survive_remount() {
    for mode in Mode::ALL {
        let t = new_fs(mode, SsdProfile::optane_905p(), 16384, 2).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        let fs = t.fs.clone();
        let m = t.machine.clone();
        let dev = t.dev.clone();
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            fs.mkdir_path(c, "/a").await.unwrap();
            fs.create_path(c, "/a/f").await.unwrap();
            let data: Vec<u8> = (0..10000u32).map(|i| i as u8).collect();
            fs.write_path(c, "/a/f", 0, &data).await.unwrap();
            fs.fsync_path(c, "/a/f").await.unwrap();
            fs.create_path(c, "/a/g").await.unwrap();
            fs.write_path(c, "/a/g", 0, b"hello").await.unwrap();
            fs.rename_path(c, "/a/g", "/h").await.unwrap();
            fs.create_path(c, "/gone").await.unwrap();
            fs.unlink_path(c, "/gone").await.unwrap();
            assert_eq!(fs.create_path(c, "/a/f").await, Err(FsError::Exists));
            assert_eq!(fs.rmdir_path(c, "/a").await, Err(FsError::NotEmpty));
            fs.unmount(c).await.unwrap();
            let dev2 = BlockDevice::probe(&m, 0, probe_options(mode)).await.unwrap();
            let _ = dev;
            let fs = mount(&dev2, c, FsProfile::default()).await.unwrap();
            assert_eq!(fs.read_path(c, "/a/f").await.unwrap(), data);
            assert_eq!(fs.read_path(c, "/h").await.unwrap(), b"hello");
            assert_eq!(fs.resolve(c, "/a/g").await, Err(FsError::NotFound));
            assert_eq!(fs.resolve(c, "/gone").await, Err(FsError::NotFound));
            let names: Vec<String> = fs.readdir(c, 2).await.unwrap().into_iter().map(|e| e.0).collect();
            assert_eq!(names, vec![".", "..", "a", "h"]);
        })
        .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    }
}

/// A journaled directory block, freed and then reused as file data written
/// in place, must not come back at checkpoint or remount (revocation).
#[test]
fn a_freed_journaled_block_reused_as_data_keeps_the_data() {
    for mode in Mode::ALL {
        let t = new_fs(mode, SsdProfile::optane_905p(), 2048, 2).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        let fs = t.fs.clone();
        let m = t.machine.clone();
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            fs.mkdir_path(c, "/d").await.unwrap();
            fs.fsync_path(c, "/d").await.unwrap();
            fs.rmdir_path(c, "/d").await.unwrap();
            fs.fsync_path(c, "/").await.unwrap();
            fs.create_path(c, "/f").await.unwrap();
            // Fill the disk so the freed block is reused.
            let chunk = vec![0xabu8; 64 << 10];
            let mut off = 0u64;
            loop {
                match fs.write_path(c, "/f", off, &chunk).await {
                    Ok(n) if n > 0 => off += n as u64,
                    _ => break,
                }
                fs.fsync_path(c, "/f").await.unwrap();
            }
            fs.fsync_path(c, "/f").await.unwrap();
            fs.unmount(c).await.unwrap();
            let dev2 = BlockDevice::probe(&m, 0, probe_options(mode)).await.unwrap();
            let fs = mount(&dev2, c, FsProfile::default()).await.unwrap();
            let got = fs.read_path(c, "/f").await.unwrap();
            assert_eq!(got.len() as u64, off);
            let bad = got.iter().position(|b| *b != 0xab);
            assert_eq!(
                bad, None,
                "{mode:?}: stale metadata inside the file at byte {bad:?}"
            );
        })
        .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    }
}
