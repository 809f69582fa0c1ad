//! Controller registers (NVMe 1.4 section 3.1).
//!
//! Each register is a newtype over its raw value with typed getters and `with_*` builder
//! setters; setters mask their argument to the field width.

use super::bits::bitfields;

pub use super::pmr_regs::{PmrCap, PmrCtl, PmrEbs, PmrMsc, PmrSts, PmrSwtp};

/// Controller Capabilities (64-bit, NVMe 1.4 3.1.1).
pub const CAP: u64 = 0x00;
/// Version (NVMe 1.4 3.1.2).
pub const VS: u64 = 0x08;
/// Interrupt Mask Set (NVMe 1.4 3.1.3).
pub const INTMS: u64 = 0x0C;
/// Interrupt Mask Clear (NVMe 1.4 3.1.4).
pub const INTMC: u64 = 0x10;
/// Controller Configuration (NVMe 1.4 3.1.5).
pub const CC: u64 = 0x14;
/// Controller Status (NVMe 1.4 3.1.6).
pub const CSTS: u64 = 0x1C;
/// NVM Subsystem Reset (NVMe 1.4 3.1.7).
pub const NSSR: u64 = 0x20;
/// Admin Queue Attributes (NVMe 1.4 3.1.8).
pub const AQA: u64 = 0x24;
/// Admin Submission Queue Base Address (64-bit, NVMe 1.4 3.1.9).
pub const ASQ: u64 = 0x28;
/// Admin Completion Queue Base Address (64-bit, NVMe 1.4 3.1.10).
pub const ACQ: u64 = 0x30;
/// Controller Memory Buffer Location (NVMe 1.4 3.1.11).
pub const CMBLOC: u64 = 0x38;
/// Controller Memory Buffer Size (NVMe 1.4 3.1.12).
pub const CMBSZ: u64 = 0x3C;
/// Boot Partition Information (NVMe 1.4 3.1.13).
pub const BPINFO: u64 = 0x40;
/// Boot Partition Read Select (NVMe 1.4 3.1.14).
pub const BPRSEL: u64 = 0x44;
/// Boot Partition Memory Buffer Location (64-bit, NVMe 1.4 3.1.15).
pub const BPMBL: u64 = 0x48;
/// Persistent Memory Capabilities (NVMe 1.4 3.1.21).
pub const PMRCAP: u64 = 0xE00;
/// Persistent Memory Region Control (NVMe 1.4 3.1.22).
pub const PMRCTL: u64 = 0xE04;
/// Persistent Memory Region Status (NVMe 1.4 3.1.23).
pub const PMRSTS: u64 = 0xE08;
/// Persistent Memory Region Elasticity Buffer Size (NVMe 1.4 3.1.24).
pub const PMREBS: u64 = 0xE0C;
/// Persistent Memory Region Sustained Write Throughput (NVMe 1.4 3.1.25).
pub const PMRSWTP: u64 = 0xE10;
/// Persistent Memory Region Controller Memory Space Control, lower 32 bits (NVMe 1.4 3.1.26).
pub const PMRMSCL: u64 = 0xE14;
/// Persistent Memory Region Controller Memory Space Control, upper 32 bits (NVMe 1.4 3.1.27).
pub const PMRMSCU: u64 = 0xE18;
/// First doorbell register: the admin SQ tail doorbell (NVMe 1.4 3.1.16).
pub const DOORBELL_BASE: u64 = 0x1000;

/// The VS value of NVMe 1.4.0 (same as `Vs::V1_4_0.0`).
pub const VS_1_4: u32 = 0x0001_0400;

/// CAP: Controller Capabilities (NVMe 1.4 3.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Cap(pub u64);

