//! Admin and NVM I/O command opcodes (NVMe 1.4 5 and 6), re-exported by `command`.

/// Admin command opcodes (NVMe 1.4 section 5, Admin Command Set opcode table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AdminOpcode {
    /// Delete I/O Submission Queue.
    DeleteIoSq = 0x00,
    /// Create I/O Submission Queue.
    CreateIoSq = 0x01,
    /// Get Log Page.
    GetLogPage = 0x02,
    /// Delete I/O Completion Queue.
    DeleteIoCq = 0x04,
    /// Create I/O Completion Queue.
    CreateIoCq = 0x05,
    /// Identify.
    Identify = 0x06,
    /// Abort.
    Abort = 0x08,
    /// Set Features.
    SetFeatures = 0x09,
    /// Get Features.
    GetFeatures = 0x0A,
    /// Asynchronous Event Request.
    AsyncEventRequest = 0x0C,
}

impl TryFrom<u8> for AdminOpcode {
    /// The unsupported opcode byte.
    type Error = u8;

    fn try_from(v: u8) -> Result<Self, u8> {
        Ok(match v {
            0x00 => Self::DeleteIoSq,
            0x01 => Self::CreateIoSq,
            0x02 => Self::GetLogPage,
            0x04 => Self::DeleteIoCq,
            0x05 => Self::CreateIoCq,
            0x06 => Self::Identify,
            0x08 => Self::Abort,
            0x09 => Self::SetFeatures,
            0x0A => Self::GetFeatures,
            0x0C => Self::AsyncEventRequest,
            other => return Err(other),
        })
    }
}

/// NVM command set I/O opcodes (NVMe 1.4 section 6, NVM Command Set opcode table).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum IoOpcode {
    /// Flush.
    Flush = 0x00,
    /// Write.
    Write = 0x01,
    /// Read.
    Read = 0x02,
    /// Write Zeroes.
    WriteZeroes = 0x08,
    /// Dataset Management.
    DatasetManagement = 0x09,
}

impl TryFrom<u8> for IoOpcode {
    /// The unsupported opcode byte.
    type Error = u8;

    fn try_from(v: u8) -> Result<Self, u8> {
        Ok(match v {
            0x00 => Self::Flush,
            0x01 => Self::Write,
            0x02 => Self::Read,
            0x08 => Self::WriteZeroes,
            0x09 => Self::DatasetManagement,
            other => return Err(other),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcodes_round_trip() {
        for v in 0..=255u8 {
            if let Ok(op) = AdminOpcode::try_from(v) {
                assert_eq!(op as u8, v);
            }
            if let Ok(op) = IoOpcode::try_from(v) {
                assert_eq!(op as u8, v);
            }
        }
        assert_eq!(AdminOpcode::try_from(0x0C), Ok(AdminOpcode::AsyncEventRequest));
        assert_eq!(AdminOpcode::try_from(0x03), Err(0x03));
        assert_eq!(IoOpcode::try_from(0x09), Ok(IoOpcode::DatasetManagement));
        assert_eq!(IoOpcode::try_from(0x04), Err(0x04));
    }
}
