//! The 16-byte completion queue entry and status codes (NVMe 1.4 4.6, Figures 121-125).

use core::fmt;

use super::bits::{le16, le32, put};

/// Size of a completion queue entry in bytes (CC.IOCQES = 4).
pub const CQE_SIZE: usize = 16;
/// [`CQE_SIZE`] as a byte count for queue address arithmetic (slot × entry size).
pub const CQE_BYTES: u64 = CQE_SIZE as u64;

/// A completion queue entry (NVMe 1.4 Figure 121).
///
/// DW2: SQ Head Pointer 15:0, SQ Identifier 31:16. DW3: CID 15:0, Phase Tag bit 16, Status
/// Field 31:17 (SC 24:17, SCT 27:25, CRD 29:28, M bit 30, DNR bit 31). CRD is not modelled
/// (the controller does not support Command Retry Delay): it is written as 0 and ignored on
/// decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct CompletionEntry {
    /// DW0: command specific.
    pub dw0: u32,
    /// DW1: command specific.
    pub dw1: u32,
    /// SQHD: the SQ head pointer as the controller sees it.
    pub sq_head: u16,
    /// SQID: the SQ the command came from.
    pub sq_id: u16,
    /// CID: the command identifier.
    pub cid: u16,
    /// P: the phase tag.
    pub phase: bool,
    /// The status field without the phase tag.
    pub status: Status,
}

impl CompletionEntry {
    /// Encodes the entry into its 16 bytes.
    pub fn to_bytes(&self) -> [u8; 16] {
        let mut b = [0u8; 16];
        put(&mut b, 0, &self.dw0.to_le_bytes());
        put(&mut b, 4, &self.dw1.to_le_bytes());
        put(&mut b, 8, &self.sq_head.to_le_bytes());
        put(&mut b, 10, &self.sq_id.to_le_bytes());
        put(&mut b, 12, &self.cid.to_le_bytes());
        put(
            &mut b,
            14,
            &(self.status.to_field() | u16::from(self.phase)).to_le_bytes(),
        );
        b
    }

    /// Decodes an entry from its 16 bytes (CRD, bits 29:28 of DW3, is dropped).
    pub fn from_bytes(b: &[u8; 16]) -> Self {
        let field = le16(b, 14);
        let (status, phase) = (Status::from_field(field), field & 1 == 1);
        CompletionEntry {
            dw0: le32(b, 0),
            dw1: le32(b, 4),
            sq_head: le16(b, 8),
            sq_id: le16(b, 10),
            cid: le16(b, 12),
            phase,
            status,
        }
    }
}

/// A completion status (NVMe 1.4 Figures 123-125): Status Code Type, Status Code, More and
/// Do Not Retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Status {
    /// SCT (3 bits): 0 generic, 1 command specific, 2 media and data integrity, 3 path.
    pub sct: u8,
    /// SC: the status code within its type.
    pub sc: u8,
    /// M: more information in the Error Information log page.
    pub more: bool,
    /// DNR: do not retry.
    pub dnr: bool,
}

/// Builds a status constant.
const fn st(sct: u8, sc: u8, dnr: bool) -> Status {
    Status {
        sct,
        sc,
        more: false,
        dnr,
    }
}

