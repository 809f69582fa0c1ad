//! The 64-byte submission queue entry (NVMe 1.4 4.2, Figures 105 and 106) and
//! the NVM I/O command fields (NVMe 1.4 6). Opcodes live in `opcode.rs`, admin command fields in
//! `admin.rs`, the ccNVMe extensions in `ccnvme.rs`; all fields are methods of [`SubmissionEntry`].

use super::bits::{bit32, get32, le32, le64, put, set32, setbit32};

pub use super::opcode::{AdminOpcode, IoOpcode};

pub use super::ccnvme::{TxFlags, VENDOR_CAP_OFFSET, VENDOR_CAP_PMR_QUEUES};

/// Size of a submission queue entry in bytes (CC.IOSQES = 6).
pub const SQE_SIZE: usize = 64;
/// [`SQE_SIZE`] as a byte count for queue address arithmetic (slot × entry size).
pub const SQE_BYTES: u64 = SQE_SIZE as u64;

/// A submission queue entry as sixteen little-endian command dwords (NVMe 1.4 Figure 105).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct SubmissionEntry {
    /// Command dwords 0 to 15.
    pub dw: [u32; 16],
}

/// One Dataset Management range, 16 bytes (NVMe 1.4 Figure 364).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct DsmRange {
    /// Context attributes (bytes 3:0).
    pub context: u32,
    /// Length in logical blocks (bytes 7:4). Unlike CDW12.NLB this count is 1-based.
    pub nlb: u32,
    /// Starting LBA (bytes 15:8).
    pub slba: u64,
}

impl DsmRange {
    /// Size of one range in bytes.
    pub const SIZE: usize = 16;

    /// Decodes a range.
    pub fn from_bytes(b: &[u8; 16]) -> Self {
        DsmRange {
            context: le32(b, 0),
            nlb: le32(b, 4),
            slba: le64(b, 8),
        }
    }

    /// Encodes a range.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        put(&mut b, 0, &self.context.to_le_bytes());
        put(&mut b, 4, &self.nlb.to_le_bytes());
        put(&mut b, 8, &self.slba.to_le_bytes());
        b
    }

    /// Decodes a range list: every whole 16-byte range in `b`, in order.
    pub fn list_from_bytes(b: &[u8]) -> Vec<DsmRange> {
        b.chunks_exact(Self::SIZE)
            .map(|c| DsmRange {
                context: le32(c, 0),
                nlb: le32(c, 4),
                slba: le64(c, 8),
            })
            .collect()
    }
}

impl SubmissionEntry {
    /// Decodes an entry from its 64 bytes.
    pub fn from_bytes(b: &[u8; 64]) -> Self {
        let mut dw = [0u32; 16];
        for (i, d) in dw.iter_mut().enumerate() {
            *d = le32(b, 4 * i);
        }
        SubmissionEntry { dw }
    }

