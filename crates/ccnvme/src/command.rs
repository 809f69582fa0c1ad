//! Building NVMe commands from bios: opcode, range, FUA, and the PRP entries
//! for the bio's pages (NVMe 1.4 4.3). A PRP list page is kept per command
//! slot and reused.

use std::cell::RefCell;

use nvme_spec::command::SubmissionEntry;
use pcie_sim::{Core, HostAddr, Machine};

use crate::bio::{Bio, BioFlags, BioOp};
use crate::error::DriverError;

/// Namespace every command addresses.
pub const NSID: u32 = 1;

/// PRP list pages, one per command slot, allocated on first use.
#[derive(Debug)]
pub struct PrpPool {
    machine: Machine,
    pages: RefCell<Vec<Option<HostAddr>>>,
}

impl PrpPool {
    /// A pool for `slots` command slots.
    pub fn new(machine: &Machine, slots: u32) -> Result<PrpPool, DriverError> {
        Ok(PrpPool {
            machine: machine.clone(),
            pages: RefCell::new(vec![None; slots as usize]),
        })
    }

    fn page(&self, slot: u32) -> Result<HostAddr, DriverError> {
        let mut pages = self.pages.borrow_mut();
        let entry = pages
            .get_mut(slot as usize)
            .ok_or_else(|| DriverError::Invalid(format!("no PRP slot {slot}")))?;
        if let Some(p) = entry {
            return Ok(*p);
        }
        let p = self.machine.memory().alloc(4096)?;
        *entry = Some(p);
        Ok(p)
    }
}

/// The command for `bio` (CID left 0). `lba_shift` is log2 of the LBA size;
/// `slot` picks the PRP list page when more than two pages are needed, and
/// `core` is charged for writing it.
pub async fn build_command(
    bio: &Bio,
    lba_shift: u32,
    prps: &PrpPool,
    slot: u32,
    core: &Core,
) -> Result<SubmissionEntry, DriverError> {
    if bio.op == BioOp::Flush {
        return Ok(SubmissionEntry::flush(0, NSID));
    }
    let n = bio.pages.len();
    if n == 0 {
        return Err(DriverError::Invalid(
            "a read or write needs at least one page".into(),
        ));
    }
    if n > 512 {
        return Err(DriverError::Invalid(format!(
            "{n} pages exceed one PRP list page"
        )));
    }
    if bio.pages.iter().any(|p| p.0 % 4096 != 0) {
        return Err(DriverError::Invalid("bio pages must be 4 KiB aligned".into()));
    }
    let per_page = 1u64 << (12 - lba_shift.min(12));
    let blocks = (n as u64 * per_page) as u32;
    let prp1 = bio.pages[0].0;
    let prp2 = match n {
        1 => 0,
        2 => bio.pages[1].0,
        _ => {
            let list = prps.page(slot)?;
            let mut raw = Vec::with_capacity((n - 1) * 8);
            for p in &bio.pages[1..] {
                raw.extend_from_slice(&p.0.to_le_bytes());
            }
            core.write_mem(list, &raw).await?;
            list.0
        }
    };
    Ok(match bio.op {
        BioOp::Read => SubmissionEntry::read(0, NSID, bio.lba.0, blocks, prp1, prp2),
        _ => SubmissionEntry::write(
            0,
            NSID,
            bio.lba.0,
            blocks,
            prp1,
            prp2,
            bio.flags.contains(BioFlags::FUA),
        ),
    })
}
