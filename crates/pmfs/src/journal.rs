//! The fine-grained undo journal (Dulloor et al., "System Software for
//! Persistent Memory", EuroSys '14: metadata consistency by fine-grained
//! undo logging): a
//! transaction logs the old value of every metadata word it changes,
//! makes the log persistent, updates the metadata in place, makes that
//! persistent, and writes a commit entry. Recovery rolls back the newest
//! transaction if it has no commit entry.
//!
//! ## An entry
//!
//! One 64-byte line, like PMFS's log entries (its source's
//! `pmfs_logentry_t`: 48 bytes of data, an address, a generation): up to
//! six old words (48 bytes), the address they were read at, and a
//! *valid word* (a magic byte, the kind, the number of words, the
//! transaction's generation). The body is stored first and the valid word
//! by a second, later store to the same line, so a valid word that
//! persisted implies the body did (rule M1 of `docs/persistence.md` 5: a
//! line's stores persist in order; PMFS's entry is likewise valid only
//! when its `gen_id` matches). A commit entry is its valid word alone (one atomic
//! 8-byte store).
//!
//! ## Which transaction is live
//!
//! Every transaction writes its entries from slot 0 with a generation one
//! more than the last. The newest generation found in the log is the
//! only one that may need rolling back: each earlier one committed before
//! the next began (one operation at a time, each durable at return).
//! Generations are 32 bits and not reset: after 2^32 transactions the
//! newest would no longer be the largest (no image here comes near).

use fsapi::{Errno, Work};
use std::cell::Cell;
use std::collections::BTreeMap;

use pcie_sim::{Core, PmAddr, Pmem, Purpose};

use crate::error::{PmfsError, Result};
use crate::faults::Faults;
use crate::layout::{word, FileType, Geometry, Ino, Inode, LINE, LOG_ENTRIES, PAGE};

/// Old words one entry holds.
pub const ENTRY_WORDS: usize = 6;
const VALID_MAGIC: u64 = 0xA5;
const UNDO: u64 = 1;
const COMMIT: u64 = 2;

fn valid_word(kind: u64, words: usize, gen: u32) -> u64 {
    VALID_MAGIC << 56 | kind << 48 | (words as u64) << 40 | u64::from(gen)
}

/// A change to the DRAM dentry cache, applied when its transaction
/// commits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DirOp {
    /// Entry `name` of directory `.0` now names inode `.3` at slot `.2`.
    Add(Ino, String, PmAddr, Ino),
    /// Entry `name` of directory `.0` is gone.
    Remove(Ino, String),
    /// A new, empty directory.
    NewDir(Ino),
    /// A directory removed.
    DropDir(Ino),
}

/// What one transaction did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    /// Undo entries logged (one line and one `clwb` each).
    pub log_entries: usize,
    /// Metadata lines updated in place (one `clwb` each).
    pub lines: usize,
}

#[allow(missing_debug_implementations)]
/// A transaction being built: the new value of every metadata word it
/// changes, staged in DRAM, and the allocations it makes.
pub struct Tx<'a> {
    pub(crate) pm: &'a Pmem,
    pub(crate) core: &'a Core,
    pub(crate) geo: Geometry,
    words: BTreeMap<u64, u64>,
    /// Data pages taken from the free set (returned if the transaction
    /// fails).
    pub(crate) alloc_pages: Vec<u32>,
    /// Data pages freed (returned to the free set once it commits).
    pub(crate) free_pages: Vec<u32>,
    /// Inodes taken from the free set.
    pub(crate) alloc_inos: Vec<Ino>,
    /// Inodes freed.
    pub(crate) free_inos: Vec<Ino>,
    /// Dentry-cache changes.
    pub(crate) dir_ops: Vec<DirOp>,
    /// In-memory inodes staged and directory slots examined so far (the
    /// allocations and dentry-cache changes are counted from the lists
    /// above): the DRAM work the operation is charged for.
    pub(crate) work: Work,
    /// Dentry-cache lookups (made through a shared borrow).
    probes: Cell<u64>,
}

