//! Data written home outside a sync: O_DIRECT writes and sync_file_range
//! reach the device before they return (a buffered write does not);
//! unaligned direct writes and stores past the end of a mapping are
//! refused; none of them changes what a read returns beyond a write's.

use mqfs::testing::new_fs;
use mqfs::{Ctx, FsError, Mode};
use nvme_ctrl::SsdProfile;

const BLOCKS: u64 = 4096;

/// True if some device block holds exactly `data` (one block).
fn on_media(t: &mqfs::testing::TestFs, data: &[u8]) -> bool {
    let media = t.ctrl.backend().media();
    let mut buf = [0u8; 4096];
    (0..BLOCKS).any(|b| {
        media.read(b, &mut buf);
        buf[..] == data[..]
    })
}

fn block(seed: u8) -> Vec<u8> {
    (0..4096u32)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[test]
fn direct_writes_and_sync_file_range_reach_the_device_before_they_return() {
    for mode in Mode::ALL {
        // A drive without a volatile cache: a completed write is on the
        // media.
        let t =
            new_fs(mode, SsdProfile::optane_905p(), BLOCKS, 2).unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        let fs = t.fs.clone();
        let c = Ctx::on(0);
        let (direct, buffered) = (block(1), block(2));
        t.ex.block_on({
            let fs = fs.clone();
            let (direct, buffered) = (direct.clone(), buffered.clone());
            async move {
                fs.create_path(c, "/d").await.unwrap();
                fs.create_path(c, "/b").await.unwrap();
                fs.fsync_path(c, "/").await.unwrap();
                let d = fs.resolve(c, "/d").await.unwrap();
                let b = fs.resolve(c, "/b").await.unwrap();
                assert!(matches!(
                    fs.write_direct(c, d, 1, &direct).await,
                    Err(FsError::Invalid(_))
                ));
                assert!(matches!(
                    fs.write_direct(c, d, 0, &direct[..100]).await,
                    Err(FsError::Invalid(_))
                ));
                assert_eq!(fs.write_direct(c, d, 4096, &direct).await.unwrap(), 4096);
                fs.write(c, b, 0, &buffered).await.unwrap();
            }
        })
        .unwrap();
        assert!(
            on_media(&t, &direct),
            "{mode:?}: the direct write is not on the device"
        );
        assert!(
            !on_media(&t, &buffered),
            "{mode:?}: a buffered write went out by itself"
        );
        t.ex.block_on({
            let fs = fs.clone();
            let direct = direct.clone();
            async move {
                let d = fs.resolve(c, "/d").await.unwrap();
                let b = fs.resolve(c, "/b").await.unwrap();
                // A range that does not hold the page writes nothing.
                fs.sync_file_range(c, b, 4096, 4096).await.unwrap();
                let got = fs.read(c, d, 0, 8192).await.unwrap();
                assert_eq!(&got[..4096], &[0u8; 4096][..]);
                assert_eq!(&got[4096..], &direct[..]);
            }
        })
        .unwrap();
        assert!(!on_media(&t, &buffered), "{mode:?}: sfr wrote outside its range");
        t.ex.block_on({
            let fs = fs.clone();
            async move {
                let b = fs.resolve(c, "/b").await.unwrap();
                fs.sync_file_range(c, b, 0, 0).await.unwrap();
            }
        })
        .unwrap();
        assert!(on_media(&t, &buffered), "{mode:?}: sfr did not write the range");
    }
}

#[test]
fn a_store_through_a_mapping_stays_within_the_file() {
    let t = new_fs(Mode::Mq, SsdProfile::optane_905p(), BLOCKS, 2).unwrap();
    let fs = t.fs.clone();
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        fs.create_path(c, "/m").await.unwrap();
        fs.write_path(c, "/m", 0, &[7u8; 100]).await.unwrap();
        let m = fs.resolve(c, "/m").await.unwrap();
        let e = fs.write_mapped(c, m, 90, &[1u8; 20]).await.unwrap_err();
        assert_eq!(e.errno(), 22, "{e}");
        assert_eq!(fs.write_mapped(c, m, 90, &[1u8; 10]).await.unwrap(), 10);
        let got = fs.read(c, m, 0, 200).await.unwrap();
        assert_eq!(got.len(), 100);
        assert_eq!(&got[88..], &[7, 7, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]);
    })
    .unwrap();
}
