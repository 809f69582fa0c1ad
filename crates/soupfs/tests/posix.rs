//! POSIX-level behaviour of the latest view, and that what the persister
//! wrote mounts to the same tree.

mod common;

use common::{run, S};
use fsapi::testing::posix;
use fsapi::{Ctx, Errno, FileSystem as _, FileType};
use soupfs::{Faults, FsError};

// The shared POSIX checks that fit SoupFS's contract, on the latest view
// (no persister). Not `posix_tests!` whole: `create_write_read_and_readdir`
// wants a directory's link count to be 2 plus its subdirectories (SoupFS
// counts a directory's names only); nor `link_unlink_and_link_counts`, which wants the
// last unlink to free the data at once (SoupFS frees it when the persister
// has persisted the dirrem: checked in
// `the_persisted_tree_mounts_to_the_latest_view_and_frees_everything_removed`);
// nor `a_remount_rebuilds_the_same_tree_and_free_space`, which compares
// the free space before the unmount (the adapter's is a `sync`) with the
// remount's: SoupFS's calls are not durable at return, and what they free
// is freed when the persister persists them (checked after `sync` below).
// `operations_survive_a_remount` fits: the remount follows the sync.

#[test]
fn errors_are_typed() {
    posix::errors_are_typed::<S>(
        soupfs::layout::NAME_MAX,
        soupfs::layout::INDEX_SLOTS * soupfs::layout::PAGE,
        Some(999),
    );
}

#[test]
fn a_missing_parent_or_name_is_enoent_and_changes_nothing() {
    posix::a_missing_parent_or_name_is_enoent_and_changes_nothing::<S>();
}

#[test]
fn a_non_empty_directory_is_enotempty_and_changes_nothing() {
    posix::a_non_empty_directory_is_enotempty_and_changes_nothing::<S>();
}

#[test]
fn an_existing_name_is_eexist_and_changes_nothing() {
    posix::an_existing_name_is_eexist_and_changes_nothing::<S>();
}

#[test]
fn not_a_directory_is_enotdir_and_changes_nothing() {
    posix::not_a_directory_is_enotdir_and_changes_nothing::<S>();
}

#[test]
fn a_directory_where_a_file_is_needed_is_eisdir_and_changes_nothing() {
    posix::a_directory_where_a_file_is_needed_is_eisdir_and_changes_nothing::<S>();
}

#[test]
fn bad_names_and_dot_entries_are_einval_and_change_nothing() {
    posix::bad_names_and_dot_entries_are_einval_and_change_nothing::<S>();
}

#[test]
fn a_name_too_long_is_enametoolong_and_changes_nothing() {
    posix::a_name_too_long_is_enametoolong_and_changes_nothing::<S>(soupfs::layout::NAME_MAX);
}

#[test]
fn a_zero_length_write_past_the_end_changes_nothing() {
    posix::a_zero_length_write_past_the_end_changes_nothing::<S>();
}

/// The adapter's unmount is a sync.
#[test]
fn operations_survive_a_remount() {
    posix::operations_survive_a_remount::<S>();
}

#[test]
fn rename_moves_replaces_and_checks_types() {
    posix::rename_moves_replaces_and_checks_types::<S>();
}

#[test]
fn truncate_shrinks_and_grows_with_zeros() {
    posix::truncate_shrinks_and_grows_with_zeros::<S>();
}

#[test]
fn create_write_read_and_errors() {
    run(1, Faults::default(), true, |fs, c| async move {
        fs.mkdir_path(c, "/d").await?;
        let f = fs.create_path(c, "/d/f").await?;
        assert_eq!(fs.create_path(c, "/d/f").await, Err(FsError::Fs(Errno::Exists)));
        assert_eq!(
            fs.create_path(c, "/nope/f").await,
            Err(FsError::Fs(Errno::NotFound))
        );
        fs.write(c, f.ino, 0, b"hello").await?;
        fs.write(c, f.ino, 5000, b"world").await?;
        let all = fs.read_path(c, "/d/f").await?;
        assert_eq!(all.len(), 5005);
        assert_eq!(&all[..5], b"hello");
        assert!(all[5..5000].iter().all(|&b| b == 0), "the gap reads as zeros");
        assert_eq!(&all[5000..], b"world");
        assert_eq!(fs.read(c, f.ino, 4998, 100).await?, b"\0\0world".to_vec());
        assert_eq!(
            fs.write_path(c, "/d", 0, b"x").await,
            Err(FsError::Fs(Errno::IsDir))
        );
        assert_eq!(fs.rmdir_path(c, "/d").await, Err(FsError::Fs(Errno::NotEmpty)));
        assert_eq!(fs.unlink_path(c, "/d").await, Err(FsError::Fs(Errno::IsDir)));
        assert_eq!(fs.rmdir_path(c, "/d/f").await, Err(FsError::Fs(Errno::NotDir)));
        assert_eq!(
            fs.create_path(c, &format!("/{}", "n".repeat(256))).await,
            Err(FsError::Fs(Errno::NameTooLong))
        );
        assert!(matches!(
            fs.create_path(c, "/d/..").await,
            Err(FsError::Fs(Errno::Invalid(_)))
        ));
        Ok(())
    });
}

