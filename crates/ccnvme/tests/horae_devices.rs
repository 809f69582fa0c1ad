//! Horae streams and several devices (Horae 5.3, 5.6.1): the joint FLUSH
//! flushes every device of the range once and concurrently and moves
//! `flushed` only after all completed, `dr` bits per device, streams in
//! disjoint slices of the PMR, determinism across devices, and crash
//! states where each device's cache and PMR fail independently, with the
//! two fault switches (`horae_no_joint_flush`, `horae_early_dr`) caught.

use std::rc::Rc;
use std::sync::Arc;

use ccnvme::horae::{self, layout, EntryId, Geometry, OrderedWrite, OrderingQueue, StreamParams};
use ccnvme::{Bio, BlockDevice, DriverError, DriverFaults, FlushIssue, ProbeOptions};
use nvme_ctrl::crash::{boot_devices, DevicesExplorer, DevicesState};
use nvme_ctrl::events::FLUSH_DONE;
use nvme_ctrl::{ControllerConfig, Drive, Image, SsdProfile, BLOCK};
use pcie_sim::{BarKind, EventKind, Executor, HostAddr, Machine, PageStore, SimDuration, TraceMode};

mod common;

const BLOCKS: u64 = 4096;

fn horae_opts(faults: DriverFaults) -> ProbeOptions {
    common::horae_options(faults)
}

/// A machine with one fresh drive per profile, all probed.
fn rig(seed: u64, profiles: &[SsdProfile], mode: TraceMode) -> (Executor, Machine, Vec<Rc<BlockDevice>>) {
    rig_with(seed, profiles, mode, horae_opts(DriverFaults::default()))
}

