//! Get/Set Features identifiers and values (NVMe 1.4 5.21.1). Each value type converts to
//! and from the dword that Set Features takes in CDW11 and Get Features returns in DW0.

use super::bits::{bit32, get32};

/// Feature identifiers (NVMe 1.4 5.21.1, Feature Identifiers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FeatureId {
    /// 01h: Arbitration.
    Arbitration = 0x01,
    /// 02h: Power Management.
    PowerManagement = 0x02,
    /// 04h: Temperature Threshold.
    TemperatureThreshold = 0x04,
    /// 05h: Error Recovery.
    ErrorRecovery = 0x05,
    /// 06h: Volatile Write Cache.
    VolatileWriteCache = 0x06,
    /// 07h: Number of Queues.
    NumberOfQueues = 0x07,
    /// 08h: Interrupt Coalescing.
    InterruptCoalescing = 0x08,
    /// 09h: Interrupt Vector Configuration.
    InterruptVectorConfig = 0x09,
    /// 0Ah: Write Atomicity Normal.
    WriteAtomicityNormal = 0x0A,
    /// 0Bh: Asynchronous Event Configuration.
    AsyncEventConfig = 0x0B,
}

impl TryFrom<u8> for FeatureId {
    /// The unsupported feature identifier.
    type Error = u8;

    fn try_from(v: u8) -> Result<Self, u8> {
        Ok(match v {
            0x01 => Self::Arbitration,
            0x02 => Self::PowerManagement,
            0x04 => Self::TemperatureThreshold,
            0x05 => Self::ErrorRecovery,
            0x06 => Self::VolatileWriteCache,
            0x07 => Self::NumberOfQueues,
            0x08 => Self::InterruptCoalescing,
            0x09 => Self::InterruptVectorConfig,
            0x0A => Self::WriteAtomicityNormal,
            0x0B => Self::AsyncEventConfig,
            other => return Err(other),
        })
    }
}

/// Arbitration (FID 01h, NVMe 1.4 5.21.1.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Arbitration {
    /// AB (2:0): arbitration burst, `2 ^ burst` commands; 7 = no limit.
    pub burst: u8,
    /// LPW (15:8): low priority weight, 0-based.
    pub low_weight: u8,
    /// MPW (23:16): medium priority weight, 0-based.
    pub medium_weight: u8,
    /// HPW (31:24): high priority weight, 0-based.
    pub high_weight: u8,
}

impl Arbitration {
    /// Burst value meaning no limit.
    pub const NO_LIMIT: u8 = 7;

    /// Decodes the dword.
    pub const fn from_dw(dw: u32) -> Self {
        Arbitration {
            burst: (dw & 0x7) as u8,
            low_weight: (dw >> 8) as u8,
            medium_weight: (dw >> 16) as u8,
            high_weight: (dw >> 24) as u8,
        }
    }

    /// Encodes the dword.
    pub const fn to_dw(self) -> u32 {
        (self.burst & 0x7) as u32
            | ((self.low_weight as u32) << 8)
            | ((self.medium_weight as u32) << 16)
            | ((self.high_weight as u32) << 24)
    }
}

/// Number of Queues (FID 07h, NVMe 1.4 5.21.1.7): NSQR 15:0 and NCQR 31:16, both 0-based in
/// the dword; here 1-based counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct NumberOfQueues {
    /// I/O submission queues (1 to 65535).
    pub sq: u16,
    /// I/O completion queues (1 to 65535).
    pub cq: u16,
}

impl NumberOfQueues {
    /// Decodes the dword; `None` if either field is FFFFh (65536 queues, invalid).
    pub const fn from_dw(dw: u32) -> Option<Self> {
        let nsqr = dw as u16;
        let ncqr = (dw >> 16) as u16;
        if nsqr == u16::MAX || ncqr == u16::MAX {
            return None;
        }
        Some(NumberOfQueues {
            sq: nsqr + 1,
            cq: ncqr + 1,
        })
    }

    /// Encodes the dword; a count of 0 is encoded as 1.
    pub const fn to_dw(self) -> u32 {
        self.sq.saturating_sub(1) as u32 | ((self.cq.saturating_sub(1) as u32) << 16)
    }
}

