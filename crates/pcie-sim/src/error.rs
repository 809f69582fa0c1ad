//! The crate's error type.

/// Everything that can go wrong on the simulated bus.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PcieError {
    /// A DMA or host access outside host DRAM. On a real bus a DMA read of
    /// such an address gets an Unsupported Request completion.
    #[error("access of {len} bytes at {addr:#x} is outside host memory")]
    OutsideHostMemory {
        /// First byte addressed.
        addr: u64,
        /// Bytes addressed.
        len: u64,
    },
    /// Host DRAM has no free range of the requested size.
    #[error("host memory exhausted: cannot allocate {requested} bytes")]
    HostOutOfMemory {
        /// Bytes requested (whole pages).
        requested: u64,
    },
    /// `free` of an address that is not a live allocation.
    #[error("free of {addr:#x}, which is not an allocation")]
    BadFree {
        /// The address passed.
        addr: u64,
    },
    /// A CPU access to a bus address that no BAR decodes (a master abort).
    #[error("no device decodes bus address {addr:#x} (+{len} bytes)")]
    Unmapped {
        /// First byte addressed.
        addr: u64,
        /// Bytes addressed.
        len: u64,
    },
    /// The completer answered Unsupported Request (PCIe 3.0 2.3.1): the
    /// access was malformed for that target (size, alignment, a disabled
    /// region, an unimplemented register).
    #[error("unsupported request: {what} at {addr:#x}")]
    UnsupportedRequest {
        /// The bus address of the request.
        addr: u64,
        /// What the completer rejected.
        what: &'static str,
    },
    /// A write-combining store to memory that is not mapped WC.
    #[error("write-combining store to {addr:#x}, which is not a WC-mapped region")]
    NotWriteCombining {
        /// The store's address.
        addr: u64,
    },
    /// The request is larger than the model supports in one operation.
    #[error("access of {len} bytes is larger than {max}")]
    TooLarge {
        /// Bytes requested.
        len: u64,
        /// Largest allowed.
        max: u64,
    },
    /// A core index outside the machine.
    #[error("no core {0}")]
    NoSuchCore(usize),
    /// The bus trace was not recorded with the detail the request needs.
    #[error("the trace was recorded without {0}")]
    TraceDetail(&'static str),
    /// A crash point past the end of the trace.
    #[error("crash point {point} is past the end of the trace ({len} entries)")]
    CrashPointOutOfRange {
        /// The requested point.
        point: u64,
        /// Trace length.
        len: u64,
    },
    /// A crash choice that the persistence model does not allow.
    #[error("invalid crash choice: {0}")]
    BadChoice(&'static str),
    /// A persistent-memory access outside the persistent memory.
    #[error("persistent memory access of {len} bytes at {addr:#x} is outside its {size} bytes")]
    PmOutOfRange {
        /// First byte addressed (offset in the persistent memory).
        addr: u64,
        /// Bytes addressed.
        len: u64,
        /// Size of the persistent memory.
        size: u64,
    },
    /// A persistent-memory store that is not whole 8-byte-aligned words
    /// inside one 64-byte line (the model's store instructions: 8-byte
    /// `mov`/`movnti` up to a 64-byte vector store).
    #[error(
        "persistent memory store of {len} bytes at {addr:#x} is not aligned 8-byte words within one line"
    )]
    PmMisaligned {
        /// The store's offset in the persistent memory.
        addr: u64,
        /// Its length.
        len: u64,
    },
    /// A core of another machine was handed to this machine's device.
    #[error("core {0} belongs to another machine")]
    ForeignCore(usize),
    /// A persistent-memory profile that cannot be built.
    #[error("invalid persistent memory profile: {0}")]
    BadPmemProfile(&'static str),
}
