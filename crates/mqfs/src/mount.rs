//! mkfs, mount (with each mode's recovery) and unmount.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use ccnvme::horae::{self, CheckpointRegion, OrderingQueue, PArea, RegionLayout, StreamParams};
use ccnvme::{BioFlags, BlockDevice, ProbeOptions};
use tokio::sync::{Mutex, Semaphore};

use crate::cache::BufferCache;
use crate::error::FsError;
use crate::extent_tree::ExtentTree;
use crate::fs::{Ctx, Fs};
use crate::journal::format::AreaSuper;
use crate::journal::jbd::Jbd;
use crate::journal::log::RevokeScope;
use crate::journal::mq;
use crate::journal::Journal;
use crate::layout::{
    crc, encode_dir_block, DirEntry, Extent, FileType, Inode, Mode, Superblock, BLOCK, FIRST_INO,
    INODES_PER_BLOCK, ROOT_INO,
};
use crate::ops::GATE;
use crate::profile::FsProfile;
use crate::volume::{Label, Stripe, Volume, DEFAULT_CHUNK_BLOCKS};

/// How to make a file system.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MkfsOptions {
    /// Consistency mode.
    pub mode: Mode,
    /// Journal areas (`mq`: one per hardware queue; others use 1).
    pub journal_areas: u32,
    /// Total journal blocks (default: 1 GiB, the paper's 7.1, capped at a
    /// quarter of the device).
    pub journal_blocks: Option<u64>,
    /// Bytes of data per inode (default 16 KiB, Ext4's default ratio).
    pub bytes_per_inode: u64,
    /// The device reads zeros everywhere (a fresh sparse image file): the
    /// inode tables are not written, only the block holding the root, so
    /// mkfs writes a few blocks per group whatever the size. mke2fs does
    /// the same when a discard left the device reading zeros
    /// (misc/mke2fs.c: `itable_zeroed`, set when
    /// `io_channel_discard_zeroes_data`). False by default: every
    /// inode-table block is written with zeros, so stale inodes of an
    /// earlier file system cannot show through.
    pub zeroed: bool,
    /// The file system's UUID (`Superblock::uuid`, the seed of its journal
    /// checksums). `None` (the default): derived from the geometry, the
    /// same for every image of one geometry, as the emulator draws nothing
    /// at random; `mqfs mkfs` gives each image its own (mke2fs draws it at
    /// random).
    pub uuid: Option<[u8; 16]>,
    /// Horae mode: blocks of the ordering queue's checkpoint region at the
    /// end of the device, where a full queue is swapped (Horae 5.2; 0:
    /// none, a full queue waits for dequeue). Default
    /// [`DEFAULT_CHECKPOINT_BLOCKS`], capped at a sixteenth of the device;
    /// ignored in the other modes.
    pub checkpoint_blocks: Option<u64>,
    /// Horae mode: blocks of the p-area at the end of the device, where
    /// the ordering layer redirects in-place writes (Horae 5.4; 0: none,
    /// in-place writes go home with the `ipu` bit). Default
    /// [`DEFAULT_P_AREA_BLOCKS`], capped at a sixteenth of the device;
    /// ignored in the other modes.
    pub p_area_blocks: Option<u64>,
}

/// The default checkpoint region of horae mode: 2560 blocks (10 MiB), what
/// Horae's artifact reserves on the SSD for its "PMR checkpoint region"
/// (the paper gives no size; `docs/decisions.md` H6).
pub const DEFAULT_CHECKPOINT_BLOCKS: u64 = 2560;

/// The default p-area of horae mode: 2048 blocks (8 MiB). Horae gives no
/// size (6.4 compares a small p-area with larger ones and reports that a
/// larger one narrows the gap of its eager commit); this is four times the
/// 2 MB CMB the paper's ordering queue uses (5.7), so the p-area holds
/// the in-place writes of many queue-fulls of transactions before an
/// eager commit.
pub const DEFAULT_P_AREA_BLOCKS: u64 = 2048;

