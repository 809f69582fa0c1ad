//! Swap of a full Horae ordering queue to its checkpoint region (Horae
//! 5.2, 5.5; `docs/decisions.md` H6): a full queue swaps instead of
//! waiting for its writes and a FLUSH, every crash state around swaps
//! recovers one consistent order (the fault `horae_swap_no_fua` caught),
//! and a damaged checkpoint gives a typed one-line error.

use std::rc::Rc;
use std::sync::Arc;

use ccnvme::horae::swap::{CheckpointHeader, ENTRIES_PER_PAGE};
use ccnvme::horae::{self, CheckpointRegion, Geometry, OrderingQueue, RawEntry, StreamParams};
use ccnvme::{Bio, BlockDevice, DriverError, DriverFaults, ProbeOptions};
use nvme_ctrl::crash::{boot_devices, DevicesExplorer, DevicesState};
use nvme_ctrl::events::FLUSH_DONE;
use nvme_ctrl::{ControllerConfig, Drive, Image, SsdProfile, BLOCK};
use pcie_sim::{EventKind, Executor, HostAddr, Machine, PageStore, TraceMode};

mod common;

const BLOCKS: u64 = 4096;
/// Entries of the PMR ring: small, so that appends fill it.
const RING: u32 = 4;
/// Pages of the checkpoint region (a header and two entry pages).
const PAGES: u32 = 3;

fn horae_opts(faults: DriverFaults) -> ProbeOptions {
    common::horae_options(faults)
}

/// The checkpoint region: the last `PAGES` pages of the device.
fn region(dev: &BlockDevice) -> CheckpointRegion {
    let pp = 4096 / dev.info().lba_size as u64;
    CheckpointRegion {
        lba: dev.info().blocks - PAGES as u64 * pp,
        pages: PAGES,
    }
}

fn params(dev: &BlockDevice, swap: bool) -> StreamParams {
    let p = StreamParams {
        capacity: Some(RING),
        ..StreamParams::SINGLE
    };
    if swap {
        p.with_checkpoint(region(dev))
    } else {
        p
    }
}

fn rig(profile: &SsdProfile, faults: DriverFaults, mode: TraceMode) -> (Executor, Machine, Rc<BlockDevice>) {
    let (ex, m, _) = common::machine_with_drives(11, vec![Drive::fresh(profile.clone(), BLOCKS)], mode);
    let dev = common::probe_all(&ex, &m, 1, horae_opts(faults)).remove(0);
    (ex, m, dev)
}

/// The content of the block written at `lba`.
fn pattern(lba: u64) -> [u8; BLOCK] {
    let mut b = [0u8; BLOCK];
    for (j, x) in b.iter_mut().enumerate() {
        *x = (lba.wrapping_mul(31) as usize + j) as u8 | 1;
    }
    b
}

fn page(m: &Machine, lba: u64) -> Vec<HostAddr> {
    let p = m.memory().alloc(4096).unwrap();
    m.memory().write(p, &pattern(lba)).unwrap();
    vec![p]
}

/// Appends one epoch of one-block writes at `lbas` and submits them in
/// reverse order without waiting; returns their handles.
async fn epoch(m: &Machine, q: &Rc<OrderingQueue>, lbas: &[u64]) -> (u64, Vec<ccnvme::Done>) {
    let e = q
        .append_epoch(0, &lbas.iter().map(|&l| (l, 1)).collect::<Vec<_>>())
        .await
        .unwrap();
    let mut done = Vec::new();
    for (i, &lba) in lbas.iter().enumerate().rev() {
        let id = e.entry(i as u32).unwrap();
        done.push(q.submit(0, id, &Bio::write(lba, page(m, lba))).await.unwrap());
    }
    (e.first, done)
}

fn flush_dones(m: &Machine, from: usize) -> usize {
    m.trace()
        .entries()
        .iter()
        .skip(from)
        .filter(|e| e.kind == EventKind::Device && e.code == FLUSH_DONE)
        .count()
}

