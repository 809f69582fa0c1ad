//! Get Log Page data (NVMe 1.4 5.14.1): Error Information and SMART / Health Information.

use super::bits::{le128, le16, le32, le64, put};

/// LID 01h: Error Information (NVMe 1.4 5.14.1.1).
pub const ERROR_INFORMATION: u8 = 0x01;
/// LID 02h: SMART / Health Information (NVMe 1.4 5.14.1.2).
pub const SMART_HEALTH: u8 = 0x02;
/// LID 03h: Firmware Slot Information (NVMe 1.4 5.14.1.3).
pub const FIRMWARE_SLOT: u8 = 0x03;

/// One Error Information log entry, 64 bytes (NVMe 1.4 Figure 193).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct ErrorLogEntry {
    /// Error Count (7:0): unique, incrementing from 1; 0 marks an invalid entry.
    pub error_count: u64,
    /// Submission Queue ID (9:8).
    pub sqid: u16,
    /// Command ID (11:10).
    pub cid: u16,
    /// Status Field (13:12): the completion status with the phase tag in bit 0; see
    /// `Status::to_field`.
    pub status: u16,
    /// Parameter Error Location (15:14): byte in bits 7:0, bit in bits 10:8.
    pub param_location: u16,
    /// LBA (23:16): first LBA that saw the error.
    pub lba: u64,
    /// Namespace (27:24).
    pub nsid: u32,
}

impl ErrorLogEntry {
    /// Size of one entry.
    pub const SIZE: usize = 64;

    /// Encodes the entry.
    pub fn to_bytes(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        put(&mut b, 0, &self.error_count.to_le_bytes());
        put(&mut b, 8, &self.sqid.to_le_bytes());
        put(&mut b, 10, &self.cid.to_le_bytes());
        put(&mut b, 12, &self.status.to_le_bytes());
        put(&mut b, 14, &self.param_location.to_le_bytes());
        put(&mut b, 16, &self.lba.to_le_bytes());
        put(&mut b, 24, &self.nsid.to_le_bytes());
        b
    }

    /// Decodes an entry.
    pub fn from_bytes(b: &[u8; 64]) -> Self {
        ErrorLogEntry {
            error_count: le64(b, 0),
            sqid: le16(b, 8),
            cid: le16(b, 10),
            status: le16(b, 12),
            param_location: le16(b, 14),
            lba: le64(b, 16),
            nsid: le32(b, 24),
        }
    }
}

/// The SMART / Health Information log page, 512 bytes (NVMe 1.4 Figure 194). Counters are
/// 128-bit little-endian; data units are thousands of 512-byte units.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct SmartLog {
    /// Critical Warning (0).
    pub critical_warning: u8,
    /// Composite Temperature (2:1), Kelvin.
    pub composite_temperature: u16,
    /// Available Spare (3), percent.
    pub available_spare: u8,
    /// Available Spare Threshold (4), percent.
    pub available_spare_threshold: u8,
    /// Percentage Used (5).
    pub percentage_used: u8,
    /// Data Units Read (47:32).
    pub data_units_read: u128,
    /// Data Units Written (63:48).
    pub data_units_written: u128,
    /// Host Read Commands (79:64).
    pub host_read_commands: u128,
    /// Host Write Commands (95:80).
    pub host_write_commands: u128,
    /// Controller Busy Time (111:96), minutes.
    pub controller_busy_time: u128,
    /// Power Cycles (127:112).
    pub power_cycles: u128,
    /// Power On Hours (143:128).
    pub power_on_hours: u128,
    /// Unsafe Shutdowns (159:144).
    pub unsafe_shutdowns: u128,
    /// Media and Data Integrity Errors (175:160).
    pub media_errors: u128,
    /// Number of Error Information Log Entries (191:176).
    pub error_log_entries: u128,
}

impl SmartLog {
    /// Size of the page.
    pub const SIZE: usize = 512;

