//! The deterministic single-threaded executor that runs every simulated actor.
//!
//! Each actor (a host thread, a controller engine, a link direction) is an
//! async task. A task runs until it awaits something; it is woken either by a
//! timer ([`Sim::sleep_until`]) or by another task (through a [`Waker`]). Every
//! wake-up is queued with the simulated time at which it is due and a global
//! sequence number, and tasks run strictly in `(time, sequence)` order. Nothing
//! here reads the wall clock, and the only randomness is the seeded RNG owned
//! by the simulation, so the same program and seed always produce the same
//! schedule.
//!
//! [`Executor`] owns the tasks; [`Sim`] is a cheap handle that tasks keep to
//! read the clock, sleep, spawn and draw random numbers. Dropping the
//! `Executor` drops every task, which breaks the reference cycles between
//! tasks and the handles they hold.

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::time::{SimDuration, SimTime};

type BoxFuture = Pin<Box<dyn Future<Output = ()>>>;

/// Identifies a task: slot index in the low 32 bits, slot generation above.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId(u64);

impl TaskId {
    fn new(slot: usize, generation: u32) -> Self {
        TaskId(((generation as u64) << 32) | slot as u64)
    }
    fn slot(self) -> usize {
        (self.0 & 0xffff_ffff) as usize
    }
    fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }
}

/// What a run-queue entry wakes: a task, or a timed event for a sink.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Wakeup {
    Task(TaskId),
    Event { sink: u32, token: u32 },
}

/// Bits of a heap key that name the wake-up's slot in [`RunQueue::slab`].
const SLOT_BITS: u32 = 24;
/// Bits of a heap key left for the sequence number.
const SEQ_BITS: u32 = 64 - SLOT_BITS;

/// A run-queue entry: a wake-up due at `key >> 64` (ps) with sequence
/// number `(key as u64) >> SLOT_BITS`. Sequence numbers are unique, so
/// ordering by the packed key alone is exactly the `(time, sequence)`
/// order; one `u128` comparison is cheaper than comparing a tuple in the
/// heap's sift loops. The low [`SLOT_BITS`] are zero here; a key in the
/// heap carries its wake-up's slot there (see [`RunQueue`]).
#[derive(Clone, Copy, Debug)]
struct Queued {
    key: u128,
    wakeup: Wakeup,
}

impl Queued {
    fn new(at_ps: u64, seq: u64, wakeup: Wakeup) -> Self {
        assert!(
            seq < 1 << SEQ_BITS,
            "more than 2^{SEQ_BITS} wake-ups scheduled in one simulation"
        );
        Queued {
            key: ((at_ps as u128) << 64) | ((seq as u128) << SLOT_BITS),
            wakeup,
        }
    }
    fn at_ps(&self) -> u64 {
        (self.key >> 64) as u64
    }
}

/// The run queue: wake-ups in `(time, sequence)` order.
///
/// Most wake-ups are due at the current time (a waker fired, a task
/// spawned, a bus effect with no delay). Those go to a FIFO instead of the
/// heap: they are pushed in sequence order, and every one of them is due
/// at the current time, so the FIFO is already sorted, and its front is
/// ordered against the heap's least entry by the same packed key. Nothing
/// is ever queued for a time before the current one, and the clock only
/// moves on when the FIFO is empty (its entries, due now, come before any
/// later one), so the FIFO never holds an entry of an earlier time. The
/// order of wake-ups is exactly the heap-only order, at a fraction of the
/// heap's sift work.
///
/// The heap holds 16-byte keys only, each naming its wake-up's slot in
/// `slab` in its low [`SLOT_BITS`] (below the sequence number, so the slot
/// never decides the order): a sift moves half the bytes it would move
/// with the wake-up inline.
#[derive(Default)]
struct RunQueue {
    /// Keys of the wake-ups due after the time they were queued at.
    later: BinaryHeap<Reverse<u128>>,
    /// The wake-ups of `later`, by slot.
    slab: Vec<Wakeup>,
    /// Slots of `slab` free for reuse.
    free: Vec<u32>,
    /// Wake-ups due at the time they were queued at (the current time), in
    /// sequence order.
    now: VecDeque<Queued>,
}

