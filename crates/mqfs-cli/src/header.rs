//! The image header, `IMAGE.hdr`: what the machine under an image looks
//! like, as `key = value` text lines.
//!
//! ```text
//! # mqfs image header
//! format = mqfs-image-1
//! mode = mq
//! profile = optane-905p
//! queues = 4
//! blocks = 65536
//! pmr_bytes = 2097152
//! ```
//!
//! Blank lines and lines starting with `#` are ignored; every key is
//! required once and no other key is allowed. `mode` is the file system's
//! consistency mode (`none`, `classic`, `horae`, `mq`; it decides how the
//! driver probes: ccNVMe queues in the PMR for `mq`, the Horae ordering
//! queue for `horae`), `profile` a built-in drive profile of nvme-ctrl,
//! `queues` the hardware queue pairs (one per simulated core), `blocks` the
//! media size in 4 KiB blocks (the size of `IMAGE`) and `pmr_bytes` the
//! size of the PMR (the size of `IMAGE.pmr`).

use mqfs::Mode;
use nvme_ctrl::SsdProfile;

/// The format tag of this version.
pub const FORMAT: &str = "mqfs-image-1";

/// Most hardware queues (simulated cores) an image may ask for.
pub const MAX_QUEUES: u32 = 64;

/// What an image was made with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// Consistency mode.
    pub mode: Mode,
    /// Drive profile name (`SsdProfile::by_name`).
    pub profile: String,
    /// Hardware queue pairs (= simulated cores).
    pub queues: u32,
    /// Media size in 4 KiB blocks.
    pub blocks: u64,
    /// PMR size in bytes.
    pub pmr_bytes: u64,
}

impl Header {
    /// The header text.
    pub fn render(&self) -> String {
        format!(
            "# mqfs image header (see the mqfs-cli crate docs)\nformat = {FORMAT}\nmode = {}\nprofile = {}\nqueues = {}\nblocks = {}\npmr_bytes = {}\n",
            self.mode.name(),
            self.profile,
            self.queues,
            self.blocks,
            self.pmr_bytes
        )
    }

    /// Parses header text; the error says which line is wrong and why.
    pub fn parse(text: &str) -> Result<Header, String> {
        let mut fields: [Option<&str>; 6] = [None; 6];
        const KEYS: [&str; 6] = ["format", "mode", "profile", "queues", "blocks", "pmr_bytes"];
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
        let mode_name = get(1)?;
        let mode = Mode::from_name(mode_name).ok_or_else(|| format!("unknown mode {mode_name:?}"))?;
        let num = |i: usize| -> Result<u64, String> {
            get(i)?
                .parse::<u64>()
                .map_err(|_| format!("{} is not a number", KEYS[i]))
        };
        let h = Header {
            mode,
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
        let p = self.ssd_profile()?;
        if self.queues == 0 || self.queues > MAX_QUEUES {
            return Err(format!("queues {} (1..={MAX_QUEUES})", self.queues));
        }
        if self.blocks == 0 || self.blocks > (1 << 40) / 4096 {
            return Err(format!("blocks {} (1 to 2^28)", self.blocks));
        }
        if self.pmr_bytes != p.pmr_bytes {
            return Err(format!(
                "pmr_bytes {} but profile {} has {}",
                self.pmr_bytes, p.name, p.pmr_bytes
            ));
        }
        Ok(())
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
            mode: Mode::Mq,
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
            (String::new(), "no format line"),
        ];
        for (t, want) in cases {
            let e = Header::parse(&t).unwrap_err();
            assert!(e.contains(want), "{e:?} should mention {want:?}");
        }
    }
}
