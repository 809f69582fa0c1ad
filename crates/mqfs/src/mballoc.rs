//! Block allocation as ext4's multiblock allocator does it (Linux 4.18
//! `fs/ext4/mballoc.c`): every block the file system allocates comes from
//! `Fs::mb_new_block`, and every block it frees goes back through
//! `Fs::free_block`.
//!
//! # What is modelled
//!
//! - **Goal.** A file block's goal is the device block after the extent at
//!   or before it, offset by the distance (`ext4_ext_find_goal`); a file
//!   with no extent there aims at the first data block of its inode's group
//!   (`ext4_inode_to_goal_block` with delayed allocation: `bg_start`).
//! - **The buddy.** ext4 searches an in-memory buddy built from the on-disk
//!   bitmap plus the preallocations (`ext4_mb_generate_buddy`,
//!   `ext4_mb_generate_from_pa`). Here a block is free for a search when
//!   its on-disk bit is clear, no preallocation holds it and no allocation
//!   under way has claimed it (`Mballoc::is_free`); the bitmap buffers
//!   are the only copy of the bits.
//! - **Regular allocator** (`ext4_mb_regular_allocator`, simplified): the
//!   first run of free blocks of the wanted length at or after the goal,
//!   group by group from the goal's; with none long enough anywhere, the
//!   longest run seen (ext4's last criterion takes any free extent). One
//!   run costs [`crate::FsProfile::mb_search_cycles`] per group scanned.
//! - **Which requests preallocate** (`ext4_mb_group_or_file`): only
//!   regular-file data (`EXT4_MB_HINT_DATA`); directory, extent-tree and
//!   xattr blocks are exact single-block requests at their goal. A file
//!   whose size (the larger of its size and the request's end) is at most
//!   [`crate::FsProfile::mb_stream_request`] blocks takes its blocks from
//!   its core's locality-group preallocation of
//!   [`crate::FsProfile::mb_group_prealloc`] blocks (`s_locality_groups`,
//!   per CPU, `ext4_mb_use_group_pa`, whose start moves past each block
//!   handed out, so no two preallocations ever reserve the same block); a
//!   larger one (stream allocation)
//!   gets a per-inode window (`i_prealloc_list`, `ext4_mb_use_inode_pa`).
//! - **Window size** ([`normalized_window`], `ext4_mb_normalize_request`):
//!   the file's size in bytes (the larger of `i_size` and the request's
//!   end) rounded up to 16, 32, 64, 128, 256, 512 KiB or 1 MiB (window
//!   starting at file block 0); up to 4 MiB a 2 MiB-aligned 2 MiB chunk, up
//!   to 8 MiB a 4 MiB chunk, above an 8 MiB chunk, each around the
//!   requested block. The window is trimmed so it covers no mapped block
//!   and no other window of the file (the left and right neighbours and
//!   the inode's preallocations), and aims physically right after the left
//!   neighbour when it touches it. With a shorter free run only, the
//!   window shrinks around the requested block (`ext4_mb_new_inode_pa`).
//! - **The on-disk bitmap** is marked only for blocks actually used, one
//!   block per request (`ext4_mb_mark_diskspace_used` marks `ac_b_ex`,
//!   which `ext4_mb_use_inode_pa` set to the used part): a window lives in
//!   memory only, so a crash loses it and leaks nothing, and fsck finds
//!   the on-disk bitmap equal to the blocks files own in every mode. The
//!   bitmap search runs once per window; the blocks after the first come
//!   from the window without a search (`ext4_mb_use_preallocated`).
//!   [`crate::FsProfile::mb_mark_window_on_disk`] switches this off for
//!   fault injection (the whole window is marked at once, as a naive
//!   design would), which fsck catches after a crash as leaked blocks.
//! - **Release** (`Fs::discard_preallocations`,
//!   `ext4_discard_preallocations`): at the last close of a file
//!   (`ext4_release_file`), at truncate, punch and free of its blocks, and
//!   for everyone at `NoSpace`: a failed search discards every
//!   preallocation not in use and searches once more
//!   (`ext4_mb_discard_preallocations`). A locality-group window is
//!   released only then, or when used up.
//!
//! # Deviations
//!
//! - mqfs allocates at `write` time, one block per request (no delayed
//!   allocation): a request is one block and the file's size is its size
//!   before the write, so a file's first 16 blocks always come from the
//!   locality group; Linux's writeback asks for a whole dirty range at
//!   once and marks the bitmap once for it.
//! - Freed blocks are free for a search at once (ext4 returns them to the
//!   buddy at commit, `ext4_free_data_callback`); the journals track the
//!   reuse instead (`note_reused`, `note_freed`).
//! - The regular allocator is first fit from the goal, not ext4's criteria
//!   0 to 3 over buddy orders and average fragment sizes.
//! - Any last close discards (mqfs does not track the access mode; Linux
//!   discards at the last writer's close). A `NoSpace` discard skips no
//!   window (none is ever in use across an await: a block taken from a
//!   window is claimed first).
//! - [`crate::FsProfile::mb_prealloc`] off makes every request an exact
//!   single-block request at its goal (`EXT4_MB_HINT_NOPREALLOC` on every
//!   request).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};

