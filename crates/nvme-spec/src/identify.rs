//! Identify data structures (NVMe 1.4 5.15): Identify Controller (CNS 01h), Identify
//! Namespace (CNS 00h) and the Active Namespace ID list (CNS 02h). Each is 4096 bytes.

use super::bits::{arr, le16, le32, le64, put};

/// CNS 00h: Identify Namespace data structure for the NSID.
pub const CNS_NAMESPACE: u8 = 0x00;
/// CNS 01h: Identify Controller data structure.
pub const CNS_CONTROLLER: u8 = 0x01;
/// CNS 02h: active namespace ID list (NSIDs greater than the NSID in CDW1).
pub const CNS_ACTIVE_NAMESPACES: u8 = 0x02;

/// Size of every Identify data structure.
pub const IDENTIFY_SIZE: usize = 4096;

/// `s` as an ASCII field of `N` bytes, padded with spaces and truncated if longer.
pub fn ascii_field<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [b' '; N];
    for (o, c) in out.iter_mut().zip(s.bytes()) {
        *o = c;
    }
    out
}

/// An ASCII field as text without trailing spaces (empty if not UTF-8).
pub fn trim_ascii(field: &[u8]) -> &str {
    core::str::from_utf8(field).unwrap_or("").trim_end_matches(' ')
}

/// The Identify Controller fields a host driver uses (NVMe 1.4 5.15.2.1, Identify Controller
/// data structure); every other byte is written as zero.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdentifyController {
    /// VID (1:0): PCI vendor ID.
    pub vid: u16,
    /// SSVID (3:2): PCI subsystem vendor ID.
    pub ssvid: u16,
    /// SN (23:4): serial number, ASCII padded with spaces.
    pub sn: [u8; 20],
    /// MN (63:24): model number, ASCII padded with spaces.
    pub mn: [u8; 40],
    /// FR (71:64): firmware revision, ASCII padded with spaces.
    pub fr: [u8; 8],
    /// RAB (72): recommended arbitration burst.
    pub rab: u8,
    /// IEEE (75:73): IEEE OUI identifier.
    pub ieee: [u8; 3],
    /// CMIC (76): multi-path I/O and namespace sharing capabilities.
    pub cmic: u8,
    /// MDTS (77): maximum data transfer size, `2 ^ mdts` minimum pages (0 = no limit).
    pub mdts: u8,
    /// CNTLID (79:78): controller ID.
    pub cntlid: u16,
    /// VER (83:80): version, as in the VS register.
    pub ver: u32,
    /// OAES (95:92): optional asynchronous events supported.
    pub oaes: u32,
    /// CTRATT (99:96): controller attributes.
    pub ctratt: u32,
    /// OACS (257:256): optional admin command support.
    pub oacs: u16,
    /// ACL (258): abort command limit, 0-based.
    pub acl: u8,
    /// AERL (259): asynchronous event request limit, 0-based.
    pub aerl: u8,
    /// FRMW (260): firmware updates.
    pub frmw: u8,
    /// LPA (261): log page attributes.
    pub lpa: u8,
    /// ELPE (262): error log page entries, 0-based.
    pub elpe: u8,
    /// NPSS (263): number of power states supported, 0-based.
    pub npss: u8,
    /// SQES (512): required (3:0) and maximum (7:4) SQ entry size as powers of two.
    pub sqes: u8,
    /// CQES (513): required (3:0) and maximum (7:4) CQ entry size as powers of two.
    pub cqes: u8,
    /// MAXCMD (515:514): maximum outstanding commands (0 = not reported).
    pub maxcmd: u16,
    /// NN (519:516): number of namespaces (the largest NSID).
    pub nn: u32,
    /// ONCS (521:520): optional NVM command support.
    pub oncs: u16,
    /// FUSES (523:522): fused operation support.
    pub fuses: u16,
    /// FNA (524): format NVM attributes.
    pub fna: u8,
    /// VWC (525): volatile write cache; bit 0 = present.
    pub vwc: u8,
    /// AWUN (527:526): atomic write unit normal, 0-based blocks.
    pub awun: u16,
    /// AWUPF (529:528): atomic write unit power fail, 0-based blocks.
    pub awupf: u16,
    /// SGLS (539:536): SGL support (0 = SGLs not supported).
    pub sgls: u32,
    /// Vendor specific (4095:3072); see `VENDOR_CAP_OFFSET`.
    pub vendor: [u8; 1024],
}

