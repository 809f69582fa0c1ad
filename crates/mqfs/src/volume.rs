//! The volume under the file system: one drive, or a striped volume of 2
//! to 4 drives (RAID 0), and the one place that maps a volume block to
//! `(member, lba)`.
//!
//! Every read, write and flush of the mounted file system goes through
//! [`Volume`] (`Fs::read_raw`, `Fs::write_start`, `Fs::flush`, mkfs, and
//! HoraeFS's ordered writes, whose ordering-queue entries carry the
//! member as their `devid`); fsck reads a striped volume through
//! [`VolumeSource`], which maps with the same [`Stripe`].
//!
//! **Striping** is Linux md's RAID 0 over members of one size
//! (drivers/md/raid0.c, one strip zone): the volume's blocks are cut into
//! chunks of [`Stripe::chunk_blocks`], dealt round-robin to the members
//! (chunk `c` on member `c mod n`, at that member's chunk `c / n`), as
//! HoRAE 6.2's "soft-RAID 0 ... round-robin". The chunk defaults to md's
//! 512 KiB ([`DEFAULT_CHUNK_BLOCKS`]). Each member starts with a label
//! block (md's v1.2 superblock, 4 KiB into the member, with the data after
//! it: here the label is member block 0 and the data starts at member
//! block [`DATA_OFFSET`]) naming the volume, the member's role, the member
//! count and the geometry, so assembly finds a missing, foreign or
//! mismatched member and says so ([`FsError::Volume`]). Assembly puts the
//! devices in the roles their labels record (md assembles by role too), so
//! the member index is the device's `devid` in HoraeFS's ordering stream.
//!
//! **The tail.** HoraeFS keeps two regions at the end of its volume, the
//! ordering queue's checkpoint region (Horae 5.2 swap) and the p-area
//! (Horae 5.4 write redirection), and the ordering layer addresses both as
//! device LBAs: the checkpoint region on the queue's home device (member
//! 0), the p-area as "a pre-reserved area of each device", the same LBA
//! range on every member. So a striped volume ends in a linear tail of
//! [`Stripe::tail_blocks`] after its chunks, on member 0 right after its
//! last chunk; every member keeps that LBA range out of its chunks, so the
//! p-area's range is free on each. On one drive the volume is the drive
//! and its tail is simply its last blocks.
//!
//! Deviations (`docs/decisions.md` H12): members of different sizes are
//! cut to the smallest (md makes further zones of the larger ones); the
//! label is mqfs's own format, not md's; HoraeFS, Ext4 (`classic`, whose
//! commit record's PREFLUSH flushes every member, as md's does:
//! [`Volume::submit_write`]) and Ext4-NJ (`none`) run on a striped volume;
//! MQFS and Ext4 committing through ccNVMe do not (their ccNVMe
//! transactions are per device).

use std::rc::Rc;

use ccnvme::{Bio, BioFlags, BlockDevice, BlockSource, Done, DriverError};
use pcie_sim::HostAddr;

use crate::error::FsError;
use crate::layout::{crc, BLOCK};

/// md's default chunk: 512 KiB (mdadm(8), `--chunk`: "The default is
/// 512K"), in 4 KiB blocks.
pub const DEFAULT_CHUNK_BLOCKS: u64 = 128;

/// Member blocks before the volume's data on each member of a striped
/// volume: the label (md v1.2 keeps its superblock near the start and the
/// data after it, `data_offset`).
pub const DATA_OFFSET: u64 = 1;

/// Most members of a striped volume (the 2 to 4 drives).
pub const MAX_MEMBERS: usize = 4;

const LABEL_MAGIC: u64 = 0x4c50_5254_5346_514d; // "MQFSTRPL"
const LABEL_VERSION: u32 = 1;

/// The geometry of a striped volume.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stripe {
    /// Members (2 to [`MAX_MEMBERS`]).
    pub members: u8,
    /// Blocks per chunk (md's `chunk_sectors`, in 4 KiB blocks).
    pub chunk_blocks: u64,
    /// Volume data blocks on each member (a whole number of chunks).
    pub member_blocks: u64,
    /// Blocks of the linear tail after the chunks (on member 0 at member
    /// block `DATA_OFFSET + member_blocks`; the same range is kept free on
    /// every member): HoraeFS's checkpoint region and p-area.
    pub tail_blocks: u64,
}

