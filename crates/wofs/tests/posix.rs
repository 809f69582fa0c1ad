//! POSIX-level behaviour of the live file system, its typed errors, and
//! that a remount (recovery scan) rebuilds the same tree and free space.

mod common;

use common::{Env, CTX};
use fsapi::FileSystem as _;
use wofs::{Faults, FileType, SetAttr, Wofs, WofsError, MAX_SIZE, ROOT};

fn err<T: std::fmt::Debug>(r: Result<T, WofsError>) -> WofsError {
    r.unwrap_err()
}

fn env() -> Env {
    Env::formatted(11)
}

#[test]
fn create_write_read_and_readdir() {
    env()
        .run(Faults::default(), |fs| async move {
            fs.mkdir_path(CTX, "/d").await?;
            let a = fs.create_path(CTX, "/d/f").await?;
            assert_eq!((a.ftype, a.size, a.links, a.perm), (FileType::File, 0, 1, 0o644));
            assert_eq!(fs.write_path(CTX, "/d/f", 0, b"hello").await?, 5);
            assert_eq!(fs.write_path(CTX, "/d/f", 3, b"p me").await?, 4);
            assert_eq!(fs.read_path(CTX, "/d/f").await?, b"help me");
            // A write past the end leaves a hole of zeros.
            fs.write_path(CTX, "/d/f", 10000, b"x").await?;
            let data = fs.read_path(CTX, "/d/f").await?;
            assert_eq!(data.len(), 10001);
            assert!(data[7..10000].iter().all(|&b| b == 0));
            assert_eq!(
                fs.getattr(CTX, a.ino).await?.pages,
                2,
                "the middle page is a hole"
            );
            assert_eq!(fs.read(CTX, a.ino, 2, 3).await?, b"lp ");
            assert_eq!(fs.read(CTX, a.ino, 20000, 3).await?, b"");
            let names: Vec<_> = fs
                .readdir_path(CTX, "/")
                .await?
                .into_iter()
                .map(|e| e.0)
                .collect();
            assert_eq!(names, ["d"]);
            assert_eq!(fs.getattr(CTX, ROOT).await?.links, 3);
            fs.fsync_path(CTX, "/d/f").await
        })
        .unwrap();
}

#[test]
fn errors_are_typed() {
    env()
        .run(Faults::default(), |fs| async move {
            fs.mkdir_path(CTX, "/d").await?;
            fs.create_path(CTX, "/d/f").await?;
            assert!(matches!(
                err(fs.create_path(CTX, "/d/f").await),
                WofsError::Exists
            ));
            assert!(matches!(err(fs.mkdir_path(CTX, "/d").await), WofsError::Exists));
            assert!(matches!(
                err(fs.create_path(CTX, "/nope/f").await),
                WofsError::NotFound
            ));
            assert!(matches!(
                err(fs.unlink_path(CTX, "/d/g").await),
                WofsError::NotFound
            ));
            assert!(matches!(err(fs.read_path(CTX, "/x").await), WofsError::NotFound));
            assert!(matches!(err(fs.rmdir_path(CTX, "/d").await), WofsError::NotEmpty));
            assert!(matches!(err(fs.unlink_path(CTX, "/d").await), WofsError::IsDir));
            assert!(matches!(err(fs.rmdir_path(CTX, "/d/f").await), WofsError::NotDir));
            assert!(matches!(
                err(fs.create_path(CTX, "/d/f/g").await),
                WofsError::NotDir
            ));
            assert!(matches!(err(fs.read_path(CTX, "/d").await), WofsError::IsDir));
            assert!(matches!(
                err(fs.write_path(CTX, "/d", 0, b"x").await),
                WofsError::IsDir
            ));
            assert!(matches!(
                err(fs.link_path(CTX, "/d", "/e").await),
                WofsError::Invalid(_)
            ));
            assert!(matches!(
                err(fs.rename_path(CTX, "/d", "/d/sub").await),
                WofsError::Invalid(_)
            ));
            assert!(matches!(
                err(fs.create_path(CTX, &format!("/{}", "n".repeat(161))).await),
                WofsError::Invalid(_)
            ));
            assert!(matches!(
                err(fs.create(CTX, ROOT, "..", 0o644).await),
                WofsError::Invalid(_)
            ));
            assert!(matches!(
                err(fs.write_path(CTX, "/d/f", MAX_SIZE, b"x").await),
                WofsError::TooLarge { .. }
            ));
            assert!(matches!(
                err(fs.truncate_path(CTX, "/d", 0).await),
                WofsError::IsDir
            ));
            assert!(matches!(err(fs.getattr(CTX, 999).await), WofsError::NotFound));
            // Nothing changed.
            assert_eq!(fs.readdir_path(CTX, "/d").await?.len(), 1);
            Ok(())
        })
        .unwrap();
}

#[test]
fn link_unlink_and_link_counts() {
    env()
        .run(Faults::default(), |fs| async move {
            fs.create_path(CTX, "/a").await?;
            fs.write_path(CTX, "/a", 0, b"data").await?;
            assert_eq!(fs.link_path(CTX, "/a", "/b").await?.links, 2);
            fs.unlink_path(CTX, "/a").await?;
            assert_eq!(fs.read_path(CTX, "/b").await?, b"data");
            let b = fs.resolve(CTX, "/b").await?;
            assert_eq!(fs.getattr(CTX, b).await?.links, 1);
            let free = fs.usage().free_pages;
            fs.unlink_path(CTX, "/b").await?;
            assert_eq!(fs.usage().free_pages, free + 1, "the last link frees the data");
            assert!(matches!(fs.getattr(CTX, b).await, Err(WofsError::NotFound)));
            Ok(())
        })
        .unwrap();
}

