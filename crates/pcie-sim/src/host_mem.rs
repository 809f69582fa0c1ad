//! Host DRAM: byte-addressable memory that host software writes directly and
//! devices reach only by DMA through the root complex.
//!
//! DRAM is volatile: nothing here survives a power failure. Allocation is
//! page-granular (first fit over a free list that coalesces on free), which
//! is what queues, PRP lists and data buffers need.
//!
//! Pages are materialised on first write and dropped when an allocation
//! zeroes them, so a machine costs memory only for what its software
//! touches (crash exploration boots one machine per state).

use std::cell::RefCell;
use std::collections::BTreeMap;

use crate::addr::HostAddr;
use crate::error::PcieError;

/// Size of a host page.
pub const PAGE_SIZE: u64 = 4096;

type Page = Box<[u8; PAGE_SIZE as usize]>;

/// Page `p`, made (zeroed) if absent, growing the page vector to reach it.
fn page_mut(pages: &mut Vec<Option<Page>>, p: usize) -> &mut Page {
    if pages.len() <= p {
        pages.resize_with(p + 1, || None);
    }
    pages[p].get_or_insert_with(|| Box::new([0; PAGE_SIZE as usize]))
}

/// Page index and offset of byte address `a`.
fn page_of(a: usize) -> (usize, usize) {
    (a / PAGE_SIZE as usize, a % PAGE_SIZE as usize)
}

/// Host DRAM with a page allocator.
#[derive(Debug)]
pub struct HostMemory {
    size: u64,
    /// Page contents, by page index, up to the highest page ever written
    /// (the vector grows on demand, so a machine that touches a few pages
    /// of a large DRAM costs a few entries to make and to drop); `None`
    /// and pages past the end read as zeros.
    pages: RefCell<Vec<Option<Page>>>,
    /// Free ranges: start -> length, both page-aligned.
    free: RefCell<BTreeMap<u64, u64>>,
    /// Live allocations: start -> length.
    live: RefCell<BTreeMap<u64, u64>>,
}

impl HostMemory {
    /// DRAM of `size` bytes (rounded down to whole pages). Page 0 is never
    /// handed out, so that address 0 stays an invalid DMA target.
    pub fn new(size: u64) -> Self {
        let size = size / PAGE_SIZE * PAGE_SIZE;
        let mut free = BTreeMap::new();
        if size > PAGE_SIZE {
            free.insert(PAGE_SIZE, size - PAGE_SIZE);
        }
        HostMemory {
            size,
            pages: RefCell::new(Vec::new()),
            free: RefCell::new(free),
            live: RefCell::new(BTreeMap::new()),
        }
    }

    /// Size of DRAM in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// True if `[addr, addr + len)` lies inside DRAM.
    pub fn contains(&self, addr: HostAddr, len: u64) -> bool {
        addr.0.checked_add(len).is_some_and(|end| end <= self.size())
    }

    fn check(&self, addr: HostAddr, len: usize) -> Result<usize, PcieError> {
        if self.contains(addr, len as u64) {
            Ok(addr.0 as usize)
        } else {
            Err(PcieError::OutsideHostMemory {
                addr: addr.0,
                len: len as u64,
            })
        }
    }

    /// Copies `buf.len()` bytes at `addr` into `buf`.
    pub fn read(&self, addr: HostAddr, buf: &mut [u8]) -> Result<(), PcieError> {
        let a = self.check(addr, buf.len())?;
        let pages = self.pages.borrow();
        let mut done = 0;
        while done < buf.len() {
            let (p, o) = page_of(a + done);
            let n = (PAGE_SIZE as usize - o).min(buf.len() - done);
            match pages.get(p) {
                Some(Some(page)) => buf[done..done + n].copy_from_slice(&page[o..o + n]),
                _ => buf[done..done + n].fill(0),
            }
            done += n;
        }
        Ok(())
    }

    /// Appends the `len` bytes at `addr` to `out` (as [`HostMemory::read`]
    /// would copy them, without a zero-filled buffer to copy into). On an
    /// error `out` is unchanged.
    pub fn read_append(&self, addr: HostAddr, len: usize, out: &mut Vec<u8>) -> Result<(), PcieError> {
        let a = self.check(addr, len)?;
        let pages = self.pages.borrow();
        out.reserve(len);
        let mut done = 0;
        while done < len {
            let (p, o) = page_of(a + done);
            let n = (PAGE_SIZE as usize - o).min(len - done);
            match pages.get(p) {
                Some(Some(page)) => out.extend_from_slice(&page[o..o + n]),
                _ => out.resize(out.len() + n, 0),
            }
            done += n;
        }
        Ok(())
    }

