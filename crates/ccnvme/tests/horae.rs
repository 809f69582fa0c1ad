//! The Horae ordering queue (baseline): traffic of an fsync-like sequence
//! against Table 1's plain-NVMe row, no MMIO reads on the hot path, crash
//! recovery that keeps the write order, and typed errors on corrupt state.

use std::collections::hash_map::DefaultHasher;
use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::rc::Rc;
use std::sync::Arc;

use ccnvme::horae::ORDERING_QUEUE;
use ccnvme::horae::{self, layout, EntryId, OrderedWrite, OrderingQueue, RawEntry};
use ccnvme::{Bio, BioFlags, BlockDevice, DriverError, DriverProfile, EntryPersist, ProbeOptions, Traffic};
use nvme_ctrl::{Image, Media, MediaCursor, SsdProfile, BLOCK};
use pcie_sim::{CrashCursor, EventKind, Executor, HostAddr, Machine, PageStore, Purpose, TraceMode};

const BLOCKS: u64 = 4096;

fn horae_opts() -> ProbeOptions {
    common::horae_options(ccnvme::DriverFaults::default())
}

mod common;

use common::probe;

/// A machine with one controller over `media` and `pmr` (the executor
/// seeded as these tests were written).
fn machine(
    profile: &SsdProfile,
    media: Media,
    pmr: Option<PageStore>,
    mode: TraceMode,
) -> (Executor, Machine) {
    let (ex, m, _) = common::machine_seeded(7, profile.clone(), media, pmr, mode);
    (ex, m)
}

fn attach(
    ex: &Executor,
    dev: &Rc<BlockDevice>,
    capacity: Option<u32>,
) -> Result<Rc<OrderingQueue>, DriverError> {
    let d = dev.clone();
    ex.block_on(async move { OrderingQueue::attach_with(&d, capacity).await })
        .unwrap()
}

/// The content of block `i` of a write tagged `tag`.
fn pattern(tag: u64, i: u64) -> [u8; BLOCK] {
    let mut b = [0u8; BLOCK];
    for (j, x) in b.iter_mut().enumerate() {
        *x = (tag.wrapping_mul(31) as usize + i as usize * 7 + j) as u8 | 1;
    }
    b
}

fn pages(m: &Machine, tag: u64, len: u32) -> Vec<HostAddr> {
    (0..len as u64)
        .map(|i| {
            let p = m.memory().alloc(4096).unwrap();
            m.memory().write(p, &pattern(tag, i)).unwrap();
            p
        })
        .collect()
}

/// One fsync-like sequence through the ordering queue: epoch {JD, D1..DN}
/// (bios submitted without waiting), epoch {JC}, wait for all, flush.
/// Returns the traffic after the first append and in total.
async fn horae_fsync(
    m: &Machine,
    dev: &Rc<BlockDevice>,
    q: &Rc<OrderingQueue>,
    core: usize,
    n: u64,
    base: u64,
) -> (Traffic, Traffic) {
    let before = m.counters();
    let first: Vec<(u64, u32)> = (0..=n).map(|i| (base + i, 1)).collect();
    let e1 = q.append_epoch(core, &first).await.unwrap();
    let t1 = Traffic::from_counters(&m.counters().since(&before));
    let mut done = Vec::new();
    for (i, id) in e1.entries().enumerate() {
        let bio = Bio::write(first[i].0, pages(m, first[i].0, 1));
        done.push(q.submit(core, id, &bio).await.unwrap());
    }
    let jc = base + n + 1;
    let e2 = q.append_epoch(core, &[(jc, 1)]).await.unwrap();
    done.push(
        q.submit(core, e2.entry(0).unwrap(), &Bio::write(jc, pages(m, jc, 1)))
            .await
            .unwrap(),
    );
    for d in &done {
        assert!(dev.wait(core, d).await.is_success());
    }
    q.flush(core).await.unwrap();
    (t1, Traffic::from_counters(&m.counters().since(&before)))
}