use crate::error::FsError;
use crate::fs::{Ctx, Fs, Ino, InodeState};
use crate::layout::{FileType, Superblock, BLOCK};

/// Who a preallocation belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PaOwner {
    /// A per-inode window over file blocks `lstart ..` (`MB_INODE_PA`).
    Inode { ino: Ino, lstart: u32 },
    /// A core's locality group (`MB_GROUP_PA`): handed out from the front,
    /// its start moving past each block it hands out.
    Group { core: usize },
}

/// One preallocation (`struct ext4_prealloc_space`), keyed by its first
/// device block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Prealloc {
    owner: PaOwner,
    /// Device blocks it spans (`pa_len`).
    len: u32,
    /// Blocks not handed out yet (`pa_free`).
    free: u32,
}

impl Prealloc {
    /// The device blocks it reserves, from its start: a window's whole
    /// span (its used blocks are marked on disk and so not free anyway); a
    /// locality group's blocks not handed out, which is all of its span
    /// (its start moves past each block it hands out,
    /// [`Mballoc::take_from`]).
    fn reserved(&self) -> u64 {
        match self.owner {
            PaOwner::Inode { .. } => self.len as u64,
            PaOwner::Group { .. } => self.free as u64,
        }
    }
}

/// Counters of the allocator, for tests and reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MbStats {
    /// Runs of the regular allocator (bitmap searches).
    pub searches: u64,
    /// Windows created (per-inode and locality-group preallocations).
    pub windows: u64,
    /// Blocks handed out from a window without a search.
    pub from_window: u64,
    /// Modifications of an on-disk block bitmap by an allocation.
    pub bitmap_marks: u64,
    /// Unused window blocks given back by discards.
    pub discarded: u64,
    /// Discards of every preallocation after a failed search (`NoSpace`).
    pub enospc_discards: u64,
}

/// The allocator's in-memory state (`ext4_sb_info`'s preallocation lists
/// and the inode's `i_prealloc_list` together, keyed by device block).
#[derive(Debug, Default)]
pub struct Mballoc {
    pas: RefCell<BTreeMap<u64, Prealloc>>,
    /// Blocks taken by an allocation under way, not yet marked on disk.
    claimed: RefCell<BTreeSet<u64>>,
    stats: Cell<MbStats>,
}

