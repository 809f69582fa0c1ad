//! CPU accounting: a core's busy time is the time its occupancy was held,
//! split into kernel and user time; waiting is idle; wake-ups are counted
//! where a stack charges them.

use pcie_sim::testing::RegisterFile;
use pcie_sim::{
    join_all, BarKind, CpuStats, Executor, Machine, MachineProfile, Purpose, SimDuration, SimTime, TraceMode,
};

fn setup() -> (Executor, Machine) {
    let ex = Executor::new(3);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::CountersOnly);
    (ex, m)
}

#[test]
fn threads_sharing_a_core_add_up_and_waiting_is_idle() {
    let (ex, m) = setup();
    assert!(m.core_count() >= 2);
    let sim = ex.sim();
    let (c0, c0b) = (m.core(0).unwrap(), m.core(0).unwrap());
    let s = sim.clone();
    let a = sim.spawn(async move {
        c0.busy(SimDuration::from_us(10)).await;
        // Sleeping (as on I/O) leaves the core idle.
        s.sleep(SimDuration::from_us(100)).await;
    });
    let b = sim.spawn(async move {
        c0b.user(SimDuration::from_us(5)).await;
    });
    ex.block_on(join_all(vec![a, b])).unwrap();
    let core0 = m.core(0).unwrap().stats();
    assert_eq!(core0.kernel, SimDuration::from_us(10));
    assert_eq!(core0.user, SimDuration::from_us(5));
    assert_eq!(m.core(1).unwrap().stats(), CpuStats::default());
    assert_eq!(m.cpu_stats(), core0);
    // 110 us elapsed: the kernel share of 2 cores is 10 / 220.
    let elapsed = sim.now().since(SimTime::ZERO);
    assert_eq!(elapsed, SimDuration::from_us(110));
    let (k, u) = m.cpu_stats().utilization(elapsed, 2);
    assert!((k - 10.0 / 220.0).abs() < 1e-12, "{k}");
    assert!((u - 5.0 / 220.0).abs() < 1e-12, "{u}");
}

#[test]
fn an_uncached_read_is_busy_waiting() {
    let (ex, m) = setup();
    let _dev = RegisterFile::attach(&m, Some(1 << 20), None);
    let core = m.core(1).unwrap();
    let pmr = m.bar(0, BarKind::Pmr).unwrap();
    let sim = ex.sim();
    let took = ex
        .block_on(async move {
            let t0 = sim.now();
            let mut b = [0u8; 8];
            core.mmio_read(pmr, &mut b, Purpose::UNTAGGED, 0).await.unwrap();
            sim.now().since(t0)
        })
        .unwrap();
    // The core stalls for the whole round trip (x86 UC loads block
    // retirement), so it is busy all along.
    assert!(took > SimDuration::ZERO);
    assert_eq!(m.core(1).unwrap().stats().kernel, took);
}

#[test]
fn a_wake_up_counts_one_switch_and_charges_its_cost() {
    let (ex, m) = setup();
    let core = m.core(0).unwrap();
    let before = m.cpu_stats();
    ex.block_on(async move {
        core.wake_up(SimDuration::from_us(2)).await;
        core.wake_up(SimDuration::from_us(2)).await;
    })
    .unwrap();
    let d = m.cpu_stats().since(before);
    assert_eq!(d.wakeups, 2);
    assert_eq!(d.context_switches, 2);
    assert_eq!(d.kernel, SimDuration::from_us(4));
    assert_eq!(d.user, SimDuration::ZERO);
}

#[test]
fn interrupt_work_is_kernel_time_counted_apart() {
    let (ex, m) = setup();
    let _dev = RegisterFile::attach(&m, Some(1 << 20), None);
    let pmr = m.bar(0, BarKind::Pmr).unwrap();
    let core = m.core(0).unwrap();
    let before = m.cpu_stats();
    ex.block_on(async move {
        core.busy(SimDuration::from_us(3)).await;
        let irq = core.in_irq();
        irq.busy(SimDuration::from_us(1)).await;
        // Everything done through the handler's handle counts: a store and
        // its read-back as well as plain compute.
        irq.mmio_write(pmr, &[1, 2, 3, 4], Purpose::UNTAGGED, 0)
            .await
            .unwrap();
    })
    .unwrap();
    let d = m.cpu_stats().since(before);
    assert!(d.irq > SimDuration::from_us(1), "{d:?}");
    assert_eq!(d.kernel - d.irq, SimDuration::from_us(3), "{d:?}");
    assert_eq!(d.user, SimDuration::ZERO);
}
