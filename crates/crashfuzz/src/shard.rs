//! Spreading a campaign over machines: shards, and merging their reports.
//!
//! A campaign is a list of runs (every workload x mode x profile, then its
//! canaries, then the self-checks), numbered in that order. Shard `I` of
//! `N` does, from recording to checking, exactly the runs whose number is
//! `I` modulo `N`, so `N` shards do every run once and nothing twice. A
//! run is deterministic, so its report is the same whichever machine made
//! it: merging the shards' reports (`crashfuzz merge`) gives the report of
//! the unsharded campaign, timings aside.
//!
//! The shard index can come from a batch system: `--shard env/N` takes it
//! from `JOB_COMPLETION_INDEX` (a Kubernetes Indexed Job) or
//! `SLURM_ARRAY_TASK_ID` (a Slurm job array, less `SLURM_ARRAY_TASK_MIN`
//! if the array does not start at 0). `docs/cluster.md` has a manifest and
//! a script.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::pipeline::ExploreReport;

/// One shard of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// This shard (0-based).
    pub index: u64,
    /// Number of shards.
    pub count: u64,
}

impl Shard {
    /// Parses `I/N` (`I` may be `env`: see the module doc), reading the
    /// environment through `var`.
    pub fn parse_with(s: &str, var: impl Fn(&str) -> Option<String>) -> Result<Shard, Error> {
        let bad = |why: &str| Error::BadShard(s.into(), why.into());
        let (i, n) = s.split_once('/').ok_or_else(|| bad("expected I/N"))?;
        let count: u64 = n.trim().parse().map_err(|_| bad("N is not a number"))?;
        let index: u64 = if i.trim() == "env" {
            let (name, raw) = ["JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID"]
                .iter()
                .find_map(|k| var(k).map(|v| (*k, v)))
                .ok_or_else(|| bad("neither JOB_COMPLETION_INDEX nor SLURM_ARRAY_TASK_ID is set"))?;
            let id: u64 = raw
                .trim()
                .parse()
                .map_err(|_| bad(&format!("{name}={raw} is not a number")))?;
            let min: u64 = match (name, var("SLURM_ARRAY_TASK_MIN")) {
                ("SLURM_ARRAY_TASK_ID", Some(m)) => m
                    .trim()
                    .parse()
                    .map_err(|_| bad("SLURM_ARRAY_TASK_MIN is not a number"))?,
                _ => 0,
            };
            id.checked_sub(min)
                .ok_or_else(|| bad("task id below SLURM_ARRAY_TASK_MIN"))?
        } else {
            i.trim().parse().map_err(|_| bad("I is not a number"))?
        };
        if count == 0 || index >= count {
            return Err(bad("expected 0 <= I < N"));
        }
        Ok(Shard { index, count })
    }

    /// Parses `I/N` with the process's environment.
    pub fn parse(s: &str) -> Result<Shard, Error> {
        Shard::parse_with(s, |k| std::env::var(k).ok())
    }

    /// True if this shard does run number `run`.
    pub fn takes(&self, run: usize) -> bool {
        run as u64 % self.count == self.index
    }
}

/// A self-check's outcome, as a report file keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SelfCheckReport {
    /// Its position in [`crate::SELF_CHECKS`].
    pub check: usize,
    /// The run with the mechanism off.
    pub report: ExploreReport,
    /// The first violation that counts, if any.
    pub caught: Option<usize>,
}

/// What `--json` writes: the runs of a campaign (or of one shard), in
/// campaign order, each with its number ([`ExploreReport::run`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReportFile {
    /// The shard that made the file (`None`: the whole campaign, or a
    /// merge of every shard).
    pub shard: Option<Shard>,
    /// `explore` (every violation fails) rather than the default run.
    pub strict: bool,
    /// The campaign's self-checks ran (the default run).
    pub self_checked: bool,
    /// Reports of the runs.
    pub runs: Vec<ExploreReport>,
    /// Self-checks (the default run).
    pub self_checks: Vec<SelfCheckReport>,
}

impl ReportFile {
    /// Reads a report file.
    pub fn load(path: &Path) -> Result<ReportFile, Error> {
        let io = |source| Error::Io {
            path: path.display().to_string(),
            source,
        };
        let text = std::fs::read_to_string(path).map_err(io)?;
        serde_json::from_str(&text).map_err(|e| Error::BadReport(path.display().to_string(), e.to_string()))
    }

