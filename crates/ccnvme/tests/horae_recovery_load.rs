//! What Horae's recovery reads of the ordering queue's region
//! (`ccnvme::RegionLoad`): the whole ring, as HoRAE's released module
//! loads the whole metadata region into DRAM, or only the live slots from
//! head to tail, as crash exploration does. The reduction is sound only if
//! both decide the same: here they are compared at every crash state of a
//! workload that wraps a small ring (so the slots past the tail hold stale
//! entries), and the whole load of a full-size region is timed.

use std::rc::Rc;

use ccnvme::horae::{self, OrderingQueue};
use ccnvme::{Bio, BlockDevice, DriverFaults, ProbeOptions, RegionLoad};
use nvme_ctrl::{Media, SsdProfile};
use pcie_sim::{CrashCursor, Executor, Machine, PageStore, TraceMode};

mod common;

const BLOCKS: u64 = 4096;
/// Ring slots of the small queue: the workload wraps it twice.
const SLOTS: u32 = 8;

fn opts(load: RegionLoad) -> ProbeOptions {
    let mut o = common::horae_options(DriverFaults::default());
    o.profile.horae_recovery_load = load;
    o
}

/// A machine over `pmr` (a fresh PMR when `None`) and its device.
fn device(pmr: Option<PageStore>, load: RegionLoad, mode: TraceMode) -> (Executor, Machine, Rc<BlockDevice>) {
    let (ex, m, _) = common::machine(SsdProfile::optane_905p(), Media::memory(BLOCKS), pmr, mode);
    let dev = common::probe(&ex, &m, opts(load));
    (ex, m, dev)
}

/// Epochs of two writes on a ring of [`SLOTS`] slots, each waited for,
/// every third one flushed: the queue wraps and dequeues as it goes.
fn record() -> Machine {
    let (ex, m, dev) = device(None, RegionLoad::Live, TraceMode::Full);
    let m2 = m.clone();
    ex.block_on(async move {
        let q = OrderingQueue::attach_with(&dev, Some(SLOTS)).await.unwrap();
        for e in 0..12u64 {
            let writes = [(100 + 2 * e, 1), (101 + 2 * e, 1)];
            let epoch = q.append_epoch(0, &writes).await.unwrap();
            let mut done = Vec::new();
            for (i, &(lba, len)) in writes.iter().enumerate() {
                let bio = Bio::write(lba, common::pages(&m2, len as usize, e as u8 + 1));
                done.push(q.submit(0, epoch.entry(i as u32).unwrap(), &bio).await.unwrap());
            }
            for d in done {
                assert!(dev.wait(0, &d).await.is_success());
            }
            if e % 3 == 2 {
                q.flush(0).await.unwrap();
            }
        }
    })
    .unwrap();
    ex.run();
    m
}

/// Recovery of the crash state `pmr` with `load`: what it found (or its
/// error), the tail it found, and the simulated time it took.
fn recover(pmr: &PageStore, load: RegionLoad) -> (String, Option<u64>, f64) {
    let (ex, m, dev) = device(Some(pmr.clone()), load, TraceMode::Off);
    ex.block_on(async move {
        let t0 = m.sim().now();
        let r = horae::recover(&dev).await;
        let tail = r.as_ref().ok().map(|r| r.tail);
        (format!("{r:?}"), tail, m.sim().now().since(t0).as_us_f64())
    })
    .unwrap()
}

#[test]
fn whole_and_live_loads_decide_the_same_at_every_crash_state() {
    let m = record();
    let trace = m.take_trace();
    let pmr_len = m.pmr_image(0).unwrap().len();
    let mut cursor = CrashCursor::new(&trace, m.layout(), vec![PageStore::zeroed(pmr_len)]).unwrap();
    let (mut states, mut wrapped, mut found) = (0, 0, 0);
    for k in 0..trace.entries().len() {
        cursor.advance_past(k).unwrap();
        let pending = cursor.pending();
        let (choices, _) = cursor.choices(&pending, 4);
        for c in &choices {
            let pmr = cursor.materialize(&pending, c).unwrap()[0].clone();
            let (whole, tail, _) = recover(&pmr, RegionLoad::Whole);
            let (live, _, _) = recover(&pmr, RegionLoad::Live);
            assert_eq!(whole, live, "crash point {k}: the loads decide differently");
            states += 1;
            found += tail.is_some() as usize;
            // A tail past the ring's size: slots the whole load reads and
            // the live one does not hold older entries.
            wrapped += tail.is_some_and(|t| t > u64::from(SLOTS)) as usize;
        }
    }
    eprintln!("{states} crash states, {found} recovered a queue, {wrapped} with a wrapped ring");
    assert!(found > 100, "{found} of {states}");
    assert!(wrapped > 50, "{wrapped} of {states}");
}

/// On a region of the drive's full size the whole load reads every slot
/// through uncached MMIO reads (HoRAE 5.2: a 4 KiB read costs 113 us), so
/// it takes far longer than the live slots of a short queue.
#[test]
fn the_whole_load_of_a_full_region_takes_its_read_time() {
    let (ex, m, dev) = device(None, RegionLoad::Live, TraceMode::Off);
    let m2 = m.clone();
    let slots = ex
        .block_on(async move {
            let q = OrderingQueue::attach(&dev).await.unwrap();
            let e = q.append_epoch(0, &[(10, 1)]).await.unwrap();
            let bio = Bio::write(10, common::pages(&m2, 1, 1));
            let d = q.submit(0, e.entry(0).unwrap(), &bio).await.unwrap();
            assert!(dev.wait(0, &d).await.is_success());
            q.capacity()
        })
        .unwrap();
    ex.run();
    let pmr = m.pmr_image(0).unwrap();
    let (whole, _, t_whole) = recover(&pmr, RegionLoad::Whole);
    let (live, _, t_live) = recover(&pmr, RegionLoad::Live);
    assert_eq!(whole, live);
    let ring_kib = f64::from(slots) * 16.0 / 1024.0;
    eprintln!("{slots} slots ({ring_kib:.0} KiB): whole load {t_whole:.0} us, live {t_live:.1} us");
    // At least 100 us per 4 KiB of ring for the whole load.
    assert!(
        t_whole >= 100.0 * ring_kib / 4.0,
        "{t_whole} us for {ring_kib} KiB"
    );
    assert!(t_live < 200.0, "{t_live} us");
}