/// Plain NVMe, as tests/table1.rs drives it: JD + N submitted then
/// waited, then JC with FUA | PREFLUSH.
async fn plain_fsync(m: &Machine, dev: &Rc<BlockDevice>, n: u64) -> Traffic {
    let before = m.counters();
    let mut done = Vec::new();
    for i in 0..=n {
        done.push(dev.submit(0, &Bio::write(100 + i, pages(m, i, 1))).await.unwrap());
    }
    for d in &done {
        assert!(dev.wait(0, d).await.is_success());
    }
    let jc = Bio::write(100 + n + 1, pages(m, 99, 1)).with(BioFlags::FUA | BioFlags::PREFLUSH);
    dev.submit_wait(0, &jc).await.unwrap();
    Traffic::from_counters(&m.counters().since(&before))
}

#[test]
fn fsync_sequence_costs_plain_nvme_traffic_plus_ordering_mmio_apart() {
    eprintln!(
        "persist   profile        N  mmio dma_q blk irq | ordering_mmio flush_reads | fsync us (plain us)"
    );
    for (persist, profile) in [EntryPersist::PerEpoch, EntryPersist::PerEntry]
        .into_iter()
        .flat_map(|p| [(p, SsdProfile::optane_905p()), (p, SsdProfile::flash_vwc())])
    {
        // Persistent writes of the N+2 entries of the two epochs: one
        // burst per epoch, or one write per entry (`docs/decisions.md` H1).
        let epochs = |n: u64, epochs: u64| match persist {
            EntryPersist::PerEpoch => epochs,
            EntryPersist::PerEntry => n + epochs,
        };
        let vwc = profile.volatile_cache();
        for n in 1..=16u64 {
            let (ex, m) = machine(&profile, Media::memory(BLOCKS), None, TraceMode::Off);
            let table1 = ProbeOptions {
                profile: DriverProfile::per_request_interrupts(),
                ..horae_opts()
            };
            let plain_dev = probe(&ex, &m, table1);
            let m2 = m.clone();
            let (plain, plain_us) = ex
                .block_on(async move {
                    let t0 = m2.sim().now();
                    let t = plain_fsync(&m2, &plain_dev, n).await;
                    (t, m2.sim().now().since(t0).as_us_f64())
                })
                .unwrap();

            let (ex, m) = machine(&profile, Media::memory(BLOCKS), None, TraceMode::Off);
            let mut opts = horae_opts();
            // Table 1's counting model: each completion its own interrupt
            // and CQ doorbell.
            opts.profile = DriverProfile {
                horae_entry_persist: persist,
                ..DriverProfile::per_request_interrupts()
            };
            let dev = probe(&ex, &m, opts);
            let q = attach(&ex, &dev, None).unwrap();
            let m2 = m.clone();
            let (t1, t, us) = ex
                .block_on(async move {
                    let t0 = m2.sim().now();
                    let (t1, t) = horae_fsync(&m2, &dev, &q, 0, n, 100).await;
                    (t1, t, m2.sim().now().since(t0).as_us_f64())
                })
                .unwrap();
            eprintln!(
                "{persist:<9?} {:<13} {n:>2} {:>5} {:>5} {:>3} {:>3} | {:>13} {:>11} | {us:>8.2} ({plain_us:.2})",
                profile.name, t.mmio, t.dma_q, t.block_io, t.irq, t.ordering_mmio, t.flush_reads
            );
            // The first append: N+1 entries and one tail, nothing on the
            // NVMe side.
            let first = epochs(n, 1) + 1;
            assert_eq!(
                (t1.mmio, t1.dma_q, t1.ordering_mmio, t1.flush_reads),
                (0, 0, first, first)
            );
            if vwc {
                // The joint FLUSH is one NVMe Flush (doorbell, fetch, CQE,
                // MSI-X, CQ doorbell) on top of Table 1's row; no dr bits.
                assert_eq!(
                    (t.mmio, t.dma_q, t.block_io, t.irq),
                    (2 * (n + 2) + 2, 2 * (n + 2) + 2, n + 2, n + 3),
                    "N={n}: {t:?}"
                );
                assert_eq!(
                    t.ordering_mmio,
                    epochs(n, 2) + 2 + 1,
                    "entries, tails, flushed: {t:?}"
                );
            } else {
                assert_eq!(
                    (t.mmio, t.dma_q, t.block_io, t.irq),
                    (2 * (n + 2), 2 * (n + 2), n + 2, n + 2),
                    "N={n}: {t:?}"
                );
                assert_eq!(
                    (
                        plain.mmio,
                        plain.dma_q,
                        plain.block_io,
                        plain.irq,
                        plain.ordering_mmio
                    ),
                    (t.mmio, t.dma_q, t.block_io, t.irq, 0),
                    "same NVMe-side traffic as plain NVMe"
                );
                assert_eq!(
                    t.ordering_mmio,
                    epochs(n, 2) + 2 + (n + 2) + 1,
                    "entries, tails, dr words, flushed: {t:?}"
                );
            }
            // Every ordering-queue write is persistent: one flush read each,
            // and the NVMe side has none.
            assert_eq!(t.flush_reads, t.ordering_mmio);
        }
    }
}

