//! Every mode prepares the data pages an fsync writes
//! (`FsProfile::page_prep`, Horae 6.2's 0.8 us per page), MQFS included:
//! an fsync of a file with more dirty pages costs the caller's core that
//! much more, and with the cost set to zero it does not.

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