impl Default for IdentifyController {
    /// All fields zero.
    fn default() -> Self {
        IdentifyController {
            vid: 0,
            ssvid: 0,
            sn: [0; 20],
            mn: [0; 40],
            fr: [0; 8],
            rab: 0,
            ieee: [0; 3],
            cmic: 0,
            mdts: 0,
            cntlid: 0,
            ver: 0,
            oaes: 0,
            ctratt: 0,
            oacs: 0,
            acl: 0,
            aerl: 0,
            frmw: 0,
            lpa: 0,
            elpe: 0,
            npss: 0,
            sqes: 0,
            cqes: 0,
            maxcmd: 0,
            nn: 0,
            oncs: 0,
            fuses: 0,
            fna: 0,
            vwc: 0,
            awun: 0,
            awupf: 0,
            sgls: 0,
            vendor: [0; 1024],
        }
    }
}

impl IdentifyController {
    /// SQES for 64-byte entries (required and maximum).
    pub const SQES_64: u8 = 0x66;
    /// CQES for 16-byte entries (required and maximum).
    pub const CQES_16: u8 = 0x44;
    /// ONCS bit 2: Dataset Management supported.
    pub const ONCS_DSM: u16 = 1 << 2;
    /// ONCS bit 3: Write Zeroes supported.
    pub const ONCS_WRITE_ZEROES: u16 = 1 << 3;
    /// VWC bit 0: a volatile write cache is present.
    pub const VWC_PRESENT: u8 = 1;

    /// Sets SN, MN and FR from text, padded with spaces.
    pub fn set_strings(&mut self, sn: &str, mn: &str, fr: &str) {
        self.sn = ascii_field(sn);
        self.mn = ascii_field(mn);
        self.fr = ascii_field(fr);
    }

    /// Encodes the 4096-byte structure.
    pub fn to_bytes(&self) -> Box<[u8; 4096]> {
        let mut b = Box::new([0u8; IDENTIFY_SIZE]);
        put(&mut b[..], 0, &self.vid.to_le_bytes());
        put(&mut b[..], 2, &self.ssvid.to_le_bytes());
        put(&mut b[..], 4, &self.sn);
        put(&mut b[..], 24, &self.mn);
        put(&mut b[..], 64, &self.fr);
        b[72] = self.rab;
        put(&mut b[..], 73, &self.ieee);
        b[76] = self.cmic;
        b[77] = self.mdts;
        put(&mut b[..], 78, &self.cntlid.to_le_bytes());
        put(&mut b[..], 80, &self.ver.to_le_bytes());
        put(&mut b[..], 92, &self.oaes.to_le_bytes());
        put(&mut b[..], 96, &self.ctratt.to_le_bytes());
        put(&mut b[..], 256, &self.oacs.to_le_bytes());
        b[258..264].copy_from_slice(&[self.acl, self.aerl, self.frmw, self.lpa, self.elpe, self.npss]);
        b[512] = self.sqes;
        b[513] = self.cqes;
        put(&mut b[..], 514, &self.maxcmd.to_le_bytes());
        put(&mut b[..], 516, &self.nn.to_le_bytes());
        put(&mut b[..], 520, &self.oncs.to_le_bytes());
        put(&mut b[..], 522, &self.fuses.to_le_bytes());
        b[524] = self.fna;
        b[525] = self.vwc;
        put(&mut b[..], 526, &self.awun.to_le_bytes());
        put(&mut b[..], 528, &self.awupf.to_le_bytes());
        put(&mut b[..], 536, &self.sgls.to_le_bytes());
        put(&mut b[..], 3072, &self.vendor);
        b
    }

    /// Decodes the structure; `None` if `b` is shorter than 4096 bytes.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        let b = b.get(..IDENTIFY_SIZE)?;
        Some(IdentifyController {
            vid: le16(b, 0),
            ssvid: le16(b, 2),
            sn: arr(b, 4),
            mn: arr(b, 24),
            fr: arr(b, 64),
            rab: b[72],
            ieee: arr(b, 73),
            cmic: b[76],
            mdts: b[77],
            cntlid: le16(b, 78),
            ver: le32(b, 80),
            oaes: le32(b, 92),
            ctratt: le32(b, 96),
            oacs: le16(b, 256),
            acl: b[258],
            aerl: b[259],
            frmw: b[260],
            lpa: b[261],
            elpe: b[262],
            npss: b[263],
            sqes: b[512],
            cqes: b[513],
            maxcmd: le16(b, 514),
            nn: le32(b, 516),
            oncs: le16(b, 520),
            fuses: le16(b, 522),
            fna: b[524],
            vwc: b[525],
            awun: le16(b, 526),
            awupf: le16(b, 528),
            sgls: le32(b, 536),
            vendor: arr(b, 3072),
        })
    }
}