/// Several fsync loops on three cores sharing the one stream, with a small
/// ring so that appends wait, dequeue and wrap.
fn busy_run(profile: &SsdProfile, capacity: u32) -> (Machine, Rc<OrderingQueue>, usize) {
    let (ex, m) = machine(profile, Media::memory(BLOCKS), None, TraceMode::Full);
    let dev = probe(&ex, &m, horae_opts());
    let q = attach(&ex, &dev, Some(capacity)).unwrap();
    let start = m.trace().entries().len();
    for core in 0..3u64 {
        let (m2, dev, q) = (m.clone(), dev.clone(), q.clone());
        m.sim().spawn(async move {
            for round in 0..6u64 {
                let base = 1000 + core * 200 + round * 10;
                let n = 1 + (round + core) % 4;
                horae_fsync(&m2, &dev, &q, core as usize, n, base).await;
            }
        });
    }
    ex.run();
    (m, q, start)
}

#[test]
fn normal_operation_reads_nothing_but_zero_length_flush_reads_and_the_mirror_matches() {
    for profile in [SsdProfile::optane_905p(), SsdProfile::flash_vwc()] {
        let (m, q, start) = busy_run(&profile, 8);
        let trace = m.trace();
        let mut flush_reads = 0;
        let mut ordering_writes = 0;
        for e in &trace.entries()[start..] {
            if e.kind == EventKind::MmioRead {
                assert_eq!((e.purpose, e.len), (Purpose::FLUSH_READ, 0), "{e:?}");
                flush_reads += 1;
            }
            if e.kind == EventKind::MmioWrite && e.purpose == ORDERING_QUEUE {
                ordering_writes += 1;
            }
        }
        // 3 cores x 6 rounds: every append and flush went through.
        assert_eq!(
            q.tail(),
            (0..3u64)
                .flat_map(|c| (0..6u64).map(move |r| 3 + (r + c) % 4))
                .sum::<u64>()
        );
        assert!(q.tail() > 4 * q.capacity() as u64, "the ring wrapped");
        assert_eq!(q.flushed(), q.tail());
        assert!(q.head() + q.capacity() as u64 >= q.tail());
        assert!(flush_reads > 0 && ordering_writes >= flush_reads);
        // The mirror holds what is persistent.
        let img = m.pmr_image(0).unwrap();
        let l = q.layout();
        let word = |o: u64| {
            let mut b = [0u8; 8];
            img.read(l.start + o, &mut b);
            u64::from_le_bytes(b)
        };
        assert_eq!(
            (word(layout::HEAD), word(layout::FLUSHED), word(layout::TAIL)),
            (q.head(), q.flushed(), q.tail())
        );
        for seq in q.head()..q.tail() {
            let mut b = [0u8; 16];
            img.read(l.start + l.slot(seq), &mut b);
            assert_eq!(RawEntry::from_bytes(&b), q.entry(EntryId(seq)), "entry {seq}");
            assert_eq!(q.entry(EntryId(seq)).dr, !profile.volatile_cache());
        }
        eprintln!(
            "{}: tail {} head {} over {} slots, {flush_reads} flush reads, no other MMIO read",
            profile.name,
            q.tail(),
            q.head(),
            q.capacity()
        );
    }
}