    /// Encodes the entry into its 64 bytes.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        for (i, d) in self.dw.iter().enumerate() {
            put(&mut b, 4 * i, &d.to_le_bytes());
        }
        b
    }

    /// An entry with opcode, CID and NSID set and everything else zero.
    pub fn new(opcode: u8, cid: u16, nsid: u32) -> Self {
        let mut e = SubmissionEntry::default();
        e.set_opcode(opcode);
        e.set_cid(cid);
        e.set_nsid(nsid);
        e
    }

    // --- Common command format (NVMe 1.4 4.2, Figures 105-106) ---

    /// OPC: CDW0 7:0.
    pub fn opcode(&self) -> u8 {
        get32(self.dw[0], 7, 0) as u8
    }
    /// Sets CDW0 7:0.
    pub fn set_opcode(&mut self, v: u8) {
        self.dw[0] = set32(self.dw[0], 7, 0, v.into());
    }
    /// FUSE: CDW0 9:8.
    pub fn fuse(&self) -> u8 {
        get32(self.dw[0], 9, 8) as u8
    }
    /// Sets CDW0 9:8.
    pub fn set_fuse(&mut self, v: u8) {
        self.dw[0] = set32(self.dw[0], 9, 8, v.into());
    }
    /// PSDT: CDW0 15:14 (0 = PRPs).
    pub fn psdt(&self) -> u8 {
        get32(self.dw[0], 15, 14) as u8
    }
    /// Sets CDW0 15:14.
    pub fn set_psdt(&mut self, v: u8) {
        self.dw[0] = set32(self.dw[0], 15, 14, v.into());
    }
    /// CID: CDW0 31:16 (bytes 3:2).
    pub fn cid(&self) -> u16 {
        get32(self.dw[0], 31, 16) as u16
    }
    /// Sets CDW0 31:16.
    pub fn set_cid(&mut self, v: u16) {
        self.dw[0] = set32(self.dw[0], 31, 16, v.into());
    }
    /// NSID: CDW1.
    pub fn nsid(&self) -> u32 {
        self.dw[1]
    }
    /// Sets CDW1.
    pub fn set_nsid(&mut self, v: u32) {
        self.dw[1] = v;
    }
    /// CDW2 (carries the low half of the ccNVMe transaction ID).
    pub fn cdw2(&self) -> u32 {
        self.dw[2]
    }
    /// Sets CDW2.
    pub fn set_cdw2(&mut self, v: u32) {
        self.dw[2] = v;
    }
    /// CDW3 (carries the high half of the ccNVMe transaction ID).
    pub fn cdw3(&self) -> u32 {
        self.dw[3]
    }
    /// Sets CDW3.
    pub fn set_cdw3(&mut self, v: u32) {
        self.dw[3] = v;
    }
    /// MPTR: metadata pointer, CDW4-5.
    pub fn mptr(&self) -> u64 {
        self.qword(4)
    }
    /// Sets CDW4-5.
    pub fn set_mptr(&mut self, v: u64) {
        self.set_qword(4, v);
    }
    /// PRP1: CDW6-7.
    pub fn prp1(&self) -> u64 {
        self.qword(6)
    }
    /// Sets CDW6-7.
    pub fn set_prp1(&mut self, v: u64) {
        self.set_qword(6, v);
    }
    /// PRP2: CDW8-9.
    pub fn prp2(&self) -> u64 {
        self.qword(8)
    }
    /// Sets CDW8-9.
    pub fn set_prp2(&mut self, v: u64) {
        self.set_qword(8, v);
    }
    /// Command dword `n` (meant for 10..=15; any index below 16 works; panics at 16 or above).
    pub fn cdw(&self, n: usize) -> u32 {
        self.dw[n]
    }
    /// Sets command dword `n` (meant for 10..=15; any index below 16 works; panics at 16 or above).
    pub fn set_cdw(&mut self, n: usize, v: u32) {
        self.dw[n] = v;
    }

    /// The 64-bit value in dwords `lo` (low half) and `lo + 1` (high half).
    pub(crate) fn qword(&self, lo: usize) -> u64 {
        u64::from(self.dw[lo]) | (u64::from(self.dw[lo + 1]) << 32)
    }
    /// Stores a 64-bit value in dwords `lo` and `lo + 1`.
    pub(crate) fn set_qword(&mut self, lo: usize, v: u64) {
        self.dw[lo] = v as u32;
        self.dw[lo + 1] = (v >> 32) as u32;
    }

    // --- NVM I/O command fields (NVMe 1.4 section 6: Read, Write, Dataset Management) ---

    /// SLBA: starting LBA, CDW10-11.
    pub fn slba(&self) -> u64 {
        self.qword(10)
    }
    /// Sets CDW10-11.
    pub fn set_slba(&mut self, v: u64) {
        self.set_qword(10, v);
    }
    /// NLB: CDW12 15:0, the raw 0-based block count.
    pub fn nlb(&self) -> u16 {
        get32(self.dw[12], 15, 0) as u16
    }
    /// Sets CDW12 15:0 (raw, 0-based).
    pub fn set_nlb(&mut self, v: u16) {
        self.dw[12] = set32(self.dw[12], 15, 0, v.into());
    }
    /// Number of logical blocks, NLB + 1.
    pub fn block_count(&self) -> u32 {
        u32::from(self.nlb()) + 1
    }
    /// FUA: force unit access, CDW12 bit 30.
    pub fn fua(&self) -> bool {
        bit32(self.dw[12], 30)
    }
    /// Sets CDW12 bit 30.
    pub fn set_fua(&mut self, v: bool) {
        self.dw[12] = setbit32(self.dw[12], 30, v);
    }
    /// LR: limited retry, CDW12 bit 31.
    pub fn limited_retry(&self) -> bool {
        bit32(self.dw[12], 31)
    }
    /// Sets CDW12 bit 31.
    pub fn set_limited_retry(&mut self, v: bool) {
        self.dw[12] = setbit32(self.dw[12], 31, v);
    }
    /// Dataset Management: number of ranges (NR, CDW10 7:0, plus one), 1 to 256.
    pub fn dsm_ranges(&self) -> u16 {
        get32(self.dw[10], 7, 0) as u16 + 1
    }
    /// Sets the number of ranges (1 to 256; stored 0-based in CDW10 7:0; 0 is stored as 1).
    pub fn set_dsm_ranges(&mut self, count: u16) {
        self.dw[10] = set32(self.dw[10], 7, 0, u32::from(count.max(1)) - 1);
    }
    /// Dataset Management AD: deallocate, CDW11 bit 2.
    pub fn dsm_deallocate(&self) -> bool {
        bit32(self.dw[11], 2)
    }
    /// Sets CDW11 bit 2.
    pub fn set_dsm_deallocate(&mut self, v: bool) {
        self.dw[11] = setbit32(self.dw[11], 2, v);
    }

    /// A Read of `blocks` (1 to 65536) logical blocks starting at `slba`.
    pub fn read(cid: u16, nsid: u32, slba: u64, blocks: u32, prp1: u64, prp2: u64) -> Self {
        Self::rw(IoOpcode::Read, cid, nsid, slba, blocks, prp1, prp2)
    }

    /// A Write of `blocks` (1 to 65536) logical blocks starting at `slba`.
    pub fn write(cid: u16, nsid: u32, slba: u64, blocks: u32, prp1: u64, prp2: u64, fua: bool) -> Self {
        let mut e = Self::rw(IoOpcode::Write, cid, nsid, slba, blocks, prp1, prp2);
        e.set_fua(fua);
        e
    }

    /// A Flush of namespace `nsid`.
    pub fn flush(cid: u16, nsid: u32) -> Self {
        Self::new(IoOpcode::Flush as u8, cid, nsid)
    }

    /// Shared body of `read` and `write`; `blocks` is clamped to 1..=65536.
    fn rw(op: IoOpcode, cid: u16, nsid: u32, slba: u64, blocks: u32, prp1: u64, prp2: u64) -> Self {
        let mut e = Self::new(op as u8, cid, nsid);
        e.set_slba(slba);
        e.set_nlb((blocks.clamp(1, 0x1_0000) - 1) as u16);
        e.set_prp1(prp1);
        e.set_prp2(prp2);
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_fields_land_on_their_bytes() {
        let mut e = SubmissionEntry::new(0x02, 0xBEEF, 0x1122_3344);
        e.set_fuse(1);
        e.set_psdt(0);
        e.set_mptr(0x0102_0304_0506_0708);
        e.set_prp1(0xAAAA_0000_1000);
        e.set_prp2(0xBBBB_0000_2000);
        let b = e.to_bytes();
        assert_eq!(b[0], 0x02);
        assert_eq!(b[1], 0x01, "FUSE in CDW0 9:8");
        assert_eq!(b[2..4], [0xEF, 0xBE], "CID in bytes 3:2");
        assert_eq!(b[4..8], [0x44, 0x33, 0x22, 0x11], "NSID in bytes 7:4");
        assert_eq!(
            b[16..24],
            0x0102_0304_0506_0708u64.to_le_bytes(),
            "MPTR in bytes 23:16"
        );
        assert_eq!(
            b[24..32],
            0xAAAA_0000_1000u64.to_le_bytes(),
            "PRP1 in bytes 31:24"
        );
        assert_eq!(
            b[32..40],
            0xBBBB_0000_2000u64.to_le_bytes(),
            "PRP2 in bytes 39:32"
        );
        assert_eq!(SubmissionEntry::from_bytes(&b), e);
        e.set_psdt(2);
        assert_eq!(e.to_bytes()[1], 0x81);
        assert_eq!(e.psdt(), 2);
    }

    #[test]
    fn read_write_fields() {
        let e = SubmissionEntry::write(7, 1, 0x1_0000_0002, 8, 0x1000, 0x2000, true);
        assert_eq!(e.opcode(), IoOpcode::Write as u8);
        assert_eq!((e.slba(), e.nlb(), e.block_count()), (0x1_0000_0002, 7, 8));
        assert!(e.fua() && !e.limited_retry());
        let b = e.to_bytes();
        assert_eq!(b[40..48], 0x1_0000_0002u64.to_le_bytes(), "SLBA in CDW10-11");
        assert_eq!(
            b[48..52],
            (7u32 | (1 << 30)).to_le_bytes(),
            "NLB and FUA in CDW12"
        );
        let r = SubmissionEntry::read(8, 1, 0, 0x1_0000, 0, 0);
        assert_eq!(
            (r.opcode(), r.nlb(), r.block_count(), r.fua()),
            (2, 0xFFFF, 0x1_0000, false)
        );
        let f = SubmissionEntry::flush(9, 3);
        assert_eq!((f.opcode(), f.cid(), f.nsid()), (0, 9, 3));
        let mut e = e;
        e.set_limited_retry(true);
        assert_eq!(e.cdw(12) >> 31, 1);
    }

    #[test]
    fn dsm_fields_and_ranges() {
        let mut e = SubmissionEntry::new(IoOpcode::DatasetManagement as u8, 1, 1);
        e.set_dsm_ranges(256);
        e.set_dsm_deallocate(true);
        assert_eq!((e.cdw(10), e.cdw(11)), (0xFF, 4));
        assert_eq!(e.dsm_ranges(), 256);
        let r = DsmRange {
            context: 0x0A0B_0C0D,
            nlb: 16,
            slba: 0x1122_3344_5566_7788,
        };
        let b = r.to_bytes();
        assert_eq!(b[0..4], [0x0D, 0x0C, 0x0B, 0x0A]);
        assert_eq!(b[4..8], [16, 0, 0, 0]);
        assert_eq!(b[8..16], 0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(DsmRange::from_bytes(&b), r);
        let mut list = b.to_vec();
        list.extend_from_slice(&DsmRange::default().to_bytes());
        list.push(0xFF);
        assert_eq!(DsmRange::list_from_bytes(&list), vec![r, DsmRange::default()]);
    }

    proptest! {
        #[test]
        fn sqe_bytes_round_trip(bytes in proptest::collection::vec(any::<u8>(), 64)) {
            let mut b = [0u8; 64];
            b.copy_from_slice(&bytes);
            let e = SubmissionEntry::from_bytes(&b);
            prop_assert_eq!(e.to_bytes(), b);
            prop_assert_eq!(e.cid(), u16::from_le_bytes([b[2], b[3]]));
            prop_assert_eq!(e.opcode(), b[0]);
        }

        #[test]
        fn sqe_fields_round_trip(op: u8, cid: u16, nsid: u32, prp1: u64, prp2: u64, slba: u64, nlb: u16) {
            let mut e = SubmissionEntry::new(op, cid, nsid);
            e.set_prp1(prp1);
            e.set_prp2(prp2);
            e.set_slba(slba);
            e.set_nlb(nlb);
            let d = SubmissionEntry::from_bytes(&e.to_bytes());
            prop_assert_eq!((d.opcode(), d.cid(), d.nsid()), (op, cid, nsid));
            prop_assert_eq!((d.prp1(), d.prp2(), d.slba(), d.nlb()), (prp1, prp2, slba, nlb));
        }
    }
}