impl RunQueue {
    /// Queues `q`; `now` is the current simulated time (`q` is not due
    /// before it).
    fn push(&mut self, now: SimTime, q: Queued) {
        debug_assert!(q.at_ps() >= now.0, "a wake-up queued for a time already past");
        if q.at_ps() == now.0 {
            debug_assert!(
                self.now.back().is_none_or(|b| b.key < q.key),
                "wake-ups due now are queued in sequence order at one time"
            );
            self.now.push_back(q);
        } else {
            let slot = match self.free.pop() {
                Some(s) => {
                    self.slab[s as usize] = q.wakeup;
                    s
                }
                None => {
                    let s = self.slab.len() as u32;
                    assert!(
                        s < 1 << SLOT_BITS,
                        "more than 2^{SLOT_BITS} timed wake-ups pending at once"
                    );
                    self.slab.push(q.wakeup);
                    s
                }
            };
            self.later.push(Reverse(q.key | slot as u128));
        }
    }

    /// Takes the next wake-up in `(time, sequence)` order, if one is due
    /// at or before `limit`.
    fn pop_due(&mut self, limit: Option<SimTime>) -> Option<Queued> {
        let (from_now, key) = match (self.now.front(), self.later.peek()) {
            (None, None) => return None,
            (Some(n), Some(Reverse(l))) if n.key < *l => (true, n.key),
            (_, Some(Reverse(l))) => (false, *l),
            (Some(n), None) => (true, n.key),
        };
        if limit.is_some_and(|l| (key >> 64) as u64 > l.0) {
            return None;
        }
        if from_now {
            return self.now.pop_front();
        }
        self.later.pop();
        let slot = (key as u64 & ((1 << SLOT_BITS) - 1)) as u32;
        self.free.push(slot);
        Some(Queued {
            key: key & !((1u128 << SLOT_BITS) - 1),
            wakeup: self.slab[slot as usize],
        })
    }

    fn is_empty(&self) -> bool {
        self.now.is_empty() && self.later.is_empty()
    }

    fn clear(&mut self) {
        self.now.clear();
        self.later.clear();
        self.slab.clear();
        self.free.clear();
    }
}

/// Receives timed events scheduled with [`Sim::schedule_event`]: a cheaper
/// alternative to a task for effects that need no state across awaits
/// (the bus uses it to apply each request when it takes effect).
pub trait EventSink {
    /// The event with `token` is due now.
    fn fire(&self, token: u32);

    /// The executor is being dropped: release anything that could keep a
    /// reference cycle alive (devices holding handles to the sink).
    fn teardown(&self) {}
}

/// Identifies a registered [`EventSink`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SinkId(u32);

/// Wake-ups requested through `Waker`s, drained by the run loop after each poll.
#[derive(Default)]
struct WakeList {
    ids: Mutex<Vec<TaskId>>,
    /// True when `ids` may be non-empty (lets the run loop skip the lock).
    dirty: AtomicBool,
}

struct TaskWaker {
    id: TaskId,
    list: Arc<WakeList>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        // The executor is single-threaded; the lock is never contended, and
        // it is held only for a push or a swap, which cannot panic midway.
        match self.list.ids.lock() {
            Ok(mut ids) => ids.push(self.id),
            Err(_) => unreachable!("the wake list lock is never poisoned"),
        }
        self.list.dirty.store(true, Ordering::Release);
    }
}

struct TaskSlot {
    generation: u32,
    future: Option<BoxFuture>,
    waker: Option<Rc<Waker>>,
    /// True while a wake-up for this task sits in the run queue.
    queued: bool,
}

struct Inner {
    now: Cell<SimTime>,
    seq: Cell<u64>,
    /// Pending wake-ups: (due time in ps, sequence, task).
    queue: RefCell<RunQueue>,
    sinks: RefCell<Vec<Rc<dyn EventSink>>>,
    slots: RefCell<Vec<TaskSlot>>,
    free_slots: RefCell<Vec<usize>>,
    live_tasks: Cell<usize>,
    wake_list: Arc<WakeList>,
    /// The run loop's buffer for the ids it takes from `wake_list`.
    draining: Cell<Vec<TaskId>>,
    current: Cell<Option<TaskId>>,
    polls: Cell<u64>,
    rng: RefCell<ChaCha8Rng>,
}