impl MkfsOptions {
    /// Defaults for `mode`.
    pub fn new(mode: Mode) -> Self {
        MkfsOptions {
            mode,
            journal_areas: 1,
            journal_blocks: None,
            bytes_per_inode: 16384,
            zeroed: false,
            uuid: None,
            checkpoint_blocks: None,
            p_area_blocks: None,
        }
    }
}

/// Probe options the block device needs for `mode` mounted with the
/// default [`FsProfile`].
pub fn probe_options(mode: Mode) -> ProbeOptions {
    probe_options_for(mode, &FsProfile::default())
}

/// Probe options the block device needs for `mode` mounted with
/// `profile`: ccNVMe for `mq`, and for `classic` whose JBD2 commits as
/// ccNVMe transactions ([`crate::JbdCommit::CcNvmeTransaction`]); the
/// Horae PMR for `horae`; the driver's profile is `profile.driver`.
pub fn probe_options_for(mode: Mode, profile: &FsProfile) -> ProbeOptions {
    ProbeOptions {
        ccnvme: mode == Mode::Mq || (mode == Mode::Classic && jbd_through_ccnvme(profile)),
        horae: mode == Mode::Horae,
        profile: profile.driver.clone(),
        ..ProbeOptions::default()
    }
}

/// True if `profile` makes the classic journal commit through ccNVMe.
fn jbd_through_ccnvme(profile: &FsProfile) -> bool {
    profile.jbd_commit == crate::JbdCommit::CcNvmeTransaction
}

/// The recovery of a journal committed through ccNVMe (`mq`, and
/// `classic` with [`crate::JbdCommit::CcNvmeTransaction`]): the driver
/// reports the unfinished transactions (ccNVMe 5.5), the journal's areas
/// are replayed without them ([`mq::recover`], revokes within `scope`),
/// and the driver resets its queues once that is durable. Sets the next
/// transaction id past every id seen and returns each area's (position,
/// next sequence number).
async fn recover_through_ccnvme(
    fs: &Fs,
    ctx: Ctx,
    scope: crate::journal::log::RevokeScope,
) -> Result<Vec<(u64, u64)>, FsError> {
    let dev = fs.vol.first().clone();
    let rec = dev.recovery().ok_or_else(|| {
        FsError::Unsupported(format!(
            "{:?} journaling through ccNVMe needs the ccNVMe driver",
            fs.sb.borrow().mode
        ))
    })?;
    let unfinished: std::collections::BTreeSet<u64> = if fs.profile.recovery_drops_unfinished {
        rec.unfinished_ids().iter().map(|t| t.0).collect()
    } else {
        // Fault injection: the driver's verdict ignored.
        std::collections::BTreeSet::new()
    };
    let (starts, max_txid) = mq::recover(fs, ctx, &unfinished, fs.profile.mq.rule, scope).await?;
    // Recovery is durable: the driver may reset its queues now.
    dev.ack_recovery().await?;
    fs.next_txid.set(fs.next_txid.get().max(max_txid + 1));
    Ok(starts)
}

/// HoraeFS's one stream on `vol`: with the checkpoint region mkfs
/// reserved (Horae 5.2 swap), and a ring no larger than the region takes
/// ([`CheckpointRegion::ring_limit`]) when the PMR slice is formatted,
/// and with the p-area mkfs reserved (Horae 5.4 write redirection). Both
/// regions lie in the volume's linear tail ([`Volume::tail_lba`]); a
/// superblock that puts them elsewhere is [`FsError::Corrupt`].
pub fn horae_stream(vol: &Volume, sb: &Superblock) -> Result<StreamParams, FsError> {
    let dev = vol.first();
    let params = if sb.checkpoint_blocks == 0 {
        StreamParams::SINGLE
    } else {
        let region = CheckpointRegion {
            lba: vol.tail_lba(sb.checkpoint_start(), sb.checkpoint_blocks)?,
            pages: sb.checkpoint_blocks.min(u32::MAX as u64) as u32,
        };
        let largest = RegionLayout::for_stream(dev.pmr_free_start(), dev.info().pmr_bytes, 0, 1, None)
            .map_or(u32::MAX, |l| l.capacity);
        StreamParams {
            capacity: Some(largest.min(region.ring_limit())),
            ..StreamParams::SINGLE
        }
        .with_checkpoint(region)
    };
    // The p-area mkfs reserved (Horae 5.4): in-place writes are
    // redirected there, on each member at the same LBAs.
    Ok(match sb.p_area_blocks {
        0 => params,
        pages => params.with_p_area(PArea {
            start: vol.tail_lba(sb.p_area_start(), pages)?,
            pages,
        }),
    })
}

