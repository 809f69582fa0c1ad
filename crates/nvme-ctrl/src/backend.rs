//! The storage back end: parallel media units, the optional write cache
//! and its destage engines, and the media store.
//!
//! Units are timed analytically: each keeps the time it is next free, and
//! an operation starts at the later of now and that time. Writes are
//! placed as a page-mapped FTL places them: each 4 KiB block is programmed
//! on the unit that is free first (the next write point; NAND FTLs stripe
//! incoming writes over their dies in arrival order, whatever the LBAs), and
//! the unit is remembered for the block's reads (a block never written here
//! is read from unit `block % units`). So no pattern of LBAs can crowd one
//! unit while the others idle: threads writing the k-th block of files whose
//! starts differ by a multiple of the unit count used to queue on one unit
//! under the earlier static `block % units` placement. Deviation: for the
//! Optane drives, whose units are an abstraction (rated random-write IOPS
//! times program time) rather than their channels, the same rule is used;
//! their real LBA-to-channel interleaving is not published. Blocks on
//! different units proceed in parallel. With a cache, a write completes
//! once its blocks are in the cache, and one destage engine per unit takes
//! the next dirty block from one shared queue whenever its unit is free:
//! from the block's arrival ([`Destage::Eager`]), or only while something
//! waits for the media ([`Destage::OnDemand`]: a FLUSH, a FUA write, a
//! write that found the cache full). FLUSH waits until every block that
//! was dirty when it started is programmed; FUA writes through.
//!
//! Every block's arrival ([`events::DATA_IN`]) and programming
//! ([`events::MEDIA_WRITE`]) is recorded in the bus trace, which is what
//! the power-failure model of `power.rs` replays.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use pcie_sim::observe::{AccessLog, WHOLE};
use pcie_sim::{DevicePort, Sim, SimDuration, SimTime, TraceMode};
use tokio::sync::{Notify, Semaphore};

use crate::events;
use crate::media::{Block, Media, BLOCK};
use crate::profile::{Destage, SsdProfile};

struct CacheEntry {
    data: Block,
    version: u64,
    /// Trace sequence number of the DATA_IN event of this version.
    data_in: u64,
    /// Waiting in its unit's destage queue.
    queued: bool,
}

struct Cache {
    entries: RefCell<BTreeMap<u64, CacheEntry>>,
    /// Highest version of each block known to be on the media.
    durable: RefCell<BTreeMap<u64, u64>>,
    /// Dirty blocks waiting for a destage engine (urgent ones first).
    queue: RefCell<VecDeque<u64>>,
    /// Wakes an idle destage engine.
    work: Notify,
    space: Semaphore,
    destaged: Notify,
    /// When the engines program.
    policy: Destage,
    /// FLUSHes, FUA writes and writes short of space waiting for the
    /// engines ([`Destage::OnDemand`] programs only while this is above 0).
    demand: Cell<usize>,
}

impl Cache {
    /// Notes one more waiter for the media until the guard drops, and
    /// wakes the idle engines.
    fn demand(&self) -> Demand<'_> {
        self.demand.set(self.demand.get() + 1);
        self.work.notify_waiters();
        Demand(self)
    }

    /// True if an engine may program now.
    fn programs(&self) -> bool {
        self.policy == Destage::Eager || self.demand.get() > 0
    }
}

/// One waiter for the media ([`Cache::demand`]).
struct Demand<'a>(&'a Cache);

impl Drop for Demand<'_> {
    fn drop(&mut self) {
        self.0.demand.set(self.0.demand.get() - 1);
    }
}

/// Media, units and cache of one controller.
pub struct Backend {
    sim: Sim,
    port: DevicePort,
    media: RefCell<Media>,
    units: u32,
    program_time: SimDuration,
    read_time: SimDuration,
    unit_free: RefCell<Vec<SimTime>>,
    /// The unit each block was last programmed on (its reads go there).
    placed: RefCell<BTreeMap<u64, u32>>,
    cache: Option<Rc<Cache>>,
    /// Volatile Write Cache feature (NVMe 5.21.1.6): when off, every write
    /// waits for its blocks to be programmed.
    cache_enabled: Cell<bool>,
    next_version: Cell<u64>,
    /// Every block a write command has changed since attach.
    written: RefCell<std::collections::BTreeSet<u64>>,
    /// Every block read since [`Backend::log_reads`] before being written,
    /// in the order first read (`None`: not logging).
    read_log: RefCell<Option<AccessLog>>,
    /// The cache is power-loss protected.
    plp: bool,
    /// Write power-loss-protected blocks to the media store on arrival
    /// (see [`Backend::set_plp_write_through`]).
    plp_write_through: Cell<bool>,
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Backend")
            .field("units", &self.units)
            .field("cache", &self.cache.is_some())
            .finish()
    }
}