impl Mballoc {
    fn count(&self, f: impl FnOnce(&mut MbStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    /// True if block `b` (clear in its on-disk `bitmap`, bit `bit`) is free
    /// for a search: no preallocation holds it and no allocation claimed it.
    fn is_free(&self, bitmap: &[u8], bit: u64, b: u64) -> bool {
        bitmap[(bit / 8) as usize] & (1 << (bit % 8)) == 0
            && !self.claimed.borrow().contains(&b)
            && !self.reserved(b)
    }

    /// True if a preallocation reserves block `b`. Their reserved spans
    /// never overlap (a window is made of free, unreserved blocks; a
    /// locality group spans only what it still holds), so the one starting
    /// nearest at or before `b` is the only one that can.
    fn reserved(&self, b: u64) -> bool {
        self.pas
            .borrow()
            .range(..=b)
            .next_back()
            .is_some_and(|(s, pa)| b < s + pa.reserved())
    }

    /// The free run at bit `bit` of group `start`'s bitmap, at most `want`
    /// long and not past bit `n`.
    fn run_at(&self, bitmap: &[u8], start: u64, bit: u64, n: u64, want: u64) -> u64 {
        (bit..n.min(bit + want))
            .take_while(|&k| self.is_free(bitmap, k, start + k))
            .count() as u64
    }

    /// The window of inode `ino` holding file block `fb`, as (its start,
    /// the device block of `fb`).
    fn inode_window(&self, ino: Ino, fb: u32) -> Option<(u64, u64)> {
        self.pas.borrow().iter().find_map(|(s, pa)| match pa.owner {
            PaOwner::Inode { ino: i, lstart } if i == ino && fb >= lstart && fb - lstart < pa.len => {
                Some((*s, s + (fb - lstart) as u64))
            }
            _ => None,
        })
    }

    /// The windows of inode `ino` as file-block ranges.
    fn inode_windows(&self, ino: Ino) -> Vec<(u32, u32)> {
        self.pas
            .borrow()
            .values()
            .filter_map(|pa| match pa.owner {
                PaOwner::Inode { ino: i, lstart } if i == ino => Some((lstart, lstart + pa.len)),
                _ => None,
            })
            .collect()
    }

    /// The locality-group window of `core` with a block left, nearest to
    /// `goal` (`ext4_mb_check_group_pa`), as (its start, its next block).
    fn group_window(&self, core: usize, goal: u64) -> Option<(u64, u64)> {
        self.pas
            .borrow()
            .iter()
            .filter(|(_, pa)| pa.owner == PaOwner::Group { core } && pa.free > 0)
            .map(|(s, _)| (*s, *s))
            .min_by_key(|(_, next)| next.abs_diff(goal))
    }

    /// Hands out one block of the preallocation at `start`; a used-up one
    /// goes (`ext4_mb_put_pa` with `pa_free` 0). A locality group hands out
    /// its first block and starts after it (`ext4_mb_use_group_pa`:
    /// `pa_pstart += len`), so it never spans a block it handed out: once
    /// freed, such a block may go to a window of its own, and the group's
    /// span must not hide that window's from [`Mballoc::reserved`].
    fn take_from(&self, start: u64) {
        let mut pas = self.pas.borrow_mut();
        let Some(mut pa) = pas.remove(&start) else {
            return;
        };
        pa.free = pa.free.saturating_sub(1);
        if pa.free == 0 {
            return;
        }
        match pa.owner {
            PaOwner::Group { .. } => {
                pa.len = pa.free;
                pas.insert(start + 1, pa);
            }
            PaOwner::Inode { .. } => {
                pas.insert(start, pa);
            }
        }
    }

    /// Drops the preallocations `which` selects, returning the unused
    /// blocks they gave back.
    fn discard(&self, which: impl Fn(&PaOwner) -> bool) -> u64 {
        let mut freed = 0;
        self.pas.borrow_mut().retain(|_, pa| {
            let keep = !which(&pa.owner);
            if !keep {
                freed += pa.free as u64;
            }
            keep
        });
        self.count(|s| s.discarded += freed);
        freed
    }
}

/// The window `ext4_mb_normalize_request` asks for a request of `len` file
/// blocks at `fb` of a file of `size` bytes: (first file block, blocks),
/// before trimming to the file's neighbours. 4 KiB blocks.
pub fn normalized_window(fb: u32, len: u32, size: u64) -> (u64, u64) {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * KIB;
    let b = BLOCK as u64;
    let end = (fb as u64 + len as u64) * b;
    let size = end.max(size);
    let chunk = |c: u64| {
        let start = (fb as u64 * b) / c * c;
        (start / b, c / b)
    };
    match size {
        s if s <= 1024 * KIB => (0, s.max(16 * KIB).next_power_of_two() / b),
        s if s <= 4 * MIB => chunk(2 * MIB),
        s if s <= 8 * MIB => chunk(4 * MIB),
        _ if len as u64 * b <= 8 * MIB => chunk(8 * MIB),
        _ => (fb as u64, len as u64),
    }
}

/// What kind of request an allocation is (`ext4_mb_group_or_file`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// An exact single block at the goal (metadata, or preallocation off).
    Exact,
    /// Stream allocation: a per-inode window over `[lstart, lstart + len)`.
    Stream { fb: u32, lstart: u64, len: u64 },
    /// A small file: the core's locality group.
    Group,
}

impl Fs {
    /// The allocator's counters.
    pub fn mb_stats(&self) -> MbStats {
        self.mb.stats.get()
    }