#[test]
fn truncate_link_rename_readdir() {
    run(2, Faults::default(), true, |fs, c| async move {
        fs.mkdir_path(c, "/a").await?;
        fs.mkdir_path(c, "/b").await?;
        let f = fs.create_path(c, "/a/f").await?;
        fs.write(c, f.ino, 0, &[7u8; 9000]).await?;
        fs.truncate(c, f.ino, 100).await?;
        assert_eq!(fs.read_path(c, "/a/f").await?, vec![7u8; 100]);
        fs.truncate(c, f.ino, 200).await?;
        let r = fs.read_path(c, "/a/f").await?;
        assert_eq!((&r[..100], &r[100..]), (&[7u8; 100][..], &[0u8; 100][..]));
        let l = fs.link_path(c, "/a/f", "/b/g").await?;
        assert_eq!((l.ino, l.links), (f.ino, 2));
        assert_eq!(
            fs.link_path(c, "/a", "/b/x").await,
            Err(FsError::Fs(Errno::Invalid("hard link to a directory")))
        );
        fs.rename_path(c, "/a/f", "/b/h").await?;
        assert_eq!(fs.resolve(c, "/a/f").await, Err(FsError::Fs(Errno::NotFound)));
        let names: Vec<String> = fs
            .readdir(c, fs.resolve(c, "/b").await?)
            .await?
            .into_iter()
            .map(|e| e.0)
            .collect();
        assert_eq!(names, ["g", "h"]);
        // Rename over an existing file replaces it.
        let o = fs.create_path(c, "/b/o").await?;
        fs.rename_path(c, "/b/h", "/b/o").await?;
        assert_eq!(fs.resolve(c, "/b/o").await?, f.ino);
        assert_eq!(
            fs.getattr(c, o.ino).await?.links,
            0,
            "the replaced inode has no name"
        );
        fs.sync(c).await?;
        assert_eq!(
            fs.getattr(c, o.ino).await,
            Err(FsError::Fs(Errno::NotFound)),
            "and is freed once persisted"
        );
        assert_eq!(
            fs.rename_path(c, "/b", "/b/z")
                .await
                .map_err(|e| matches!(e, FsError::Fs(Errno::Invalid(_)))),
            Err(true)
        );
        assert_eq!(
            fs.rename_path(c, "/a", "/b/o").await,
            Err(FsError::Fs(Errno::NotDir))
        );
        fs.rename_path(c, "/a", "/b/a2").await?;
        assert_eq!(
            fs.getattr(c, fs.resolve(c, "/b/a2").await?).await?.ftype,
            FileType::Dir
        );
        fs.unlink_path(c, "/b/g").await?;
        fs.unlink_path(c, "/b/o").await?;
        fs.rmdir_path(c, "/b/a2").await?;
        assert_eq!(fs.readdir(c, fs.resolve(c, "/b").await?).await?, vec![]);
        fs.rmdir_path(c, "/b").await?;
        Ok(())
    });
}