impl Stripe {
    /// The geometry over members of `blocks` each (the smallest member's
    /// size) with chunks of `chunk_blocks` and a linear tail of
    /// `tail_blocks`.
    pub fn new(members: usize, blocks: u64, chunk_blocks: u64, tail_blocks: u64) -> Result<Stripe, FsError> {
        if !(2..=MAX_MEMBERS).contains(&members) {
            return Err(FsError::Volume(format!(
                "a striped volume has 2 to {MAX_MEMBERS} members, not {members}"
            )));
        }
        if chunk_blocks == 0 {
            return Err(FsError::Volume("a chunk of 0 blocks".into()));
        }
        let member_blocks =
            blocks.saturating_sub(DATA_OFFSET.saturating_add(tail_blocks)) / chunk_blocks * chunk_blocks;
        if member_blocks == 0 {
            return Err(FsError::Volume(format!(
                "members of {blocks} blocks hold no chunk of {chunk_blocks}"
            )));
        }
        Ok(Stripe {
            members: members as u8,
            chunk_blocks,
            member_blocks,
            tail_blocks,
        })
    }

    /// Blocks of the volume.
    pub fn blocks(&self) -> u64 {
        self.striped_blocks() + self.tail_blocks
    }

    /// Blocks of the volume in chunks (before the tail).
    fn striped_blocks(&self) -> u64 {
        self.member_blocks * self.members as u64
    }

    /// Member blocks each member needs: label, chunks, tail.
    pub fn member_size(&self) -> u64 {
        DATA_OFFSET + self.member_blocks + self.tail_blocks
    }

    /// Where volume block `b` lives: `(member, member block)`; `None` past
    /// the end.
    pub fn map(&self, b: u64) -> Option<(usize, u64)> {
        if b >= self.blocks() {
            return None;
        }
        if b >= self.striped_blocks() {
            return Some((0, DATA_OFFSET + self.member_blocks + (b - self.striped_blocks())));
        }
        let n = self.members as u64;
        let chunk = b / self.chunk_blocks;
        let member = (chunk % n) as usize;
        let lba = DATA_OFFSET + chunk / n * self.chunk_blocks + b % self.chunk_blocks;
        Some((member, lba))
    }
}

/// A member's label (member block 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label {
    /// The volume's id (the file system's UUID).
    pub volume: [u8; 16],
    /// This member's role: its index in the volume.
    pub role: u8,
    /// The volume's geometry.
    pub stripe: Stripe,
}

impl Label {
    /// The label block.
    pub fn encode(&self) -> Box<[u8; BLOCK]> {
        let mut b = Box::new([0u8; BLOCK]);
        b[0..8].copy_from_slice(&LABEL_MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&LABEL_VERSION.to_le_bytes());
        b[12..28].copy_from_slice(&self.volume);
        b[28] = self.role;
        b[29] = self.stripe.members;
        b[32..40].copy_from_slice(&self.stripe.chunk_blocks.to_le_bytes());
        b[40..48].copy_from_slice(&self.stripe.member_blocks.to_le_bytes());
        b[48..56].copy_from_slice(&self.stripe.tail_blocks.to_le_bytes());
        let c = crc(&b[..BLOCK - 4]);
        b[BLOCK - 4..].copy_from_slice(&c.to_le_bytes());
        b
    }

    /// The label in `b`, `None` without the magic (not a member).
    pub fn decode(b: &[u8; BLOCK]) -> Result<Option<Label>, String> {
        let u64_at = |o: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(x)
        };
        if u64_at(0) != LABEL_MAGIC {
            return Ok(None);
        }
        let mut c = [0u8; 4];
        c.copy_from_slice(&b[BLOCK - 4..]);
        if u32::from_le_bytes(c) != crc(&b[..BLOCK - 4]) {
            return Err("its label's checksum does not match".into());
        }
        let mut v = [0u8; 4];
        v.copy_from_slice(&b[8..12]);
        if u32::from_le_bytes(v) != LABEL_VERSION {
            return Err(format!(
                "label version {} (this build reads {LABEL_VERSION})",
                u32::from_le_bytes(v)
            ));
        }
        let mut volume = [0u8; 16];
        volume.copy_from_slice(&b[12..28]);
        Ok(Some(Label {
            volume,
            role: b[28],
            stripe: Stripe {
                members: b[29],
                chunk_blocks: u64_at(32),
                member_blocks: u64_at(40),
                tail_blocks: u64_at(48),
            },
        }))
    }

    /// Whether block `b` (a device's block 0) is a member's label.
    pub fn is_label(b: &[u8; BLOCK]) -> bool {
        b[0..8] == LABEL_MAGIC.to_le_bytes()
    }
}

