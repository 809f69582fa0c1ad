//! A driver and its machine are freed when their owners drop them: no
//! reference cycle keeps a persistent submission queue (and, through its
//! core, the whole machine) alive. A crash explorer boots one machine per
//! crash state, so a cycle here leaks megabytes per state.

mod common;

use std::rc::Rc;

use ccnvme::ProbeOptions;
use nvme_ctrl::{Media, SsdProfile};
use pcie_sim::TraceMode;

#[test]
fn persistent_queues_are_freed_with_the_device() {
    let (ex, m, ctrl) = common::machine(
        SsdProfile::optane_905p(),
        Media::memory(1024),
        None,
        TraceMode::Off,
    );
    let dev = common::probe(&ex, &m, ProbeOptions::default());
    let psqs: Vec<_> = dev.psqs().iter().map(Rc::downgrade).collect();
    assert!(!psqs.is_empty(), "ccNVMe probed without persistent queues");
    let queue = Rc::downgrade(dev.queue(0));
    drop(dev);
    drop(ctrl);
    drop(m);
    drop(ex);
    assert!(
        psqs.iter().all(|w| w.upgrade().is_none()),
        "a P-SQ outlived its device"
    );
    assert!(queue.upgrade().is_none(), "a queue pair outlived its device");
}
