//! Synchronization between simulated tasks: notify, mutex, semaphore,
//! one-shot and multi-producer channels.
//!
//! These are single-threaded (`!Send`) and strictly FIFO, so that which task
//! gets a lock or a message is decided by arrival order alone, which keeps the
//! simulation deterministic. None of them costs simulated time: a simulated
//! lock that should cost cycles charges them through the CPU model.

use std::cell::{Cell, RefCell, RefMut};
use std::collections::VecDeque;
use std::future::Future;
use std::ops::{Deref, DerefMut};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Waiter list shared by the primitives: each waiter has a ticket and an
/// optional waker; a granted ticket is removed from the list.
#[derive(Default)]
struct Waiters {
    next_ticket: u64,
    queue: VecDeque<(u64, Option<Waker>)>,
}

impl Waiters {
    fn enqueue(&mut self, waker: &Waker) -> u64 {
        let t = self.next_ticket;
        self.next_ticket += 1;
        self.queue.push_back((t, Some(waker.clone())));
        t
    }
    fn update(&mut self, ticket: u64, waker: &Waker) -> bool {
        for (t, w) in self.queue.iter_mut() {
            if *t == ticket {
                *w = Some(waker.clone());
                return true;
            }
        }
        false
    }
    fn remove(&mut self, ticket: u64) {
        self.queue.retain(|(t, _)| *t != ticket);
    }
    fn pop_front(&mut self) -> Option<(u64, Option<Waker>)> {
        self.queue.pop_front()
    }
}

/// Wakes one waiting task per permit, or all waiting tasks.
///
/// Like `tokio::sync::Notify`: `notify_one` with nobody waiting stores one
/// permit, which the next `notified()` consumes at once.
#[derive(Default)]
pub struct Notify {
    inner: RefCell<NotifyInner>,
}

#[derive(Default)]
struct NotifyInner {
    permit: bool,
    waiters: Waiters,
    /// Tickets that were granted (woken) but have not yet observed it.
    granted: Vec<u64>,
}

impl std::fmt::Debug for Notify {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = self.inner.borrow();
        f.debug_struct("Notify")
            .field("permit", &i.permit)
            .field("waiters", &i.waiters.queue.len())
            .finish()
    }
}

impl Notify {
    /// A notifier with no stored permit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Wakes the longest-waiting task, or stores a permit if none waits.
    pub fn notify_one(&self) {
        let mut i = self.inner.borrow_mut();
        if let Some((t, w)) = i.waiters.pop_front() {
            i.granted.push(t);
            drop(i);
            if let Some(w) = w {
                w.wake();
            }
        } else {
            i.permit = true;
        }
    }

    /// Wakes every waiting task (stores no permit).
    pub fn notify_waiters(&self) {
        let mut i = self.inner.borrow_mut();
        let mut wakers = Vec::new();
        while let Some((t, w)) = i.waiters.pop_front() {
            i.granted.push(t);
            wakers.extend(w);
        }
        drop(i);
        for w in wakers {
            w.wake();
        }
    }

    /// Completes when this task is notified.
    pub fn notified(&self) -> Notified<'_> {
        Notified {
            notify: self,
            ticket: None,
            done: false,
        }
    }
}

/// Future of [`Notify::notified`].
#[must_use = "futures do nothing unless awaited"]
pub struct Notified<'a> {
    notify: &'a Notify,
    ticket: Option<u64>,
    done: bool,
}

impl std::fmt::Debug for Notified<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notified").field("ticket", &self.ticket).finish()
    }
}

impl Future for Notified<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut i = self.notify.inner.borrow_mut();
        match self.ticket {
            None => {
                if i.permit {
                    i.permit = false;
                    drop(i);
                    self.done = true;
                    return Poll::Ready(());
                }
                let t = i.waiters.enqueue(cx.waker());
                drop(i);
                self.ticket = Some(t);
                Poll::Pending
            }
            Some(t) => {
                if let Some(pos) = i.granted.iter().position(|g| *g == t) {
                    i.granted.swap_remove(pos);
                    drop(i);
                    self.done = true;
                    return Poll::Ready(());
                }
                i.waiters.update(t, cx.waker());
                Poll::Pending
            }
        }
    }
}