impl Backend {
    /// A back end over `media`, timed by `profile`; starts the destage
    /// engines if the profile has a cache.
    pub fn new(sim: Sim, port: DevicePort, profile: &SsdProfile, media: Media) -> Rc<Backend> {
        let units = profile.units.max(1);
        let cache = profile.write_cache.as_ref().map(|c| {
            Rc::new(Cache {
                entries: RefCell::new(BTreeMap::new()),
                durable: RefCell::new(BTreeMap::new()),
                queue: RefCell::new(VecDeque::new()),
                work: Notify::new(),
                space: Semaphore::new(c.blocks.max(1) as usize),
                destaged: Notify::new(),
                policy: c.destage,
                demand: Cell::new(0),
            })
        });
        let b = Rc::new(Backend {
            sim: sim.clone(),
            port,
            media: RefCell::new(media),
            units,
            program_time: profile.program_time,
            read_time: profile.read_time,
            unit_free: RefCell::new(vec![SimTime::ZERO; units as usize]),
            placed: RefCell::new(BTreeMap::new()),
            cache,
            cache_enabled: Cell::new(true),
            next_version: Cell::new(1),
            written: RefCell::new(Default::default()),
            read_log: RefCell::new(None),
            plp: profile
                .write_cache
                .as_ref()
                .is_some_and(|c| c.power_loss_protected),
            plp_write_through: Cell::new(false),
        });
        if b.cache.is_some() {
            for u in 0..units {
                let me = b.clone();
                sim.spawn(async move { me.destage_loop(u).await });
            }
        }
        b
    }

    /// Number of media blocks.
    pub fn blocks(&self) -> u64 {
        self.media.borrow().blocks()
    }

    /// True if the drive has a write cache.
    pub fn has_cache(&self) -> bool {
        self.cache.is_some()
    }

    /// Turns the write cache on or off (the VWC feature).
    pub fn set_cache_enabled(&self, on: bool) {
        self.cache_enabled.set(on);
    }

    /// Whether the write cache is on.
    pub fn cache_enabled(&self) -> bool {
        self.cache.is_some() && self.cache_enabled.get()
    }

    /// The unit holding `block` for reads: where it was last programmed,
    /// else `block % units`.
    fn unit_of(&self, block: u64) -> usize {
        match self.placed.borrow().get(&block) {
            Some(u) => *u as usize,
            None => (block % self.units as u64) as usize,
        }
    }

    /// The next write point: the unit free first (the lowest on a tie).
    /// The units' free times only grow, so a program issued later never
    /// ends before one issued earlier: of two writes of one block, the
    /// later one's data is the block's (the destage engines keep the same
    /// order: each takes the queue's next block when its unit is free).
    fn write_point(&self) -> usize {
        let now = self.sim.now();
        let free = self.unit_free.borrow();
        (0..free.len())
            .min_by_key(|u| (free[*u].max(now), *u))
            .unwrap_or(0)
    }

    /// Reserves `unit` to program `block` and records the block there (its
    /// reads go there, [`Backend::unit_of`]); returns when the program
    /// ends.
    fn program_on(&self, unit: usize, block: u64) -> SimTime {
        self.placed.borrow_mut().insert(block, unit as u32);
        self.reserve(unit, self.program_time)
    }

    /// Reserves `unit` for `d` starting no earlier than now; returns when
    /// the operation ends.
    fn reserve(&self, unit: usize, d: SimDuration) -> SimTime {
        let mut free = self.unit_free.borrow_mut();
        let start = free[unit].max(self.sim.now());
        free[unit] = start + d;
        start + d
    }

    fn record_data_in(&self, block: u64, data: &Block, attr: u32) -> u64 {
        let payload: &[u8] = if self.port.trace_mode() == TraceMode::Full {
            &data[..]
        } else {
            &[]
        };
        self.port
            .record(events::DATA_IN, block, BLOCK as u32, payload, attr)
    }

