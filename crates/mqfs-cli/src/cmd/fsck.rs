//! `mqfs fsck`: check an image without changing it. An image that was not
//! unmounted cleanly is first recovered in a copy-on-write sandbox (what
//! the next mount would do), and the recovered state is checked.

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
    let report = if sb.clean {
        mqfs::fsck(&*image.media_snapshot()?)?
    } else {
        let rig = Rig::sandbox(&image)?;
        match rig.mount(0) {
            Ok(_) => {
                out.push_str("not unmounted cleanly: checked after journal recovery in memory (the image is unchanged)\n");
                mqfs::fsck(&**rig.ctrl.backend())?
            }
            Err(e) => {
                out.push_str(&format!(
                    "recovery failed: {}; checking the image as it is\n",
                    e.one_line()
                ));
                extra_errors = 1;
                mqfs::fsck(&*image.media_snapshot()?)?
            }
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