/// Three epochs of two writes into a ring of four, nothing waited for:
/// (swaps, FLUSHes the appends caused, time of the third append in us).
/// With a checkpoint region the first two epochs' writes are not even
/// submitted before the third append (it cannot wait for them); they are
/// submitted after it, waited for and flushed, and the checkpoint drains.
fn third_append(profile: &SsdProfile, swap: bool) -> (u64, usize, f64) {
    let (ex, m, dev) = rig(profile, DriverFaults::default(), TraceMode::Full);
    let m2 = m.clone();
    ex.block_on(async move {
        let q = OrderingQueue::init_stream(std::slice::from_ref(&dev), params(&dev, swap))
            .await
            .unwrap();
        let from = m2.trace().len() as usize;
        let mut held = Vec::new();
        let mut done = Vec::new();
        for lbas in [[10u64, 11], [12, 13]] {
            if swap {
                held.push((
                    q.append_epoch(0, &[(lbas[0], 1), (lbas[1], 1)]).await.unwrap(),
                    lbas,
                ));
            } else {
                done.extend(epoch(&m2, &q, &lbas).await.1);
            }
        }
        let t0 = m2.sim().now();
        done.extend(epoch(&m2, &q, &[14, 15]).await.1);
        let us = m2.sim().now().since(t0).as_us_f64();
        let (swaps, flushes) = (q.swaps(), flush_dones(&m2, from));
        // The held writes of swapped entries go out now.
        for (e, lbas) in held {
            for (i, lba) in lbas.into_iter().enumerate() {
                let id = e.entry(i as u32).unwrap();
                done.push(q.submit(0, id, &Bio::write(lba, page(&m2, lba))).await.unwrap());
            }
        }
        for d in &done {
            assert!(dev.wait(0, d).await.is_success());
        }
        q.flush(0).await.unwrap();
        q.dequeue(0).await.unwrap();
        assert_eq!((q.swapped(), q.head(), q.tail()), (0, 6, 6));
        for lba in 10..16 {
            assert_eq!(state_of(&m2, &dev, lba).await, Some(true), "block {lba}");
        }
        (swaps, flushes, us)
    })
    .unwrap()
}

#[test]
fn a_full_queue_swaps_instead_of_waiting_for_its_writes_and_a_flush() {
    let vwc = SsdProfile::flash_vwc();
    let (swaps, flushes, us) = third_append(&vwc, true);
    let (waits, flushes_without, us_without) = third_append(&vwc, false);
    eprintln!(
        "{}: third append with swap {us:.1} us ({swaps} swap, {flushes} FLUSH, the earlier \
         epochs' writes not submitted), without a checkpoint {us_without:.1} us \
         ({flushes_without} FLUSH)",
        vwc.name
    );
    assert_eq!(swaps, 1, "the full ring was swapped");
    assert_eq!(flushes, 0, "the swap did not wait for a FLUSH");
    assert_eq!(waits, 0);
    assert!(
        flushes_without >= 1,
        "without a checkpoint the append waits for a FLUSH"
    );
}

#[test]
fn swapped_entries_drain_after_a_flush_and_the_ring_keeps_its_order() {
    let profile = SsdProfile::optane_905p();
    let (ex, m, dev) = rig(&profile, DriverFaults::default(), TraceMode::Off);
    let m2 = m.clone();
    ex.block_on(async move {
        let q = OrderingQueue::init_stream(std::slice::from_ref(&dev), params(&dev, true))
            .await
            .unwrap();
        let mut all = Vec::new();
        for i in 0..6u64 {
            let (_, d) = epoch(&m2, &q, &[20 + 2 * i, 21 + 2 * i]).await;
            all.extend(d);
        }
        assert!(q.swaps() >= 2, "{} swaps", q.swaps());
        assert!(q.swapped() > 0);
        // Completions of swapped entries set no `dr` bit: only `flushed`
        // makes them durable, so recovery keeps them only past a flush.
        for d in &all {
            assert!(dev.wait(0, d).await.is_success());
        }
        let rec = horae::recover_stream(std::slice::from_ref(&dev), params(&dev, true))
            .await
            .unwrap();
        assert_eq!(rec.from_checkpoint, q.swapped());
        let seqs: Vec<u64> = rec.durable.iter().chain(&rec.discard).map(|e| e.seq).collect();
        assert_eq!(seqs, (rec.head - q.swapped()..rec.tail).collect::<Vec<_>>());
        let lbas: Vec<u64> = rec.durable.iter().chain(&rec.discard).map(|e| e.lba).collect();
        assert_eq!(
            lbas,
            (20 + rec.head - q.swapped()..20 + rec.tail).collect::<Vec<_>>()
        );
        q.flush(0).await.unwrap();
        q.dequeue(0).await.unwrap();
        assert_eq!(
            q.swapped(),
            0,
            "the flush made them durable, dequeue drained them"
        );
        assert_eq!(q.head(), q.tail());
        let rec = horae::recover_stream(std::slice::from_ref(&dev), params(&dev, true))
            .await
            .unwrap();
        assert_eq!((rec.from_checkpoint, rec.discard.len()), (0, 0));
    })
    .unwrap();
}

