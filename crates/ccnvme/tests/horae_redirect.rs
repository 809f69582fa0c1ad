//! Horae write redirection (Horae 5.4, 5.5): in-place writes go to the
//! p-area (prepare writes, `plba` in the entry, the IPU tree), reads are
//! redirected, commit writes copy them home (lazy after a joint FLUSH when
//! idle, eager when the p-area is full), and recovery commits the durable
//! prepare writes in order and ignores the discarded ones, so every crash
//! state recovers to a prefix of the queue; the fault
//! `horae_no_redirect_commit` is caught.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::Arc;

use ccnvme::horae::{self, EntryId, OrderedWrite, OrderingQueue, PArea, StreamParams};
use ccnvme::{Bio, BlockDevice, DriverError, DriverFaults, ProbeOptions};
use nvme_ctrl::crash::{boot_devices, DevicesExplorer, DevicesState};
use nvme_ctrl::{ControllerConfig, Drive, Image, SsdProfile, BLOCK};
use pcie_sim::{Executor, HostAddr, Machine, PageStore, TraceMode};

mod common;

const BLOCKS: u64 = 4096;

fn horae_opts(faults: DriverFaults) -> ProbeOptions {
    common::horae_options(faults)
}

/// The stream's parameters with a p-area of `pages` pages at LBA 3584.
fn params(pages: u64) -> StreamParams {
    StreamParams::SINGLE.with_p_area(PArea { start: 3584, pages })
}

fn rig(seed: u64, profile: &SsdProfile) -> (Executor, Machine, Rc<BlockDevice>) {
    let (ex, m, _) =
        common::machine_with_drives(seed, vec![Drive::fresh(profile.clone(), BLOCKS)], TraceMode::Full);
    let dev = common::probe_all(&ex, &m, 1, horae_opts(DriverFaults::default())).remove(0);
    (ex, m, dev)
}

/// The content of a block written with tag `tag` (tag 0: zeros).
fn pattern(tag: u64) -> [u8; BLOCK] {
    let mut b = [0u8; BLOCK];
    if tag != 0 {
        for (j, x) in b.iter_mut().enumerate() {
            *x = (tag.wrapping_mul(31) as usize + j) as u8 | 1;
        }
    }
    b
}

fn page(m: &Machine, tag: u64) -> HostAddr {
    let p = m.memory().alloc(4096).unwrap();
    m.memory().write(p, &pattern(tag)).unwrap();
    p
}

/// The tag of the block read into `p` among `tags`, if one matches.
fn tag_of(m: &Machine, p: HostAddr, tags: impl IntoIterator<Item = u64>) -> Option<u64> {
    let mut b = [0u8; BLOCK];
    m.memory().read(p, &mut b).unwrap();
    tags.into_iter().find(|t| pattern(*t) == b)
}

/// Reads block `lba` straight from the device (its home location).
async fn home(m: &Machine, dev: &BlockDevice, lba: u64, tags: &[u64]) -> Option<u64> {
    let p = page(m, 0);
    dev.submit_wait(0, &Bio::read(lba, vec![p])).await.unwrap();
    let t = tag_of(m, p, tags.iter().copied().chain([0]));
    m.memory().free(p).unwrap();
    t
}

/// Reads block `lba` through the IPU tree.
async fn through(m: &Machine, q: &OrderingQueue, lba: u64, tags: &[u64]) -> Option<u64> {
    let p = page(m, 0);
    q.read(0, 0, &Bio::read(lba, vec![p])).await.unwrap();
    let t = tag_of(m, p, tags.iter().copied().chain([0]));
    m.memory().free(p).unwrap();
    t
}

