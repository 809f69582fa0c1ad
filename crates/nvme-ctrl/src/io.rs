//! NVM command set I/O commands (NVMe 1.4 section 6): Read, Write (with
//! FUA), Flush, Write Zeroes, Dataset Management (deallocate).
//!
//! Every check happens before anything is changed, so a rejected command
//! leaves media and cache as they were. The ccNVMe transaction fields
//! (dwords 2-3, dword 12 bits 19:16) are reserved in NVMe 1.4 and pass
//! through; only an impossible flag combination is refused.

use std::rc::Rc;
use std::sync::Arc;

use nvme_spec::traffic;
use pcie_sim::{BusAddr, Purpose};

use crate::controller::Controller;
use crate::engine::{attr, Outcome};
use crate::events;
use crate::media::{Block, BLOCK};
use crate::prp::PAGE;
use nvme_spec::command::{DsmRange, IoOpcode, SubmissionEntry};
use nvme_spec::completion::Status;

fn done(s: Status) -> Outcome {
    Outcome::Done(s, 0)
}

impl Controller {
    /// Executes an I/O command; `submitted_after` is how many write-type
    /// commands had completed when it was submitted (what a Flush covers).
    pub(crate) async fn io(
        self: &Rc<Self>,
        sqid: u16,
        sqe: &SubmissionEntry,
        submitted_after: u64,
    ) -> Outcome {
        if sqe.fuse() != 0 || sqe.psdt() != 0 {
            return done(Status::INVALID_FIELD);
        }
        let Ok(op) = IoOpcode::try_from(sqe.opcode()) else {
            return done(Status::INVALID_OPCODE);
        };
        // The ccNVMe flags are CDW12 bits of a known command: an unknown
        // opcode is Invalid Command Opcode whatever its dwords 10-15 hold
        // (this check used to come first and answered Invalid Field).
        if !sqe.tx_flags().is_valid() {
            return done(Status::INVALID_FIELD);
        }
        let nsid_ok = sqe.nsid() == 1 || (op == IoOpcode::Flush && sqe.nsid() == u32::MAX);
        if !nsid_ok {
            return done(Status::INVALID_NAMESPACE);
        }
        let a = attr(sqid, sqe.cid());
        let status = match op {
            IoOpcode::Read => self.read(sqe, a).await,
            IoOpcode::Write => self.write(sqe, a).await,
            IoOpcode::Flush => {
                self.sim.sleep(self.profile.admin_latency).await;
                self.backend.flush().await;
                self.port.record(events::FLUSH_DONE, submitted_after, 0, &[], a);
                Ok(())
            }
            IoOpcode::WriteZeroes => self.write_zeroes(sqe, a).await,
            IoOpcode::DatasetManagement => self.dataset_management(sqe, a).await,
        };
        done(status.err().unwrap_or(Status::SUCCESS))
    }

    /// Checks that `[slba, slba + count)` is inside the namespace.
    fn check_range(&self, slba: u64, count: u64) -> Result<(), Status> {
        match slba.checked_add(count) {
            Some(end) if end <= self.namespace_lbas() => Ok(()),
            _ => Err(Status::LBA_OUT_OF_RANGE),
        }
    }

    fn max_transfer(&self) -> u64 {
        PAGE << self.profile.mdts
    }

    fn lbas_per_block(&self) -> u64 {
        BLOCK as u64 / self.lba_size as u64
    }

    /// Media blocks covering LBAs `[slba, slba + count)`.
    fn blocks_of(&self, slba: u64, count: u64) -> std::ops::RangeInclusive<u64> {
        let lpb = self.lbas_per_block();
        (slba / lpb)..=((slba + count - 1) / lpb)
    }

    async fn read(&self, sqe: &SubmissionEntry, a: u32) -> Result<(), Status> {
        let (slba, count) = (sqe.slba(), sqe.block_count() as u64);
        self.check_range(slba, count)?;
        let bytes = count * self.lba_size as u64;
        if bytes > self.max_transfer() {
            return Err(Status::INVALID_FIELD);
        }
        let segs = self.prp_segments(sqe.prp1(), sqe.prp2(), bytes, a).await?;
        self.sim.sleep(self.profile.read_overhead).await;
        let blocks: Vec<u64> = self.blocks_of(slba, count).collect();
        let data = self.backend.read_blocks(&blocks).await;
        let lba = self.lba_size as usize;
        let first = (slba % self.lbas_per_block()) as usize * lba;
        let range = first..first + bytes as usize;
        match &data[..] {
            // One media block (the common 4 KiB read): sent from the block
            // itself, without gathering it into a buffer first.
            [blk] => self.dma_block_to_host(&segs, blk, range, traffic::DATA_BLOCK, a)?,
            _ => {
                let mut out = Vec::with_capacity(data.len() * BLOCK);
                for blk in &data {
                    out.extend_from_slice(&blk[..]);
                }
                self.dma_to_host(&segs, &out[range], traffic::DATA_BLOCK, a)?;
            }
        }
        let mut s = self.smart.borrow_mut();
        s.host_reads += 1;
        s.data_units_read += (bytes as u128).div_ceil(512_000);
        Ok(())
    }

