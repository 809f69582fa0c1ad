//! Driver-level traffic of one transaction of N 4 KiB blocks, on the
//! critical path of its wait, from the machine's own counters (ccNVMe
//! Table 1, `docs/architecture.md` 5): plain NVMe with a journal descriptor and a
//! commit record, ccNVMe durable, ccNVMe atomic.

mod common;

use ccnvme::{Bio, BioFlags, DriverProfile, ProbeOptions, Traffic, TxId};
use nvme_ctrl::{Media, SsdProfile};
use pcie_sim::TraceMode;

/// Table 1's counting model: each completion its own interrupt and CQ
/// doorbell (`ccnvme::CqReap::OnePerInterrupt`; Linux reaps every
/// completion it finds per interrupt).
fn table1_options() -> ProbeOptions {
    ProbeOptions {
        profile: DriverProfile::per_request_interrupts(),
        ..ProbeOptions::default()
    }
}

#[test]
fn plain_nvme_journal_commit_costs_2n_plus_4_mmio() {
    for n in 1..=16u64 {
        let (ex, m, _c) = common::machine(
            SsdProfile::optane_905p(),
            Media::memory(4096),
            None,
            TraceMode::Off,
        );
        let dev = common::probe(
            &ex,
            &m,
            ProbeOptions {
                ccnvme: false,
                ..table1_options()
            },
        );
        let pages = common::pages(&m, n as usize + 2, 1);
        let m2 = m.clone();
        let t = ex
            .block_on(async move {
                let before = m2.counters();
                // Descriptor and blocks, then wait, then the commit record.
                let mut done = Vec::new();
                for i in 0..=n {
                    let bio = Bio::write(100 + i, vec![pages[i as usize]]);
                    done.push(dev.submit(0, &bio).await.unwrap());
                }
                for d in &done {
                    assert!(dev.wait(0, d).await.is_success());
                }
                let commit = Bio::write(100 + n + 1, vec![pages[n as usize + 1]])
                    .with(BioFlags::FUA | BioFlags::PREFLUSH);
                dev.submit_wait(0, &commit).await.unwrap();
                Traffic::from_counters(&m2.counters().since(&before))
            })
            .unwrap();
        assert_eq!(
            (t.mmio, t.dma_q, t.block_io, t.irq),
            (2 * (n + 2), 2 * (n + 2), n + 2, n + 2),
            "N={n}: {t:?}"
        );
    }
}

#[test]
fn ccnvme_durable_costs_4_mmio_and_n_plus_1_everything_else() {
    for n in 1..=16u64 {
        let (ex, m, _c) = common::machine(
            SsdProfile::optane_905p(),
            Media::memory(4096),
            None,
            TraceMode::Off,
        );
        let dev = common::probe(&ex, &m, table1_options());
        let pages = common::pages(&m, n as usize + 1, 2);
        let m2 = m.clone();
        let t = ex
            .block_on(async move {
                let before = m2.counters();
                let mut tx = dev.begin_tx(0, TxId(n)).await.unwrap();
                for i in 0..n {
                    dev.tx_add(&mut tx, &Bio::write(200 + i, vec![pages[i as usize]]))
                        .await
                        .unwrap();
                }
                let h = tx
                    .commit(&Bio::write(300, vec![pages[n as usize]]))
                    .await
                    .unwrap();
                assert!(dev.wait(0, &h.durable).await.is_success());
                Traffic::from_counters(&m2.counters().since(&before))
            })
            .unwrap();
        assert_eq!(
            (t.mmio, t.dma_q, t.block_io, t.irq),
            (4, n + 1, n + 1, n + 1),
            "N={n}: {t:?}"
        );
        assert_eq!(
            t.flush_reads, 3,
            "after the entries, after P-SQDB, after P-SQ-head"
        );
    }
}

#[test]
fn ccnvme_atomic_costs_2_mmio_and_waits_for_nothing_else() {
    for n in 1..=16u64 {
        atomic_commit(SsdProfile::optane_905p(), n);
        atomic_commit(SsdProfile::intel_750(), n);
    }
}

/// Commits a transaction of `n` blocks plus a descriptor on `profile` and
/// checks the traffic of the commit.
fn atomic_commit(profile: SsdProfile, n: u64) {
    {
        let (ex, m, _c) = common::machine(profile, Media::memory(4096), None, TraceMode::Off);
        let dev = common::probe(&ex, &m, table1_options());
        let pages = common::pages(&m, n as usize + 1, 3);
        let m2 = m.clone();
        let (t, durable) = ex
            .block_on(async move {
                let before = m2.counters();
                let mut tx = dev.begin_tx(0, TxId(n)).await.unwrap();
                for i in 0..n {
                    dev.tx_add(&mut tx, &Bio::write(200 + i, vec![pages[i as usize]]))
                        .await
                        .unwrap();
                }
                // The commit alone is the atomicity primitive: stores of the
                // commit entry, flush, P-SQDB.
                let h = tx
                    .commit(&Bio::write(300, vec![pages[n as usize]]))
                    .await
                    .unwrap();
                let t = Traffic::from_counters(&m2.counters().since(&before));
                let durable = dev.wait(0, &h.durable).await;
                (t, durable)
            })
            .unwrap();
        assert!(durable.is_success());
        // Measured: no completion entry was posted and no interrupt sent
        // before the transaction became atomic, so it waited for neither.
        assert_eq!((t.dma_q, t.irq), (0, 0), "N={n}: {t:?}");
        let c = t.submit_phase();
        assert_eq!((c.mmio, c.dma_q, c.block_io, c.irq), (2, 0, 0, 0), "N={n}: {t:?}");
        assert_eq!(c.flush_reads, 2);
    }
}