/// A handle to the running simulation: clock, timers, spawning and the RNG.
#[derive(Clone)]
pub struct Sim {
    inner: Rc<Inner>,
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim").field("now", &self.now()).finish()
    }
}

/// Owns a simulation's tasks and runs them.
#[derive(Debug)]
pub struct Executor {
    sim: Sim,
}

/// Why [`Executor::block_on`] could not return the future's output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// Nothing is scheduled any more but the awaited task has not finished:
    /// every remaining task waits on something that will never happen.
    #[error("simulation deadlocked at {0}: no task is scheduled and the awaited task is blocked")]
    Deadlock(SimTime),
    /// The time limit passed before the awaited task finished.
    #[error("simulation reached its time limit at {0} before the awaited task finished")]
    TimeLimit(SimTime),
}

impl Executor {
    /// A new simulation at time zero whose RNG is seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        let inner = Inner {
            now: Cell::new(SimTime::ZERO),
            seq: Cell::new(0),
            queue: RefCell::new(RunQueue::default()),
            sinks: RefCell::new(Vec::new()),
            slots: RefCell::new(Vec::new()),
            free_slots: RefCell::new(Vec::new()),
            live_tasks: Cell::new(0),
            wake_list: Arc::new(WakeList::default()),
            draining: Cell::new(Vec::new()),
            current: Cell::new(None),
            polls: Cell::new(0),
            rng: RefCell::new(ChaCha8Rng::seed_from_u64(seed)),
        };
        Executor {
            sim: Sim {
                inner: Rc::new(inner),
            },
        }
    }

    /// A handle for tasks and devices.
    pub fn sim(&self) -> Sim {
        self.sim.clone()
    }

    /// Runs until no wake-up is scheduled.
    pub fn run(&self) {
        self.drain_wakes();
        while self.step(None) {}
    }

    /// Runs every wake-up due at or before `deadline`, then sets the clock to
    /// `deadline` (if it is later than the last event).
    pub fn run_until(&self, deadline: SimTime) {
        self.drain_wakes();
        while self.step(Some(deadline)) {}
        if self.sim.now() < deadline {
            self.sim.inner.now.set(deadline);
        }
    }

    /// Spawns `fut` and runs the simulation until it finishes.
    pub fn block_on<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> Result<T, RunError> {
        self.block_on_until(fut, None)
    }

    /// Like [`Executor::block_on`], but gives up at simulated time `limit`.
    pub fn block_on_until<T: 'static>(
        &self,
        fut: impl Future<Output = T> + 'static,
        limit: Option<SimTime>,
    ) -> Result<T, RunError> {
        self.drain_wakes();
        let handle = self.sim.spawn(fut);
        loop {
            if let Some(v) = handle.try_take() {
                return Ok(v);
            }
            if !self.step(limit) {
                if let Some(v) = handle.try_take() {
                    return Ok(v);
                }
                return Err(match limit {
                    Some(l) if !self.sim.inner.queue.borrow().is_empty() => RunError::TimeLimit(l),
                    _ => RunError::Deadlock(self.sim.now()),
                });
            }
        }
    }

    /// Runs one wake-up. Returns false when none is due (at or before `limit`).
    ///
    /// The wakes the wake-up requested are drained into the run queue
    /// before it returns. Wakes requested outside the run loop (before a
    /// run, or between two) are drained once when a run starts
    /// ([`Executor::run`], [`Executor::run_until`],
    /// [`Executor::block_on_until`]): nothing else can wake a task between
    /// two steps, so one drain per step keeps every wake-up's sequence
    /// number.
    fn step(&self, limit: Option<SimTime>) -> bool {
        let inner = &self.sim.inner;
        let Some(Queued { key, wakeup }) = inner.queue.borrow_mut().pop_due(limit) else {
            return false;
        };
        let t = (key >> 64) as u64;
        if t > inner.now.get().0 {
            inner.now.set(SimTime(t));
        }
        match wakeup {
            Wakeup::Task(id) => self.poll_task(id),
            Wakeup::Event { sink, token } => {
                let s = inner.sinks.borrow().get(sink as usize).cloned();
                match s {
                    Some(s) => s.fire(token),
                    // Sinks are only removed when the executor is dropped,
                    // which also empties the run queue.
                    None => unreachable!("an event for sink {sink} that was never registered"),
                }
            }
        }
        self.drain_wakes();
        true
    }

    fn poll_task(&self, id: TaskId) {
        let inner = &self.sim.inner;
        let (mut fut, waker) = {
            let mut slots = inner.slots.borrow_mut();
            // Slots are never removed, only reused with a new generation.
            let Some(slot) = slots.get_mut(id.slot()) else {
                unreachable!("task {id:?} names a slot that was never allocated");
            };
            if slot.generation != id.generation() {
                return; // stale wake-up for a finished task
            }
            slot.queued = false;
            // A live task's slot holds its future and waker, except while it
            // is being polled, and polls do not nest (a task cannot run the
            // executor).
            let Some(fut) = slot.future.take() else {
                unreachable!("live task {id:?} has no future: polled re-entrantly");
            };
            let Some(waker) = slot.waker.clone() else {
                unreachable!("live task {id:?} has no waker");
            };
            (fut, waker)
        };
        inner.current.set(Some(id));
        inner.polls.set(inner.polls.get() + 1);
        let mut cx = Context::from_waker(&waker);
        let done = fut.as_mut().poll(&mut cx).is_ready();
        inner.current.set(None);
        let mut slots = inner.slots.borrow_mut();
        let Some(slot) = slots.get_mut(id.slot()) else {
            unreachable!("task {id:?}'s slot vanished while it was polled");
        };
        if done {
            slot.generation = slot.generation.wrapping_add(1);
            slot.waker = None;
            slot.queued = false;
            inner.free_slots.borrow_mut().push(id.slot());
            debug_assert!(inner.live_tasks.get() > 0, "a task finished but none was live");
            inner.live_tasks.set(inner.live_tasks.get() - 1);
        } else {
            slot.future = Some(fut);
        }
        drop(slots);
        // A finished future may own handles whose drop wakes other tasks; it
        // is dropped here, after the slot table is released.
    }

    /// Moves wake-ups requested through wakers into the run queue at `now`.
    #[inline(always)]
    fn drain_wakes(&self) {
        if self.sim.inner.wake_list.dirty.load(Ordering::Relaxed) {
            self.drain_woken();
        }
    }

    /// [`Executor::drain_wakes`] when the wake list may hold ids.
    #[inline(never)]
    fn drain_woken(&self) {
        let inner = &self.sim.inner;
        if !inner.wake_list.dirty.swap(false, Ordering::Acquire) {
            return;
        }
        // The woken ids are swapped into a buffer of the run loop's own
        // (one lock, no allocation): scheduling them may wake others, which
        // go to the list again and are drained by the next call.
        let mut ids = inner.draining.take();
        match inner.wake_list.ids.lock() {
            Ok(mut list) => std::mem::swap(&mut *list, &mut ids),
            Err(_) => unreachable!("the wake list lock is never poisoned"),
        }
        for id in &ids {
            inner.schedule(*id, inner.now.get());
        }
        ids.clear();
        inner.draining.set(ids);
    }

    /// Number of task polls so far (a measure of simulation work).
    pub fn polls(&self) -> u64 {
        self.sim.inner.polls.get()
    }

    /// Number of tasks that have not finished.
    pub fn live_tasks(&self) -> usize {
        self.sim.inner.live_tasks.get()
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        // Drop every task's future, outside the borrow: futures hold `Sim`
        // handles, and this breaks the cycle so the simulation is freed.
        let futures: Vec<BoxFuture> = self
            .sim
            .inner
            .slots
            .borrow_mut()
            .iter_mut()
            .filter_map(|s| {
                s.waker = None;
                s.future.take()
            })
            .collect();
        drop(futures);
        self.sim.inner.queue.borrow_mut().clear();
        let sinks = std::mem::take(&mut *self.sim.inner.sinks.borrow_mut());
        for s in &sinks {
            s.teardown();
        }
        drop(sinks);
    }
}