#[test]
fn a_full_checkpoint_is_flushed_and_drained_then_swapping_goes_on() {
    // Writes completed into a volatile cache are durable only after a
    // FLUSH, so every full ring swaps until the checkpoint's two entry
    // pages (510 entries) are full; then a joint FLUSH drains them.
    let profile = SsdProfile::flash_vwc();
    let (ex, m, dev) = rig(&profile, DriverFaults::default(), TraceMode::Full);
    let m2 = m.clone();
    ex.block_on(async move {
        let q = OrderingQueue::init_stream(std::slice::from_ref(&dev), params(&dev, true))
            .await
            .unwrap();
        let from = m2.trace().len() as usize;
        let mut most = 0;
        for i in 0..300u64 {
            let (_, d) = epoch(&m2, &q, &[100 + 2 * i, 101 + 2 * i]).await;
            for x in &d {
                assert!(dev.wait(0, x).await.is_success());
            }
            most = most.max(q.swapped());
        }
        let flushes = flush_dones(&m2, from);
        eprintln!(
            "600 writes in a ring of {RING}: {} swaps, at most {most} entries swapped, {flushes} FLUSH",
            q.swaps()
        );
        assert!(most > 2 * ENTRIES_PER_PAGE - RING as u64 && most <= 2 * ENTRIES_PER_PAGE);
        assert_eq!(flushes, 1, "one joint FLUSH when the checkpoint was full");
        assert!(q.swaps() >= 290 / 2);
        q.flush(0).await.unwrap();
        q.dequeue(0).await.unwrap();
        assert_eq!((q.swapped(), q.head()), (0, 600));
        let rec = horae::recover_stream(std::slice::from_ref(&dev), params(&dev, true))
            .await
            .unwrap();
        assert_eq!(
            (rec.from_checkpoint, rec.discard.len(), rec.head, rec.tail),
            (0, 0, 600, 600)
        );
    })
    .unwrap();
}

#[test]
fn joint_flush_ranges_count_swapped_entries_on_each_device() {
    // Two drives with caches, the ring on the first, entries on both:
    // after a swap the device ranges (Figure 7) still start at swapped
    // entries, so a flush point inside the checkpoint flushes their device.
    let vwc = SsdProfile::flash_vwc();
    let drives = vec![Drive::fresh(vwc.clone(), BLOCKS), Drive::fresh(vwc, BLOCKS)];
    let (ex, m, _) = common::machine_with_drives(13, drives, TraceMode::Full);
    let devs = common::probe_all(&ex, &m, 2, horae_opts(DriverFaults::default()));
    let m2 = m.clone();
    ex.block_on(async move {
        let q = OrderingQueue::init_stream(&devs, params(&devs[0], true))
            .await
            .unwrap();
        let mut done = Vec::new();
        // seq 0 on device 1, 1..=2 on device 0, then 3..=4 on device 1.
        for (d, lbas) in [
            (1u8, vec![10u64]),
            (0, vec![20]),
            (0, vec![21]),
            (1, vec![11, 12]),
        ] {
            let ws: Vec<_> = lbas
                .iter()
                .map(|&l| ccnvme::horae::OrderedWrite::fresh(l, 1).on(d))
                .collect();
            let e = q.append_writes(0, &ws).await.unwrap();
            for (i, &l) in lbas.iter().enumerate() {
                let id = e.entry(i as u32).unwrap();
                done.push((d, q.submit(0, id, &Bio::write(l, page(&m2, l))).await.unwrap()));
            }
        }
        assert_eq!((q.swaps(), q.swapped(), q.head()), (1, 3, 3));
        for (d, x) in &done {
            assert!(devs[*d as usize].wait(0, x).await.is_success());
        }
        // Flush through seq 0 (device 1 only), then ask who holds seq 1.
        q.flush_through(0, 1).await.unwrap();
        assert_eq!(q.flushed(), 1);
        assert_eq!(
            q.flush_candidates(2),
            [0],
            "device 0's range starts at swapped seq 1"
        );
        let before = flush_dones(&m2, 0);
        q.flush_device(0, 0).await.unwrap();
        assert_eq!(q.flushed(), 3);
        assert_eq!(
            flush_dones(&m2, 0) - before,
            1,
            "device 0 alone: device 1 has nothing before seq 3"
        );
        q.dequeue(0).await.unwrap();
        assert_eq!(q.swapped(), 0, "flushed swapped entries drained");
        q.flush(0).await.unwrap();
        q.dequeue(0).await.unwrap();
        assert_eq!((q.head(), q.tail()), (5, 5));
    })
    .unwrap();
}