/// What HoraeFS's mount will find in the ordering queue of the file
/// system on the volume of `devs` ([`Volume::open`], read on `core`): its
/// stream with the regions the superblock names ([`horae_stream`]),
/// recovered without writing anything. For logs; the mount runs the same
/// recovery and acts on it.
pub async fn horae_recovery(devs: &[Rc<BlockDevice>], core: usize) -> Result<horae::HoraeRecovery, FsError> {
    let vol = Volume::open(devs, core).await?;
    let (member, lba) = vol.map(0)?;
    let raw = crate::volume::read_block(&vol.devices()[member], core, lba).await?;
    let sb = Superblock::decode(&raw[..], vol.blocks())?;
    Ok(horae::recover_stream(vol.devices(), horae_stream(&vol, &sb)?).await?)
}

/// Computes the geometry for a device of `blocks` 4 KiB blocks.
pub fn geometry(blocks: u64, opts: &MkfsOptions) -> Result<Superblock, FsError> {
    let areas = if opts.mode == Mode::Mq {
        opts.journal_areas.max(1)
    } else {
        1
    };
    let journal = opts
        .journal_blocks
        .unwrap_or(1 << 18)
        .min(blocks / 4)
        .max(areas as u64 * 32);
    let area_blocks = journal / areas as u64;
    let checkpoint = if opts.mode == Mode::Horae {
        opts.checkpoint_blocks
            .unwrap_or(DEFAULT_CHECKPOINT_BLOCKS)
            .min(blocks / 16)
    } else {
        0
    };
    let p_area = if opts.mode == Mode::Horae {
        opts.p_area_blocks
            .unwrap_or(DEFAULT_P_AREA_BLOCKS)
            .min(blocks / 16)
    } else {
        0
    };
    // Under 3 blocks (a header and two entry pages) it could hold nothing.
    let checkpoint = if checkpoint < 3 { 0 } else { checkpoint };
    let journal_start = blocks
        .checked_sub(area_blocks * areas as u64 + checkpoint + p_area)
        .ok_or_else(|| FsError::Invalid("device too small".into()))?;
    let space = journal_start.saturating_sub(1);
    if space < 64 {
        return Err(FsError::Invalid("device too small".into()));
    }
    // Groups of equal size (the last at most a few blocks shorter).
    let groups = space.div_ceil(32768) as u32;
    let bpg = space.div_ceil(groups as u64) as u32;
    let ipg = ((bpg as u64 * BLOCK as u64 / opts.bytes_per_inode.max(BLOCK as u64)) as u32)
        .div_ceil(INODES_PER_BLOCK)
        .max(1)
        * INODES_PER_BLOCK;
    let sb = Superblock {
        blocks,
        groups,
        blocks_per_group: bpg,
        inodes_per_group: ipg.min(32768),
        groups_start: 1,
        journal_start,
        journal_areas: areas,
        area_blocks,
        mode: opts.mode,
        clean: true,
        next_txid: 1,
        mounts: 0,
        newest_time: 0,
        journal_damage: 0,
        hash_seed: 0,
        uuid: [0; 16],
        checkpoint_blocks: checkpoint,
        p_area_blocks: p_area,
    };
    // A seed of its own per geometry, deterministic (no randomness in the
    // emulator; ext4's mkfs draws `s_hash_seed` at random).
    let sb = Superblock {
        hash_seed: crc(&sb.encode()[..]),
        ..sb
    };
    let uuid = opts.uuid.unwrap_or_else(|| {
        let h = crc(&sb.encode()[..]);
        let mut u = [0u8; 16];
        for (i, chunk) in u.chunks_mut(4).enumerate() {
            chunk.copy_from_slice(&h.rotate_left(8 * i as u32).to_le_bytes());
        }
        u
    });
    let sb = Superblock { uuid, ..sb };
    sb.validate(blocks)?;
    Ok(sb)
}

