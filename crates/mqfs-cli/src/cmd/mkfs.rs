//! `mqfs mkfs`: a new image with a fresh file system: MQFS on the NVMe
//! drive (`--fs mqfs`, the default), or a file system on persistent
//! memory (`--fs wofs`, `soupfs` or `pmfs`; see [`crate::pm`]).

use std::path::PathBuf;

use mqfs::mount::geometry;
use mqfs::{Ctx, MkfsOptions, Mode};
use nvme_ctrl::{SsdProfile, BLOCK};
use pcie_sim::PageStore;

use crate::error::CliError;
use crate::header::{profile_names, Header, ImageFs};
use crate::image::LockedImage;
use crate::rig::Rig;

/// Arguments of `mqfs mkfs`.
#[derive(Clone, Debug, clap::Args)]
pub struct MkfsArgs {
    /// The image (its media file; IMAGE.pmr and IMAGE.hdr go beside it).
    pub image: PathBuf,
    /// The file system: mqfs (on the NVMe drive), or wofs, soupfs or pmfs
    /// (on persistent memory).
    #[arg(long, default_value = "mqfs")]
    pub fs: String,
    /// Medium size: bytes, or with a K, M or G suffix (a multiple of 4 KiB).
    #[arg(long, default_value = "256M")]
    pub size: String,
    /// MQFS's consistency mode: none, classic, horae or mq [default: mq].
    #[arg(long)]
    pub mode: Option<String>,
    /// Drive profile (intel-750, optane-905p, optane-p5800x, flash-vwc)
    /// [default: optane-905p]; on persistent memory the persistence
    /// domain (pm-adr, pm-eadr) [default: pm-adr].
    #[arg(long)]
    pub profile: Option<String>,
    /// Simulated cores (on the drive, hardware queue pairs; in mq mode, one
    /// journal area each).
    #[arg(long, default_value_t = 4)]
    pub queues: u32,
    /// Replace an existing image.
    #[arg(long)]
    pub force: bool,
}

/// Parses a size such as `4096`, `64K`, `256M` or `2G`.
pub fn parse_size(s: &str) -> Result<u64, CliError> {
    let bad = || CliError::Usage(format!("bad size {s:?} (bytes, or a number with K, M or G)"));
    let t = s.trim();
    let (num, shift) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 10),
        Some((i, 'm' | 'M')) => (&t[..i], 20),
        Some((i, 'g' | 'G')) => (&t[..i], 30),
        _ => (t, 0),
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    n.checked_mul(1 << shift).ok_or_else(bad)
}

/// The header `args` ask for, checked (nothing is created yet).
pub fn header_of(args: &MkfsArgs) -> Result<Header, CliError> {
    let bytes = parse_size(&args.size)?;
    if bytes == 0 || bytes % BLOCK as u64 != 0 {
        return Err(CliError::Usage(format!(
            "size {bytes} is not a positive multiple of 4096"
        )));
    }
    let mode_name = args.mode.as_deref().unwrap_or("mq");
    let mode = Mode::from_name(mode_name)
        .ok_or_else(|| CliError::Usage(format!("unknown mode {mode_name:?} (none, classic, horae, mq)")))?;
    let fs = ImageFs::by_name(&args.fs, mode)
        .ok_or_else(|| CliError::Usage(format!("unknown fs {:?} (mqfs, wofs, soupfs, pmfs)", args.fs)))?;
    if let ImageFs::Pm(pm) = fs {
        if args.mode.is_some() {
            return Err(CliError::Usage(format!(
                "--mode is MQFS's; {} has none",
                pm.name()
            )));
        }
        let header = Header {
            fs,
            profile: args.profile.clone().unwrap_or_else(|| "pm-adr".into()),
            queues: args.queues,
            blocks: bytes / BLOCK as u64,
            pmr_bytes: 0,
        };
        header.validate().map_err(CliError::Usage)?;
        return Ok(header);
    }
    let profile_name = args.profile.as_deref().unwrap_or("optane-905p");
    let profile = SsdProfile::by_name(profile_name).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown profile {profile_name:?} (one of {})",
            profile_names().join(", ")
        ))
    })?;
    let header = Header {
        fs,
        profile: profile.name.to_string(),
        queues: args.queues,
        blocks: bytes / BLOCK as u64,
        pmr_bytes: profile.pmr_bytes,
    };
    header.validate().map_err(CliError::Usage)?;
    let mut opts = MkfsOptions::new(mode);
    opts.journal_areas = args.queues;
    geometry(header.blocks, &opts).map_err(|e| CliError::Usage(format!("size {}: {e}", args.size)))?;
    Ok(header)
}

