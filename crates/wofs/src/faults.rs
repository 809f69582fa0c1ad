//! Switches that turn one mechanism off each, so the crash tests can show
//! that mechanism is what keeps the file system consistent (a canary: the
//! crash checker must report every switch).

/// Mechanisms to switch off. The default switches nothing off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    /// Do not `clwb` a package's lines: under ADR the package may still be
    /// only in the cache when the operation returns.
    pub skip_clwb: bool,
    /// Do not `sfence` after a package: the operation returns before its
    /// package is persistent.
    pub skip_package_fence: bool,
    /// Do not `sfence` after the data pages a write fills: the package
    /// that makes them reachable may persist before them.
    pub skip_data_fence: bool,
    /// Recovery does not verify package checksums: a torn package that
    /// parses is accepted.
    pub skip_crc_check: bool,
    /// Free an unlink (or rename) package at once instead of keeping it
    /// until the package it cancels is reclaimed: recovery may resurrect
    /// the removed entry.
    pub early_unlink_reclaim: bool,
}
