//! `mqfs fsck`: check an image without changing it, or (`--repair`) repair
//! it. Every image is first mounted in a copy-on-write sandbox (what the
//! next mount would do): a mount that fails (a header mode other than the
//! superblock's, a PMR the mode's driver refuses, a journal recovery that
//! fails) is an error. An image that was not unmounted cleanly is checked
//! in its recovered state; a clean one as it is.
//!
//! `--repair` mounts the image for real (the mode's recovery and the
//! orphan-table cleanup run, as at any mount), repairs it through the file
//! system's journaled metadata writes ([`mqfs::fsck::repair`], e2fsck's
//! passes 1 to 5), unmounts it cleanly and checks it again. An image the
//! check finds nothing to repair in is not mounted, so not one byte of it
//! changes.

use std::path::Path;
use std::rc::Rc;

use mqfs::fsck::{plan_repair, BlockSource, Report};
use mqfs::Ctx;

use crate::cmd::read_superblock;
use crate::error::CliError;
use crate::image::LockedImage;
use crate::rig::Rig;

/// Errors `report` counts.
fn errors_of(report: &Report) -> u64 {
    report.errors().count() as u64 + report.suppressed_errors
}

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
            mqfs::fsck(&**rig.ctrl()?.backend())?
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
    let errors = errors_of(&report) + extra_errors;
    if errors > 0 {
        print!("{out}");
        return Err(CliError::FsckErrors(errors));
    }
    Ok(out)
}

/// Repairs the image (see the module docs); returns what was done (one
/// `fixed:` line each) and the check after it (each finding left also as
/// one `not fixed:` line), or `FsckErrors` (with that printed first) if
/// errors remain.
pub fn repair(path: &Path) -> Result<String, CliError> {
    let image = LockedImage::open(path)?;
    let sb = read_superblock(&image)?;
    let unmountable = |e: CliError| e.on_image(path, "repair");
    // What a mount would leave, in the sandbox: the plan. The orphan
    // table is read before the mount empties it.
    let listed = sb.clean && plan_repair(&*image.media_snapshot()?)?.1.orphans_listed;
    let plan = {
        let rig = Rig::sandbox(&image)?;
        rig.mount(0).map_err(unmountable)?;
        plan_repair(&**rig.ctrl()?.backend())?.1
    };
    let mut out = String::new();
    if plan.is_empty() && sb.clean && !listed {
        let report = mqfs::fsck(&*image.media_snapshot()?)?;
        out.push_str("nothing to repair (the image is unchanged)\n");
        return finish(out, &report);
    }
    let (rig, pmr) = Rig::on_image(&image)?;
    let (_dev, fs) = rig.mount(0).map_err(unmountable)?;
    if !sb.clean {
        out.push_str("not unmounted cleanly: the journal was recovered\n");
    }
    if listed {
        out.push_str("mount freed the inodes the orphan table listed\n");
    }
    let base: Rc<dyn BlockSource> = rig.ctrl()?.backend().clone();
    let f = fs.clone();
    let done = rig.run_fs(async move { f.repair(Ctx::on(0), base).await })?;
    rig.run_fs(async move { fs.unmount(Ctx::on(0)).await })?;
    rig.ctrl()?.backend().sync()?;
    pmr.sync()?;
    for line in &done.fixed {
        out.push_str(&format!("fixed: {line}\n"));
    }
    let report = mqfs::fsck(&*image.media_snapshot()?)?;
    finish(out, &report)
}

/// Appends the report and one `not fixed:` line per finding left;
/// `FsckErrors` (printing it all) if errors are.
fn finish(mut out: String, report: &Report) -> Result<String, CliError> {
    out.push_str(&report.to_string());
    for f in &report.findings {
        out.push_str(&format!("not fixed: {f}\n"));
    }
    let errors = errors_of(report);
    if errors > 0 {
        print!("{out}");
        return Err(CliError::FsckErrors(errors));
    }
    Ok(out)
}
