//! Crash exploration of a machine with several drives (`horae2`: HoraeFS
//! on a volume striped over two drives).
//!
//! The crash states are those of `nvme_ctrl::crash::DevicesExplorer`: the
//! product of each drive's choices (its PMR writes in flight and WC lines,
//! its volatile cache's blocks), each drive failing on its own. By default
//! they are enumerated by what their checks read, with the one-drive
//! machinery ([`crate::observe`], through [`CrashSpace`]): a check logs
//! the units it reads of every drive (PMR lines of each port, blocks of
//! each drive), and states that agree at every unit read, on every drive,
//! are judged once; data blocks are judged instead of read
//! ([`crate::blockwise`]) on the member a volume block maps to. So every
//! state the envelope allows is judged and none is left unvisited
//! (`crate::observe`'s module doc gives the argument for several drives;
//! `tests/read_sets.rs` checks it by brute force). With `--bounded` or
//! `--brute-force`, every state up to the bounds (`--bound-lines` for the
//! PMR; `--bound-blocks` shared out among the drives, `bound / drives`
//! each, so the product of their subsets stays within the one-drive bound;
//! past them sampled and counted as not visited) is built instead.
//!
//! Either way, states are deduplicated by content (every drive's PMR and
//! media, with the promises in force) and each state is judged by the
//! one check of [`crate::check`] ([`check_state`](crate::check::check_state), the same as on one
//! drive): a fresh machine with every drive on its port again, the volume
//! assembled and mounted (HoraeFS's recovery over both drives:
//! `recover_stream`, a discard on each), fsck through the members, then
//! the promises in force and CrashMonkey's sanity check; with the verdict
//! and recovery reuse of [`crate::reuse`] over both drives.

use std::sync::Arc;

use mqfs::layout::BLOCK;
use nvme_ctrl::crash::{Constraint, DevicesChoice, DevicesExplorer, DevicesState, PointItems, StateChoice};
use nvme_ctrl::Image;

use crate::error::Error;
use crate::observe::CrashSpace;
use crate::record::Recording;

/// Encodes a choice for ids: `f<prefixes>.l<lines>.m<drive 0>~<drive 1>`.
pub fn encode_devices_choice(c: &DevicesChoice) -> String {
    let list = |v: &[usize]| v.iter().map(|n| n.to_string()).collect::<Vec<_>>().join("-");
    let m: Vec<String> = c.media.iter().map(|d| list(d)).collect();
    format!(
        "f{}.l{}.m{}",
        list(&c.pmr.in_flight_landed),
        list(&c.pmr.lines_landed),
        m.join("~")
    )
}

/// Decodes [`encode_devices_choice`] for a machine of `drives` drives.
pub fn decode_devices_choice(s: &str, drives: usize) -> Option<DevicesChoice> {
    let list = |p: &str| -> Option<Vec<usize>> {
        if p.is_empty() {
            return Some(Vec::new());
        }
        p.split('-').map(|x| x.parse().ok()).collect()
    };
    let mut parts = s.split('.');
    let f = list(parts.next()?.strip_prefix('f')?)?;
    let l = list(parts.next()?.strip_prefix('l')?)?;
    let m = parts.next()?.strip_prefix('m')?;
    if parts.next().is_some() {
        return None;
    }
    let media = m.split('~').map(list).collect::<Option<Vec<_>>>()?;
    if media.len() != drives {
        return None;
    }
    Some(DevicesChoice {
        pmr: pcie_sim::CrashChoice {
            in_flight_landed: f,
            lines_landed: l,
        },
        media,
    })
}

/// The explorer of a recorded run on several drives.
pub fn devices_explorer_of(rec: &Recording) -> Result<DevicesExplorer<'_>, Error> {
    let mut pmr = vec![rec.base_pmr.clone()];
    pmr.extend(rec.more_drives.iter().map(|(_, p)| p.clone()));
    DevicesExplorer::new(&rec.trace, rec.layout.clone(), pmr).map_err(Error::from)
}

impl CrashSpace for DevicesExplorer<'_> {
    type State = DevicesState;
    type Version = Vec<u64>;

    fn points(&self) -> usize {
        DevicesExplorer::points(self)
    }

    fn advance(&mut self, k: usize) -> Result<Vec<u64>, String> {
        DevicesExplorer::advance(self, k).map_err(|e| e.to_string())
    }

    /// `max_blocks` applies to each drive.
    fn choices(
        &mut self,
        k: usize,
        max_lines: u32,
        max_blocks: u32,
    ) -> Result<(Vec<StateChoice>, u64), String> {
        let (choices, left_out) = self
            .choices_at(k, max_lines, max_blocks)
            .map_err(|e| e.to_string())?;
        let flat = choices
            .iter()
            .map(|c| {
                self.flatten(c)
                    .ok_or_else(|| format!("point {k}: a choice of blocks not pending"))
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok((flat, left_out))
    }

    fn items_at(&mut self, k: usize) -> Result<PointItems, String> {
        DevicesExplorer::items_at(self, k).map_err(|e| e.to_string())
    }

    fn least(&self, c: &Constraint) -> Option<StateChoice> {
        DevicesExplorer::least(self, c)
    }

    fn block_in(&self, port: u8, lba: u64, class: &Constraint, bases: &[Arc<Image>], buf: &mut [u8; BLOCK]) {
        match bases.get(port as usize) {
            Some(base) => DevicesExplorer::block_in(self, port, lba, class, base, buf),
            None => buf.fill(0),
        }
    }

    fn build(&self, k: usize, choice: &StateChoice) -> Result<DevicesState, String> {
        let c = self
            .split(choice)
            .ok_or_else(|| format!("point {k}: a choice of blocks not pending"))?;
        DevicesExplorer::build(self, k, &c).map_err(|e| e.to_string())
    }

    fn content_hash(state: &mut DevicesState) -> u128 {
        state.content_hash()
    }

    type Choice = DevicesChoice;

    fn place(state: DevicesState) -> (usize, DevicesChoice) {
        (state.point, state.choice)
    }

    fn encode(choice: &DevicesChoice) -> String {
        encode_devices_choice(choice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_devices_choice_round_trips() {
        let c = DevicesChoice {
            pmr: pcie_sim::CrashChoice {
                in_flight_landed: vec![1, 0],
                lines_landed: vec![3],
            },
            media: vec![vec![], vec![0, 2]],
        };
        let s = encode_devices_choice(&c);
        assert_eq!(s, "f1-0.l3.m~0-2");
        assert_eq!(decode_devices_choice(&s, 2), Some(c));
        assert_eq!(decode_devices_choice(&s, 3), None);
        assert_eq!(decode_devices_choice("f.l.m1", 2), None);
    }
}
