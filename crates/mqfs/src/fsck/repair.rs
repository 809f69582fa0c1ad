//! `fsck --repair`: fixes what the check reports and a repair can fix
//! without guessing, through the file system's own journaled metadata
//! writes (the mounted [`Fs`]'s buffer cache, journal and allocators), in
//! the order of e2fsck's passes:
//!
//! - **pass 1** (inodes, e2fsck/pass1.c): an inode's block count is set to
//!   the blocks it maps; a damaged inode no directory reaches is cleared
//!   (its slot zeroed, its bit cleared), as e2fsck clears an inode it
//!   cannot use;
//! - **pass 2** (directories, e2fsck/pass2.c): nothing is rewritten; damaged
//!   directory blocks and bad entries are reported as not fixed;
//! - **pass 3** (connectivity, e2fsck/pass3.c): a directory no path reaches
//!   is linked into `/lost+found` (made if missing, mode 0700, as
//!   `e2fsck_get_lost_and_found`) as `#<ino>` (`e2fsck_reconnect_file`),
//!   and its ".." is pointed there (`fix_dotdot`); only the top of each
//!   unreachable subtree is linked, the rest is reached through it;
//! - **pass 4** (reference counts, e2fsck/pass4.c): an unreachable inode
//!   with no link left (an orphan whose table entry is gone, or a file
//!   unlinked while open beyond the table) is freed (`disconnect_inode`);
//!   one with links is linked into `/lost+found` as `#<ino>`; every link
//!   count is set to the entries that name the inode;
//! - **pass 5** (bitmaps, e2fsck/pass5.c): both bitmaps are rebuilt from
//!   what the reachable inodes own, with group metadata, padding and the
//!   reserved inodes marked. Bits a used block or inode lacks are set
//!   *first*, before anything is allocated (so `lost+found` cannot take a
//!   block in use); leaked bits are cleared *last*. While a reachable inode
//!   is damaged (its blocks unknown), no block bit is cleared.
//!
//! Listed orphans (the orphan table) are freed by the mount the repair runs
//! on (`Fs::cleanup_orphans`, as e2fsck's `release_orphan_inodes` at the
//! start of its run).
//!
//! Each stage is planned from a fresh check of the file system as the
//! mounted [`Fs`] sees it (its buffer cache over the device), applied,
//! synced, and checked again, until a check plans nothing (or the same
//! plan twice). What is not repaired (blocks owned twice, damaged
//! directory blocks, bad entries, loops, damaged inodes still reached,
//! journal damage) stays in the final report.
//!
//! Deviation: metadata blocks a pass 5 clear releases (extent-tree blocks
//! of a freed inode) are not revoked in the journal; the repair's caller
//! unmounts cleanly afterwards, which checkpoints and empties the journal,
//! so no replay can bring their old contents back.

use std::rc::Rc;

use super::*;
use crate::fs::{Ctx, Fs, InodeState};

/// At most this many check-and-fix stages (each stage fixes one kind of
/// thing; five stages suffice for every fixable image, the rest are for
/// subtrees uncovered by a reconnection).
const MAX_STAGES: usize = 16;

/// The directory unreachable inodes are linked into (e2fsck's).
pub const LOST_AND_FOUND: &str = "lost+found";

/// A bitmap block and what it should hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BitmapFix {
    /// The bitmap block.
    pub block: u64,
    /// Its group.
    pub group: u32,
    /// True for an inode bitmap, false for a block bitmap.
    pub inodes: bool,
    /// What it should hold.
    pub want: Box<[u8; BLOCK]>,
    /// Bits to set (used but marked free).
    pub set: u64,
    /// Bits to clear (marked but unused).
    pub clear: u64,
}

