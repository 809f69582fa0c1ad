//! The traffic tags of NVMe transfers on the machine's bus, and their names.
//!
//! The machine (`pcie-sim`) tags every transfer with a [`Purpose`] and names only its own
//! tags; these are the ones an NVMe host driver and controller set. Table 1 of the ccNVMe
//! paper counts by them: [`QUEUE_ENTRY`] is DMA(Q), [`DATA_BLOCK`] is Block I/O, and
//! [`DOORBELL`] and [`QUEUE_POINTER`] are its MMIO column. Values 6 and 9 are the machine's
//! (interrupt, flush read) and 8 is the Horae ordering queue's (`ccnvme::horae`); the values
//! are stable because saved traces store them.
//!
//! Only with the `pcie` feature (the tags are the machine's type); the rest of this crate does
//! not depend on the machine.

use pcie_sim::Purpose;

/// A submission or completion queue entry (NVMe 1.4 4.2, 4.6).
pub const QUEUE_ENTRY: Purpose = Purpose::new(1);
/// A data block of an I/O command.
pub const DATA_BLOCK: Purpose = Purpose::new(2);
/// A doorbell write (SQ tail, CQ head; NVMe 1.4 3.1.24, 3.1.25) or the ccNVMe P-SQDB.
pub const DOORBELL: Purpose = Purpose::new(3);
/// A persistent queue pointer other than a doorbell (the ccNVMe P-SQ-head).
pub const QUEUE_POINTER: Purpose = Purpose::new(4);
/// A controller register other than a doorbell (NVMe 1.4 3.1).
pub const REGISTER: Purpose = Purpose::new(5);
/// A PRP list page (NVMe 1.4 4.3).
pub const PRP_LIST: Purpose = Purpose::new(7);
/// Admin-queue traffic and other control-path transfers (NVMe 1.4 5).
pub const ADMIN: Purpose = Purpose::new(10);

/// Every NVMe tag with its name, in value order.
pub const NAMES: [(Purpose, &str); 7] = [
    (QUEUE_ENTRY, "queue-entry"),
    (DATA_BLOCK, "data"),
    (DOORBELL, "doorbell"),
    (QUEUE_POINTER, "queue-pointer"),
    (REGISTER, "register"),
    (PRP_LIST, "prp-list"),
    (ADMIN, "admin"),
];

/// The name of an NVMe tag; `None` for a tag this crate does not own.
pub fn name(p: Purpose) -> Option<&'static str> {
    NAMES.iter().find(|(t, _)| *t == p).map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvme_tags_are_distinct_and_not_the_machines() {
        for (i, (a, _)) in NAMES.iter().enumerate() {
            assert_eq!(a.pcie_name(), None, "{a:?} is one of the machine's own tags");
            for (b, _) in &NAMES[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(name(DATA_BLOCK), Some("data"));
        assert_eq!(name(Purpose::INTERRUPT), None);
    }
}