impl Cap {
    bitfields! { u64;
        /// MQES (15:0): maximum individual queue size, 0-based.
        mqes, with_mqes: u16 = 15:0;
        /// CQR (16): contiguous queues required.
        cqr, with_cqr: bool = 16;
        /// AMS (18:17): arbitration mechanisms supported beyond round robin.
        ams, with_ams: u8 = 18:17;
        /// TO (31:24): worst-case time to CSTS.RDY change, in 500 ms units.
        to, with_to: u8 = 31:24;
        /// DSTRD (35:32): doorbell stride, `4 << dstrd` bytes.
        dstrd, with_dstrd: u8 = 35:32;
        /// NSSRS (36): NVM subsystem reset supported.
        nssrs, with_nssrs: bool = 36;
        /// CSS (44:37): command sets supported.
        css, with_css: u8 = 44:37;
        /// CSS bit 37: the NVM command set is supported.
        css_nvm, with_css_nvm: bool = 37;
        /// BPS (45): boot partitions supported.
        bps, with_bps: bool = 45;
        /// MPSMIN (51:48): minimum memory page size, `2 ^ (12 + mpsmin)` bytes.
        mpsmin, with_mpsmin: u8 = 51:48;
        /// MPSMAX (55:52): maximum memory page size, `2 ^ (12 + mpsmax)` bytes.
        mpsmax, with_mpsmax: u8 = 55:52;
        /// PMRS (56): persistent memory region supported.
        pmrs, with_pmrs: bool = 56;
        /// CMBS (57): controller memory buffer supported.
        cmbs, with_cmbs: bool = 57;
    }
}

/// VS: Version (NVMe 1.4 3.1.2): major 31:16, minor 15:8, tertiary 7:0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Vs(pub u32);

impl Vs {
    /// NVMe 1.4.0.
    pub const V1_4_0: Vs = Vs(VS_1_4);

    /// Builds a version value from its three parts.
    pub const fn new(major: u16, minor: u8, tertiary: u8) -> Self {
        Vs(((major as u32) << 16) | ((minor as u32) << 8) | tertiary as u32)
    }

    bitfields! { u32;
        /// MJR (31:16): major version.
        major, with_major: u16 = 31:16;
        /// MNR (15:8): minor version.
        minor, with_minor: u8 = 15:8;
        /// TER (7:0): tertiary version.
        tertiary, with_tertiary: u8 = 7:0;
    }
}

/// CC.SHN: shutdown notification (NVMe 1.4 3.1.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ShutdownNotification {
    /// 00b: no notification.
    #[default]
    None,
    /// 01b: normal shutdown.
    Normal,
    /// 10b: abrupt shutdown.
    Abrupt,
}

/// CSTS.SHST: shutdown status (NVMe 1.4 3.1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ShutdownStatus {
    /// 00b: normal operation.
    #[default]
    Normal,
    /// 01b: shutdown processing occurring.
    Occurring,
    /// 10b: shutdown processing complete.
    Complete,
}

/// CC: Controller Configuration (NVMe 1.4 3.1.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Cc(pub u32);

impl Cc {
    bitfields! { u32;
        /// EN (0): enable.
        en, with_en: bool = 0;
        /// CSS (6:4): I/O command set selected (000b = NVM).
        css, with_css: u8 = 6:4;
        /// MPS (10:7): memory page size, `2 ^ (12 + mps)` bytes.
        mps, with_mps: u8 = 10:7;
        /// AMS (13:11): arbitration mechanism selected.
        ams, with_ams: u8 = 13:11;
        /// SHN (15:14) as its raw two bits.
        shn_raw, with_shn_raw: u8 = 15:14;
        /// IOSQES (19:16): I/O SQ entry size, `2 ^ iosqes` bytes (6 = 64 bytes).
        iosqes, with_iosqes: u8 = 19:16;
        /// IOCQES (23:20): I/O CQ entry size, `2 ^ iocqes` bytes (4 = 16 bytes).
        iocqes, with_iocqes: u8 = 23:20;
    }

    /// SHN (15:14): shutdown notification; the reserved value 11b reads as `None`.
    pub const fn shn(self) -> ShutdownNotification {
        match self.shn_raw() {
            1 => ShutdownNotification::Normal,
            2 => ShutdownNotification::Abrupt,
            _ => ShutdownNotification::None,
        }
    }

    /// Returns a copy with SHN set.
    pub const fn with_shn(self, shn: ShutdownNotification) -> Self {
        self.with_shn_raw(shn as u8)
    }
}

/// CSTS: Controller Status (NVMe 1.4 3.1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Csts(pub u32);