async fn write_batch(vol: &Volume, ctx: Ctx, blocks: Vec<(u64, Box<[u8; BLOCK]>)>) -> Result<(), FsError> {
    let mem = vol.first().machine().memory();
    for chunk in blocks.chunks(64) {
        let mut pending = Vec::new();
        for (b, data) in chunk {
            let page = mem.alloc(BLOCK as u64)?;
            mem.write(page, &data[..])?;
            pending.push(vol.submit_write(ctx.core, *b, page, BioFlags::NONE, true).await?);
        }
        for w in pending {
            let s = vol.wait(ctx.core, w.member, &w.done).await;
            mem.free(w.page)?;
            s?;
        }
    }
    Ok(())
}

/// How to stripe a volume ([`mkfs_volume`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StripeOptions {
    /// Blocks per chunk (default [`DEFAULT_CHUNK_BLOCKS`], md's 512 KiB).
    pub chunk_blocks: u64,
}

impl Default for StripeOptions {
    fn default() -> Self {
        StripeOptions {
            chunk_blocks: DEFAULT_CHUNK_BLOCKS,
        }
    }
}

/// Makes a file system on `dev`.
pub async fn mkfs(dev: &Rc<BlockDevice>, ctx: Ctx, opts: &MkfsOptions) -> Result<Superblock, FsError> {
    mkfs_on(&Volume::single(dev), ctx, opts).await
}

/// Why a file system of `mode` mounted with `profile` cannot run on a
/// striped volume (`None`: it can). HoraeFS, Ext4 and Ext4-NJ stripe
/// ([`crate::volume`]); MQFS and Ext4 committing through ccNVMe make
/// ccNVMe transactions, which are per device.
fn striping_refused(mode: Mode, profile: &FsProfile) -> Option<String> {
    match mode {
        Mode::Mq => Some("an MQFS (its ccNVMe transactions are per device)".into()),
        Mode::Classic if jbd_through_ccnvme(profile) => {
            Some("an Ext4 committing through ccNVMe (its transactions are per device)".into())
        }
        Mode::None | Mode::Classic | Mode::Horae => None,
    }
}

/// Makes a file system on a striped volume of `devs` (2 to 4 drives, in
/// role order; [`crate::volume`]): the members' labels first, then the
/// file system over the volume's blocks. HoraeFS, Ext4 (`classic`) and
/// Ext4-NJ (`none`) run on a striped volume.
pub async fn mkfs_volume(
    devs: &[Rc<BlockDevice>],
    ctx: Ctx,
    opts: &MkfsOptions,
    stripe: StripeOptions,
) -> Result<Superblock, FsError> {
    if let Some(why) = striping_refused(opts.mode, &FsProfile::default()) {
        return Err(FsError::Volume(format!("{why} does not run on a striped volume")));
    }
    let smallest = devs.iter().map(|d| d.info().blocks).min().unwrap_or(0);
    // The tail holds the checkpoint region and the p-area (at the
    // volume's end, so inside the tail): their sizes as a volume without
    // a tail would get them, given explicitly so the smaller volume with
    // the tail gets them too (or smaller, capped at its sixteenth).
    let plain = Stripe::new(devs.len(), smallest, stripe.chunk_blocks, 0)?;
    let sized = geometry(plain.blocks(), opts)?;
    let tail = sized.checkpoint_blocks + sized.p_area_blocks;
    let pinned = MkfsOptions {
        checkpoint_blocks: Some(sized.checkpoint_blocks),
        p_area_blocks: Some(sized.p_area_blocks),
        ..opts.clone()
    };
    let striped = Stripe::new(devs.len(), smallest, stripe.chunk_blocks, tail)?;
    mkfs_on(&Volume::striped(devs, striped), ctx, &pinned).await
}

