//! A failed mq transaction does not stall the journal.
//!
//! The fault: the host runs out of memory for DMA pages while an fsync's
//! transaction is being submitted (`HostMemory::alloc` fails, the file
//! system's page pool being smaller than the transaction), an I/O error
//! that reaches the caller before the transaction commits. The journal
//! must then be as if the transaction had never started: its caller gets
//! the error; what it took stays dirty for a later transaction; later
//! fsyncs commit, the log keeps being checkpointed as it fills, and a
//! clean unmount leaves an image fsck finds clean with every synced byte.
//!
//! Before the fix, `run_tx` advanced the area's tail and sequence number,
//! queued the transaction for checkpointing and indexed its versions
//! before any I/O, and the snapshot marked its blocks journaled and its
//! pages clean: after the error the transaction stayed at the front of
//! the checkpoint queue, never durable, so the first checkpoint that
//! needed that area found nothing to take and `make_room` waited forever
//! (this test's run deadlocks in the fill loop). With the transaction
//! kept out of the journal but the snapshot not given back (the blocks
//! it took left marked journaled, the pages clean), nothing journals them
//! again: after the remount `/b` is not found (its directory entry never
//! reached the disk).

mod common;

use common::{remount, setup};
use mqfs::testing::TestFs;
use mqfs::{fsck::fsck, Ctx, FsError, Mode};
use pcie_sim::HostAddr;

const C: Ctx = Ctx { core: 0 };

/// A small device: one journal area of 511 log blocks (4096 / 8), so the
/// fill loop below goes around it several times.
const BLOCKS: u64 = 4096;

fn block(seed: u64) -> Vec<u8> {
    (0..4096u64).map(|i| (i.wrapping_mul(31) ^ seed) as u8).collect()
}

#[test]
fn an_mq_transaction_that_fails_before_commit_leaves_the_journal_going() {
    let Some(t) = setup(Mode::Mq, BLOCKS, 1) else {
        return;
    };
    let TestFs {
        ex,
        machine,
        fs,
        ctrl,
        ..
    } = t;
    let m2 = machine.clone();
    let out = ex.block_on(async move {
        let machine = m2;
        fs.create_path(C, "/a").await.unwrap();
        fs.write_path(C, "/a", 0, &block(0)).await.unwrap();
        fs.fsync_path(C, "/a").await.unwrap();
        // `b`: 64 dirty blocks, more than the page pool holds.
        fs.create_path(C, "/b").await.unwrap();
        let b: Vec<u8> = (0..64).flat_map(|i| block(1000 + i)).collect();
        fs.write_path(C, "/b", 0, &b).await.unwrap();

        // Hoard every free host page, then fsync `b`.
        let mem = machine.memory();
        let mut hoard: Vec<HostAddr> = Vec::new();
        let mut size = 1u64 << 30;
        while size >= 4096 {
            match mem.alloc(size) {
                Ok(a) => hoard.push(a),
                Err(_) => size /= 2,
            }
        }
        let r = fs.fsync_path(C, "/b").await;
        assert!(
            matches!(r, Err(FsError::Bus(_))),
            "the fsync must fail with the bus error: {r:?}"
        );
        for a in hoard {
            mem.free(a).unwrap();
        }

        // Later transactions commit; 300 fsyncs of 2 log blocks each (the
        // inode's copy and the JH) need checkpoints of the 511-block area.
        let mut a = block(0);
        for i in 0..300u64 {
            let off = (i % 4) * 4096;
            let data = block(i + 1);
            fs.write_path(C, "/a", off, &data).await.unwrap();
            if a.len() < (off + 4096) as usize {
                a.resize((off + 4096) as usize, 0);
            }
            a[off as usize..(off + 4096) as usize].copy_from_slice(&data);
            fs.fsync_path(C, "/a")
                .await
                .unwrap_or_else(|e| panic!("fsync {i}: {e}"));
        }
        // What the failed transaction took is journaled by the next one.
        fs.fsync_path(C, "/b").await.unwrap();
        let fs = remount(fs, &machine, C).await.unwrap();
        assert_eq!(fs.read_path(C, "/a").await.unwrap(), a);
        assert_eq!(fs.read_path(C, "/b").await.unwrap(), b);
        fs.unmount(C).await.unwrap();
    });
    out.unwrap_or_else(|e| panic!("the simulation did not finish: {e}"));
    let r = fsck(ctrl.backend()).unwrap();
    assert!(r.is_clean(), "{r:?}");
}
