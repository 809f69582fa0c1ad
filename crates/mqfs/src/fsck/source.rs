//! Where fsck reads blocks from: anything that implements ccnvme's
//! [`BlockSource`], a read-only view of a drive's logical blocks. The
//! controller emulator implements it for its drive, media and image types
//! (without simulated time, so fsck stays fast enough to run per crash
//! state), and byte buffers implement it for raw images; mqfs names no
//! emulator type.

pub use ccnvme::BlockSource;