#[test]
fn shares_the_pmr_with_ccnvme_after_its_queues() {
    let profile = SsdProfile::optane_905p();
    let (ex, m) = machine(&profile, Media::memory(BLOCKS), None, TraceMode::Off);
    let dev = probe(
        &ex,
        &m,
        ProbeOptions {
            horae: true,
            ..Default::default()
        },
    );
    let q = attach(&ex, &dev, None).unwrap();
    assert_eq!(q.layout().start, dev.pmr_layout().unwrap().end());
    assert_eq!(q.layout().start + q.layout().bytes(), dev.info().pmr_bytes);
    let m2 = m.clone();
    ex.block_on(async move { horae_fsync(&m2, &dev, &q, 0, 3, 100).await })
        .unwrap();
}

/// One entry of the recorded crash workload.
#[derive(Clone, Debug)]
struct Written {
    epoch: usize,
    seq: u64,
    lba: u64,
    len: u32,
    /// Trace length when a flush covering it returned.
    flushed_at: Option<usize>,
}

/// One epoch of the crash workload: its writes, wait for them, then flush.
type Step = (Vec<(u64, u32)>, bool, bool);

/// Epochs with writes submitted in reverse order (so that completions, and
/// `dr` bits, arrive out of queue order), a flush after the second epoch
/// and after the fourth, and a last epoch never waited for.
fn record(profile: &SsdProfile) -> (Machine, Vec<Written>) {
    let (ex, m) = machine(profile, Media::memory(BLOCKS), None, TraceMode::Full);
    let dev = probe(&ex, &m, horae_opts());
    let plan: Vec<Step> = vec![
        (vec![(10, 1), (11, 2), (13, 1), (14, 1)], true, false),
        (vec![(20, 1), (21, 2)], true, true),
        (vec![(30, 1), (31, 1), (32, 2)], true, false),
        (vec![(40, 1)], true, true),
        (vec![(50, 1), (51, 1), (52, 1)], false, false),
    ];
    let m2 = m.clone();
    let written = ex
        .block_on(async move {
            let q = OrderingQueue::attach(&dev).await.unwrap();
            let mut written: Vec<Written> = Vec::new();
            let mut done = Vec::new();
            for (ei, (writes, wait, flush)) in plan.into_iter().enumerate() {
                let e = q.append_epoch(0, &writes).await.unwrap();
                for (i, &(lba, len)) in writes.iter().enumerate() {
                    written.push(Written {
                        epoch: ei,
                        seq: e.first + i as u64,
                        lba,
                        len,
                        flushed_at: None,
                    });
                }
                for (i, &(lba, len)) in writes.iter().enumerate().rev() {
                    let bio = Bio::write(lba, pages(&m2, lba, len));
                    done.push(q.submit(0, e.entry(i as u32).unwrap(), &bio).await.unwrap());
                }
                if wait {
                    for d in done.drain(..) {
                        assert!(dev.wait(0, &d).await.is_success());
                    }
                }
                if flush {
                    q.flush(0).await.unwrap();
                    let at = m2.trace().len() as usize;
                    for w in written.iter_mut().filter(|w| w.flushed_at.is_none()) {
                        w.flushed_at = Some(at);
                    }
                }
            }
            written
        })
        .unwrap();
    ex.run();
    (m, written)
}