impl Drop for Notified<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(t) = self.ticket {
            let mut i = self.notify.inner.borrow_mut();
            if let Some(pos) = i.granted.iter().position(|g| *g == t) {
                // Granted but never observed: pass the notification on.
                i.granted.swap_remove(pos);
                drop(i);
                self.notify.notify_one();
            } else {
                i.waiters.remove(t);
            }
        }
    }
}

/// A counting semaphore with FIFO hand-off.
pub struct Semaphore {
    inner: RefCell<SemInner>,
}

struct SemInner {
    permits: usize,
    waiters: VecDeque<(u64, usize, Option<Waker>)>,
    next_ticket: u64,
    granted: Vec<u64>,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let i = self.inner.borrow();
        f.debug_struct("Semaphore")
            .field("permits", &i.permits)
            .field("waiters", &i.waiters.len())
            .finish()
    }
}

impl Semaphore {
    /// A semaphore holding `permits` permits.
    pub fn new(permits: usize) -> Self {
        Semaphore {
            inner: RefCell::new(SemInner {
                permits,
                waiters: VecDeque::new(),
                next_ticket: 0,
                granted: Vec::new(),
            }),
        }
    }

    /// Permits currently available.
    pub fn available(&self) -> usize {
        self.inner.borrow().permits
    }

    /// Takes `n` permits, waiting in FIFO order until they are available.
    pub fn acquire(&self, n: usize) -> Acquire<'_> {
        Acquire {
            sem: self,
            n,
            ticket: None,
            done: false,
        }
    }

    /// Takes `n` permits if available right now and nobody is queued.
    pub fn try_acquire(&self, n: usize) -> bool {
        let mut i = self.inner.borrow_mut();
        if i.waiters.is_empty() && i.permits >= n {
            i.permits -= n;
            true
        } else {
            false
        }
    }

    /// Returns `n` permits and hands them to queued waiters in order.
    pub fn release(&self, n: usize) {
        let mut wake = Vec::new();
        {
            let mut i = self.inner.borrow_mut();
            i.permits += n;
            while let Some((t, need, _)) = i.waiters.front() {
                let (t, need) = (*t, *need);
                if i.permits < need {
                    break;
                }
                i.permits -= need;
                let (_, _, w) = i.waiters.pop_front().unwrap_or((t, need, None));
                i.granted.push(t);
                wake.extend(w);
            }
        }
        for w in wake {
            w.wake();
        }
    }
}

/// Future of [`Semaphore::acquire`].
#[must_use = "futures do nothing unless awaited"]
pub struct Acquire<'a> {
    sem: &'a Semaphore,
    n: usize,
    ticket: Option<u64>,
    done: bool,
}

impl std::fmt::Debug for Acquire<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Acquire").field("n", &self.n).finish()
    }
}

impl Future for Acquire<'_> {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let n = self.n;
        let mut i = self.sem.inner.borrow_mut();
        match self.ticket {
            None => {
                if i.waiters.is_empty() && i.permits >= n {
                    i.permits -= n;
                    drop(i);
                    self.done = true;
                    return Poll::Ready(());
                }
                let t = i.next_ticket;
                i.next_ticket += 1;
                i.waiters.push_back((t, n, Some(cx.waker().clone())));
                drop(i);
                self.ticket = Some(t);
                Poll::Pending
            }
            Some(t) => {
                if let Some(pos) = i.granted.iter().position(|g| *g == t) {
                    i.granted.swap_remove(pos);
                    drop(i);
                    self.done = true;
                    return Poll::Ready(());
                }
                for w in i.waiters.iter_mut() {
                    if w.0 == t {
                        w.2 = Some(cx.waker().clone());
                    }
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for Acquire<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Some(t) = self.ticket {
            let mut i = self.sem.inner.borrow_mut();
            if let Some(pos) = i.granted.iter().position(|g| *g == t) {
                i.granted.swap_remove(pos);
                drop(i);
                self.sem.release(self.n);
            } else {
                i.waiters.retain(|w| w.0 != t);
            }
        }
    }
}

/// An async mutex with FIFO hand-off, for simulated locks (page locks,
/// journal locks). Costs no simulated time by itself.
pub struct Mutex<T> {
    sem: Semaphore,
    value: RefCell<T>,
}

impl<T> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mutex")
            .field("locked", &(self.sem.available() == 0))
            .finish()
    }
}