impl Inner {
    fn next_seq(&self) -> u64 {
        let s = self.seq.get();
        self.seq.set(s + 1);
        s
    }

    fn schedule(&self, id: TaskId, at: SimTime) {
        let mut slots = self.slots.borrow_mut();
        let Some(slot) = slots.get_mut(id.slot()) else {
            unreachable!("task {id:?} names a slot that was never allocated");
        };
        if slot.generation != id.generation() || slot.queued {
            return;
        }
        slot.queued = true;
        drop(slots);
        let seq = self.next_seq();
        self.queue
            .borrow_mut()
            .push(self.now.get(), Queued::new(at.0, seq, Wakeup::Task(id)));
    }

    /// A timer wake-up: always queued, even if a wake is already pending, so
    /// that the task is polled again at `at`.
    fn schedule_timer(&self, id: TaskId, at: SimTime) {
        let seq = self.next_seq();
        self.queue
            .borrow_mut()
            .push(self.now.get(), Queued::new(at.0, seq, Wakeup::Task(id)));
    }
}

impl Sim {
    /// The current simulated time.
    #[inline]
    pub fn now(&self) -> SimTime {
        self.inner.now.get()
    }

    /// Starts `fut` as a new task; it first runs at the current time, after
    /// everything already scheduled for now.
    pub fn spawn<T: 'static>(&self, fut: impl Future<Output = T> + 'static) -> JoinHandle<T> {
        let state = Rc::new(JoinState {
            value: RefCell::new(None),
            done: Cell::new(false),
            waiter: RefCell::new(None),
        });
        let st = state.clone();
        let wrapped = async move {
            let v = fut.await;
            *st.value.borrow_mut() = Some(v);
            st.done.set(true);
            if let Some(w) = st.waiter.borrow_mut().take() {
                w.wake();
            }
        };
        let id = self.insert_task(Box::pin(wrapped));
        self.inner.schedule(id, self.now());
        JoinHandle { state, id }
    }

    fn insert_task(&self, fut: BoxFuture) -> TaskId {
        let inner = &self.inner;
        let mut slots = inner.slots.borrow_mut();
        let slot_idx = match inner.free_slots.borrow_mut().pop() {
            Some(i) => i,
            None => {
                slots.push(TaskSlot {
                    generation: 0,
                    future: None,
                    waker: None,
                    queued: false,
                });
                slots.len() - 1
            }
        };
        let slot = &mut slots[slot_idx];
        let id = TaskId::new(slot_idx, slot.generation);
        slot.future = Some(fut);
        slot.waker = Some(Rc::new(Waker::from(Arc::new(TaskWaker {
            id,
            list: inner.wake_list.clone(),
        }))));
        slot.queued = false;
        inner.live_tasks.set(inner.live_tasks.get() + 1);
        id
    }

    /// Registers a receiver of timed events.
    pub fn register_sink(&self, sink: Rc<dyn EventSink>) -> SinkId {
        let mut sinks = self.inner.sinks.borrow_mut();
        sinks.push(sink);
        SinkId((sinks.len() - 1) as u32)
    }

    /// Calls `sink` with `token` at simulated time `at` (ordered with every
    /// other wake-up by time, then by when it was scheduled).
    pub fn schedule_event(&self, at: SimTime, sink: SinkId, token: u32) {
        let seq = self.inner.next_seq();
        let now = self.now();
        self.inner.queue.borrow_mut().push(
            now,
            Queued::new(at.0.max(now.0), seq, Wakeup::Event { sink: sink.0, token }),
        );
    }

    /// The task being polled, if any.
    pub fn current_task(&self) -> Option<TaskId> {
        self.inner.current.get()
    }

    /// Completes at simulated time `deadline` (at once if it has passed).
    pub fn sleep_until(&self, deadline: SimTime) -> Sleep {
        Sleep {
            sim: self.clone(),
            deadline,
            registered: false,
        }
    }

    /// Completes after `d` of simulated time.
    pub fn sleep(&self, d: SimDuration) -> Sleep {
        self.sleep_until(self.now() + d)
    }

    /// Lets every other task due now run first.
    pub fn yield_now(&self) -> Sleep {
        Sleep {
            sim: self.clone(),
            deadline: self.now(),
            registered: false,
        }
    }

    /// Runs `f` with the simulation's seeded RNG.
    pub fn with_rng<R>(&self, f: impl FnOnce(&mut ChaCha8Rng) -> R) -> R {
        f(&mut self.inner.rng.borrow_mut())
    }
}