    /// With a power-loss-protected cache, a block is durable the moment it
    /// enters the cache (its capacitors destage it at a power failure), but
    /// the media store only sees it when a destage engine programs it. With
    /// `on`, every block is also written to the media store when it enters
    /// the cache, and destaging leaves the store alone (it already holds
    /// that version or a newer one), so a file-backed media holds every
    /// durable block at all times, even if the process dies. Timing, reads
    /// and the trace are unchanged; without such a cache this does nothing.
    pub fn set_plp_write_through(&self, on: bool) {
        self.plp_write_through.set(on);
    }

    fn writes_through(&self) -> bool {
        self.plp && self.plp_write_through.get()
    }

    fn program(&self, block: u64, data: &Block, data_in: u64, attr: u32) {
        if !self.writes_through() {
            self.media.borrow_mut().write(block, data);
        }
        let payload: &[u8] = if self.port.trace_mode() == TraceMode::Full {
            &data[..]
        } else {
            &[]
        };
        self.port
            .record_sharing(events::MEDIA_WRITE, block, BLOCK as u32, data_in, payload, attr);
    }

    /// Takes the new content of `blocks` (already transferred from the
    /// host). Returns when the write may complete: when the blocks are in
    /// the cache, or, with `fua` or without a cache, when they are on the
    /// media.
    pub async fn write(&self, blocks: Vec<(u64, Block)>, fua: bool, attr: u32) {
        self.written.borrow_mut().extend(blocks.iter().map(|(b, _)| *b));
        if let Some(log) = self.read_log.borrow_mut().as_mut() {
            for (b, _) in &blocks {
                log.write(*b, WHOLE);
            }
        }
        match &self.cache {
            Some(cache) if self.cache_enabled.get() => {
                let mut waits = Vec::new();
                for (b, data) in blocks {
                    let v = self.insert(cache, b, data, fua, attr).await;
                    waits.push((b, v));
                }
                if fua {
                    let _d = cache.demand();
                    self.wait_durable(cache, &waits).await;
                }
            }
            Some(cache) => {
                // Cache present but disabled: write through it.
                let mut waits = Vec::new();
                for (b, data) in blocks {
                    let v = self.insert(cache, b, data, true, attr).await;
                    waits.push((b, v));
                }
                let _d = cache.demand();
                self.wait_durable(cache, &waits).await;
            }
            None => self.program_direct(blocks, attr).await,
        }
    }

    async fn program_direct(&self, blocks: Vec<(u64, Block)>, attr: u32) {
        let mut plan: Vec<(SimTime, u64, Block, u64)> = blocks
            .into_iter()
            .map(|(b, data)| {
                let seq = self.record_data_in(b, &data, attr);
                let done = self.program_on(self.write_point(), b);
                (done, b, data, seq)
            })
            .collect();
        plan.sort_by_key(|p| p.0);
        for (done, b, data, seq) in plan {
            self.sim.sleep_until(done).await;
            self.program(b, &data, seq, attr);
        }
    }

    async fn insert(&self, cache: &Rc<Cache>, b: u64, data: Block, urgent: bool, attr: u32) -> u64 {
        let present = cache.entries.borrow().contains_key(&b);
        if !present {
            // The permit is held by the cache entry until it is destaged
            // clean; `destage_loop` returns it with `add_permits`. A full
            // cache makes the engines program for it.
            let _d = (cache.space.available_permits() == 0).then(|| cache.demand());
            match cache.space.acquire().await {
                Ok(permit) => permit.forget(),
                Err(_) => unreachable!("the cache space semaphore is never closed"),
            }
        }
        let v = self.next_version.get();
        self.next_version.set(v + 1);
        let seq = self.record_data_in(b, &data, attr);
        if self.writes_through() {
            self.media.borrow_mut().write(b, &data);
        }
        let mut entries = cache.entries.borrow_mut();
        let e = entries.entry(b).or_insert(CacheEntry {
            data: data.clone(),
            version: v,
            data_in: seq,
            queued: false,
        });
        e.data = data;
        e.version = v;
        e.data_in = seq;
        let mut queue = cache.queue.borrow_mut();
        if urgent {
            queue.retain(|x| *x != b);
            queue.push_front(b);
            e.queued = true;
        } else if !e.queued {
            queue.push_back(b);
            e.queued = true;
        }
        drop(queue);
        drop(entries);
        cache.work.notify_one();
        v
    }