#[test]
fn ipu_goes_to_the_p_area_reads_follow_it_and_the_lazy_commit_writes_it_home() {
    let (ex, m, dev) = rig(1, &SsdProfile::optane_905p());
    let m2 = m.clone();
    ex.block_on(async move {
        let q = OrderingQueue::init_stream(std::slice::from_ref(&dev), params(16))
            .await
            .unwrap();
        assert!(q.redirects());
        let a = q
            .submit_bio(0, 0, &Bio::write(10, vec![page(&m2, 1)]))
            .await
            .unwrap();
        assert!(dev.wait(0, &a).await.is_success());
        q.flush(0).await.unwrap();
        // Two in-place writes of block 10 in flight together (no wait for
        // the first: each has its own slot), then one of block 11.
        let ws = [
            OrderedWrite {
                in_place: true,
                ..OrderedWrite::fresh(10, 1)
            },
            OrderedWrite {
                in_place: true,
                ..OrderedWrite::fresh(11, 1)
            },
        ];
        let e1 = q.append_writes(0, &ws[..1]).await.unwrap();
        let e2 = q.append_writes(0, &ws).await.unwrap();
        let d2 = q
            .submit(0, e2.entry(0).unwrap(), &Bio::write(10, vec![page(&m2, 3)]))
            .await
            .unwrap();
        let d3 = q
            .submit(0, e2.entry(1).unwrap(), &Bio::write(11, vec![page(&m2, 4)]))
            .await
            .unwrap();
        let d1 = q
            .submit(0, e1.entry(0).unwrap(), &Bio::write(10, vec![page(&m2, 2)]))
            .await
            .unwrap();
        for d in [&d1, &d2, &d3] {
            assert!(dev.wait(0, d).await.is_success());
        }
        let (x, y, z) = (q.entry(EntryId(1)), q.entry(EntryId(2)), q.entry(EntryId(3)));
        assert!(x.ipu && y.ipu && z.ipu && x.dr && y.dr && z.dr);
        let slots = [x.plba as u64, y.plba as u64, z.plba as u64];
        assert!(slots.iter().all(|s| (3584..3600).contains(s)), "{slots:?}");
        assert!(slots[0] != slots[1] && slots[1] != slots[2]);
        assert_eq!(q.read_location(0, 10), slots[1], "the newest slot of block 10");
        assert_eq!(q.free_slots(0), 13);
        // Home still holds the old content; reads through the tree the new.
        assert_eq!(home(&m2, &dev, 10, &[1, 2, 3]).await, Some(1));
        assert_eq!(home(&m2, &dev, 11, &[4]).await, Some(0));
        assert_eq!(through(&m2, &q, 10, &[1, 2, 3]).await, Some(3));
        assert_eq!(through(&m2, &q, 11, &[4]).await, Some(4));
        // The joint FLUSH leaves the stream idle: the lazy commit runs in
        // the background, merges block 10's two prepare writes (the newest
        // wins) and copies both blocks home, then dequeues.
        q.flush(0).await.unwrap();
        let t = m2.sim().now();
        while q.head() != q.tail() {
            m2.sim().sleep(pcie_sim::SimDuration::from_ns(1_000)).await;
            assert!(m2.sim().now().since(t).as_us_f64() < 10_000.0, "no lazy commit");
        }
        assert_eq!(home(&m2, &dev, 10, &[1, 2, 3]).await, Some(3));
        assert_eq!(home(&m2, &dev, 11, &[4]).await, Some(4));
        assert_eq!((q.read_location(0, 10), q.read_location(0, 11)), (10, 11));
        assert_eq!(q.free_slots(0), 16);
        // A fresh write needs no slot.
        let f = q
            .submit_bio(0, 0, &Bio::write(12, vec![page(&m2, 5)]))
            .await
            .unwrap();
        assert!(dev.wait(0, &f).await.is_success());
        assert_eq!(q.entry(EntryId(4)).plba, horae::layout::NO_PLBA);
        // An in-place write larger than the p-area is refused.
        let big = q
            .append_writes(
                0,
                &[OrderedWrite {
                    in_place: true,
                    ..OrderedWrite::fresh(100, 17)
                }],
            )
            .await;
        assert!(matches!(big, Err(DriverError::Invalid(_))), "{big:?}");
        // So is an epoch whose in-place writes together overflow it (it
        // could never be reserved whole).
        let many: Vec<OrderedWrite> = (0..17)
            .map(|i| OrderedWrite {
                in_place: true,
                ..OrderedWrite::fresh(200 + i, 1)
            })
            .collect();
        let many = q.append_writes(0, &many).await;
        assert!(matches!(many, Err(DriverError::Invalid(_))), "{many:?}");
        assert_eq!(q.p_area_slots(0), 16);
    })
    .unwrap();
}