    /// Blocks preallocated and not used yet: inode `ino`'s windows, or
    /// every window (`None`). They are free on disk.
    pub fn preallocated_blocks(&self, ino: Option<Ino>) -> u64 {
        self.mb
            .pas
            .borrow()
            .values()
            .filter(|pa| match (ino, pa.owner) {
                (None, _) => true,
                (Some(i), PaOwner::Inode { ino, .. }) => i == ino,
                (Some(_), PaOwner::Group { .. }) => false,
            })
            .map(|pa| pa.free as u64)
            .sum()
    }

    /// Drops the windows of `st` (`ext4_discard_preallocations`): at its
    /// last close, and before its blocks are unmapped (truncate, punch,
    /// free). Their unused blocks were never marked on disk.
    pub(crate) fn discard_preallocations(&self, st: &InodeState) {
        let ino = st.ino;
        self.mb
            .discard(|o| matches!(o, PaOwner::Inode { ino: i, .. } if *i == ino));
    }

    /// The goal of file block `fb` of `st` (`ext4_ext_find_goal`): after
    /// the extent at or before it, else the first data block of the inode's
    /// group (`ext4_inode_to_goal_block`).
    pub(crate) fn goal_of(&self, st: &InodeState, fb: u32) -> u64 {
        let near = {
            let i = st.inode.borrow();
            i.tree.at_or_before(fb).or_else(|| i.tree.first())
        };
        match near {
            Some(e) if fb >= e.logical => e.physical + (fb - e.logical) as u64,
            Some(e) => e.physical.saturating_sub((e.logical - fb) as u64),
            None => {
                let sb = self.sb.borrow();
                let g = ((st.ino.max(1) - 1) / sb.inodes_per_group.max(1)).min(sb.groups.saturating_sub(1));
                sb.first_data(g)
            }
        }
    }

    /// The kind of request for file block `fb` of `st`
    /// (`ext4_mb_group_or_file`, `ext4_mb_normalize_request`).
    fn kind_of(&self, st: &InodeState, fb: u32) -> Kind {
        let i = st.inode.borrow();
        if !self.profile.mb_prealloc || i.file_type() != Some(FileType::File) {
            return Kind::Exact;
        }
        let size_blocks = i.size.div_ceil(BLOCK as u64).max(fb as u64 + 1);
        if size_blocks <= self.profile.mb_stream_request as u64 {
            return Kind::Group;
        }
        let (mut lstart, len) = normalized_window(fb, 1, i.size);
        let mut end = (lstart + len).min(u32::MAX as u64 - 1);
        // Trim to the neighbours: no mapped block, no other window.
        let fbl = fb as u64;
        if let Some(left) = fb.checked_sub(1).and_then(|k| i.tree.at_or_before(k)) {
            lstart = lstart.max(left.end().min(fbl));
        }
        if let Some(right) = i.tree.starting_in(fb + 1, u32::MAX).first() {
            end = end.min(right.logical as u64);
        }
        for (a, b) in self.mb.inode_windows(st.ino) {
            if b as u64 <= fbl {
                lstart = lstart.max(b as u64);
            } else if a as u64 > fbl {
                end = end.min(a as u64);
            }
        }
        if end <= fbl || lstart > fbl {
            return Kind::Exact;
        }
        Kind::Stream {
            fb,
            lstart,
            len: end - lstart,
        }
    }

