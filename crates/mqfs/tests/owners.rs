//! `Fs::make_as`: a caller needs write and search permission on the
//! directory, and the new inode is the caller's (or a set-group-ID
//! directory's group's) from the operation that makes it, through a
//! remount.

mod common;

use common::{modes, remount, setup, ROOT};
use mqfs::{Cred, Ctx, FileType, FsError, NewInode, SetAttr};

#[test]
fn make_as_checks_the_directory_and_owns_the_inode() {
    for mode in modes() {
        let Some(t) = setup(mode, 4096, 2) else { continue };
        let fs = t.fs.clone();
        let m = t.machine.clone();
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            let u = Cred {
                uid: 1001,
                gid: 1001,
                groups: vec![],
            };
            let d = fs.mkdir(c, ROOT, "d", 0o755).await?;
            // Root's 0755 directory: searchable, not writable for u.
            assert_eq!(
                fs.make_as(c, d.ino, "f", NewInode::File, 0o644, &u).await,
                Err(FsError::Access)
            );
            let set = |perm| SetAttr {
                perm: Some(perm),
                gid: Some(50),
                ..SetAttr::default()
            };
            fs.setattr(c, d.ino, &set(0o2777)).await?;
            let f = fs.make_as(c, d.ino, "f", NewInode::File, 0o644, &u).await?;
            assert_eq!((f.uid, f.gid, f.perm), (1001, 50, 0o644), "{mode:?}");
            let sub = fs.make_as(c, d.ino, "sub", NewInode::Dir, 0o700, &u).await?;
            assert_eq!((sub.uid, sub.gid, sub.perm), (1001, 50, 0o2700));
            let l = fs
                .make_as(c, sub.ino, "l", NewInode::Symlink("f"), 0o777, &u)
                .await?;
            assert_eq!((l.uid, l.gid, l.ftype), (1001, 50, FileType::Symlink));
            // An existing name is EEXIST even without write permission.
            fs.setattr(c, d.ino, &set(0o2755)).await?;
            assert_eq!(
                fs.make_as(c, d.ino, "f", NewInode::File, 0o644, &u).await,
                Err(FsError::Exists)
            );
            fs.setattr(c, d.ino, &set(0o2744)).await?;
            assert_eq!(
                fs.make_as(c, d.ino, "f", NewInode::File, 0o644, &u).await,
                Err(FsError::Access),
                "no search permission: not even EEXIST"
            );
            fs.sync(c).await?;
            let fs = remount(fs, &m, c).await?;
            let f = fs.lookup(c, d.ino, "f").await?;
            assert_eq!((f.uid, f.gid), (1001, 50));
            let sub = fs.lookup(c, d.ino, "sub").await?;
            assert_eq!((sub.uid, sub.gid, sub.perm), (1001, 50, 0o2700));
            Ok::<_, FsError>(())
        })
        .unwrap()
        .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
    }
}