/// Two streams share the p-area evenly (Horae Table 1): each redirects to
/// its own slice, and a p-area too small for every stream is refused.
#[test]
fn streams_redirect_to_their_own_slice_of_the_p_area() {
    let (ex, m, dev) = rig(3, &SsdProfile::optane_905p());
    let m2 = m.clone();
    ex.block_on(async move {
        let area = PArea {
            start: 3584,
            pages: 10,
        };
        let mut qs = Vec::new();
        for sid in 0..2u16 {
            let p = StreamParams::stream(sid, 2).with_p_area(area);
            qs.push(
                OrderingQueue::init_stream(std::slice::from_ref(&dev), p)
                    .await
                    .unwrap(),
            );
        }
        for (sid, q) in qs.iter().enumerate() {
            assert_eq!(q.p_area_slots(0), 5);
            let bio = Bio::write(40 + sid as u64, vec![page(&m2, 7)]);
            let d = q.submit_bio_ipu(0, 0, &bio).await.unwrap();
            assert!(dev.wait(0, &d).await.is_success());
            let plba = q.entry(EntryId(0)).plba as u64;
            let slice = 3584 + 5 * sid as u64;
            assert!((slice..slice + 5).contains(&plba), "stream {sid}: slot {plba}");
        }
        let tiny = StreamParams::stream(0, 4).with_p_area(PArea {
            start: 3584,
            pages: 3,
        });
        let r = OrderingQueue::init_stream(std::slice::from_ref(&dev), tiny).await;
        assert!(matches!(r, Err(DriverError::Invalid(_))), "{r:?}");
        let past = StreamParams::SINGLE.with_p_area(PArea {
            start: BLOCKS - 2,
            pages: 4,
        });
        let r = OrderingQueue::init_stream(std::slice::from_ref(&dev), past).await;
        assert!(matches!(r, Err(DriverError::Invalid(_))), "{r:?}");
    })
    .unwrap();
}

/// `n` in-place writes of blocks `20..20+n` from one thread with a p-area
/// of `slots` pages and no flush until the end: the p-area runs out and
/// the eager commit frees it. Returns the blocks' home tags after a final
/// flush and dequeue, and the number of home blocks already written back
/// before that flush.
fn eager(profile: &SsdProfile, slots: u64, n: u64) -> (Vec<Option<u64>>, usize) {
    let (ex, m, dev) = rig(2, profile);
    let m2 = m.clone();
    ex.block_on(async move {
        let q = OrderingQueue::init_stream(std::slice::from_ref(&dev), params(slots))
            .await
            .unwrap();
        let mut done = Vec::new();
        for i in 0..n {
            let bio = Bio::write(20 + i, vec![page(&m2, 100 + i)]);
            done.push(q.submit_bio_ipu(0, 0, &bio).await.unwrap());
        }
        for d in &done {
            assert!(dev.wait(0, d).await.is_success());
        }
        let mut early = 0;
        for i in 0..n {
            early += (home(&m2, &dev, 20 + i, &[100 + i]).await == Some(100 + i)) as usize;
        }
        q.flush(0).await.unwrap();
        q.dequeue(0).await.unwrap();
        assert_eq!(q.head(), q.tail());
        assert_eq!(q.free_slots(0), slots as usize);
        let mut out = Vec::new();
        for i in 0..n {
            out.push(home(&m2, &dev, 20 + i, &[100 + i]).await);
        }
        (out, early)
    })
    .unwrap()
}

#[test]
fn a_full_p_area_commits_eagerly_with_and_without_a_volatile_cache() {
    for profile in [SsdProfile::optane_905p(), SsdProfile::flash_vwc()] {
        let (homes, early) = eager(&profile, 3, 10);
        assert_eq!(
            homes,
            (0..10).map(|i| Some(100 + i)).collect::<Vec<_>>(),
            "{}",
            profile.name
        );
        assert!(
            early >= 6,
            "{}: {early} blocks committed before the flush",
            profile.name
        );
    }
}

// ---- crash states ----

/// One write of the crash workload, in queue order.
#[derive(Clone, Debug)]
struct Written {
    lba: u64,
    tag: u64,
    /// Trace length when a flush covering it returned.
    flushed_at: Option<usize>,
}