/// Reads the blocks of `w` through the driver: Some(true) all written,
/// Some(false) all zero, None a mix.
async fn state_of(m: &Machine, dev: &BlockDevice, w: &Written) -> Option<bool> {
    let pg = pages(m, 0, w.len);
    dev.submit_wait(0, &Bio::read(w.lba, pg.clone())).await.unwrap();
    let mut all_new = true;
    let mut all_zero = true;
    for (i, p) in pg.iter().enumerate() {
        let mut b = [0u8; BLOCK];
        m.memory().read(*p, &mut b).unwrap();
        all_new &= b == pattern(w.lba, i as u64);
        all_zero &= b.iter().all(|x| *x == 0);
        m.memory().free(*p).unwrap();
    }
    match (all_new, all_zero) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    }
}

/// Recovers one crash state and checks it; returns (a `dr` hole was
/// followed by a set `dr`, the discard zeroed data that had landed).
fn check_state(
    profile: &SsdProfile,
    k: usize,
    pmr: PageStore,
    media: Media,
    written: &[Written],
) -> (bool, bool) {
    let (ex, m) = machine(profile, media, Some(pmr), TraceMode::Off);
    let dev = probe(&ex, &m, horae_opts());
    let written = written.to_vec();
    let m2 = m.clone();
    ex.block_on(async move {
        let rec = match horae::recover(&dev).await {
            Err(DriverError::NoLayout) => {
                for w in &written {
                    assert_eq!(
                        state_of(&m2, &dev, w).await,
                        Some(false),
                        "crash {k}: data before the layout"
                    );
                }
                return (false, false);
            }
            r => r.unwrap_or_else(|e| panic!("crash after {k}: {e}")),
        };
        assert_eq!(
            OrderingQueue::attach(&dev).await.err().is_some(),
            rec.head != rec.tail
        );
        let hole_then_dr = rec.discard.iter().any(|e| e.dr);
        let mut zeroed_landed = false;
        for e in &rec.discard {
            let w = written
                .iter()
                .find(|w| w.seq == e.seq)
                .expect("a discarded entry was written");
            assert_eq!((e.lba, e.len), (w.lba, w.len));
            zeroed_landed |= state_of(&m2, &dev, w).await != Some(false);
        }
        rec.discard_and_reset(&dev, 0).await.unwrap();
        let mut present = Vec::new();
        for w in &written {
            let s = state_of(&m2, &dev, w).await;
            let s = s.unwrap_or_else(|| panic!("crash after {k}: entry {} torn after recovery", w.seq));
            if w.flushed_at.is_some_and(|at| k + 1 >= at) {
                assert!(s, "crash after {k}: flushed entry {} lost", w.seq);
            }
            if w.seq < rec.flushed {
                assert!(s, "crash after {k}: entry {} before `flushed` lost", w.seq);
            }
            if w.seq >= rec.durable_point() {
                assert!(
                    !s,
                    "crash after {k}: entry {} past the first non-durable one survived",
                    w.seq
                );
            }
            present.push(s);
        }
        // The order holds: surviving entries are a prefix of the queue, so
        // no epoch survives without every earlier one.
        if let Some(gap) = present.iter().position(|p| !p) {
            assert!(present[gap..].iter().all(|p| !p), "crash after {k}: {present:?}");
            let e = written[gap].epoch;
            assert!(written.iter().zip(&present).all(|(w, p)| w.epoch <= e || !p));
        }
        assert_eq!(rec.durable.len(), present.iter().filter(|p| **p).count());
        let again = horae::recover(&dev).await.unwrap();
        assert!(again.discard.is_empty() && again.head == again.tail);
        assert!(OrderingQueue::attach(&dev).await.is_ok());
        (hole_then_dr, zeroed_landed)
    })
    .unwrap()
}

