//! ccNVMe extensions of the submission queue entry (ccNVMe, SOSP '21, Table 2) and the
//! vendor-specific Create I/O SQ extension that places a submission queue inside the PMR.
//!
//! Transaction fields use bits that are reserved in NVMe 1.4: CDW2-3 are reserved in the
//! NVM command set I/O commands, and CDW12 19:16 is reserved in Read and Write (NVMe 1.4
//! section 6, Read/Write command dword 12, between NLB 15:0 and DTYPE 23:20). A standard
//! controller ignores reserved bits, so a ccNVMe command passes through it untouched and
//! behaves as a plain command.
//!
//! The PMR queue extension uses CDW13-14 of Create I/O SQ, reserved in NVMe 1.4 (5.5),
//! and models the ideal device of the ccNVMe paper's Figure 9(a).

use super::bits::{bit32, get32, set32, setbit32};
use super::command::SubmissionEntry;

/// Byte offset in the Identify Controller data of the vendor-specific area (4095:3072).
pub const VENDOR_CAP_OFFSET: usize = 3072;
/// Bit in the byte at [`VENDOR_CAP_OFFSET`]: the controller supports submission queues in the
/// PMR (the Create I/O SQ CDW13 extension).
pub const VENDOR_CAP_PMR_QUEUES: u8 = 1;

/// Create I/O SQ CDW13 bit 0: the SQ lives in the PMR; PRP1 is a byte offset into the PMR.
pub const CREATE_SQ_IN_PMR: u32 = 1 << 0;
/// Create I/O SQ CDW13 bit 1: CDW14 holds the PMR offset of this SQ's tail doorbell word.
pub const CREATE_SQ_PMR_DOORBELL: u32 = 1 << 1;

/// ccNVMe transaction flags, CDW12 bits 19:16 of an I/O command.
///
/// Bit 16 TX marks every command of a transaction (the commit included), bit 17 COMMIT the
/// last one, bit 18 BEGIN (optional) the first one; bit 19 is reserved and must be 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct TxFlags(u8);

impl TxFlags {
    /// No flags: not part of a transaction.
    pub const NONE: TxFlags = TxFlags(0);
    /// Bit 16: the command belongs to a transaction.
    pub const TX: TxFlags = TxFlags(1 << 0);
    /// Bit 17: the command commits its transaction.
    pub const COMMIT: TxFlags = TxFlags(1 << 1);
    /// Bit 18: the command begins its transaction.
    pub const BEGIN: TxFlags = TxFlags(1 << 2);
    /// Bit 19: reserved; must be 0.
    pub const RESERVED: TxFlags = TxFlags(1 << 3);

    /// Flags from the four raw bits (CDW12 19:16 shifted down); higher bits are dropped.
    pub const fn from_bits(bits: u8) -> Self {
        TxFlags(bits & 0xF)
    }

    /// The four raw bits.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// True if every flag of `other` is set in `self`.
    pub const fn contains(self, other: TxFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union of two flag sets.
    pub const fn union(self, other: TxFlags) -> Self {
        TxFlags(self.0 | other.0)
    }

    /// Valid unless COMMIT or BEGIN is set without TX, or the reserved bit 19 is set.
    pub const fn is_valid(self) -> bool {
        if self.contains(Self::RESERVED) {
            return false;
        }
        let needs_tx = self.0 & (Self::COMMIT.0 | Self::BEGIN.0) != 0;
        !needs_tx || self.contains(Self::TX)
    }
}

impl core::ops::BitOr for TxFlags {
    type Output = TxFlags;

    fn bitor(self, rhs: TxFlags) -> TxFlags {
        self.union(rhs)
    }
}

impl SubmissionEntry {
    /// ccNVMe transaction ID: CDW2 (low 32 bits) and CDW3 (high 32 bits).
    pub fn txid(&self) -> u64 {
        self.qword(2)
    }
    /// Sets the transaction ID in CDW2-3.
    pub fn set_txid(&mut self, txid: u64) {
        self.set_qword(2, txid);
    }
    /// ccNVMe transaction flags: CDW12 19:16.
    pub fn tx_flags(&self) -> TxFlags {
        TxFlags::from_bits(get32(self.dw[12], 19, 16) as u8)
    }
    /// Sets CDW12 19:16.
    pub fn set_tx_flags(&mut self, flags: TxFlags) {
        self.dw[12] = set32(self.dw[12], 19, 16, flags.bits().into());
    }