impl Status {
    /// Generic 00h: Successful Completion.
    pub const SUCCESS: Status = st(0, 0x00, false);
    /// Generic 01h: Invalid Command Opcode.
    pub const INVALID_OPCODE: Status = st(0, 0x01, true);
    /// Generic 02h: Invalid Field in Command.
    pub const INVALID_FIELD: Status = st(0, 0x02, true);
    /// Generic 03h: Command ID Conflict.
    pub const CID_CONFLICT: Status = st(0, 0x03, true);
    /// Generic 04h: Data Transfer Error (retryable).
    pub const DATA_TRANSFER_ERROR: Status = st(0, 0x04, false);
    /// Generic 05h: Commands Aborted due to Power Loss Notification.
    pub const POWER_LOSS_ABORT: Status = st(0, 0x05, true);
    /// Generic 06h: Internal Error (retryable).
    pub const INTERNAL_ERROR: Status = st(0, 0x06, false);
    /// Generic 07h: Command Abort Requested.
    pub const ABORT_REQUESTED: Status = st(0, 0x07, true);
    /// Generic 08h: Command Aborted due to SQ Deletion.
    pub const ABORTED_SQ_DELETION: Status = st(0, 0x08, true);
    /// Generic 0Bh: Invalid Namespace or Format.
    pub const INVALID_NAMESPACE: Status = st(0, 0x0B, true);
    /// Generic 0Ch: Command Sequence Error.
    pub const COMMAND_SEQUENCE_ERROR: Status = st(0, 0x0C, true);
    /// Generic 13h: PRP Offset Invalid.
    pub const INVALID_PRP_OFFSET: Status = st(0, 0x13, true);
    /// Generic 80h (NVM command set): LBA Out of Range.
    pub const LBA_OUT_OF_RANGE: Status = st(0, 0x80, true);
    /// Generic 81h (NVM command set): Capacity Exceeded.
    pub const CAPACITY_EXCEEDED: Status = st(0, 0x81, true);
    /// Generic 82h (NVM command set): Namespace Not Ready (retryable).
    pub const NAMESPACE_NOT_READY: Status = st(0, 0x82, false);
    /// Command specific 00h: Completion Queue Invalid.
    pub const CQ_INVALID: Status = st(1, 0x00, true);
    /// Command specific 01h: Invalid Queue Identifier.
    pub const INVALID_QUEUE_ID: Status = st(1, 0x01, true);
    /// Command specific 02h: Invalid Queue Size.
    pub const INVALID_QUEUE_SIZE: Status = st(1, 0x02, true);
    /// Command specific 03h: Abort Command Limit Exceeded.
    pub const ABORT_LIMIT: Status = st(1, 0x03, true);
    /// Command specific 05h: Asynchronous Event Request Limit Exceeded.
    pub const AER_LIMIT: Status = st(1, 0x05, true);
    /// Command specific 08h: Invalid Interrupt Vector.
    pub const INVALID_INTERRUPT_VECTOR: Status = st(1, 0x08, true);
    /// Command specific 09h: Invalid Log Page.
    pub const INVALID_LOG_PAGE: Status = st(1, 0x09, true);
    /// Command specific 0Ch: Invalid Queue Deletion.
    pub const INVALID_QUEUE_DELETION: Status = st(1, 0x0C, true);
    /// Command specific 0Dh: Feature Identifier Not Saveable.
    pub const FEATURE_NOT_SAVEABLE: Status = st(1, 0x0D, true);
    /// Command specific 0Eh: Feature Not Changeable.
    pub const FEATURE_NOT_CHANGEABLE: Status = st(1, 0x0E, true);

    /// True for SCT 0, SC 00h (whatever M and DNR say).
    pub const fn is_success(self) -> bool {
        self.sct == 0 && self.sc == 0
    }

    /// The same code with DNR set to `dnr`.
    pub const fn with_dnr(self, dnr: bool) -> Self {
        Status { dnr, ..self }
    }

    /// The same code with M set to `more`.
    pub const fn with_more(self, more: bool) -> Self {
        Status { more, ..self }
    }

    /// True if `self` and `other` have the same SCT and SC (M and DNR ignored).
    pub const fn same_code(self, other: Status) -> bool {
        self.sct == other.sct && self.sc == other.sc
    }

    /// The 16-bit Status Field as in DW3 31:16 of a completion entry and bytes 13:12 of an
    /// error log entry, with the phase tag (bit 0) clear: SC 8:1, SCT 11:9, CRD 13:12 (0),
    /// M 14, DNR 15. SCT is masked to 3 bits.
    pub const fn to_field(self) -> u16 {
        ((self.sc as u16) << 1)
            | (((self.sct & 0x7) as u16) << 9)
            | ((self.more as u16) << 14)
            | ((self.dnr as u16) << 15)
    }

    /// Decodes a 16-bit Status Field; the phase tag (bit 0) and CRD (13:12) are ignored.
    pub const fn from_field(f: u16) -> Self {
        Status {
            sc: (f >> 1) as u8,
            sct: ((f >> 9) & 0x7) as u8,
            more: (f >> 14) & 1 == 1,
            dnr: (f >> 15) & 1 == 1,
        }
    }

    /// The readable name of a known code.
    pub fn name(self) -> Option<&'static str> {
        let name = match (self.sct, self.sc) {
            (0, 0x00) => "Successful Completion",
            (0, 0x01) => "Invalid Command Opcode",
            (0, 0x02) => "Invalid Field in Command",
            (0, 0x03) => "Command ID Conflict",
            (0, 0x04) => "Data Transfer Error",
            (0, 0x05) => "Commands Aborted due to Power Loss Notification",
            (0, 0x06) => "Internal Error",
            (0, 0x07) => "Command Abort Requested",
            (0, 0x08) => "Command Aborted due to SQ Deletion",
            (0, 0x0B) => "Invalid Namespace or Format",
            (0, 0x0C) => "Command Sequence Error",
            (0, 0x13) => "PRP Offset Invalid",
            (0, 0x80) => "LBA Out of Range",
            (0, 0x81) => "Capacity Exceeded",
            (0, 0x82) => "Namespace Not Ready",
            (1, 0x00) => "Completion Queue Invalid",
            (1, 0x01) => "Invalid Queue Identifier",
            (1, 0x02) => "Invalid Queue Size",
            (1, 0x03) => "Abort Command Limit Exceeded",
            (1, 0x05) => "Asynchronous Event Request Limit Exceeded",
            (1, 0x08) => "Invalid Interrupt Vector",
            (1, 0x09) => "Invalid Log Page",
            (1, 0x0C) => "Invalid Queue Deletion",
            (1, 0x0D) => "Feature Identifier Not Saveable",
            (1, 0x0E) => "Feature Not Changeable",
            _ => return None,
        };
        Some(name)
    }
}