impl Csts {
    bitfields! { u32;
        /// RDY (0): ready.
        rdy, with_rdy: bool = 0;
        /// CFS (1): controller fatal status.
        cfs, with_cfs: bool = 1;
        /// SHST (3:2) as its raw two bits.
        shst_raw, with_shst_raw: u8 = 3:2;
        /// NSSRO (4): NVM subsystem reset occurred.
        nssro, with_nssro: bool = 4;
        /// PP (5): processing paused.
        pp, with_pp: bool = 5;
    }

    /// SHST (3:2): shutdown status; the reserved value 11b reads as `Normal`.
    pub const fn shst(self) -> ShutdownStatus {
        match self.shst_raw() {
            1 => ShutdownStatus::Occurring,
            2 => ShutdownStatus::Complete,
            _ => ShutdownStatus::Normal,
        }
    }

    /// Returns a copy with SHST set.
    pub const fn with_shst(self, shst: ShutdownStatus) -> Self {
        self.with_shst_raw(shst as u8)
    }
}

/// AQA: Admin Queue Attributes (NVMe 1.4 3.1.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Aqa(pub u32);

impl Aqa {
    bitfields! { u32;
        /// ASQS (11:0): admin SQ size, 0-based.
        asqs, with_asqs: u16 = 11:0;
        /// ACQS (27:16): admin CQ size, 0-based.
        acqs, with_acqs: u16 = 27:16;
    }

    /// Number of admin SQ entries (ASQS + 1).
    pub const fn sq_entries(self) -> u16 {
        self.asqs() + 1
    }

    /// Number of admin CQ entries (ACQS + 1).
    pub const fn cq_entries(self) -> u16 {
        self.acqs() + 1
    }
}

/// A decoded doorbell register (NVMe 1.4 3.1.16-3.1.17).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Doorbell {
    /// Submission Queue y Tail Doorbell for this queue ID.
    SqTail(u16),
    /// Completion Queue y Head Doorbell for this queue ID.
    CqHead(u16),
}

/// Bytes between doorbells: `4 << dstrd` (DSTRD is a 4-bit field; higher bits are ignored).
const fn stride(dstrd: u8) -> u64 {
    4u64 << (dstrd & 0xF)
}

/// Offset of the SQ `qid` tail doorbell: `0x1000 + (2 * qid) * (4 << dstrd)` (NVMe 1.4 3.1.16).
pub const fn sq_tail_doorbell(qid: u16, dstrd: u8) -> u64 {
    DOORBELL_BASE + 2 * qid as u64 * stride(dstrd)
}

/// Offset of the CQ `qid` head doorbell: `0x1000 + (2 * qid + 1) * (4 << dstrd)` (NVMe 1.4 3.1.17).
pub const fn cq_head_doorbell(qid: u16, dstrd: u8) -> u64 {
    DOORBELL_BASE + (2 * qid as u64 + 1) * stride(dstrd)
}

