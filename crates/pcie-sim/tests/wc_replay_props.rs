//! The crash model replays write-combining with the cores' own buffers:
//! random store / fence / clflush / read / doorbell / idle sequences on
//! several cores run through the real CPU path with a recorded trace; a
//! [`CrashCursor`] replaying that trace holds, at every observed point, the
//! very lines each running core held there.

use std::cell::RefCell;
use std::rc::Rc;

use pcie_sim::testing::{RegisterFile, DOORBELL};
use pcie_sim::wc::WcLine;
use pcie_sim::{
    BarKind, BusAddr, CrashCursor, Executor, Machine, MachineProfile, PageStore, Purpose, SimDuration,
    TraceMode,
};
use proptest::prelude::*;

const PMR: u64 = 1 << 16;
/// Line buffers per core: few, so stores run out of them.
const BUFFERS: usize = 3;

#[derive(Clone, Debug)]
enum Op {
    /// Store `len` bytes at PMR offset `off` (lines shared by the cores).
    Store {
        off: u16,
        len: u8,
    },
    Fence,
    Clflush(u16),
    /// Zero-length read through the WC mapping (does not drain).
    WcRead,
    /// Zero-length uncached read (drains first).
    UcRead,
    Doorbell,
    /// Sleep this many nanoseconds (long ones let the idle evictor run).
    Idle(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u16..640, 1u8..=140).prop_map(|(off, len)| Op::Store { off, len }),
        2 => Just(Op::Fence),
        2 => (0u16..700).prop_map(Op::Clflush),
        1 => Just(Op::WcRead),
        1 => Just(Op::UcRead),
        1 => Just(Op::Doorbell),
        2 => (0u16..14_000).prop_map(Op::Idle),
    ]
}

/// (trace length, each core's buffered lines) when observed.
type Snapshot = (u64, Vec<Vec<WcLine>>);

fn snapshot(m: &Machine, cores: usize) -> Snapshot {
    let lines = (0..cores)
        .map(|c| m.core(c).map(|c| c.buffered_lines()).unwrap_or_default())
        .collect();
    (m.trace().len(), lines)
}