// ---- crash states ----

#[derive(Clone, Debug)]
struct Written {
    epoch: usize,
    seq: u64,
    lba: u64,
    /// Trace length when a flush covering it returned.
    flushed_at: Option<usize>,
}

/// Epochs of one-block writes into a ring of four, submitted in reverse
/// without waiting (so swaps copy entries whose data is in flight); after
/// some groups the writes are waited for and flushed.
fn record(profile: &SsdProfile, faults: DriverFaults) -> (Machine, Vec<Written>, u64) {
    let (ex, m, dev) = rig(profile, faults, TraceMode::Full);
    // (epochs, wait and flush after them)
    let plan: Vec<(Vec<Vec<u64>>, bool)> = vec![
        (
            vec![vec![10, 11], vec![12], vec![13, 14], vec![15], vec![16, 17]],
            true,
        ),
        (vec![vec![18, 19], vec![20], vec![21, 22]], false),
    ];
    let m2 = m.clone();
    let (written, swaps) = ex
        .block_on(async move {
            let q = OrderingQueue::init_stream(std::slice::from_ref(&dev), params(&dev, true))
                .await
                .unwrap();
            let mut written: Vec<Written> = Vec::new();
            let mut n = 0;
            for (group, flush) in plan {
                let mut done = Vec::new();
                for lbas in group {
                    let (first, d) = epoch(&m2, &q, &lbas).await;
                    for (i, &lba) in lbas.iter().enumerate() {
                        written.push(Written {
                            epoch: n,
                            seq: first + i as u64,
                            lba,
                            flushed_at: None,
                        });
                    }
                    done.extend(d);
                    n += 1;
                }
                if flush {
                    for d in &done {
                        assert!(dev.wait(0, d).await.is_success());
                    }
                    q.flush(0).await.unwrap();
                    let at = m2.trace().len() as usize;
                    for w in written.iter_mut().filter(|w| w.flushed_at.is_none()) {
                        w.flushed_at = Some(at);
                    }
                }
            }
            (written, q.swaps())
        })
        .unwrap();
    ex.run();
    (m, written, swaps)
}

/// Some(true): the block holds its write; Some(false): zeros; None: other.
async fn state_of(m: &Machine, dev: &BlockDevice, lba: u64) -> Option<bool> {
    let pg = m.memory().alloc(4096).unwrap();
    dev.submit_wait(0, &Bio::read(lba, vec![pg])).await.unwrap();
    let mut b = [0u8; BLOCK];
    m.memory().read(pg, &mut b).unwrap();
    m.memory().free(pg).unwrap();
    if b == pattern(lba) {
        Some(true)
    } else if b.iter().all(|x| *x == 0) {
        Some(false)
    } else {
        None
    }
}

/// Boots the drive over `state`, recovers the stream with its checkpoint
/// and discards; `Ok(entries read from the checkpoint)`, or how the order
/// or durability was broken.
fn check(profile: &SsdProfile, state: &DevicesState, written: &[Written]) -> Result<u64, String> {
    let k = state.point;
    let ex = Executor::new(1);
    let m = Machine::new(&ex, Default::default(), TraceMode::Off);
    let base = Arc::new(Image::zeroed(BLOCKS));
    boot_devices(&m, vec![ControllerConfig::new(profile.clone())], &[base], state).unwrap();
    let dev = common::probe_all(&ex, &m, 1, horae_opts(DriverFaults::default())).remove(0);
    let written = written.to_vec();
    let m2 = m.clone();
    ex.block_on(async move {
        let devs = std::slice::from_ref(&dev);
        let rec = match horae::recover_stream(devs, params(&dev, true)).await {
            Err(DriverError::NoLayout) => return Ok(0),
            r => r.map_err(|e| format!("crash after {k}: recovery failed: {e}"))?,
        };
        rec.discard_and_reset_all(devs, 0).await.unwrap();
        let mut present = Vec::new();
        for w in &written {
            let s = state_of(&m2, &dev, w.lba)
                .await
                .ok_or_else(|| format!("crash after {k}: entry {} torn", w.seq))?;
            if w.flushed_at.is_some_and(|at| k + 1 >= at) && !s {
                return Err(format!("crash after {k}: flushed entry {} lost", w.seq));
            }
            present.push((w.epoch, s));
        }
        // The order: a surviving write's earlier epochs all survived.
        for &(e, s) in &present {
            if s {
                if let Some(&(le, _)) = present.iter().find(|(pe, ps)| *pe < e && !ps) {
                    return Err(format!(
                        "crash after {k}: epoch {e} survived without epoch {le}: {present:?}"
                    ));
                }
            }
        }
        let again = horae::recover_stream(devs, params(&dev, true)).await.unwrap();
        assert!(again.discard.is_empty() && again.head == again.tail);
        OrderingQueue::init_stream(devs, params(&dev, true))
            .await
            .unwrap();
        Ok(rec.from_checkpoint)
    })
    .unwrap()
}