impl<'a> Tx<'a> {
    pub(crate) fn new(pm: &'a Pmem, core: &'a Core, geo: Geometry) -> Tx<'a> {
        Tx {
            pm,
            core,
            geo,
            words: BTreeMap::new(),
            alloc_pages: Vec::new(),
            free_pages: Vec::new(),
            alloc_inos: Vec::new(),
            free_inos: Vec::new(),
            dir_ops: Vec::new(),
            work: Work::default(),
            probes: Cell::new(0),
        }
    }

    /// Counts one lookup in the dentry cache.
    pub(crate) fn probe(&self) {
        self.probes.set(self.probes.get() + 1);
    }

    /// The DRAM work of the operation so far: inodes staged, pages and
    /// inodes allocated or freed, dentry-cache lookups, slots examined and
    /// entries changed.
    pub(crate) fn work(&self) -> Work {
        let allocs =
            self.alloc_pages.len() + self.free_pages.len() + self.alloc_inos.len() + self.free_inos.len();
        self.work
            + Work {
                allocs: allocs as u64,
                dirents: self.probes.get() + self.dir_ops.len() as u64,
                ..Work::default()
            }
    }

    /// `len` bytes at `at` as this transaction sees them: loaded, with
    /// its staged words over them.
    pub async fn load(&self, at: PmAddr, len: usize) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.pm.load(self.core, at, &mut buf).await?;
        let end = at.0 + len as u64;
        for (&a, &v) in self.words.range(at.0.saturating_sub(7)..end) {
            for (i, b) in v.to_le_bytes().iter().enumerate() {
                let x = a + i as u64;
                if (at.0..end).contains(&x) {
                    buf[(x - at.0) as usize] = *b;
                }
            }
        }
        Ok(buf)
    }

    /// The eight words of the line at `at`.
    pub async fn line(&self, at: PmAddr) -> Result<[u64; 8]> {
        let b = self.load(at, LINE as usize).await?;
        let mut w = [0u64; 8];
        for (i, x) in w.iter_mut().enumerate() {
            *x = u64::from_le_bytes(word(&b, 8 * i));
        }
        Ok(w)
    }

    /// Stages `value` for the word at `at` (8-byte aligned).
    pub fn put_word(&mut self, at: PmAddr, value: u64) {
        debug_assert_eq!(at.0 % 8, 0);
        self.words.insert(at.0, value);
    }

    /// Stages the eight words of the line at `at`.
    pub fn put_line(&mut self, at: PmAddr, words: &[u64; 8]) {
        for (i, &w) in words.iter().enumerate() {
            self.put_word(at + 8 * i as u64, w);
        }
    }

    /// Inode `ino` (any slot number: out of range is `NotFound`).
    pub async fn inode(&self, ino: Ino) -> Result<Inode> {
        if ino == 0 || ino >= self.geo.inodes {
            return Err(PmfsError::Fs(Errno::NotFound));
        }
        let at = self.geo.inode_addr(ino);
        Inode::decode(&self.line(at).await?).ok_or(PmfsError::Corrupt {
            at: at.0,
            reason: "inode of unknown type",
        })
    }

    /// Inode `ino`, which must be in use.
    pub async fn live_inode(&self, ino: Ino) -> Result<Inode> {
        let i = self.inode(ino).await?;
        if i.ftype.is_none() {
            return Err(PmfsError::Fs(Errno::NotFound));
        }
        Ok(i)
    }

    /// Inode `ino`, which must be a directory.
    pub async fn dir_inode(&self, ino: Ino) -> Result<Inode> {
        let i = self.live_inode(ino).await?;
        if i.ftype != Some(FileType::Dir) {
            return Err(PmfsError::Fs(Errno::NotDir));
        }
        Ok(i)
    }

    /// Stages inode `ino`.
    pub fn put_inode(&mut self, ino: Ino, inode: &Inode) {
        self.work.inodes += 1;
        let at = self.geo.inode_addr(ino);
        self.put_line(at, &inode.encode());
    }

    /// Stages data page `page`'s bit in the block bitmap.
    pub async fn set_bit(&mut self, page: u32, on: bool) -> Result<()> {
        if page >= self.geo.pages {
            return Err(PmfsError::Corrupt {
                at: 0,
                reason: "page number out of range",
            });
        }
        let at = self.geo.bitmap_word(page);
        let b = self.load(at, 8).await?;
        let mut w = u64::from_le_bytes(word(&b, 0));
        let bit = 1u64 << (page % 64);
        if on {
            w |= bit;
        } else {
            w &= !bit;
        }
        self.put_word(at, w);
        Ok(())
    }

    /// Commits: the undo entries (stores, `clwb` each, `sfence`), the
    /// in-place updates (stores, `clwb` each line, `sfence`), the commit
    /// entry (store, `clwb`, `sfence`). Three persistency dependencies on
    /// the critical path; none if nothing changes.
    pub(crate) async fn commit(&self, gen: u32, faults: &Faults) -> Result<TxStats> {
        let (pm, core) = (self.pm, self.core);
        // Changed words by line, with their old values.
        let mut lines: BTreeMap<u64, Vec<(usize, u64, u64)>> = BTreeMap::new();
        for (&a, &new) in &self.words {
            lines
                .entry(a & !(LINE - 1))
                .or_default()
                .push(((a % LINE / 8) as usize, new, 0));
        }
        let mut runs: Vec<(u64, Vec<u64>)> = Vec::new();
        let mut updates: Vec<(u64, Vec<u64>)> = Vec::new();
        for (&line, ws) in lines.iter_mut() {
            let mut old = [0u8; LINE as usize];
            pm.load(core, PmAddr(line), &mut old).await?;
            ws.retain_mut(|(i, new, o)| {
                *o = u64::from_le_bytes(word(&old, 8 * *i));
                *o != *new
            });
            let mut k = 0;
            while k < ws.len() {
                let mut j = k + 1;
                while j < ws.len() && ws[j].0 == ws[j - 1].0 + 1 {
                    j += 1;
                }
                let at = line + 8 * ws[k].0 as u64;
                updates.push((at, ws[k..j].iter().map(|w| w.1).collect()));
                for chunk in ws[k..j].chunks(ENTRY_WORDS) {
                    runs.push((line + 8 * chunk[0].0 as u64, chunk.iter().map(|w| w.2).collect()));
                }
                k = j;
            }
        }
        if runs.is_empty() {
            return Ok(TxStats::default());
        }
        if runs.len() + 1 > LOG_ENTRIES as usize {
            return Err(PmfsError::Fs(Errno::NoSpace(
                "journal entries for one transaction",
            )));
        }
        // 1. The undo entries: body, then the valid word; clwb; one sfence.
        for (i, (at, old)) in runs.iter().enumerate() {
            let e = self.geo.log_entry(i as u32);
            let mut body = [0u8; 56];
            for (k, w) in old.iter().enumerate() {
                body[8 * k..8 * k + 8].copy_from_slice(&w.to_le_bytes());
            }
            body[48..56].copy_from_slice(&at.to_le_bytes());
            pm.store(core, e, &body, Purpose::UNTAGGED).await?;
            let v = valid_word(UNDO, old.len(), gen);
            pm.store(core, e + 56, &v.to_le_bytes(), Purpose::UNTAGGED)
                .await?;
            if !faults.skip_log_flush {
                pm.clwb(core, e).await?;
            }
        }
        if !faults.skip_log_fence {
            pm.sfence(core).await?;
        }
        // 2. The in-place updates: stores, clwb of each line, one sfence.
        let mut touched = Vec::new();
        for (at, new) in &updates {
            let bytes: Vec<u8> = new.iter().flat_map(|w| w.to_le_bytes()).collect();
            pm.store(core, PmAddr(*at), &bytes, Purpose::UNTAGGED).await?;
            let line = at & !(LINE - 1);
            if touched.last() != Some(&line) {
                touched.push(line);
            }
        }
        for &line in &touched {
            pm.clwb(core, PmAddr(line)).await?;
        }
        pm.sfence(core).await?;
        // 3. The commit entry: one atomic word; clwb; sfence.
        if !faults.skip_commit {
            let e = self.geo.log_entry(runs.len() as u32);
            let v = valid_word(COMMIT, 0, gen);
            pm.store(core, e + 56, &v.to_le_bytes(), Purpose::UNTAGGED)
                .await?;
            pm.clwb(core, e).await?;
            pm.sfence(core).await?;
        }
        Ok(TxStats {
            log_entries: runs.len(),
            lines: touched.len(),
        })
    }
}