    /// Writes it as JSON.
    pub fn save(&self, path: &Path) -> Result<(), Error> {
        let text = serde_json::to_string_pretty(self)?;
        std::fs::write(path, text).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })
    }
}

/// Merges the files of every shard of one campaign into the campaign's
/// report: each shard exactly once, all of one campaign (same count, same
/// kind of run), runs and self-checks back in campaign order.
pub fn merge(files: Vec<(String, ReportFile)>) -> Result<ReportFile, Error> {
    let bad = |why: String| Error::BadMerge(why);
    let Some((first_name, first)) = files.first() else {
        return Err(bad("no report files given".into()));
    };
    let count = first
        .shard
        .ok_or_else(|| bad(format!("{first_name} is not a shard's report")))?
        .count;
    let mut seen = vec![None::<&str>; count as usize];
    for (name, f) in &files {
        let s = f
            .shard
            .ok_or_else(|| bad(format!("{name} is not a shard's report")))?;
        if s.count != count {
            return Err(bad(format!(
                "{name} is shard {}/{}, {first_name} is of {count}",
                s.index, s.count
            )));
        }
        if (f.strict, f.self_checked) != (first.strict, first.self_checked) {
            return Err(bad(format!(
                "{name} and {first_name} come from different kinds of run"
            )));
        }
        if let Some(other) = seen[s.index as usize].replace(name) {
            return Err(bad(format!(
                "shard {}/{count} given twice: {other} and {name}",
                s.index
            )));
        }
    }
    if let Some(i) = seen.iter().position(Option::is_none) {
        return Err(bad(format!("shard {i}/{count} is missing")));
    }
    let mut out = ReportFile {
        shard: None,
        strict: first.strict,
        self_checked: first.self_checked,
        ..ReportFile::default()
    };
    for (_, f) in files {
        out.runs.extend(f.runs);
        out.self_checks.extend(f.self_checks);
    }
    out.runs.sort_by_key(|r| r.run);
    out.self_checks.sort_by_key(|c| c.check);
    if let Some(w) = out.runs.windows(2).find(|w| w[0].run == w[1].run) {
        return Err(bad(format!("run {} is in two shards' reports", w[0].run)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
    }

    #[test]
    fn a_shard_comes_from_the_command_line_or_the_batch_system() {
        let none = env(&[]);
        assert_eq!(
            Shard::parse_with("1/4", &none).expect("shard"),
            Shard { index: 1, count: 4 }
        );
        for s in ["4/4", "1/0", "x/2", "1", "env/2"] {
            assert!(
                matches!(Shard::parse_with(s, &none), Err(Error::BadShard(..))),
                "{s}"
            );
        }
        let k8s = env(&[("JOB_COMPLETION_INDEX", "3")]);
        assert_eq!(Shard::parse_with("env/8", &k8s).expect("k8s").index, 3);
        let slurm = env(&[("SLURM_ARRAY_TASK_ID", "5"), ("SLURM_ARRAY_TASK_MIN", "1")]);
        assert_eq!(Shard::parse_with("env/8", &slurm).expect("slurm").index, 4);
        let past = env(&[("SLURM_ARRAY_TASK_ID", "9")]);
        assert!(Shard::parse_with("env/8", &past).is_err(), "task 9 of 8");
    }

    #[test]
    fn shards_take_every_run_once() {
        let shards: Vec<Shard> = (0..3).map(|index| Shard { index, count: 3 }).collect();
        for run in 0..20 {
            assert_eq!(shards.iter().filter(|s| s.takes(run)).count(), 1);
        }
    }

    fn file(index: u64, count: u64, runs: &[usize]) -> (String, ReportFile) {
        (
            format!("s{index}"),
            ReportFile {
                shard: Some(Shard { index, count }),
                runs: runs
                    .iter()
                    .map(|&run| ExploreReport {
                        run,
                        ..ExploreReport::default()
                    })
                    .collect(),
                ..ReportFile::default()
            },
        )
    }

    #[test]
    fn a_merge_needs_every_shard_once() {
        let m = merge(vec![file(1, 2, &[1, 3]), file(0, 2, &[0, 2])]).expect("merge");
        assert_eq!(m.runs.iter().map(|r| r.run).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(m.shard, None);
        for bad in [
            vec![file(0, 2, &[0])],
            vec![file(0, 2, &[0]), file(0, 2, &[2])],
            vec![file(0, 2, &[0]), file(1, 3, &[1])],
            vec![],
        ] {
            assert!(matches!(merge(bad), Err(Error::BadMerge(_))));
        }
    }
}
