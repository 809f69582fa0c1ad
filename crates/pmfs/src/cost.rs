//! What an operation costs on the persistence path, counted from the PM
//! trace: the instructions between two trace positions.

use pcie_sim::{PmEventKind, PmTrace};

/// Persistence instructions in a stretch of the trace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// Cached stores.
    pub stores: usize,
    /// Non-temporal stores.
    pub nt_stores: usize,
    /// Cache-line flushes (`clwb`, `clflushopt`, `clflush`).
    pub flushes: usize,
    /// Fences (`sfence`, `mfence`): the persistency dependencies, each an
    /// ordering point the core waits at.
    pub fences: usize,
}

impl Cost {
    /// The cost of trace entries `from..to`.
    pub fn of(trace: &PmTrace, from: usize, to: usize) -> Cost {
        let entries = trace.entries();
        let to = to.min(entries.len());
        let mut c = Cost::default();
        for e in &entries[from.min(to)..to] {
            match e.kind {
                PmEventKind::Store => c.stores += 1,
                PmEventKind::NtStore => c.nt_stores += 1,
                PmEventKind::Clwb | PmEventKind::Clflushopt | PmEventKind::Clflush => c.flushes += 1,
                PmEventKind::Sfence | PmEventKind::Mfence => c.fences += 1,
                PmEventKind::Writeback | PmEventKind::NtLine => {}
            }
        }
        c
    }
}
