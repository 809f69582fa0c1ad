//! What an fsync's data pages cost the caller's core, per page: every
//! mode prepares them (`FsProfile::page_prep`, Horae 6.2's 0.8 us per
//! page), MQFS included; and MQFS, like JBD2, builds a journal entry
//! (`FsProfile::journal_block_cycles`) only for the blocks it journals,
//! none for data written home.

use mqfs::testing::new_fs_with;
use mqfs::{Ctx, FsProfile, Mode};
use nvme_ctrl::SsdProfile;
use pcie_sim::SimDuration;

/// Kernel time of core 0 in an fsync after an append of `pages` pages.
fn fsync_cost(mode: Mode, pages: u64, page_prep: SimDuration) -> SimDuration {
    let profile = FsProfile {
        page_prep,
        ..FsProfile::default()
    };
    fsync_cost_with(mode, pages, profile)
}

fn fsync_cost_with(mode: Mode, pages: u64, profile: FsProfile) -> SimDuration {
    let t = new_fs_with(mode, SsdProfile::optane_905p(), 65536, 2, profile).expect("mkfs and mount");
    let fs = t.fs.clone();
    let core = t.machine.core(0).expect("core 0");
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        let ino = fs.create_path(c, "/f").await.expect("create").ino;
        fs.write(c, ino, 0, &[1u8; 4096]).await.expect("append");
        fs.fsync(c, ino).await.expect("fsync");
        let data = vec![2u8; 4096 * pages as usize];
        fs.write(c, ino, 4096, &data).await.expect("append");
        let before = core.stats().kernel;
        fs.fsync(c, ino).await.expect("fsync");
        core.stats().kernel - before
    })
    .expect("run")
}

#[test]
fn every_mode_pays_page_preparation_per_data_page() {
    let prep = FsProfile::default().page_prep;
    for mode in [Mode::Mq, Mode::Classic, Mode::None] {
        let with = fsync_cost(mode, 8, prep);
        let without = fsync_cost(mode, 8, SimDuration::ZERO);
        assert!(
            with >= without + prep * 8,
            "{mode:?}: eight pages cost eight preparations: {with:?} against {without:?}"
        );
    }
}

#[test]
fn mqfs_builds_journal_entries_for_copies_not_for_data() {
    let free = FsProfile {
        journal_block_cycles: pcie_sim::Cycles(0),
        ..FsProfile::default()
    };
    // What the entries cost an fsync of one page and of eight: the same
    // copies (the inode's table block and what the allocation changed).
    let entries = |pages| {
        fsync_cost_with(Mode::Mq, pages, FsProfile::default())
            - fsync_cost_with(Mode::Mq, pages, free.clone())
    };
    let (one, eight) = (entries(1), entries(8));
    assert!(one > SimDuration::ZERO, "the copies' entries cost something");
    assert_eq!(one, eight, "data pages add no journal entry");
}