/// What a repair would do to an image, from one check (see the module
/// docs for the passes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RepairPlan {
    /// The orphan table lists inodes (mount frees them).
    pub orphans_listed: bool,
    /// Pass 4: unreachable inodes with no link left, to free.
    pub free: Vec<u32>,
    /// Pass 1: unreachable damaged inodes marked in use, to clear.
    pub clear: Vec<u32>,
    /// Pass 3: unreachable directories with links.
    pub reconnect_dirs: Vec<u32>,
    /// Pass 4: unreachable non-directories with links, and their type.
    pub reconnect_files: Vec<(u32, FileType)>,
    /// Pass 4: (inode, link count, entries naming it).
    pub links: Vec<(u32, u16, u32)>,
    /// Pass 1: (inode, block count, blocks it maps).
    pub block_counts: Vec<(u32, u32, u32)>,
    /// Pass 5: bitmap blocks that differ from what they should hold.
    pub bitmaps: Vec<BitmapFix>,
    /// A reachable damaged inode: leaked blocks are kept (its blocks are
    /// unknown).
    pub keep_leaks: Option<u32>,
}

impl RepairPlan {
    /// True if there is nothing to repair.
    pub fn is_empty(&self) -> bool {
        !self.orphans_listed
            && self.free.is_empty()
            && self.clear.is_empty()
            && self.reconnect_dirs.is_empty()
            && self.reconnect_files.is_empty()
            && self.links.is_empty()
            && self.block_counts.is_empty()
            && self.bitmaps.is_empty()
    }
}

/// Checks `src` and plans its repair.
pub fn plan_repair(src: &dyn BlockSource) -> Result<(Report, RepairPlan), FsError> {
    let c = checked(src, &Options::default())?;
    let plan = c.plan();
    Ok((c.finish(), plan))
}

impl Checker<'_> {
    /// The repair of what this (finished) check found.
    pub(super) fn plan(&self) -> RepairPlan {
        let mut p = RepairPlan {
            orphans_listed: !self.orphans.is_empty(),
            ..RepairPlan::default()
        };
        let inodes = self.sb.inodes();
        for ino in 1..=inodes {
            let ino = ino as u32;
            if ino < FIRST_INO && ino != ROOT_INO {
                continue;
            }
            let i = ino as u64 - 1;
            let s = self.info[ino as usize];
            if self.reached.get(i) {
                if s.kind == Kind::Bad {
                    p.keep_leaks.get_or_insert(ino);
                }
                if s.kind.live() && s.links as u32 != s.refs {
                    p.links.push((ino, s.links, s.refs));
                }
                continue;
            }
            if !self.disk_ibm.get(i) {
                continue;
            }
            match (s.kind, s.kind.file_type()) {
                (Kind::Bad, _) => p.clear.push(ino),
                (_, Some(_)) if s.links == 0 => p.free.push(ino),
                (Kind::Dir, _) => p.reconnect_dirs.push(ino),
                (_, Some(t)) => p.reconnect_files.push((ino, t)),
                // A free slot marked in use: pass 5 clears its bit.
                _ => {}
            }
        }
        p.block_counts = self.nblocks_wrong.clone();
        self.plan_bitmaps(&mut p);
        p
    }

    /// True if inode `ino`'s bit should be set once the repair is done
    /// (reserved, reached and usable, or unreachable with links and not
    /// yet reconnected).
    fn inode_wanted(&self, ino: u64) -> bool {
        if ino < FIRST_INO as u64 {
            return true;
        }
        let i = ino - 1;
        let s = self.info[ino as usize];
        if self.reached.get(i) {
            return s.kind.live() || s.kind == Kind::Bad;
        }
        self.disk_ibm.get(i) && s.kind.live() && s.links > 0
    }

    fn plan_bitmaps(&self, p: &mut RepairPlan) {
        let sb = &self.sb;
        let ipg = sb.inodes_per_group as u64;
        let mut cur = Box::new([0u8; BLOCK]);
        for g in 0..sb.groups {
            let start = sb.group_start(g);
            let first = sb.first_data(g) - start;
            let n = sb.group_blocks(g);
            let block = sb.block_bitmap(g);
            self.src.read(block, &mut cur);
            let want = rebuilt(&cur, |bit| {
                if bit < first || bit >= n {
                    return true;
                }
                let abs = start + bit;
                self.claimed.get(abs) || (p.keep_leaks.is_some() && self.disk_bbm.get(abs))
            });
            push_fix(p, &cur, want, block, g, false);

            let block = sb.inode_bitmap(g);
            self.src.read(block, &mut cur);
            let want = rebuilt(&cur, |bit| {
                bit >= ipg || self.inode_wanted(g as u64 * ipg + bit + 1)
            });
            push_fix(p, &cur, want, block, g, true);
        }
    }
}

