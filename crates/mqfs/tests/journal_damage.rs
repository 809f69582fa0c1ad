//! One flipped byte in a live journal: recovery replays every intact
//! transaction before the damaged one, reports the damaged one, mount
//! succeeds and fsck reports the damage.
//!
//! For each journaled mode, three files are each created, written and
//! fsynced (one transaction each); the machine then stops with the journal
//! live (no unmount: the media and the PMR are taken as they are, on a
//! drive without a volatile cache every completed write is durable). One
//! byte is flipped in a block of the newest transaction in the log: its
//! commit block (classic and HoraeFS; MQFS has none), its (last)
//! descriptor, or a journaled copy. Then on a fresh machine over that
//! image: mount succeeds, the files synced in the earlier transactions
//! read back whole, [`Fs::journal_damage`] names the newest transaction
//! and the damaged block, and after an unmount fsck reports
//! [`FindingKind::JournalDamaged`] and no other error.
//!
//! A block of the same transaction taken from another file system's
//! journal (same workload, another UUID) ends replay the same way: the
//! journal checksums are seeded with the UUID (JBD2 csum v3's
//! `j_csum_seed`), and without the seed the two blocks are byte for byte
//! the same (so that block would verify and replay).
//!
//! Before the checksum report, the same image mounted silently with the
//! damaged transaction (and, in classic, everything after it) dropped and
//! fsck found nothing; `without_the_copy_check_a_damaged_copy_is_replayed`
//! (the log's unit tests) shows the copy check is what catches a damaged
//! copy.

mod common;

use ccnvme::BlockDevice;
use mqfs::fsck::{fsck, FindingKind, Severity};
use mqfs::journal::format::{AreaSuper, Commit, Descriptor};
use mqfs::layout::{Superblock, BLOCK};
use mqfs::testing::{format_and_mount, machine, machine_after};
use mqfs::{mount, probe_options, Ctx, DamageKind, FsError, FsProfile, Mode};
use nvme_ctrl::{Media, SsdProfile};
use pcie_sim::{PageStore, TraceMode};

const C: Ctx = Ctx { core: 0 };
const BLOCKS: u64 = 4096;
const FILES: usize = 3;

fn content(i: usize) -> Vec<u8> {
    (0..6000u64)
        .map(|x| (x.wrapping_mul(7) ^ i as u64) as u8)
        .collect()
}

/// Which block of the newest transaction gets the flipped byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// No block: the crash alone, which is no damage.
    Nothing,
    Commit,
    Descriptor,
    Copy,
    /// The newest transaction's commit block (classic, HoraeFS) or last
    /// descriptor (MQFS) replaced by the same block of another file
    /// system's journal.
    Foreign,
}

/// The UUID of the other file system of [`Target::Foreign`].
const OTHER_UUID: [u8; 16] = [0xab; 16];

/// One transaction found in the log: device blocks of its last
/// descriptor, its copies (with their homes) and its commit block.
#[derive(Debug)]
struct LoggedTx {
    seq: u64,
    descriptor: u64,
    copies: Vec<(u64, u64)>,
    commit: Option<u64>,
}

/// Walks area 0's log on the image (no wrap: the test writes little).
fn logged(read: &dyn Fn(u64) -> Box<[u8; BLOCK]>, sb: &Superblock, with_commit: bool) -> Vec<LoggedTx> {
    let start = sb.area_start(0);
    let jsb = AreaSuper::decode(&read(start)[..], 0, sb.area_blocks).unwrap();
    let (mut pos, mut seq) = (jsb.head, jsb.seq);
    let mut out = Vec::new();
    'txs: loop {
        let mut tx = LoggedTx {
            seq,
            descriptor: 0,
            copies: Vec::new(),
            commit: None,
        };
        loop {
            if pos >= sb.area_blocks {
                break 'txs;
            }
            let Some(d) =
                Descriptor::decode(&read(start + pos)[..], sb.journal_csum_seed()).filter(|d| d.seq == seq)
            else {
                break 'txs;
            };
            tx.descriptor = start + pos;
            tx.copies
                .extend(d.tags.iter().map(|t| (start + t.journal, t.home)));
            pos += 1 + d.tags.len() as u64;
            if d.last {
                break;
            }
        }
        // Skip revokes (none expected), then the commit block.
        if with_commit {
            match Commit::decode(&read(start + pos)[..], sb.journal_csum_seed()) {
                Some(c) if c.seq == seq => tx.commit = Some(start + pos),
                _ => break,
            }
            pos += 1;
        }
        out.push(tx);
        seq += 1;
    }
    out
}

/// The image (blocks and PMR) of a machine stopped with the journal live
/// after the workload, on a file system of `mode` made with `uuid`
/// (`None`: mkfs's default); `None` if the mode is not built.
#[allow(clippy::type_complexity)]
fn crashed_image(mode: Mode, uuid: Option<[u8; 16]>) -> Option<(Vec<Box<[u8; BLOCK]>>, Option<PageStore>)> {
    let profile = SsdProfile::optane_905p();
    assert!(!profile.volatile_cache());
    let (ex, m, ctrl) = machine(profile, BLOCKS, 1, TraceMode::Off, 1);
    let m2 = m.clone();
    let made = ex
        .block_on(async move {
            let tune = move |o: &mut mqfs::MkfsOptions| o.uuid = uuid.or(o.uuid);
            let (_dev, fs) = match format_and_mount(&m2, mode, BLOCKS, tune, FsProfile::default()).await {
                Ok(x) => x,
                Err(FsError::Unsupported(_)) => return false,
                Err(e) => panic!("{mode:?}: {e}"),
            };
            for i in 0..FILES {
                let p = format!("/f{i}");
                fs.create_path(C, &p).await.unwrap();
                fs.write_path(C, &p, 0, &content(i)).await.unwrap();
                fs.fsync_path(C, &p).await.unwrap();
            }
            // The machine stops here, the journal live.
            std::mem::forget(fs);
            true
        })
        .unwrap();
    if !made {
        return None;
    }
    let blocks = (0..BLOCKS)
        .map(|b| {
            let mut buf = Box::new([0u8; BLOCK]);
            ctrl.backend().peek(b, &mut buf);
            buf
        })
        .collect();
    let pmr = m.pmr_image(0);
    drop(ex);
    Some((blocks, pmr))
}