/// Runs the programs (one per core) and an observer waking after each of
/// `looks` nanoseconds; returns the machine and every snapshot, in time
/// order (each op's end is a snapshot too).
fn run(programs: Vec<Vec<Op>>, looks: Vec<u16>) -> (Machine, Vec<Snapshot>) {
    let ex = Executor::new(11);
    let mut profile = MachineProfile::default();
    profile.cpu.wc_buffers = BUFFERS;
    let m = Machine::new(&ex, profile, TraceMode::Full);
    RegisterFile::attach(&m, Some(PMR), None);
    let pmr = m.bar(0, BarKind::Pmr).unwrap();
    let regs = m.bar(0, BarKind::Registers).unwrap();
    let cores = programs.len();
    let snaps = Rc::new(RefCell::new(Vec::new()));
    for (c, prog) in programs.into_iter().enumerate() {
        let core = m.core(c).unwrap();
        let m2 = m.clone();
        let snaps = snaps.clone();
        m.sim().spawn(async move {
            let mut value = (c as u8 + 1) << 5;
            for op in prog {
                match op {
                    Op::Store { off, len } => {
                        let bytes: Vec<u8> = (0..len)
                            .map(|_| {
                                value = value.wrapping_add(1) | 1;
                                value
                            })
                            .collect();
                        core.wc_store(pmr + u64::from(off), &bytes, Purpose::new(1), c as u32)
                            .await
                            .unwrap();
                    }
                    Op::Fence => core.mfence().await.unwrap(),
                    Op::Clflush(off) => core.clflush(pmr + u64::from(off)).await.unwrap(),
                    Op::WcRead => core
                        .wc_read(BusAddr(pmr.0), &mut [], Purpose::FLUSH_READ, c as u32)
                        .await
                        .unwrap(),
                    Op::UcRead => core
                        .mmio_read(BusAddr(pmr.0), &mut [], Purpose::FLUSH_READ, c as u32)
                        .await
                        .unwrap(),
                    Op::Doorbell => core
                        .mmio_write(regs + DOORBELL, &1u32.to_le_bytes(), Purpose::new(3), 0)
                        .await
                        .unwrap(),
                    Op::Idle(ns) => m2.sim().sleep(SimDuration::from_ns(u64::from(ns))).await,
                }
                snaps.borrow_mut().push(snapshot(&m2, cores));
            }
        });
    }
    let m2 = m.clone();
    let s2 = snaps.clone();
    m.sim().spawn(async move {
        for ns in looks {
            m2.sim().sleep(SimDuration::from_ns(u64::from(ns))).await;
            s2.borrow_mut().push(snapshot(&m2, cores));
        }
    });
    ex.run();
    snaps.borrow_mut().push(snapshot(&m, cores));
    let out = snaps.borrow().clone();
    (m, out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, .. ProptestConfig::default() })]

    #[test]
    fn the_replayed_buffers_are_the_running_ones(
        programs in prop::collection::vec(prop::collection::vec(op(), 1..40), 1..=3),
        looks in prop::collection::vec(1u16..3_000, 0..60),
    ) {
        if let Err(e) = replay_matches(programs, looks) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// Runs the programs and replays their trace: at every snapshot the
/// cursor holds each core's very lines, each of them pending with its
/// bytes.
fn replay_matches(programs: Vec<Vec<Op>>, looks: Vec<u16>) -> Result<(), String> {
    let (m, snaps) = run(programs, looks);
    let trace = m.trace();
    let mut cursor = CrashCursor::new(&trace, m.layout(), vec![PageStore::zeroed(PMR)])
        .map_err(|e| e.to_string())?
        .with_wc_buffers(BUFFERS);
    for (len, lines) in &snaps {
        if *len > 0 {
            cursor
                .advance_past(*len as usize - 1)
                .map_err(|e| e.to_string())?;
        }
        let pending = cursor.pending();
        for (c, held) in lines.iter().enumerate() {
            if cursor.buffered(c) != &held[..] {
                return Err(format!(
                    "core {c} after {len} entries: the replay holds {:x?}, the machine {:x?}",
                    cursor.buffered(c),
                    held
                ));
            }
            // Every held line is pending, with its bytes.
            for l in held {
                if !pending.lines.iter().any(|p| p.core as usize == c && &p.line == l) {
                    return Err(format!("core {c} after {len} entries: {l:x?} is not pending"));
                }
            }
        }
    }
    Ok(())
}

/// A case the property found: core 0's idle evictor is draining its
/// buffers when a store evicts the line at 0x40 for room and buffers 0x40
/// anew. The evictor used to take the slots before the evicted line, so
/// the new bytes of 0x40 reached the PMR first and the old ones after,
/// over them (and the replay, which sends lines in the order they left the
/// buffers, disagreed with the machine). The lines now leave in the order
/// they left the buffers.
#[test]
fn a_line_evicted_beside_an_idle_drain_leaves_before_its_address_is_buffered_again() {
    let programs: Vec<Vec<Op>> = vec![
        vec![
            Op::Store { off: 0, len: 1 },
            Op::Store { off: 23, len: 42 },
            Op::Fence,
            Op::Store { off: 14, len: 51 },
            Op::Store { off: 317, len: 68 },
            Op::Store { off: 192, len: 1 },
            Op::Idle(5208),
            Op::Store { off: 466, len: 111 },
            Op::Store { off: 64, len: 1 },
            Op::Store { off: 407, len: 81 },
            Op::WcRead,
            Op::Idle(5622),
            Op::WcRead,
            Op::WcRead,
            Op::Store { off: 452, len: 125 },
            Op::Store { off: 22, len: 43 },
        ],
        vec![
            Op::Store { off: 418, len: 106 },
            Op::WcRead,
            Op::Store { off: 314, len: 16 },
            Op::Store { off: 528, len: 54 },
            Op::Idle(13883),
            Op::UcRead,
            Op::Store { off: 364, len: 93 },
            Op::WcRead,
            Op::Store { off: 318, len: 28 },
            Op::Fence,
            Op::UcRead,
            Op::Store { off: 437, len: 1 },
            Op::Doorbell,
            Op::Store { off: 157, len: 3 },
            Op::Fence,
            Op::Idle(5283),
        ],
        vec![
            Op::Idle(509),
            Op::WcRead,
            Op::Store { off: 598, len: 112 },
            Op::Idle(11460),
            Op::Fence,
            Op::UcRead,
            Op::Store { off: 237, len: 52 },
            Op::Store { off: 28, len: 139 },
            Op::Store { off: 626, len: 6 },
            Op::Fence,
            Op::Store { off: 63, len: 123 },
            Op::Store { off: 222, len: 26 },
            Op::Store { off: 430, len: 97 },
            Op::Store { off: 307, len: 89 },
            Op::Store { off: 537, len: 88 },
            Op::Idle(7766),
            Op::Clflush(665),
            Op::Store { off: 599, len: 97 },
            Op::Fence,
        ],
    ];
    let looks: Vec<u16> = vec![
        1553, 1967, 1970, 1390, 1646, 2665, 2822, 873, 731, 1753, 1275, 1684, 1973, 1022, 2775, 2654, 1445,
        740, 520, 2360, 2181, 2456, 545, 377, 2290, 2506, 2654, 1551, 1061, 516, 1391,
    ];
    if let Err(e) = replay_matches(programs.clone(), looks.clone()) {
        panic!("{e}");
    }
    // Core 0's last store of the byte at 0x40 is what the PMR holds.
    let (m, _) = run(programs, looks);
    let trace = m.trace();
    let pmr = m.bar(0, BarKind::Pmr).unwrap().0;
    let last = trace
        .entries()
        .iter()
        .rev()
        .filter(|e| e.kind == pcie_sim::EventKind::WcStore && e.source == 0)
        .find(|e| e.addr - pmr <= 0x40 && e.addr - pmr + u64::from(e.len) > 0x40)
        .map(|e| trace.payload(e)[(0x40 - (e.addr - pmr)) as usize])
        .expect("core 0 stores to 0x40");
    let mut b = [0u8; 1];
    m.pmr_image(0).unwrap().read(0x40, &mut b);
    assert_eq!(b[0], last, "the PMR holds core 0's last byte at 0x40");
}

/// A store that arrives while the idle evictor waits for a slot to send a
/// line combines into that line, still buffered; the crash model sees the
/// same. (When a drain emptied the buffers at once and sent the lines
/// later, the replay merged the store into the drained line and dropped it
/// at that line's TLP: the model lost bytes the machine still held.)
#[test]
fn a_store_during_an_idle_drain_is_not_lost_to_the_crash_model() {
    let ex = Executor::new(5);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    RegisterFile::attach(&m, Some(PMR), None);
    let pmr = m.bar(0, BarKind::Pmr).unwrap();
    let core = m.core(0).unwrap();
    let m2 = m.clone();
    let after_store = Rc::new(RefCell::new(None));
    let a2 = after_store.clone();
    m.sim().spawn(async move {
        core.wc_store(pmr, &[1; 8], Purpose::new(1), 0).await.unwrap();
        core.wc_store(pmr + 0x40, &[2; 8], Purpose::new(1), 0)
            .await
            .unwrap();
        // Wait until the evictor sent the first line but not the second.
        let started = |m: &Machine, addr: u64| {
            m.trace()
                .entries()
                .iter()
                .any(|e| e.flags & pcie_sim::trace::FLAG_LINE_START != 0 && e.addr == addr)
        };
        while !started(&m2, pmr.0) {
            m2.sim().sleep(SimDuration::from_ns(10)).await;
        }
        assert!(!started(&m2, pmr.0 + 0x40), "the drain waits a slot per line");
        core.wc_store(pmr + 0x48, &[3; 8], Purpose::new(1), 0)
            .await
            .unwrap();
        *a2.borrow_mut() = Some((m2.trace().len(), core.buffered_lines()));
        core.mfence().await.unwrap();
    });
    ex.run();
    let Some((len, held)) = after_store.borrow_mut().take() else {
        panic!("the program did not run to its end");
    };
    // The machine combined the store into the line the drain still held.
    assert_eq!(held.len(), 1);
    assert_eq!(held[0].addr, pmr.0 + 0x40);
    assert_eq!(held[0].mask, 0xffff);
    let trace = m.trace();
    let mut cursor = CrashCursor::new(&trace, m.layout(), vec![PageStore::zeroed(PMR)]).unwrap();
    cursor.advance_past(len as usize - 1).unwrap();
    assert_eq!(cursor.buffered(0), &held[..]);
    let pending = cursor.pending();
    assert!(pending.lines.iter().any(|p| p.line == held[0]));
    // And the bytes did reach the PMR.
    let mut b = [0u8; 16];
    m.pmr_image(0).unwrap().read(0x40, &mut b);
    assert_eq!(b, [[2u8; 8], [3u8; 8]].concat()[..]);
}
