//! `mqfs stat`: an image's machine, layout, journal areas and usage, read
//! from its files (nothing is recovered or changed). Of an image on
//! persistent memory, only the machine (its file system's layout is its
//! own, read by its mount).

use std::fmt::Write as _;
use std::path::Path;

use mqfs::journal::format::AreaSuper;
use mqfs::layout::BLOCK;

use crate::cmd::read_superblock;
use crate::error::CliError;
use crate::image::LockedImage;

/// The description of the image.
pub fn run(path: &Path) -> Result<String, CliError> {
    let image = LockedImage::open(path)?;
    let h = &image.header;
    if let crate::header::ImageFs::Pm(fs) = h.fs {
        return Ok(format!(
            "image: {} (+ {})\nmachine: {} on persistent memory, {} bytes ({}), {} cores\n",
            image.paths.media.display(),
            image.paths.header.display(),
            fs.name(),
            h.blocks * BLOCK as u64,
            h.profile,
            h.queues
        ));
    }
    let sb = read_superblock(&image)?;
    let media = image.media_snapshot()?;
    let mut o = String::new();
    let mib = |blocks: u64| (blocks * BLOCK as u64) >> 20;
    // Writing to a String cannot fail.
    let _ = writeln!(
        o,
        "image: {} (+ {}, {})",
        image.paths.media.display(),
        image.paths.pmr.display(),
        image.paths.header.display()
    );
    let _ = writeln!(
        o,
        "machine: {} mode, drive {}, {} queues (cores), PMR {} KiB",
        h.mqfs_mode().map_err(CliError::Usage)?.name(),
        h.profile,
        h.queues,
        h.pmr_bytes >> 10
    );
    let _ = writeln!(
        o,
        "state: {}; mounted {} times; next transaction id {}",
        if sb.clean {
            "clean"
        } else {
            "not unmounted cleanly (the next mount recovers; usage below is before recovery)"
        },
        sb.mounts,
        sb.next_txid
    );
    let _ = writeln!(
        o,
        "layout: {} blocks of 4 KiB ({} MiB): superblock at 0, {} groups of {} blocks from block {}, {} inodes per group ({} inode-table blocks each)",
        sb.blocks,
        mib(sb.blocks),
        sb.groups,
        sb.blocks_per_group,
        sb.groups_start,
        sb.inodes_per_group,
        sb.itable_blocks()
    );
    for g in 0..sb.groups {
        let _ = writeln!(
            o,
            "  group {g}: blocks {}..{}, block bitmap {}, inode bitmap {}, inode table {}.., data from {}",
            sb.group_start(g),
            sb.group_start(g) + sb.group_blocks(g),
            sb.block_bitmap(g),
            sb.inode_bitmap(g),
            sb.inode_table(g),
            sb.first_data(g)
        );
    }
    let _ = writeln!(
        o,
        "journal: {} area(s) of {} blocks ({} MiB in all) from block {}",
        sb.journal_areas,
        sb.area_blocks,
        mib(sb.area_blocks * sb.journal_areas as u64),
        sb.journal_start
    );
    for a in 0..sb.journal_areas {
        let mut buf = [0u8; BLOCK];
        media.read(sb.area_start(a), &mut buf);
        let state = match AreaSuper::decode(&buf, a, sb.area_blocks) {
            Ok(s) => format!("head {}, sequence {}, home below {}", s.head, s.seq, s.home_below),
            Err(e) => format!("unreadable superblock: {e}"),
        };
        let _ = writeln!(
            o,
            "  area {a}: blocks {}..{}, {state}",
            sb.area_start(a),
            sb.area_start(a) + sb.area_blocks
        );
    }
    let r = mqfs::fsck(&*media)?;
    let s = &r.stats;
    let _ = writeln!(
        o,
        "usage: {} files, {} directories, {} symlinks; {} of {} data blocks used ({} free); {} of {} inodes used ({} free)",
        s.files,
        s.dirs,
        s.symlinks,
        s.data_blocks - s.free_blocks,
        s.data_blocks,
        s.free_blocks,
        s.inodes - s.free_inodes,
        s.inodes,
        s.free_inodes
    );
    Ok(o)
}
