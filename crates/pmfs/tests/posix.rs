//! POSIX-level behaviour of the live file system, its typed errors, and
//! that a remount (recovery, tree check) rebuilds the same tree and free
//! space.
//!
//! The behaviour both file systems share is checked once, in
//! [`fsapi::testing::posix`]; what is particular to this one stays here.

mod common;

use common::{Env, CTX, P};
use fsapi::testing::posix;
use fsapi::Errno;
use fsapi::FileSystem as _;
use pmfs::{Faults, PmfsError, MAX_SIZE, NAME_MAX, ROOT};

fn env() -> Env {
    Env::formatted(11)
}

fsapi::posix_tests!(P, NAME_MAX, MAX_SIZE, Some(999));

#[test]
fn a_remount_rebuilds_the_same_tree_and_free_space() {
    posix::a_remount_rebuilds_the_same_tree_and_free_space::<P>();
}

#[test]
fn inodes_run_out_with_a_typed_error_that_changes_nothing() {
    env()
        .run(Faults::default(), |fs| async move {
            let mut made = 0;
            let err = loop {
                match fs.create(CTX, ROOT, &format!("f{made}"), 0o644).await {
                    Ok(_) => made += 1,
                    Err(e) => break e,
                }
            };
            assert!(matches!(err, PmfsError::Fs(Errno::NoSpace(_))), "{err}");
            // Every slot but 0 (unused) and the root's.
            assert_eq!(made, common::INODES as usize - 2);
            assert_eq!(fs.usage().free_inodes, 0);
            assert_eq!(fs.readdir(CTX, ROOT).await?.len(), made);
            fs.unlink(CTX, ROOT, "f0").await?;
            fs.create(CTX, ROOT, "again", 0o644).await?;
            Ok(())
        })
        .unwrap();
}

#[test]
fn a_remount_after_a_clean_run_rolls_nothing_back() {
    let mut env = env();
    env.run(Faults::default(), |fs| async move {
        fs.create_path(CTX, "/a").await?;
        // The root's first entry: its new block's pointer and bitmap bit
        // too.
        assert_eq!(fs.last_tx().log_entries, 4);
        fs.create_path(CTX, "/b").await?;
        assert_eq!(fs.last_tx().log_entries, 2);
        Ok(())
    })
    .unwrap();
    env.power_cycle();
    let r = env
        .run(Faults::default(), |fs| async move { Ok(fs.recovered()) })
        .unwrap();
    assert_eq!(r.rolled_back, 0);
    assert!(r.gen > 0);
}

#[test]
fn a_directory_grows_blocks_and_frees_them_with_it() {
    env()
        .run(Faults::default(), |fs| async move {
            fs.mkdir_path(CTX, "/d").await?;
            fs.create_path(CTX, "/f").await?;
            let free = fs.usage().free_pages;
            for i in 0..70 {
                fs.link_path(CTX, "/f", &format!("/d/{i}")).await?;
            }
            let d = fs.resolve(CTX, "/d").await?;
            assert_eq!(fs.getattr(CTX, d).await?.pages, 2, "64 entries a block");
            assert_eq!(fs.usage().free_pages, free - 2);
            for i in 0..70 {
                fs.unlink_path(CTX, &format!("/d/{i}")).await?;
            }
            fs.rmdir_path(CTX, "/d").await?;
            assert_eq!(fs.usage().free_pages, free);
            assert_eq!(fs.getattr(CTX, fs.resolve(CTX, "/f").await?).await?.links, 1);
            Ok(())
        })
        .unwrap();
}
