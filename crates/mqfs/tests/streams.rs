//! MQFS's journal streams (`MqOptions::streams`, `docs/decisions.md` E8):
//! a sync holds a stream (a journal area) until its transaction is
//! durable, so the streams bound how many transactions are in flight. With
//! a pool of `n` streams a sync takes its core's stream if it is free,
//! else the next free one, else waits for its core's (the artifact's
//! `get_free_stream`).

mod common;

use std::rc::Rc;

use common::setup_profile;
use mqfs::{Ctx, Fs, FsProfile, Mode, MqOptions, Streams};
use pcie_sim::{join_all, SimDuration};

/// Two threads on cores 0 and 2 overwrite one block of their own file and
/// fsync it, starting together; returns the time until both returned, in
/// ns. The files' inodes sit in different inode-table blocks and the
/// overwrites allocate nothing, so the two transactions share no block
/// and neither waits for the other but for a stream.
fn two_syncs_on_cores_0_and_2(streams: Streams) -> u64 {
    let profile = FsProfile {
        mq: MqOptions {
            streams,
            ..MqOptions::default()
        },
        ..FsProfile::default()
    };
    let t = setup_profile(Mode::Mq, 1 << 14, 4, 16384, profile).expect("the file system mounts");
    let fs = t.fs.clone();
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        let a = fs.create_path(c, "/a").await.unwrap().ino;
        for k in 0..16 {
            fs.create_path(c, &format!("/pad{k}")).await.unwrap();
        }
        let b = fs.create_path(c, "/b").await.unwrap().ino;
        assert_ne!((a - 1) / 16, (b - 1) / 16, "the inodes share no table block");
        for ino in [a, b] {
            fs.write(c, ino, 0, &[1; 4096]).await.unwrap();
        }
        fs.sync(c).await.unwrap();
        let sim = fs.machine().sim().clone();
        // A timestamp tick later, so each overwrite changes its inode.
        sim.sleep(fs.profile().timestamp_tick).await;
        let t0 = sim.now();
        let syncs = [(0, a), (2, b)].map(|(core, ino)| {
            let fs: Rc<Fs> = fs.clone();
            sim.spawn(async move {
                let c = Ctx::on(core);
                fs.write(c, ino, 0, &[2; 4096]).await.unwrap();
                fs.fsync(c, ino).await.unwrap();
            })
        });
        join_all(syncs.into()).await;
        (sim.now() - t0).as_ps() / 1000
    })
    .unwrap()
}

#[test]
fn a_sync_whose_stream_is_busy_takes_a_free_one_and_the_pool_bounds_the_syncs_in_flight() {
    let per_core = two_syncs_on_cores_0_and_2(Streams::PerCore);
    let one = two_syncs_on_cores_0_and_2(Streams::Pool(1));
    let two = two_syncs_on_cores_0_and_2(Streams::Pool(2));
    // One stream: the second transaction starts when the first is durable.
    assert!(
        one as f64 > 1.35 * per_core as f64,
        "one stream serializes the two syncs: {one} ns against {per_core} ns with a stream per core"
    );
    // Two streams: both cores map to stream 0, and the second sync takes
    // stream 1 instead of waiting for stream 0.
    assert!(
        (two as f64) < 1.2 * per_core as f64,
        "the second sync takes the free stream: {two} ns against {per_core} ns"
    );
    assert!(per_core > SimDuration::from_us(5).as_ps() / 1000, "{per_core} ns");
}
