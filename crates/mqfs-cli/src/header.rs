//! The image header, `IMAGE.hdr`: what the machine under an image looks
//! like, as `key = value` text lines.
//!
//! ```text
//! # mqfs image header
//! format = mqfs-image-1
//! fs = mqfs
//! mode = mq
//! profile = optane-905p
//! queues = 4
//! blocks = 65536
//! pmr_bytes = 2097152
//! ```
//!
//! Blank lines and lines starting with `#` are ignored; no key may be
//! given twice and no other key is allowed. `fs` is the file system
//! (`mqfs`, or one of the file systems on persistent memory: `wofs`,
//! `soupfs`, `pmfs`); a header without it is MQFS's (the images made
//! before the others existed). For `mqfs`, `mode` is the consistency
//! mode (`none`, `classic`, `horae`, `mq`; it decides how the driver
//! probes: ccNVMe queues in the PMR for `mq`, the Horae ordering queue for
//! `horae`), `profile` a built-in drive profile of nvme-ctrl and
//! `pmr_bytes` the size of its PMR (the size of `IMAGE.pmr`); on
//! persistent memory there is no `mode`, `profile` is the persistence
//! domain (`pm-adr` or `pm-eadr`) and `pmr_bytes` is 0 (`IMAGE.pmr` is
//! empty). `queues` is the number of simulated cores (on the drive, one
//! hardware queue pair each) and `blocks` the medium's size in 4 KiB
//! blocks (the size of `IMAGE`: the drive's media, or the persistent
//! memory's bytes).

use crashfuzz::pm::{domain_by_name, PmMode, DEFAULT_PM_PROFILES};
use mqfs::Mode;
use nvme_ctrl::SsdProfile;
use pcie_sim::PersistenceDomain;

/// The format tag of this version.
pub const FORMAT: &str = "mqfs-image-1";

/// Most hardware queues (simulated cores) an image may ask for.
pub const MAX_QUEUES: u32 = 64;

/// The file system an image holds, and with it the medium.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFs {
    /// MQFS in a consistency mode, on the NVMe drive.
    Mqfs(Mode),
    /// A file system on persistent memory.
    Pm(PmMode),
}

impl ImageFs {
    /// The `fs` line's value.
    pub fn name(self) -> &'static str {
        match self {
            ImageFs::Mqfs(_) => "mqfs",
            ImageFs::Pm(m) => m.name(),
        }
    }

    /// The file system named `s` (`mqfs` in `mode`).
    pub fn by_name(s: &str, mode: Mode) -> Option<ImageFs> {
        match s {
            "mqfs" => Some(ImageFs::Mqfs(mode)),
            _ => PmMode::from_name(s).map(ImageFs::Pm),
        }
    }
}

/// What an image was made with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The file system (MQFS's with its consistency mode).
    pub fs: ImageFs,
    /// Drive profile name (`SsdProfile::by_name`), or on persistent
    /// memory the persistence domain (`pm-adr`, `pm-eadr`).
    pub profile: String,
    /// Simulated cores (on the drive, hardware queue pairs).
    pub queues: u32,
    /// Medium size in 4 KiB blocks.
    pub blocks: u64,
    /// PMR size in bytes (0 on persistent memory).
    pub pmr_bytes: u64,
}

impl Header {
    /// The header text.
    pub fn render(&self) -> String {
        let mode = match self.fs {
            ImageFs::Mqfs(mode) => format!("mode = {}\n", mode.name()),
            ImageFs::Pm(_) => String::new(),
        };
        format!(
            "# mqfs image header (see the mqfs-cli crate docs)\nformat = {FORMAT}\nfs = {}\n{mode}profile = {}\nqueues = {}\nblocks = {}\npmr_bytes = {}\n",
            self.fs.name(),
            self.profile,
            self.queues,
            self.blocks,
            self.pmr_bytes
        )
    }