/// A bitmap block with bit `i` set where `want(i)`.
fn rebuilt(cur: &[u8; BLOCK], want: impl Fn(u64) -> bool) -> Box<[u8; BLOCK]> {
    let mut out = Box::new(*cur);
    for bit in 0..(BLOCK as u64 * 8) {
        let (byte, mask) = ((bit / 8) as usize, 1u8 << (bit % 8));
        if want(bit) {
            out[byte] |= mask;
        } else {
            out[byte] &= !mask;
        }
    }
    out
}

fn push_fix(
    p: &mut RepairPlan,
    cur: &[u8; BLOCK],
    want: Box<[u8; BLOCK]>,
    block: u64,
    group: u32,
    inodes: bool,
) {
    let set = cur
        .iter()
        .zip(want.iter())
        .map(|(c, w)| (!c & w).count_ones() as u64)
        .sum::<u64>();
    let clear = cur
        .iter()
        .zip(want.iter())
        .map(|(c, w)| (c & !w).count_ones() as u64)
        .sum::<u64>();
    if set + clear > 0 {
        p.bitmaps.push(BitmapFix {
            block,
            group,
            inodes,
            want,
            set,
            clear,
        });
    }
}

/// The file system as a mounted [`Fs`] sees it: its buffer cache (every
/// metadata block it read or wrote) over the device's blocks.
struct CacheView<'a> {
    fs: &'a Fs,
    base: &'a dyn BlockSource,
}

impl BlockSource for CacheView<'_> {
    fn blocks(&self) -> u64 {
        self.base.blocks()
    }

    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        match self.fs.bufs.get(block) {
            Some(c) => buf.copy_from_slice(&c.data()[..]),
            None => self.base.read(block, buf),
        }
    }
}

/// What a repair did, and the check after it.
#[derive(Clone, Debug)]
pub struct Repaired {
    /// One line per fix, in the order made.
    pub fixed: Vec<String>,
    /// The check of the repaired file system.
    pub report: Report,
}

impl Fs {
    /// Repairs this (just mounted) file system, whose device's blocks
    /// `base` reads without simulated time (see the module docs). Every
    /// change is a journaled metadata write; the file system is synced
    /// after each stage. Unmount it afterwards.
    pub async fn repair(&self, ctx: Ctx, base: Rc<dyn BlockSource>) -> Result<Repaired, FsError> {
        let mut fixed = Vec::new();
        let mut last: Option<RepairPlan> = None;
        for _ in 0..MAX_STAGES {
            let (_, plan) = plan_repair(&CacheView {
                fs: self,
                base: &*base,
            })?;
            if plan.is_empty() || last.as_ref() == Some(&plan) {
                break;
            }
            self.repair_stage(ctx, &plan, &mut fixed).await?;
            self.sync(ctx).await?;
            last = Some(plan);
        }
        let report = fsck(&CacheView {
            fs: self,
            base: &*base,
        })?;
        Ok(Repaired { fixed, report })
    }