/// Assembles a striped volume from the labels read from its devices (in
/// the order given) and the devices' sizes: returns the geometry and, for
/// each role, the index of the device holding it. A device that is no
/// member, a member of another volume, a geometry the members disagree on,
/// two devices in one role, or a missing member is a [`FsError::Volume`].
pub fn assemble(
    labels: &[Result<Option<Label>, String>],
    sizes: &[u64],
) -> Result<(Stripe, Vec<usize>), FsError> {
    let err = |s: String| Err(FsError::Volume(s));
    let mut first: Option<Label> = None;
    let mut roles: Vec<Option<usize>> = Vec::new();
    for (i, l) in labels.iter().enumerate() {
        let l = match l {
            Ok(Some(l)) => *l,
            Ok(None) => return err(format!("device {i} is not a member of a striped volume")),
            Err(why) => return err(format!("device {i}: {why}")),
        };
        let f = *first.get_or_insert(l);
        if l.volume != f.volume {
            return err(format!("device {i} is a member of another volume"));
        }
        if l.stripe != f.stripe {
            return err(format!(
                "device {i} disagrees on the volume's geometry ({:?}, device 0: {:?})",
                l.stripe, f.stripe
            ));
        }
        let s = l.stripe;
        if !(2..=MAX_MEMBERS as u8).contains(&s.members)
            || s.chunk_blocks == 0
            || s.member_blocks == 0
            || s.member_blocks % s.chunk_blocks != 0
            || l.role >= s.members
        {
            return err(format!("device {i} has a damaged label ({l:?})"));
        }
        let need = DATA_OFFSET
            .checked_add(s.member_blocks)
            .and_then(|x| x.checked_add(s.tail_blocks))
            .filter(|_| s.member_blocks.checked_mul(s.members as u64).is_some());
        if need.is_none_or(|n| sizes.get(i).is_none_or(|&b| b < n)) {
            return err(format!("device {i} is smaller than its member of the volume"));
        }
        roles.resize(s.members as usize, None);
        if let Some(j) = roles[l.role as usize] {
            return err(format!("devices {j} and {i} both claim member {}", l.role));
        }
        roles[l.role as usize] = Some(i);
    }
    let Some(f) = first else {
        return err("a volume needs a device".into());
    };
    if labels.len() != f.stripe.members as usize {
        let missing: Vec<String> = roles
            .iter()
            .enumerate()
            .filter(|(_, r)| r.is_none())
            .map(|(k, _)| k.to_string())
            .collect();
        return err(format!(
            "the volume has {} members, {} given (missing member {})",
            f.stripe.members,
            labels.len(),
            missing.join(", ")
        ));
    }
    Ok((f.stripe, roles.into_iter().flatten().collect()))
}

/// A write submitted through the volume: which member runs it, its handle
/// and the host page it reads from.
#[derive(Debug)]
pub(crate) struct Submitted {
    pub member: usize,
    pub done: Done,
    pub page: HostAddr,
}

/// The mounted file system's volume: its devices and how blocks map onto
/// them.
#[derive(Debug, Clone)]
pub struct Volume {
    devs: Vec<Rc<BlockDevice>>,
    stripe: Option<Stripe>,
}

impl Volume {
    /// One drive: volume block `b` is its block `b`.
    pub fn single(dev: &Rc<BlockDevice>) -> Volume {
        Volume {
            devs: vec![dev.clone()],
            stripe: None,
        }
    }

    /// A striped volume of `devs` with geometry `stripe`, the devices
    /// in role order (mkfs; mount assembles with [`Volume::assemble`]).
    pub(crate) fn striped(devs: &[Rc<BlockDevice>], stripe: Stripe) -> Volume {
        Volume {
            devs: devs.to_vec(),
            stripe: Some(stripe),
        }
    }

