//! A core's occupancy lock ([`crate::Core`]): one holder at a time, the
//! waiters served first come, first served.
//!
//! It behaves exactly as the one-permit `tokio::sync::Semaphore` it
//! replaces (which `tests/sync_determinism.rs` pins down on this executor):
//! an acquire that finds the lock free and nobody waiting takes it at its
//! first poll; otherwise it joins the back of the queue. A release hands
//! the lock to the oldest waiter and wakes it at that moment (the lock is
//! never free while someone waits, so a newcomer cannot overtake it); with
//! no waiter the lock becomes free. A waiter dropped before it got the
//! lock leaves the queue; one dropped after it was handed the lock, before
//! its next poll, releases it again. It is single-threaded (the executor
//! is), so it needs no atomics: every operation on a core takes it, and
//! the tokio semaphore's atomics and wait list were about 6% of a crash
//! check's time.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// The lock.
#[derive(Debug, Default)]
pub(crate) struct CoreLock {
    state: RefCell<LockState>,
}

#[derive(Debug, Default)]
struct LockState {
    /// Someone holds it, or it was handed to a waiter not polled yet.
    held: bool,
    /// Oldest first.
    waiters: VecDeque<Rc<Waiter>>,
}

#[derive(Debug, Default)]
struct Waiter {
    /// The lock was handed to this waiter.
    granted: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl CoreLock {
    /// Waits for the lock; it is held until the permit drops.
    pub(crate) fn acquire(&self) -> Acquire<'_> {
        Acquire {
            lock: self,
            waiter: None,
            done: false,
        }
    }

    /// Hands the lock to the oldest waiter (waking it), or frees it.
    fn release(&self) {
        let next = {
            let mut st = self.state.borrow_mut();
            match st.waiters.pop_front() {
                Some(w) => {
                    w.granted.set(true);
                    Some(w)
                }
                None => {
                    st.held = false;
                    None
                }
            }
        };
        // Woken outside the borrow: the wake-up only queues the task.
        if let Some(k) = next.and_then(|w| w.waker.borrow_mut().take()) {
            k.wake();
        }
    }
}

/// The future of [`CoreLock::acquire`].
#[derive(Debug)]
pub(crate) struct Acquire<'a> {
    lock: &'a CoreLock,
    /// Set once queued.
    waiter: Option<Rc<Waiter>>,
    /// The permit was returned.
    done: bool,
}

