//! Property tests of the PCIe ordering rules and the power-failure model
//! over random interleavings of WC stores, fences, clflushes, uncached
//! reads and doorbell writes on several cores.
//!
//! Every WC store writes fresh 8-byte slots with unique non-zero values, so
//! whether a write landed can be read back from any PMR image.
//!
//! The crash states of [`CrashCursor`] are compared, at every point, with a
//! brute-force statement of rules W and P (`docs/persistence.md`): every
//! subset of the items not certain that is closed under "ahead on the
//! link", with the items and their send windows derived here from the
//! trace alone.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

use pcie_sim::testing::{RegisterFile, DOORBELL};
use pcie_sim::{
    BarKind, BusAddr, CrashChoice, CrashCursor, Endpoint, EventKind, Executor, ItemConstraint, Machine,
    MachineProfile, PageStore, Purpose, TraceMode, Unsupported,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// Store `slots` consecutive 8-byte slots.
    Store(u8),
    Fence,
    Clflush,
    ZeroRead,
    /// An 8-byte read of this core's last slot through the WC mapping
    /// (does not drain: what it reads must be held as landed).
    WcLoad,
    /// An uncached 8-byte store to this core's next slot (a posted write
    /// to the PMR, rule P; it drains the WC buffers first).
    UcStore,
    Doorbell,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u8..=12).prop_map(Op::Store),
        2 => Just(Op::Fence),
        1 => Just(Op::Clflush),
        2 => Just(Op::ZeroRead),
        1 => Just(Op::WcLoad),
        1 => Just(Op::UcStore),
        1 => Just(Op::Doorbell),
    ]
}

const PMR: u64 = 1 << 20;
const CORE_REGION: u64 = 0x10000;

/// Logs the order in which PMR writes take effect at the device.
struct Logger {
    inner: Rc<RegisterFile>,
    landed: RefCell<Vec<(u64, u64)>>,
}
impl Endpoint for Logger {
    fn reg_write(&self, o: u64, d: &[u8]) -> Result<(), Unsupported> {
        self.inner.reg_write(o, d)
    }
    fn reg_read(&self, o: u64, d: &mut [u8]) -> Result<(), Unsupported> {
        self.inner.reg_read(o, d)
    }
    fn pmr_written(&self, offset: u64, len: u64) {
        self.landed.borrow_mut().push((offset, len));
    }
}

struct Run {
    machine: Machine,
    landed: Vec<(u64, u64)>,
    /// (core, slot address, value) of every store, in issue order per core.
    stores: Vec<(usize, u64, u64)>,
    violations: Vec<String>,
}

fn run(programs: Vec<Vec<Op>>) -> Run {
    let ex = Executor::new(7);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let rf = RegisterFile::attach(&m, Some(PMR), None);
    let logger = Rc::new(Logger {
        inner: rf.clone(),
        landed: RefCell::new(Vec::new()),
    });
    m.connect(&rf.port, logger.clone());
    let pmr = m.bar(0, BarKind::Pmr).unwrap();
    let regs = m.bar(0, BarKind::Registers).unwrap();
    let stores = Rc::new(RefCell::new(Vec::new()));
    let violations = Rc::new(RefCell::new(Vec::new()));
    for (c, prog) in programs.into_iter().enumerate() {
        let core = m.core(c).unwrap();
        let m2 = m.clone();
        let stores = stores.clone();
        let violations = violations.clone();
        m.sim().spawn(async move {
            let mut next = pmr.0 + c as u64 * CORE_REGION;
            let mut mine: Vec<(u64, u64)> = Vec::new();
            for op in prog {
                match op {
                    Op::Store(n) => {
                        let mut bytes = Vec::new();
                        for s in 0..n as u64 {
                            let v = ((c as u64 + 1) << 48) | (next + s * 8);
                            bytes.extend_from_slice(&v.to_le_bytes());
                            mine.push((next + s * 8, v));
                            stores.borrow_mut().push((c, next + s * 8, v));
                        }
                        core.wc_store(BusAddr(next), &bytes, Purpose::new(1), c as u32)
                            .await
                            .unwrap();
                        next += n as u64 * 8;
                    }
                    Op::Fence => core.mfence().await.unwrap(),
                    Op::Clflush => core.clflush(BusAddr(next.saturating_sub(8))).await.unwrap(),
                    Op::ZeroRead => {
                        core.mmio_read(BusAddr(pmr.0), &mut [], Purpose::FLUSH_READ, c as u32)
                            .await
                            .unwrap();
                        // Every store this core made before the read is now
                        // in the PMR (an uncached access drains WC first,
                        // and the read cannot pass the writes).
                        let img = m2.pmr_image(0).unwrap();
                        for (a, v) in &mine {
                            let mut b = [0u8; 8];
                            img.read(a - pmr.0, &mut b);
                            if u64::from_le_bytes(b) != *v {
                                violations
                                    .borrow_mut()
                                    .push(format!("core {c}: store at {a:#x} missing after flush read"));
                            }
                        }
                    }
                    Op::WcLoad => {
                        let at = BusAddr(next.saturating_sub(8).max(pmr.0));
                        core.wc_read(at, &mut [0u8; 8], Purpose::new(2), 100 + c as u32)
                            .await
                            .unwrap();
                    }
                    Op::UcStore => {
                        let v = ((c as u64 + 1) << 48) | next;
                        mine.push((next, v));
                        stores.borrow_mut().push((c, next, v));
                        core.mmio_write(BusAddr(next), &v.to_le_bytes(), Purpose::new(4), c as u32)
                            .await
                            .unwrap();
                        next += 8;
                    }
                    Op::Doorbell => core
                        .mmio_write(regs + DOORBELL, &1u32.to_le_bytes(), Purpose::new(3), 0)
                        .await
                        .unwrap(),
                }
            }
        });
    }
    ex.run();
    let landed = logger.landed.borrow().clone();
    let stores = stores.borrow().clone();
    let violations = violations.borrow().clone();
    Run {
        machine: m,
        landed,
        stores,
        violations,
    }
}

