//! Device-internal events the controller records in the bus trace (kind
//! `Device`, with these codes). They are what the power-failure model of
//! the media needs (see `power.rs`).

/// A media block's new content arrived in the controller (host data taken
/// by DMA, or zeros for Write Zeroes / deallocate). `addr` is the media
/// block; the payload is the whole block. With power-loss protection this
/// is the point of durability; without, the data is volatile until a
/// [`MEDIA_WRITE`] of the block.
pub const DATA_IN: u16 = 1;

/// A media block was programmed. `addr` is the block; the payload is the
/// block's content.
pub const MEDIA_WRITE: u16 = 2;

/// A Flush command completed: every write completed before it was
/// submitted is on the media. (Informational: the model derives durability
/// from the `MEDIA_WRITE` events.)
pub const FLUSH_DONE: u16 = 3;

/// Name of an event code, for reports.
pub fn name(code: u16) -> &'static str {
    match code {
        DATA_IN => "data-in",
        MEDIA_WRITE => "media-write",
        FLUSH_DONE => "flush-done",
        _ => "device",
    }
}