impl<'a> Future for Acquire<'a> {
    type Output = CorePermit<'a>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<CorePermit<'a>> {
        let this = self.get_mut();
        let lock = this.lock;
        match &this.waiter {
            None => {
                let mut st = lock.state.borrow_mut();
                if !st.held {
                    st.held = true;
                    this.done = true;
                    return Poll::Ready(CorePermit { lock });
                }
                let w = Rc::new(Waiter {
                    granted: Cell::new(false),
                    waker: RefCell::new(Some(cx.waker().clone())),
                });
                st.waiters.push_back(w.clone());
                this.waiter = Some(w);
                Poll::Pending
            }
            Some(w) if w.granted.get() => {
                this.waiter = None;
                this.done = true;
                Poll::Ready(CorePermit { lock })
            }
            Some(w) => {
                let mut k = w.waker.borrow_mut();
                if !k.as_ref().is_some_and(|k| k.will_wake(cx.waker())) {
                    *k = Some(cx.waker().clone());
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
        if let Some(w) = self.waiter.take() {
            if w.granted.get() {
                self.lock.release();
            } else {
                self.lock
                    .state
                    .borrow_mut()
                    .waiters
                    .retain(|x| !Rc::ptr_eq(x, &w));
            }
        }
    }
}

/// Holds the lock; dropping it releases the lock.
#[derive(Debug)]
pub(crate) struct CorePermit<'a> {
    lock: &'a CoreLock,
}

impl Drop for CorePermit<'_> {
    fn drop(&mut self) {
        self.lock.release();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::Executor;
    use crate::time::SimDuration;

    #[test]
    fn waiters_get_the_lock_in_arrival_order_and_a_dropped_one_passes_it_on() {
        let ex = Executor::new(1);
        let sim = ex.sim();
        let lock = Rc::new(CoreLock::default());
        let order = Rc::new(RefCell::new(Vec::new()));
        for i in 0..4u32 {
            let (lock, order, sim2) = (lock.clone(), order.clone(), sim.clone());
            sim.spawn(async move {
                sim2.sleep(SimDuration::from_ns(u64::from(i))).await;
                let _p = lock.acquire().await;
                order.borrow_mut().push(i);
                sim2.sleep(SimDuration::from_ns(10)).await;
            });
        }
        // Queued behind the first holder, then dropped: never holds it.
        let (lock2, sim2) = (lock.clone(), sim.clone());
        sim.spawn(async move {
            sim2.sleep(SimDuration::from_ps(1500)).await;
            let mut acq = Box::pin(lock2.acquire());
            let w = std::task::Waker::noop();
            assert!(acq.as_mut().poll(&mut Context::from_waker(w)).is_pending());
            drop(acq);
        });
        ex.run();
        assert_eq!(*order.borrow(), vec![0, 1, 2, 3]);
        assert!(!lock.state.borrow().held);
        assert!(lock.state.borrow().waiters.is_empty());
        // A waiter handed the lock and dropped before its poll passes it on.
        let p = lock.acquire();
        let mut p = Box::pin(p);
        let w = std::task::Waker::noop();
        let held = match p.as_mut().poll(&mut Context::from_waker(w)) {
            Poll::Ready(h) => h,
            Poll::Pending => unreachable!("the lock is free"),
        };
        let mut second = Box::pin(lock.acquire());
        let mut third = Box::pin(lock.acquire());
        assert!(second.as_mut().poll(&mut Context::from_waker(w)).is_pending());
        assert!(third.as_mut().poll(&mut Context::from_waker(w)).is_pending());
        drop(held);
        drop(second);
        assert!(matches!(
            third.as_mut().poll(&mut Context::from_waker(w)),
            Poll::Ready(_)
        ));
        assert!(lock.state.borrow().held || third.done);
    }

    /// Tasks that take `$lock` (as `$l`, acquired by `$acquire`) at seeded times and
    /// hold it for seeded spans, a quarter of them giving up after waiting
    /// 7 ns (the acquire dropped): who got it, and when.
    macro_rules! schedule {
        ($lock:expr, $l:ident => $acquire:expr) => {{
            let ex = Executor::new(3);
            let sim = ex.sim();
            let lock = Rc::new($lock);
            let log = Rc::new(RefCell::new(Vec::new()));
            let mut x = 5u64;
            let mut next = move |n: u64| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 33) % n
            };
            for i in 0..300u32 {
                let (start, hold, patient) = (next(3000), next(30), next(4) != 0);
                let (lock, log, sim2) = (lock.clone(), log.clone(), sim.clone());
                sim.spawn(async move {
                    sim2.sleep(SimDuration::from_ns(start)).await;
                    let deadline = sim2.now() + SimDuration::from_ns(7);
                    let $l = &*lock;
                    let mut acq = Box::pin($acquire);
                    let got = loop {
                        let polled = std::future::poll_fn(|cx| Poll::Ready(acq.as_mut().poll(cx))).await;
                        if let Poll::Ready(g) = polled {
                            break Some(g);
                        }
                        if !patient && sim2.now() >= deadline {
                            break None;
                        }
                        // Poll again when woken or a nanosecond later.
                        sim2.sleep(SimDuration::from_ns(1)).await;
                    };
                    drop(acq);
                    if let Some(g) = got {
                        log.borrow_mut().push((i, sim2.now().0));
                        sim2.sleep(SimDuration::from_ns(hold)).await;
                        drop(g);
                    }
                });
            }
            ex.run();
            let out = log.borrow().clone();
            out
        }};
    }

    #[test]
    fn it_hands_the_lock_on_as_the_one_permit_tokio_semaphore_does() {
        let ours = schedule!(CoreLock::default(), l => l.acquire());
        let tokio = schedule!(tokio::sync::Semaphore::new(1), s => async move { s.acquire().await.ok() });
        assert_eq!(ours.len(), tokio.len());
        assert_eq!(ours, tokio);
        assert!(
            ours.len() > 150 && ours.len() < 300,
            "{} of 300 got it",
            ours.len()
        );
    }
}