    /// Applies the first stage of `plan` that has work: missing bitmap
    /// bits, then directories (pass 3), then inodes (passes 1 and 4), then
    /// counts (passes 1 and 4), then leaked bitmap bits (pass 5).
    async fn repair_stage(&self, ctx: Ctx, plan: &RepairPlan, log: &mut Vec<String>) -> Result<(), FsError> {
        let root = self.iget(ctx, ROOT_INO).await?;
        if plan.bitmaps.iter().any(|f| f.set > 0) {
            for f in plan.bitmaps.iter().filter(|f| f.set > 0) {
                self.write_bitmap(ctx, f, true, &root).await?;
                let what = if f.inodes { "inode" } else { "block" };
                log.push(format!(
                    "pass 5: group {}: {} {what}(s) in use marked in the {what} bitmap",
                    f.group, f.set
                ));
            }
            return Ok(());
        }
        if !plan.reconnect_dirs.is_empty() {
            return self.reconnect_dirs(ctx, &plan.reconnect_dirs, log).await;
        }
        if !plan.free.is_empty() || !plan.clear.is_empty() || !plan.reconnect_files.is_empty() {
            for &ino in &plan.free {
                let generation = match self.iget(ctx, ino).await {
                    Ok(st) => st.inode.borrow().generation,
                    Err(_) => 0,
                };
                self.release_slot(ctx, ino, generation, &root).await?;
                log.push(format!(
                    "pass 4: inode {ino}: unreachable with no link left, freed"
                ));
            }
            for &ino in &plan.clear {
                self.release_slot(ctx, ino, 0, &root).await?;
                log.push(format!("pass 1: inode {ino}: damaged and unreachable, cleared"));
            }
            if !plan.reconnect_files.is_empty() {
                let lf = self.lost_and_found(ctx, log).await?;
                for &(ino, ftype) in &plan.reconnect_files {
                    let child = self.iget(ctx, ino).await.ok();
                    self.reconnect(ctx, &lf, ino, ftype, child.as_deref(), log)
                        .await?;
                }
            }
            return Ok(());
        }
        if !plan.links.is_empty() || !plan.block_counts.is_empty() {
            for &(ino, have, want) in &plan.links {
                let Ok(want16) = u16::try_from(want) else {
                    log.push(format!("pass 4: inode {ino}: {want} entries name it, more than a link count holds: not fixed"));
                    continue;
                };
                let Ok(st) = self.iget(ctx, ino).await else {
                    continue;
                };
                st.inode.borrow_mut().links = want16;
                self.write_inode(ctx, &st).await?;
                log.push(format!("pass 4: inode {ino}: link count {have} set to {want}"));
            }
            for &(ino, have, want) in &plan.block_counts {
                let Ok(st) = self.iget(ctx, ino).await else {
                    continue;
                };
                st.inode.borrow_mut().nblocks = want;
                self.write_inode(ctx, &st).await?;
                log.push(format!("pass 1: inode {ino}: block count {have} set to {want}"));
            }
            return Ok(());
        }
        for f in &plan.bitmaps {
            self.write_bitmap(ctx, f, false, &root).await?;
            let what = if f.inodes { "inode" } else { "block" };
            log.push(format!(
                "pass 5: group {}: {} unused {what}(s) freed in the {what} bitmap",
                f.group, f.clear
            ));
        }
        if let Some(ino) = plan.keep_leaks {
            log.push(format!(
                "pass 5: leaked blocks kept: inode {ino} is damaged, so the blocks it owns are unknown"
            ));
        }
        Ok(())
    }

    /// Writes bitmap `f` (only its missing bits if `only_set`), on behalf
    /// of `owner`.
    async fn write_bitmap(
        &self,
        ctx: Ctx,
        f: &BitmapFix,
        only_set: bool,
        owner: &InodeState,
    ) -> Result<(), FsError> {
        let buf = self.meta(ctx, f.block).await?;
        {
            let _l = buf.lock.lock().await;
            let mut data = buf.modify();
            for (d, w) in data.iter_mut().zip(f.want.iter()) {
                *d = if only_set { *d | w } else { *w };
            }
        }
        self.dirtied(f.block, &[owner]);
        Ok(())
    }

