//! Property tests of the PCIe ordering rules and the power-failure model
//! over random interleavings of WC stores, fences, clflushes, uncached
//! reads and doorbell writes on several cores.
//!
//! Every WC store writes fresh 8-byte slots with unique non-zero values, so
//! whether a write landed can be read back from any PMR image.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use pcie_sim::testing::{RegisterFile, DOORBELL};
use pcie_sim::{
    BarKind, BusAddr, CrashCursor, Endpoint, EventKind, Executor, Machine, MachineProfile, PageStore,
    Purpose, TraceMode, Unsupported,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// Store `slots` consecutive 8-byte slots.
    Store(u8),
    Fence,
    Clflush,
    ZeroRead,
    Doorbell,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u8..=12).prop_map(Op::Store),
        2 => Just(Op::Fence),
        1 => Just(Op::Clflush),
        2 => Just(Op::ZeroRead),
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

        // Crash states: after every entry, every allowed state holds a
        // prefix of the emitted PMR writes, and a landed WC line implies
        // every emitted write landed. Stores made before a completed flush
        // read are persistent in every state.
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
            let (choices, _) = cursor.choices(&pending, 6);
            let emitted_so_far: Vec<usize> = emitted.iter().copied().filter(|&i| i <= k).collect();
            for choice in &choices {
                let imgs = cursor.materialize(&pending, choice).unwrap();
                let img = &imgs[0];
                let landed: Vec<bool> = emitted_so_far
                    .iter()
                    .map(|&i| contains(img, entries[i].addr - pmr_base, trace.payload(&entries[i])))
                    .collect();
                if let Some(first_missing) = landed.iter().position(|l| !l) {
                    // Writes to distinct slots: nothing after a missing one.
                    prop_assert!(landed[first_missing..].iter().all(|l| !l),
                        "crash after {} holds a later posted write without an earlier one", k);
                    prop_assert!(choice.lines_landed.is_empty());
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