/// Decodes a register offset into a doorbell; `None` below 0x1000, inside a slot (not on a
/// `4 << dstrd` boundary), or past the doorbell of queue 65535.
pub const fn decode_doorbell(offset: u64, dstrd: u8) -> Option<Doorbell> {
    if offset < DOORBELL_BASE {
        return None;
    }
    let rel = offset - DOORBELL_BASE;
    let stride = stride(dstrd);
    if rel % stride != 0 {
        return None;
    }
    let slot = rel / stride;
    let qid = slot / 2;
    if qid > u16::MAX as u64 {
        return None;
    }
    if slot % 2 == 0 {
        Some(Doorbell::SqTail(qid as u16))
    } else {
        Some(Doorbell::CqHead(qid as u16))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_fields_land_on_their_bits() {
        let cap = Cap::default().with_dstrd(0xA);
        assert_eq!(cap.0, 0xA << 32);
        assert_eq!(cap.dstrd(), 0xA);
        let cap = cap.with_dstrd(0x1F);
        assert_eq!(cap.0, 0xF << 32, "setter masks to 4 bits");
        let cap = Cap::default()
            .with_mqes(1023)
            .with_cqr(true)
            .with_to(20)
            .with_css_nvm(true);
        assert_eq!(cap.0, 1023 | (1 << 16) | (20 << 24) | (1 << 37));
        assert_eq!(cap.css(), 1);
        assert!(cap.css_nvm());
        let cap = Cap(0)
            .with_mpsmin(0)
            .with_mpsmax(4)
            .with_pmrs(true)
            .with_cmbs(true);
        assert_eq!(cap.0, (4 << 52) | (1 << 56) | (1 << 57));
        assert!(Cap(1 << 36).nssrs());
        assert_eq!(Cap(3 << 17).ams(), 3);
        assert!(Cap(1 << 45).bps());
    }

    #[test]
    fn cc_and_csts() {
        let cc = Cc(0)
            .with_en(true)
            .with_iosqes(6)
            .with_iocqes(4)
            .with_shn(ShutdownNotification::Normal);
        assert_eq!(cc.0, 1 | (6 << 16) | (4 << 20) | (1 << 14));
        assert_eq!(cc.shn(), ShutdownNotification::Normal);
        assert_eq!(Cc(2 << 14).shn(), ShutdownNotification::Abrupt);
        assert_eq!(Cc(3 << 14).shn(), ShutdownNotification::None);
        assert_eq!(Cc(5 << 7).mps(), 5);
        assert_eq!(Cc(1 << 4).css(), 1);
        assert_eq!(Cc(7 << 11).ams(), 7);
        let csts = Csts(0).with_rdy(true).with_shst(ShutdownStatus::Complete);
        assert_eq!(csts.0, 1 | (2 << 2));
        assert_eq!(csts.shst(), ShutdownStatus::Complete);
        assert_eq!(Csts(1 << 2).shst(), ShutdownStatus::Occurring);
        assert!(Csts(2).cfs() && Csts(16).nssro() && Csts(32).pp());
    }

    #[test]
    fn aqa_and_vs() {
        let aqa = Aqa(0).with_asqs(31).with_acqs(63);
        assert_eq!(aqa.0, 31 | (63 << 16));
        assert_eq!((aqa.sq_entries(), aqa.cq_entries()), (32, 64));
        assert_eq!(Vs::new(1, 4, 0), Vs::V1_4_0);
        assert_eq!(Vs::V1_4_0.0, 0x0001_0400);
        assert_eq!(
            (Vs::V1_4_0.major(), Vs::V1_4_0.minor(), Vs::V1_4_0.tertiary()),
            (1, 4, 0)
        );
    }

    #[test]
    fn doorbell_offsets() {
        let dstrd0 = [0x1000, 0x1004, 0x1008, 0x100C, 0x1010, 0x1014, 0x1018, 0x101C];
        let dstrd1 = [0x1000, 0x1008, 0x1010, 0x1018, 0x1020, 0x1028, 0x1030, 0x1038];
        for qid in 0..4u16 {
            let q = usize::from(qid);
            assert_eq!(sq_tail_doorbell(qid, 0), dstrd0[2 * q]);
            assert_eq!(cq_head_doorbell(qid, 0), dstrd0[2 * q + 1]);
            assert_eq!(sq_tail_doorbell(qid, 1), dstrd1[2 * q]);
            assert_eq!(cq_head_doorbell(qid, 1), dstrd1[2 * q + 1]);
            for dstrd in 0..4 {
                assert_eq!(
                    decode_doorbell(sq_tail_doorbell(qid, dstrd), dstrd),
                    Some(Doorbell::SqTail(qid))
                );
                assert_eq!(
                    decode_doorbell(cq_head_doorbell(qid, dstrd), dstrd),
                    Some(Doorbell::CqHead(qid))
                );
            }
        }
        assert_eq!(
            decode_doorbell(cq_head_doorbell(u16::MAX, 0), 0),
            Some(Doorbell::CqHead(u16::MAX))
        );
    }

    #[test]
    fn decode_doorbell_rejects_bad_offsets() {
        assert_eq!(decode_doorbell(0x0FFC, 0), None);
        assert_eq!(decode_doorbell(CSTS, 0), None);
        assert_eq!(decode_doorbell(PMRCAP, 0), None);
        assert_eq!(decode_doorbell(0x1002, 0), None);
        assert_eq!(decode_doorbell(0x1004, 1), None);
        assert_eq!(decode_doorbell(0x100C, 1), None);
        assert_eq!(decode_doorbell(0x1008, 1), Some(Doorbell::CqHead(0)));
        assert_eq!(decode_doorbell(cq_head_doorbell(u16::MAX, 0) + 4, 0), None);
    }
}