#[test]
fn the_persisted_tree_mounts_to_the_latest_view_and_frees_everything_removed() {
    use pcie_sim::{Executor, Machine, MachineProfile, Pmem, TraceMode};
    use soupfs::{SoupFs, SoupProfile};
    let (pm, free_after_mkfs) = run(3, Faults::default(), true, |fs, c| async move {
        let free0 = fs.free_space().await;
        fs.mkdir_path(c, "/d").await?;
        fs.create_path(c, "/d/x").await?;
        fs.write_path(c, "/d/x", 0, b"persist me").await?;
        fs.create_path(c, "/gone").await?;
        fs.write_path(c, "/gone", 0, &[1u8; 5000]).await?;
        fs.unlink_path(c, "/gone").await?;
        fs.chmod(c, fs.resolve(c, "/d/x").await?, 0o600).await?;
        fs.sync(c).await?;
        assert_eq!(fs.pending_ops().await, 0);
        assert!(fs.persist_stats().await.edges > 0);
        Ok(free0)
    });
    let ex = Executor::new(9);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Off);
    let pm2 = Pmem::attach_with_image(&m, common::pm_profile(), pm.persistent_image()).expect("attach");
    let core = Ctx::on(0);
    ex.block_on(async move {
        let (fs, rep) = SoupFs::mount(&m, pm2, core, SoupProfile::default(), Faults::default()).await?;
        assert_eq!(rep.leaked_lines, 0, "{rep:?}");
        assert_eq!(rep.inodes, 3);
        assert_eq!(fs.read_path(core, "/d/x").await?, b"persist me");
        let a = fs.getattr(core, fs.resolve(core, "/d/x").await?).await?;
        assert_eq!((a.perm, a.links, a.size), (0o600, 1, 10));
        assert_eq!(fs.resolve(core, "/gone").await, Err(FsError::Fs(Errno::NotFound)));
        let _ = free_after_mkfs;
        Ok::<_, FsError>(())
    })
    .expect("sim")
    .expect("mount");
}

#[test]
fn a_full_pm_says_no_space_and_removing_files_gives_the_space_back() {
    run(7, Faults::default(), true, |fs, c| async move {
        let lines = |(p, l): (usize, usize)| p * 64 + l;
        let free0 = lines(fs.free_space().await);
        let mut made = Vec::new();
        let full = loop {
            let p = format!("/f{}", made.len());
            let a = match fs.create_path(c, &p).await {
                Ok(a) => a,
                Err(e) => break e,
            };
            made.push(p);
            if let Err(e) = fs.write(c, a.ino, 0, &[1u8; 8192]).await {
                break e;
            }
            if made.len() > 1000 {
                break FsError::Fs(Errno::Invalid("never full"));
            }
        };
        assert_eq!(full, FsError::Fs(Errno::NoSpace("pages")));
        // No page left: a mkdir takes its inode line, fails on the bucket
        // page and gives the line back.
        assert_eq!(
            fs.mkdir_path(c, "/nodir").await.map(|_| ()),
            Err(FsError::Fs(Errno::NoSpace("pages")))
        );
        assert!(made.len() > 50, "{} files of 8 KiB in 1 MiB", made.len());
        for p in &made {
            fs.unlink_path(c, p).await?;
        }
        // Freed space returns only once the removals are persisted, all
        // of it (nothing a failed call took is lost).
        fs.sync(c).await?;
        assert_eq!(lines(fs.free_space().await), free0);
        let a = fs.create_path(c, "/again").await?;
        fs.write(c, a.ino, 0, &[2u8; 8192]).await?;
        assert_eq!(fs.read_path(c, "/again").await?, vec![2u8; 8192]);
        Ok(())
    });
}

/// Found by the shared `a_zero_length_write_past_the_end_changes_nothing`:
/// an empty write past the end grew the file to the offset (and queued a
/// size change for the persister).
#[test]
fn an_empty_write_past_the_end_keeps_the_size() {
    run(1, Faults::default(), false, |fs, c| async move {
        let f = fs.create_path(c, "/f").await?.ino;
        fs.write(c, f, 0, b"abc").await?;
        let free = fs.try_free_space();
        assert_eq!(fs.write(c, f, 5000, b"").await?, 0);
        assert_eq!(fs.getattr(c, f).await?.size, 3);
        assert_eq!(fs.read_path(c, "/f").await?, b"abc");
        assert_eq!(fs.try_free_space(), free);
        Ok(())
    });
}

/// Found by the shared `bad_names_and_dot_entries_are_einval_and_change_nothing`:
/// unlink, rmdir and rename of `.` or `..` said ENOENT, not EINVAL.
#[test]
fn removing_or_renaming_a_dot_entry_is_einval() {
    run(1, Faults::default(), false, |fs, c| async move {
        let d = fs.mkdir_path(c, "/d").await?.ino;
        let root = fs.root();
        for name in [".", ".."] {
            assert!(matches!(
                fs.unlink(c, d, name).await,
                Err(FsError::Fs(Errno::Invalid(_)))
            ));
            assert!(matches!(
                fs.rmdir(c, d, name).await,
                Err(FsError::Fs(Errno::Invalid(_)))
            ));
            assert!(matches!(
                fs.rename(c, d, name, root, "x").await,
                Err(FsError::Fs(Errno::Invalid(_)))
            ));
        }
        assert_eq!(fs.readdir(c, root).await?.len(), 1);
        Ok(())
    });
}
