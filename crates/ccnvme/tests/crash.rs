//! Crash test at driver level: random transactions on several queues,
//! crashed after every bus transaction of the run. After recovery, every
//! transaction is either reported unfinished or all of its blocks are on
//! the media or none are, never a part; a transaction whose durable wait
//! returned is complete; and per queue, complete transactions form a
//! prefix in submission order.

mod common;

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::Arc;

use ccnvme::{Bio, BlockDevice, ProbeOptions, TxId};
use nvme_ctrl::crash::{boot, Explorer};
use nvme_ctrl::{ControllerConfig, Image, Media, SsdProfile, BLOCK};
use pcie_sim::{Executor, Machine, MachineProfile, PageStore, TraceMode};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Clone, Debug)]
struct Tx {
    queue: usize,
    txid: u64,
    lbas: Vec<u64>,
    /// Trace length when its durable wait returned.
    durable_at: Option<usize>,
}

fn pattern(txid: u64, i: usize) -> [u8; BLOCK] {
    let mut b = [0u8; BLOCK];
    for (j, x) in b.iter_mut().enumerate() {
        *x = (txid as usize * 7 + i * 13 + j) as u8 | 1;
    }
    b
}

const BLOCKS: u64 = 1024;

fn record(profile: SsdProfile, seed: u64) -> (Executor, Machine, Vec<Tx>) {
    let ex = Executor::new(seed);
    let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
    nvme_ctrl::Controller::attach(&m, ControllerConfig::new(profile), Media::memory(BLOCKS), None).unwrap();
    let dev = common::probe(
        &ex,
        &m,
        ProbeOptions {
            cores: Some(3),
            ..Default::default()
        },
    );
    let txs = Rc::new(RefCell::new(Vec::new()));
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut next_lba = 10u64;
    let mut txid = 1u64;
    for q in 0..3usize {
        let mut plan = Vec::new();
        for _ in 0..3 {
            let n = rng.gen_range(1..=2usize);
            let lbas: Vec<u64> = (0..n).map(|i| next_lba + i as u64).collect();
            next_lba += n as u64 + 1;
            plan.push((txid, lbas, rng.gen_bool(0.5)));
            txid += 1;
        }
        let dev: Rc<BlockDevice> = dev.clone();
        let m2 = m.clone();
        let txs = txs.clone();
        m.sim().spawn(async move {
            for (id, lbas, wait) in plan {
                let pages: Vec<_> = (0..lbas.len())
                    .map(|i| {
                        let p = m2.memory().alloc(4096).unwrap();
                        m2.memory().write(p, &pattern(id, i)).unwrap();
                        p
                    })
                    .collect();
                let mut tx = dev.begin_tx(q, TxId(id)).await.unwrap();
                for i in 0..lbas.len() - 1 {
                    dev.tx_add(&mut tx, &Bio::write(lbas[i], vec![pages[i]]))
                        .await
                        .unwrap();
                }
                let last = lbas.len() - 1;
                let h = tx
                    .commit(&Bio::write(lbas[last], vec![pages[last]]))
                    .await
                    .unwrap();
                let idx = txs.borrow().len();
                txs.borrow_mut().push(Tx {
                    queue: q,
                    txid: id,
                    lbas: lbas.clone(),
                    durable_at: None,
                });
                if wait {
                    assert!(dev.wait(q, &h.durable).await.is_success());
                    txs.borrow_mut()[idx].durable_at = Some(m2.trace().len() as usize);
                }
            }
        });
    }
    ex.run();
    let txs = txs.borrow().clone();
    (ex, m, txs)
}

fn check(profile: SsdProfile, seed: u64) -> (usize, usize) {
    let (_ex, m, txs) = record(profile.clone(), seed);
    let trace = m.take_trace();
    let layout = m.layout();
    let pmr_len = m.pmr_image(0).unwrap().len();
    let base = Arc::new(Image::zeroed(BLOCKS));
    let mut explorer = Explorer::new(&trace, layout, vec![PageStore::zeroed(pmr_len)], 0).unwrap();
    let mut seen = BTreeSet::new();
    let mut checked = 0;
    for k in 0..explorer.points() {
        let (states, left_out) = explorer.states_at(k, 8, 10).unwrap();
        assert_eq!(left_out, 0, "the workload is small enough to be exhaustive");
        for mut st in states {
            if !seen.insert(st.content_hash()) {
                continue;
            }
            checked += 1;
            let ex = Executor::new(1);
            let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Off);
            let ctrl = boot(&m, ControllerConfig::new(profile.clone()), &base, &st).unwrap();
            let m2 = m.clone();
            let rec = ex
                .block_on(async move {
                    let dev = BlockDevice::probe(
                        &m2,
                        0,
                        ProbeOptions {
                            cores: Some(3),
                            ..Default::default()
                        },
                    )
                    .await?;
                    Ok::<_, ccnvme::DriverError>(dev.recovery().unwrap_or_default())
                })
                .unwrap()
                .unwrap_or_else(|e| panic!("crash after {k}: probe failed: {e}"));
            let unfinished: BTreeSet<u64> = rec.unfinished_ids().iter().map(|t| t.0).collect();
            let media = ctrl.backend();
            let block_is = |lba: u64, want: &[u8; BLOCK]| {
                let mut b = [0u8; BLOCK];
                media.media().read(lba, &mut b);
                &b == want
            };
            let mut complete_by_queue: Vec<Vec<bool>> = vec![Vec::new(); 3];
            for t in &txs {
                let present = t
                    .lbas
                    .iter()
                    .enumerate()
                    .all(|(i, l)| block_is(*l, &pattern(t.txid, i)));
                let absent = t.lbas.iter().all(|l| block_is(*l, &[0u8; BLOCK]));
                let unf = unfinished.contains(&t.txid);
                assert!(
                    unf || present || absent,
                    "crash after {k} ({:?}): tx {} is partly on the media and not reported unfinished",
                    st.choice,
                    t.txid
                );
                if let Some(at) = t.durable_at {
                    if k + 1 >= at {
                        assert!(present && !unf, "crash after {k}: durable tx {} lost", t.txid);
                    }
                }
                complete_by_queue[t.queue].push(present && !unf);
            }
            for (q, c) in complete_by_queue.iter().enumerate() {
                if let Some(first_incomplete) = c.iter().position(|x| !x) {
                    assert!(
                        c[first_incomplete..].iter().all(|x| !x),
                        "crash after {k}: queue {q} completed {c:?}, not a prefix"
                    );
                }
            }
        }
    }
    eprintln!(
        "{} crash points, {checked} distinct states checked",
        explorer.points()
    );
    (explorer.points(), checked)
}

#[test]
fn every_crash_state_recovers_all_or_nothing_in_order_without_cache() {
    let (points, states) = check(SsdProfile::optane_905p(), 11);
    assert!(points > 400 && states > 30, "{points} points, {states} states");
}

#[test]
fn every_crash_state_recovers_all_or_nothing_in_order_with_volatile_cache() {
    let (points, states) = check(SsdProfile::flash_vwc(), 12);
    assert!(points > 400 && states > 30, "{points} points, {states} states");
}
