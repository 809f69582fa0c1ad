//! fallocate(2): preallocation, hole punching and range zeroing with
//! unwritten extents, as Ext4 does them (`fs/ext4/extents.c`
//! `ext4_fallocate`, `ext4_alloc_file_blocks`, `ext4_punch_hole`,
//! `ext4_zero_range`).
//!
//! Preallocated blocks are mapped by *unwritten* extents
//! ([`Extent::unwritten`]): reads return zeros without touching the
//! device, and a write converts the blocks it writes to written (Ext4's
//! `ext4_ext_convert_to_initialized`, here when the page is dirtied; the
//! conversion reaches the media only in the transaction or fsync that also
//! writes the data, ordered after it, so a crash never exposes a block's
//! old content). Every change here is metadata (extents, bitmaps, size),
//! persisted by each mode's fsync like any other inode change.
//!
//! Extents live in the file's extent tree ([`crate::extent_tree`]).
//! Adjacent extents in the same state are merged; an operation that needs
//! a block it cannot get (for data or the tree) fails with `NoSpace`
//! before anything changed (Ext4 can fail part-way with a partial
//! allocation; here the whole call is undone).

use crate::data::MAX_FILE;
use crate::error::FsError;
use crate::extent_tree::ExtentTree;
use crate::fs::{Ctx, Fs, Ino, InodeState};
use crate::layout::{merge_extents, Extent, FileType, BLOCK};

/// What [`Fs::fallocate`] does with the range (fallocate(2) modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FallocMode {
    /// Mode 0: allocate the range's holes (reading as zeros) and extend
    /// the size to the range's end.
    Allocate,
    /// `FALLOC_FL_KEEP_SIZE`: allocate without changing the size (blocks
    /// past the end of file stay allocated until a truncate).
    KeepSize,
    /// `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`: free the whole blocks
    /// of the range and zero its partial blocks; the size is unchanged.
    PunchHole,
    /// `FALLOC_FL_ZERO_RANGE`: make the range read as zeros (whole blocks
    /// become unwritten, partial ones are zeroed, holes are allocated) and
    /// extend the size to the range's end.
    ZeroRange,
    /// `FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE`: the same without
    /// changing the size.
    ZeroRangeKeepSize,
}

const B: u64 = BLOCK as u64;

/// The extents of `old` with file blocks `[from, to)` replaced by what
/// `f` makes of each piece inside the range (None: unmapped). Pieces
/// outside the range are kept as they are.
fn split_range(old: &[Extent], from: u64, to: u64, f: impl Fn(Extent) -> Option<Extent>) -> Vec<Extent> {
    let mut out = Vec::with_capacity(old.len() + 2);
    for e in old {
        let (s, end) = (e.logical as u64, e.end());
        let piece = |a: u64, b: u64| Extent {
            logical: a as u32,
            len: (b - a) as u32,
            physical: e.physical + (a - s),
            unwritten: e.unwritten,
        };
        let (a, b) = (s.max(from), end.min(to));
        if a >= b {
            out.push(*e);
            continue;
        }
        if s < a {
            out.push(piece(s, a));
        }
        if let Some(x) = f(piece(a, b)) {
            out.push(x);
        }
        if b < end {
            out.push(piece(b, end));
        }
    }
    out
}

/// The unmapped file blocks of `[from, to)` given sorted `extents`.
fn holes(extents: &[Extent], from: u64, to: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut pos = from;
    for e in extents {
        if e.end() <= pos {
            continue;
        }
        if e.logical as u64 >= to {
            break;
        }
        out.extend(pos..(e.logical as u64).min(to));
        pos = pos.max(e.end());
    }
    out.extend(pos..to);
    out
}

impl Fs {
    /// The device block of file block `fb` if it is mapped and written
    /// (an unwritten block reads as zeros).
    pub(crate) fn bmap_written(st: &InodeState, fb: u32) -> Option<u64> {
        st.inode
            .borrow()
            .tree
            .lookup(fb)
            .filter(|e| !e.unwritten)
            .map(|e| e.physical + (fb - e.logical) as u64)
    }