/// [`rig`], the drives probed with `opts`.
fn rig_with(
    seed: u64,
    profiles: &[SsdProfile],
    mode: TraceMode,
    opts: ProbeOptions,
) -> (Executor, Machine, Vec<Rc<BlockDevice>>) {
    let drives = profiles.iter().map(|p| Drive::fresh(p.clone(), BLOCKS)).collect();
    let (ex, m, _) = common::machine_with_drives(seed, drives, mode);
    let devs = common::probe_all(&ex, &m, profiles.len() as u8, opts);
    (ex, m, devs)
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

/// A tag unique to block `lba` of device `dev`.
fn tag(dev: u8, lba: u64) -> u64 {
    (dev as u64) << 32 | lba
}

/// Appends one epoch of one-block writes `(device, lba)`, submits them all
/// and waits for them.
async fn epoch_done(m: &Machine, q: &Rc<OrderingQueue>, writes: &[(u8, u64)]) {
    let ws: Vec<OrderedWrite> = writes
        .iter()
        .map(|&(d, l)| OrderedWrite::fresh(l, 1).on(d))
        .collect();
    let e = q.append_writes(0, &ws).await.unwrap();
    let mut done = Vec::new();
    for (i, &(d, l)) in writes.iter().enumerate() {
        let bio = Bio::write(l, pages(m, tag(d, l), 1));
        done.push((d, q.submit(0, e.entry(i as u32).unwrap(), &bio).await.unwrap()));
    }
    for (d, x) in &done {
        assert!(q.devices()[*d as usize].wait(0, x).await.is_success());
    }
}

/// Trace positions of the `FLUSH_DONE` events of each port in `from..`.
fn flush_dones(m: &Machine, from: usize, ports: usize) -> Vec<Vec<usize>> {
    let t = m.trace();
    let mut out = vec![Vec::new(); ports];
    for (i, e) in t.entries().iter().enumerate().skip(from) {
        if e.kind == EventKind::Device && e.code == FLUSH_DONE {
            out[e.source as usize].push(i);
        }
    }
    out
}

/// Trace position of the first host write to port `port`'s register BAR
/// (a doorbell) in `from..`.
fn first_doorbell(m: &Machine, from: usize, port: u8) -> Option<usize> {
    let bar = m.bar(port, BarKind::Registers).unwrap().0;
    let size = m.layout().ports[port as usize].regs_size;
    let t = m.trace();
    t.entries()
        .iter()
        .enumerate()
        .skip(from)
        .find(|(_, e)| e.kind == EventKind::MmioWrite && (bar..bar + size).contains(&e.addr))
        .map(|(i, _)| i)
}

/// Trace position of the persistent write of `q`'s `flushed` pointer in
/// `from..`.
fn flushed_write(m: &Machine, from: usize, q: &OrderingQueue) -> Option<usize> {
    let at = m.bar(0, BarKind::Pmr).unwrap().0 + q.layout().start + layout::FLUSHED;
    let t = m.trace();
    t.entries()
        .iter()
        .enumerate()
        .skip(from)
        .find(|(_, e)| e.kind == EventKind::MmioWrite && e.addr == at)
        .map(|(i, _)| i)
}

/// Three drives with a volatile cache, epochs on devices 0 and 1 (two
/// blocks to device 0, one to device 1), then a FLUSH of the stream sent
/// as `issue` says: the machine, the queue, the trace position before the
/// FLUSH and its latency.
fn two_of_three_flushed(issue: FlushIssue) -> (Machine, Rc<OrderingQueue>, usize, SimDuration) {
    let vwc = SsdProfile::flash_vwc();
    let mut opts = horae_opts(DriverFaults::default());
    opts.profile.horae_flush = issue;
    let (ex, m, devs) = rig_with(3, &[vwc.clone(), vwc.clone(), vwc], TraceMode::Full, opts);
    let m2 = m.clone();
    let (q, from, took) = ex
        .block_on(async move {
            let q = OrderingQueue::init_stream(&devs, StreamParams::SINGLE)
                .await
                .unwrap();
            epoch_done(&m2, &q, &[(0, 10), (1, 10)]).await;
            epoch_done(&m2, &q, &[(0, 11)]).await;
            assert_eq!(q.flush_candidates(q.tail()), vec![0, 1], "device 2 has no entry");
            let from = m2.trace().len() as usize;
            let t0 = m2.sim().now();
            q.flush(0).await.unwrap();
            (q, from, m2.sim().now().since(t0))
        })
        .unwrap();
    (m, q, from, took)
}

/// HFS-SF (HoRAE 6.3, Figure 10(c)): the same devices flushed, each
/// FLUSH sent only after the one before it completed, `flushed` moved
/// after the last; slower than the joint FLUSH, which waits for device 0's
/// longer FLUSH while device 1's runs (the drives destage their caches in
/// the background from the moment a write lands, so the serialized FLUSH
/// of device 1 finds little left to do: the difference is its round trip).
#[test]
fn a_serialized_flush_flushes_the_same_devices_one_after_another() {
    let (_, _, _, joint) = two_of_three_flushed(FlushIssue::Joint);
    let (m, q, from, serial) = two_of_three_flushed(FlushIssue::Serialized);
    assert_eq!(q.flushed(), q.tail());
    let done = flush_dones(&m, from, 3);
    assert_eq!(done.iter().map(Vec::len).collect::<Vec<_>>(), vec![1, 1, 0]);
    let d1 = first_doorbell(&m, from, 1).unwrap();
    assert!(
        d1 > done[0][0],
        "device 1 rung at {d1}, device 0 done at {:?}",
        done[0]
    );
    let f = flushed_write(&m, from, &q).unwrap();
    assert!(f > done[1][0], "flushed at {f}, flushes done {done:?}");
    assert!(serial > joint, "serialized {serial:?} vs joint {joint:?}");
}

#[test]
fn joint_flush_flushes_each_device_of_the_range_once_concurrently_then_moves_flushed() {
    let (m, q, from, t_joint) = two_of_three_flushed(FlushIssue::Joint);
    assert_eq!(q.flushed(), q.tail());
    assert_eq!(q.flush_candidates(q.tail()), Vec::<u8>::new(), "ranges reset");
    let done = flush_dones(&m, from, 3);
    assert_eq!(
        done.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![1, 1, 0],
        "one Flush to each device of the range, none to the other"
    );
    // Concurrent: both Flush commands were rung before either completed.
    let (d0, d1) = (
        first_doorbell(&m, from, 0).unwrap(),
        first_doorbell(&m, from, 1).unwrap(),
    );
    assert!(
        d0 < done[1][0] && d1 < done[0][0],
        "doorbells {d0} {d1}, done {done:?}"
    );
    // `flushed` moved after both completed.
    let f = flushed_write(&m, from, &q).unwrap();
    assert!(
        f > done[0][0] && f > done[1][0],
        "flushed at {f}, flushes done {done:?}"
    );

    eprintln!("joint FLUSH of 2 devices: {:.2} us", t_joint.as_us_f64());
}

#[test]
fn flush_of_one_device_flushes_the_devices_before_its_flush_point_only() {
    // Horae Figure 7: flushing device 1 flushes every device with entries
    // before its last one, and no device whose entries all come later.
    let vwc = SsdProfile::flash_vwc();
    let (ex, m, devs) = rig(4, &[vwc.clone(), vwc.clone(), vwc], TraceMode::Full);
    let m2 = m.clone();
    ex.block_on(async move {
        let q = OrderingQueue::init_stream(&devs, StreamParams::SINGLE)
            .await
            .unwrap();
        epoch_done(&m2, &q, &[(0, 1)]).await; // seq 0
        epoch_done(&m2, &q, &[(1, 2)]).await; // seq 1
        epoch_done(&m2, &q, &[(2, 3)]).await; // seq 2
        epoch_done(&m2, &q, &[(0, 4)]).await; // seq 3
        let from = m2.trace().len() as usize;
        q.flush_device(0, 1).await.unwrap();
        assert_eq!(q.flushed(), 2, "flush point after device 1's last entry");
        let counts = |from| flush_dones(&m2, from, 3).iter().map(Vec::len).collect::<Vec<_>>();
        assert_eq!(counts(from), vec![1, 1, 0]);
        let from = m2.trace().len() as usize;
        q.flush_device(0, 2).await.unwrap();
        assert_eq!(q.flushed(), 3);
        assert_eq!(counts(from), vec![0, 0, 1], "device 0's later entry waits");
        let from = m2.trace().len() as usize;
        q.flush_device(0, 1).await.unwrap();
        assert_eq!(
            (q.flushed(), counts(from)),
            (3, vec![0, 0, 0]),
            "nothing left on 1"
        );
        q.flush(0).await.unwrap();
        assert_eq!((q.flushed(), counts(from)), (4, vec![1, 0, 0]));
        assert!(q.flush_device(0, 3).await.is_err(), "no device 3");
    })
    .unwrap();
}

#[test]
fn dr_bits_per_device_and_no_flush_to_a_device_without_cache() {
    // Device 0 has no volatile cache (dr on completion), device 1 has one.
    let (ex, m, devs) = rig(
        5,
        &[SsdProfile::optane_905p(), SsdProfile::flash_vwc()],
        TraceMode::Full,
    );
    let m2 = m.clone();
    ex.block_on(async move {
        let q = OrderingQueue::init_stream(&devs, StreamParams::SINGLE)
            .await
            .unwrap();
        epoch_done(&m2, &q, &[(0, 7), (1, 7), (0, 8)]).await;
        let dr: Vec<bool> = (0..3).map(|s| q.entry(EntryId(s)).dr).collect();
        assert_eq!(dr, vec![true, false, true]);
        let devid: Vec<u8> = (0..3).map(|s| q.entry(EntryId(s)).devid).collect();
        assert_eq!(devid, vec![0, 1, 0]);
        // The durable point stops at device 1's entry: the head cannot
        // pass it before a flush.
        assert_eq!(q.dequeue(0).await.unwrap(), 1);
        let from = m2.trace().len() as usize;
        q.flush(0).await.unwrap();
        // The block layer drops the Flush to device 0 (no volatile cache).
        let counts: Vec<usize> = flush_dones(&m2, from, 2).iter().map(Vec::len).collect();
        assert_eq!(counts, vec![0, 1]);
        assert_eq!(q.dequeue(0).await.unwrap(), 3);
    })
    .unwrap();
}

#[test]
fn olayer_submit_bio_appends_an_epoch_per_bio_with_its_device_and_ipu_bit() {
    let (ex, m, devs) = rig(
        8,
        &[SsdProfile::optane_905p(), SsdProfile::optane_905p()],
        TraceMode::Off,
    );
    let m2 = m.clone();
    ex.block_on(async move {
        let q = OrderingQueue::init_stream(&devs, StreamParams::SINGLE)
            .await
            .unwrap();
        let a = q
            .submit_bio(0, 1, &Bio::write(5, pages(&m2, 1, 2)))
            .await
            .unwrap();
        let b = q
            .submit_bio_ipu(0, 0, &Bio::write(6, pages(&m2, 2, 1)))
            .await
            .unwrap();
        assert!(devs[1].wait(0, &a).await.is_success());
        assert!(devs[0].wait(0, &b).await.is_success());
        let (ea, eb) = (q.entry(EntryId(0)), q.entry(EntryId(1)));
        assert_eq!(
            (ea.devid, ea.lba, ea.len, ea.etag, ea.ipu),
            (1, 5, 2, true, false)
        );
        assert_eq!((eb.devid, eb.lba, eb.len, eb.etag, eb.ipu), (0, 6, 1, true, true));
        assert!(ea.dr && eb.dr);
        let read = q.submit_bio(0, 0, &Bio::read(5, pages(&m2, 3, 1))).await;
        assert!(matches!(read, Err(DriverError::Invalid(_))), "{read:?}");
        let far = q.submit_bio(0, 2, &Bio::write(5, pages(&m2, 3, 1))).await;
        assert!(
            matches!(far, Err(DriverError::Invalid(_))),
            "no device 2: {far:?}"
        );
        assert_eq!(q.tail(), 2, "refused bios append nothing");
    })
    .unwrap();
}

#[test]
fn streams_use_disjoint_slices_with_their_own_pointers() {
    let (ex, m, devs) = rig(6, &[SsdProfile::optane_905p()], TraceMode::Off);
    let m2 = m.clone();
    ex.block_on(async move {
        let dev = &devs[0];
        let mut qs = Vec::new();
        for sid in 0..4u16 {
            qs.push(
                OrderingQueue::init_stream(&devs, StreamParams::stream(sid, 4))
                    .await
                    .unwrap(),
            );
        }
        let free = dev.pmr_free_start();
        let slice = (dev.info().pmr_bytes - free) / 4 / 64 * 64;
        for (i, q) in qs.iter().enumerate() {
            let l = q.layout();
            assert_eq!(l.start, free + i as u64 * slice, "stream {i}");
            assert!(
                l.bytes() <= slice && l.bytes() + 16 > slice,
                "the largest ring of the slice"
            );
            assert_eq!(
                q.geometry(),
                Geometry {
                    devices: 1,
                    stream: i as u16,
                    streams: 4
                }
            );
        }
        // Stream 2 appends and flushes; the others' pointers stay zero in
        // the PMR itself.
        epoch_done(&m2, &qs[2], &[(0, 100), (0, 101)]).await;
        qs[2].flush(0).await.unwrap();
        let img = m2.pmr_image(0).unwrap();
        let word = |q: &OrderingQueue, o: u64| {
            let mut b = [0u8; 8];
            img.read(q.layout().start + o, &mut b);
            u64::from_le_bytes(b)
        };
        for (i, q) in qs.iter().enumerate() {
            let want = if i == 2 { 2 } else { 0 };
            assert_eq!(word(q, layout::TAIL), want, "stream {i} tail");
            assert_eq!(word(q, layout::FLUSHED), want, "stream {i} flushed");
        }
        // A stream attaches only with its own geometry.
        let wrong = OrderingQueue::init_stream(&devs, StreamParams::stream(1, 2)).await;
        assert!(matches!(wrong, Err(DriverError::Invalid(_))), "{wrong:?}");
        assert!(OrderingQueue::init_stream(&devs, StreamParams::stream(4, 4))
            .await
            .is_err());
        let rec = horae::recover_stream(&devs, StreamParams::stream(2, 4))
            .await
            .unwrap();
        assert_eq!((rec.head, rec.tail, rec.durable.len()), (0, 2, 2));
        let rec = horae::recover_stream(&devs, StreamParams::stream(3, 4))
            .await
            .unwrap();
        assert_eq!(rec.tail, 0);
    })
    .unwrap();
}

/// A run over two devices: its trace hash and length.
fn two_device_run(seed: u64) -> (u64, u64) {
    let vwc = SsdProfile::flash_vwc();
    let (ex, m, devs) = rig(seed, &[vwc.clone(), vwc], TraceMode::Full);
    let m2 = m.clone();
    ex.block_on(async move {
        let q = OrderingQueue::init_stream(&devs, StreamParams::SINGLE)
            .await
            .unwrap();
        for r in 0..4u64 {
            epoch_done(&m2, &q, &[(0, 10 + r), (1, 10 + r), (1, 20 + r)]).await;
            epoch_done(&m2, &q, &[((r % 2) as u8, 30 + r)]).await;
            q.flush(0).await.unwrap();
        }
    })
    .unwrap();
    let t = m.trace();
    (t.hash(), t.len())
}

#[test]
fn same_seed_same_trace_across_devices() {
    let (a, n) = two_device_run(11);
    assert!(n > 500, "{n} trace entries");
    assert_eq!((a, n), two_device_run(11));
}

// ---- crash states of two devices ----

/// One ordered write of the crash workload.
#[derive(Clone, Debug)]
struct Written {
    epoch: usize,
    seq: u64,
    dev: u8,
    lba: u64,
    /// Trace length when a flush covering it returned.
    flushed_at: Option<usize>,
}

/// One epoch's writes: (device, lba).
type Epoch = Vec<(u8, u64)>;

/// Epochs over two devices, appended before their writes are submitted,
/// submitted in reverse queue order (so a later epoch's write can land
/// before an earlier one's), with joint flushes between.
fn record_two(profiles: &[SsdProfile; 2], faults: DriverFaults) -> (Machine, Vec<Written>) {
    let drives = profiles.iter().map(|p| Drive::fresh(p.clone(), BLOCKS)).collect();
    let (ex, m, _) = common::machine_with_drives(9, drives, TraceMode::Full);
    let devs = common::probe_all(&ex, &m, 2, horae_opts(faults));
    // (writes of each epoch, flush after the group)
    let plan: Vec<(Vec<Epoch>, bool)> = vec![
        (vec![vec![(0, 10)], vec![(1, 20)]], true),
        (vec![vec![(1, 21), (0, 11)], vec![(0, 12)]], true),
        (vec![vec![(0, 13)], vec![(1, 22)]], false),
    ];
    let m2 = m.clone();
    let written = ex
        .block_on(async move {
            let q = OrderingQueue::init_stream(&devs, StreamParams::SINGLE)
                .await
                .unwrap();
            let mut written: Vec<Written> = Vec::new();
            let mut epoch = 0;
            for (group, flush) in plan {
                let mut todo = Vec::new();
                for writes in group {
                    let ws: Vec<OrderedWrite> = writes
                        .iter()
                        .map(|&(d, l)| OrderedWrite::fresh(l, 1).on(d))
                        .collect();
                    let e = q.append_writes(0, &ws).await.unwrap();
                    for (i, &(dev, lba)) in writes.iter().enumerate() {
                        let seq = e.first + i as u64;
                        written.push(Written {
                            epoch,
                            seq,
                            dev,
                            lba,
                            flushed_at: None,
                        });
                        todo.push((EntryId(seq), dev, lba));
                    }
                    epoch += 1;
                }
                let mut done = Vec::new();
                for &(id, dev, lba) in todo.iter().rev() {
                    let bio = Bio::write(lba, pages(&m2, tag(dev, lba), 1));
                    done.push((dev, q.submit(0, id, &bio).await.unwrap()));
                }
                for (d, x) in &done {
                    assert!(devs[*d as usize].wait(0, x).await.is_success());
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

/// Some(true): the block holds the write; Some(false): zeros; None: other.
async fn state_of(m: &Machine, dev: &BlockDevice, w: &Written) -> Option<bool> {
    let pg = pages(m, 0, 1);
    dev.submit_wait(0, &Bio::read(w.lba, pg.clone())).await.unwrap();
    let mut b = [0u8; BLOCK];
    m.memory().read(pg[0], &mut b).unwrap();
    m.memory().free(pg[0]).unwrap();
    if b == pattern(tag(w.dev, w.lba), 0) {
        Some(true)
    } else if b.iter().all(|x| *x == 0) {
        Some(false)
    } else {
        None
    }
}

/// Boots both devices over `state`, recovers the stream and discards;
/// `Err` says how the order or durability was broken.
fn check_two(profiles: &[SsdProfile; 2], state: &DevicesState, written: &[Written]) -> Result<(), String> {
    let k = state.point;
    let ex = Executor::new(1);
    let m = Machine::new(&ex, Default::default(), TraceMode::Off);
    let base = Arc::new(Image::zeroed(BLOCKS));
    boot_devices(
        &m,
        profiles
            .iter()
            .map(|p| ControllerConfig::new(p.clone()))
            .collect(),
        &[base.clone(), base],
        state,
    )
    .unwrap();
    let devs = common::probe_all(&ex, &m, 2, horae_opts(DriverFaults::default()));
    let written = written.to_vec();
    let m2 = m.clone();
    ex.block_on(async move {
        let rec = match horae::recover_stream(&devs, StreamParams::SINGLE).await {
            Err(DriverError::NoLayout) => return Ok(()),
            r => r.map_err(|e| format!("crash after {k}: recovery failed: {e}"))?,
        };
        rec.discard_and_reset_all(&devs, 0).await.unwrap();
        let mut present = Vec::new();
        for w in &written {
            let s = state_of(&m2, &devs[w.dev as usize], w)
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
        let again = horae::recover_stream(&devs, StreamParams::SINGLE).await.unwrap();
        assert!(again.discard.is_empty() && again.head == again.tail);
        Ok(())
    })
    .unwrap()
}

/// Explores every crash state of the two-device run (each device's PMR
/// writes and cache blocks landing independently); returns (states,
/// violations, the first violation).
fn explore_two(profiles: [SsdProfile; 2], faults: DriverFaults) -> (usize, usize, Option<String>) {
    let (m, written) = record_two(&profiles, faults);
    let trace = m.take_trace();
    let pmr = |p: u8| PageStore::zeroed(m.pmr_image(p).unwrap().len());
    let mut ex = DevicesExplorer::new(&trace, m.layout(), vec![pmr(0), pmr(1)]).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    let (mut states, mut bad, mut first, mut left) = (0, 0, None, 0u64);
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
            if let Err(why) = check_two(&profiles, &s, &written) {
                bad += 1;
                first.get_or_insert(why);
            }
        }
    }
    eprintln!(
        "{} + {} {faults:?}: {} points, {states} distinct states, {bad} violations, {left} left out",
        profiles[0].name,
        profiles[1].name,
        trace.entries().len()
    );
    (states, bad, first)
}

#[test]
fn two_devices_with_volatile_caches_keep_the_order_in_every_crash_state() {
    let vwc = SsdProfile::flash_vwc();
    let (states, bad, first) = explore_two([vwc.clone(), vwc], DriverFaults::default());
    assert!(states > 20, "{states} states");
    assert_eq!(bad, 0, "{first:?}");
}

#[test]
fn two_devices_without_cache_and_mixed_keep_the_order_in_every_crash_state() {
    for profiles in [
        [SsdProfile::optane_905p(), SsdProfile::optane_905p()],
        [SsdProfile::optane_905p(), SsdProfile::flash_vwc()],
    ] {
        let (states, bad, first) = explore_two(profiles, DriverFaults::default());
        assert!(states > 20, "{states} states");
        assert_eq!(bad, 0, "{first:?}");
    }
}

#[test]
fn flushing_one_device_only_loses_the_order_after_a_crash() {
    let vwc = SsdProfile::flash_vwc();
    let faults = DriverFaults {
        horae_no_joint_flush: true,
        ..Default::default()
    };
    let (_, bad, first) = explore_two([vwc.clone(), vwc], faults);
    eprintln!("first violation: {first:?}");
    assert!(bad > 0, "the fault must be caught");
}

#[test]
fn a_dr_bit_set_before_completion_loses_the_order_after_a_crash() {
    let optane = SsdProfile::optane_905p();
    let faults = DriverFaults {
        horae_early_dr: true,
        ..Default::default()
    };
    let (_, bad, first) = explore_two([optane.clone(), optane], faults);
    eprintln!("first violation: {first:?}");
    assert!(bad > 0, "the fault must be caught");
}

// ---- H5: ordered random 4 KiB writes ----

/// `n` ordered random 4 KiB writes from one thread (each its own epoch:
/// write i must not be durable before write i-1), then durability of all;
/// spread over the drives round-robin. Horae: `submit_bio` (append the
/// entry, submit the write) and go on; one
/// joint FLUSH at the end. Vanilla (Linux without Horae): each ordered
/// write waits for its completion and, with a volatile cache, a FLUSH
/// before the next one is sent. Returns the writes per second.
fn ordered_writes(profile: &SsdProfile, drives: usize, horae_path: bool, n: u64) -> f64 {
    let profiles = vec![profile.clone(); drives];
    let (ex, m, devs) = rig(21, &profiles, TraceMode::Off);
    let m2 = m.clone();
    let us = ex
        .block_on(async move {
            let q = OrderingQueue::init_stream(&devs, StreamParams::SINGLE)
                .await
                .unwrap();
            let pg = pages(&m2, 1, 1);
            let mut rng = 0x9E37_79B9_7F4A_7C15u64;
            let t0 = m2.sim().now();
            let mut done = Vec::new();
            for i in 0..n {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let lba = rng % (BLOCKS - 1);
                let d = (i % drives as u64) as u8;
                let bio = Bio::write(lba, pg.clone());
                if horae_path {
                    // A block is rewritten only after its earlier write
                    // completed (the ordering layer waits for it).
                    done.push((d, q.submit_bio(0, d, &bio).await.unwrap()));
                } else {
                    let dev = &devs[d as usize];
                    dev.submit_wait(0, &bio).await.unwrap();
                    dev.submit_wait(0, &Bio::flush()).await.unwrap();
                }
            }
            for (d, x) in &done {
                assert!(devs[*d as usize].wait(0, x).await.is_success());
            }
            if horae_path {
                q.flush(0).await.unwrap();
            }
            m2.sim().now().since(t0).as_us_f64()
        })
        .unwrap();
    n as f64 / us * 1e6
}

/// The mechanism of H5: a thread ordering its writes through the queue
/// does not wait for each one, so it beats one that waits, on one drive
/// and two, with a volatile cache and without. The measurement itself
/// (Intel 750, several drive counts, the per-request breakdown) is in the
/// figures report (`crates/bench/src/figures/horae.rs`).
#[test]
fn h5_ordered_random_writes_one_stream_one_and_two_devices() {
    for profile in [SsdProfile::flash_vwc(), SsdProfile::optane_905p()] {
        for drives in [1usize, 2] {
            let vanilla = ordered_writes(&profile, drives, false, 256);
            let horae = ordered_writes(&profile, drives, true, 256);
            assert!(
                horae > vanilla,
                "{} on {drives} drive(s): horae {horae:.0} IOPS vs vanilla {vanilla:.0}",
                profile.name
            );
        }
    }
}
