//! A Controller Reset (CC.EN 1 -> 0, NVMe 1.4 7.3.2) wakes the commands
//! waiting for room in any completion queue. It must wake them in an order
//! fixed by the program (queue id, then arrival), not by a hash map's
//! per-process seed, or two runs of the same seed schedule differently.

use std::cell::RefCell;
use std::rc::Rc;

use pcie_sim::{Executor, Machine, MachineProfile, TraceMode};

use crate::controller::{Controller, ControllerConfig};
use crate::media::Media;
use crate::profile::SsdProfile;
use crate::testing::TestHost;
use nvme_spec::regs;

/// Queue ids created, in creation order (not sorted, so that neither
/// creation nor arrival order is the queue-id order).
const QUEUES: [u16; 8] = [5, 2, 8, 1, 7, 3, 6, 4];

/// Brings a controller up with the I/O queue pairs of [`QUEUES`], parks a
/// waiter on each CQ's space (in reverse creation order), resets the
/// controller and lets every woken waiter write its queue id to host memory
/// by DMA (so the wake order is in the trace). Returns the trace hash and
/// the wake order.
fn run(seed: u64) -> (u64, Vec<u16>) {
    let ex = Executor::new(seed);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    let ctrl = Controller::attach(
        &m,
        ControllerConfig::new(SsdProfile::optane_905p()),
        Media::memory(1024),
        None,
    )
    .unwrap();
    let host = TestHost::new(&m, 0, 0).unwrap();
    let h = host.clone();
    ex.block_on(async move {
        h.enable(32).await.unwrap();
        for q in QUEUES {
            let (cq, sq) = h.create_io_pair(q, 4).await.unwrap();
            assert!(cq.status.is_success() && sq.status.is_success(), "queue pair {q}");
        }
    })
    .unwrap();
    let woken = Rc::new(RefCell::new(Vec::new()));
    let buf = m.memory().alloc(4096).unwrap();
    for q in QUEUES.iter().rev().copied() {
        let space = ctrl.cq_space.borrow().get(&q).cloned().unwrap();
        let (port, woken) = (ctrl.port().clone(), woken.clone());
        m.sim().spawn(async move {
            space.notify.notified().await;
            woken.borrow_mut().push(q);
            port.dma_write(
                buf.bus() + u64::from(q),
                &[q as u8],
                nvme_spec::traffic::DATA_BLOCK,
                u32::from(q),
            )
            .unwrap();
        });
    }
    let h = host.clone();
    ex.block_on(async move {
        h.write32(regs::CC, 0).await.unwrap();
        h.wait_ready(false).await.unwrap();
    })
    .unwrap();
    ex.run();
    let order = woken.borrow().clone();
    let hash = m.trace().hash();
    (hash, order)
}

#[test]
fn reset_wakes_cq_waiters_in_queue_id_order_on_every_run() {
    let (h1, o1) = run(3);
    let (h2, o2) = run(3);
    let mut sorted = QUEUES.to_vec();
    sorted.sort_unstable();
    assert_eq!(
        o1, sorted,
        "woken in queue-id order, whatever the creation or arrival order"
    );
    assert_eq!(o1, o2);
    assert_eq!(h1, h2, "two fresh machines, same seed: same trace");
}