/// Interrupt Coalescing (FID 08h, NVMe 1.4 5.21.1.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct InterruptCoalescing {
    /// THR (7:0): aggregation threshold in completions, 0-based (raw field).
    pub threshold: u8,
    /// TIME (15:8): aggregation time in 100 microsecond units (0 = none).
    pub time_100us: u8,
}

impl InterruptCoalescing {
    /// Decodes the dword.
    pub const fn from_dw(dw: u32) -> Self {
        InterruptCoalescing {
            threshold: dw as u8,
            time_100us: (dw >> 8) as u8,
        }
    }

    /// Encodes the dword.
    pub const fn to_dw(self) -> u32 {
        self.threshold as u32 | ((self.time_100us as u32) << 8)
    }
}

/// Interrupt Vector Configuration (FID 09h, NVMe 1.4 5.21.1.9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct InterruptVectorConfig {
    /// IV (15:0): the interrupt vector configured.
    pub vector: u16,
    /// CD (16): coalescing disable for this vector.
    pub coalescing_disable: bool,
}

impl InterruptVectorConfig {
    /// Decodes the dword.
    pub const fn from_dw(dw: u32) -> Self {
        InterruptVectorConfig {
            vector: get32(dw, 15, 0) as u16,
            coalescing_disable: bit32(dw, 16),
        }
    }

    /// Encodes the dword.
    pub const fn to_dw(self) -> u32 {
        self.vector as u32 | ((self.coalescing_disable as u32) << 16)
    }
}

/// Volatile Write Cache (FID 06h, NVMe 1.4 5.21.1.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct VolatileWriteCache {
    /// WCE (0): the volatile write cache is enabled.
    pub enabled: bool,
}

impl VolatileWriteCache {
    /// Decodes the dword.
    pub const fn from_dw(dw: u32) -> Self {
        VolatileWriteCache {
            enabled: bit32(dw, 0),
        }
    }

    /// Encodes the dword.
    pub const fn to_dw(self) -> u32 {
        self.enabled as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_ids() {
        for v in 0..=255u8 {
            if let Ok(f) = FeatureId::try_from(v) {
                assert_eq!(f as u8, v);
            }
        }
        assert_eq!(FeatureId::try_from(0x07), Ok(FeatureId::NumberOfQueues));
        assert_eq!(FeatureId::try_from(0x03), Err(0x03));
        assert_eq!(FeatureId::try_from(0x0C), Err(0x0C));
    }

    #[test]
    fn values_round_trip() {
        let a = Arbitration {
            burst: Arbitration::NO_LIMIT,
            low_weight: 1,
            medium_weight: 2,
            high_weight: 3,
        };
        assert_eq!(a.to_dw(), 0x0302_0107);
        assert_eq!(Arbitration::from_dw(0x0302_01FF), a);
        let q = NumberOfQueues { sq: 8, cq: 4 };
        assert_eq!(q.to_dw(), 0x0003_0007);
        assert_eq!(NumberOfQueues::from_dw(0x0003_0007), Some(q));
        assert_eq!(NumberOfQueues::from_dw(0x0000_FFFF), None);
        assert_eq!(NumberOfQueues::from_dw(0xFFFF_0000), None);
        assert_eq!(NumberOfQueues { sq: 0, cq: 0 }.to_dw(), 0);
        let c = InterruptCoalescing {
            threshold: 9,
            time_100us: 2,
        };
        assert_eq!((c.to_dw(), InterruptCoalescing::from_dw(0x0209)), (0x0209, c));
        let v = InterruptVectorConfig {
            vector: 5,
            coalescing_disable: true,
        };
        assert_eq!(
            (v.to_dw(), InterruptVectorConfig::from_dw(0x1_0005)),
            (0x1_0005, v)
        );
        let w = VolatileWriteCache { enabled: true };
        assert_eq!((w.to_dw(), VolatileWriteCache::from_dw(1)), (1, w));
        assert!(!VolatileWriteCache::from_dw(2).enabled);
    }
}