    /// The volume on `devs`: one device is a single-drive volume
    /// ([`Volume::single`]); several are assembled from their labels
    /// ([`Volume::assemble`]).
    pub async fn open(devs: &[Rc<BlockDevice>], core: usize) -> Result<Volume, FsError> {
        match devs {
            [] => Err(FsError::Volume("a volume of no drives".into())),
            [one] => Ok(Volume::single(one)),
            _ => Volume::assemble(devs, core).await,
        }
    }

    /// Assembles the striped volume on `devs` (in any order) from their
    /// labels, read on `core`.
    pub async fn assemble(devs: &[Rc<BlockDevice>], core: usize) -> Result<Volume, FsError> {
        let mut labels = Vec::new();
        for d in devs {
            let raw = read_block(d, core, 0).await?;
            labels.push(Label::decode(&raw));
        }
        let sizes: Vec<u64> = devs.iter().map(|d| d.info().blocks).collect();
        let (stripe, roles) = assemble(&labels, &sizes)?;
        let ordered: Vec<Rc<BlockDevice>> = roles.iter().map(|&i| devs[i].clone()).collect();
        Ok(Volume::striped(&ordered, stripe))
    }

    /// The devices, by member index (the `devid` of HoraeFS's ordering
    /// stream).
    pub fn devices(&self) -> &[Rc<BlockDevice>] {
        &self.devs
    }

    /// The first device (the only one of a single-drive volume; the one
    /// whose PMR holds HoraeFS's ordering queue).
    pub fn first(&self) -> &Rc<BlockDevice> {
        &self.devs[0]
    }

    /// The striping, `None` on one drive.
    pub fn stripe(&self) -> Option<Stripe> {
        self.stripe
    }

    /// Blocks of the volume.
    pub fn blocks(&self) -> u64 {
        match self.stripe {
            Some(s) => s.blocks(),
            None => self.first().info().blocks,
        }
    }

    /// Where volume block `b` lives: `(member, lba)`.
    pub fn map(&self, b: u64) -> Result<(usize, u64), FsError> {
        match self.stripe {
            None => Ok((0, b)),
            Some(s) => s
                .map(b)
                .ok_or_else(|| FsError::Io(format!("block {b} is past the volume's {} blocks", s.blocks()))),
        }
    }

    /// The device LBA of the `len` blocks at volume block `b`, which must
    /// lie in the volume's linear tail (on member 0; [`Stripe::tail_blocks`]):
    /// where the ordering layer finds HoraeFS's checkpoint region and
    /// p-area. Every block of one drive is linear.
    pub fn tail_lba(&self, b: u64, len: u64) -> Result<u64, FsError> {
        let end = b.checked_add(len);
        let inside = match self.stripe {
            None => end.is_some_and(|e| e <= self.blocks()),
            Some(s) => b >= s.striped_blocks() && end.is_some_and(|e| e <= s.blocks()),
        };
        if !inside {
            return Err(FsError::Corrupt(format!(
                "blocks {b}+{len} are not in the volume's tail of {} blocks",
                self.stripe.map_or(self.blocks(), |s| s.tail_blocks)
            )));
        }
        Ok(self.map(b)?.1)
    }

    /// Reads volume block `b` into host page `page` on `core`.
    pub(crate) async fn read(&self, core: usize, b: u64, page: HostAddr) -> Result<(), FsError> {
        let (m, lba) = self.map(b)?;
        self.devs[m]
            .submit_wait(core, &Bio::read(lba, vec![page]))
            .await?;
        Ok(())
    }