/// Makes a file system on `vol`.
async fn mkfs_on(vol: &Volume, ctx: Ctx, opts: &MkfsOptions) -> Result<Superblock, FsError> {
    if vol.devices().iter().any(|d| d.info().lba_size != BLOCK as u32) {
        return Err(FsError::Unsupported("MQFS needs a 4 KiB LBA format".into()));
    }
    let sb = geometry(vol.blocks(), opts)?;
    vol.write_labels(ctx.core, sb.uuid).await?;
    let mut writes: Vec<(u64, Box<[u8; BLOCK]>)> = Vec::new();
    let root_block = sb.first_data(0);
    for g in 0..sb.groups {
        let mut bm = Box::new([0u8; BLOCK]);
        let used = sb.first_data(g) - sb.group_start(g);
        let size = sb.group_blocks(g);
        for bit in (0..used).chain(size..32768) {
            bm[(bit / 8) as usize] |= 1 << (bit % 8);
        }
        if g == 0 {
            let bit = root_block - sb.group_start(0);
            bm[(bit / 8) as usize] |= 1 << (bit % 8);
        }
        writes.push((sb.block_bitmap(g), bm));
        let mut im = Box::new([0u8; BLOCK]);
        for bit in sb.inodes_per_group..32768 {
            im[(bit / 8) as usize] |= 1 << (bit % 8);
        }
        if g == 0 {
            for ino in 1..FIRST_INO {
                let bit = ino - 1;
                im[(bit / 8) as usize] |= 1 << (bit % 8);
            }
        }
        writes.push((sb.inode_bitmap(g), im));
        if !opts.zeroed {
            for t in 0..sb.itable_blocks() {
                writes.push((sb.inode_table(g) + t, Box::new([0u8; BLOCK])));
            }
        }
    }
    // The root directory.
    let root = Inode {
        mode: FileType::Dir.mode_bits() | 0o755,
        links: 2,
        size: BLOCK as u64,
        nblocks: 1,
        generation: 1,
        tree: ExtentTree::inline(vec![Extent {
            logical: 0,
            len: 1,
            physical: root_block,
            unwritten: false,
        }]),
        ..Default::default()
    };
    let (iblk, off) = sb.inode_location(ROOT_INO)?;
    if !writes.iter().any(|(b, _)| *b == iblk) {
        writes.push((iblk, Box::new([0u8; BLOCK])));
    }
    if let Some(w) = writes.iter_mut().find(|(b, _)| *b == iblk) {
        w.1[off..off + crate::layout::INODE_SIZE].copy_from_slice(&root.encode());
    }
    let dot = |name: &[u8]| DirEntry {
        ino: ROOT_INO,
        ftype: FileType::Dir,
        name: name.to_vec(),
    };
    writes.push((root_block, encode_dir_block(&[dot(b"."), dot(b"..")])?));
    for a in 0..sb.journal_areas {
        let jsb = AreaSuper {
            area: a,
            head: 1,
            seq: 1,
            home_below: 0,
        };
        writes.push((sb.area_start(a), jsb.encode()));
    }
    write_batch(vol, ctx, writes).await?;
    vol.flush(ctx.core).await?;
    // The superblock last: an interrupted mkfs leaves no file system.
    write_batch(vol, ctx, vec![(0, sb.encode())]).await?;
    vol.flush(ctx.core).await?;
    Ok(sb)
}

/// Mounts the file system on `dev`, running its mode's recovery if it was
/// not unmounted cleanly.
pub async fn mount(dev: &Rc<BlockDevice>, ctx: Ctx, profile: FsProfile) -> Result<Rc<Fs>, FsError> {
    mount_on(Volume::single(dev), ctx, profile).await
}

