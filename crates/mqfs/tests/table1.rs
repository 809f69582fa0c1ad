//! The journal commit of a transaction of N journaled 4 KiB blocks costs
//! exactly ccNVMe Table 1's rows on the critical path of fsync, from the
//! machine's own counters: classic (Ext4/JBD2) and horae (HoraeFS) both
//! 2(N+2) MMIO, 2(N+2) queue DMAs, N+2 block I/Os and N+2 interrupts; the
//! Horae ordering-queue writes are reported in their own column.
//!
//! N counts the blocks of the transaction besides the descriptor and the
//! commit record (`docs/decisions.md` E1): the file's data blocks plus its journaled
//! metadata. A chmod journals 1 block (the inode's table block); an
//! overwrite of one block adds that data block; an append of k blocks
//! journals the inode block and the block bitmap beside k data blocks.

use ccnvme::Traffic;
use mqfs::testing::new_fs_with;
use mqfs::{Ctx, FsProfile, Mode, SetAttr};
use nvme_ctrl::SsdProfile;

/// Runs the change that makes a transaction of `n` blocks, fsyncs, and
/// returns the fsync's traffic.
fn fsync_traffic(mode: Mode, n: u64) -> Traffic {
    sync_traffic(mode, n, false)
}

/// Like [`fsync_traffic`], with fatomic instead when `atomic`.
fn sync_traffic(mode: Mode, n: u64, atomic: bool) -> Traffic {
    // Each completion its own interrupt and CQ doorbell: Table 1's
    // counting model (`ccnvme::CqReap::OnePerInterrupt`).
    let profile = FsProfile {
        driver: ccnvme::DriverProfile::per_request_interrupts(),
        ..FsProfile::default()
    };
    let t = new_fs_with(mode, SsdProfile::optane_905p(), 65536, 1, profile).unwrap();
    let fs = t.fs.clone();
    let m = t.machine.clone();
    t.ex.block_on(async move {
        let c = Ctx::on(0);
        let ino = fs.create_path(c, "/f").await.unwrap().ino;
        fs.write(c, ino, 0, &[7u8; 4096]).await.unwrap();
        fs.sync(c).await.unwrap();
        // A tick of the timestamp clock, so the overwrite changes the mtime.
        m.sim().sleep(fs.profile().timestamp_tick).await;
        match n {
            1 => {
                let set = SetAttr {
                    perm: Some(0o600),
                    ..Default::default()
                };
                fs.setattr(c, ino, &set).await.unwrap();
            }
            2 => {
                fs.write(c, ino, 0, &[8u8; 4096]).await.unwrap();
            }
            k => {
                let data = vec![9u8; 4096 * (k as usize - 2)];
                fs.write(c, ino, 4096, &data).await.unwrap();
            }
        }
        let before = m.counters();
        if atomic {
            fs.fatomic(c, ino).await.unwrap();
        } else {
            fs.fsync(c, ino).await.unwrap();
        }
        Traffic::from_counters(&m.counters().since(&before))
    })
    .unwrap()
}

#[test]
fn classic_fsync_costs_table1_row() {
    for n in 1..=16u64 {
        let t = fsync_traffic(Mode::Classic, n);
        assert_eq!(
            (t.mmio, t.dma_q, t.block_io, t.irq),
            (2 * (n + 2), 2 * (n + 2), n + 2, n + 2),
            "N={n}: {t:?}"
        );
        assert_eq!(t.ordering_mmio, 0);
    }
}

#[test]
fn horae_fsync_costs_table1_row_with_ordering_writes_apart() {
    for n in 1..=16u64 {
        let t = fsync_traffic(Mode::Horae, n);
        assert_eq!(
            (t.mmio, t.dma_q, t.block_io, t.irq),
            (2 * (n + 2), 2 * (n + 2), n + 2, n + 2),
            "N={n}: {t:?}"
        );
        assert!(t.ordering_mmio > 0, "N={n}: the ordering queue was written");
    }
}

#[test]
fn mq_fsync_costs_4_mmio_and_n_plus_1() {
    for n in 1..=16u64 {
        let t = fsync_traffic(Mode::Mq, n);
        assert_eq!(
            (t.mmio, t.dma_q, t.block_io, t.irq),
            (4, n + 1, n + 1, n + 1),
            "N={n}: {t:?}"
        );
    }
}

#[test]
fn mq_fatomic_costs_2_mmio_and_waits_for_nothing_else() {
    for n in 1..=16u64 {
        let t = sync_traffic(Mode::Mq, n, true);
        // Measured: no completion entry and no interrupt before it returned.
        assert_eq!((t.dma_q, t.irq), (0, 0), "N={n}: {t:?}");
        let c = t.submit_phase();
        assert_eq!((c.mmio, c.dma_q, c.block_io, c.irq), (2, 0, 0, 0), "N={n}: {t:?}");
    }
}