/// One LBA format (NVMe 1.4 5.15.2, LBA Format data structure): MS 15:0, LBADS 23:16, RP 25:24.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct LbaFormat {
    /// MS: metadata bytes per LBA.
    pub ms: u16,
    /// LBADS: LBA data size as a power of two (9 = 512 bytes, 12 = 4 KiB; 0 = not usable).
    pub lbads: u8,
    /// RP: relative performance (0 best).
    pub rp: u8,
}

impl LbaFormat {
    /// The 32-bit encoding.
    pub const fn to_dw(self) -> u32 {
        self.ms as u32 | ((self.lbads as u32) << 16) | (((self.rp & 0x3) as u32) << 24)
    }

    /// Decodes the 32-bit encoding.
    pub const fn from_dw(dw: u32) -> Self {
        LbaFormat {
            ms: dw as u16,
            lbads: (dw >> 16) as u8,
            rp: ((dw >> 24) & 0x3) as u8,
        }
    }
}

/// Identify Namespace fields (NVMe 1.4 5.15.2, Identify Namespace data structure, NVM
/// command set specific); every other byte is written as zero.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct IdentifyNamespace {
    /// NSZE (7:0): namespace size in logical blocks.
    pub nsze: u64,
    /// NCAP (15:8): namespace capacity in logical blocks.
    pub ncap: u64,
    /// NUSE (23:16): namespace utilization in logical blocks.
    pub nuse: u64,
    /// NSFEAT (24): namespace features (bit 1: NAWUN/NAWUPF valid).
    pub nsfeat: u8,
    /// NLBAF (25): number of LBA formats, 0-based. Keep it equal to `lbaf.len() - 1`.
    pub nlbaf: u8,
    /// FLBAS (26): formatted LBA size; bits 3:0 select the format in `lbaf`.
    pub flbas: u8,
    /// DLFEAT (33): deallocate logical block features (bits 2:0 = 001b: reads return zeroes).
    pub dlfeat: u8,
    /// NAWUN (35:34): namespace atomic write unit normal, 0-based blocks.
    pub nawun: u16,
    /// NAWUPF (37:36): namespace atomic write unit power fail, 0-based blocks.
    pub nawupf: u16,
    /// LBAF0-LBAF15 (bytes 128 + 4 * i); at most 16 are encoded.
    pub lbaf: Vec<LbaFormat>,
}

impl IdentifyNamespace {
    /// Most LBA formats in NVMe 1.4 (LBAF0 to LBAF15).
    pub const MAX_LBA_FORMATS: usize = 16;

    /// A namespace of `blocks` logical blocks, all in use, with one LBA format of
    /// `2 ^ lbads` bytes and no metadata.
    pub fn simple(blocks: u64, lbads: u8) -> Self {
        IdentifyNamespace {
            nsze: blocks,
            ncap: blocks,
            nuse: blocks,
            lbaf: vec![LbaFormat { ms: 0, lbads, rp: 0 }],
            ..Self::default()
        }
    }

    /// Bytes per logical block, `1 << lbads` of the format FLBAS 3:0 selects; `None` if that
    /// format is missing or its LBADS is outside 9..=31.
    pub fn lba_size(&self) -> Option<u32> {
        let lbads = self.lbaf.get(usize::from(self.flbas & 0xF))?.lbads;
        (9..=31).contains(&lbads).then(|| 1u32 << lbads)
    }

    /// Encodes the 4096-byte structure.
    pub fn to_bytes(&self) -> Box<[u8; 4096]> {
        let mut b = Box::new([0u8; IDENTIFY_SIZE]);
        put(&mut b[..], 0, &self.nsze.to_le_bytes());
        put(&mut b[..], 8, &self.ncap.to_le_bytes());
        put(&mut b[..], 16, &self.nuse.to_le_bytes());
        b[24] = self.nsfeat;
        b[25] = self.nlbaf;
        b[26] = self.flbas;
        b[33] = self.dlfeat;
        put(&mut b[..], 34, &self.nawun.to_le_bytes());
        put(&mut b[..], 36, &self.nawupf.to_le_bytes());
        for (i, f) in self.lbaf.iter().take(Self::MAX_LBA_FORMATS).enumerate() {
            put(&mut b[..], 128 + 4 * i, &f.to_dw().to_le_bytes());
        }
        b
    }

    /// Decodes the structure, reading NLBAF + 1 LBA formats (at most 16); `None` if `b` is
    /// shorter than 4096 bytes.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        let b = b.get(..IDENTIFY_SIZE)?;
        let count = (usize::from(b[25]) + 1).min(Self::MAX_LBA_FORMATS);
        Some(IdentifyNamespace {
            nsze: le64(b, 0),
            ncap: le64(b, 8),
            nuse: le64(b, 16),
            nsfeat: b[24],
            nlbaf: b[25],
            flbas: b[26],
            dlfeat: b[33],
            nawun: le16(b, 34),
            nawupf: le16(b, 36),
            lbaf: (0..count)
                .map(|i| LbaFormat::from_dw(le32(b, 128 + 4 * i)))
                .collect(),
        })
    }
}