    /// Makes file block `fb` writable for a write: maps a hole to a new
    /// block, or converts an unwritten block to written (its old content
    /// is dead, like a new block's). Fails with the file unchanged.
    pub(crate) async fn map_for_write(&self, ctx: Ctx, st: &InodeState, fb: u32) -> Result<u64, FsError> {
        let Some(b) = Fs::bmap(st, fb) else {
            return self.map_new(ctx, st, fb).await;
        };
        let fb = fb as u64;
        let old = Fs::window(st, fb, fb + 1);
        let new = split_range(&old, fb, fb + 1, |e| {
            Some(Extent {
                unwritten: false,
                ..e
            })
        });
        self.install_extents(ctx, st, &old, new, &[]).await?;
        st.new_blocks.borrow_mut().insert(b);
        Ok(b)
    }

    /// The extents of `st` that overlap file blocks `[from, to)` or touch
    /// them (the one ending at `from` and the one starting at `to`, which
    /// a change of the range may merge with): the window
    /// [`Fs::install_extents`] replaces.
    fn window(st: &InodeState, from: u64, to: u64) -> Vec<Extent> {
        let i = st.inode.borrow();
        let start = match from.checked_sub(1).and_then(|k| i.tree.at_or_before(k as u32)) {
            Some(e) if e.end() >= from => e.logical as u64,
            _ => from,
        };
        // Past the last file block nothing starts.
        i.tree.starting_in(start as u32, to.min(u32::MAX as u64) as u32)
    }