    async fn write(&self, sqe: &SubmissionEntry, a: u32) -> Result<(), Status> {
        let (slba, count) = (sqe.slba(), sqe.block_count() as u64);
        self.check_range(slba, count)?;
        let bytes = count * self.lba_size as u64;
        if bytes > self.max_transfer() {
            return Err(Status::INVALID_FIELD);
        }
        let segs = self.prp_segments(sqe.prp1(), sqe.prp2(), bytes, a).await?;
        self.sim.sleep(self.profile.write_overhead).await;
        let lpb = self.lbas_per_block();
        let whole_block = slba % lpb == 0 && count == lpb;
        let blocks = match segs[..] {
            // One whole media block from one host page (the common 4 KiB
            // write): the bytes the DMA read brought are copied once into
            // the block's own page (no zero-filled block to copy into, no
            // gather buffer); same transfers as below.
            [(addr, n)] if whole_block && n == BLOCK as u64 && addr % BLOCK as u64 == 0 => {
                let blk = self
                    .port
                    .dma_read_page(BusAddr(addr), traffic::DATA_BLOCK, a)
                    .await
                    .map_err(|_| Status::DATA_TRANSFER_ERROR)?;
                vec![(slba / lpb, blk)]
            }
            // One whole media block in pieces: the DMA reads land in the
            // new block itself (no gather buffer, no merge copy).
            _ if whole_block && segs.iter().map(|s| s.1).sum::<u64>() == BLOCK as u64 => {
                let mut blk = crate::media::zero_block();
                self.dma_from_host_into(&segs, &mut Arc::make_mut(&mut blk)[..], traffic::DATA_BLOCK, a)
                    .await?;
                vec![(slba / lpb, blk)]
            }
            _ => {
                let data = self.dma_from_host(&segs, traffic::DATA_BLOCK, a).await?;
                self.merge(slba, count, Some(&data)).await
            }
        };
        self.backend.write(blocks, sqe.fua(), a).await;
        let mut s = self.smart.borrow_mut();
        s.host_writes += 1;
        s.data_units_written += (bytes as u128).div_ceil(512_000);
        Ok(())
    }

    async fn write_zeroes(&self, sqe: &SubmissionEntry, a: u32) -> Result<(), Status> {
        let (slba, count) = (sqe.slba(), sqe.block_count() as u64);
        self.check_range(slba, count)?;
        self.sim.sleep(self.profile.write_overhead).await;
        let blocks = self.merge(slba, count, None).await;
        self.backend.write(blocks, sqe.fua(), a).await;
        Ok(())
    }

    /// Dataset Management: with the Deallocate attribute, every range is
    /// deallocated (reads then return zeros, Identify DLFEAT). All ranges
    /// are checked before any is applied.
    async fn dataset_management(&self, sqe: &SubmissionEntry, a: u32) -> Result<(), Status> {
        let n = sqe.dsm_ranges() as u64;
        let bytes = n * 16;
        let segs = self.prp_segments(sqe.prp1(), sqe.prp2(), bytes, a).await?;
        let raw = self.dma_from_host(&segs, Purpose::UNTAGGED, a).await?;
        let ranges: Vec<DsmRange> = raw
            .chunks_exact(16)
            .map(|c| {
                let mut b = [0u8; 16];
                b.copy_from_slice(c);
                DsmRange::from_bytes(&b)
            })
            .collect();
        for r in &ranges {
            if r.nlb > 0 {
                self.check_range(r.slba, r.nlb as u64)?;
            }
        }
        if !sqe.dsm_deallocate() {
            return Ok(());
        }
        for r in ranges.iter().filter(|r| r.nlb > 0) {
            let blocks = self.merge(r.slba, r.nlb as u64, None).await;
            self.backend.write(blocks, false, a).await;
        }
        Ok(())
    }

    /// Builds the new content of every media block that LBAs
    /// `[slba, slba + count)` touch, from `data` (None: zeros). Blocks only
    /// partly covered (512-byte LBAs) are read first and merged.
    async fn merge(&self, slba: u64, count: u64, data: Option<&[u8]>) -> Vec<(u64, Block)> {
        let lba = self.lba_size as u64;
        let lpb = self.lbas_per_block();
        let mut out = Vec::new();
        for b in self.blocks_of(slba, count) {
            let first_lba = b * lpb;
            let lo = slba.max(first_lba);
            let hi = (slba + count).min(first_lba + lpb);
            let whole = lo == first_lba && hi == first_lba + lpb;
            // The new block is built in its own allocation (no 4 KiB value
            // moved through the stack): a whole block starts zeroed, a
            // partial one from the current content (copied if shared).
            let mut blk: Block = if whole {
                crate::media::zero_block()
            } else {
                let mut cur = self.backend.read_blocks(&[b]).await;
                match cur.pop() {
                    Some(c) => c,
                    None => unreachable!("read_blocks returns one block per block asked"),
                }
            };
            let buf = Arc::make_mut(&mut blk);
            let dst = ((lo - first_lba) * lba) as usize..((hi - first_lba) * lba) as usize;
            match data {
                Some(d) => {
                    let src = ((lo - slba) * lba) as usize;
                    let len = dst.len();
                    buf[dst].copy_from_slice(&d[src..src + len]);
                }
                None => buf[dst].fill(0),
            }
            out.push((b, blk));
        }
        out
    }
}
