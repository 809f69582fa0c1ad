//! Fifos, character and block devices and sockets (mknod(2)): their type
//! and device number survive a remount, fsck accepts them, and an
//! unlinked file still open reports no link.

mod common;

use common::{modes, remount, setup, ROOT};
use mqfs::{fsck, Ctx, FileType, FsError};

/// `makedev(8, 1)` (`/dev/sda1`) in Linux's 32-bit `dev_t` encoding.
const SDA1: u32 = 8 << 8 | 1;
/// `makedev(1, 3)` (`/dev/null`).
const NULL: u32 = 1 << 8 | 3;

const SPECIALS: [(&str, FileType, u32); 4] = [
    ("fifo", FileType::Fifo, 0),
    ("null", FileType::CharDev, NULL),
    ("sda1", FileType::BlockDev, SDA1),
    ("sock", FileType::Socket, 0),
];

#[test]
fn special_files_round_trip_through_remount_and_fsck() {
    for mode in modes() {
        let Some(t) = setup(mode, 4096, 2) else { continue };
        let fs = t.fs.clone();
        let m = t.machine.clone();
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            for (name, ft, rdev) in SPECIALS {
                let a = fs.mknod(c, ROOT, name, ft, 0o640, rdev).await?;
                assert_eq!(
                    (a.ftype, a.rdev, a.size, a.perm),
                    (ft, rdev, 0, 0o640),
                    "{mode:?} {name}"
                );
            }
            // mknod(2): the number is ignored for a fifo.
            let a = fs.mknod(c, ROOT, "fifo2", FileType::Fifo, 0o600, 77).await?;
            assert_eq!(a.rdev, 0);
            assert!(matches!(
                fs.mknod(c, ROOT, "d", FileType::Dir, 0o755, 0).await,
                Err(FsError::Invalid(_))
            ));
            assert!(
                fs.read(c, a.ino, 0, 10).await.is_err(),
                "a fifo holds no data here"
            );
            let fs = remount(fs, &m, c).await?;
            let listed = fs.readdir(c, ROOT).await?;
            for (name, ft, rdev) in SPECIALS {
                let a = fs.lookup(c, ROOT, name).await?;
                assert_eq!(
                    (a.ftype, a.rdev, a.perm, a.links),
                    (ft, rdev, 0o640, 1),
                    "{mode:?} {name}"
                );
                assert!(
                    listed
                        .iter()
                        .any(|(n, i, t)| n == name && *i == a.ino && *t == ft),
                    "{mode:?}: readdir gives {name}'s type: {listed:?}"
                );
            }
            fs.unlink(c, ROOT, "sock").await?;
            fs.unmount(c).await?;
            Ok::<_, FsError>(())
        })
        .unwrap()
        .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        let report = fsck(&**t.ctrl.backend()).unwrap();
        assert!(report.findings.is_empty(), "{mode:?}: {:?}", report.findings);
    }
}

#[test]
fn an_unlinked_open_file_reports_no_link() {
    let Some(t) = setup(mqfs::Mode::Classic, 4096, 1) else {
        return;
    };
    let fs = t.fs.clone();
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        let a = fs.create(c, ROOT, "f", 0o644).await?;
        fs.write(c, a.ino, 0, b"still here").await?;
        fs.open(c, a.ino).await?;
        fs.unlink(c, ROOT, "f").await?;
        let after = fs.getattr(c, a.ino).await?;
        assert_eq!(after.links, 0, "fstat of an unlinked open file");
        assert_eq!(fs.read(c, a.ino, 0, 64).await?, b"still here");
        fs.release(c, a.ino).await?;
        assert!(fs.getattr(c, a.ino).await.is_err(), "freed at the last close");
        Ok::<_, FsError>(())
    })
    .unwrap()
    .unwrap();
}