    async fn wait_durable(&self, cache: &Rc<Cache>, waits: &[(u64, u64)]) {
        loop {
            let done = {
                let durable = cache.durable.borrow();
                waits.iter().all(|(b, v)| durable.get(b).is_some_and(|d| d >= v))
            };
            if done {
                return;
            }
            cache.destaged.notified().await;
        }
    }

    async fn destage_loop(self: Rc<Self>, unit: u32) {
        let Some(cache) = self.cache.clone() else {
            return;
        };
        let u = unit as usize;
        loop {
            let next = if cache.programs() {
                cache.queue.borrow_mut().pop_front()
            } else {
                None
            };
            let Some(b) = next else {
                cache.work.notified().await;
                continue;
            };
            let (data, version, data_in, attr) = {
                let mut entries = cache.entries.borrow_mut();
                let Some(e) = entries.get_mut(&b) else {
                    continue;
                };
                e.queued = false;
                (e.data.clone(), e.version, e.data_in, 0u32)
            };
            let done = self.program_on(u, b);
            self.sim.sleep_until(done).await;
            self.program(b, &data, data_in, attr);
            cache.durable.borrow_mut().insert(b, version);
            let mut entries = cache.entries.borrow_mut();
            let clean = entries.get(&b).is_some_and(|e| e.version == version);
            if clean {
                entries.remove(&b);
                drop(entries);
                cache.space.add_permits(1);
            }
            cache.destaged.notify_waiters();
        }
    }

    /// Reads `blocks`: each from the cache if it holds a newer version,
    /// else from the media after a unit read (units work in parallel).
    pub async fn read_blocks(&self, blocks: &[u64]) -> Vec<Block> {
        if let Some(log) = self.read_log.borrow_mut().as_mut() {
            for &b in blocks {
                log.read(b, WHOLE);
            }
        }
        let mut out: Vec<Option<Block>> = vec![None; blocks.len()];
        let mut until = self.sim.now();
        for (i, b) in blocks.iter().enumerate() {
            if let Some(cache) = &self.cache {
                if let Some(e) = cache.entries.borrow().get(b) {
                    out[i] = Some(e.data.clone());
                    continue;
                }
            }
            until = until.max(self.reserve(self.unit_of(*b), self.read_time));
        }
        self.sim.sleep_until(until).await;
        let media = self.media.borrow();
        out.into_iter()
            .zip(blocks)
            .map(|(o, b)| o.unwrap_or_else(|| media.block(*b)))
            .collect()
    }

    /// Makes every write that completed before now durable (NVMe Flush).
    pub async fn flush(&self) {
        let Some(cache) = &self.cache else {
            return;
        };
        let waits: Vec<(u64, u64)> = cache
            .entries
            .borrow()
            .iter()
            .map(|(b, e)| (*b, e.version))
            .collect();
        let _d = cache.demand();
        self.wait_durable(cache, &waits).await;
    }