/// What recovery found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// The newest generation in the log (0: an empty log).
    pub gen: u32,
    /// Undo entries applied (0 if the newest transaction committed).
    pub rolled_back: usize,
}

/// Mount's recovery: finds the newest transaction in the log and, if it
/// has no commit entry, writes its old words back (newest entry first),
/// `clwb` each line, one `sfence`. Idempotent: a crash during recovery
/// leaves a log that recovers the same way.
pub async fn recover(pm: &Pmem, core: &Core, geo: &Geometry, faults: &Faults) -> Result<Recovered> {
    let mut log = vec![0u8; PAGE as usize];
    pm.load(core, geo.log_entry(0), &mut log).await?;
    let mut entries = Vec::new();
    for (slot, e) in log.chunks_exact(LINE as usize).enumerate() {
        let v = u64::from_le_bytes(word(e, 56));
        let kind = v >> 48 & 0xff;
        if v >> 56 != VALID_MAGIC || !(kind == UNDO || kind == COMMIT) || v as u32 == 0 {
            continue;
        }
        entries.push((slot, kind, (v >> 40 & 0xff) as usize, v as u32, e));
    }
    let Some(gen) = entries.iter().map(|e| e.3).max() else {
        return Ok(Recovered::default());
    };
    entries.retain(|e| e.3 == gen);
    if entries.iter().any(|e| e.1 == COMMIT) {
        return Ok(Recovered { gen, rolled_back: 0 });
    }
    let mut rolled_back = 0;
    let mut touched = Vec::new();
    for &(slot, _, n, _, e) in entries.iter().rev() {
        let at = u64::from_le_bytes(word(e, 48));
        let bad = n == 0
            || n > ENTRY_WORDS
            || at % 8 != 0
            || at.checked_add(8 * n as u64).is_none_or(|end| end > geo.size)
            || at / LINE != (at + 8 * n as u64 - 1) / LINE;
        if bad {
            return Err(PmfsError::Corrupt {
                at: geo.log_entry(slot as u32).0,
                reason: "undo entry names a range outside one line of the memory",
            });
        }
        if faults.skip_rollback {
            continue;
        }
        pm.store(core, PmAddr(at), &e[..8 * n], Purpose::UNTAGGED).await?;
        touched.push(at & !(LINE - 1));
        rolled_back += 1;
    }
    touched.sort_unstable();
    touched.dedup();
    for &line in &touched {
        pm.clwb(core, PmAddr(line)).await?;
    }
    if !touched.is_empty() {
        pm.sfence(core).await?;
    }
    Ok(Recovered { gen, rolled_back })
}
