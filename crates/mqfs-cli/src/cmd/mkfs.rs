//! `mqfs mkfs`: a new image with a fresh file system.

use std::path::PathBuf;

use mqfs::mount::geometry;
use mqfs::{Ctx, MkfsOptions, Mode};
use nvme_ctrl::{SsdProfile, BLOCK};

use crate::error::CliError;
use crate::header::{profile_names, Header};
use crate::image::LockedImage;
use crate::rig::Rig;

/// Arguments of `mqfs mkfs`.
#[derive(Clone, Debug, clap::Args)]
pub struct MkfsArgs {
    /// The image (its media file; IMAGE.pmr and IMAGE.hdr go beside it).
    pub image: PathBuf,
    /// Media size: bytes, or with a K, M or G suffix (a multiple of 4 KiB).
    #[arg(long, default_value = "256M")]
    pub size: String,
    /// Consistency mode: none, classic, horae or mq.
    #[arg(long, default_value = "mq")]
    pub mode: String,
    /// Drive profile (intel-750, optane-905p, optane-p5800x, flash-vwc).
    #[arg(long, default_value = "optane-905p")]
    pub profile: String,
    /// Hardware queue pairs, one per simulated core (in mq mode, one
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
    let mode = Mode::from_name(&args.mode)
        .ok_or_else(|| CliError::Usage(format!("unknown mode {:?} (none, classic, horae, mq)", args.mode)))?;
    let profile = SsdProfile::by_name(&args.profile).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown profile {:?} (one of {})",
            args.profile,
            profile_names().join(", ")
        ))
    })?;
    let bytes = parse_size(&args.size)?;
    if bytes == 0 || bytes % BLOCK as u64 != 0 {
        return Err(CliError::Usage(format!(
            "size {bytes} is not a positive multiple of 4096"
        )));
    }
    let header = Header {
        mode,
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
    let (rig, pmr) = Rig::on_image(&image)?;
    let dev = rig.probe()?;
    let mut opts = MkfsOptions::new(image.header.mode);
    opts.journal_areas = dev.queue_count() as u32;
    // The media file was just made sparse (`LockedImage::create`): it
    // reads zeros, so only metadata blocks are written.
    opts.zeroed = true;
    opts.uuid = Some(uuid_for(&args.image, super::mount::host_time_ns()));
    let d = dev.clone();
    let sb = rig.run_fs(async move { mqfs::mkfs(&d, Ctx::on(0), &opts).await })?;
    let d = dev.clone();
    rig.run(async move { d.shutdown().await })??;
    rig.ctrl.backend().sync()?;
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
            size: "64M".into(),
            mode: "mq".into(),
            profile: "optane-905p".into(),
            queues: 2,
            force: false,
        };
        assert!(header_of(&ok).is_ok());
        let cases = [
            MkfsArgs {
                mode: "ext4".into(),
                ..ok.clone()
            },
            MkfsArgs {
                profile: "floppy".into(),
                ..ok.clone()
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
