//! The package: all the metadata one operation changes, in one
//! checksummed record written once (slides, "Key Insight": "One package
//! for one OP"; "Package Persistence (2/2)": "Protect package with
//! checksum").
//!
//! ```text
//! header (32 B): magic u32 | kind u8 | version u8 | 0 u16 | seq u64 | len u32 | crc32 u32 | 0 u64
//! body (len B, at most 224): by kind, below
//! ```
//!
//! The CRC covers the header (with the CRC field zero) and the body, so a
//! package torn by a crash (some of its 8-byte words persisted, others
//! not) fails the check and recovery drops it. `seq` is the package's
//! version: unique, growing, and how other packages name it.

use crate::layout::SLOT;

/// An inode number.
pub type Ino = u64;
/// The root directory's inode number.
pub const ROOT: Ino = 1;
/// Longest name, in bytes.
pub const NAME_MAX: usize = 160;
/// Most data pages one file maps (one attribute package holds the map).
pub const MAX_PAGES: usize = 48;
/// Sequence numbers and inode numbers are below this (a package naming a
/// larger one is invalid, so counters never overflow).
pub const MAX_SEQ: u64 = 1 << 62;

const MAGIC: u32 = u32::from_le_bytes(*b"WOFP");
const VERSION: u8 = 1;
/// Bytes of the header.
pub const HEADER: usize = 32;
const BODY_MAX: usize = SLOT as usize - HEADER;

pub use fsapi::FileType;

/// A reference to a package: its slot and its sequence number (a slot is
/// reused; the pair names one package).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct PkgRef {
    /// The slot.
    pub slot: u32,
    /// The package's sequence number.
    pub seq: u64,
}

/// A directory entry, with the identity of the inode it names (so any
/// live entry rebuilds the inode).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dentry {
    /// The inode named.
    pub ino: Ino,
    /// The directory holding the entry.
    pub parent: Ino,
    /// The inode's type.
    pub ftype: FileType,
    /// Its permission bits at creation.
    pub perm: u16,
    /// The entry's name.
    pub name: String,
}

/// An inode's attributes and its whole data map (superseding every earlier
/// attribute package of the inode).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttrBody {
    /// The inode.
    pub ino: Ino,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits.
    pub perm: u16,
    /// Data page of each file page (1-based; 0 is a hole).
    pub pages: Vec<u32>,
}

/// What a package says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// create, mkdir: a new inode and its first entry.
    Create(Dentry),
    /// link: another entry for an existing inode.
    Link(Dentry),
    /// unlink, rmdir: the entry package `cancels` is void.
    Unlink {
        /// The inode whose entry goes.
        ino: Ino,
        /// The entry package it cancels.
        cancels: PkgRef,
    },
    /// rename: a new entry, and the old entry (and an entry it replaces)
    /// void.
    Rename {
        /// The new entry.
        dentry: Dentry,
        /// The old entry, then the replaced target's entry if any.
        cancels: Vec<PkgRef>,
    },
    /// setattr, truncate, write: the inode's size, permissions and map.
    Attr(AttrBody),
}

impl Body {
    fn kind(&self) -> u8 {
        match self {
            Body::Create(_) => 1,
            Body::Link(_) => 2,
            Body::Unlink { .. } => 3,
            Body::Rename { .. } => 4,
            Body::Attr(_) => 5,
        }
    }

    /// The entry this package makes, if any.
    pub fn dentry(&self) -> Option<&Dentry> {
        match self {
            Body::Create(d) | Body::Link(d) | Body::Rename { dentry: d, .. } => Some(d),
            Body::Unlink { .. } | Body::Attr(_) => None,
        }
    }

    /// The packages this one cancels.
    pub fn cancels(&self) -> &[PkgRef] {
        match self {
            Body::Unlink { cancels, .. } => std::slice::from_ref(cancels),
            Body::Rename { cancels, .. } => cancels,
            _ => &[],
        }
    }

    /// The inode the package is about.
    pub fn ino(&self) -> Ino {
        match self {
            Body::Create(d) | Body::Link(d) | Body::Rename { dentry: d, .. } => d.ino,
            Body::Unlink { ino, .. } => *ino,
            Body::Attr(a) => a.ino,
        }
    }
}

/// One package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Package {
    /// Sequence number (version): unique and growing.
    pub seq: u64,
    /// What it says.
    pub body: Body,
}

/// What a slot holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Never written (all zero).
    Empty,
    /// Not a whole package: torn by a crash, or garbage.
    Invalid(&'static str),
    /// A valid package.
    Valid(Package),
}

