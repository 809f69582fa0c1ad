//! Device-internal events the controller records in the bus trace (kind
//! `Device`, with these codes). They are what the power-failure model of
//! the media needs (see `power.rs`).

/// A media block's new content arrived in the controller (host data taken
/// by DMA, or zeros for Write Zeroes / deallocate). `addr` is the media
/// block; the payload is the whole block. It promises nothing until its
/// command completes (see `power.rs`); the drive programs it later
/// ([`MEDIA_WRITE`]).
pub const DATA_IN: u16 = 1;

/// A media block was programmed. `addr` is the block; the payload is the
/// block's content.
pub const MEDIA_WRITE: u16 = 2;

/// A Flush command completed. `addr` is the number of [`WRITE_DONE`]
/// events recorded before the Flush was submitted (its queue's doorbell
/// took effect): those writes are on the media now (NVMe 1.4 6.8: the
/// Flush applies to the commands completed before it was submitted).
pub const FLUSH_DONE: u16 = 3;

/// A write-type command (Write, Write Zeroes, Dataset Management with
/// deallocate) completed successfully: its completion entry was posted.
/// `attr` names the command, as on its [`DATA_IN`] events. With a volatile
/// write cache its blocks are durable only after a later Flush covers it.
pub const WRITE_DONE: u16 = 4;

/// As [`WRITE_DONE`], for a write durable at its completion: FUA set
/// (NVMe 1.4 6.15, Force Unit Access), the Volatile Write Cache feature
/// off (NVMe 1.4 5.21.1.6), or a cache with power-loss protection (no
/// volatile write cache to the host: Identify Controller VWC = 0).
pub const WRITE_DONE_DURABLE: u16 = 5;

/// A write-type command was fetched (before any of its data arrives).
/// `addr` is the trace index of the first event recorded after its
/// queue's doorbell took effect; `attr` names the command, as on its
/// [`DATA_IN`] events. NVMe lets the controller process the commands of
/// its queues in any order (NVMe 1.4 6.3), so from that point on the
/// command's blocks may have landed in some timing, though its data
/// arrived later in this one (`power.rs`).
pub const SUBMITTED: u16 = 6;

/// Name of an event code, for reports.
pub fn name(code: u16) -> &'static str {
    match code {
        DATA_IN => "data-in",
        MEDIA_WRITE => "media-write",
        FLUSH_DONE => "flush-done",
        WRITE_DONE => "write-done",
        WRITE_DONE_DURABLE => "write-done-durable",
        SUBMITTED => "submitted",
        _ => "device",
    }
}
