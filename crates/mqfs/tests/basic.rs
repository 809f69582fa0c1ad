//! Basic operations in each mode, across unmount and mount (with the
//! shared remount check, `fsapi::testing::posix`, in tests/posix.rs).

use ccnvme::BlockDevice;
use mqfs::testing::new_fs;
use mqfs::{mount, probe_options, Ctx, FsProfile, Mode};
use nvme_ctrl::SsdProfile;

// Creates, writes, renames and unlinks surviving a remount is the shared
// `fsapi::testing::posix::operations_survive_a_remount` (tests/posix.rs).

/// MQFS's readdir lists "." and ".." first (the shared interface leaves
/// them out).
#[test]
fn readdir_lists_the_dot_entries_first() {
    for mode in Mode::ALL {
        let t = new_fs(mode, SsdProfile::optane_905p(), 16384, 2).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        let fs = t.fs.clone();
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            fs.mkdir_path(c, "/a").await.unwrap();
            fs.create_path(c, "/h").await.unwrap();
            let names: Vec<String> = fs.readdir(c, 2).await.unwrap().into_iter().map(|e| e.0).collect();
            assert_eq!(names, vec![".", "..", "a", "h"]);
            let a = fs.resolve(c, "/a").await.unwrap();
            let dots: Vec<(String, u32)> = fs
                .readdir(c, a)
                .await
                .unwrap()
                .into_iter()
                .map(|e| (e.0, e.1))
                .collect();
            assert_eq!(dots, vec![(".".to_string(), a), ("..".to_string(), 2)]);
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