impl<T> Mutex<T> {
    /// A new unlocked mutex.
    pub fn new(value: T) -> Self {
        Mutex {
            sem: Semaphore::new(1),
            value: RefCell::new(value),
        }
    }

    /// Waits for the lock.
    pub async fn lock(&self) -> MutexGuard<'_, T> {
        self.sem.acquire(1).await;
        MutexGuard {
            mutex: self,
            value: self.value.borrow_mut(),
        }
    }

    /// Takes the lock if it is free and nobody is queued.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        if self.sem.try_acquire(1) {
            Some(MutexGuard {
                mutex: self,
                value: self.value.borrow_mut(),
            })
        } else {
            None
        }
    }

    /// Takes the lock without a guard if it is free and nobody is queued;
    /// the holder must call [`Mutex::release_held`] (for locks held across
    /// tasks, such as a page lock held until an I/O completes).
    pub fn try_hold(&self) -> bool {
        self.sem.try_acquire(1)
    }

    /// Releases a lock taken with [`Mutex::try_hold`].
    pub fn release_held(&self) {
        self.sem.release(1);
    }

    /// True if someone holds the lock.
    pub fn is_locked(&self) -> bool {
        self.sem.available() == 0
    }
}

/// Holds a [`Mutex`] until dropped.
pub struct MutexGuard<'a, T> {
    mutex: &'a Mutex<T>,
    value: RefMut<'a, T>,
}

impl<T> std::fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MutexGuard")
    }
}

impl<T> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}
impl<T> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}
impl<T> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.mutex.sem.release(1);
    }
}

/// The sending half of a one-shot value.
pub struct OneshotSender<T> {
    slot: Rc<OneshotSlot<T>>,
}
/// The receiving half of a one-shot value; resolves to `None` if the sender
/// was dropped without sending.
pub struct OneshotReceiver<T> {
    slot: Rc<OneshotSlot<T>>,
}
struct OneshotSlot<T> {
    value: RefCell<Option<T>>,
    closed: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl<T> std::fmt::Debug for OneshotSender<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OneshotSender")
    }
}
impl<T> std::fmt::Debug for OneshotReceiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OneshotReceiver")
    }
}

/// A channel carrying exactly one value.
pub fn oneshot<T>() -> (OneshotSender<T>, OneshotReceiver<T>) {
    let slot = Rc::new(OneshotSlot {
        value: RefCell::new(None),
        closed: Cell::new(false),
        waker: RefCell::new(None),
    });
    (OneshotSender { slot: slot.clone() }, OneshotReceiver { slot })
}

impl<T> OneshotSender<T> {
    /// Delivers `v` and wakes the receiver.
    pub fn send(self, v: T) {
        *self.slot.value.borrow_mut() = Some(v);
        // Drop runs next and wakes the receiver.
    }
}
impl<T> Drop for OneshotSender<T> {
    fn drop(&mut self) {
        self.slot.closed.set(true);
        if let Some(w) = self.slot.waker.borrow_mut().take() {
            w.wake();
        }
    }
}

impl<T> OneshotReceiver<T> {
    /// The value, if it has been sent.
    pub fn try_recv(&self) -> Option<T> {
        self.slot.value.borrow_mut().take()
    }
}

impl<T> Future for OneshotReceiver<T> {
    type Output = Option<T>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        if let Some(v) = self.slot.value.borrow_mut().take() {
            return Poll::Ready(Some(v));
        }
        if self.slot.closed.get() {
            return Poll::Ready(None);
        }
        *self.slot.waker.borrow_mut() = Some(cx.waker().clone());
        Poll::Pending
    }
}

/// An unbounded FIFO channel with any number of senders and one receiver
/// task at a time.
pub struct Channel<T> {
    inner: RefCell<ChannelInner<T>>,
}
struct ChannelInner<T> {
    items: VecDeque<T>,
    waker: Option<Waker>,
}

impl<T> std::fmt::Debug for Channel<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Channel")
            .field("len", &self.inner.borrow().items.len())
            .finish()
    }
}

impl<T> Default for Channel<T> {
    fn default() -> Self {
        Channel {
            inner: RefCell::new(ChannelInner {
                items: VecDeque::new(),
                waker: None,
            }),
        }
    }
}