/// The Active Namespace ID list (CNS 02h): up to 1024 NSIDs as given (the caller passes them
/// in increasing order, above CDW1.NSID), zero-filled; extra NSIDs are dropped.
pub fn active_namespaces_bytes(nsids: &[u32]) -> Box<[u8; 4096]> {
    let mut b = Box::new([0u8; IDENTIFY_SIZE]);
    for (i, id) in nsids.iter().take(IDENTIFY_SIZE / 4).enumerate() {
        put(&mut b[..], 4 * i, &id.to_le_bytes());
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controller_round_trip_and_offsets() {
        let mut c = IdentifyController {
            vid: 0x1B36,
            ssvid: 0x1AF4,
            mdts: 5,
            cntlid: 0x0102,
            ver: 0x0001_0400,
            oacs: 0x0006,
            aerl: 3,
            elpe: 63,
            sqes: IdentifyController::SQES_64,
            cqes: IdentifyController::CQES_16,
            maxcmd: 0x400,
            nn: 1,
            oncs: IdentifyController::ONCS_DSM | IdentifyController::ONCS_WRITE_ZEROES,
            vwc: IdentifyController::VWC_PRESENT,
            awupf: 7,
            ieee: [1, 2, 3],
            ..IdentifyController::default()
        };
        c.set_strings("SN01", "ccNVMe simulated SSD", "1.0");
        c.vendor[0] = 1;
        let b = c.to_bytes();
        assert_eq!(b[0..4], [0x36, 0x1B, 0xF4, 0x1A]);
        assert_eq!(&b[4..24], b"SN01                ");
        assert_eq!(&b[64..72], b"1.0     ");
        assert_eq!((b[73], b[77], b[78], b[79]), (1, 5, 0x02, 0x01));
        assert_eq!(b[80..84], [0x00, 0x04, 0x01, 0x00]);
        assert_eq!((b[256], b[259], b[262]), (6, 3, 63));
        assert_eq!((b[512], b[513], b[514], b[515]), (0x66, 0x44, 0x00, 0x04));
        assert_eq!((b[516], b[520], b[525], b[528]), (1, 0x0C, 1, 7));
        assert_eq!(b[3072], 1);
        assert_eq!(IdentifyController::from_bytes(&b[..]).as_ref(), Some(&c));
        assert_eq!(trim_ascii(&c.mn), "ccNVMe simulated SSD");
        assert_eq!(IdentifyController::from_bytes(&b[..4095]), None);
        assert_eq!(ascii_field::<4>("abcdef"), *b"abcd");
    }

    #[test]
    fn namespace_round_trip_and_offsets() {
        let mut ns = IdentifyNamespace::simple(0x1_0000_0000, 12);
        ns.nlbaf = 1;
        ns.flbas = 1;
        ns.dlfeat = 1;
        ns.nawupf = 0x11;
        ns.lbaf.push(LbaFormat {
            ms: 8,
            lbads: 9,
            rp: 2,
        });
        let b = ns.to_bytes();
        assert_eq!(b[0..8], 0x1_0000_0000u64.to_le_bytes());
        assert_eq!(b[8..16], b[0..8]);
        assert_eq!((b[25], b[26], b[33], b[36]), (1, 1, 1, 0x11));
        assert_eq!(b[128..132], [0, 0, 12, 0]);
        assert_eq!(b[132..136], [8, 0, 9, 2]);
        assert_eq!(IdentifyNamespace::from_bytes(&b[..]).as_ref(), Some(&ns));
        assert_eq!(ns.lba_size(), Some(512));
        ns.flbas = 0;
        assert_eq!(ns.lba_size(), Some(4096));
        ns.flbas = 5;
        assert_eq!(ns.lba_size(), None);
        assert_eq!(IdentifyNamespace::from_bytes(&[0u8; 100]), None);
    }

    #[test]
    fn active_namespace_list() {
        let b = active_namespaces_bytes(&[1, 2, 0x100]);
        assert_eq!(b[0..12], [1, 0, 0, 0, 2, 0, 0, 0, 0, 1, 0, 0]);
        assert!(b[12..].iter().all(|&x| x == 0));
        let many: Vec<u32> = (1..=2000).collect();
        let b = active_namespaces_bytes(&many);
        assert_eq!(b[4092..4096], 1024u32.to_le_bytes());
    }
}
