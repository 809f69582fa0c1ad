//! The block layer's request (a bio, as Linux calls it) and its completion.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use nvme_spec::completion::Status;
use pcie_sim::HostAddr;
use tokio::sync::Notify;

/// A transaction identifier (ccNVMe Table 2: dwords 2-3 of the command).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TxId(pub u64);

/// A logical block address of the device (4 KiB blocks by default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Lba(pub u64);

/// What a bio does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BioOp {
    /// Read blocks into the pages.
    Read,
    /// Write the pages to blocks.
    Write,
    /// Make completed writes durable (NVMe Flush).
    Flush,
}

/// Request flags (Linux `REQ_*` names).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct BioFlags(u8);

impl BioFlags {
    /// No flags.
    pub const NONE: BioFlags = BioFlags(0);
    /// Force Unit Access: the write is durable when it completes.
    pub const FUA: BioFlags = BioFlags(1);
    /// Flush the device before this request.
    pub const PREFLUSH: BioFlags = BioFlags(2);
    /// Part of a ccNVMe transaction (ccNVMe 4.2).
    pub const TX: BioFlags = BioFlags(4);
    /// The commit request of a ccNVMe transaction (its last request).
    pub const TX_COMMIT: BioFlags = BioFlags(8);

    /// True if every flag of `other` is set.
    pub fn contains(self, other: BioFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// These flags with every flag of `other` cleared.
    pub fn without(self, other: BioFlags) -> BioFlags {
        BioFlags(self.0 & !other.0)
    }
}

impl std::ops::BitOr for BioFlags {
    type Output = BioFlags;
    fn bitor(self, rhs: BioFlags) -> BioFlags {
        BioFlags(self.0 | rhs.0)
    }
}

/// A block request: operation, first block, host pages, flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bio {
    /// What to do.
    pub op: BioOp,
    /// First logical block.
    pub lba: Lba,
    /// Host pages, one per 4 KiB block, in block order.
    pub pages: Vec<HostAddr>,
    /// Flags.
    pub flags: BioFlags,
}

impl Bio {
    /// A write of `pages` to blocks starting at `lba`.
    pub fn write(lba: u64, pages: Vec<HostAddr>) -> Bio {
        Bio {
            op: BioOp::Write,
            lba: Lba(lba),
            pages,
            flags: BioFlags::NONE,
        }
    }
    /// A read of blocks starting at `lba` into `pages`.
    pub fn read(lba: u64, pages: Vec<HostAddr>) -> Bio {
        Bio {
            op: BioOp::Read,
            lba: Lba(lba),
            pages,
            flags: BioFlags::NONE,
        }
    }
    /// A flush.
    pub fn flush() -> Bio {
        Bio {
            op: BioOp::Flush,
            lba: Lba(0),
            pages: Vec::new(),
            flags: BioFlags::NONE,
        }
    }
    /// The same bio with `flags` added.
    pub fn with(mut self, flags: BioFlags) -> Bio {
        self.flags = self.flags | flags;
        self
    }
    /// Blocks covered.
    pub fn blocks(&self) -> u64 {
        self.pages.len() as u64
    }
}

/// Where a submitted request's status arrives; await it with
/// [`Done::wait_raw`] (or `BlockDevice::wait`, which charges a wake-up).
#[derive(Debug, Default)]
pub struct CompletionSlot {
    status: Cell<Option<Status>>,
    dw0: Cell<u32>,
    notify: Notify,
    woken: Cell<bool>,
}

/// A handle on a submitted request.
#[derive(Clone, Debug, Default)]
pub struct Done {
    slot: Rc<CompletionSlot>,
}

impl Done {
    /// A handle that is not complete yet.
    pub fn new() -> Done {
        Done::default()
    }

    /// Completes the request with `status` and command-specific `dw0`.
    pub fn complete_entry(&self, status: Status, dw0: u32) {
        self.slot.dw0.set(dw0);
        self.complete(status);
    }

    /// Dword 0 of the completion entry.
    pub fn dw0(&self) -> u32 {
        self.slot.dw0.get()
    }

    /// Completes the request with `status` and wakes its waiter.
    pub fn complete(&self, status: Status) {
        if self.slot.status.get().is_none() {
            self.slot.status.set(Some(status));
            self.slot.notify.notify_waiters();
        }
    }

    /// The status, if the request completed.
    pub fn status(&self) -> Option<Status> {
        self.slot.status.get()
    }

    /// True once complete.
    pub fn is_done(&self) -> bool {
        self.slot.status.get().is_some()
    }

    /// Waits for the status (without charging a wake-up; the block device's
    /// `wait` does that).
    pub async fn wait_raw(&self) -> Status {
        loop {
            if let Some(s) = self.slot.status.get() {
                return s;
            }
            self.slot.notify.notified().await;
        }
    }

    /// True if a sleeping waiter was (or will be) woken for this request;
    /// used to charge one context switch per sleep.
    pub(crate) fn mark_woken(&self) -> bool {
        !self.slot.woken.replace(true)
    }
}

/// Several handles completed together (e.g. the requests of a transaction).
#[derive(Clone, Debug, Default)]
pub struct DoneSet {
    items: Rc<RefCell<Vec<Done>>>,
}

impl DoneSet {
    /// Adds a handle.
    pub fn push(&self, d: Done) {
        self.items.borrow_mut().push(d);
    }
    /// Waits for all and returns the first error status, if any.
    pub async fn wait_all(&self) -> Status {
        let items: Vec<Done> = self.items.borrow().clone();
        let mut first_err = Status::SUCCESS;
        for d in items {
            let s = d.wait_raw().await;
            if !s.is_success() && first_err.is_success() {
                first_err = s;
            }
        }
        first_err
    }
}
