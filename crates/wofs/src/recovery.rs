//! Mount is recovery: scan every package slot, keep the packages whose
//! checksum and sequence number are valid, drop torn ones, and rebuild
//! the PTL and the free lists (slides, "Package Persistence"; the WOFS
//! code's scan, `bbuild.c`). There is nothing to replay: each package was
//! written whole or fails its checksum.
//!
//! The rules, in order:
//! 1. A slot that is all zero is empty; one that does not parse or fails
//!    its checksum is torn; both are free.
//! 2. Two valid packages with one sequence number: a corrupt image.
//! 3. A package named by a valid canceller (unlink, rename) by slot and
//!    sequence number is cancelled; the canceller holds that slot.
//! 4. Every entry package (create, link, rename) not cancelled is a live
//!    directory entry; the inodes are the ones live entries name.
//! 5. An inode's attribute package is its valid one with the highest
//!    sequence number; older ones, and those of dead inodes, are free.
//! 6. The tree must be a tree: each entry in a live directory, one name
//!    per entry, one entry per directory, all reachable from the root;
//!    live data pages in range and not shared. Otherwise a typed error.

use std::collections::{BTreeMap, BTreeSet};

use pcie_sim::pmem::MAX_PM_LOAD;
use pcie_sim::{Core, Pmem};

use crate::error::{Result, WofsError};
use crate::layout::{Geometry, SLOT};
use crate::package::{AttrBody, Body, FileType, Ino, Package, PkgRef, Slot, ROOT};
use crate::pmio;
use crate::ptl::{Entry, Inode, Ptl};
use crate::reclaim::Space;

/// Default permissions of the root directory.
pub const ROOT_PERM: u16 = 0o755;

fn corrupt(slot: u32, reason: &'static str) -> WofsError {
    WofsError::Corrupt { slot, reason }
}

/// Reads every slot and keeps the valid packages.
async fn read_slots(
    pm: &Pmem,
    core: &Core,
    geo: &Geometry,
    check_crc: bool,
) -> Result<BTreeMap<u32, Package>> {
    let per_load = (MAX_PM_LOAD as u64 / SLOT) as u32;
    let mut valid = BTreeMap::new();
    let mut seqs = BTreeSet::new();
    let mut first = 0u32;
    while first < geo.slots {
        let n = per_load.min(geo.slots - first);
        let bytes = pmio::load(pm, core, geo.slot_addr(first), (u64::from(n) * SLOT) as usize).await?;
        for (i, s) in bytes.chunks(SLOT as usize).enumerate() {
            let slot = first + i as u32;
            if let Slot::Valid(p) = Package::decode(s, check_crc) {
                if !seqs.insert(p.seq) {
                    return Err(corrupt(slot, "two packages with one sequence number"));
                }
                valid.insert(slot, p);
            }
        }
        first += n;
    }
    Ok(valid)
}

