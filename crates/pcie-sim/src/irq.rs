//! The host's interrupt controller: MSI-X messages arriving from devices
//! wake the handler tasks waiting on their vector.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use tokio::sync::Notify;

/// Bus address that MSI-X messages are written to (the x86 interrupt
/// address window, Intel SDM Vol. 3A 10.11.1). The message data is the
/// vector number.
pub const MSI_ADDRESS: u64 = 0xFEE0_0000;

/// MSI-X table entries each port's device may use (Linux programs every
/// device's MSI-X table with host vectors of its own,
/// `pci_alloc_irq_vectors`; here the host vector of entry `e` of the
/// device on port `p` is `p * VECTORS_PER_PORT + e`, see [`host_vector`]).
pub const VECTORS_PER_PORT: u16 = 256;

/// The host vector an MSI-X message of table entry `entry` from the device
/// on `port` arrives on. Port 0's entries map to themselves, so a machine
/// with one device numbers vectors as the device does. Entries past
/// [`VECTORS_PER_PORT`] wrap into the port's range (a driver never
/// programs more: one per core and the admin queue).
pub fn host_vector(port: u8, entry: u16) -> u16 {
    (port as u16)
        .wrapping_mul(VECTORS_PER_PORT)
        .wrapping_add(entry % VECTORS_PER_PORT)
}

#[derive(Debug, Default)]
struct Vector {
    pending: Cell<u64>,
    delivered: Cell<u64>,
    /// Bumped by [`InterruptController::release`]: waiters of an older
    /// epoch give up.
    epoch: Cell<u64>,
    notify: Notify,
}

/// The vector was released while a handler waited on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Released;

/// Interrupt vectors and the tasks waiting on them.
#[derive(Debug, Default)]
pub struct InterruptController {
    vectors: RefCell<Vec<Rc<Vector>>>,
}

impl InterruptController {
    fn vector(&self, v: u16) -> Rc<Vector> {
        let mut vs = self.vectors.borrow_mut();
        while vs.len() <= v as usize {
            vs.push(Rc::new(Vector::default()));
        }
        vs[v as usize].clone()
    }

    /// An MSI-X message for `vector` arrived.
    pub(crate) fn raise(&self, vector: u16) {
        let v = self.vector(vector);
        v.pending.set(v.pending.get() + 1);
        v.delivered.set(v.delivered.get() + 1);
        v.notify.notify_one();
    }

    /// Waits for the next message on `vector` and consumes it. Messages that
    /// arrive while nobody waits are kept and returned at once. Fails if
    /// the vector is released meanwhile (its driver went away).
    pub async fn wait(&self, vector: u16) -> Result<(), Released> {
        let v = self.vector(vector);
        let epoch = v.epoch.get();
        loop {
            if v.epoch.get() != epoch {
                return Err(Released);
            }
            let p = v.pending.get();
            if p > 0 {
                v.pending.set(p - 1);
                return Ok(());
            }
            v.notify.notified().await;
        }
    }

    /// Releases `vector`: every task waiting on it returns `Released`, and
    /// pending messages are dropped. A new driver can then wait on it.
    pub fn release(&self, vector: u16) {
        let v = self.vector(vector);
        v.epoch.set(v.epoch.get() + 1);
        v.pending.set(0);
        v.notify.notify_waiters();
    }

    /// The handler of `vector` is done with the interrupt it took (its
    /// EOI): the messages that arrived while it ran are one pending
    /// interrupt, not one each. The local APIC keeps one request per
    /// vector in its IRR beside the one in service, and "any additional
    /// interrupts issued for the same interrupt vector are collapsed into
    /// the single bit in the IRR" (Intel SDM Vol. 3A 10.8.4). A handler
    /// that reaps every completion it finds (Linux's `nvme_irq`) calls
    /// this; one that takes one completion per message must not.
    pub fn end_of_interrupt(&self, vector: u16) {
        let v = self.vector(vector);
        v.pending.set(v.pending.get().min(1));
    }

    /// Consumes every message pending on `vector` and returns how many.
    pub fn take_pending(&self, vector: u16) -> u64 {
        let v = self.vector(vector);
        v.pending.replace(0)
    }

    /// Messages delivered on `vector` since power-on.
    pub fn delivered(&self, vector: u16) -> u64 {
        self.vector(vector).delivered.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_that_arrive_during_a_handler_collapse_into_one_interrupt() {
        let ic = InterruptController::default();
        for _ in 0..3 {
            ic.raise(7);
        }
        ic.raise(8);
        ic.end_of_interrupt(7);
        assert_eq!(ic.take_pending(7), 1, "three messages, one interrupt");
        assert_eq!(ic.delivered(7), 3, "every message was delivered");
        ic.end_of_interrupt(8);
        assert_eq!(ic.take_pending(8), 1, "a lone message stays");
        ic.end_of_interrupt(9);
        assert_eq!(ic.take_pending(9), 0, "nothing pending: nothing made up");
    }
}