    /// Create I/O SQ, vendor extension: CDW13 bit 0, the SQ lives in the PMR and PRP1 is a
    /// byte offset into the PMR rather than a host address.
    pub fn sq_in_pmr(&self) -> bool {
        bit32(self.dw[13], 0)
    }
    /// Sets CDW13 bit 0 (Create I/O SQ).
    pub fn set_sq_in_pmr(&mut self, on: bool) {
        self.dw[13] = setbit32(self.dw[13], 0, on);
    }
    /// Create I/O SQ, vendor extension: if CDW13 bit 1 is set, CDW14 is the PMR byte offset
    /// of a 4-byte, 4-byte-aligned word; a write landing there rings this SQ's tail doorbell.
    pub fn pmr_doorbell(&self) -> Option<u32> {
        bit32(self.dw[13], 1).then_some(self.dw[14])
    }
    /// Sets or clears CDW13 bit 1 and CDW14 (Create I/O SQ); `None` zeroes CDW14.
    pub fn set_pmr_doorbell(&mut self, offset: Option<u32>) {
        self.dw[13] = setbit32(self.dw[13], 1, offset.is_some());
        self.dw[14] = offset.unwrap_or(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txid_and_flags_positions() {
        let mut e = SubmissionEntry::write(1, 1, 10, 4, 0x1000, 0, false);
        e.set_txid(0x1122_3344_5566_7788);
        e.set_tx_flags(TxFlags::TX | TxFlags::COMMIT);
        let b = e.to_bytes();
        assert_eq!(b[8..12], 0x5566_7788u32.to_le_bytes(), "CDW2 = low half");
        assert_eq!(b[12..16], 0x1122_3344u32.to_le_bytes(), "CDW3 = high half");
        assert_eq!(e.cdw(12), 3 | (0b0011 << 16), "NLB untouched, flags at 19:16");
        let d = SubmissionEntry::from_bytes(&b);
        assert_eq!(
            (d.txid(), d.tx_flags(), d.nlb()),
            (0x1122_3344_5566_7788, TxFlags::from_bits(3), 3)
        );
        e.set_tx_flags(TxFlags::NONE);
        assert_eq!(e.cdw(12), 3);
    }

    #[test]
    fn tx_flags_validity_table() {
        // (TX, COMMIT, BEGIN, reserved) -> valid
        let table = [
            (0b0000, true),
            (0b0001, true),
            (0b0011, true),
            (0b0101, true),
            (0b0111, true),
            (0b0010, false),
            (0b0100, false),
            (0b0110, false),
        ];
        for (bits, valid) in table {
            assert_eq!(TxFlags::from_bits(bits).is_valid(), valid, "{bits:04b}");
            assert!(
                !TxFlags::from_bits(bits | 0b1000).is_valid(),
                "{bits:04b} + reserved"
            );
        }
        assert_eq!(TxFlags::from_bits(0xF3).bits(), 0x3);
        assert!((TxFlags::TX | TxFlags::BEGIN).contains(TxFlags::BEGIN));
        assert!(!TxFlags::TX.contains(TxFlags::COMMIT));
    }

    #[test]
    fn pmr_queue_extension() {
        let mut e = SubmissionEntry::create_io_sq(1, 2, 64, 0x4000, 2, 0);
        assert!(!e.sq_in_pmr());
        assert_eq!(e.pmr_doorbell(), None);
        e.set_sq_in_pmr(true);
        e.set_pmr_doorbell(Some(0x3FFC));
        assert_eq!(
            (e.cdw(13), e.cdw(14)),
            (CREATE_SQ_IN_PMR | CREATE_SQ_PMR_DOORBELL, 0x3FFC)
        );
        assert!(e.sq_in_pmr());
        assert_eq!(e.pmr_doorbell(), Some(0x3FFC));
        e.set_pmr_doorbell(None);
        assert_eq!(
            (e.cdw(13), e.cdw(14), e.pmr_doorbell()),
            (CREATE_SQ_IN_PMR, 0, None)
        );
    }
}