fn explore(profile: SsdProfile) {
    let (m, written) = record(&profile);
    let trace = m.take_trace();
    let pmr_len = m.pmr_image(0).unwrap().len();
    let base = Arc::new(Image::zeroed(BLOCKS));
    let mut pmr_cursor = CrashCursor::new(&trace, m.layout(), vec![PageStore::zeroed(pmr_len)]).unwrap();
    let mut media_cursor = MediaCursor::new(&trace, 0).unwrap();
    let mut seen = BTreeSet::new();
    let (mut states, mut holes, mut zeroed, mut left_out) = (0, 0, 0, 0u64);
    for k in 0..trace.entries().len() {
        pmr_cursor.advance_past(k).unwrap();
        media_cursor.advance_past(k).unwrap();
        let pending = pmr_cursor.pending();
        let (choices, lo) = pmr_cursor.choices(&pending, 6);
        left_out += lo;
        let blocks = media_cursor.pending();
        // Subsets of the volatile cache: all of them up to 4 blocks, else
        // none, all, each one alone and each one missing.
        let n = blocks.len();
        let subsets: Vec<Vec<usize>> = if n <= 4 {
            (0..1usize << n)
                .map(|s| (0..n).filter(|b| s & (1 << b) != 0).collect())
                .collect()
        } else {
            let mut v = vec![Vec::new(), (0..n).collect::<Vec<_>>()];
            v.extend((0..n).map(|b| vec![b]));
            v.extend((0..n).map(|b| (0..n).filter(|x| *x != b).collect()));
            left_out += (1u64 << n.min(63)) - v.len() as u64;
            v
        };
        for c in &choices {
            let images = pmr_cursor.materialize(&pending, c).unwrap();
            let pmr = images[0].clone();
            let mut region = vec![0u8; 4096];
            pmr.read(0, &mut region);
            for landed in &subsets {
                let delta = media_cursor.materialize(&blocks, landed).unwrap();
                let mut h = DefaultHasher::new();
                region.hash(&mut h);
                let mut keys: Vec<u64> = delta.keys().copied().collect();
                keys.sort_unstable();
                for b in keys {
                    (b, &delta[&b][..]).hash(&mut h);
                }
                if !seen.insert(h.finish()) {
                    continue;
                }
                states += 1;
                let (hole, z) = check_state(
                    &profile,
                    k,
                    pmr.clone(),
                    Media::cow(base.clone(), delta),
                    &written,
                );
                holes += hole as usize;
                zeroed += z as usize;
            }
        }
    }
    eprintln!(
        "{}: {} crash points, {states} distinct states, {holes} with a dr hole before a set dr, \
         {zeroed} where discard zeroed landed data, {left_out} states left out by the bounds",
        profile.name,
        trace.entries().len()
    );
    assert!(states > 40 && zeroed > 0, "{states} states, {zeroed} zeroed");
    if !profile.volatile_cache() {
        assert!(holes > 0, "some state has dr = 0 before dr = 1");
    }
}

#[test]
fn recovery_discards_in_order_after_the_first_non_durable_entry_without_cache() {
    explore(SsdProfile::optane_905p());
}

#[test]
fn recovery_discards_everything_past_flushed_with_a_volatile_cache() {
    explore(SsdProfile::flash_vwc());
}

/// The persistent state of a run that appended three epochs, completed
/// them and flushed only the first.
/// Recovers an epoch that was appended but whose writes never reached
/// the drive (a crash before any was sent): block 40 holds live data that
/// the epoch overwrites in place (`in_place` as given), block 41 is fresh.
/// Returns both blocks after `discard_and_reset` and the entries' `ipu`
/// bits as recovery read them.
fn recover_unsent_epoch(in_place: bool) -> ([u8; BLOCK], [u8; BLOCK], Vec<bool>) {
    let profile = SsdProfile::optane_905p();
    let (ex, m) = machine(&profile, Media::memory(BLOCKS), None, TraceMode::Off);
    let dev = probe(&ex, &m, horae_opts());
    let q = attach(&ex, &dev, Some(64)).unwrap();
    let m2 = m.clone();
    ex.block_on(async move {
        for lba in [40u64, 41] {
            dev.submit_wait(0, &Bio::write(lba, pages(&m2, 1000 + lba, 1)))
                .await
                .unwrap();
        }
        dev.submit_wait(0, &Bio::flush()).await.unwrap();
        let writes = [
            OrderedWrite {
                in_place,
                ..OrderedWrite::fresh(40, 1)
            },
            OrderedWrite::fresh(41, 1),
        ];
        q.append_writes(0, &writes).await.unwrap();
        let rec = horae::recover(&dev).await.unwrap();
        assert_eq!(
            rec.discard.len(),
            2,
            "nothing was written: both violate the order"
        );
        let ipu: Vec<bool> = rec.discard.iter().map(|e| e.in_place).collect();
        rec.discard_and_reset(&dev, 0).await.unwrap();
        let mut out = [[0u8; BLOCK]; 2];
        for (lba, b) in [40u64, 41].into_iter().zip(out.iter_mut()) {
            let pg = pages(&m2, 0, 1);
            dev.submit_wait(0, &Bio::read(lba, pg.clone())).await.unwrap();
            m2.memory().read(pg[0], b).unwrap();
        }
        (out[0], out[1], ipu)
    })
    .unwrap()
}

