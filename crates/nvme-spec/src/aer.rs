//! Asynchronous events (NVMe 1.4 5.2): the completion DW0 of an Asynchronous Event Request.

/// Asynchronous Event Type, DW0 2:0 (NVMe 1.4 5.2, Asynchronous Event Request completion).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum AsyncEventType {
    /// 000b: Error status.
    Error = 0,
    /// 001b: SMART / Health status.
    SmartHealth = 1,
    /// 010b: Notice.
    Notice = 2,
    /// 110b: I/O command specific status.
    IoCommandSet = 6,
    /// 111b: Vendor specific.
    Vendor = 7,
}

impl TryFrom<u8> for AsyncEventType {
    /// The reserved type value.
    type Error = u8;

    fn try_from(v: u8) -> Result<Self, u8> {
        Ok(match v {
            0 => Self::Error,
            1 => Self::SmartHealth,
            2 => Self::Notice,
            6 => Self::IoCommandSet,
            7 => Self::Vendor,
            other => return Err(other),
        })
    }
}

/// Error status info 00h: Write to Invalid Doorbell Register.
pub const WRITE_TO_INVALID_DOORBELL: u8 = 0x00;
/// Error status info 01h: Invalid Doorbell Write Value.
pub const INVALID_DOORBELL_WRITE_VALUE: u8 = 0x01;
/// Error status info 02h: Diagnostic Failure.
pub const DIAGNOSTIC_FAILURE: u8 = 0x02;
/// Error status info 03h: Persistent Internal Error.
pub const PERSISTENT_INTERNAL_ERROR: u8 = 0x03;
/// Error status info 04h: Transient Internal Error.
pub const TRANSIENT_INTERNAL_ERROR: u8 = 0x04;

/// An asynchronous event as reported in completion DW0: type 2:0, information 15:8,
/// associated log page 23:16.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncEvent {
    /// Asynchronous Event Type.
    pub kind: AsyncEventType,
    /// Asynchronous Event Information (meaning depends on `kind`).
    pub info: u8,
    /// Log page the host reads to clear the event (e.g. 01h Error Information).
    pub log_page: u8,
}

impl AsyncEvent {
    /// Encodes completion DW0.
    pub const fn to_dw0(self) -> u32 {
        self.kind as u32 | ((self.info as u32) << 8) | ((self.log_page as u32) << 16)
    }

    /// Decodes completion DW0; `None` if the type is reserved (3, 4 or 5).
    pub fn from_dw0(dw0: u32) -> Option<Self> {
        let kind = AsyncEventType::try_from((dw0 & 0x7) as u8).ok()?;
        Some(AsyncEvent {
            kind,
            info: (dw0 >> 8) as u8,
            log_page: (dw0 >> 16) as u8,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dw0_round_trip() {
        let e = AsyncEvent {
            kind: AsyncEventType::Error,
            info: INVALID_DOORBELL_WRITE_VALUE,
            log_page: 0x01,
        };
        assert_eq!(e.to_dw0(), 0x0001_0100);
        assert_eq!(AsyncEvent::from_dw0(0x0001_0100), Some(e));
        let v = AsyncEvent {
            kind: AsyncEventType::Vendor,
            info: 0xAB,
            log_page: 0xC0,
        };
        assert_eq!(v.to_dw0(), 0x00C0_AB07);
        assert_eq!(AsyncEvent::from_dw0(v.to_dw0()), Some(v));
        let s = AsyncEvent {
            kind: AsyncEventType::SmartHealth,
            info: 0,
            log_page: 0x02,
        };
        assert_eq!(AsyncEvent::from_dw0(s.to_dw0()), Some(s));
        assert_eq!(AsyncEvent::from_dw0(3), None);
        assert_eq!(AsyncEventType::try_from(6), Ok(AsyncEventType::IoCommandSet));
        assert_eq!(TRANSIENT_INTERNAL_ERROR, 4);
    }
}
