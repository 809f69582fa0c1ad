//! Persistent Memory Region registers (NVMe 1.4 3.1.21-3.1.27), re-exported by `regs`.

use super::bits::bitfields;

/// PMRCAP: Persistent Memory Capabilities (NVMe 1.4 3.1.21).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PmrCap(pub u32);

impl PmrCap {
    bitfields! { u32;
        /// RDS (3): read data support.
        rds, with_rds: bool = 3;
        /// WDS (4): write data support.
        wds, with_wds: bool = 4;
        /// BIR (7:5): base indicator register (the BAR holding the PMR).
        bir, with_bir: u8 = 7:5;
        /// PMRTU (9:8): PMR time units (0 = 500 ms, 1 = minutes).
        pmrtu, with_pmrtu: u8 = 9:8;
        /// PMRWBM (13:10): PMR write barrier mechanisms.
        pmrwbm, with_pmrwbm: u8 = 13:10;
        /// PMRTO (23:16): PMR timeout, in PMRTU units.
        pmrto, with_pmrto: u8 = 23:16;
        /// CMSS (24): controller memory space supported.
        cmss, with_cmss: bool = 24;
    }
}

/// PMRCTL: Persistent Memory Region Control (NVMe 1.4 3.1.22).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PmrCtl(pub u32);

impl PmrCtl {
    bitfields! { u32;
        /// EN (0): enable the PMR.
        en, with_en: bool = 0;
    }
}

/// PMRSTS: Persistent Memory Region Status (NVMe 1.4 3.1.23).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PmrSts(pub u32);

impl PmrSts {
    bitfields! { u32;
        /// ERR (7:0): error.
        err, with_err: u8 = 7:0;
        /// NRDY (8): not ready.
        nrdy, with_nrdy: bool = 8;
        /// HSTS (11:9): health status.
        hsts, with_hsts: u8 = 11:9;
        /// CBAI (12): controller base address invalid.
        cbai, with_cbai: bool = 12;
    }
}

/// PMREBS: Persistent Memory Region Elasticity Buffer Size (NVMe 1.4 3.1.24).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PmrEbs(pub u32);

impl PmrEbs {
    bitfields! { u32;
        /// PMRSZU (3:0): size units (0 = bytes, 1 = KiB, 2 = MiB, 3 = GiB).
        pmrszu, with_pmrszu: u8 = 3:0;
        /// RBB (4): read bypass behavior.
        rbb, with_rbb: bool = 4;
        /// PMRWBZ (31:8): elasticity buffer size, in PMRSZU units.
        pmrwbz, with_pmrwbz: u32 = 31:8;
    }
}

/// PMRSWTP: Persistent Memory Region Sustained Write Throughput (NVMe 1.4 3.1.25).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PmrSwtp(pub u32);

impl PmrSwtp {
    bitfields! { u32;
        /// PMRSWTU (3:0): throughput units (0 = bytes/s, 1 = KiB/s, 2 = MiB/s, 3 = GiB/s).
        pmrswtu, with_pmrswtu: u8 = 3:0;
        /// PMRSWTV (31:8): sustained write throughput, in PMRSWTU units.
        pmrswtv, with_pmrswtv: u32 = 31:8;
    }
}

/// PMRMSCL and PMRMSCU together: Controller Memory Space Control (NVMe 1.4 3.1.26-3.1.27).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PmrMsc(pub u64);

impl PmrMsc {
    bitfields! { u64;
        /// CMSE (1): controller memory space enable.
        cmse, with_cmse: bool = 1;
        /// CBA (63:12): controller base address, in 4 KiB units (raw field).
        cba, with_cba: u64 = 63:12;
    }

    /// The controller base address in bytes (CBA << 12).
    pub const fn base_address(self) -> u64 {
        self.cba() << 12
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pmr_registers() {
        let cap = PmrCap(0)
            .with_rds(true)
            .with_wds(true)
            .with_bir(2)
            .with_pmrtu(1)
            .with_pmrwbm(2);
        assert_eq!(cap.0, (1 << 3) | (1 << 4) | (2 << 5) | (1 << 8) | (2 << 10));
        assert_eq!(
            PmrCap(0).with_pmrto(0xFF).with_cmss(true).0,
            (0xFF << 16) | (1 << 24)
        );
        assert!(PmrCtl(1).en());
        let sts = PmrSts(0)
            .with_err(0x12)
            .with_nrdy(true)
            .with_hsts(5)
            .with_cbai(true);
        assert_eq!(sts.0, 0x12 | (1 << 8) | (5 << 9) | (1 << 12));
        let ebs = PmrEbs(0).with_pmrszu(2).with_rbb(true).with_pmrwbz(0xFF_FFFF);
        assert_eq!(ebs.0, 2 | (1 << 4) | (0xFF_FFFF << 8));
        let swtp = PmrSwtp(0).with_pmrswtu(3).with_pmrswtv(7);
        assert_eq!(swtp.0, 3 | (7 << 8));
        let msc = PmrMsc(0).with_cmse(true).with_cba(0xF_0000_0000 >> 12);
        assert_eq!(msc.0, 0xF_0000_0000 | 2);
        assert_eq!(msc.base_address(), 0xF_0000_0000);
    }
}