#[test]
fn recovery_keeps_the_live_content_of_an_in_place_write() {
    let (kept, fresh, ipu) = recover_unsent_epoch(true);
    assert_eq!(ipu, [true, false], "the ipu bit went through the PMR");
    assert_eq!(kept, pattern(1040, 0), "an in-place block keeps its old content");
    assert_eq!(fresh, [0u8; BLOCK], "a fresh block is zero-filled (Horae 5.5)");
    // The flag switched off: the same overwrite is zero-filled, live data
    // lost (what HoraeFS's data overwrites suffered before the flag).
    let (zeroed, _, ipu) = recover_unsent_epoch(false);
    assert_eq!(ipu, [false, false]);
    assert_eq!(zeroed, [0u8; BLOCK]);
}

fn clean_image() -> (PageStore, Vec<(u64, u32)>) {
    let profile = SsdProfile::optane_905p();
    let (ex, m) = machine(&profile, Media::memory(BLOCKS), None, TraceMode::Off);
    let dev = probe(&ex, &m, horae_opts());
    let q = attach(&ex, &dev, Some(64)).unwrap();
    let m2 = m.clone();
    ex.block_on(async move {
        for (round, writes) in [vec![(10u64, 1u32), (11, 1)], vec![(20, 2)], vec![(30, 1)]]
            .iter()
            .enumerate()
        {
            let e = q.append_epoch(0, writes).await.unwrap();
            for (i, &(lba, len)) in writes.iter().enumerate() {
                let d = q
                    .submit(
                        0,
                        e.entry(i as u32).unwrap(),
                        &Bio::write(lba, pages(&m2, lba, len)),
                    )
                    .await
                    .unwrap();
                assert!(dev.wait(0, &d).await.is_success());
            }
            if round == 0 {
                q.flush(0).await.unwrap();
            }
        }
    })
    .unwrap();
    ex.run();
    (m.pmr_image(0).unwrap(), vec![(10, 1), (11, 1), (20, 2), (30, 1)])
}

/// Boots a fresh machine over `pmr` and runs `recover` then `attach`.
fn boot_recover(pmr: PageStore) -> (Result<horae::HoraeRecovery, DriverError>, Result<(), DriverError>) {
    let profile = SsdProfile::optane_905p();
    let (ex, m) = machine(&profile, Media::memory(BLOCKS), Some(pmr), TraceMode::Off);
    let dev = probe(&ex, &m, horae_opts());
    ex.block_on(async move {
        let r = horae::recover(&dev).await;
        let a = OrderingQueue::attach(&dev).await.map(|_| ());
        (r, a)
    })
    .unwrap()
}

fn corrupt_reason(r: &Result<impl std::fmt::Debug, DriverError>) -> String {
    match r {
        Err(DriverError::CorruptPsq { queue, reason }) if *queue == horae::ORDERING_QUEUE_ID => {
            reason.clone()
        }
        other => panic!("expected a corrupt ordering queue, got {other:?}"),
    }
}