/// Whether a name may be stored.
pub fn check_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() || name == "." || name == ".." {
        return Err("empty name, . or ..");
    }
    if name.len() > NAME_MAX {
        return Err("name too long");
    }
    if name.contains('/') || name.contains('\0') {
        return Err("name holds / or NUL");
    }
    Ok(())
}

fn put_dentry(b: &mut Vec<u8>, d: &Dentry) {
    b.extend_from_slice(&d.ino.to_le_bytes());
    b.extend_from_slice(&d.parent.to_le_bytes());
    b.push(match d.ftype {
        FileType::File => 1,
        FileType::Dir => 2,
        // No operation makes these (the trait has no symlink or mknod):
        // codes the decoder refuses, as a package holding one is not WOFS's.
        FileType::Symlink => 3,
        FileType::Special => 4,
    });
    b.extend_from_slice(&d.perm.to_le_bytes());
    b.push(d.name.len() as u8);
    b.extend_from_slice(d.name.as_bytes());
}

fn put_ref(b: &mut Vec<u8>, r: &PkgRef) {
    b.extend_from_slice(&r.slot.to_le_bytes());
    b.extend_from_slice(&r.seq.to_le_bytes());
}

impl Package {
    /// The package's bytes: header and body, padded to whole 8-byte words
    /// (at most one slot). `None` if the body does not fit a slot (names
    /// and maps are checked before, so the callers never see it).
    pub fn encode(&self) -> Option<Vec<u8>> {
        let mut body = Vec::with_capacity(BODY_MAX);
        match &self.body {
            Body::Create(d) | Body::Link(d) => put_dentry(&mut body, d),
            Body::Unlink { ino, cancels } => {
                body.extend_from_slice(&ino.to_le_bytes());
                put_ref(&mut body, cancels);
            }
            Body::Rename { dentry, cancels } => {
                body.push(cancels.len() as u8);
                for r in cancels {
                    put_ref(&mut body, r);
                }
                put_dentry(&mut body, dentry);
            }
            Body::Attr(a) => {
                body.extend_from_slice(&a.ino.to_le_bytes());
                body.extend_from_slice(&a.size.to_le_bytes());
                body.extend_from_slice(&a.perm.to_le_bytes());
                body.extend_from_slice(&(a.pages.len() as u16).to_le_bytes());
                for p in &a.pages {
                    body.extend_from_slice(&p.to_le_bytes());
                }
            }
        }
        if body.len() > BODY_MAX {
            return None;
        }
        let mut b = Vec::with_capacity(SLOT as usize);
        b.extend_from_slice(&MAGIC.to_le_bytes());
        b.push(self.body.kind());
        b.push(VERSION);
        b.extend_from_slice(&[0, 0]);
        b.extend_from_slice(&self.seq.to_le_bytes());
        b.extend_from_slice(&(body.len() as u32).to_le_bytes());
        b.extend_from_slice(&[0; 12]);
        b.extend_from_slice(&body);
        let crc = crc32fast::hash(&b);
        b[20..24].copy_from_slice(&crc.to_le_bytes());
        b.resize(b.len().next_multiple_of(8), 0);
        Some(b)
    }

    /// Reads a slot's bytes; with `check_crc` false the checksum is not
    /// verified (a fault switch: torn packages are then accepted if they
    /// parse).
    pub fn decode(slot: &[u8], check_crc: bool) -> Slot {
        // OR-folded rather than `all`: without an early exit the loop
        // runs in wide vector lanes, and recovery asks this of every slot.
        if slot.iter().fold(0u8, |acc, &b| acc | b) == 0 {
            return Slot::Empty;
        }
        match Self::parse(slot, check_crc) {
            Ok(p) => Slot::Valid(p),
            Err(why) => Slot::Invalid(why),
        }
    }