    /// Allocates one block on behalf of `owner` (`ext4_mb_new_blocks`):
    /// file block `fb` of `owner` when given (data: goal, windows), else one
    /// block at `goal` (metadata). Marks it in its on-disk bitmap. Without
    /// room, discards every preallocation and tries once more.
    pub(crate) async fn mb_new_block(
        &self,
        ctx: Ctx,
        owner: &InodeState,
        fb: Option<u32>,
        goal: u64,
    ) -> Result<u64, FsError> {
        match self.mb_try(ctx, owner, fb, goal).await {
            Err(FsError::NoSpace) if !self.mb.pas.borrow().is_empty() => {
                self.mb.count(|s| s.enospc_discards += 1);
                self.mb.discard(|_| true);
                self.mb_try(ctx, owner, fb, goal).await
            }
            r => r,
        }
    }

    async fn mb_try(&self, ctx: Ctx, owner: &InodeState, fb: Option<u32>, goal: u64) -> Result<u64, FsError> {
        let goal = match fb {
            Some(f) => self.goal_of(owner, f),
            None => goal,
        };
        let kind = fb.map_or(Kind::Exact, |f| self.kind_of(owner, f));
        // ext4_mb_use_preallocated: a window already holding the block.
        let from_window = match (kind, fb) {
            (Kind::Stream { .. } | Kind::Exact, Some(f)) if self.profile.mb_prealloc => {
                self.mb.inode_window(owner.ino, f)
            }
            (Kind::Group, _) => self.mb.group_window(ctx.core, goal),
            _ => None,
        };
        let b = match from_window {
            Some((start, b)) => {
                self.cycles(ctx, self.profile.mb_window_cycles).await;
                // Claimed before the await below, so no search takes it.
                self.mb.claimed.borrow_mut().insert(b);
                self.mb.take_from(start);
                self.mb.count(|s| s.from_window += 1);
                b
            }
            None => self.mb_search(ctx, owner, ctx.core, goal, kind).await?,
        };
        let marked = self.mark_used(ctx, owner, b).await;
        self.mb.claimed.borrow_mut().remove(&b);
        marked?;
        Ok(b)
    }

    /// The regular allocator (`ext4_mb_regular_allocator`): finds a free
    /// run near `goal`, makes the window `kind` asks for of it
    /// (`ext4_mb_new_preallocation`) and claims the block the request gets.
    async fn mb_search(
        &self,
        ctx: Ctx,
        owner: &InodeState,
        core: usize,
        goal: u64,
        kind: Kind,
    ) -> Result<u64, FsError> {
        let want = match kind {
            Kind::Exact => 1,
            Kind::Stream { len, .. } => len,
            Kind::Group => self.profile.mb_group_prealloc.max(1) as u64,
        };
        self.mb.count(|s| s.searches += 1);
        let (at, run) = loop {
            if let Some(found) = self.search_run(ctx, goal, want).await? {
                break found;
            }
        };
        // From here to the return, no await: the run stays free.
        let b = match kind {
            Kind::Exact => at,
            Kind::Stream { fb, lstart, len } => {
                let fbl = fb as u64;
                // A shorter run: the window keeps the request inside
                // (ext4_mb_new_inode_pa's `win`).
                let lstart = if run < len {
                    let mut win = (fbl - lstart).min(run - 1);
                    let offs = fbl % run;
                    if offs != 0 && offs < win {
                        win = offs;
                    }
                    fbl - win
                } else {
                    lstart
                };
                let len = run.min(len);
                self.mb.pas.borrow_mut().insert(
                    at,
                    Prealloc {
                        owner: PaOwner::Inode {
                            ino: owner.ino,
                            lstart: lstart as u32,
                        },
                        len: len as u32,
                        free: len as u32,
                    },
                );
                at + (fbl - lstart)
            }
            Kind::Group => {
                self.mb.pas.borrow_mut().insert(
                    at,
                    Prealloc {
                        owner: PaOwner::Group { core },
                        len: run as u32,
                        free: run as u32,
                    },
                );
                at
            }
        };
        self.mb.claimed.borrow_mut().insert(b);
        if kind != Kind::Exact {
            let len = self.mb.pas.borrow().get(&at).map_or(1, |pa| pa.len as u64);
            self.mb.take_from(at);
            self.mb.count(|s| s.windows += 1);
            if self.profile.mb_mark_window_on_disk {
                self.mark_window_on_disk(ctx, owner, at, len.max(1), b).await?;
            }
        }
        Ok(b)
    }

