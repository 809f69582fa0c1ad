//! The subcommands: `mkfs`, `mount`, `fsck` and `stat`.

pub mod fsck;
pub mod mkfs;
pub mod mount;
pub mod stat;

use mqfs::layout::{Superblock, BLOCK};

use crate::error::CliError;
use crate::image::LockedImage;

/// The superblock as the media file holds it (before any recovery); an
/// image of a file system on persistent memory is refused (`fsck` reads
/// MQFS's layout).
pub(crate) fn read_superblock(image: &LockedImage) -> Result<Superblock, CliError> {
    image.header.mqfs_mode().map_err(|why| {
        CliError::Usage(format!(
            "{why}: fsck reads MQFS's layout (mount runs its own recovery)"
        ))
    })?;
    let media = image.media_snapshot()?;
    let mut buf = [0u8; BLOCK];
    media.read(0, &mut buf);
    Ok(Superblock::decode(&buf, image.header.blocks)?)
}
