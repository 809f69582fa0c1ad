//! JBD2's BH_Shadow in the classic journal and in HoraeFS's (issue 15,
//! mechanism 3): a handle that modifies a buffer the committing
//! transaction is writing to the log waits for that write (Linux 4.18
//! `do_get_write_access`); one that modifies it before the log write gets
//! a frozen copy and goes on. HoraeFS's flush stage releases the shadows
//! once it has waited for the transaction's writes (ccNVMe 7.3: "In Ext4
//! and HoraeFS, the accesses to the same block are serialized by the
//! block-level lock").

mod common;

use std::rc::Rc;

use common::setup_profile;
use mqfs::fsck::fsck;
use mqfs::{Ctx, Fs, FsProfile, Mode, SetAttr};
use pcie_sim::join_all;

/// An appender fsyncing file `f` on core 0 while a chmod loop on core 1
/// changes file `g`, whose inode shares `f`'s inode-table block: returns
/// the chmods' longest latency in ns and the journal's counters.
fn chmod_beside_commits(mode: Mode, shadow: bool) -> (u64, mqfs::journal::jbd::PipelineStats) {
    let profile = FsProfile {
        jbd_shadow: shadow,
        ..FsProfile::default()
    };
    let t = setup_profile(mode, 1 << 14, 2, 16384, profile).expect("the file system mounts");
    let fs = t.fs.clone();
    let (longest, stats) =
        t.ex.block_on(async move {
            let c = Ctx::on(0);
            let f = fs.create_path(c, "/f").await.unwrap().ino;
            let g = fs.create_path(c, "/g").await.unwrap().ino;
            assert_eq!((f - 1) / 16, (g - 1) / 16, "one inode-table block");
            fs.sync(c).await.unwrap();
            let sim = fs.machine().sim().clone();
            let appender = {
                let fs: Rc<Fs> = fs.clone();
                sim.spawn(async move {
                    let c = Ctx::on(0);
                    for k in 0..20u64 {
                        fs.write(c, f, k * 4096, &[1; 4096]).await.unwrap();
                        fs.fsync(c, f).await.unwrap();
                    }
                })
            };
            let chmods = {
                let fs: Rc<Fs> = fs.clone();
                sim.spawn(async move {
                    let c = Ctx::on(1);
                    let mut longest = 0;
                    for k in 0..400u16 {
                        let t0 = fs.machine().sim().now().as_ps();
                        let set = SetAttr {
                            perm: Some(0o600 | ((k % 2) * 0o40)),
                            ..SetAttr::default()
                        };
                        fs.setattr(c, g, &set).await.unwrap();
                        longest = longest.max(fs.machine().sim().now().as_ps() - t0);
                    }
                    longest / 1000
                })
            };
            join_all(vec![appender]).await;
            let longest = join_all(vec![chmods]).await.pop().unwrap_or(0);
            let stats = fs.pipeline_stats().expect("a JBD2 journal");
            fs.unmount(c).await.unwrap();
            (longest, stats)
        })
        .unwrap();
    let r = fsck(&**t.ctrl.backend()).unwrap();
    assert!(r.is_spotless(), "{mode:?}, shadow {shadow}: {r}");
    (longest, stats)
}

/// With BH_Shadow a chmod of an inode sharing the committing inode-table
/// block waits for the commit's log write, so the longest chmod lasts at
/// least a log write; with every buffer given a frozen copy instead (the
/// switch off), no chmod waits for I/O. In classic mode and in HoraeFS.
#[test]
fn a_modifier_waits_for_the_log_write_of_a_shadowed_buffer() {
    for mode in [Mode::Classic, Mode::Horae] {
        let (with, stats) = chmod_beside_commits(mode, true);
        let (without, stats_off) = chmod_beside_commits(mode, false);
        eprintln!(
            "{mode:?}: longest chmod: {with} ns shadowed ({stats:?}), {without} ns frozen ({stats_off:?})"
        );
        assert!(stats.shadowed > 0, "{mode:?}: {stats:?}");
        assert_eq!(stats_off.shadowed, 0, "{mode:?}");
        // A log write of the 905P takes about 10 us; a chmod about 1 us.
        assert!(with >= without + 5_000, "{mode:?}: {with} ns vs {without} ns");
    }
}