/// A UUID of its own for the image at `path` made at host time `now_ns`
/// (mke2fs draws one at random; a UUID seeds the journal checksums, so a
/// journal block of one image never verifies in another): the time, then
/// the CRC of the path, then the CRC of both.
fn uuid_for(path: &std::path::Path, now_ns: u64) -> [u8; 16] {
    let p = path.as_os_str().as_encoded_bytes();
    let mut u = [0u8; 16];
    u[..8].copy_from_slice(&now_ns.to_le_bytes());
    u[8..12].copy_from_slice(&mqfs::layout::crc(p).to_le_bytes());
    let both = mqfs::layout::crc(&[&u[..12], p].concat());
    u[12..].copy_from_slice(&both.to_le_bytes());
    u
}

/// Makes the image; returns a summary.
pub fn run(args: &MkfsArgs) -> Result<String, CliError> {
    let header = header_of(args)?;
    let image = LockedImage::create(&args.image, header, args.force)?;
    if let ImageFs::Pm(fs) = image.header.fs {
        // `LockedImage::create` just made the file sparse: it reads zeros.
        let zeros = PageStore::zeroed(image.header.blocks * BLOCK as u64);
        let (rig, file) = Rig::on_pm_image(&image, zeros)?;
        let made = crate::pm::format(&rig, fs)?;
        file.sync()?;
        image.commit_header()?;
        return Ok(format!(
            "mqfs: made a {} file system on {}: {} bytes of persistent memory ({}), {made}; {} cores",
            fs.name(),
            args.image.display(),
            image.header.blocks * BLOCK as u64,
            image.header.profile,
            image.header.queues
        ));
    }
    let (rig, pmr) = Rig::on_image(&image)?;
    let dev = rig.probe()?;
    let mut opts = MkfsOptions::new(image.header.mqfs_mode().map_err(CliError::Usage)?);
    opts.journal_areas = dev.queue_count() as u32;
    // The media file was just made sparse (`LockedImage::create`): it
    // reads zeros, so only metadata blocks are written.
    opts.zeroed = true;
    opts.uuid = Some(uuid_for(&args.image, crate::rig::host_time_ns()));
    let d = dev.clone();
    let sb = rig.run_fs(async move { mqfs::mkfs(&d, Ctx::on(0), &opts).await })?;
    let d = dev.clone();
    rig.run(async move { d.shutdown().await })??;
    rig.ctrl()?.backend().sync()?;
    pmr.sync()?;
    image.commit_header()?;
    Ok(format!(
        "mqfs: made a {} file system on {}: {} blocks of 4 KiB, {} groups, {} inodes, {} journal area(s) of {} blocks; drive {}, {} queues",
        sb.mode.name(),
        args.image.display(),
        sb.blocks,
        sb.groups,
        sb.inodes(),
        sb.journal_areas,
        sb.area_blocks,
        image.header.profile,
        image.header.queues
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64K").unwrap(), 64 << 10);
        assert_eq!(parse_size("256m").unwrap(), 256 << 20);
        assert_eq!(parse_size("2G").unwrap(), 2 << 30);
        for bad in ["", "M", "12Q", "-1", "99999999999999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        let ok = MkfsArgs {
            image: "x".into(),
            fs: "mqfs".into(),
            size: "64M".into(),
            mode: Some("mq".into()),
            profile: Some("optane-905p".into()),
            queues: 2,
            force: false,
        };
        let pm = MkfsArgs {
            fs: "wofs".into(),
            mode: None,
            profile: None,
            ..ok.clone()
        };
        assert_eq!(header_of(&pm).unwrap().profile, "pm-adr");
        assert!(header_of(&ok).is_ok());
        let cases = [
            MkfsArgs {
                mode: Some("ext4".into()),
                ..ok.clone()
            },
            MkfsArgs {
                profile: Some("floppy".into()),
                ..ok.clone()
            },
            MkfsArgs {
                fs: "ext4".into(),
                ..ok.clone()
            },
            MkfsArgs {
                mode: Some("mq".into()),
                ..pm.clone()
            },
            MkfsArgs {
                profile: Some("optane-905p".into()),
                ..pm.clone()
            },
            MkfsArgs {
                size: "100".into(),
                ..ok.clone()
            },
            MkfsArgs {
                size: "64K".into(),
                ..ok.clone()
            },
            MkfsArgs {
                queues: 0,
                ..ok.clone()
            },
        ];
        for c in cases {
            let e = header_of(&c).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{c:?}: {e}");
        }
    }
}
