//! Physical Region Page lists (NVMe 1.4 4.3) and the data transfers they
//! describe. Memory page size is 4 KiB (CC.MPS = 0).

use nvme_spec::traffic;
use pcie_sim::{BusAddr, Purpose};

use crate::controller::Controller;
use nvme_spec::completion::Status;

/// Host memory page size (CC.MPS = 0).
pub const PAGE: u64 = 4096;

/// Most PRP list entries the controller walks for one command (MDTS
/// bounds real commands far below this; it stops a malicious list early).
const MAX_ENTRIES: u64 = 1 << 16;

impl Controller {
    /// Turns PRP1/PRP2 of a command moving `len` bytes into host memory
    /// segments (address, length). PRP1 may start anywhere dword-aligned in
    /// a page; every later entry must be page-aligned (Invalid PRP Offset
    /// otherwise). When the data spans more than two pages, PRP2 points to
    /// a PRP list (qword-aligned), whose last entry chains to the next list
    /// page when more entries are needed. List pages are fetched by DMA.
    pub(crate) async fn prp_segments(
        &self,
        prp1: u64,
        prp2: u64,
        len: u64,
        attr: u32,
    ) -> Result<Vec<(u64, u64)>, Status> {
        if len == 0 {
            return Ok(Vec::new());
        }
        if prp1 & 3 != 0 {
            return Err(Status::INVALID_PRP_OFFSET);
        }
        let first = len.min(PAGE - prp1 % PAGE);
        let mut segs = vec![(prp1, first)];
        let mut rest = len - first;
        if rest == 0 {
            return Ok(segs);
        }
        if rest <= PAGE {
            if prp2 % PAGE != 0 {
                return Err(Status::INVALID_PRP_OFFSET);
            }
            segs.push((prp2, rest));
            return Ok(segs);
        }
        if prp2 & 7 != 0 {
            return Err(Status::INVALID_PRP_OFFSET);
        }
        let mut list = prp2;
        let mut walked = 0u64;
        while rest > 0 {
            // Entries left in this list page, and entries still needed.
            let in_page = (PAGE - list % PAGE) / 8;
            let needed = rest.div_ceil(PAGE);
            let (take, chain) = if needed <= in_page {
                (needed, false)
            } else {
                (in_page - 1, true)
            };
            let fetch = take + chain as u64;
            walked += fetch;
            if walked > MAX_ENTRIES {
                return Err(Status::INVALID_FIELD);
            }
            let mut raw = vec![0u8; (fetch * 8) as usize];
            self.port
                .dma_read(BusAddr(list), &mut raw, traffic::PRP_LIST, attr)
                .await
                .map_err(|_| Status::DATA_TRANSFER_ERROR)?;
            let entry = |i: u64| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&raw[(i * 8) as usize..(i * 8 + 8) as usize]);
                u64::from_le_bytes(b)
            };
            for i in 0..take {
                let e = entry(i);
                if e % PAGE != 0 {
                    return Err(Status::INVALID_PRP_OFFSET);
                }
                let n = rest.min(PAGE);
                segs.push((e, n));
                rest -= n;
            }
            if chain {
                let next = entry(take);
                if next % PAGE != 0 {
                    return Err(Status::INVALID_PRP_OFFSET);
                }
                list = next;
            }
        }
        Ok(segs)
    }

    /// Reads the data of `segs` from host memory (one DMA per segment).
    pub(crate) async fn dma_from_host(
        &self,
        segs: &[(u64, u64)],
        purpose: Purpose,
        attr: u32,
    ) -> Result<Vec<u8>, Status> {
        let total: u64 = segs.iter().map(|s| s.1).sum();
        let mut out = vec![0u8; total as usize];
        self.dma_from_host_into(segs, &mut out, purpose, attr).await?;
        Ok(out)
    }

    /// Reads the data of `segs` from host memory into `out` (one DMA per
    /// segment; `out` holds their total).
    pub(crate) async fn dma_from_host_into(
        &self,
        segs: &[(u64, u64)],
        out: &mut [u8],
        purpose: Purpose,
        attr: u32,
    ) -> Result<(), Status> {
        let mut off = 0usize;
        for &(a, n) in segs {
            let Some(dst) = out.get_mut(off..off + n as usize) else {
                unreachable!("the buffer holds every segment (callers size it by their total)");
            };
            self.port
                .dma_read(BusAddr(a), dst, purpose, attr)
                .await
                .map_err(|_| Status::DATA_TRANSFER_ERROR)?;
            off += n as usize;
        }
        Ok(())
    }

    /// Writes bytes `range` of a stored media block to host memory along
    /// `segs`, as [`Controller::dma_to_host`] does; one segment (a read
    /// into one host page, the common case) is sent from the block itself
    /// ([`pcie_sim::port::DevicePort::dma_write_shared`]), without a copy.
    pub(crate) fn dma_block_to_host(
        &self,
        segs: &[(u64, u64)],
        block: &crate::media::Block,
        range: std::ops::Range<usize>,
        purpose: Purpose,
        attr: u32,
    ) -> Result<(), Status> {
        match segs {
            [(a, n)] if !range.is_empty() && *n as usize >= range.len() => {
                self.port
                    .dma_write_shared(BusAddr(*a), block, range, purpose, attr)
                    .map_err(|_| Status::DATA_TRANSFER_ERROR)?;
                Ok(())
            }
            _ => self.dma_to_host(segs, &block[range], purpose, attr),
        }
    }

    /// Writes `data` to host memory along `segs` (one DMA per segment).
    pub(crate) fn dma_to_host(
        &self,
        segs: &[(u64, u64)],
        data: &[u8],
        purpose: Purpose,
        attr: u32,
    ) -> Result<(), Status> {
        let mut off = 0usize;
        for &(a, n) in segs {
            let end = (off + n as usize).min(data.len());
            if off >= end {
                break;
            }
            self.port
                .dma_write(BusAddr(a), &data[off..end], purpose, attr)
                .map_err(|_| Status::DATA_TRANSFER_ERROR)?;
            off = end;
        }
        Ok(())
    }
}