    /// Encodes the page.
    pub fn to_bytes(&self) -> [u8; 512] {
        let mut b = [0u8; 512];
        b[0] = self.critical_warning;
        put(&mut b, 1, &self.composite_temperature.to_le_bytes());
        b[3] = self.available_spare;
        b[4] = self.available_spare_threshold;
        b[5] = self.percentage_used;
        for (i, v) in self.counters().iter().enumerate() {
            put(&mut b, 32 + 16 * i, &v.to_le_bytes());
        }
        b
    }

    /// Decodes the page.
    pub fn from_bytes(b: &[u8; 512]) -> Self {
        let c = |i: usize| le128(b, 32 + 16 * i);
        SmartLog {
            critical_warning: b[0],
            composite_temperature: le16(b, 1),
            available_spare: b[3],
            available_spare_threshold: b[4],
            percentage_used: b[5],
            data_units_read: c(0),
            data_units_written: c(1),
            host_read_commands: c(2),
            host_write_commands: c(3),
            controller_busy_time: c(4),
            power_cycles: c(5),
            power_on_hours: c(6),
            unsafe_shutdowns: c(7),
            media_errors: c(8),
            error_log_entries: c(9),
        }
    }

    /// The ten 16-byte counters in byte order, starting at byte 32.
    fn counters(&self) -> [u128; 10] {
        [
            self.data_units_read,
            self.data_units_written,
            self.host_read_commands,
            self.host_write_commands,
            self.controller_busy_time,
            self.power_cycles,
            self.power_on_hours,
            self.unsafe_shutdowns,
            self.media_errors,
            self.error_log_entries,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::completion::Status;

    #[test]
    fn error_log_entry_round_trip() {
        let e = ErrorLogEntry {
            error_count: 0x0102_0304_0506_0708,
            sqid: 0x0A0B,
            cid: 0x0C0D,
            status: Status::LBA_OUT_OF_RANGE.to_field() | 1,
            param_location: 0x0128,
            lba: 0x1111_2222_3333_4444,
            nsid: 0x5566_7788,
        };
        let b = e.to_bytes();
        assert_eq!(b[0..8], 0x0102_0304_0506_0708u64.to_le_bytes());
        assert_eq!(b[8..12], [0x0B, 0x0A, 0x0D, 0x0C]);
        assert_eq!(b[12..14], (1u16 | (0x80 << 1) | (1 << 15)).to_le_bytes());
        assert_eq!(b[14..16], [0x28, 0x01]);
        assert_eq!(b[16..24], 0x1111_2222_3333_4444u64.to_le_bytes());
        assert_eq!(b[24..28], [0x88, 0x77, 0x66, 0x55]);
        assert!(b[28..].iter().all(|&x| x == 0));
        assert_eq!(ErrorLogEntry::from_bytes(&b), e);
        assert_eq!(Status::from_field(e.status), Status::LBA_OUT_OF_RANGE);
    }

    #[test]
    fn smart_log_round_trip() {
        let s = SmartLog {
            critical_warning: 0x04,
            composite_temperature: 310,
            available_spare: 100,
            available_spare_threshold: 10,
            percentage_used: 3,
            data_units_read: 1,
            data_units_written: 2,
            host_read_commands: 3,
            host_write_commands: 4,
            controller_busy_time: 5,
            power_cycles: 6,
            power_on_hours: 7,
            unsafe_shutdowns: 8,
            media_errors: 9,
            error_log_entries: u128::MAX,
        };
        let b = s.to_bytes();
        assert_eq!(b[0..6], [0x04, 0x36, 0x01, 100, 10, 3]);
        for (i, off) in [32, 48, 64, 80, 96, 112, 128, 144, 160].into_iter().enumerate() {
            assert_eq!(b[off], i as u8 + 1, "counter at byte {off}");
        }
        assert_eq!(b[176..192], [0xFF; 16]);
        assert!(b[192..].iter().all(|&x| x == 0));
        assert_eq!(SmartLog::from_bytes(&b), s);
    }
}