/// Explores every crash state of the recorded run (PMR lines and cache
/// blocks landing or not); returns (states, states whose recovery read
/// the checkpoint, violations, the first violation).
fn explore(profile: &SsdProfile, faults: DriverFaults) -> (usize, usize, usize, Option<String>) {
    let (m, written, swaps) = record(profile, faults);
    assert!(swaps >= 3, "{swaps} swaps");
    let trace = m.take_trace();
    let pmr = PageStore::zeroed(m.pmr_image(0).unwrap().len());
    let mut ex = DevicesExplorer::new(&trace, m.layout(), vec![pmr]).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let (mut states, mut used, mut bad, mut first, mut left) = (0, 0, 0, None, 0u64);
    let mut last = None;
    for k in 0..ex.points() {
        let changes = ex.advance(k).unwrap();
        if last.as_ref() == Some(&changes) {
            continue;
        }
        last = Some(changes);
        let (choices, lo) = ex.choices_at(k, 6, 6).unwrap();
        left += lo;
        for c in &choices {
            let mut s = ex.build(k, c).unwrap();
            if !seen.insert(s.content_hash()) {
                continue;
            }
            states += 1;
            match check(profile, &s, &written) {
                Ok(n) => used += (n > 0) as usize,
                Err(why) => {
                    bad += 1;
                    first.get_or_insert(why);
                }
            }
        }
    }
    eprintln!(
        "{} {faults:?}: {swaps} swaps, {} points, {states} distinct states, {used} read the \
         checkpoint, {bad} violations, {left} left out",
        profile.name,
        trace.entries().len()
    );
    (states, used, bad, first)
}

#[test]
fn every_crash_state_around_swaps_recovers_one_consistent_order() {
    for profile in [SsdProfile::flash_vwc(), SsdProfile::optane_905p()] {
        let (states, used, bad, first) = explore(&profile, DriverFaults::default());
        assert!(
            states > 40 && used > 10,
            "{states} states, {used} read the checkpoint"
        );
        assert_eq!(bad, 0, "{first:?}");
    }
}

#[test]
fn a_checkpoint_not_durable_before_the_head_moves_loses_the_order_after_a_crash() {
    let faults = DriverFaults {
        horae_swap_no_fua: true,
        ..Default::default()
    };
    let (_, _, bad, first) = explore(&SsdProfile::flash_vwc(), faults);
    eprintln!("first violation: {first:?}");
    assert!(bad > 0, "the fault must be caught");
}

// ---- damaged checkpoints ----

/// Overwrites region page `p` with `bytes` through the block device.
async fn put_page(m: &Machine, dev: &BlockDevice, p: u64, bytes: &[u8]) {
    let r = region(dev);
    let pp = 4096 / dev.info().lba_size as u64;
    let pg = m.memory().alloc(4096).unwrap();
    m.memory().write(pg, bytes).unwrap();
    dev.submit_wait(0, &Bio::write(r.lba + p * pp, vec![pg]))
        .await
        .unwrap();
    m.memory().free(pg).unwrap();
}

async fn get_page(m: &Machine, dev: &BlockDevice, p: u64) -> Vec<u8> {
    let r = region(dev);
    let pp = 4096 / dev.info().lba_size as u64;
    let pg = m.memory().alloc(4096).unwrap();
    dev.submit_wait(0, &Bio::read(r.lba + p * pp, vec![pg]))
        .await
        .unwrap();
    let mut b = vec![0u8; 4096];
    m.memory().read(pg, &mut b).unwrap();
    m.memory().free(pg).unwrap();
    b
}

