//! A minimal device for tests of this crate and of the layers above: a
//! register file (with one doorbell that counts its writes) and an
//! optional PMR. It is the "other side of the protocol" for code that
//! needs a device but not an NVMe controller.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use crate::endpoint::{BarLayout, Endpoint, PmrBar, RegisterAccess, Unsupported};
use crate::machine::Machine;
use crate::pmr::{PageStore, PmrTiming};
use crate::port::DevicePort;
use crate::time::SimDuration;

/// Offset of the doorbell register in [`RegisterFile`].
pub const DOORBELL: u64 = 0x1000;

/// A device with 16 KiB of 32/64-bit registers and an optional PMR.
#[derive(Debug)]
pub struct RegisterFile {
    regs: RefCell<Vec<u8>>,
    doorbell_writes: Cell<u64>,
    last_doorbell: Cell<u32>,
    pmr_writes: Cell<u64>,
    pmr_on: Cell<bool>,
    /// The port the device was attached through.
    pub port: DevicePort,
}

impl RegisterFile {
    /// The BARs of the device: 16 KiB of registers, `pmr_size` bytes of PMR.
    pub fn layout(pmr_size: Option<u64>) -> BarLayout {
        BarLayout {
            regs_size: 0x4000,
            register_access: RegisterAccess::Aligned32Or64,
            register_latency: SimDuration::from_ns(50),
            pmr: pmr_size.map(|size| PmrBar {
                size,
                timing: PmrTiming::default(),
            }),
        }
    }

    /// Attaches a new device to `machine`.
    pub fn attach(
        machine: &Machine,
        pmr_size: Option<u64>,
        pmr_image: Option<PageStore>,
    ) -> Rc<RegisterFile> {
        let port = machine.add_device(Self::layout(pmr_size), pmr_image);
        let dev = Rc::new(RegisterFile {
            regs: RefCell::new(vec![0; 0x4000]),
            doorbell_writes: Cell::new(0),
            last_doorbell: Cell::new(0),
            pmr_writes: Cell::new(0),
            pmr_on: Cell::new(true),
            port: port.clone(),
        });
        machine.connect(&port, dev.clone());
        dev
    }

    /// Writes that reached the doorbell.
    pub fn doorbell_writes(&self) -> u64 {
        self.doorbell_writes.get()
    }

    /// The last value written to the doorbell.
    pub fn last_doorbell(&self) -> u32 {
        self.last_doorbell.get()
    }

    /// Posted writes that landed in the PMR.
    pub fn pmr_writes(&self) -> u64 {
        self.pmr_writes.get()
    }

    /// Enables or disables host access to the PMR.
    pub fn set_pmr_enabled(&self, on: bool) {
        self.pmr_on.set(on);
    }
}

impl Endpoint for RegisterFile {
    fn reg_write(&self, offset: u64, data: &[u8]) -> Result<(), Unsupported> {
        let mut regs = self.regs.borrow_mut();
        let end = offset as usize + data.len();
        if end > regs.len() {
            return Err(Unsupported("outside the register file"));
        }
        regs[offset as usize..end].copy_from_slice(data);
        if offset == DOORBELL {
            self.doorbell_writes.set(self.doorbell_writes.get() + 1);
            let mut b = [0u8; 4];
            b.copy_from_slice(&data[..4]);
            self.last_doorbell.set(u32::from_le_bytes(b));
        }
        Ok(())
    }

    fn reg_read(&self, offset: u64, out: &mut [u8]) -> Result<(), Unsupported> {
        let regs = self.regs.borrow();
        let end = offset as usize + out.len();
        if end > regs.len() {
            return Err(Unsupported("outside the register file"));
        }
        out.copy_from_slice(&regs[offset as usize..end]);
        Ok(())
    }

    fn pmr_enabled(&self) -> bool {
        self.pmr_on.get()
    }

    fn pmr_written(&self, _offset: u64, _len: u64) {
        self.pmr_writes.set(self.pmr_writes.get() + 1);
    }
}