    fn parse(slot: &[u8], check_crc: bool) -> Result<Package, &'static str> {
        let mut r = Reader { b: slot, at: 0 };
        if r.u32()? != MAGIC {
            return Err("magic");
        }
        let kind = r.u8()?;
        if r.u8()? != VERSION {
            return Err("version");
        }
        r.take(2)?;
        let seq = r.u64()?;
        let len = r.u32()? as usize;
        let crc = r.u32()?;
        if len > BODY_MAX || slot.len() < HEADER + len {
            return Err("length");
        }
        if check_crc {
            let mut h = crc32fast::Hasher::new();
            h.update(&slot[..20]);
            h.update(&[0; 4]);
            h.update(&slot[24..HEADER + len]);
            if h.finalize() != crc {
                return Err("checksum");
            }
        }
        if seq == 0 || seq >= MAX_SEQ {
            return Err("sequence number");
        }
        let mut r = Reader {
            b: &slot[..HEADER + len],
            at: HEADER,
        };
        let body = match kind {
            1 => Body::Create(r.dentry()?),
            2 => Body::Link(r.dentry()?),
            3 => Body::Unlink {
                ino: r.ino()?,
                cancels: r.pkg_ref()?,
            },
            4 => {
                let n = r.u8()?;
                if !(1..=2).contains(&n) {
                    return Err("rename cancels");
                }
                let cancels = (0..n).map(|_| r.pkg_ref()).collect::<Result<Vec<_>, _>>()?;
                Body::Rename {
                    cancels,
                    dentry: r.dentry()?,
                }
            }
            5 => {
                let ino = r.ino()?;
                let size = r.u64()?;
                let perm = r.u16()?;
                let n = r.u16()? as usize;
                if n > MAX_PAGES || size > n as u64 * crate::layout::PAGE {
                    return Err("attribute map");
                }
                let pages = (0..n).map(|_| r.u32()).collect::<Result<Vec<_>, _>>()?;
                Body::Attr(AttrBody {
                    ino,
                    size,
                    perm,
                    pages,
                })
            }
            _ => return Err("kind"),
        };
        if r.at != r.b.len() {
            return Err("length");
        }
        Ok(Package { seq, body })
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], &'static str> {
        let end = self
            .at
            .checked_add(n)
            .filter(|&e| e <= self.b.len())
            .ok_or("short")?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, &'static str> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
    fn u32(&mut self) -> Result<u32, &'static str> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Result<u64, &'static str> {
        let s = self.take(8)?;
        let mut w = [0u8; 8];
        w.copy_from_slice(s);
        Ok(u64::from_le_bytes(w))
    }
    fn pkg_ref(&mut self) -> Result<PkgRef, &'static str> {
        Ok(PkgRef {
            slot: self.u32()?,
            seq: self.u64()?,
        })
    }
    fn ino(&mut self) -> Result<Ino, &'static str> {
        match self.u64()? {
            i if i == 0 || i >= MAX_SEQ => Err("inode number"),
            i => Ok(i),
        }
    }
    fn dentry(&mut self) -> Result<Dentry, &'static str> {
        let ino = self.ino()?;
        let parent = self.ino()?;
        let ftype = match self.u8()? {
            1 => FileType::File,
            2 => FileType::Dir,
            _ => return Err("file type"),
        };
        let perm = self.u16()?;
        let n = self.u8()? as usize;
        let name = std::str::from_utf8(self.take(n)?).map_err(|_| "name not UTF-8")?;
        check_name(name)?;
        Ok(Dentry {
            ino,
            parent,
            ftype,
            perm,
            name: name.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot_of(p: &Package) -> Vec<u8> {
        let mut s = p.encode().unwrap();
        s.resize(SLOT as usize, 0);
        s
    }

    #[test]
    fn every_kind_round_trips_and_a_flipped_bit_is_caught() {
        let d = Dentry {
            ino: 7,
            parent: ROOT,
            ftype: FileType::File,
            perm: 0o644,
            name: "a".repeat(NAME_MAX),
        };
        let r = PkgRef { slot: 3, seq: 9 };
        let bodies = [
            Body::Create(d.clone()),
            Body::Link(d.clone()),
            Body::Unlink { ino: 7, cancels: r },
            Body::Rename {
                dentry: d,
                cancels: vec![r, r],
            },
            Body::Attr(AttrBody {
                ino: 7,
                size: 5000,
                perm: 0o600,
                pages: vec![4; MAX_PAGES],
            }),
        ];
        for body in bodies {
            let p = Package { seq: 42, body };
            let mut s = slot_of(&p);
            assert_eq!(Package::decode(&s, true), Slot::Valid(p.clone()));
            s[HEADER + 1] ^= 0x10;
            assert_eq!(Package::decode(&s, true), Slot::Invalid("checksum"));
        }
        assert_eq!(Package::decode(&[0; SLOT as usize], true), Slot::Empty);
        let short = slot_of(&Package {
            seq: 1,
            body: Body::Unlink { ino: 2, cancels: r },
        });
        for n in 0..HEADER + 20 {
            assert!(matches!(
                Package::decode(&short[..n], true),
                Slot::Invalid(_) | Slot::Empty
            ));
        }
    }

    #[test]
    fn garbage_never_panics() {
        let mut s = [0u8; SLOT as usize];
        for i in 0..SLOT as usize {
            s[i] = (i * 37 + 11) as u8;
            let _ = Package::decode(&s, false);
            let _ = Package::decode(&s, true);
        }
        s[..4].copy_from_slice(&MAGIC.to_le_bytes());
        s[5] = VERSION;
        s[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(Package::decode(&s, false), Slot::Invalid(_)));
    }
}