fn slot_value(img: &PageStore, addr: u64, pmr_base: u64) -> u64 {
    let mut b = [0u8; 8];
    img.read(addr - pmr_base, &mut b);
    u64::from_le_bytes(b)
}

/// True if every byte of a PMR write's payload is in the image.
fn contains(img: &PageStore, off: u64, payload: &[u8]) -> bool {
    let mut b = vec![0u8; payload.len()];
    img.read(off, &mut b);
    b == payload
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, .. ProptestConfig::default() })]

    #[test]
    fn ordering_and_crash_states_hold(programs in prop::collection::vec(prop::collection::vec(op(), 1..30), 1..=3)) {
        let r = run(programs);
        prop_assert!(r.violations.is_empty(), "{:?}", r.violations);
        let m = &r.machine;
        let pmr_base = m.bar(0, BarKind::Pmr).unwrap().0;
        let trace = m.trace();
        let entries = trace.entries();

        // Posted writes take effect in issue order: the device saw the PMR
        // writes in exactly the order they were emitted, at non-decreasing
        // effect times.
        let emitted: Vec<usize> = (0..entries.len())
            .filter(|&i| entries[i].kind == EventKind::MmioWrite && entries[i].flags & pcie_sim::trace::FLAG_PMR != 0)
            .collect();
        let emitted_order: Vec<(u64, u64)> = emitted.iter().map(|&i| (entries[i].addr - pmr_base, entries[i].len as u64)).collect();
        prop_assert_eq!(&emitted_order, &r.landed);
        prop_assert!(emitted.windows(2).all(|w| entries[w[0]].effect <= entries[w[1]].effect));

        // At the end every store is in the PMR or still in a WC buffer.
        let fin = m.pmr_image(0).unwrap();
        let buffered: Vec<u64> = (0..3).filter_map(|c| m.core(c).ok()).flat_map(|c| c.buffered_lines()).map(|l| l.addr).collect();
        for (_, a, v) in &r.stores {
            prop_assert!(slot_value(&fin, *a, pmr_base) == *v || buffered.contains(&(a & !63)));
        }

        // Crash states: after every entry, exactly the states rules W and P
        // allow (brute force, where it is small enough). Stores made
        // before a completed flush read are persistent in every state.
        let mut cursor = CrashCursor::new(&trace, m.layout(), vec![PageStore::zeroed(PMR)]).unwrap();
        let mut reads_done: BTreeMap<u32, usize> = BTreeMap::new(); // core -> completed reads
        let mut read_requests: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for k in 0..entries.len() {
            let e = &entries[k];
            if e.kind == EventKind::MmioRead {
                read_requests.entry(e.attr).or_default().push(k);
            }
            if e.kind == EventKind::MmioReadCompletion {
                *reads_done.entry(e.attr).or_default() += 1;
            }
            cursor.advance_past(k).unwrap();
            let pending = cursor.pending();
            let (choices, left_out) = cursor.choices(&pending, 12);
            if let Some((offsets, want)) = envelope::states(&trace, pmr_base, k, 10) {
                prop_assert_eq!(left_out, 0);
                let mut got = BTreeSet::new();
                for choice in &choices {
                    let img = &cursor.materialize(&pending, choice).unwrap()[0];
                    got.insert(envelope::project(img, &offsets));
                }
                prop_assert!(got == want, "crash after {}: cursor {} states, envelope {}", k, got.len(), want.len());
                // The least state meeting a constraint (the read-set
                // reduction's chooser) is the smallest allowed state that
                // meets it, and there is none exactly when none meets it.
                let all_lines: BTreeSet<usize> = (0..pending.lines.len()).collect();
                for c1 in choices.iter().take(6) {
                    for c2 in choices.iter().rev().take(6) {
                        let c = ItemConstraint {
                            lines_in: c1.lines_landed.iter().copied().collect(),
                            lines_out: all_lines.difference(&c2.lines_landed.iter().copied().collect()).copied().collect(),
                            posted_min: c1.in_flight_landed.clone(),
                            posted_max: c2.in_flight_landed.clone(),
                        };
                        let meets = |x: &CrashChoice| {
                            c.lines_in.iter().all(|l| x.lines_landed.contains(l))
                                && !c.lines_out.iter().any(|l| x.lines_landed.contains(l))
                                && x.in_flight_landed.iter().zip(&c.posted_min).all(|(n, m)| n >= m)
                                && x.in_flight_landed.iter().zip(&c.posted_max).all(|(n, m)| n <= m)
                        };
                        let meeting: Vec<&CrashChoice> = choices.iter().filter(|x| meets(x)).collect();
                        match pending.least_choice(&c) {
                            None => prop_assert!(meeting.is_empty(), "crash after {}: {:?} met by {:?}", k, c, meeting),
                            Some(r) => {
                                prop_assert!(meeting.contains(&&r), "crash after {}: least {:?} not an allowed state meeting {:?}", k, r, c);
                                for x in &meeting {
                                    prop_assert!(r.lines_landed.iter().all(|l| x.lines_landed.contains(l)));
                                    prop_assert!(r.in_flight_landed.iter().zip(&x.in_flight_landed).all(|(a, b)| a <= b));
                                }
                            }
                        }
                    }
                }
            }
            // Flush-read guarantee, checked on the persistent image.
            for (core, done) in &reads_done {
                let Some(reqs) = read_requests.get(core) else { continue };
                let Some(&last_req) = reqs.get(done - 1) else { continue };
                for (i, st) in entries[..last_req].iter().enumerate() {
                    if st.kind == EventKind::WcStore && st.source as u32 == *core {
                        let p = trace.payload(st);
                        prop_assert!(contains(&cursor.persistent()[0], st.addr - pmr_base, p),
                            "store {} of core {} not persistent after its flush read (crash after {})", i, core, k);
                    }
                }
            }
        }
    }
}