/// Runs the scenario for `mode`, damaging `target`.
fn damaged_newest_transaction(mode: Mode, target: Target) {
    let profile = SsdProfile::optane_905p();
    let Some((blocks, pmr)) = crashed_image(mode, None) else {
        eprintln!("{mode:?}: skipped");
        return;
    };
    let read = |b: u64| blocks[b as usize].clone();
    let sb = Superblock::decode(&read(0)[..], BLOCKS).unwrap();
    assert!(!sb.clean, "{mode:?}: the image must be a crashed one");
    let txs = logged(&read, &sb, mode != Mode::Mq);
    assert!(
        !txs.is_empty(),
        "{mode:?}: the log holds the fsyncs' transactions"
    );
    let newest = txs.last().unwrap();
    let victim = match target {
        Target::Nothing => u64::MAX,
        Target::Commit => newest.commit.unwrap(),
        Target::Descriptor => newest.descriptor,
        Target::Copy => newest.copies.first().unwrap().0,
        Target::Foreign => newest.commit.unwrap_or(newest.descriptor),
    };
    let foreign = (target == Target::Foreign).then(|| {
        let theirs = |uuid| crashed_image(mode, Some(uuid)).unwrap().0[victim as usize].clone();
        let other = theirs(OTHER_UUID);
        assert_ne!(other, read(victim), "{mode:?}: another UUID, another seal");
        assert_eq!(
            theirs(sb.uuid),
            read(victim),
            "{mode:?}: only the seed tells them apart"
        );
        other
    });
    let mut media = Media::memory(BLOCKS);
    for b in 0..BLOCKS {
        let mut x = read(b);
        if b == victim {
            match &foreign {
                Some(other) => x = other.clone(),
                None => x[1000] ^= 0x10,
            }
        }
        media.write(b, &std::sync::Arc::new(*x));
    }
    let (ex, m, ctrl) = machine_after(profile, media, pmr, 1, TraceMode::Off, 2);
    let newest_seq = newest.seq;
    let want_kind = match target {
        Target::Nothing => None,
        Target::Commit => Some(DamageKind::Commit),
        Target::Descriptor => Some(DamageKind::Descriptor),
        Target::Copy => Some(DamageKind::Copy {
            home: newest.copies[0].1,
        }),
        Target::Foreign if newest.commit.is_some() => Some(DamageKind::Commit),
        Target::Foreign => Some(DamageKind::Descriptor),
    };
    ex.block_on(async move {
        let dev = BlockDevice::probe(&m, 0, probe_options(mode)).await.unwrap();
        let fs = mount(&dev, C, FsProfile::default())
            .await
            .unwrap_or_else(|e| panic!("{mode:?} {target:?}: mount refused: {e}"));
        let damage = fs.journal_damage();
        assert_eq!(
            damage.iter().map(|d| (d.seq, d.kind)).collect::<Vec<_>>(),
            want_kind.map(|k| (newest_seq, k)).into_iter().collect::<Vec<_>>(),
            "{mode:?} {target:?}"
        );
        // The newest transaction is the last fsync's: every earlier file
        // is whole (and without damage, the last one too).
        let whole = if want_kind.is_some() { FILES - 1 } else { FILES };
        for i in 0..whole {
            let p = format!("/f{i}");
            let ino = fs
                .resolve(C, &p)
                .await
                .unwrap_or_else(|e| panic!("{mode:?} {target:?}: {p}: {e}"));
            assert_eq!(
                fs.read(C, ino, 0, 8192).await.unwrap(),
                content(i),
                "{mode:?} {target:?}: {p}"
            );
        }
        fs.unmount(C).await.unwrap();
    })
    .unwrap();
    let r = fsck(ctrl.backend()).unwrap();
    assert_eq!(
        r.findings.iter().any(|f| f.kind == FindingKind::JournalDamaged),
        want_kind.is_some(),
        "{mode:?} {target:?}: {r}"
    );
    assert!(
        r.findings
            .iter()
            .all(|f| f.kind == FindingKind::JournalDamaged || f.severity != Severity::Error),
        "{mode:?} {target:?}: {r}"
    );
}

/// Every block of the newest transaction a test damages, and none.
const EVERY_TARGET: [Target; 5] = [
    Target::Nothing,
    Target::Commit,
    Target::Descriptor,
    Target::Copy,
    Target::Foreign,
];

#[test]
fn classic_survives_a_damaged_commit_descriptor_or_copy() {
    for t in EVERY_TARGET {
        damaged_newest_transaction(Mode::Classic, t);
    }
}

#[test]
fn horae_survives_a_damaged_commit_descriptor_or_copy() {
    for t in EVERY_TARGET {
        damaged_newest_transaction(Mode::Horae, t);
    }
}

#[test]
fn mq_survives_a_damaged_jh_or_copy() {
    for t in [Target::Nothing, Target::Descriptor, Target::Copy, Target::Foreign] {
        damaged_newest_transaction(Mode::Mq, t);
    }
}