    /// One scan for a free run of `want` blocks at or after `goal`, group
    /// by group from the goal's: the first run that long, else the longest
    /// seen (`Ok(None)` when that one was taken meanwhile: scan again).
    async fn search_run(&self, ctx: Ctx, goal: u64, want: u64) -> Result<Option<(u64, u64)>, FsError> {
        let sb = self.sb.borrow().clone();
        let start_group = sb.group_of(goal).unwrap_or(0);
        // The longest run seen: its bitmap, group, first bit and length.
        let mut best: Option<(std::rc::Rc<crate::cache::CachedBlock>, u32, u64, u64)> = None;
        for i in 0..sb.groups {
            let g = (start_group + i) % sb.groups;
            self.cycles(ctx, self.profile.mb_search_cycles).await;
            let bm = self.meta(ctx, sb.block_bitmap(g)).await?;
            let gs = sb.group_start(g);
            let first = sb.first_data(g) - gs;
            let n = sb.group_blocks(g);
            let hint = if i == 0 {
                goal.checked_sub(gs)
                    .filter(|h| *h < n && *h >= first)
                    .unwrap_or(first)
            } else {
                first
            };
            let data = bm.data();
            'scan: for (lo, hi) in [(hint, n), (first, hint)] {
                let mut bit = lo;
                while bit < hi {
                    let run = self.mb.run_at(&data[..], gs, bit, hi, want);
                    if run == 0 {
                        bit += 1;
                        continue;
                    }
                    if best.as_ref().is_none_or(|(_, _, _, l)| run > *l) {
                        best = Some((bm.clone(), g, bit, run));
                    }
                    if run >= want {
                        break 'scan;
                    }
                    bit += run;
                }
            }
            drop(data);
            if best.as_ref().is_some_and(|(_, _, _, l)| *l >= want) {
                break;
            }
        }
        let Some((bm, g, bit, _)) = best else {
            return Err(FsError::NoSpace);
        };
        // Awaits since the run was seen: measure it again.
        let gs = sb.group_start(g);
        let run = self.mb.run_at(&bm.data()[..], gs, bit, sb.group_blocks(g), want);
        Ok((run > 0).then_some((gs + bit, run)))
    }

    /// Fault injection ([`crate::FsProfile::mb_mark_window_on_disk`]):
    /// marks window `[at, at + len)` on disk at once, but for `b`, which
    /// the caller marks.
    async fn mark_window_on_disk(
        &self,
        ctx: Ctx,
        owner: &InodeState,
        at: u64,
        len: u64,
        b: u64,
    ) -> Result<(), FsError> {
        for x in (at..at + len).filter(|x| *x != b) {
            self.mark_used(ctx, owner, x).await?;
        }
        Ok(())
    }

