//! The order of a classic JBD2 commit's writes (`docs/decisions.md` E1):
//! as Linux 4.18's `jbd2_journal_commit_transaction`, the ordered data of
//! the transaction's inodes and its log blocks are submitted without a
//! wait between them, and the commit record only after both completed.

use mqfs::testing::{format_and_mount, machine};
use mqfs::{Ctx, FsProfile, Mode};
use nvme_ctrl::events::{DATA_IN, SUBMITTED, WRITE_DONE, WRITE_DONE_DURABLE};
use nvme_ctrl::SsdProfile;
use pcie_sim::{EventKind, TraceMode};

const BLOCKS: u64 = 1 << 14;
/// The byte `/a`'s appended block is filled with.
const A: u8 = 0xa5;
/// The byte `/b`'s appended block is filled with.
const B: u8 = 0x5b;

/// A device command's events during the fsync, in trace order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Submitted(u32),
    Done(u32),
}

/// `/a` gets a block it does not sync (mqfs allocates at write time,
/// `docs/decisions.md` M23, so `/a` joins the running transaction and its
/// data is the commit's ordered data), then `/b` gets one and is fsynced: returns the commands of the
/// fsync's commit, in order, and the commands that carried `/a`'s data.
fn fsync_beside_ordered_data() -> (Vec<Step>, Vec<u32>) {
    let (ex, m, _ctrl) = machine(SsdProfile::optane_905p(), BLOCKS, 2, TraceMode::Full, 1);
    let m2 = m.clone();
    let profile = FsProfile {
        commit_core: 1,
        ..FsProfile::default()
    };
    let from = ex
        .block_on(async move {
            let (_dev, fs) = format_and_mount(&m2, Mode::Classic, BLOCKS, |_| {}, profile).await?;
            let c = Ctx::on(0);
            let a = fs.create_path(c, "/a").await?.ino;
            let b = fs.create_path(c, "/b").await?.ino;
            fs.sync(c).await?;
            fs.write(c, a, 0, &[A; 4096]).await?;
            fs.write(c, b, 0, &[B; 4096]).await?;
            let from = m2.trace().entries().len();
            fs.fsync(c, b).await?;
            Ok::<_, mqfs::FsError>(from)
        })
        .expect("finishes")
        .expect("succeeds");
    let trace = m.trace();
    let device = || {
        trace.entries()[from..]
            .iter()
            .filter(|e| e.kind == EventKind::Device)
    };
    let carrying = |byte: u8| -> Vec<u32> {
        device()
            .filter(|e| {
                e.code == DATA_IN && {
                    let p = trace.payload(e);
                    !p.is_empty() && p.iter().all(|x| *x == byte)
                }
            })
            .map(|e| e.attr)
            .collect()
    };
    let (a, b) = (carrying(A), carrying(B));
    assert!(
        !a.is_empty() && !b.is_empty(),
        "both files' data reached the drive"
    );
    // The commit starts after `/b`'s own data write completed.
    let steps: Vec<Step> = device()
        .filter_map(|e| match e.code {
            SUBMITTED => Some(Step::Submitted(e.attr)),
            WRITE_DONE | WRITE_DONE_DURABLE => Some(Step::Done(e.attr)),
            _ => None,
        })
        .skip_while(|s| !matches!(s, Step::Done(x) if b.contains(x)))
        .skip(1)
        .collect();
    (steps, a)
}

/// The log blocks are submitted before the ordered data completed, and the
/// commit record after every other write of the commit completed.
#[test]
fn ordered_data_and_log_blocks_are_in_flight_together() {
    let (steps, a) = fsync_beside_ordered_data();
    let a_done = steps
        .iter()
        .position(|s| matches!(s, Step::Done(x) if a.contains(x)))
        .expect("the commit wrote /a's data");
    let log_before_data_done = steps[..a_done]
        .iter()
        .filter(|s| matches!(s, Step::Submitted(x) if !a.contains(x)))
        .count();
    assert!(
        log_before_data_done >= 2,
        "descriptor and metadata copies submitted while /a's data ({a:?}) was in flight: {steps:?}"
    );
    // The commit record: the last command submitted, after all the others
    // completed (attributes are reused once a command completes).
    let at = steps
        .iter()
        .rposition(|s| matches!(s, Step::Submitted(_)))
        .expect("the commit record was submitted");
    for (i, s) in steps[..at].iter().enumerate() {
        if let Step::Submitted(x) = s {
            assert!(
                steps[i..at].contains(&Step::Done(*x)),
                "command {x} had not completed when the commit record was submitted: {steps:?}"
            );
        }
    }
}