    /// Writes `ino`'s slot free and clears its bit (its blocks are freed by
    /// the pass 5 rebuild, as no inode owns them any more).
    async fn release_slot(
        &self,
        ctx: Ctx,
        ino: u32,
        generation: u32,
        owner: &InodeState,
    ) -> Result<(), FsError> {
        self.write_free_slot(ctx, ino, generation, owner).await?;
        self.free_ino(ctx, owner, ino).await?;
        self.inodes.borrow_mut().remove(&ino);
        Ok(())
    }

    /// `/lost+found`, made if missing.
    async fn lost_and_found(&self, ctx: Ctx, log: &mut Vec<String>) -> Result<Rc<InodeState>, FsError> {
        let a = match self.lookup(ctx, ROOT_INO, LOST_AND_FOUND).await {
            Ok(a) => a,
            Err(FsError::NotFound) => {
                let a = self.mkdir(ctx, ROOT_INO, LOST_AND_FOUND, 0o700).await?;
                log.push(format!("pass 3: /{LOST_AND_FOUND} made (inode {})", a.ino));
                a
            }
            Err(e) => return Err(e),
        };
        if a.ftype != FileType::Dir {
            return Err(FsError::Corrupt(format!("/{LOST_AND_FOUND} is not a directory")));
        }
        self.iget(ctx, a.ino).await
    }

    /// Links `ino` into `lf` as `#<ino>` (if not there already).
    async fn reconnect(
        &self,
        ctx: Ctx,
        lf: &InodeState,
        ino: u32,
        ftype: FileType,
        child: Option<&InodeState>,
        log: &mut Vec<String>,
    ) -> Result<(), FsError> {
        let name = format!("#{ino}");
        if self.dir_lookup(ctx, lf, &name).await?.is_none() {
            self.dir_add(ctx, lf, &name, ino, ftype, child).await?;
            self.write_inode(ctx, lf).await?;
        }
        let pass = if ftype == FileType::Dir { 3 } else { 4 };
        log.push(format!(
            "pass {pass}: inode {ino}: unreachable, linked as /{LOST_AND_FOUND}/{name}"
        ));
        Ok(())
    }

    /// Pass 3: links the top of each unreachable subtree into
    /// `/lost+found` and points its ".." there (the rest is reached through
    /// it at the next stage).
    async fn reconnect_dirs(&self, ctx: Ctx, dirs: &[u32], log: &mut Vec<String>) -> Result<(), FsError> {
        let lf = self.lost_and_found(ctx, log).await?;
        let mut tops = Vec::new();
        for &d in dirs {
            let Ok(st) = self.iget(ctx, d).await else {
                log.push(format!(
                    "pass 3: directory {d}: cannot be loaded, not reconnected"
                ));
                continue;
            };
            let parent = self
                .dir_lookup(ctx, &st, "..")
                .await
                .ok()
                .flatten()
                .map(|(p, _)| p);
            // Below another unreachable directory: reached through it.
            if parent.is_some_and(|p| p != d && dirs.contains(&p)) {
                continue;
            }
            tops.push(st);
        }
        if tops.is_empty() {
            // A cycle of unreachable directories: break it at its first.
            if let Some(&d) = dirs.first() {
                if let Ok(st) = self.iget(ctx, d).await {
                    tops.push(st);
                }
            }
        }
        for st in tops {
            self.reconnect(ctx, &lf, st.ino, FileType::Dir, Some(&st), log)
                .await?;
            if self.dir_lookup(ctx, &st, "..").await?.is_some() {
                self.dir_replace(ctx, &st, "..", lf.ino, FileType::Dir, Some(&st))
                    .await?;
            } else {
                self.dir_add(ctx, &st, "..", lf.ino, FileType::Dir, Some(&st))
                    .await?;
            }
            lf.inode.borrow_mut().links += 1;
            self.write_inode(ctx, &lf).await?;
        }
        Ok(())
    }
}