    /// Marks block `b` (claimed) in its on-disk bitmap on behalf of `owner`
    /// (`ext4_mb_mark_diskspace_used`).
    async fn mark_used(&self, ctx: Ctx, owner: &InodeState, b: u64) -> Result<(), FsError> {
        self.cycles(ctx, self.profile.cpu.alloc_cycles).await;
        let sb: Superblock = self.sb.borrow().clone();
        let g = sb
            .group_of(b)
            .ok_or_else(|| FsError::Corrupt(format!("allocation of block {b} outside the groups")))?;
        let bit = b - sb.group_start(g);
        let bm = self.meta(ctx, sb.block_bitmap(g)).await?;
        {
            let _l = bm.lock.lock().await;
            let byte = (bit / 8) as usize;
            if bm.data()[byte] & (1 << (bit % 8)) != 0 {
                // Only a window's fault-injected marks may be there already.
                if self.profile.mb_mark_window_on_disk {
                    return Ok(());
                }
                return Err(FsError::Corrupt(format!("block {b} allocated twice")));
            }
            bm.modify()[byte] |= 1 << (bit % 8);
        }
        self.mb.count(|s| s.bitmap_marks += 1);
        self.dirtied(sb.block_bitmap(g), &[owner]);
        if let Some(j) = self.journal.borrow().as_ref() {
            j.note_reused(b, owner);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A locality group that handed out its first three blocks, the last
    /// two since freed and made into a file's window: the group still
    /// reserves its tail behind the window (before the fix the lookup saw
    /// only the window, the nearest start, and let blocks 103.. go).
    #[test]
    fn a_window_in_a_groups_front_does_not_hide_the_groups_tail() {
        let mb = Mballoc::default();
        let group = Prealloc {
            owner: PaOwner::Group { core: 0 },
            len: 10,
            free: 10,
        };
        mb.pas.borrow_mut().insert(100, group);
        for start in 100..103 {
            mb.take_from(start);
        }
        let window = Prealloc {
            owner: PaOwner::Inode { ino: 11, lstart: 0 },
            len: 2,
            free: 2,
        };
        mb.pas.borrow_mut().insert(101, window);
        let reserved: Vec<u64> = (98..112).filter(|b| mb.reserved(*b)).collect();
        assert_eq!(reserved, vec![101, 102, 103, 104, 105, 106, 107, 108, 109]);
        // The group hands out its next block from the front.
        assert_eq!(mb.group_window(0, 0), Some((103, 103)));
    }

    #[test]
    fn small_files_round_up_to_a_power_of_two_from_block_zero() {
        assert_eq!(normalized_window(0, 1, 0), (0, 4));
        assert_eq!(normalized_window(4, 1, 16 * 1024), (0, 8));
        assert_eq!(normalized_window(16, 1, 64 * 1024), (0, 32));
        assert_eq!(normalized_window(255, 1, 1020 * 1024), (0, 256));
    }

    #[test]
    fn large_files_take_aligned_chunks() {
        // 1 MiB + 4 KiB: a 2 MiB chunk holding block 256.
        assert_eq!(normalized_window(256, 1, 1024 * 1024), (0, 512));
        assert_eq!(normalized_window(600, 1, 600 * 4096), (512, 512));
        // 5 MiB: a 4 MiB chunk.
        assert_eq!(normalized_window(1280, 1, 5 << 20), (1024, 1024));
        // 9 MiB: an 8 MiB chunk.
        assert_eq!(normalized_window(2304, 1, 9 << 20), (2048, 2048));
        // A request above 8 MiB is taken as asked.
        assert_eq!(normalized_window(4096, 4096, 0), (4096, 4096));
    }

    proptest::proptest! {
        #[test]
        fn the_window_holds_the_request(fb in 0u32..1_000_000, size in 0u64..(1 << 34)) {
            let (s, l) = normalized_window(fb, 1, size);
            proptest::prop_assert!(s <= fb as u64 && (fb as u64) < s + l);
            proptest::prop_assert!(l <= 2048 || l == 1);
        }
    }
}