/// Rules W and P stated directly over a trace (`docs/persistence.md` 1
/// and 2), for comparison with [`CrashCursor`].
mod envelope {
    use std::collections::{BTreeMap, BTreeSet};

    use pcie_sim::trace::{FLAG_LINE_START, FLAG_PMR, FLAG_UR, FLAG_WC};
    use pcie_sim::{BusTrace, EventKind, PageStore};

    use super::PMR;

    /// Something that may have landed: a posted write or a WC line.
    struct Item {
        /// Trace index before which it cannot have been sent.
        earliest: usize,
        /// Trace index by which it had been sent (`None`: not yet known).
        latest: Option<usize>,
        /// (core, line address) for a line.
        line: Option<(u8, u64)>,
        /// PMR offset and bytes.
        bytes: Vec<(u64, u8)>,
        certain: bool,
    }

    fn precedes(x: &Item, y: &Item) -> bool {
        x.latest.is_some_and(|l| l < y.earliest)
            || (x.line.is_some() && x.line == y.line && x.earliest < y.earliest)
    }

    /// The bytes of `img` at `offsets`.
    pub fn project(img: &PageStore, offsets: &[u64]) -> Vec<u8> {
        offsets
            .iter()
            .map(|&o| {
                let mut b = [0u8];
                img.read(o, &mut b);
                b[0]
            })
            .collect()
    }

