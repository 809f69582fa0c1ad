//! `mqfs fsck`: check an image without changing it. Every image is first
//! mounted in a copy-on-write sandbox (what the next mount would do): a
//! mount that fails (a header mode other than the superblock's, a PMR the
//! mode's driver refuses, a journal recovery that fails) is an error. An
//! image that was not unmounted cleanly is checked in its recovered state;
//! a clean one as it is.

use std::path::Path;

use crate::cmd::read_superblock;
use crate::error::CliError;
use crate::image::LockedImage;
use crate::rig::Rig;

/// Checks the image; returns the report text, or `FsckErrors` (with the
/// report printed first) if the check found errors.
pub fn run(path: &Path) -> Result<String, CliError> {
    let image = LockedImage::open(path)?;
    let sb = read_superblock(&image)?;
    let mut out = String::new();
    let mut extra_errors = 0;
    // Mount (in the sandbox) whatever the image's state: it checks what
    // the file system's own check cannot see, the header's mode against
    // the superblock's and the PMR (the ccNVMe queues of mq, HoraeFS's
    // ordering queue), so fsck cannot pass an image mount refuses.
    let rig = Rig::sandbox(&image)?;
    let report = match rig.mount(0) {
        Ok(_) if sb.clean => mqfs::fsck(&*image.media_snapshot()?)?,
        Ok(_) => {
            out.push_str(
                "not unmounted cleanly: checked after journal recovery in memory (the image is unchanged)\n",
            );
            mqfs::fsck(&**rig.ctrl.backend())?
        }
        Err(e) => {
            let what = if sb.clean {
                "mount refuses the image"
            } else {
                "recovery failed"
            };
            out.push_str(&format!(
                "{what}: {}; checking the image as it is\n",
                e.one_line()
            ));
            extra_errors = 1;
            mqfs::fsck(&*image.media_snapshot()?)?
        }
    };
    out.push_str(&report.to_string());
    let errors = report.errors().count() as u64 + report.suppressed_errors + extra_errors;
    if errors > 0 {
        print!("{out}");
        return Err(CliError::FsckErrors(errors));
    }
    Ok(out)
}
