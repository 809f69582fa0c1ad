//! The persistence idioms WOFS uses on the memory bus: a package written
//! once with one ordering point, data pages written before the package
//! that makes them reachable, and loads.

use pcie_sim::{Core, PmAddr, Pmem, Purpose};

use crate::error::Result;
use crate::faults::Faults;
use crate::layout::{LINE, PAGE};
use crate::options::{Options, PackageWrite};

/// Writes a package's bytes (whole words, one slot at most) at `at`, then
/// one `sfence`: the package's single ordering point (slides, "Key
/// Insight"; the OSDI '25 abstract: "write it once with a single ordering
/// point"). With [`PackageWrite::Cached`]: cached stores of up to a line
/// each and `clwb` of each line; with [`PackageWrite::NonTemporal`]:
/// non-temporal stores.
pub async fn persist_package(
    pm: &Pmem,
    core: &Core,
    at: PmAddr,
    bytes: &[u8],
    options: &Options,
) -> Result<()> {
    let faults = &options.faults;
    for (i, chunk) in bytes.chunks(LINE as usize).enumerate() {
        let line = at + i as u64 * LINE;
        match options.package_write {
            PackageWrite::Cached => pm.store(core, line, chunk, Purpose::UNTAGGED).await?,
            PackageWrite::NonTemporal => pm.nt_store(core, line, chunk, Purpose::UNTAGGED).await?,
        }
    }
    if options.package_write == PackageWrite::Cached && !faults.skip_clwb {
        for i in 0..bytes.len().div_ceil(LINE as usize) {
            pm.clwb(core, at + i as u64 * LINE).await?;
        }
    }
    if !faults.skip_package_fence {
        pm.sfence(core).await?;
    }
    Ok(())
}

/// Writes whole data pages with non-temporal stores, then one `sfence`,
/// so the pages are persistent before any package names them.
pub async fn persist_pages(
    pm: &Pmem,
    core: &Core,
    pages: &[(PmAddr, Vec<u8>)],
    faults: &Faults,
) -> Result<()> {
    if pages.is_empty() {
        return Ok(());
    }
    for (at, data) in pages {
        debug_assert_eq!(data.len() as u64, PAGE);
        for (i, chunk) in data.chunks(LINE as usize).enumerate() {
            pm.nt_store(core, *at + i as u64 * LINE, chunk, Purpose::UNTAGGED)
                .await?;
        }
    }
    if !faults.skip_data_fence {
        pm.sfence(core).await?;
    }
    Ok(())
}

/// Loads `len` bytes at `at`.
pub async fn load(pm: &Pmem, core: &Core, at: PmAddr, len: usize) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    pm.load(core, at, &mut buf).await?;
    Ok(buf)
}
