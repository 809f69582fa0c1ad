//! The `tokio::sync` primitives the stack uses (Mutex, Semaphore, Notify)
//! run on the simulation's own executor and keep it deterministic: they hand
//! out in arrival (FIFO) order, so two runs with the same seed give the same
//! bus trace, and the trace records the order in which they granted.

use std::cell::RefCell;
use std::rc::Rc;

use pcie_sim::testing::{RegisterFile, DOORBELL};
use pcie_sim::{BarKind, Executor, Machine, MachineProfile, Purpose, SimDuration, TraceMode};
use rand::Rng;
use tokio::sync::{Mutex, Notify, Semaphore};

/// Who got a primitive, in grant order: (primitive, task).
type Grants = Rc<RefCell<Vec<(&'static str, u32)>>>;

/// Tasks arriving at seeded times contend for a mutex, for a semaphore
/// (with requests of several permits) and wait on a notifier that wakes
/// them all at once; each rings the device's doorbell with its number when
/// it is granted, so the grant order is in the trace. Returns the trace
/// hash, the grant order and the arrival order at the mutex.
fn run(seed: u64) -> (u64, Vec<(&'static str, u32)>, Vec<u32>) {
    let ex = Executor::new(seed);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let _dev = RegisterFile::attach(&m, None, None);
    let doorbell = m.bar(0, BarKind::Registers).unwrap() + DOORBELL;
    let sim = m.sim();
    let mutex = Rc::new(Mutex::new(()));
    let sem = Rc::new(Semaphore::new(3));
    let notify = Rc::new(Notify::new());
    let grants: Grants = Rc::default();
    let arrivals = Rc::new(RefCell::new(Vec::new()));
    for i in 0..8u32 {
        let core = m.core(i as usize % 4).unwrap();
        let (sim2, mutex, sem, notify) = (sim.clone(), mutex.clone(), sem.clone(), notify.clone());
        let (grants, arrivals) = (grants.clone(), arrivals.clone());
        sim.spawn(async move {
            let (arrive, hold, permits) = sim2.with_rng(|r| {
                (
                    r.gen_range(0..50u64),
                    r.gen_range(1..40u64),
                    r.gen_range(1..=3u32),
                )
            });
            sim2.sleep(SimDuration::from_ns(arrive)).await;
            arrivals.borrow_mut().push(i);
            {
                let _g = mutex.lock().await;
                grants.borrow_mut().push(("mutex", i));
                core.mmio_write(doorbell, &i.to_le_bytes(), Purpose::new(3), i)
                    .await
                    .unwrap();
                sim2.sleep(SimDuration::from_ns(hold)).await;
            }
            {
                let _p = sem.acquire_many(permits).await.unwrap();
                grants.borrow_mut().push(("semaphore", i));
                core.mmio_write(doorbell, &(100 + i).to_le_bytes(), Purpose::new(3), i)
                    .await
                    .unwrap();
                sim2.sleep(SimDuration::from_ns(hold)).await;
            }
            notify.notified().await;
            grants.borrow_mut().push(("notify", i));
            core.mmio_write(doorbell, &(200 + i).to_le_bytes(), Purpose::new(3), i)
                .await
                .unwrap();
        });
    }
    let s2 = sim.clone();
    let n2 = notify.clone();
    sim.spawn(async move {
        s2.sleep(SimDuration::from_us(100)).await;
        n2.notify_waiters();
    });
    ex.run();
    assert_eq!(ex.live_tasks(), 0, "every task finished");
    let hash = m.trace().hash();
    let g = grants.borrow().clone();
    let a = arrivals.borrow().clone();
    (hash, g, a)
}

#[test]
fn tokio_sync_on_the_simulation_executor_is_deterministic_and_fifo() {
    let (h1, g1, a1) = run(7);
    let (h2, g2, a2) = run(7);
    assert_eq!(h1, h2, "same seed, same trace");
    assert_eq!(g1, g2);
    assert_eq!(a1, a2);
    let mutex_order: Vec<u32> = g1
        .iter()
        .filter(|(p, _)| *p == "mutex")
        .map(|(_, i)| *i)
        .collect();
    assert_eq!(mutex_order, a1, "the mutex is granted in arrival order");
    assert_eq!(g1.len(), 24, "every task got every primitive");
    // The hash sees the grant order: another seed changes arrivals, and
    // with them the trace.
    let (h3, g3, _) = run(8);
    assert_ne!(g1, g3);
    assert_ne!(h1, h3);
}