    /// Starts writing host page `page` to volume block `b` with `flags`.
    ///
    /// A PREFLUSH write to a striped volume first flushes every member, as
    /// md does: `md_flush_request` (drivers/md/md.c, Linux 4.18, which
    /// raid0's `raid0_make_request` calls for a `REQ_PREFLUSH` bio) sends
    /// an empty flush bio to each member at once and, when all completed,
    /// submits the bio without `REQ_PREFLUSH` (`md_submit_flush_data`), its
    /// FUA kept, to the member that holds the block. So ext4's commit
    /// record makes every member's cache durable, not only its own
    /// member's. Deviation: the caller waits for the member flushes here,
    /// where md hands the data bio to a workqueue; JBD2's commit waits for
    /// the record at once either way. `flush_members` off (fault
    /// injection, [`crate::FsProfile::md_flush_members`]): the PREFLUSH
    /// goes to the written member only. On one drive the flags go to it
    /// unchanged.
    pub(crate) async fn submit_write(
        &self,
        core: usize,
        b: u64,
        page: HostAddr,
        flags: BioFlags,
        flush_members: bool,
    ) -> Result<Submitted, FsError> {
        let (member, lba) = self.map(b)?;
        let flags = if flush_members && self.devs.len() > 1 && flags.contains(BioFlags::PREFLUSH) {
            self.flush(core).await?;
            flags.without(BioFlags::PREFLUSH)
        } else {
            flags
        };
        let done = self.devs[member]
            .submit(core, &Bio::write(lba, vec![page]).with(flags))
            .await?;
        Ok(Submitted { member, done, page })
    }

    /// Waits for a write started on member `member`; its failure status
    /// as an error.
    pub(crate) async fn wait(&self, core: usize, member: usize, done: &Done) -> Result<(), FsError> {
        let s = self.devs[member].wait(core, done).await;
        if s.is_success() {
            Ok(())
        } else {
            Err(FsError::Driver(DriverError::Command(s)))
        }
    }

    /// Flushes every member's volatile cache, concurrently: one Flush per
    /// member submitted before any is waited for (md's `md_flush_request`
    /// sends a flush bio to each member; the block layer drops it on a
    /// drive without a volatile cache).
    pub(crate) async fn flush(&self, core: usize) -> Result<(), FsError> {
        let mut started = Vec::with_capacity(self.devs.len());
        for d in &self.devs {
            started.push(d.submit(core, &Bio::flush()).await?);
        }
        let mut r = Ok(());
        for (m, done) in started.iter().enumerate() {
            let s = self.wait(core, m, done).await;
            if r.is_ok() {
                r = s;
            }
        }
        r
    }

    /// Writes the members' labels (mkfs), then flushes.
    pub(crate) async fn write_labels(&self, core: usize, volume: [u8; 16]) -> Result<(), FsError> {
        let Some(stripe) = self.stripe else {
            return Ok(());
        };
        let mem = self.first().machine().memory();
        let page = mem.alloc(BLOCK as u64)?;
        let mut r = Ok(());
        for (i, d) in self.devs.iter().enumerate() {
            let l = Label {
                volume,
                role: i as u8,
                stripe,
            };
            mem.write(page, &l.encode()[..])?;
            r = d.submit_wait(core, &Bio::write(0, vec![page])).await;
            if r.is_err() {
                break;
            }
        }
        mem.free(page)?;
        r?;
        self.flush(core).await
    }

    /// Shuts every member down.
    pub(crate) async fn shutdown(&self) -> Result<(), FsError> {
        for d in &self.devs {
            d.shutdown().await?;
        }
        Ok(())
    }
}

/// Reads block `lba` of `dev` on `core` (assembly, before the volume
/// exists).
pub(crate) async fn read_block(
    dev: &BlockDevice,
    core: usize,
    lba: u64,
) -> Result<Box<[u8; BLOCK]>, FsError> {
    let mem = dev.machine().memory();
    let page = mem.alloc(BLOCK as u64)?;
    let r = dev.submit_wait(core, &Bio::read(lba, vec![page])).await;
    let mut out = Box::new([0u8; BLOCK]);
    let copied = mem.read(page, &mut out[..]);
    mem.free(page)?;
    r?;
    copied?;
    Ok(out)
}

/// A volume's blocks read from its members' sources, without simulated
/// time (fsck, and crash checkers that look at what a drive holds): one
/// source is the volume itself; several are assembled from their labels
/// and mapped with the same [`Stripe`] as [`Volume`].
pub struct VolumeSource<'a> {
    /// The sources as given (by port, say).
    sources: Vec<&'a dyn BlockSource>,
    /// Per member (role order): its index in `sources`.
    roles: Vec<usize>,
    /// The striping, `None` for one source.
    stripe: Option<Stripe>,
}