/// Mounts the file system on the striped volume of `devs` (in any order: the
/// members' labels give their roles), running its recovery (HoraeFS's
/// over every member, or the journal's) if it was not unmounted cleanly. A missing, foreign or
/// mismatched member is [`FsError::Volume`].
pub async fn mount_volume(devs: &[Rc<BlockDevice>], ctx: Ctx, profile: FsProfile) -> Result<Rc<Fs>, FsError> {
    let vol = Volume::assemble(devs, ctx.core).await?;
    mount_on(vol, ctx, profile).await
}

/// Mounts the file system on the volume of `devs` ([`Volume::open`]): one
/// device as [`mount`] does, several as [`mount_volume`] does.
pub async fn mount_devices(
    devs: &[Rc<BlockDevice>],
    ctx: Ctx,
    profile: FsProfile,
) -> Result<Rc<Fs>, FsError> {
    let vol = Volume::open(devs, ctx.core).await?;
    mount_on(vol, ctx, profile).await
}

async fn mount_on(vol: Volume, ctx: Ctx, profile: FsProfile) -> Result<Rc<Fs>, FsError> {
    let dev = vol.first().clone();
    let machine = dev.machine().clone();
    let blocks = vol.blocks();
    let fs = Rc::new(Fs {
        vol,
        machine,
        sb: RefCell::new(Superblock {
            blocks,
            groups: 1,
            blocks_per_group: 1,
            inodes_per_group: INODES_PER_BLOCK,
            groups_start: 1,
            journal_start: 0,
            journal_areas: 1,
            area_blocks: 0,
            mode: Mode::None,
            clean: true,
            next_txid: 1,
            mounts: 0,
            newest_time: 0,
            journal_damage: 0,
            hash_seed: 0,
            uuid: [0; 16],
            checkpoint_blocks: 0,
            p_area_blocks: 0,
        }),
        profile,
        bufs: BufferCache::default(),
        inodes: RefCell::new(BTreeMap::new()),
        dirty_index: crate::dirty::DirtyIndex::new(),
        journal: RefCell::new(None),
        next_txid: Cell::new(1),
        readonly: Cell::new(false),
        mb: Default::default(),
        next_ino: Cell::new(FIRST_INO),
        rename_lock: Mutex::new(()),
        gate: Semaphore::new(GATE as usize),
        pages: Rc::new(RefCell::new(Vec::new())),
        clock_base: Cell::new(0),
        clock_start: Cell::new(0),
        journal_damage: RefCell::new(Vec::new()),
        flusher: Default::default(),
    });
    let raw = fs.read_raw(ctx, 0).await?;
    if Label::is_label(&raw) {
        return Err(FsError::Volume(match Label::decode(&raw) {
            Ok(Some(l)) => format!(
                "the device is member {} of a striped volume of {}: mount the whole volume",
                l.role, l.stripe.members
            ),
            _ => "the device holds a damaged member label".into(),
        }));
    }
    let sb = Superblock::decode(&raw[..], blocks)?;
    if fs.profile.data_journal
        && (sb.mode == Mode::Mq || sb.mode == Mode::None || jbd_through_ccnvme(&fs.profile))
    {
        return Err(FsError::Unsupported(format!(
            "data=journal needs a JBD2 journal committing with a commit record (classic or horae), not {:?}{}",
            sb.mode,
            if jbd_through_ccnvme(&fs.profile) {
                " through ccNVMe"
            } else {
                ""
            }
        )));
    }
    if fs.vol.stripe().is_some() {
        if let Some(why) = striping_refused(sb.mode, &fs.profile) {
            return Err(FsError::Volume(format!("a striped volume holding {why}")));
        }
    }
    *fs.sb.borrow_mut() = sb.clone();
    fs.next_txid.set(sb.next_txid.max(1));
    // The clock starts before recovery: whatever recovery stamps is past
    // the image's newest time.
    fs.start_clock(sb.newest_time);
    let journal = match sb.mode {
        Mode::None => Journal::None,
        Mode::Classic | Mode::Horae => {
            let oq = if sb.mode == Mode::Horae {
                // One ordering stream over every member (HoraeFS uses one
                // ordering queue, Horae 6.1), its queue in the first
                // member's PMR; recovery discards on each member.
                let devs = fs.vol.devices();
                let params = horae_stream(&fs.vol, &sb)?;
                match horae::recover_stream(devs, params).await {
                    Ok(rec) => rec.discard_and_reset_all(devs, ctx.core).await?,
                    // A fresh PMR: init_stream formats the ordering queue.
                    Err(ccnvme::DriverError::NoLayout) => {}
                    Err(e) => return Err(e.into()),
                }
                let params = StreamParams {
                    submitters: fs.profile.submitters,
                    ..params
                };
                Some(OrderingQueue::init_stream(devs, params).await?)
            } else {
                None
            };
            let raw = fs.read_raw(ctx, sb.area_start(0)).await?;
            let jsb = AreaSuper::decode(&raw[..], 0, sb.area_blocks)?;
            let next = if sb.mode == Mode::Classic && jbd_through_ccnvme(&fs.profile) {
                // JBD2 keeps a revoke's own transaction's copies hidden.
                let starts = recover_through_ccnvme(&fs, ctx, RevokeScope::ThisAndEarlier).await?;
                starts
                    .first()
                    .copied()
                    .ok_or_else(|| FsError::Corrupt("no journal area".into()))?
            } else {
                Jbd::recover(&fs, ctx, &jsb).await?
            };
            let j = Jbd::new(&fs, &jsb, Some(next), oq);
            j.start(&fs);
            Journal::Jbd(j)
        }
        Mode::Mq => {
            let starts = recover_through_ccnvme(&fs, ctx, RevokeScope::Earlier).await?;
            let next = fs.next_txid.get();
            Journal::Mq(mq::MqJournal::new(&fs, &starts, fs.profile.mq, next))
        }
    };
    *fs.journal.borrow_mut() = Some(journal);
    let mut sb = fs.sb.borrow().clone();
    sb.clean = false;
    sb.mounts += 1;
    sb.newest_time = sb.newest_time.max(fs.now_ns());
    *fs.sb.borrow_mut() = sb.clone();
    fs.write_all(ctx, &[(0, sb.encode())], BioFlags::FUA).await?;
    // The root must be a readable directory.
    let root = fs.iget(ctx, ROOT_INO).await?;
    if root.inode.borrow().file_type() != Some(FileType::Dir) {
        return Err(FsError::Corrupt("the root is not a directory".into()));
    }
    // Files unlinked while open when the machine stopped.
    fs.cleanup_orphans(ctx).await?;
    fs.start_flusher();
    Ok(fs)
}

impl Fs {
    /// Unmounts cleanly: everything durable and checkpointed, the
    /// superblock marked clean, the device shut down.
    pub async fn unmount(&self, ctx: Ctx) -> Result<(), FsError> {
        self.sync(ctx).await?;
        self.stop_flusher();
        match self.journal() {
            Ok(Journal::Jbd(j)) => {
                // HoraeFS: the prepare writes go home, so the image needs
                // no recovery to read.
                if let Some(oq) = j.ordering_queue() {
                    oq.commit_all(ctx.core).await?;
                }
                j.stop()
            }
            Ok(Journal::Mq(m)) => m.drain(self, ctx).await?,
            _ => {}
        }
        let mut sb = self.sb.borrow().clone();
        sb.clean = true;
        sb.next_txid = self.next_txid.get();
        sb.newest_time = sb.newest_time.max(self.now_ns());
        *self.sb.borrow_mut() = sb.clone();
        self.write_all(ctx, &[(0, sb.encode())], BioFlags::FUA).await?;
        self.flush(ctx).await?;
        self.vol.shutdown().await?;
        Ok(())
    }
}
