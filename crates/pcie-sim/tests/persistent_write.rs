//! The persistent MMIO write ([`Core::persistent_write`]): at its return the
//! bytes are in the PMR in every crash state the power-failure model
//! allows; with a step switched off, some crash state there lacks them.

use std::cell::Cell;
use std::rc::Rc;

use pcie_sim::testing::RegisterFile;
use pcie_sim::{
    BarKind, CrashCursor, Executor, Machine, MachineProfile, PageStore, PersistSkips, Purpose, TraceMode,
};

const PMR: u64 = 1 << 16;
const AT: u64 = 0x1230;
const BYTES: [u8; 24] = *b"persistent-bytes-0123456";

/// Runs one persistent write of [`BYTES`] at PMR offset [`AT`] (after some
/// unrelated flushed traffic) and returns, for the crash point just after
/// it returned, how many crash states there are and how many hold the
/// bytes.
fn states_at_return(skip: PersistSkips, uncached_read_after: bool) -> (usize, usize) {
    let ex = Executor::new(3);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    RegisterFile::attach(&m, Some(PMR), None);
    let pmr = m.bar(0, BarKind::Pmr).unwrap();
    let core = m.core(0).unwrap();
    let other = m.core(1).unwrap();
    let point = Rc::new(Cell::new(0usize));
    let m2 = m.clone();
    let p2 = point.clone();
    m.sim().spawn(async move {
        // Earlier traffic, so the link is not idle.
        core.persistent_write(pmr + 0x40, &[7; 64], Purpose::new(1), 1, PersistSkips::default())
            .await
            .unwrap();
        // Another core's store nobody flushes: a line pending at the end.
        other
            .wc_store(pmr + 0x400, &[9; 8], Purpose::new(1), 1)
            .await
            .unwrap();
        core.persistent_write(pmr + AT, &BYTES, Purpose::new(8), 2, skip)
            .await
            .unwrap();
        if uncached_read_after {
            core.mmio_read(pmr, &mut [], Purpose::FLUSH_READ, 2)
                .await
                .unwrap();
        }
        p2.set(m2.trace().len() as usize);
    });
    ex.run();
    let trace = m.trace();
    let mut cursor = CrashCursor::new(&trace, m.layout(), vec![PageStore::zeroed(PMR)]).unwrap();
    cursor.advance_past(point.get() - 1).unwrap();
    let pending = cursor.pending();
    let (choices, left_out) = cursor.choices(&pending, 8);
    assert_eq!(left_out, 0);
    let holding = choices
        .iter()
        .filter(|c| {
            let img = &cursor.materialize(&pending, c).unwrap()[0];
            let mut b = [0u8; BYTES.len()];
            img.read(AT, &mut b);
            b == BYTES
        })
        .count();
    // The other core's store was never flushed: still pending.
    assert!(!pending.lines.is_empty());
    (choices.len(), holding)
}

#[test]
fn the_bytes_are_persistent_when_the_write_returns() {
    let (states, holding) = states_at_return(PersistSkips::default(), false);
    assert!(states > 1, "the unflushed store leaves several crash states");
    assert_eq!(holding, states, "every crash state holds the bytes");
}

#[test]
fn without_the_fence_the_bytes_may_be_missing() {
    let (states, holding) = states_at_return(
        PersistSkips {
            fence: true,
            read: false,
        },
        false,
    );
    assert!(
        holding < states,
        "a state without the bytes exists ({holding}/{states})"
    );
}

#[test]
fn without_the_read_the_bytes_may_be_missing() {
    let (states, holding) = states_at_return(
        PersistSkips {
            fence: false,
            read: true,
        },
        false,
    );
    assert!(
        holding < states,
        "a state without the bytes exists ({holding}/{states})"
    );
}

/// Why the flush read goes through the WC mapping: an uncached read drains
/// the WC buffers itself, so after one a missing fence no longer shows.
#[test]
fn an_uncached_read_would_hide_a_missing_fence() {
    let skip = PersistSkips {
        fence: true,
        read: false,
    };
    let (states, holding) = states_at_return(skip, true);
    assert_eq!(holding, states);
}

/// Rule W (`docs/persistence.md` 1): full lines leave the core at once,
/// but until a fence they may land in any order. Entries (two full lines)
/// then a doorbell word made persistent: without a fence between them,
/// some crash state before the doorbell's fence holds the doorbell and not
/// the entries (the bug of a P-SQ committed without its entry fence); with
/// the fence, none does.
fn doorbell_without_entries(entry_fence: bool) -> usize {
    let ex = Executor::new(5);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    RegisterFile::attach(&m, Some(PMR), None);
    let pmr = m.bar(0, BarKind::Pmr).unwrap();
    let core = m.core(0).unwrap();
    m.sim().spawn(async move {
        core.wc_store(pmr, &[0xee; 128], Purpose::new(1), 1)
            .await
            .unwrap();
        if entry_fence {
            core.mfence().await.unwrap();
        }
        core.persistent_write(
            pmr + 0x800,
            &[0xdb; 4],
            Purpose::new(2),
            1,
            PersistSkips::default(),
        )
        .await
        .unwrap();
    });
    ex.run();
    let trace = m.trace();
    let mut cursor = CrashCursor::new(&trace, m.layout(), vec![PageStore::zeroed(PMR)]).unwrap();
    let mut bad = 0;
    for k in 0..trace.len() as usize {
        cursor.advance_past(k).unwrap();
        let pending = cursor.pending();
        let (choices, _) = cursor.choices(&pending, 8);
        for c in &choices {
            let img = &cursor.materialize(&pending, c).unwrap()[0];
            let (mut db, mut entries) = ([0u8; 4], [0u8; 128]);
            img.read(0x800, &mut db);
            img.read(0, &mut entries);
            if db == [0xdb; 4] && entries != [0xee; 128] {
                bad += 1;
            }
        }
    }
    bad
}

#[test]
fn without_a_fence_full_lines_may_land_after_a_later_line() {
    assert!(doorbell_without_entries(false) > 0);
    assert_eq!(doorbell_without_entries(true), 0);
}