    /// Parses header text; the error says which line is wrong and why.
    pub fn parse(text: &str) -> Result<Header, String> {
        let mut fields: [Option<&str>; 7] = [None; 7];
        const KEYS: [&str; 7] = ["format", "mode", "profile", "queues", "blocks", "pmr_bytes", "fs"];
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (k, v) = line
                .split_once('=')
                .ok_or_else(|| format!("line {}: not `key = value`", n + 1))?;
            let (k, v) = (k.trim(), v.trim());
            let i = KEYS
                .iter()
                .position(|x| *x == k)
                .ok_or_else(|| format!("line {}: unknown key {k:?}", n + 1))?;
            if fields[i].replace(v).is_some() {
                return Err(format!("line {}: {k} given twice", n + 1));
            }
        }
        let get = |i: usize| fields[i].ok_or_else(|| format!("no {} line", KEYS[i]));
        if get(0)? != FORMAT {
            return Err(format!("format {:?} (this mqfs reads {FORMAT})", get(0)?));
        }
        let fs_name = fields[6].unwrap_or("mqfs");
        let fs = match (fs_name, PmMode::from_name(fs_name)) {
            ("mqfs", _) => {
                let mode_name = get(1)?;
                ImageFs::Mqfs(
                    Mode::from_name(mode_name).ok_or_else(|| format!("unknown mode {mode_name:?}"))?,
                )
            }
            (_, Some(pm)) if fields[1].is_none() => ImageFs::Pm(pm),
            (_, Some(_)) => return Err(format!("a mode line, but {fs_name} has no modes")),
            (_, None) => return Err(format!("unknown fs {fs_name:?} (mqfs, wofs, soupfs, pmfs)")),
        };
        let num = |i: usize| -> Result<u64, String> {
            get(i)?
                .parse::<u64>()
                .map_err(|_| format!("{} is not a number", KEYS[i]))
        };
        let h = Header {
            fs,
            profile: get(2)?.to_string(),
            queues: u32::try_from(num(3)?).map_err(|_| "queues out of range".to_string())?,
            blocks: num(4)?,
            pmr_bytes: num(5)?,
        };
        h.validate()?;
        Ok(h)
    }

    /// Checks the values against each other and the profile.
    pub fn validate(&self) -> Result<(), String> {
        let (pmr_bytes, profile) = match self.fs {
            ImageFs::Mqfs(_) => {
                let p = self.ssd_profile()?;
                (p.pmr_bytes, p.name)
            }
            ImageFs::Pm(_) => (0, self.profile.as_str()),
        };
        if let ImageFs::Pm(_) = self.fs {
            self.domain()?;
        }
        if self.queues == 0 || self.queues > MAX_QUEUES {
            return Err(format!("queues {} (1..={MAX_QUEUES})", self.queues));
        }
        if self.blocks == 0 || self.blocks > (1 << 40) / 4096 {
            return Err(format!("blocks {} (1 to 2^28)", self.blocks));
        }
        if self.pmr_bytes != pmr_bytes {
            return Err(format!(
                "pmr_bytes {} but profile {profile} has {pmr_bytes}",
                self.pmr_bytes
            ));
        }
        Ok(())
    }

    /// MQFS's consistency mode, or why this image has none (it holds a
    /// file system on persistent memory).
    pub fn mqfs_mode(&self) -> Result<Mode, String> {
        match self.fs {
            ImageFs::Mqfs(mode) => Ok(mode),
            ImageFs::Pm(m) => Err(format!(
                "the image holds {} on persistent memory, not MQFS",
                m.name()
            )),
        }
    }

    /// The persistence domain a persistent-memory image's profile names.
    pub fn domain(&self) -> Result<PersistenceDomain, String> {
        domain_by_name(&self.profile).ok_or_else(|| {
            format!(
                "unknown persistent-memory profile {:?} (one of {})",
                self.profile,
                DEFAULT_PM_PROFILES.join(", ")
            )
        })
    }

    /// The drive profile.
    pub fn ssd_profile(&self) -> Result<SsdProfile, String> {
        SsdProfile::by_name(&self.profile).ok_or_else(|| {
            format!(
                "unknown profile {:?} (one of {})",
                self.profile,
                profile_names().join(", ")
            )
        })
    }
}

/// Names of the built-in drive profiles.
pub fn profile_names() -> Vec<&'static str> {
    SsdProfile::all().iter().map(|p| p.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Header {
        Header {
            fs: ImageFs::Mqfs(Mode::Mq),
            profile: "optane-905p".into(),
            queues: 4,
            blocks: 65536,
            pmr_bytes: SsdProfile::optane_905p().pmr_bytes,
        }
    }

    #[test]
    fn render_then_parse_round_trips() {
        let h = sample();
        assert_eq!(Header::parse(&h.render()), Ok(h));
    }

    #[test]
    fn a_header_without_fs_is_mqfs_and_a_pm_header_round_trips() {
        let old = sample().render().replace("fs = mqfs\n", "");
        assert_eq!(Header::parse(&old), Ok(sample()));
        let pm = Header {
            fs: ImageFs::Pm(PmMode::Soupfs),
            profile: "pm-eadr".into(),
            queues: 2,
            blocks: 1024,
            pmr_bytes: 0,
        };
        let text = pm.render();
        assert!(!text.contains("mode ="), "{text}");
        assert_eq!(Header::parse(&text), Ok(pm.clone()));
        assert_eq!(pm.domain(), Ok(PersistenceDomain::Eadr));
        assert!(pm.mqfs_mode().unwrap_err().contains("soupfs"));
        let bad = text.replace("pm-eadr", "optane-905p");
        assert!(Header::parse(&bad)
            .unwrap_err()
            .contains("persistent-memory profile"));
        let bad = text.replace("pmr_bytes = 0", "pmr_bytes = 4096");
        assert!(Header::parse(&bad).unwrap_err().contains("pmr_bytes"));
    }

    #[test]
    fn bad_headers_say_what_is_wrong() {
        let text = sample().render();
        let cases = [
            (text.replace("mode = mq", "mode = ext9"), "unknown mode"),
            (text.replace("queues = 4", "queues = 0"), "queues 0"),
            (text.replace("queues = 4\n", ""), "no queues line"),
            (format!("{text}queues = 4\n"), "given twice"),
            (format!("{text}colour = blue\n"), "unknown key"),
            (text.replace(FORMAT, "mqfs-image-9"), "format"),
            (text.replace("optane-905p", "floppy"), "unknown profile"),
            (text.replace("pmr_bytes = ", "pmr_bytes = 1"), "pmr_bytes"),
            ("garbage\n".to_string(), "not `key = value`"),
            (text.replace("fs = mqfs", "fs = ext9"), "unknown fs"),
            (text.replace("fs = mqfs", "fs = wofs"), "has no modes"),
            (String::new(), "no format line"),
        ];
        for (t, want) in cases {
            let e = Header::parse(&t).unwrap_err();
            assert!(e.contains(want), "{e:?} should mention {want:?}");
        }
    }
}