impl std::fmt::Debug for VolumeSource<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VolumeSource")
            .field("roles", &self.roles)
            .field("stripe", &self.stripe)
            .finish()
    }
}

impl<'a> VolumeSource<'a> {
    /// The volume on `sources`: one source is a single-drive volume (its
    /// block `b` is the volume's); several are assembled from their
    /// labels, in any order, as [`Volume::open`] does.
    pub fn open(sources: &[&'a dyn BlockSource]) -> Result<VolumeSource<'a>, FsError> {
        match sources {
            [] => Err(FsError::Volume("a volume of no drives".into())),
            [one] => Ok(VolumeSource {
                sources: vec![*one],
                roles: vec![0],
                stripe: None,
            }),
            _ => VolumeSource::assemble(sources),
        }
    }

    /// Assembles the striped volume from its members' sources (in any
    /// order), as [`Volume::assemble`] does.
    pub fn assemble(sources: &[&'a dyn BlockSource]) -> Result<VolumeSource<'a>, FsError> {
        let mut buf = [0u8; BLOCK];
        let mut labels = Vec::new();
        for s in sources {
            s.read(0, &mut buf);
            labels.push(Label::decode(&buf));
        }
        let sizes: Vec<u64> = sources.iter().map(|s| s.blocks()).collect();
        let (stripe, roles) = assemble(&labels, &sizes)?;
        Ok(VolumeSource {
            sources: sources.to_vec(),
            roles,
            stripe: Some(stripe),
        })
    }

    /// The striping (`None` on one drive).
    pub fn stripe(&self) -> Option<Stripe> {
        self.stripe
    }

    /// Where volume block `b` lives: the index of its source in the
    /// slice the volume was opened on, and the block there; `None` past
    /// the volume's end.
    pub fn locate(&self, b: u64) -> Option<(usize, u64)> {
        match self.stripe {
            None => (b < self.sources[0].blocks()).then_some((0, b)),
            Some(s) => s.map(b).map(|(m, lba)| (self.roles[m], lba)),
        }
    }
}

impl BlockSource for VolumeSource<'_> {
    fn blocks(&self) -> u64 {
        match self.stripe {
            None => self.sources[0].blocks(),
            Some(s) => s.blocks(),
        }
    }

    fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
        match self.locate(block) {
            Some((i, lba)) => self.sources[i].read(lba, buf),
            None => buf.fill(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_go_round_robin_after_the_label() {
        let s = Stripe::new(2, 1 + 4 * 128 + 7, 128, 0).unwrap();
        assert_eq!(s.member_blocks, 4 * 128);
        assert_eq!(s.blocks(), 8 * 128);
        assert_eq!(s.map(0), Some((0, 1)));
        assert_eq!(s.map(127), Some((0, 128)));
        assert_eq!(s.map(128), Some((1, 1)));
        assert_eq!(s.map(256), Some((0, 129)));
        assert_eq!(s.map(3 * 128 + 5), Some((1, 1 + 128 + 5)));
        assert_eq!(s.map(8 * 128), None);
        // Every member block of the data area is hit exactly once.
        let mut seen = std::collections::BTreeSet::new();
        for b in 0..s.blocks() {
            assert!(seen.insert(s.map(b).unwrap()));
        }
    }

    #[test]
    fn the_tail_is_linear_on_member_0_after_its_chunks() {
        let s = Stripe::new(2, 1 + 4 * 128 + 40, 128, 30).unwrap();
        assert_eq!(s.member_blocks, 4 * 128);
        assert_eq!(s.blocks(), 8 * 128 + 30);
        assert_eq!(s.member_size(), 1 + 4 * 128 + 30);
        // The last chunk ends on member 1; the tail follows on member 0.
        assert_eq!(s.map(8 * 128 - 1), Some((1, 4 * 128)));
        assert_eq!(s.map(8 * 128), Some((0, 1 + 4 * 128)));
        assert_eq!(s.map(8 * 128 + 29), Some((0, 1 + 4 * 128 + 29)));
        assert_eq!(s.map(8 * 128 + 30), None);
        // A tail that leaves no chunk is refused.
        assert!(matches!(
            Stripe::new(2, 1 + 100 + 30, 128, 30),
            Err(FsError::Volume(_))
        ));
    }

    #[test]
    fn bad_geometry_is_a_typed_error() {
        assert!(matches!(Stripe::new(1, 1000, 128, 0), Err(FsError::Volume(_))));
        assert!(matches!(Stripe::new(5, 1000, 128, 0), Err(FsError::Volume(_))));
        assert!(matches!(Stripe::new(2, 100, 128, 0), Err(FsError::Volume(_))));
    }

    /// Blocks in memory: block 0 holds `label`, the rest zeroes.
    struct Blocks {
        blocks: u64,
        label: Option<Label>,
    }

    impl BlockSource for Blocks {
        fn blocks(&self) -> u64 {
            self.blocks
        }

        fn read(&self, block: u64, buf: &mut [u8; BLOCK]) {
            match (block, &self.label) {
                (0, Some(l)) => buf.copy_from_slice(&l.encode()[..]),
                _ => buf.fill(0),
            }
        }
    }

    #[test]
    fn a_volume_source_is_one_drive_or_its_members_by_role() {
        let one = Blocks {
            blocks: 10,
            label: None,
        };
        let v = VolumeSource::open(&[&one]).unwrap();
        assert_eq!((v.blocks(), v.stripe()), (10, None));
        assert_eq!(v.locate(9), Some((0, 9)));
        assert_eq!(v.locate(10), None);
        assert!(matches!(VolumeSource::open(&[]), Err(FsError::Volume(_))));
        // Two members given in the other order: a block is located on the
        // source that holds its member.
        let s = Stripe::new(2, 1 + 4 * 128, 128, 0).unwrap();
        let member = |role| Blocks {
            blocks: 1 + 4 * 128,
            label: Some(Label {
                volume: [3; 16],
                role,
                stripe: s,
            }),
        };
        let (m0, m1) = (member(0), member(1));
        let v = VolumeSource::open(&[&m1, &m0]).unwrap();
        assert_eq!(v.stripe(), Some(s));
        assert_eq!(v.locate(0), Some((1, 1)), "chunk 0 is member 0's, given second");
        assert_eq!(v.locate(128), Some((0, 1)));
        assert_eq!(v.locate(s.blocks()), None);
    }

    #[test]
    fn assembly_orders_by_role_and_names_what_is_wrong() {
        let s = Stripe::new(3, 1000, 128, 0).unwrap();
        let l = |role, volume| {
            Ok(Some(Label {
                volume,
                role,
                stripe: s,
            }))
        };
        let v = [7u8; 16];
        let sizes = [1000u64; 3];
        let (g, roles) = assemble(&[l(2, v), l(0, v), l(1, v)], &sizes).unwrap();
        assert_eq!((g, roles), (s, vec![1, 2, 0]));
        let msg = |r: Result<(Stripe, Vec<usize>), FsError>| r.unwrap_err().to_string();
        assert!(msg(assemble(&[l(0, v), l(1, v)], &sizes)).contains("missing member 2"));
        assert!(msg(assemble(&[l(0, v), l(1, v), l(1, v)], &sizes)).contains("both claim member 1"));
        assert!(msg(assemble(&[l(0, v), l(1, [8; 16]), l(2, v)], &sizes)).contains("another volume"));
        assert!(msg(assemble(&[l(0, v), Ok(None), l(2, v)], &sizes)).contains("not a member"));
        assert!(msg(assemble(&[l(0, v), l(1, v), l(2, v)], &[1000, 10, 1000])).contains("smaller"));
        let other = Ok(Some(Label {
            volume: v,
            role: 1,
            stripe: Stripe {
                chunk_blocks: 64,
                ..s
            },
        }));
        assert!(msg(assemble(&[l(0, v), other, l(2, v)], &sizes)).contains("geometry"));
    }

    #[test]
    fn a_label_round_trips_and_a_damaged_one_is_refused() {
        let l = Label {
            volume: [3; 16],
            role: 1,
            stripe: Stripe::new(2, 1000, 128, 0).unwrap(),
        };
        let mut b = l.encode();
        assert_eq!(Label::decode(&b), Ok(Some(l)));
        b[30] ^= 1;
        assert!(Label::decode(&b).is_err());
        assert_eq!(Label::decode(&[0u8; BLOCK]), Ok(None));
    }
}