#[test]
fn clean_state_is_recovered_and_attach_waits_for_it() {
    let (img, writes) = clean_image();
    let profile = SsdProfile::optane_905p();
    let (ex, m) = machine(&profile, Media::memory(BLOCKS), Some(img), TraceMode::Off);
    let dev = probe(&ex, &m, horae_opts());
    ex.block_on(async move {
        assert_eq!(
            OrderingQueue::attach(&dev).await.err(),
            Some(DriverError::RecoveryPending)
        );
        let rec = horae::recover(&dev).await.unwrap();
        assert_eq!((rec.head, rec.flushed, rec.tail), (0, 2, 4));
        let kept: Vec<(u64, u32)> = rec.durable.iter().map(|e| (e.lba, e.len)).collect();
        assert_eq!(kept, writes, "every completed write had its dr bit");
        assert!(rec.discard.is_empty());
        assert_eq!(
            rec.durable.iter().map(|e| e.etag).collect::<Vec<_>>(),
            [true, false, true, true]
        );
        rec.discard_and_reset(&dev, 0).await.unwrap();
        let q = OrderingQueue::attach(&dev).await.unwrap();
        assert_eq!((q.head(), q.flushed(), q.tail(), q.capacity()), (4, 4, 4, 64));
    })
    .unwrap();
}

#[test]
fn corrupt_state_gives_typed_errors_and_no_format() {
    let (img, _) = clean_image();
    let patch = |off: u64, bytes: &[u8]| {
        let mut p = img.clone();
        p.write(off, bytes);
        p
    };
    let slot = |seq: u64| layout::RING + seq * layout::ENTRY_BYTES;
    let entry = |seq: u64| {
        let mut b = [0u8; 16];
        img.read(slot(seq), &mut b);
        RawEntry::from_bytes(&b)
    };
    let cases: Vec<(&str, PageStore, &str)> = vec![
        (
            "head past tail",
            patch(layout::HEAD, &9u64.to_le_bytes()),
            "pointers out of range",
        ),
        (
            "flipped tail",
            patch(layout::TAIL + 7, &[0x80]),
            "pointers out of range",
        ),
        (
            "flushed past tail",
            patch(layout::FLUSHED, &5u64.to_le_bytes()),
            "pointers out of range",
        ),
        ("version", patch(8, &[2]), "version"),
        ("capacity", patch(12, &u32::MAX.to_le_bytes()), "does not fit"),
        (
            "lba past the device",
            patch(
                slot(1),
                &RawEntry {
                    lba: BLOCKS as u32 - 1,
                    len: 2,
                    ..entry(1)
                }
                .to_bytes(),
            ),
            "past the device",
        ),
        (
            "length 0",
            patch(slot(3), &RawEntry { len: 0, ..entry(3) }.to_bytes()),
            "length 0",
        ),
        (
            "reserved bits",
            patch(slot(2), &RawEntry { rsvd: 1, ..entry(2) }.to_bytes()),
            "reserved",
        ),
        (
            "prepare write past the device",
            patch(
                slot(0),
                &RawEntry {
                    plba: BLOCKS as u32,
                    ..entry(0)
                }
                .to_bytes(),
            ),
            "prepare write",
        ),
        (
            "device id",
            patch(slot(0), &RawEntry { devid: 3, ..entry(0) }.to_bytes()),
            "device 3",
        ),
    ];
    for (name, pmr, want) in cases {
        let (r, a) = boot_recover(pmr);
        let why = corrupt_reason(&r);
        assert!(why.contains(want), "{name}: {why}");
        // Attach neither formats over it nor accepts it.
        assert!(
            matches!(
                a,
                Err(DriverError::CorruptPsq { .. }) | Err(DriverError::RecoveryPending)
            ),
            "{name}: {a:?}"
        );
        eprintln!("{name}: {why}");
    }
    // A bad magic is "no layout": recovery has nothing, attach formats.
    let (r, a) = boot_recover(patch(0, &[0u8; 8]));
    assert_eq!(r.err(), Some(DriverError::NoLayout));
    assert_eq!(a, Ok(()));
}