/// Rebuilds the PTL from the packages in the persistent memory.
pub async fn recover(
    pm: &Pmem,
    core: &Core,
    geo: &Geometry,
    check_crc: bool,
    early_reclaim: bool,
) -> Result<Ptl> {
    let valid = read_slots(pm, core, geo, check_crc).await?;
    let present = |r: &PkgRef| valid.get(&r.slot).is_some_and(|p| p.seq == r.seq);

    // Rule 3: cancellations and the holds they make.
    let mut cancelled = BTreeSet::new();
    let mut holds: Vec<(u32, u32)> = Vec::new();
    for (&slot, p) in &valid {
        for r in p.body.cancels() {
            if present(r) {
                cancelled.insert(r.slot);
                holds.push((slot, r.slot));
            }
        }
    }

    // Rule 4: live entries and their inodes.
    let mut ptl = Ptl::empty(Space::default(), ROOT_PERM);
    let mut live_slots = BTreeSet::new();
    for (&slot, p) in &valid {
        ptl.next_seq = ptl.next_seq.max(p.seq + 1);
        ptl.next_ino = ptl.next_ino.max(p.body.ino() + 1);
        let Some(d) = p.body.dentry() else { continue };
        if cancelled.contains(&slot) {
            continue;
        }
        if d.ino == ROOT {
            return Err(corrupt(slot, "an entry names the root"));
        }
        let ino = ptl
            .inodes
            .entry(d.ino)
            .or_insert_with(|| Inode::new(d.ftype, d.perm));
        if ino.ftype != d.ftype {
            return Err(corrupt(slot, "entries disagree on an inode's type"));
        }
        if d.ftype == FileType::Dir {
            ptl.dirs.entry(d.ino).or_default();
        }
        let dir = ptl.dirs.entry(d.parent).or_default();
        if dir.contains_key(&d.name) {
            return Err(corrupt(slot, "two live entries with one name"));
        }
        let pkg = PkgRef { slot, seq: p.seq };
        ptl.add_entry(d.parent, &d.name, Entry { ino: d.ino, pkg });
        live_slots.insert(slot);
    }

    // Rule 5: the newest attribute package of each live inode.
    let mut attrs: BTreeMap<Ino, (u32, u64, &AttrBody)> = BTreeMap::new();
    for (&slot, p) in &valid {
        if let Body::Attr(a) = &p.body {
            if ptl.inodes.contains_key(&a.ino) && attrs.get(&a.ino).is_none_or(|b| b.1 < p.seq) {
                attrs.insert(a.ino, (slot, p.seq, a));
            }
        }
    }
    let mut used_pages = BTreeSet::new();
    for (ino, (slot, seq, a)) in attrs {
        let Some(i) = ptl.inodes.get_mut(&ino) else {
            continue;
        };
        if i.ftype == FileType::Dir && (a.size != 0 || !a.pages.is_empty()) {
            return Err(corrupt(slot, "a directory with data"));
        }
        let needed = a.size.div_ceil(crate::layout::PAGE) as usize;
        for &pg in a.pages.iter().take(needed).filter(|&&pg| pg != 0) {
            if pg > geo.pages || !used_pages.insert(pg) {
                return Err(corrupt(slot, "a data page out of range or shared"));
            }
        }
        i.perm = a.perm;
        i.size = a.size;
        i.pages = a.pages.clone();
        i.pages.resize(needed, 0);
        i.attr = Some(PkgRef { slot, seq });
        live_slots.insert(slot);
    }

    check_tree(&ptl)?;
    ptl.space = rebuild_space(geo, &live_slots, &holds, &used_pages, early_reclaim);
    Ok(ptl)
}

/// Rule 6: every entry in a live directory, one entry per directory,
/// everything reachable from the root.
fn check_tree(ptl: &Ptl) -> Result<()> {
    for (&dir, entries) in &ptl.dirs {
        let Some(d) = ptl.inodes.get(&dir) else {
            let slot = entries.values().next().map_or(0, |e| e.pkg.slot);
            return Err(corrupt(slot, "an entry in a directory that does not exist"));
        };
        if d.ftype != FileType::Dir {
            let slot = entries.values().next().map_or(0, |e| e.pkg.slot);
            return Err(corrupt(slot, "an entry in a file"));
        }
        for e in entries.values() {
            let child = ptl
                .inodes
                .get(&e.ino)
                .ok_or(corrupt(e.pkg.slot, "an entry without inode"))?;
            if child.ftype == FileType::Dir && child.links.len() != 1 {
                return Err(corrupt(e.pkg.slot, "a directory with several entries"));
            }
        }
    }
    let mut seen = BTreeSet::from([ROOT]);
    let mut todo = vec![ROOT];
    while let Some(d) = todo.pop() {
        for e in ptl.dirs.get(&d).into_iter().flat_map(|m| m.values()) {
            if seen.insert(e.ino) && ptl.dirs.contains_key(&e.ino) {
                todo.push(e.ino);
            }
        }
    }
    if let Some((_, i)) = ptl.inodes.iter().find(|(ino, _)| !seen.contains(ino)) {
        let slot = i
            .links
            .iter()
            .next()
            .and_then(|(p, n)| ptl.dirs.get(p)?.get(n))
            .map_or(0, |e| e.pkg.slot);
        return Err(corrupt(slot, "a directory cycle cut off from the root"));
    }
    Ok(())
}

/// The free lists and the causal holds: a slot is in use if its package
/// is live or a canceller whose target is still readable.
fn rebuild_space(
    geo: &Geometry,
    live: &BTreeSet<u32>,
    holds: &[(u32, u32)],
    used_pages: &BTreeSet<u32>,
    early_reclaim: bool,
) -> Space {
    let holding: BTreeSet<u32> = if early_reclaim {
        BTreeSet::new()
    } else {
        holds.iter().map(|h| h.0).collect()
    };
    let free_slots = (0..geo.slots)
        .filter(|s| !live.contains(s) && !holding.contains(s))
        .collect();
    let free_pages = (1..=geo.pages).filter(|p| !used_pages.contains(p)).collect();
    let mut space = Space::new(free_slots, free_pages, early_reclaim);
    for &(c, t) in holds {
        space.hold(c, t);
    }
    for &c in &holding {
        if !live.contains(&c) {
            // Its own role is over: kept only for its targets.
            space.retire(c);
        }
    }
    space
}
