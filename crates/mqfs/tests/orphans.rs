//! A file unlinked while open lives on until its last close (unlink(2));
//! if the machine stops first, the orphan table lets mount free it, and
//! fsck accepts it meanwhile (ext4's orphan processing).

mod common;

use ccnvme::BlockDevice;
use common::{modes, setup};
use mqfs::layout::{ORPHAN_INO, ROOT_INO};
use mqfs::{fsck, mount, probe_options, BlockSource, Ctx, FindingKind, FsError, FsProfile};

/// An image with a byte range of one block zeroed.
struct Cleared<'a> {
    inner: &'a dyn BlockSource,
    block: u64,
    range: std::ops::Range<usize>,
}

impl BlockSource for Cleared<'_> {
    fn blocks(&self) -> u64 {
        self.inner.blocks()
    }
    fn read(&self, b: u64, buf: &mut [u8; 4096]) {
        self.inner.read(b, buf);
        if b == self.block {
            buf[self.range.clone()].fill(0);
        }
    }
}

#[test]
fn an_unlinked_open_file_lives_until_its_last_close() {
    for mode in modes() {
        let Some(t) = setup(mode, 4096, 2) else { continue };
        let fs = t.fs.clone();
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            let free0 = fs.statfs(c).await.unwrap().free_inodes;
            fs.create_path(c, "/f").await.unwrap();
            fs.write_path(c, "/f", 0, &[5u8; 5000]).await.unwrap();
            let ino = fs.resolve(c, "/f").await.unwrap();
            fs.open(c, ino).await.unwrap();
            fs.open(c, ino).await.unwrap();
            fs.unlink_path(c, "/f").await.unwrap();
            assert_eq!(fs.resolve(c, "/f").await, Err(FsError::NotFound));
            // Still a file: written, synced and read through the inode.
            fs.write(c, ino, 5000, &[6u8; 100]).await.unwrap();
            fs.fsync(c, ino).await.unwrap();
            assert_eq!(fs.getattr(c, ino).await.unwrap().links, 0);
            assert_eq!(fs.read(c, ino, 4990, 200).await.unwrap().len(), 110);
            fs.release(c, ino).await.unwrap();
            assert_eq!(fs.getattr(c, ino).await.unwrap().size, 5100);
            assert_eq!(fs.statfs(c).await.unwrap().free_inodes, free0 - 1);
            // The last close frees it.
            fs.release(c, ino).await.unwrap();
            assert!(fs.getattr(c, ino).await.is_err());
            assert_eq!(fs.statfs(c).await.unwrap().free_inodes, free0);
            assert!(matches!(fs.release(c, ino).await, Err(FsError::Invalid(_))));
            assert_eq!(fs.open(c, ROOT_INO).await, Err(FsError::IsDir));
        })
        .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    }
}

#[test]
fn mount_frees_the_orphans_a_stop_left_and_fsck_accepts_them_meanwhile() {
    for mode in modes() {
        let Some(t) = setup(mode, 4096, 2) else { continue };
        let fs = t.fs.clone();
        let m = t.machine.clone();
        let (free0, ino) =
            t.ex.block_on(async move {
                let c = Ctx::on(0);
                let free0 = fs.statfs(c).await.unwrap().free_inodes;
                fs.create_path(c, "/f").await.unwrap();
                fs.write_path(c, "/f", 0, &[5u8; 9000]).await.unwrap();
                let ino = fs.resolve(c, "/f").await.unwrap();
                fs.open(c, ino).await.unwrap();
                fs.unlink_path(c, "/f").await.unwrap();
                // Everything durable and home, the file still open: what a
                // stop leaves once recovery has replayed the journal.
                fs.unmount(c).await.unwrap();
                (free0, ino)
            })
            .unwrap();
        let report = fsck(&**t.ctrl.backend()).unwrap();
        assert!(report.findings.is_empty(), "{mode:?}: {:?}", report.findings);
        // Without its entry in the orphan table the inode is a leak: the
        // table is what makes it legitimate.
        let (blk, off) = t.fs.superblock().inode_location(ORPHAN_INO).unwrap();
        let report = fsck(&Cleared {
            inner: &**t.ctrl.backend(),
            block: blk,
            range: off..off + 256,
        })
        .unwrap();
        assert!(
            report
                .findings
                .iter()
                .any(|f| f.kind == FindingKind::InodeMarkedButUnreachable && f.ino == Some(ino)),
            "{mode:?}: {:?}",
            report.findings
        );
        // Mount frees it.
        let fs =
            t.ex.block_on(async move {
                let c = Ctx::on(0);
                let dev = BlockDevice::probe(&m, 0, probe_options(mode)).await.unwrap();
                let fs = mount(&dev, c, FsProfile::default()).await.unwrap();
                assert_eq!(fs.statfs(c).await.unwrap().free_inodes, free0, "{mode:?}");
                assert!(fs.getattr(c, ino).await.is_err());
                fs.unmount(c).await.unwrap();
                fs
            })
            .unwrap();
        drop(fs);
        let report = fsck(&**t.ctrl.backend()).unwrap();
        assert!(report.findings.is_empty(), "{mode:?}: {:?}", report.findings);
    }
}