    /// Copies `data` to `addr`.
    pub fn write(&self, addr: HostAddr, data: &[u8]) -> Result<(), PcieError> {
        let a = self.check(addr, data.len())?;
        let mut pages = self.pages.borrow_mut();
        let mut done = 0;
        while done < data.len() {
            let (p, o) = page_of(a + done);
            let n = (PAGE_SIZE as usize - o).min(data.len() - done);
            let page = page_mut(&mut pages, p);
            page[o..o + n].copy_from_slice(&data[done..done + n]);
            done += n;
        }
        Ok(())
    }

    /// Fills `len` bytes at `addr` with `value`.
    pub fn fill(&self, addr: HostAddr, len: usize, value: u8) -> Result<(), PcieError> {
        let a = self.check(addr, len)?;
        let mut pages = self.pages.borrow_mut();
        let mut done = 0;
        while done < len {
            let (p, o) = page_of(a + done);
            let n = (PAGE_SIZE as usize - o).min(len - done);
            let present = matches!(pages.get(p), Some(Some(_)));
            if value == 0 && n == PAGE_SIZE as usize {
                if present {
                    pages[p] = None;
                }
            } else if value != 0 || present {
                page_mut(&mut pages, p)[o..o + n].fill(value);
            }
            done += n;
        }
        Ok(())
    }

    /// Reads a little-endian u32.
    pub fn read_u32(&self, addr: HostAddr) -> Result<u32, PcieError> {
        let mut b = [0u8; 4];
        self.read(addr, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Reads a little-endian u64.
    pub fn read_u64(&self, addr: HostAddr) -> Result<u64, PcieError> {
        let mut b = [0u8; 8];
        self.read(addr, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    /// Allocates `len` bytes (rounded up to whole pages), page-aligned and
    /// zeroed.
    pub fn alloc(&self, len: u64) -> Result<HostAddr, PcieError> {
        let len = len.max(1).div_ceil(PAGE_SIZE) * PAGE_SIZE;
        let mut free = self.free.borrow_mut();
        let found = free.iter().find(|(_, l)| **l >= len).map(|(s, l)| (*s, *l));
        let Some((start, flen)) = found else {
            return Err(PcieError::HostOutOfMemory { requested: len });
        };
        free.remove(&start);
        if flen > len {
            free.insert(start + len, flen - len);
        }
        drop(free);
        self.live.borrow_mut().insert(start, len);
        self.fill(HostAddr(start), len as usize, 0)?;
        Ok(HostAddr(start))
    }

    /// Returns an allocation made by [`HostMemory::alloc`].
    pub fn free(&self, addr: HostAddr) -> Result<(), PcieError> {
        let Some(len) = self.live.borrow_mut().remove(&addr.0) else {
            return Err(PcieError::BadFree { addr: addr.0 });
        };
        let mut free = self.free.borrow_mut();
        let mut start = addr.0;
        let mut len = len;
        if let Some((&ps, &pl)) = free.range(..start).next_back() {
            if ps + pl == start {
                free.remove(&ps);
                start = ps;
                len += pl;
            }
        }
        if let Some(&nl) = free.get(&(start + len)) {
            free.remove(&(start + len));
            len += nl;
        }
        free.insert(start, len);
        Ok(())
    }

    /// Bytes currently allocated.
    pub fn allocated(&self) -> u64 {
        self.live.borrow().values().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_is_page_aligned_zeroed_and_reusable() {
        let m = HostMemory::new(64 * PAGE_SIZE);
        let a = m.alloc(100).unwrap();
        assert_eq!(a.0 % PAGE_SIZE, 0);
        assert_ne!(a.0, 0);
        m.write(a, &[7; 100]).unwrap();
        let b = m.alloc(2 * PAGE_SIZE).unwrap();
        assert_eq!(m.allocated(), 3 * PAGE_SIZE);
        m.free(a).unwrap();
        m.free(b).unwrap();
        assert_eq!(m.allocated(), 0);
        // Coalesced: the whole space is one range again.
        let all = m.alloc(63 * PAGE_SIZE).unwrap();
        assert_eq!(all.0, PAGE_SIZE);
        let mut buf = [1u8; 4];
        m.read(all, &mut buf).unwrap();
        assert_eq!(buf, [0; 4], "allocations are zeroed");
    }

    #[test]
    fn out_of_range_and_bad_free_are_errors() {
        let m = HostMemory::new(4 * PAGE_SIZE);
        let mut b = [0u8; 8];
        assert!(matches!(
            m.read(HostAddr(4 * PAGE_SIZE - 4), &mut b),
            Err(PcieError::OutsideHostMemory { .. })
        ));
        assert!(matches!(
            m.write(HostAddr(u64::MAX - 2), &b),
            Err(PcieError::OutsideHostMemory { .. })
        ));
        assert!(matches!(
            m.free(HostAddr(PAGE_SIZE)),
            Err(PcieError::BadFree { .. })
        ));
        assert!(matches!(
            m.alloc(100 * PAGE_SIZE),
            Err(PcieError::HostOutOfMemory { .. })
        ));
    }
}