impl fmt::Display for Status {
    /// The readable name, or `SCT x SC yyh` for an unknown code; ` (DNR)` if DNR is set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name)?,
            None => write!(f, "SCT {} SC {:02X}h", self.sct, self.sc)?,
        }
        if self.dnr {
            f.write_str(" (DNR)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fields_land_on_their_bits() {
        let e = CompletionEntry {
            dw0: 0x0102_0304,
            dw1: 0x0506_0708,
            sq_head: 0x0A0B,
            sq_id: 0x0C0D,
            cid: 0xBEEF,
            phase: true,
            status: Status::INVALID_QUEUE_ID,
        };
        let b = e.to_bytes();
        assert_eq!(b[0..4], [0x04, 0x03, 0x02, 0x01]);
        assert_eq!(b[4..8], [0x08, 0x07, 0x06, 0x05]);
        assert_eq!(b[8..12], [0x0B, 0x0A, 0x0D, 0x0C], "SQHD then SQID in DW2");
        let dw3 = u32::from_le_bytes([b[12], b[13], b[14], b[15]]);
        assert_eq!(dw3 & 0xFFFF, 0xBEEF, "CID 15:0");
        assert_eq!(dw3 >> 16 & 1, 1, "phase bit 16");
        assert_eq!(dw3 >> 17 & 0xFF, 0x01, "SC 24:17");
        assert_eq!(dw3 >> 25 & 0x7, 1, "SCT 27:25");
        assert_eq!(dw3 >> 30 & 1, 0, "M bit 30");
        assert_eq!(dw3 >> 31, 1, "DNR bit 31");
        assert_eq!(CompletionEntry::from_bytes(&b), e);
        let lba = CompletionEntry {
            status: Status::LBA_OUT_OF_RANGE.with_more(true),
            ..e
        };
        assert_eq!(
            u32::from_le_bytes(lba.to_bytes()[12..16].try_into().unwrap()) >> 17,
            0x80 | 1 << 13 | 1 << 14
        );
    }

    #[test]
    fn status_names_and_dnr() {
        assert!(Status::SUCCESS.is_success());
        assert!(Status::default().is_success());
        assert!(!Status::INTERNAL_ERROR.is_success());
        assert_eq!(Status::SUCCESS.to_string(), "Successful Completion");
        assert_eq!(
            Status::INVALID_FIELD.to_string(),
            "Invalid Field in Command (DNR)"
        );
        assert_eq!(
            Status {
                sct: 2,
                sc: 0x81,
                ..Status::default()
            }
            .to_string(),
            "SCT 2 SC 81h"
        );
        for s in [
            Status::SUCCESS,
            Status::INTERNAL_ERROR,
            Status::NAMESPACE_NOT_READY,
            Status::DATA_TRANSFER_ERROR,
        ] {
            assert!(!s.dnr, "{s}");
        }
        for s in [
            Status::INVALID_OPCODE,
            Status::CQ_INVALID,
            Status::FEATURE_NOT_CHANGEABLE,
            Status::AER_LIMIT,
        ] {
            assert!(s.dnr && s.name().is_some(), "{s}");
        }
        assert!(Status::INTERNAL_ERROR
            .with_dnr(true)
            .same_code(Status::INTERNAL_ERROR));
        assert_eq!(Status::INVALID_FIELD.to_field(), (2 << 1) | (1 << 15));
        assert_eq!(
            Status::from_field(0xFFFF),
            Status {
                sct: 7,
                sc: 0xFF,
                more: true,
                dnr: true
            }
        );
    }

    fn any_status() -> impl Strategy<Value = Status> {
        (0u8..8, any::<u8>(), any::<bool>(), any::<bool>()).prop_map(|(sct, sc, more, dnr)| Status {
            sct,
            sc,
            more,
            dnr,
        })
    }

    proptest! {
        #[test]
        fn cqe_fields_round_trip(dw0: u32, dw1: u32, sq_head: u16, sq_id: u16, cid: u16, phase: bool, status in any_status()) {
            let e = CompletionEntry { dw0, dw1, sq_head, sq_id, cid, phase, status };
            prop_assert_eq!(CompletionEntry::from_bytes(&e.to_bytes()), e);
        }

        #[test]
        fn cqe_bytes_round_trip(bytes in proptest::collection::vec(any::<u8>(), 16)) {
            let mut b = [0u8; 16];
            b.copy_from_slice(&bytes);
            b[15] &= !0x30; // CRD (DW3 29:28) is not modelled.
            prop_assert_eq!(CompletionEntry::from_bytes(&b).to_bytes(), b);
        }
    }
}
