//! Every request a transaction carries came through the block layer, as a
//! normal bio does (`docs/decisions.md` D18): adding a command to a ccNVMe
//! transaction costs the submitting core `DriverProfile::block_layer`
//! (the commit's command too, on the same path).

mod common;

use ccnvme::{Bio, DriverProfile, ProbeOptions, TxId};
use pcie_sim::SimDuration;

/// Kernel time of core 0 inside the `commands - 1` `tx_add` calls of one
/// transaction of `commands` 4 KiB writes, with `profile`.
fn submit_cost(commands: usize, profile: DriverProfile) -> SimDuration {
    let (ex, m, dev) = common::optane_device(ProbeOptions {
        profile,
        ..Default::default()
    });
    let pages = common::pages(&m, commands, 3);
    let m2 = m.clone();
    ex.block_on(async move {
        let core = m2.core(0).unwrap();
        let mut tx = dev.begin_tx(0, TxId(1)).await.unwrap();
        let mut spent = SimDuration::ZERO;
        for (i, p) in pages[..commands - 1].iter().enumerate() {
            let before = core.stats().kernel;
            dev.tx_add(&mut tx, &Bio::write(10 + i as u64, vec![*p]))
                .await
                .unwrap();
            spent += core.stats().kernel - before;
        }
        let h = tx
            .commit(&Bio::write(10 + commands as u64, vec![pages[commands - 1]]))
            .await
            .unwrap();
        dev.wait(0, &h.durable).await;
        spent
    })
    .unwrap()
}

#[test]
fn each_command_of_a_transaction_pays_the_block_layer() {
    let p = DriverProfile::default();
    let free = DriverProfile {
        block_layer: SimDuration::ZERO,
        ..p.clone()
    };
    let (with, without) = (submit_cost(5, p.clone()), submit_cost(5, free));
    // The entries' write-combining stores cost what the WC buffers make
    // them cost, which depends on the spacing; the block layer's part is
    // at least its own time per command.
    assert!(
        with >= p.block_layer * 4,
        "four added commands pay it four times: {with:?}"
    );
    assert!(
        without < p.block_layer * 4,
        "without it they cost less: {without:?}"
    );
}