    /// Every PMR image a crash after entry `k` may leave, as its bytes at
    /// the offsets the trace wrote (returned first), or `None` when more
    /// than `max` items are uncertain.
    pub fn states(
        trace: &BusTrace,
        pmr_base: u64,
        k: usize,
        max: usize,
    ) -> Option<(Vec<u64>, BTreeSet<Vec<u8>>)> {
        let entries = &trace.entries()[..=k];
        let now = entries[k].time;
        let mut items: Vec<Item> = Vec::new();
        // Open line segments: (core, line) -> (last store, bytes).
        let mut open: BTreeMap<(u8, u64), (usize, BTreeMap<u64, u8>)> = BTreeMap::new();
        // Sent lines: item index, its core, the effect of its TLPs.
        let mut sent: Vec<(usize, u8, pcie_sim::SimTime)> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            match e.kind {
                EventKind::WcStore => {
                    for (j, b) in trace.payload(e).iter().enumerate() {
                        let a = e.addr + j as u64;
                        let seg = open.entry((e.source, a & !63)).or_insert((i, BTreeMap::new()));
                        seg.0 = i;
                        seg.1.insert(a - pmr_base, *b);
                    }
                }
                EventKind::MmioWrite if e.flags & FLAG_PMR != 0 && e.flags & FLAG_WC != 0 => {
                    let key = (e.source, e.addr & !63);
                    if e.flags & FLAG_LINE_START != 0 {
                        let (after, bytes) = open.remove(&key).expect("a sent line was stored");
                        let latest = entries[i..]
                            .iter()
                            .position(|f| f.kind == EventKind::Fence && f.source == e.source)
                            .map(|p| i + p);
                        items.push(Item {
                            earliest: after,
                            latest,
                            line: Some(key),
                            bytes: bytes.into_iter().collect(),
                            certain: false,
                        });
                        sent.push((items.len() - 1, e.source, e.effect));
                    } else if let Some(s) = sent.iter_mut().rev().find(|s| s.1 == e.source) {
                        s.2 = s.2.max(e.effect);
                    }
                }
                EventKind::MmioWrite if e.flags & FLAG_PMR != 0 && e.flags & FLAG_UR == 0 => {
                    let bytes = trace
                        .payload(e)
                        .iter()
                        .enumerate()
                        .map(|(j, b)| (e.addr - pmr_base + j as u64, *b))
                        .collect();
                    items.push(Item {
                        earliest: i,
                        latest: Some(i),
                        line: None,
                        bytes,
                        certain: e.effect <= now,
                    });
                }
                _ => {}
            }
        }
        for ((core, addr), (after, bytes)) in open {
            items.push(Item {
                earliest: after,
                latest: None,
                line: Some((core, addr)),
                bytes: bytes.into_iter().collect(),
                certain: false,
            });
        }
        // Certain lines: proven by a later uncached request in effect, or
        // read after they took effect.
        for &(it, _, effect) in &sent {
            let proven = items[it].latest.is_some_and(|d| {
                entries[d..].iter().any(|f| {
                    matches!(f.kind, EventKind::MmioWrite | EventKind::MmioRead)
                        && f.flags & FLAG_WC == 0
                        && f.effect <= now
                })
            });
            let lo = items[it].bytes.first().map_or(0, |b| b.0);
            let hi = items[it].bytes.last().map_or(0, |b| b.0 + 1);
            let seen = entries.iter().any(|f| {
                f.kind == EventKind::PmrRead
                    && f.time >= effect
                    && f.addr < hi
                    && f.addr + u64::from(f.len) > lo
            });
            items[it].certain |= proven || seen;
        }
        loop {
            let add: Vec<usize> = (0..items.len())
                .filter(|&x| !items[x].certain && items.iter().any(|y| y.certain && precedes(&items[x], y)))
                .collect();
            if add.is_empty() {
                break;
            }
            for x in add {
                items[x].certain = true;
            }
        }
        let free: Vec<usize> = (0..items.len()).filter(|&x| !items[x].certain).collect();
        if free.len() > max {
            return None;
        }
        let offsets: Vec<u64> = items
            .iter()
            .flat_map(|it| it.bytes.iter().map(|b| b.0))
            .collect::<BTreeSet<u64>>()
            .into_iter()
            .collect();
        let mut out = BTreeSet::new();
        for mask in 0u64..1 << free.len() {
            let landed = |x: usize| {
                items[x].certain
                    || free
                        .iter()
                        .position(|&f| f == x)
                        .is_some_and(|b| mask & (1 << b) != 0)
            };
            let closed = (0..items.len())
                .filter(|&y| landed(y))
                .all(|y| (0..items.len()).all(|x| !precedes(&items[x], &items[y]) || landed(x)));
            if !closed {
                continue;
            }
            let mut order: Vec<usize> = (0..items.len()).filter(|&x| landed(x)).collect();
            order.sort_by_key(|&x| items[x].earliest);
            let mut img = PageStore::zeroed(PMR);
            for x in order {
                for &(off, b) in &items[x].bytes {
                    img.write(off, &[b]);
                }
            }
            out.insert(project(&img, &offsets));
        }
        Some((offsets, out))
    }
}
