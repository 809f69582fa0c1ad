//! POSIX-level behaviour of the live file system, its typed errors, and
//! that a remount (recovery scan) rebuilds the same tree and free space.
//!
//! The behaviour both file systems share is checked once, in
//! [`fsapi::testing::posix`]; what is particular to this one stays here.

mod common;

use common::{Env, CTX, W};
use fsapi::testing::posix;
use fsapi::Errno;
use fsapi::FileSystem as _;
use wofs::package::NAME_MAX;
use wofs::{Faults, SetAttr, Wofs, WofsError, MAX_SIZE, ROOT};

fn env() -> Env {
    Env::formatted(11)
}

fsapi::posix_tests!(W, NAME_MAX, MAX_SIZE, Some(999));

#[test]
fn setattr_sets_permissions_and_size() {
    env()
        .run(Faults::default(), |fs| async move {
            fs.create_path(CTX, "/f").await?;
            fs.write_path(CTX, "/f", 0, &[7u8; 6000]).await?;
            fs.truncate_path(CTX, "/f", 20).await?;
            fs.write_path(CTX, "/f", 30, b"z").await?;
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
    let usage = posix::a_remount_rebuilds_the_same_tree_and_free_space::<W>();
    assert!(usage.held_slots > 0, "an unlink package waits for its create");
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
            assert!(matches!(err, WofsError::Fs(Errno::NoSpace(_))), "{err}");
            assert_eq!(made, common::SLOTS as usize);
            // An unlink is a package too: with every slot taken it fails
            // cleanly and changes nothing.
            assert!(matches!(
                fs.unlink(CTX, ROOT, "f0").await,
                Err(WofsError::Fs(Errno::NoSpace(_)))
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

/// Found by the shared `bad_names_and_dot_entries_are_einval_and_change_nothing`:
/// unlink, rmdir and rename of `.` or `..` said ENOENT, not EINVAL.
#[test]
fn removing_or_renaming_a_dot_entry_is_einval() {
    env()
        .run(Faults::default(), |fs: Wofs| async move {
            let d = fs.mkdir_path(CTX, "/d").await?.ino;
            for name in [".", ".."] {
                assert!(matches!(
                    fs.unlink(CTX, d, name).await,
                    Err(WofsError::Fs(Errno::Invalid(_)))
                ));
                assert!(matches!(
                    fs.rmdir(CTX, d, name).await,
                    Err(WofsError::Fs(Errno::Invalid(_)))
                ));
                assert!(matches!(
                    fs.rename(CTX, d, name, ROOT, "x").await,
                    Err(WofsError::Fs(Errno::Invalid(_)))
                ));
            }
            assert_eq!(fs.readdir(CTX, ROOT).await?.len(), 1);
            Ok(())
        })
        .unwrap();
}