impl<T> Channel<T> {
    /// An empty channel.
    pub fn new() -> Self {
        Self::default()
    }
    /// Queues `v` and wakes the receiver.
    pub fn send(&self, v: T) {
        let w = {
            let mut i = self.inner.borrow_mut();
            i.items.push_back(v);
            i.waker.take()
        };
        if let Some(w) = w {
            w.wake();
        }
    }
    /// The next item if one is queued.
    pub fn try_recv(&self) -> Option<T> {
        self.inner.borrow_mut().items.pop_front()
    }
    /// Number of queued items.
    pub fn len(&self) -> usize {
        self.inner.borrow().items.len()
    }
    /// True if nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Waits for the next item.
    pub fn recv(&self) -> Recv<'_, T> {
        Recv { chan: self }
    }
}

/// Future of [`Channel::recv`].
#[must_use = "futures do nothing unless awaited"]
pub struct Recv<'a, T> {
    chan: &'a Channel<T>,
}

impl<T> std::fmt::Debug for Recv<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recv")
    }
}

impl<T> Future for Recv<'_, T> {
    type Output = T;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        let mut i = self.chan.inner.borrow_mut();
        if let Some(v) = i.items.pop_front() {
            return Poll::Ready(v);
        }
        i.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::Executor;
    use crate::time::{SimDuration, SimTime};

    #[test]
    fn mutex_hands_off_in_fifo_order() {
        let ex = Executor::new(0);
        let sim = ex.sim();
        let m = Rc::new(Mutex::new(Vec::new()));
        for i in 0..4u32 {
            let m = m.clone();
            let s = sim.clone();
            sim.spawn(async move {
                let mut g = m.lock().await;
                g.push((i, s.now()));
                s.sleep(SimDuration::from_ns(10)).await;
            });
        }
        ex.run();
        let got: Vec<(u32, SimTime)> = m.try_lock().unwrap().clone();
        assert_eq!(
            got,
            vec![
                (0, SimTime(0)),
                (1, SimTime(10_000)),
                (2, SimTime(20_000)),
                (3, SimTime(30_000))
            ]
        );
    }

    #[test]
    fn notify_stores_one_permit() {
        let ex = Executor::new(0);
        let n = Rc::new(Notify::new());
        n.notify_one();
        n.notify_one();
        let n2 = n.clone();
        let sim = ex.sim();
        let got = ex
            .block_on(async move {
                n2.notified().await; // consumes the stored permit
                let n3 = n2.clone();
                let s = sim.clone();
                sim.spawn(async move {
                    s.sleep(SimDuration::from_ns(5)).await;
                    n3.notify_waiters();
                });
                n2.notified().await;
                sim.now()
            })
            .unwrap();
        assert_eq!(got, SimTime(5_000));
    }

    #[test]
    fn semaphore_grants_in_order_even_when_small_requests_could_pass() {
        let ex = Executor::new(0);
        let sim = ex.sim();
        let sem = Rc::new(Semaphore::new(2));
        let order = Rc::new(RefCell::new(Vec::new()));
        for (i, n) in [(0, 2usize), (1, 2), (2, 1)] {
            let sem = sem.clone();
            let s = sim.clone();
            let order = order.clone();
            sim.spawn(async move {
                sem.acquire(n).await;
                order.borrow_mut().push(i);
                s.sleep(SimDuration::from_ns(1)).await;
                sem.release(n);
            });
        }
        ex.run();
        assert_eq!(*order.borrow(), vec![0, 1, 2]);
    }

    #[test]
    fn oneshot_and_channel_deliver() {
        let ex = Executor::new(0);
        let sim = ex.sim();
        let (tx, rx) = oneshot::<u32>();
        let chan = Rc::new(Channel::new());
        let c2 = chan.clone();
        let s2 = sim.clone();
        sim.spawn(async move {
            s2.sleep(SimDuration::from_ns(3)).await;
            tx.send(11);
            c2.send(1);
            c2.send(2);
        });
        let got = ex
            .block_on(async move {
                let a = rx.await;
                let b = chan.recv().await;
                let c = chan.recv().await;
                (a, b, c)
            })
            .unwrap();
        assert_eq!(got, (Some(11), 1, 2));
        let (tx, rx) = oneshot::<u32>();
        drop(tx);
        assert_eq!(ex.block_on(rx).unwrap(), None);
    }
}