/// Epochs of one-block writes `(lba, in place)`, appended, then submitted
/// in reverse queue order, with a flush after some groups; blocks 10 and
/// 11 are overwritten in place several times, 12 and 13 are fresh. Each
/// write gets a tag of its own.
fn record(profile: &SsdProfile, slots: u64) -> (Machine, Vec<Written>) {
    let (ex, m, dev) = rig(9, profile);
    type Group = (Vec<Vec<(u64, bool)>>, bool, bool);
    // (epochs, wait for the writes, flush)
    let plan: Vec<Group> = vec![
        (vec![vec![(10, false), (11, false)]], true, true),
        (vec![vec![(10, true)], vec![(10, true), (11, true)]], true, true),
        (vec![vec![(11, true)], vec![(12, false), (10, true)]], true, false),
        (vec![vec![(10, true)], vec![(13, false)]], false, false),
    ];
    let m2 = m.clone();
    let written = ex
        .block_on(async move {
            let q = OrderingQueue::init_stream(std::slice::from_ref(&dev), params(slots))
                .await
                .unwrap();
            let mut written: Vec<Written> = Vec::new();
            for (group, wait, flush) in plan {
                let mut todo = Vec::new();
                for writes in group {
                    let ws: Vec<OrderedWrite> = writes
                        .iter()
                        .map(|&(lba, in_place)| OrderedWrite {
                            in_place,
                            ..OrderedWrite::fresh(lba, 1)
                        })
                        .collect();
                    let e = q.append_writes(0, &ws).await.unwrap();
                    for (i, &(lba, _)) in writes.iter().enumerate() {
                        let tag = written.len() as u64 + 1;
                        written.push(Written {
                            lba,
                            tag,
                            flushed_at: None,
                        });
                        todo.push((e.entry(i as u32).unwrap(), lba, tag));
                    }
                }
                let mut done = Vec::new();
                for &(id, lba, tag) in todo.iter().rev() {
                    done.push(
                        q.submit(0, id, &Bio::write(lba, vec![page(&m2, tag)]))
                            .await
                            .unwrap(),
                    );
                }
                if wait {
                    for d in &done {
                        assert!(dev.wait(0, d).await.is_success());
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

/// The blocks' tags after the first `k` writes.
fn prefix(written: &[Written], k: usize) -> BTreeMap<u64, u64> {
    let mut s: BTreeMap<u64, u64> = written.iter().map(|w| (w.lba, 0)).collect();
    for w in &written[..k] {
        s.insert(w.lba, w.tag);
    }
    s
}

/// What recovery left: each block's tag (a torn block is an error), and
/// the number of prepare writes recovery committed.
type Recovered = Result<(BTreeMap<u64, u64>, usize), String>;

/// Boots over `state` on the media `base`, recovers (with `faults` in the
/// recovering driver, the machine traced in `mode`) and reads the blocks
/// of `written`. `None` without a layout (nothing was formatted yet).
fn recover_blocks(
    profile: &SsdProfile,
    base: Arc<Image>,
    state: &DevicesState,
    written: &[Written],
    faults: DriverFaults,
    mode: TraceMode,
) -> (Machine, Option<Recovered>) {
    let k = state.point;
    let ex = Executor::new(1);
    let m = Machine::new(&ex, Default::default(), mode);
    boot_devices(&m, vec![ControllerConfig::new(profile.clone())], &[base], state).unwrap();
    let dev = common::probe_all(&ex, &m, 1, horae_opts(faults)).remove(0);
    let written = written.to_vec();
    let m2 = m.clone();
    let out = ex
        .block_on(async move {
            let rec = match horae::recover(&dev).await {
                Err(DriverError::NoLayout) => return None,
                r => r.unwrap_or_else(|e| panic!("crash after {k}: recovery failed: {e}")),
            };
            rec.discard_and_reset(&dev, 0).await.unwrap();
            let mut got = BTreeMap::new();
            for w in &written {
                if got.contains_key(&w.lba) {
                    continue;
                }
                let tags: Vec<u64> = written.iter().filter(|x| x.lba == w.lba).map(|x| x.tag).collect();
                match home(&m2, &dev, w.lba, &tags).await {
                    Some(t) => got.insert(w.lba, t),
                    None => return Some(Err(format!("crash after {k}: block {} torn", w.lba))),
                };
            }
            let again = horae::recover(&dev).await.unwrap();
            if !(again.discard.is_empty() && again.head == again.tail) {
                return Some(Err(format!("crash after {k}: recovery left {again:?}")));
            }
            Some(Ok((got, rec.commits().len())))
        })
        .unwrap();
    (m, out)
}

/// Recovers `state` (see [`recover_blocks`]) and checks that the blocks
/// hold exactly the first `j` writes for some `j` covering every write
/// flushed before the crash point. `Err` says how it failed.
fn check(
    profile: &SsdProfile,
    state: &DevicesState,
    written: &[Written],
    faults: DriverFaults,
) -> Result<(), String> {
    let k = state.point;
    let base = Arc::new(Image::zeroed(BLOCKS));
    let Some(r) = recover_blocks(profile, base, state, written, faults, TraceMode::Off).1 else {
        return Ok(());
    };
    let (got, _) = r?;
    let must = written
        .iter()
        .rposition(|w| w.flushed_at.is_some_and(|at| k + 1 >= at))
        .map_or(0, |i| i + 1);
    if !(must..=written.len()).any(|j| prefix(written, j) == got) {
        return Err(format!(
            "crash after {k}: blocks {got:?} are no prefix of the queue of at least {must} writes"
        ));
    }
    Ok(())
}

/// Explores every crash state of the recorded run; returns (states,
/// violations, the first violation).
fn explore(profile: SsdProfile, slots: u64, faults: DriverFaults) -> (usize, usize, Option<String>) {
    let (m, written) = record(&profile, slots);
    let trace = m.take_trace();
    let pmr = PageStore::zeroed(m.pmr_image(0).unwrap().len());
    let mut ex = DevicesExplorer::new(&trace, m.layout(), vec![pmr]).unwrap();
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
            if let Err(why) = check(&profile, &s, &written, faults) {
                bad += 1;
                first.get_or_insert(why);
            }
        }
    }
    eprintln!(
        "{} p-area {slots} {faults:?}: {} points, {states} distinct states, {bad} violations, {left} left out",
        profile.name,
        trace.entries().len()
    );
    (states, bad, first)
}

#[test]
fn every_crash_state_recovers_a_prefix_with_in_place_blocks_old_or_committed() {
    for profile in [SsdProfile::optane_905p(), SsdProfile::flash_vwc()] {
        for slots in [16, 3] {
            let (states, bad, first) = explore(profile.clone(), slots, DriverFaults::default());
            assert!(states > 20, "{states} states");
            assert_eq!(bad, 0, "{first:?}");
        }
    }
}

#[test]
fn recovery_without_the_redirection_commit_loses_durable_in_place_updates() {
    for profile in [SsdProfile::optane_905p(), SsdProfile::flash_vwc()] {
        let faults = DriverFaults {
            horae_no_redirect_commit: true,
            ..Default::default()
        };
        let (_, bad, first) = explore(profile, 16, faults);
        eprintln!("first violation: {first:?}");
        assert!(bad > 0, "the fault must be caught");
    }
}

/// Every crash state of recovery itself, over crash states whose recovery
/// commits prepare writes, recovers to what the uninterrupted recovery
/// gave: the commit is idempotent (until the head moves, the queue and the
/// p-area slots are as they were).
#[test]
fn a_crash_during_recovery_commit_recovers_the_same_blocks() {
    let profile = SsdProfile::flash_vwc();
    let (m, written) = record(&profile, 16);
    let trace = m.take_trace();
    let pmr = PageStore::zeroed(m.pmr_image(0).unwrap().len());
    let mut ex = DevicesExplorer::new(&trace, m.layout(), vec![pmr]).unwrap();
    let zero = Arc::new(Image::zeroed(BLOCKS));
    let (mut outer, mut inner, mut last) = (0, 0, None);
    let mut seen = std::collections::BTreeSet::new();
    for k in 0..ex.points() {
        let changes = ex.advance(k).unwrap();
        if last.as_ref() == Some(&changes) || outer >= 4 {
            continue;
        }
        last = Some(changes);
        let (choices, _) = ex.choices_at(k, 2, 2).unwrap();
        for c in &choices {
            let mut s = ex.build(k, c).unwrap();
            if outer >= 4 || !seen.insert(s.content_hash()) {
                continue;
            }
            let (rm, r) = recover_blocks(
                &profile,
                zero.clone(),
                &s,
                &written,
                DriverFaults::default(),
                TraceMode::Full,
            );
            let Some(Ok((want, commits))) = r else { continue };
            if commits < 2 {
                continue;
            }
            outer += 1;
            // Crash states of that recovery, from the crash state it began in.
            let rtrace = rm.take_trace();
            let blocks: std::collections::BTreeMap<u64, nvme_ctrl::Block> =
                s.media[0].iter().map(|(b, v)| (*b, v.clone())).collect();
            let base = Arc::new(Image::from_blocks(BLOCKS, blocks));
            let mut rex = DevicesExplorer::new(&rtrace, rm.layout(), vec![s.pmr[0].clone()]).unwrap();
            let mut rlast = None;
            for rk in 0..rex.points() {
                let ch = rex.advance(rk).unwrap();
                if rlast.as_ref() == Some(&ch) {
                    continue;
                }
                rlast = Some(ch);
                let (rchoices, _) = rex.choices_at(rk, 4, 4).unwrap();
                for rc in &rchoices {
                    let rs = rex.build(rk, rc).unwrap();
                    inner += 1;
                    let got = recover_blocks(
                        &profile,
                        base.clone(),
                        &rs,
                        &written,
                        DriverFaults::default(),
                        TraceMode::Off,
                    )
                    .1;
                    match got {
                        Some(Ok((g, _))) => {
                            assert_eq!(g, want, "crash after {k}, then after {rk} of recovery")
                        }
                        other => panic!("crash after {k}, then after {rk} of recovery: {other:?}"),
                    }
                }
            }
        }
    }
    eprintln!("{outer} crash states whose recovery commits, {inner} crash states of their recovery");
    assert!(outer >= 2 && inner > 50, "{outer} {inner}");
}