    /// Number of blocks in the cache not yet on the media.
    pub fn dirty_blocks(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.entries.borrow().len())
    }

    /// Makes file-backed media durable on the host.
    pub fn sync(&self) -> Result<(), crate::error::CtrlError> {
        self.media.borrow().sync()
    }

    /// Starts logging the blocks read (every block a read reaches, from
    /// the cache or the media, or [`nvme_spec::BlockSource`]
    /// reads) before a write command wrote them: a crash checker learns
    /// what it looked at ([`pcie_sim::observe`]). Logging costs a set insert
    /// per block, so it is off until asked for.
    pub fn log_reads(&self) {
        *self.read_log.borrow_mut() = Some(Default::default());
    }

    /// [`Backend::log_reads`], stamping each first read from `clock`,
    /// shared with the other drives of the machine, so that the reads of
    /// all of them can be merged in the order they happened
    /// ([`AccessLog::stamps`]).
    pub fn log_reads_on(&self, clock: pcie_sim::observe::ReadClock) {
        *self.read_log.borrow_mut() = Some(AccessLog::stamped(clock));
    }

    /// The access log since [`Backend::log_reads`] or the last take;
    /// logging goes on with a fresh log (on the same clock). `None` if not
    /// logging.
    pub fn take_reads(&self) -> Option<AccessLog> {
        self.read_log.borrow_mut().as_mut().map(AccessLog::take)
    }

    /// Notes a read of `block` that bypasses [`Backend::read_blocks`] (a
    /// checker reading the drive directly).
    pub(crate) fn note_read(&self, block: u64) {
        if let Some(log) = self.read_log.borrow_mut().as_mut() {
            log.read(block, WHOLE);
        }
    }

    /// Every block written since the controller attached, in order.
    pub fn written(&self) -> Vec<u64> {
        self.written.borrow().iter().copied().collect()
    }

    /// The current content of block `b` as the drive would return it (the
    /// cache if it holds a newer version, else the media), without timing
    /// (for checkers that inspect a drive's state).
    pub fn peek(&self, b: u64, buf: &mut [u8; BLOCK]) {
        if let Some(cache) = &self.cache {
            if let Some(e) = cache.entries.borrow().get(&b) {
                buf.copy_from_slice(&e.data[..]);
                return;
            }
        }
        self.media.borrow().read(b, buf);
    }

    /// Direct access to the media store (for tests and tools; bypasses
    /// timing and the cache).
    pub fn media(&self) -> std::cell::Ref<'_, Media> {
        self.media.borrow()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcie_sim::testing::RegisterFile;
    use pcie_sim::{Executor, Machine, MachineProfile};
    use std::sync::Arc;

    /// Writes two versions of block 5 and one of block 6 to a drive with a
    /// power-loss-protected cache; returns the media store's block 5 and 6
    /// right after the writes complete and after destaging, and the trace
    /// hash.
    fn run(write_through: bool) -> ([u8; 2], [u8; 2], u64) {
        let ex = Executor::new(3);
        let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Full);
        let port = m.add_device(RegisterFile::layout(None), None);
        let profile = SsdProfile::intel_750();
        let b = Backend::new(m.sim(), port, &profile, Media::memory(64));
        b.set_plp_write_through(write_through);
        let first = |b: &Backend| {
            let mut out = [0u8; 2];
            for (i, blk) in [5u64, 6].iter().enumerate() {
                let mut buf = [0u8; BLOCK];
                b.media().read(*blk, &mut buf);
                out[i] = buf[0];
            }
            out
        };
        let b2 = b.clone();
        ex.block_on(async move {
            b2.write(vec![(5, Arc::new([1u8; BLOCK]))], false, 0).await;
            b2.write(
                vec![(5, Arc::new([2u8; BLOCK])), (6, Arc::new([3u8; BLOCK]))],
                false,
                0,
            )
            .await;
        })
        .unwrap();
        let on_arrival = first(&b);
        ex.run();
        let hash = m.trace().hash();
        (on_arrival, first(&b), hash)
    }

    #[test]
    fn plp_write_through_puts_blocks_in_the_store_on_arrival_without_changing_the_run() {
        let (arrived, destaged, hash) = run(false);
        assert_eq!(
            arrived,
            [0, 0],
            "by default the store sees a block when it is programmed"
        );
        assert_eq!(destaged, [2, 3]);
        let (arrived, destaged, hash_wt) = run(true);
        assert_eq!(
            arrived,
            [2, 3],
            "write-through: durable blocks are in the store at once"
        );
        assert_eq!(destaged, [2, 3], "destaging an older version does not go back");
        assert_eq!(hash, hash_wt, "timing and trace unchanged");
    }

    /// A back end of `profile` on a fresh machine.
    fn backend(profile: &SsdProfile) -> (Executor, Rc<Backend>) {
        let ex = Executor::new(3);
        let m = Machine::new(&ex, MachineProfile::default(), TraceMode::Off);
        let port = m.add_device(RegisterFile::layout(None), None);
        let b = Backend::new(m.sim(), port, profile, Media::memory(256));
        (ex, b)
    }

    /// The FTL's write point: one write of `units` blocks whose numbers
    /// are all equal modulo the unit count takes one program time, not
    /// `units` of them (the static `block % units` placement queued them
    /// all on one unit), and reads find each block on the unit it went to.
    #[test]
    fn blocks_equal_modulo_the_units_are_programmed_in_parallel() {
        let profile = SsdProfile::optane_905p();
        assert!(profile.write_cache.is_none());
        let n = u64::from(profile.units);
        let (ex, b) = backend(&profile);
        let b2 = b.clone();
        let took = ex
            .block_on(async move {
                let t0 = b2.sim.now();
                let blocks = (0..n).map(|i| (i * n, Arc::new([i as u8 + 1; BLOCK]))).collect();
                b2.write(blocks, false, 0).await;
                let wrote = b2.sim.now() - t0;
                let t1 = b2.sim.now();
                let got = b2.read_blocks(&(0..n).map(|i| i * n).collect::<Vec<_>>()).await;
                (wrote, b2.sim.now() - t1, got)
            })
            .unwrap();
        let (wrote, read, got) = took;
        assert_eq!(wrote, profile.program_time, "one program time for all");
        assert_eq!(read, profile.read_time, "each read on its own unit");
        for (i, blk) in got.iter().enumerate() {
            assert_eq!(blk[0], i as u8 + 1);
        }
    }

    /// A block written again while its first program is under way ends
    /// with the second write's data, with or without a cache: the second
    /// program, on another unit, ends after the first.
    #[test]
    fn a_block_rewritten_during_its_program_keeps_the_later_data() {
        for profile in [SsdProfile::optane_905p(), SsdProfile::intel_750()] {
            let (ex, b) = backend(&profile);
            let b2 = b.clone();
            let sim = b.sim.clone();
            ex.block_on(async move {
                let first = {
                    let b = b2.clone();
                    sim.spawn(async move { b.write(vec![(7, Arc::new([1u8; BLOCK]))], false, 0).await })
                };
                // The first write is issued; then another block takes the
                // next write point and block 7 is written again.
                sim.sleep(SimDuration::from_ns(100)).await;
                b2.write(
                    vec![(9, Arc::new([9u8; BLOCK])), (7, Arc::new([2u8; BLOCK]))],
                    false,
                    0,
                )
                .await;
                let _ = first.await;
            })
            .unwrap();
            ex.run();
            let mut buf = [0u8; BLOCK];
            b.media().read(7, &mut buf);
            assert_eq!(buf[0], 2, "{}: the later write's data", profile.name);
        }
    }

    /// A drive that programs on demand keeps a written block in its cache
    /// (not on the media) however long it idles, and a FLUSH then pays the
    /// program; a drive that programs eagerly has it on the media by then
    /// and flushes at once. A cache filling up makes the on-demand drive
    /// program without a FLUSH.
    #[test]
    fn an_on_demand_cache_programs_at_the_flush() {
        for destage in [Destage::OnDemand, Destage::Eager] {
            let mut profile = SsdProfile::samsung_860_pro();
            if let Some(c) = profile.write_cache.as_mut() {
                c.destage = destage;
            }
            let program = profile.program_time;
            let (ex, b) = backend(&profile);
            let (b2, sim) = (b.clone(), b.sim.clone());
            let (dirty, took) = ex
                .block_on(async move {
                    b2.write(vec![(7, Arc::new([1u8; BLOCK]))], false, 0).await;
                    sim.sleep(SimDuration::from_ms(50)).await;
                    let dirty = b2.dirty_blocks();
                    let t0 = sim.now();
                    b2.flush().await;
                    (dirty, sim.now() - t0)
                })
                .unwrap();
            let mut buf = [0u8; BLOCK];
            b.media().read(7, &mut buf);
            assert_eq!(buf[0], 1, "{destage:?}: durable after the FLUSH");
            match destage {
                Destage::OnDemand => {
                    assert_eq!(dirty, 1, "held in the cache until asked");
                    assert!(took >= program, "the FLUSH paid the program: {took:?}");
                }
                Destage::Eager => {
                    assert_eq!(dirty, 0, "programmed in the background");
                    assert!(
                        took.as_ps() < program.as_ps() / 10,
                        "nothing left to program: {took:?}"
                    );
                }
            }
        }
        // More writes than the cache holds, no FLUSH: the on-demand drive
        // programs to make room.
        let profile = SsdProfile::samsung_860_pro();
        let cap = profile.write_cache.as_ref().map_or(0, |c| c.blocks);
        let (ex, b) = backend(&profile);
        let b2 = b.clone();
        ex.block_on(async move {
            for i in 0..cap + 8 {
                b2.write(vec![(i % 256, Arc::new([2u8; BLOCK]))], false, 0).await;
            }
        })
        .unwrap();
        assert!(b.dirty_blocks() as u64 <= cap, "{} dirty", b.dirty_blocks());
    }
}