    /// Replaces the extents `old` of `st` (a window from [`Fs::window`])
    /// by `new` (merged), taking the tree blocks the edit needs first.
    /// `allocated`: blocks the caller allocated for them, freed again if
    /// this fails (`NoSpace` without a block for the tree), leaving `st` as
    /// it was. The block count is recomputed.
    async fn install_extents(
        &self,
        ctx: Ctx,
        st: &InodeState,
        old: &[Extent],
        mut new: Vec<Extent>,
        allocated: &[u64],
    ) -> Result<(), FsError> {
        merge_extents(&mut new);
        // Only what changed is edited: the common ends stay.
        let pre = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
        let suf = old[pre..]
            .iter()
            .rev()
            .zip(new[pre..].iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let (gone, added) = (&old[pre..old.len() - suf], &new[pre..new.len() - suf]);
        let edit = |t: &mut ExtentTree, alloc: &mut dyn FnMut() -> u64| {
            for e in gone {
                t.remove(e.logical);
            }
            for e in added {
                t.insert(*e, alloc);
            }
        };
        // Count the blocks the edit takes on a copy, then take them.
        let mut need = 0u64;
        edit(&mut st.inode.borrow().tree.clone(), &mut || {
            need += 1;
            u64::MAX - need
        });
        let goal = new.first().map_or(0, |e| e.physical);
        let mut nodes = Vec::new();
        let mut failed = None;
        for _ in 0..need {
            match self.mb_new_block(ctx, st, None, goal).await {
                Ok(b) => nodes.push(b),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            for b in nodes.iter().chain(allocated) {
                self.free_block(ctx, st, *b, false).await?;
            }
            return Err(e);
        }
        nodes.reverse();
        let mut i = st.inode.borrow_mut();
        let nodes_before = i.tree.node_count() as i64;
        edit(&mut i.tree, &mut || Fs::next_taken(&mut nodes));
        debug_assert!(nodes.is_empty(), "the real edit takes what the copy took");
        let blocks = |v: &[Extent]| v.iter().map(|e| e.len as i64).sum::<i64>();
        let delta = blocks(added) - blocks(gone) + i.tree.node_count() as i64 - nodes_before;
        i.nblocks = (i.nblocks as i64 + delta).max(0) as u32;
        Ok(())
    }

    /// Allocates the holes of file blocks `[from, to)` as unwritten blocks
    /// and returns the window of extents around the range ([`Fs::window`]),
    /// the window with them and the blocks (not installed). On failure
    /// frees what it took.
    async fn alloc_holes(
        &self,
        ctx: Ctx,
        st: &InodeState,
        from: u64,
        to: u64,
    ) -> Result<(Vec<Extent>, Vec<Extent>, Vec<u64>), FsError> {
        let old = Fs::window(st, from, to);
        let mut extents = old.clone();
        let hs = holes(&extents, from, to);
        let mut taken = Vec::with_capacity(hs.len());
        for fb in hs {
            match self.mb_new_block(ctx, st, Some(fb as u32), 0).await {
                Ok(b) => {
                    taken.push(b);
                    extents.push(Extent {
                        logical: fb as u32,
                        len: 1,
                        physical: b,
                        unwritten: true,
                    });
                }
                Err(e) => {
                    for b in taken {
                        self.free_block(ctx, st, b, false).await?;
                    }
                    return Err(e);
                }
            }
        }
        merge_extents(&mut extents);
        Ok((old, extents, taken))
    }

    /// Zeroes bytes `[from, to)` of one file block through its page, when
    /// they may hold data: a written block's, or a cached page's. Holes and
    /// unwritten blocks read as zeros already.
    async fn zero_in_block(&self, ctx: Ctx, st: &InodeState, from: u64, to: u64) -> Result<(), FsError> {
        if from >= to {
            return Ok(());
        }
        let fb = (from / B) as u32;
        if st.pages.get(fb).is_none() && Fs::bmap_written(st, fb).is_none() {
            return Ok(());
        }
        let page = self.data_page(ctx, st, fb).await?;
        let _l = page.lock.lock().await;
        let (a, b) = ((from % B) as usize, (to - fb as u64 * B) as usize);
        page.modify()[a..b].fill(0);
        self.note_dirty_pages(st.ino);
        Ok(())
    }

    /// fallocate(2) on `ino` for bytes `[off, off + len)`; see
    /// [`FallocMode`]. Errors: `Invalid` (EINVAL) for a zero length,
    /// `TooBig` (EFBIG) for a range past the largest file, `NoSpace`, `IsDir` for
    /// a directory and `NotRegular` (ENODEV) for other non-files. On an
    /// error nothing changed.
    pub async fn fallocate(
        &self,
        ctx: Ctx,
        ino: Ino,
        mode: FallocMode,
        off: u64,
        len: u64,
    ) -> Result<(), FsError> {
        if len == 0 {
            return Err(FsError::Invalid("fallocate of zero bytes".into()));
        }
        // vfs_fallocate: past s_maxbytes, or overflowing, is EFBIG.
        let end = off.checked_add(len).ok_or(FsError::TooBig)?;
        if end > MAX_FILE {
            return Err(FsError::TooBig);
        }
        self.check_writable()?;
        let _op = self.begin(ctx).await?;
        let st = self.iget(ctx, ino).await?;
        match st.inode.borrow().file_type() {
            Some(FileType::File) => {}
            Some(FileType::Dir) => return Err(FsError::IsDir),
            _ => return Err(FsError::NotRegular),
        }
        let _g = st.lock.lock().await;
        let size = st.inode.borrow().size;
        let (first, last) = (off / B, end.div_ceil(B));
        let grows = match mode {
            FallocMode::Allocate | FallocMode::KeepSize => {
                let (old, new, taken) = self.alloc_holes(ctx, &st, first, last).await?;
                self.install_extents(ctx, &st, &old, new, &taken).await?;
                mode == FallocMode::Allocate
            }
            FallocMode::PunchHole => {
                // ext4_punch_hole: nothing past i_size; the range ends at
                // most at the end of the block holding i_size.
                if off >= size {
                    return Ok(());
                }
                let end = end.min(size + B - size % B);
                // ext4_punch_hole discards the file's preallocations.
                self.discard_preallocations(&st);
                self.punch(ctx, &st, off, end).await?;
                false
            }
            FallocMode::ZeroRange | FallocMode::ZeroRangeKeepSize => {
                // ext4_zero_range frees the range's blocks as a punch does.
                self.discard_preallocations(&st);
                self.zero_range(ctx, &st, off, end).await?;
                mode == FallocMode::ZeroRange
            }
        };
        let now = self.current_time();
        {
            let mut i = st.inode.borrow_mut();
            if grows && end > i.size {
                i.size = end;
            }
            if mode != FallocMode::KeepSize {
                i.mtime = now;
            }
            i.ctime = now;
        }
        st.size_dirty.set(true);
        self.write_inode(ctx, &st).await
    }

    /// Punches `[off, end)`: whole blocks unmapped and freed (their pages
    /// dropped), partial blocks zeroed (`ext4_punch_hole`).
    async fn punch(&self, ctx: Ctx, st: &InodeState, off: u64, end: u64) -> Result<(), FsError> {
        let (full_from, full_to) = (off.div_ceil(B), end / B);
        if full_from < full_to {
            let freed = std::cell::RefCell::new(Vec::new());
            let old = Fs::window(st, full_from, full_to);
            let new = split_range(&old, full_from, full_to, |e| {
                freed
                    .borrow_mut()
                    .extend((0..e.len as u64).map(|k| e.physical + k));
                None
            });
            self.install_extents(ctx, st, &old, new, &[]).await?;
            for b in freed.into_inner() {
                self.free_block(ctx, st, b, false).await?;
            }
            st.pages.remove_range(full_from as u32, full_to as u32);
        }
        self.zero_edges(ctx, st, off, end, full_from, full_to).await
    }

    /// Zeroes the partial blocks at the edges of `[off, end)`, whose whole
    /// blocks are `[full_from, full_to)`.
    async fn zero_edges(
        &self,
        ctx: Ctx,
        st: &InodeState,
        off: u64,
        end: u64,
        full_from: u64,
        full_to: u64,
    ) -> Result<(), FsError> {
        if full_from > full_to {
            // Inside one block.
            return self.zero_in_block(ctx, st, off, end).await;
        }
        self.zero_in_block(ctx, st, off, full_from * B).await?;
        self.zero_in_block(ctx, st, (full_to * B).max(off), end).await
    }

    /// Zeroes `[off, end)` (`ext4_zero_range`): the range's holes are
    /// allocated unwritten, its whole written blocks converted to
    /// unwritten (their pages dropped), its partial blocks zeroed.
    async fn zero_range(&self, ctx: Ctx, st: &InodeState, off: u64, end: u64) -> Result<(), FsError> {
        let (full_from, full_to) = (off.div_ceil(B), end / B);
        let (old, with_holes, taken) = self.alloc_holes(ctx, st, off / B, end.div_ceil(B)).await?;
        let new = if full_from < full_to {
            split_range(&with_holes, full_from, full_to, |e| {
                Some(Extent { unwritten: true, ..e })
            })
        } else {
            with_holes
        };
        self.install_extents(ctx, st, &old, new, &taken).await?;
        if full_from < full_to {
            st.pages.remove_range(full_from as u32, full_to as u32);
        }
        self.zero_edges(ctx, st, off, end, full_from, full_to).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(logical: u32, len: u32, physical: u64, unwritten: bool) -> Extent {
        Extent {
            logical,
            len,
            physical,
            unwritten,
        }
    }

    #[test]
    fn split_range_cuts_pieces_and_holes_finds_gaps() {
        let old = vec![e(0, 10, 100, false), e(20, 5, 300, true)];
        let new = split_range(&old, 3, 22, |x| Some(Extent { unwritten: true, ..x }));
        assert_eq!(
            new,
            vec![
                e(0, 3, 100, false),
                e(3, 7, 103, true),
                e(20, 2, 300, true),
                e(22, 3, 302, true)
            ]
        );
        let mut m = new.clone();
        merge_extents(&mut m);
        assert_eq!(
            m,
            vec![e(0, 3, 100, false), e(3, 7, 103, true), e(20, 5, 300, true)]
        );
        let cut = split_range(&old, 5, 6, |_| None);
        assert_eq!(
            cut,
            vec![e(0, 5, 100, false), e(6, 4, 106, false), e(20, 5, 300, true)]
        );
        assert_eq!(
            holes(&old, 8, 27),
            vec![10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 25, 26]
        );
        assert_eq!(holes(&old, 0, 10), Vec::<u64>::new());
        assert_eq!(holes(&[], 2, 4), vec![2, 3]);
    }
}