/// Re-seals an entry page after a change (its trailer CRC).
fn reseal(b: &mut [u8]) {
    let crc = crc32(&b[..4092]);
    b[4092..].copy_from_slice(&crc.to_le_bytes());
}

/// CRC-32 (IEEE), bitwise: the test's own, independent of the driver's.
fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &x in data {
        c ^= x as u32;
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

#[test]
fn a_damaged_checkpoint_gives_a_typed_one_line_error() {
    let profile = SsdProfile::optane_905p();
    let (ex, m, dev) = rig(&profile, DriverFaults::default(), TraceMode::Off);
    let m2 = m.clone();
    ex.block_on(async move {
        let devs = std::slice::from_ref(&dev);
        // A region too small for the ring is refused at init.
        let small = params(&dev, false).with_checkpoint(CheckpointRegion {
            pages: 2,
            ..region(&dev)
        });
        let r = OrderingQueue::init_stream(devs, small).await;
        assert!(matches!(r, Err(DriverError::Invalid(_))), "{r:?}");
        let q = OrderingQueue::init_stream(devs, params(&dev, true))
            .await
            .unwrap();
        let mut all = Vec::new();
        for i in 0..3u64 {
            all.extend(epoch(&m2, &q, &[40 + 2 * i, 41 + 2 * i]).await.1);
        }
        for x in &all {
            assert!(dev.wait(0, x).await.is_success());
        }
        assert_eq!(q.swaps(), 1);
        let first = q.head() - q.swapped();
        let header = get_page(&m2, &dev, 0).await;
        let h = CheckpointHeader::parse(&header).unwrap().unwrap();
        assert_eq!((h.first, h.end, h.geometry), (first, q.head(), Geometry::SINGLE));
        let entries = get_page(&m2, &dev, region(&dev).page_of(first)).await;
        let slot = (first % ENTRIES_PER_PAGE) as usize * 16;
        let e0 = {
            let mut b = [0u8; 16];
            b.copy_from_slice(&entries[slot..slot + 16]);
            RawEntry::from_bytes(&b)
        };
        assert_eq!((e0.lba, e0.len, e0.etag), (40, 1, true));
        let past_tail = CheckpointHeader {
            end: q.tail() + 3,
            ..h
        }
        .to_page();
        let mut flipped = header.clone();
        flipped[20] ^= 0x10;
        let mut torn = entries.clone();
        torn[slot + 2] ^= 1;
        let mut moved = entries.clone();
        moved[4080..4088].copy_from_slice(&(7 * ENTRIES_PER_PAGE).to_le_bytes());
        reseal(&mut moved);
        let mut empty = entries.clone();
        empty[slot + 4..slot + 8].copy_from_slice(&0u32.to_le_bytes());
        reseal(&mut empty);
        let p = region(&dev).page_of(first);
        let cases: Vec<(&str, u64, Vec<u8>, String)> = vec![
            (
                "header checksum",
                0,
                flipped,
                "checkpoint header: checksum mismatch".into(),
            ),
            ("extent past the tail", 0, past_tail, "checkpoint extent".into()),
            (
                "entry page checksum",
                p,
                torn,
                format!("checkpoint page {p} (entry {first}): checksum"),
            ),
            (
                "entry page base",
                p,
                moved,
                format!(
                    "holds entries from 1785, not {}",
                    first - first % ENTRIES_PER_PAGE
                ),
            ),
            ("entry of length 0", p, empty, format!("entry {first}: length 0")),
        ];
        for (name, at, bytes, want) in cases {
            let good = get_page(&m2, &dev, at).await;
            put_page(&m2, &dev, at, &bytes).await;
            let r = horae::recover_stream(devs, params(&dev, true)).await;
            let why = match &r {
                Err(e @ DriverError::CorruptPsq { queue, .. }) if *queue == horae::ORDERING_QUEUE_ID => {
                    e.to_string()
                }
                other => panic!("{name}: expected a corrupt ordering queue, got {other:?}"),
            };
            assert!(why.contains(&want), "{name}: {why}");
            assert!(!why.contains('\n'), "{name}: one line");
            eprintln!("{name}: {why}");
            put_page(&m2, &dev, at, &good).await;
        }
        let rec = horae::recover_stream(devs, params(&dev, true)).await.unwrap();
        assert_eq!(rec.from_checkpoint, q.swapped());
    })
    .unwrap();
}
