//! The persistence primitives SoupFS uses on [`pcie_sim::Pmem`], and the
//! fault switches that break one of them on purpose.
//!
//! A "persisted before" edge (paper L229-L230) is [`Batch::persist`]: a
//! `clwb` of every line the batch stored, then one `sfence`. The 8-byte
//! atomic publish (L225-L226) is [`Batch::publish`]: an aligned 8-byte
//! store (failure-atomic: Intel SDM vol. 3A 8.1.1), its `clwb`, an
//! `sfence`.

use std::collections::BTreeSet;

use pcie_sim::{Core, PmAddr, Pmem, Purpose};

use crate::error::FsError;
use crate::layout::LINE;

/// Mechanisms a test can switch off, to show the crash checker catches
/// each one missing (all off: the correct file system).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// The persister's "persisted before" edges issue no `clwb`.
    pub skip_clwb: bool,
    /// The persister's edges and publishes issue no `sfence`.
    pub skip_sfence: bool,
    /// A dropped dependency edge: diradd publishes the dentry before it
    /// writes and persists the inode, the name and the dentry (rule C1).
    pub publish_before_init: bool,
    /// A dropped dependency edge: dirrem frees the dentry, name and inode
    /// (bitmap cleared and persisted) before it unpublishes the dentry
    /// (rule C2).
    pub free_before_unpublish: bool,
    /// A dropped dependency edge: a rename's dirrem of the old name does
    /// not wait for the diradd of the new one (rule C3, L112-L113).
    pub rename_remove_first: bool,
}

/// Stores to persistent memory with the lines they dirtied, so one edge
/// writes back exactly those.
#[derive(Debug)]
pub(crate) struct Batch<'a> {
    pub pmem: &'a Pmem,
    pub core: &'a Core,
    pub faults: Faults,
    dirty: BTreeSet<u64>,
    /// Edges issued (sfences that ordered something).
    pub edges: u64,
}

impl<'a> Batch<'a> {
    pub fn new(pmem: &'a Pmem, core: &'a Core, faults: Faults) -> Self {
        Batch {
            pmem,
            core,
            faults,
            dirty: BTreeSet::new(),
            edges: 0,
        }
    }

    /// A cached store of whole words inside one line.
    pub async fn store(&mut self, addr: u64, data: &[u8]) -> Result<(), FsError> {
        self.pmem
            .store(self.core, PmAddr(addr), data, Purpose::UNTAGGED)
            .await?;
        self.dirty.insert(addr & !(LINE - 1));
        Ok(())
    }

    /// A cached 8-byte store.
    pub async fn store_word(&mut self, addr: u64, value: u64) -> Result<(), FsError> {
        self.store(addr, &value.to_le_bytes()).await
    }

    /// Marks a line stored elsewhere (a file's data) for the next edge.
    pub fn add_dirty(&mut self, line: u64) {
        self.dirty.insert(line & !(LINE - 1));
    }

    /// True if nothing is waiting for an edge.
    pub fn is_clean(&self) -> bool {
        self.dirty.is_empty()
    }

    /// The "persisted before" edge: `clwb` of every stored line, `sfence`.
    pub async fn persist(&mut self) -> Result<(), FsError> {
        let lines = std::mem::take(&mut self.dirty);
        if !self.faults.skip_clwb {
            for l in &lines {
                self.pmem.clwb(self.core, PmAddr(*l)).await?;
            }
        }
        if !self.faults.skip_sfence {
            self.pmem.sfence(self.core).await?;
        }
        self.edges += 1;
        Ok(())
    }

    /// The atomic publish: the pointer `value` at `addr` (8-byte aligned),
    /// persisted on its own (everything stored before must already be).
    pub async fn publish(&mut self, addr: u64, value: u64) -> Result<(), FsError> {
        self.store_word(addr, value).await?;
        self.persist().await
    }
}

/// One 8-byte load.
pub(crate) async fn load_word(pmem: &Pmem, core: &Core, addr: u64) -> Result<u64, FsError> {
    let mut b = [0u8; 8];
    pmem.load(core, PmAddr(addr), &mut b).await?;
    Ok(u64::from_le_bytes(b))
}

/// One 64-byte line load.
pub(crate) async fn load_line(pmem: &Pmem, core: &Core, addr: u64) -> Result<[u8; 64], FsError> {
    let mut b = [0u8; 64];
    pmem.load(core, PmAddr(addr), &mut b).await?;
    Ok(b)
}