#[test]
fn rename_moves_replaces_and_checks_types() {
    env()
        .run(Faults::default(), |fs| async move {
            fs.mkdir_path(CTX, "/d").await?;
            fs.mkdir_path(CTX, "/e").await?;
            fs.create_path(CTX, "/d/a").await?;
            fs.write_path(CTX, "/d/a", 0, b"A").await?;
            fs.create_path(CTX, "/b").await?;
            fs.write_path(CTX, "/b", 0, b"B").await?;
            fs.rename_path(CTX, "/d/a", "/b").await?;
            assert_eq!(fs.read_path(CTX, "/b").await?, b"A");
            assert!(fs.readdir_path(CTX, "/d").await?.is_empty());
            assert!(matches!(
                fs.rename_path(CTX, "/d", "/b").await,
                Err(WofsError::NotDir)
            ));
            assert!(matches!(
                fs.rename_path(CTX, "/b", "/d").await,
                Err(WofsError::IsDir)
            ));
            fs.create_path(CTX, "/e/x").await?;
            assert!(matches!(
                fs.rename_path(CTX, "/d", "/e").await,
                Err(WofsError::NotEmpty)
            ));
            fs.rename_path(CTX, "/e", "/d").await?;
            assert_eq!(fs.readdir_path(CTX, "/d").await?[0].0, "x");
            fs.rename_path(CTX, "/b", "/d/y").await?;
            fs.rename_path(CTX, "/d/y", "/d/y").await?;
            assert_eq!(fs.read_path(CTX, "/d/y").await?, b"A");
            let names: Vec<_> = fs
                .readdir_path(CTX, "/")
                .await?
                .into_iter()
                .map(|e| e.0)
                .collect();
            assert_eq!(names, ["d"]);
            Ok(())
        })
        .unwrap();
}

#[test]
fn truncate_and_setattr() {
    env()
        .run(Faults::default(), |fs| async move {
            fs.create_path(CTX, "/f").await?;
            fs.write_path(CTX, "/f", 0, &[7u8; 6000]).await?;
            fs.truncate_path(CTX, "/f", 10).await?;
            assert_eq!(fs.read_path(CTX, "/f").await?, [7u8; 10]);
            // Growing again shows zeros, not the old bytes.
            fs.truncate_path(CTX, "/f", 5000).await?;
            let d = fs.read_path(CTX, "/f").await?;
            assert_eq!(d.len(), 5000);
            assert!(d[10..].iter().all(|&b| b == 0));
            fs.truncate_path(CTX, "/f", 20).await?;
            fs.write_path(CTX, "/f", 30, b"z").await?;
            let d = fs.read_path(CTX, "/f").await?;
            assert_eq!(&d[..], &[&[7u8; 10][..], &[0u8; 20][..], b"z"].concat()[..]);
            let ino = fs.resolve(CTX, "/f").await?;
            let set = SetAttr {
                perm: Some(0o600),
                size: Some(0),
            };
            let a = fs.setattr(CTX, ino, &set).await?;
            assert_eq!((a.perm, a.size, a.pages), (0o600, 0, 0));
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_remount_rebuilds_the_same_tree_and_free_space() {
    let mut env = env();
    let (tree, usage) = env
        .run(Faults::default(), |fs| async move {
            fs.mkdir_path(CTX, "/d").await?;
            fs.create_path(CTX, "/d/a").await?;
            fs.write_path(CTX, "/d/a", 0, &[1u8; 9000]).await?;
            fs.link_path(CTX, "/d/a", "/l").await?;
            fs.create_path(CTX, "/b").await?;
            fs.rename_path(CTX, "/d/a", "/b").await?;
            fs.unlink_path(CTX, "/l").await?;
            fs.truncate_path(CTX, "/b", 100).await?;
            fs.create_path(CTX, "/c").await?;
            fs.unlink_path(CTX, "/c").await?;
            assert!(
                fs.usage().held_slots > 0,
                "an unlink package waits for its create"
            );
            Ok((fs.snapshot(CTX).await?, fs.usage()))
        })
        .unwrap();
    env.power_cycle();
    let (tree2, usage2) = env
        .run(Faults::default(), |fs| async move {
            Ok((fs.snapshot(CTX).await?, fs.usage()))
        })
        .unwrap();
    assert_eq!(tree, tree2);
    assert_eq!(usage, usage2);
}

#[test]
fn slots_run_out_with_a_typed_error() {
    env()
        .run(Faults::default(), |fs| async move {
            let mut made = 0;
            let err = loop {
                match fs.create(CTX, ROOT, &format!("f{made}"), 0o644).await {
                    Ok(_) => made += 1,
                    Err(e) => break e,
                }
            };
            assert!(matches!(err, WofsError::NoSpace(_)), "{err}");
            assert_eq!(made, common::SLOTS as usize);
            // An unlink is a package too: with every slot taken it fails
            // cleanly and changes nothing.
            assert!(matches!(
                fs.unlink(CTX, ROOT, "f0").await,
                Err(WofsError::NoSpace(_))
            ));
            assert_eq!(fs.readdir(CTX, ROOT).await?.len(), made);
            Ok(())
        })
        .unwrap();
}

#[test]
fn an_unlink_package_is_kept_until_its_create_is_overwritten() {
    env()
        .run(Faults::default(), |fs: Wofs| async move {
            fs.create_path(CTX, "/a").await?;
            let before = fs.usage();
            fs.unlink_path(CTX, "/a").await?;
            let after = fs.usage();
            assert_eq!(after.held_slots, 1);
            assert_eq!(after.free_slots, before.free_slots, "create freed, unlink held");
            fs.create_path(CTX, "/b").await?;
            assert_eq!(fs.usage().held_slots, 0, "the create's slot was reused");
            Ok(())
        })
        .unwrap();
}