/// Future returned by [`Sim::sleep_until`].
#[derive(Debug)]
#[must_use = "a sleep does nothing unless awaited"]
pub struct Sleep {
    sim: Sim,
    deadline: SimTime,
    registered: bool,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<()> {
        let now = self.sim.now();
        if self.registered && now >= self.deadline {
            return Poll::Ready(());
        }
        if !self.registered {
            if now > self.deadline {
                return Poll::Ready(());
            }
            // Even a sleep until "now" yields once, so that other tasks due
            // now run first (this is what `yield_now` relies on).
            let Some(id) = self.sim.current_task() else {
                unreachable!("a Sleep is polled only by a task of its own executor");
            };
            self.sim.inner.schedule_timer(id, self.deadline);
            self.registered = true;
        }
        Poll::Pending
    }
}

struct JoinState<T> {
    value: RefCell<Option<T>>,
    done: Cell<bool>,
    waiter: RefCell<Option<Waker>>,
}

/// Awaits the output of a spawned task.
pub struct JoinHandle<T> {
    state: Rc<JoinState<T>>,
    id: TaskId,
}

impl<T> std::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinHandle")
            .field("task", &self.id)
            .field("done", &self.state.done.get())
            .finish()
    }
}

impl<T> JoinHandle<T> {
    /// True once the task has finished.
    pub fn is_finished(&self) -> bool {
        self.state.done.get()
    }
    /// Takes the output if the task has finished (only once).
    pub fn try_take(&self) -> Option<T> {
        self.state.value.borrow_mut().take()
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        if let Some(v) = self.state.value.borrow_mut().take() {
            return Poll::Ready(v);
        }
        *self.state.waiter.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// Awaits every handle in order and collects the outputs.
pub async fn join_all<T>(handles: Vec<JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The run queue (a FIFO for wake-ups due now beside the heap)
        /// hands out wake-ups in exactly the order a heap of every
        /// wake-up does: `(time, sequence)`, whatever mix of "due now" and
        /// later wake-ups is queued and popped, with and without a limit.
        #[test]
        fn run_queue_order_is_the_heap_order(
            ops in proptest::collection::vec((0u8..4, 0u64..3, 0u64..6), 1..200)
        ) {
            let mut q = RunQueue::default();
            // (key, token): the order, and the wake-up each key carries
            // (the heap keeps wake-ups in a slab by slot).
            let mut model: BinaryHeap<Reverse<(u128, u32)>> = BinaryHeap::new();
            let mut now = 0u64;
            let mut seq = 0u64;
            for (op, delay, limit) in ops {
                if op < 2 {
                    // Push: due now (delay 0) or later.
                    let at = now + delay;
                    let w = Queued::new(at, seq, Wakeup::Event { sink: 0, token: seq as u32 });
                    q.push(SimTime(now), w);
                    model.push(Reverse((w.key, seq as u32)));
                    seq += 1;
                } else {
                    let limit = (op == 3).then_some(SimTime(now + limit));
                    let want = match model.peek() {
                        Some(Reverse((k, _))) if limit.is_none_or(|l| (k >> 64) as u64 <= l.0) => {
                            model.pop().map(|Reverse(m)| m)
                        }
                        _ => None,
                    };
                    let got = q.pop_due(limit).map(|g| match g.wakeup {
                        Wakeup::Event { token, .. } => (g.key, token),
                        Wakeup::Task(_) => unreachable!("the test queues events only"),
                    });
                    prop_assert_eq!(got, want);
                    if let Some((k, _)) = got {
                        now = now.max((k >> 64) as u64);
                    }
                }
            }
            prop_assert_eq!(q.is_empty(), model.is_empty());
        }
    }

    #[test]
    fn tasks_wake_in_time_then_sequence_order() {
        let ex = Executor::new(1);
        let sim = ex.sim();
        let log = Rc::new(RefCell::new(Vec::new()));
        for (name, delay) in [("a", 30u64), ("b", 10), ("c", 30), ("d", 0)] {
            let sim2 = sim.clone();
            let log = log.clone();
            sim.spawn(async move {
                sim2.sleep(SimDuration::from_ns(delay)).await;
                log.borrow_mut().push((name, sim2.now()));
            });
        }
        ex.run();
        let got = log.borrow().clone();
        assert_eq!(
            got,
            vec![
                ("d", SimTime(0)),
                ("b", SimTime(10_000)),
                ("a", SimTime(30_000)),
                ("c", SimTime(30_000)),
            ]
        );
    }

    #[test]
    fn join_returns_value_and_block_on_detects_deadlock() {
        let ex = Executor::new(1);
        let sim = ex.sim();
        let s2 = sim.clone();
        let v = ex
            .block_on(async move {
                let h = s2.spawn({
                    let s3 = s2.clone();
                    async move {
                        s3.sleep(SimDuration::from_us(1)).await;
                        7
                    }
                });
                h.await * 6
            })
            .unwrap();
        assert_eq!(v, 42);
        assert_eq!(sim.now(), SimTime(1_000_000));
        let never = std::future::pending::<()>();
        assert_eq!(ex.block_on(never), Err(RunError::Deadlock(SimTime(1_000_000))));
    }

    #[test]
    fn run_until_stops_at_deadline() {
        let ex = Executor::new(1);
        let sim = ex.sim();
        let hits = Rc::new(Cell::new(0));
        let h2 = hits.clone();
        let s2 = sim.clone();
        sim.spawn(async move {
            loop {
                s2.sleep(SimDuration::from_ns(100)).await;
                h2.set(h2.get() + 1);
            }
        });
        ex.run_until(SimTime(1_050_000));
        assert_eq!(hits.get(), 10);
        assert_eq!(sim.now(), SimTime(1_050_000));
    }

    #[test]
    fn same_seed_same_random_stream() {
        use rand::RngCore;
        let a = Executor::new(9).sim().with_rng(|r| r.next_u64());
        let b = Executor::new(9).sim().with_rng(|r| r.next_u64());
        let c = Executor::new(10).sim().with_rng(|r| r.next_u64());
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn a_wake_requested_between_runs_is_drained_when_the_next_run_starts() {
        // A task parked on a waker that code outside the run loop fires.
        let ex = Executor::new(1);
        let parked: Rc<RefCell<Option<Waker>>> = Rc::default();
        let polls = Rc::new(Cell::new(0u32));
        let (p, n) = (parked.clone(), polls.clone());
        ex.sim().spawn(std::future::poll_fn(move |cx| {
            n.set(n.get() + 1);
            if n.get() == 1 {
                *p.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        }));
        ex.run();
        assert_eq!(polls.get(), 1, "parked after its first poll");
        let Some(w) = parked.borrow_mut().take() else {
            unreachable!("the first poll parked its waker")
        };
        w.wake();
        ex.run();
        assert_eq!(polls.get(), 2, "the wake from outside was run by the next run");
        assert_eq!(ex.live_tasks(), 0);
        // And through `block_on` and `run_until`, the other entry points.
        for entry in 0..2 {
            let parked: Rc<RefCell<Option<Waker>>> = Rc::default();
            let p = parked.clone();
            let done = Rc::new(Cell::new(false));
            let d = done.clone();
            ex.sim().spawn(async move {
                std::future::poll_fn(|cx| {
                    if p.borrow().is_none() {
                        *p.borrow_mut() = Some(cx.waker().clone());
                        Poll::Pending
                    } else {
                        Poll::Ready(())
                    }
                })
                .await;
                d.set(true);
            });
            ex.run();
            let Some(w) = parked.borrow().clone() else {
                unreachable!("the task parked its waker")
            };
            w.wake();
            if entry == 0 {
                ex.block_on(async {}).expect("nothing blocks");
            } else {
                ex.run_until(ex.sim().now());
            }
            assert!(done.get(), "entry point {entry} drained the wake");
        }
    }

    #[test]
    fn dropping_the_executor_frees_tasks_holding_handles() {
        let ex = Executor::new(1);
        let sim = ex.sim();
        let weak = Rc::downgrade(&sim.inner);
        let s2 = sim.clone();
        sim.spawn(async move {
            s2.sleep(SimDuration::from_ms(1)).await;
        });
        drop(sim);
        drop(ex);
        assert!(weak.upgrade().is_none());
    }
}
