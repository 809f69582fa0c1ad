//! The completion interrupt handler: Linux's, which reaps every completion
//! it finds and rings the CQ head doorbell once (`CqReap::Drain`, with the
//! messages that arrive meanwhile collapsed into one more run, as the
//! local APIC does), against ccNVMe Table 1's counting model, one
//! completion per interrupt (`CqReap::OnePerInterrupt`).

mod common;

use ccnvme::{Bio, CqReap, DriverProfile, ProbeOptions, Traffic};
use nvme_ctrl::{Media, SsdProfile};
use pcie_sim::{SimDuration, TraceMode};

/// Submits `n` single-block writes at once on core 0, computes 200 us on
/// that core, then waits for all of them; returns the traffic and core
/// 0's kernel time. The drive is a 905P with one media unit, so the
/// completions arrive one program time (7.27 us) apart, most of them
/// while the core computes.
fn burst(reap: CqReap, n: u64) -> (Traffic, u64) {
    let one_unit = SsdProfile {
        units: 1,
        ..SsdProfile::optane_905p()
    };
    let (ex, m, _) = common::machine(one_unit, Media::memory(4096), None, TraceMode::Off);
    let opts = ProbeOptions {
        ccnvme: false,
        profile: DriverProfile {
            cq_reap: reap,
            ..DriverProfile::default()
        },
        ..ProbeOptions::default()
    };
    let dev = common::probe(&ex, &m, opts);
    let pages = common::pages(&m, n as usize, 1);
    let m2 = m.clone();
    ex.block_on(async move {
        let before = m2.counters();
        let busy = m2.core(0).expect("core 0").stats().kernel;
        let mut done = Vec::new();
        for i in 0..n {
            done.push(
                dev.submit(0, &Bio::write(100 + 8 * i, vec![pages[i as usize]]))
                    .await
                    .unwrap(),
            );
        }
        // The thread computes meanwhile on the core that takes the
        // interrupts, so the completions find the handler unable to run.
        m2.core(0).expect("core 0").user(SimDuration::from_us(200)).await;
        for d in &done {
            assert!(dev.wait(0, d).await.is_success(), "every write completes");
        }
        let busy = m2.core(0).expect("core 0").stats().kernel - busy;
        (
            Traffic::from_counters(&m2.counters().since(&before)),
            busy.as_ps(),
        )
    })
    .unwrap()
}

#[test]
fn linux_reaps_a_burst_of_completions_with_fewer_doorbells_and_handler_runs() {
    let n = 32;
    let (one, one_busy) = burst(CqReap::OnePerInterrupt, n);
    let (drain, drain_busy) = burst(CqReap::Drain, n);
    eprintln!(
        "{n} completions: one per interrupt {} CQ doorbells, {:.1} us kernel; drained {} CQ doorbells, {:.1} us kernel",
        one.mmio - n,
        one_busy as f64 / 1e6,
        drain.mmio - n,
        drain_busy as f64 / 1e6
    );
    // The device sends one MSI-X per completion either way.
    assert_eq!((one.irq, drain.irq), (n, n));
    assert_eq!((one.block_io, drain.block_io), (n, n));
    // MMIO: n SQ doorbells, then the CQ head doorbells.
    assert_eq!(one.mmio - n, n, "one CQ doorbell per completion: {one:?}");
    let cq_doorbells = drain.mmio - n;
    assert!(
        cq_doorbells >= 1 && cq_doorbells < n,
        "completions that arrived together share a doorbell: {cq_doorbells} of {n}"
    );
    assert!(
        drain_busy + 20 * 1_000_000 < one_busy,
        "collapsed interrupts are fewer handler runs (1 us each): {drain_busy} ps against {one_busy} ps of kernel time"
    );
}
