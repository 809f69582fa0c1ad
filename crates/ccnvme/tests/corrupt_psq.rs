//! A corrupt persistent submission queue (bad head or tail, garbage
//! entries) is reported at probe as a typed error, never a panic, and
//! nothing from it is handed to the upper layer as replayable.

mod common;

use ccnvme::{BlockDevice, DriverError, PmrLayout, ProbeOptions};
use nvme_ctrl::{Media, SsdProfile};
use nvme_spec::command::{SubmissionEntry, TxFlags};
use pcie_sim::{PageStore, TraceMode};
use proptest::prelude::*;

const PMR: u64 = 2 << 20;

fn layout() -> PmrLayout {
    PmrLayout {
        queues: 4,
        slots: 256,
        pmr_bytes: PMR,
    }
}

/// A PMR holding one unfinished two-command transaction on queue 0.
fn image() -> PageStore {
    let l = layout();
    let mut p = PageStore::zeroed(PMR);
    p.write(0, &l.header_bytes(3, 0));
    for (slot, flags) in [
        (0u32, TxFlags::TX | TxFlags::BEGIN),
        (1, TxFlags::TX | TxFlags::COMMIT),
    ] {
        let mut e = SubmissionEntry::write(slot as u16, 1, 40 + slot as u64, 1, 0x10000, 0, false);
        e.set_txid(77);
        e.set_tx_flags(flags);
        p.write(l.slot(0, slot), &e.to_bytes());
    }
    p.write(l.doorbell(0), &2u32.to_le_bytes());
    p.write(l.head(0), &0u32.to_le_bytes());
    p
}

fn probe(pmr: PageStore) -> Result<ccnvme::Recovery, DriverError> {
    let (ex, m, _c) = common::machine(
        SsdProfile::optane_905p(),
        Media::memory(1024),
        Some(pmr),
        TraceMode::Off,
    );
    let m2 = m.clone();
    ex.block_on(async move {
        let dev = BlockDevice::probe(&m2, 0, ProbeOptions::default()).await?;
        Ok(dev.recovery().unwrap_or_default())
    })
    .expect("probe finishes")
}

#[test]
fn a_valid_image_reports_its_unfinished_transaction() {
    let rec = probe(image()).unwrap();
    assert_eq!(rec.unfinished.len(), 1);
    let t = &rec.unfinished[0];
    assert_eq!((t.queue, t.txid.0, t.cmds.len()), (0, 77, 2));
    assert_eq!(t.cmds[1].slba, 41);
    assert_eq!(rec.generation, 3);
}

#[test]
fn a_tail_past_the_ring_is_corrupt() {
    let mut p = image();
    p.write(layout().doorbell(0), &9999u32.to_le_bytes());
    assert!(matches!(probe(p), Err(DriverError::CorruptPsq { queue: 0, .. })));
}

#[test]
fn a_head_past_the_ring_is_corrupt() {
    let mut p = image();
    p.write(layout().head(2), &300u32.to_le_bytes());
    assert!(matches!(probe(p), Err(DriverError::CorruptPsq { queue: 2, .. })));
}

#[test]
fn garbage_entries_are_corrupt() {
    let mut p = image();
    p.write(layout().slot(0, 1), &[0xa5; 64]);
    assert!(matches!(probe(p), Err(DriverError::CorruptPsq { .. })));
}

#[test]
fn a_doorbell_covering_half_a_transaction_is_corrupt() {
    let mut p = image();
    p.write(layout().doorbell(0), &1u32.to_le_bytes());
    assert!(matches!(probe(p), Err(DriverError::CorruptPsq { .. })));
}

#[test]
fn a_damaged_header_is_not_formatted_over() {
    let mut p = image();
    p.write(3, &[0x00]);
    let r = probe(p);
    assert!(matches!(r, Err(DriverError::CorruptLayout(_))), "{r:?}");
    // An empty PMR is formatted.
    let rec = probe(PageStore::zeroed(PMR)).unwrap();
    assert!(rec.formatted && rec.unfinished.is_empty());
}

#[test]
fn entries_past_the_doorbell_are_never_parsed() {
    let mut p = image();
    // Garbage after P-SQDB: written but never submitted.
    p.write(layout().slot(0, 2), &[0xff; 64]);
    p.write(layout().slot(0, 3), &[0x11; 64]);
    let rec = probe(p).unwrap();
    assert_eq!(rec.unfinished.len(), 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    /// Random bytes flipped anywhere in the header or queue 0's region:
    /// probe never panics; it either recovers a well-formed list or
    /// reports a typed error.
    #[test]
    fn random_corruption_never_panics(flips in prop::collection::vec((0u64..(4096 + 4096), any::<u8>()), 1..8)) {
        let mut p = image();
        for (off, v) in flips {
            let mut b = [0u8; 1];
            p.read(off, &mut b);
            p.write(off, &[b[0] ^ v.max(1)]);
        }
        match probe(p) {
            Ok(rec) => {
                for t in &rec.unfinished {
                    prop_assert!(!t.cmds.is_empty());
                    prop_assert!(t.cmds.iter().all(|c| c.flags.contains(TxFlags::TX)));
                    prop_assert!(t.cmds.last().is_some_and(|c| c.flags.contains(TxFlags::COMMIT)));
                }
            }
            Err(DriverError::CorruptPsq { .. }) | Err(DriverError::CorruptLayout(_)) => {}
            Err(e) => prop_assert!(false, "unexpected error {e}"),
        }
    }
}
