//! `crashfuzz`: the command line. With no arguments it runs the default
//! campaign (the Table 4 workloads, the cross-queue workload and a random
//! multi-threaded one, under every safe mode and Ext4-NJ; the PM modes
//! `wofs`, `soupfs` and `pmfs` on Table 4, ACE seq-1 and a one-thread
//! random workload under ADR and eADR) and prints a summary. Exit status: 0 when every safe mode passed (and Ext4-NJ was
//! caught at least once), 1 when a check failed, 2 on bad input.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use crashfuzz::builtin::{names, resolve};
use crashfuzz::explore::{explore_saved, DEFAULT_DRIVE_BOUND, DRIVE_NODE_BUDGET};
use crashfuzz::pm::{self, PmCampaign, PmEnumeration, PmFault, PmMode, PmOptions};
use crashfuzz::record::Fault;
use crashfuzz::replay::{replay, replay_saved};
use crashfuzz::shard::{merge, ReportFile, SelfCheckReport, Shard};
use crashfuzz::workload::Outcome;
use crashfuzz::{
    timeline, Campaign, DriveEnumeration, Error, ExploreOptions, ExploreReport, ModeName, RunConfig,
    SavedConfig, SavedRun, Workload, SELF_CHECKS,
};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser, Debug)]
#[command(
    name = "crashfuzz",
    version,
    about = "Explore every crash state of a workload on the simulated machine"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Explore workloads (the default with no subcommand).
    Explore(RunArgs),
    /// Rebuild one crash state from its id and show its recovery.
    Replay {
        /// The id a violation was reported with (with --trace, also just
        /// POINT:CHOICE).
        id: String,
        /// Bus transactions to show on each side of the crash point.
        #[arg(long, default_value_t = 12)]
        context: usize,
        /// The saved run the state belongs to (ids of saved runs also name
        /// it themselves, as `@FILE:...`).
        #[arg(long)]
        trace: Option<PathBuf>,
    },
    /// Record one workload and save the run to a file (for `explore
    /// --trace`, `replay` and `trace --trace`).
    Save {
        #[command(flatten)]
        one: OneRun,
        /// The file to write.
        #[arg(long, short)]
        output: PathBuf,
    },
    /// Export a run's timeline as Chrome trace event JSON (open it in
    /// Perfetto or chrome://tracing): a built-in workload recorded now, or
    /// a saved run.
    Trace {
        #[command(flatten)]
        one: OneRun,
        /// A saved run to export instead of recording a workload.
        #[arg(long, conflicts_with = "workload")]
        trace: Option<PathBuf>,
        /// The JSON file to write (default: standard output).
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
    /// Record one workload once and show when each operation ran and
    /// what each persistence point promised (for shaping races).
    Show(OneRun),
    /// Merge the --json reports of every shard of one campaign (`--shard
    /// I/N`) into the campaign's report and verdict.
    Merge {
        /// The shards' report files, one per shard, in any order.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Write the merged report as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Violations to list per run (all are counted).
        #[arg(long, default_value_t = 5)]
        show: usize,
    },
    /// List the built-in workloads and modes.
    List,
}

/// One run of one workload.
#[derive(Args, Debug, Clone)]
struct OneRun {
    /// Workload (built-in name or file; it must name one workload).
    #[arg(long, short)]
    workload: Option<String>,
    /// Mode.
    #[arg(long, short, default_value = "mq")]
    mode: String,
    /// Drive profile.
    #[arg(long, short, default_value = "flash-vwc")]
    profile: String,
    /// Simulation seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Switch off one ordering mechanism.
    #[arg(long)]
    fault: Option<String>,
}

#[derive(Args, Debug, Clone)]
struct RunArgs {
    /// Explore saved runs (files written by `crashfuzz save` or a
    /// recorder) instead of workloads; comma-separated. Workload, mode,
    /// profile, seed and fault come from each file.
    #[arg(long, value_delimiter = ',', conflicts_with_all = ["workload", "mode", "profile", "seed", "fault"])]
    trace: Vec<PathBuf>,
    /// Workloads: built-in names or workload files, comma-separated
    /// (`default`: Table 4, ACE seq-1, the cross-queue, random, stress,
    /// I/O-path, xattr, extent-split, directory-index and canary workloads;
    /// `all`: those and ACE seq-2).
    #[arg(long, short, default_value = "default", value_delimiter = ',')]
    workload: Vec<String>,
    /// Modes, comma-separated (none, classic, classic-cc (JBD2 committing
    /// through ccNVMe), horae, mq, mq-atomic, mq-literal, horae2 (HoraeFS
    /// striped over two drives), classic2 (Ext4 on md RAID 0 over two
    /// drives), classic-dj, horae-dj (Ext4, HoraeFS with data=journal); the PM modes
    /// wofs, soupfs, pmfs (the file systems on persistent memory); or
    /// `default`, which has the PM modes too).
    #[arg(long, short, default_value = "default", value_delimiter = ',')]
    mode: Vec<String>,
    /// Drive profiles, comma-separated; for the PM modes, the persistence
    /// domain: pm-adr, pm-eadr (both when none is given).
    #[arg(long, short, default_value = "optane-905p,flash-vwc", value_delimiter = ',')]
    profile: Vec<String>,
    /// Simulation seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// PM modes with --bounded or --brute-force: pending stores and lines
    /// enumerated per crash point (2^N subsets, sampled past it; default
    /// 4, and 1 for the ACE workloads, whose large writes leave hundreds
    /// pending). By default PM states are judged by what checks read, and
    /// it is refused.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=16))]
    pm_bound: Option<u32>,
    /// With --bounded or --brute-force: write-combining lines enumerated
    /// per crash point (2^N subsets; default 8). Refused without them.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=16))]
    bound_lines: Option<u32>,
    /// With --bounded or --brute-force: volatile-cache blocks enumerated
    /// per crash point (2^N subsets; default 8). Refused without them.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=16))]
    bound_blocks: Option<u32>,
    /// Worker threads (default: all cores).
    #[arg(long, short)]
    jobs: Option<usize>,
    /// Do only the runs of shard I of N (`I/N`; `env/N` takes I from
    /// JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID), for spreading a
    /// campaign over machines; `crashfuzz merge` combines the shards'
    /// --json reports.
    #[arg(long)]
    shard: Option<String>,
    /// Switch off one ordering mechanism (no-flush-read, no-fence, no-entry-fence,
    /// no-commit-fua, out-of-order, no-revoke, no-data-flush, horae-early-ack,
    /// horae-no-redirect-commit, horae-no-joint-flush, horae-early-dr,
    /// replay-unfinished; for a
    /// PM mode, MODE-SWITCH: wofs-skip-clwb, pmfs-skip-commit, ...,
    /// `crashfuzz list` names them all) to see crashfuzz catch it.
    #[arg(long)]
    fault: Option<String>,
    /// With --bounded or --brute-force: the bound for both write-combining
    /// lines and cache blocks (sets --bound-lines and --bound-blocks).
    /// Refused without them.
    #[arg(long, value_parser = clap::value_parser!(u32).range(0..=16))]
    bound: Option<u32>,
    /// Most checks per crash point when states are enumerated by what the
    /// checks read (the default): past it, each class of states not split
    /// yet counts as (at least) one state not visited (default 4096; for
    /// the PM modes, whose checks are cheaper, 32768). Refused with
    /// --bounded or --brute-force.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=1 << 24))]
    budget: Option<u64>,
    /// Skip CrashMonkey's sanity check (faster).
    #[arg(long)]
    no_sanity: bool,
    /// Judge every distinct state in full: every state up to the bounds
    /// built and checked, no verdict taken from a state that read or
    /// recovered to the same content, no recovery reused (same verdicts,
    /// much slower; for checking those reductions).
    #[arg(long)]
    brute_force: bool,
    /// Enumerate every state up to the bounds (--bound-lines,
    /// --bound-blocks; for the PM modes --pm-bound; sampled past them)
    /// instead of by what checks read.
    #[arg(long)]
    bounded: bool,
    /// Write the reports as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
    /// Violations to list per run (all are counted).
    #[arg(long, default_value_t = 5)]
    show: usize,
}

/// The default campaign's workloads (under a minute on two cores).
/// `stress_scattered` is there for the cached drive: 24 scattered
/// overwrites pending together until one Flush; `extent_split` and
/// `dir_index` split extent-tree and directory-index blocks across a
/// crash; `barriers` runs HoRAE's fbarrier and fdatabarrier.
const DEFAULT_WORKLOADS: [&str; 10] = [
    "table4",
    "ace1",
    "m9_cross_queue",
    "random-1-3x6",
    "stress_scattered",
    "barriers",
    "io",
    "xattrs",
    "extent_split",
    "dir_index",
];

/// The default campaign's canaries (workloads shaped so that one ordering
/// mechanism switched off is caught, see `tests/canaries.rs`). They run on
/// the first profile given only (default: `optane-905p`, where each is
/// caught): on a drive with a volatile write cache the 1 MiB write of
/// `canary_out_of_order` alone has two million crash states. So does
/// `stress_big_tx` (a transaction larger than the P-SQ), which joins them
/// here for that reason. Named explicitly (`-w canary_out_of_order`), they
/// run on every profile.
const DEFAULT_CANARIES: [&str; 3] = ["canary_out_of_order", "canary_block_reuse", "stress_big_tx"];

/// `all` adds ACE's seq-2 space (2304 workloads; about ten minutes per
/// mode and drive on two cores).
const MORE_WORKLOADS: [&str; 1] = ["ace2"];

/// The drive options `a` sets; a bound given without `--bounded` or
/// `--brute-force`, or a budget given with them, is refused (it would not
/// apply).
fn explore_options(a: &RunArgs) -> Result<ExploreOptions, Error> {
    let bounded = a.bounded || a.brute_force;
    let enumeration = if bounded {
        if a.budget.is_some() {
            let flag = if a.brute_force {
                "--brute-force"
            } else {
                "--bounded"
            };
            return Err(Error::BudgetWhenBounded(flag.into()));
        }
        DriveEnumeration::Bounded {
            lines: a.bound.or(a.bound_lines).unwrap_or(DEFAULT_DRIVE_BOUND),
            blocks: a.bound.or(a.bound_blocks).unwrap_or(DEFAULT_DRIVE_BOUND),
        }
    } else {
        let given = [
            (a.bound_lines.is_some(), "--bound-lines"),
            (a.bound_blocks.is_some(), "--bound-blocks"),
            (a.bound.is_some(), "--bound"),
            (a.pm_bound.is_some(), "--pm-bound"),
        ];
        if let Some((_, flag)) = given.iter().find(|(on, _)| *on) {
            return Err(Error::BoundWithoutBounded((*flag).into()));
        }
        DriveEnumeration::ReadSets {
            budget: a.budget.map_or(DRIVE_NODE_BUDGET, |b| b as usize),
        }
    };
    let mut opts = ExploreOptions {
        enumeration,
        sanity: !a.no_sanity,
        reuse_verdicts: !a.brute_force,
        reuse_recovery: !a.brute_force,
        ..ExploreOptions::default()
    };
    if let Some(j) = a.jobs {
        opts.jobs = j.max(1);
    }
    Ok(opts)
}

/// The PM part of a campaign: its runs, and the workloads it left out
/// (refused by [`pm::translate`], under the `default` modes only; named
/// PM modes refuse the whole campaign).
struct PmPart {
    campaign: PmCampaign,
    refused: Vec<String>,
}

fn campaigns(a: &RunArgs) -> Result<(Vec<Campaign>, ExploreOptions, Option<PmPart>), Error> {
    let mut workloads: Vec<Workload> = Vec::new();
    let mut canaries: Vec<Workload> = Vec::new();
    let mut pm_workloads: Vec<Workload> = Vec::new();
    for name in &a.workload {
        if name == "default" || name == "all" {
            for d in pm::DEFAULT_PM_WORKLOADS {
                pm_workloads.extend(resolve(d)?);
            }
            for d in DEFAULT_WORKLOADS {
                workloads.extend(resolve(d)?);
            }
            for d in DEFAULT_CANARIES {
                canaries.extend(resolve(d)?);
            }
            if name == "all" {
                for d in MORE_WORKLOADS {
                    workloads.extend(resolve(d)?);
                }
            }
        } else {
            let w = resolve(name)?;
            pm_workloads.extend(w.iter().cloned());
            workloads.extend(w);
        }
    }
    let mut modes = Vec::new();
    let mut pm_modes = Vec::new();
    let mut pm_named = false;
    for m in &a.mode {
        if m == "default" {
            modes.extend(ModeName::DEFAULT);
            pm_modes.extend(PmMode::ALL);
        } else if m == "all" {
            modes.extend(ModeName::ALL);
            pm_modes.extend(PmMode::ALL);
        } else if let Some(p) = PmMode::from_name(m) {
            pm_modes.push(p);
            pm_named = true;
        } else {
            modes.push(ModeName::parse(m)?);
        }
    }
    let (pm_profiles, drive_profiles): (Vec<&String>, Vec<&String>) =
        a.profile.iter().partition(|p| pm::is_pm_profile(p));
    let profiles = drive_profiles
        .into_iter()
        .map(|p| RunConfig::profile_by_name(p))
        .collect::<Result<Vec<_>, _>>()?;
    let mut domains: Vec<_> = pm_profiles
        .into_iter()
        .filter_map(|p| pm::domain_by_name(p))
        .collect();
    if domains.is_empty() {
        domains = pm::DEFAULT_PM_PROFILES
            .iter()
            .filter_map(|p| pm::domain_by_name(p))
            .collect();
    }
    let opts = explore_options(a)?;
    let pm_fault = a.fault.as_deref().and_then(PmFault::parse);
    let fault = match (&a.fault, pm_fault) {
        (Some(f), None) => Some(Fault::parse(f)?),
        _ => None,
    };
    if let Some(f) = fault {
        f.check_modes(&modes)?;
        if let Some(m) = pm_modes.first() {
            return Err(Error::FaultNotApplicable {
                fault: f.name().into(),
                mode: m.name().into(),
            });
        }
    }
    if let Some(f) = pm_fault {
        if let Some(m) = modes.first() {
            return Err(Error::FaultNotApplicable {
                fault: f.name(),
                mode: m.name().into(),
            });
        }
    }
    let pm_part = if pm_modes.is_empty() {
        None
    } else {
        let mut refused = Vec::new();
        let mut kept = Vec::new();
        for w in pm_workloads {
            match pm::translate(&w) {
                Ok(_) => kept.push(w),
                Err(e) if !pm_named => refused.push(e.to_string()),
                Err(e) => return Err(e),
            }
        }
        let campaign = PmCampaign {
            workloads: kept,
            modes: pm_modes,
            domains,
            seed: a.seed,
            fault: pm_fault,
        };
        campaign.validate()?;
        Some(PmPart { campaign, refused })
    };
    let mut out = vec![Campaign {
        workloads,
        modes: modes.clone(),
        profiles: profiles.clone(),
        seed: a.seed,
        fault,
    }];
    if !canaries.is_empty() {
        out.push(Campaign {
            workloads: canaries,
            modes,
            profiles: profiles.into_iter().take(1).collect(),
            seed: a.seed,
            fault,
        });
    }
    Ok((out, opts, pm_part))
}

/// The PM options `a` sets.
fn pm_options(a: &RunArgs, opts: &ExploreOptions) -> PmOptions {
    let enumeration = if opts.enumeration.by_read_sets() {
        PmEnumeration::ReadSets {
            budget: a.budget.map_or(pm::PM_NODE_BUDGET, |b| b as usize),
        }
    } else {
        PmEnumeration::Bounded { bound: a.pm_bound }
    };
    PmOptions {
        enumeration,
        jobs: opts.jobs,
        max_violations: opts.max_violations,
    }
}

/// The self-checks of the default campaign: the block side's
/// ([`SELF_CHECKS`]), then one per PM fault switch; `k` numbers them in
/// that order.
fn self_check_count() -> usize {
    SELF_CHECKS.len() + pm::pm_self_checks().len()
}

/// Runs self-check `k`.
fn run_self_check(
    k: usize,
    opts: &ExploreOptions,
    pm_opts: &PmOptions,
) -> Result<(ExploreReport, Option<usize>), Error> {
    match SELF_CHECKS.get(k) {
        Some(sc) => sc.run(opts),
        None => pm::pm_self_checks()
            .get(k - SELF_CHECKS.len())
            .ok_or_else(|| Error::Failed(format!("no self-check {k}")))?
            .run(pm_opts),
    }
}

/// What self-check `k` switches off, and where: `FAULT off on WORKLOAD
/// MODE PROFILE`.
fn self_check_label(k: usize) -> Option<String> {
    match SELF_CHECKS.get(k) {
        Some(sc) => Some(format!(
            "{} off on {} {} {}",
            sc.fault.name(),
            sc.workload,
            sc.mode.name(),
            sc.profile
        )),
        None => pm::pm_self_checks().get(k - SELF_CHECKS.len()).map(|c| {
            let run = c.run_config();
            // By read sets by default; its `reductions` say which applied.
            format!(
                "{} off on {} {} {}",
                c.fault.name(),
                c.workload,
                run.mode.name(),
                pm::domain_name(run.domain),
            )
        }),
    }
}

/// True for the modes that are expected to lose promises.
fn unsafe_mode(mode: &str) -> bool {
    mode == ModeName::None.name() || mode == ModeName::MqLiteral.name() || mode.contains('+')
}

/// One progress bar for a whole campaign of `runs` runs (self-checks
/// included), with states checked per second and an estimate of the time
/// left; drawn on standard error only when it is a terminal (indicatif
/// draws nothing when it is piped).
fn campaign_bar(runs: usize) -> ProgressBar {
    let bar = ProgressBar::new(runs as u64);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} runs, {elapsed} elapsed, about {eta} left, {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    bar
}

/// `strict`: any violation fails the run (`explore`); otherwise the
/// violations of the modes expected to be unsafe do not (the default run).
fn run(a: &RunArgs, strict: bool) -> Result<ExitCode, Error> {
    if !a.trace.is_empty() {
        return run_saved(a);
    }
    let (cs, opts, pm_part) = campaigns(a)?;
    let pm_opts = pm_options(a, &opts);
    let shard = a.shard.as_deref().map(Shard::parse).transpose()?;
    let block_runs: usize = cs.iter().map(Campaign::runs).sum();
    let total = block_runs + pm_part.as_ref().map_or(0, |p| p.campaign.runs());
    // The default campaign also checks the explorer itself: each ordering
    // mechanism switched off must break a promise.
    let default_set = a.workload.iter().any(|w| w == "default" || w == "all");
    let self_checked = !strict && default_set && a.fault.is_none();
    let mine = |run: usize| shard.is_none_or(|s| s.takes(run));
    let checks_mine: Vec<usize> = (0..self_check_count())
        .filter(|k| self_checked && mine(total + k))
        .collect();
    let bar = campaign_bar((0..total).filter(|&i| mine(i)).count() + checks_mine.len());
    let states = AtomicU64::new(0);
    let t0 = Instant::now();
    let progress = |r: &ExploreReport| {
        let n = states.fetch_add(r.states_checked, Ordering::Relaxed) + r.states_checked;
        bar.set_message(format!(
            "{n} states ({:.0}/s); last {} {} {}",
            n as f64 / t0.elapsed().as_secs_f64().max(1e-9),
            r.workload,
            r.mode,
            r.profile
        ));
        bar.inc(1);
    };
    let mut reports = Vec::new();
    let mut first = 0;
    for c in &cs {
        reports.extend(c.run(&opts, first, shard, &progress)?);
        first += c.runs();
    }
    if let Some(p) = &pm_part {
        reports.extend(p.campaign.run(&pm_opts, first, shard, &progress)?);
    }
    // The self-checks are independent runs: on the workers, as a
    // campaign's runs (a PM run checks on one thread), reported in order.
    let self_checks = crashfuzz::campaign::on_workers(
        checks_mine.len(),
        opts.jobs,
        |i| {
            let k = checks_mine[i];
            let (report, caught) = run_self_check(k, &opts, &pm_opts)?;
            Ok(SelfCheckReport {
                check: k,
                report,
                caught,
            })
        },
        |c| progress(&c.report),
    )?;
    bar.finish_and_clear();
    if let Some(p) = pm_part.as_ref().filter(|p| !p.refused.is_empty()) {
        println!(
            "PM modes: {} workload(s) left out (the default modes run the PM modes only on what they can run):",
            p.refused.len()
        );
        for r in p.refused.iter().take(a.show.max(1)) {
            println!("  {r}");
        }
    }
    let file = ReportFile {
        shard,
        strict,
        self_checked,
        runs: reports,
        self_checks,
    };
    finish(&file, a.json.as_deref(), a.show)
}

/// Writes `file` as JSON to `json` if given, then prints the summary and
/// decides the exit status.
fn finish(file: &ReportFile, json: Option<&Path>, show: usize) -> Result<ExitCode, Error> {
    if let Some(path) = json {
        file.save(path)?;
    }
    Ok(summarize(file, show))
}

/// `merge FILE...`: the shards' reports as one campaign's.
fn merge_cmd(files: &[PathBuf], json: Option<&Path>, show: usize) -> Result<ExitCode, Error> {
    let loaded = files
        .iter()
        .map(|p| Ok((p.display().to_string(), ReportFile::load(p)?)))
        .collect::<Result<Vec<_>, Error>>()?;
    let file = merge(loaded)?;
    finish(&file, json, show)
}

/// `explore --trace FILE,...`: every violation fails the run.
fn run_saved(a: &RunArgs) -> Result<ExitCode, Error> {
    let opts = explore_options(a)?;
    let shard = a.shard.as_deref().map(Shard::parse).transpose()?;
    let mut runs = Vec::new();
    for (run, path) in a.trace.iter().enumerate() {
        if shard.is_none_or(|s| s.takes(run)) {
            runs.push(ExploreReport {
                run,
                ..explore_saved(path, &opts)?
            });
        }
    }
    let file = ReportFile {
        shard,
        strict: true,
        runs,
        ..ReportFile::default()
    };
    finish(&file, a.json.as_deref(), a.show)
}

/// Records the one workload `one` names.
fn record_one(one: &OneRun) -> Result<(Workload, RunConfig, crashfuzz::Recording), Error> {
    let name = one.workload.as_deref().ok_or_else(|| {
        Error::Failed("no workload given: -w WORKLOAD (trace also takes --trace FILE)".into())
    })?;
    let w = match resolve(name)?.as_slice() {
        [w] => w.clone(),
        many => {
            return Err(Error::Failed(format!(
                "`{name}` names {} workloads; give one",
                many.len()
            )))
        }
    };
    let cfg = run_config(one)?;
    let rec = crashfuzz::record(&w, &cfg)?;
    Ok((w, cfg, rec))
}

/// The configuration `one` names (mode, profile, seed, fault).
fn run_config(one: &OneRun) -> Result<RunConfig, Error> {
    if PmMode::from_name(&one.mode).is_some() {
        return Err(Error::Failed(format!(
            "PM mode `{}` runs under `explore` and `replay` only (save, trace and show are for the drive modes)",
            one.mode
        )));
    }
    let mode = ModeName::parse(&one.mode)?;
    let fault = one.fault.as_deref().map(Fault::parse).transpose()?;
    if let Some(f) = fault {
        f.check_modes(&[mode])?;
    }
    Ok(RunConfig {
        fault,
        ..RunConfig::new(mode, RunConfig::profile_by_name(&one.profile)?, one.seed)
    })
}

fn save_cmd(one: &OneRun, output: &Path) -> Result<ExitCode, Error> {
    let (_, cfg, rec) = record_one(one)?;
    let saved = SavedRun::from_recording(&rec, &cfg)?;
    let t = Instant::now();
    let bytes = saved.save(output)?;
    println!(
        "{}: {} {} {}: {} trace entries, {} promises, {bytes} bytes ({:.2} s to write)",
        output.display(),
        rec.workload,
        saved.mode_label(),
        cfg.profile.name,
        rec.trace.entries().len(),
        rec.promises.len(),
        t.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

fn trace_cmd(one: &OneRun, trace: Option<&Path>, output: Option<&Path>) -> Result<ExitCode, Error> {
    let (rec, cfg) = match trace {
        Some(path) => {
            let s = SavedRun::load(path)?;
            (s.recording, s.config)
        }
        None => {
            let (w, cfg, rec) = record_one(one)?;
            (rec, SavedConfig::of_run(&w, &cfg))
        }
    };
    let t = Instant::now();
    let stats = match output {
        Some(path) => timeline::export_file(&rec, &cfg, path)?,
        None => timeline::export(&rec, &cfg, std::io::stdout().lock()).map_err(|source| Error::Io {
            path: "standard output".into(),
            source,
        })?,
    };
    eprintln!(
        "{}: {} events ({} spans) on {} threads, {:.1} us of simulated time, written in {:.2} s",
        output.map_or("standard output".into(), |p| p.display().to_string()),
        stats.events,
        stats.spans,
        stats.threads,
        stats.run_end_ps as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}

/// Prints the table of runs and the self-checks, and decides the exit
/// status (of a shard: only what its own runs decide).
fn summarize(file: &ReportFile, show: usize) -> ExitCode {
    let (reports, strict) = (&file.runs, file.strict);
    let checks: Vec<(String, &ExploreReport, Option<usize>)> = file
        .self_checks
        .iter()
        .filter_map(|c| self_check_label(c.check).map(|l| (l, &c.report, c.caught)))
        .collect();
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{:<18} {:<10} {:<14} {:>7} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6} {:>9}  verdict",
        "workload",
        "mode",
        "profile",
        "points",
        "states",
        "checked",
        "dedup",
        "by-reads",
        "unvisited",
        "viol",
        "states/s"
    );
    let mut bad = 0usize;
    let mut unexpected: Vec<String> = Vec::new();
    let mut refused = 0usize;
    let (mut alike, mut reused) = (0u64, 0u64);
    let (mut blocks_judged, mut witnesses) = (0u64, 0u64);
    let mut caught = 0usize;
    let mut none_runs = 0usize;
    let mut narrowed = 0usize;
    let (mut states, mut secs) = (0u64, 0f64);
    let (mut judged, mut unvisited, mut cut) = (0u64, 0u64, 0usize);
    for r in reports {
        judged = judged.saturating_add(r.states_total.saturating_sub(r.states_not_visited));
        unvisited = unvisited.saturating_add(r.states_not_visited);
        cut += usize::from(r.states_not_visited > 0);
        let unsafe_m = unsafe_mode(&r.mode);
        let distinct = r
            .violations
            .iter()
            .map(|v| &v.id)
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        let outcome = if distinct > 0 {
            Outcome::Caught
        } else {
            Outcome::Pass
        };
        let verdict = match (distinct, unsafe_m, r.expected) {
            (_, _, Some(e)) if e != outcome => "UNEXPECTED",
            (_, _, Some(Outcome::Caught)) => "caught (expected)",
            (0, false, _) => "ok",
            (0, true, _) => "ok (unsafe mode not caught here)",
            (_, true, _) => "caught (expected)",
            (_, false, _) => "VIOLATION",
        };
        if r.mode == ModeName::None.name() {
            none_runs += 1;
            caught += usize::from(distinct > 0);
        }
        match r.expected {
            Some(e) if e != outcome => {
                bad += 1;
                unexpected.push(format!(
                    "{} {} {}: expected {}, was {}",
                    r.workload,
                    r.mode,
                    r.profile,
                    e.name(),
                    outcome.name()
                ));
            }
            Some(_) => {}
            None if distinct > 0 && (strict || !unsafe_m) => bad += 1,
            None => {}
        }
        refused += r.refused.len();
        states += r.states_checked;
        alike += r.states_recovered_alike;
        blocks_judged += r.blocks_judged;
        witnesses += r.witnesses;
        reused += r.states_recovery_reused;
        secs += r.wall_seconds;
        let _ = writeln!(
            out,
            "{:<18} {:<10} {:<14} {:>7} {:>8} {:>8} {:>8} {:>8} {:>9} {:>6} {:>9.0}  {verdict}",
            r.workload,
            r.mode,
            r.profile,
            r.crash_points,
            count(r.states_total),
            count(r.states_checked),
            count(r.states_deduplicated),
            count(r.states_by_read_set),
            count(r.states_not_visited),
            distinct,
            r.states_per_second
        );
        if !r.refused.is_empty() {
            // A refused operation changed nothing and promised nothing:
            // never a silent pass.
            let mut listed: Vec<&str> = r.refused.iter().take(show.max(1)).map(String::as_str).collect();
            if r.refused.len() > listed.len() {
                listed.push("...");
            }
            let _ = writeln!(
                out,
                "    {} operation(s) refused: {}",
                r.refused.len(),
                listed.join("; ")
            );
        }
        for n in &r.narrowed {
            let _ = writeln!(out, "    narrower envelope: {n}");
        }
        narrowed += usize::from(!r.narrowed.is_empty());
        if (!unsafe_m || reports.len() == 1) && r.expected != Some(Outcome::Caught) {
            for v in r.violations.iter().take(show) {
                let _ = writeln!(out, "    {}: {}\n      {}", v.check, v.detail, v.replay);
            }
        }
    }
    let _ = writeln!(
        out,
        "\n{} runs, {} distinct states checked in {:.1} s of run time ({:.0} states/s per run-thread)",
        reports.len(),
        states,
        secs,
        states as f64 / secs.max(1e-9)
    );
    let _ = writeln!(
        out,
        "{alike} of them recovered to an image already judged; {reused} of those without booting (a recovery that read the same content was reused)"
    );
    let _ = writeln!(
        out,
        "{blocks_judged} other class(es) of data blocks judged apart from their checks; {witnesses} witness state(s) checked for those rejected"
    );
    let _ = writeln!(
        out,
        "{} crash states judged ({} per second of run time); {} left unvisited, in {cut} run(s)",
        count(judged),
        count((judged as f64 / secs.max(1e-9)) as u64),
        count(unvisited),
    );
    let pm_runs = |r: &str| {
        reports
            .iter()
            .filter(|x| x.reductions.iter().any(|d| d.starts_with(r)))
            .count()
    };
    let (by_reads, by_bound) = (pm_runs("pm-read-set"), pm_runs("pm-bound-"));
    if by_reads + by_bound > 0 {
        let _ = writeln!(
            out,
            "PM runs checked: {by_reads} by what checks read, {by_bound} sampled past a bound (each run's reductions in --json)"
        );
    }
    if narrowed > 0 {
        let _ = writeln!(
            out,
            "{narrowed} run(s) explored fewer crash states than the envelope allows (said under their runs): a PASS covers only those"
        );
    }
    if refused > 0 {
        let _ = writeln!(
            out,
            "{refused} operation(s) refused by the file system in all (listed under their runs)"
        );
    }
    for u in &unexpected {
        let _ = writeln!(out, "FAIL: {u}");
    }
    if bad > unexpected.len() {
        let what = if strict {
            "found a violation"
        } else {
            "of a crash-consistent mode lost a promise"
        };
        let _ = writeln!(out, "FAIL: {} run(s) {what}", bad - unexpected.len());
    }
    if bad > 0 {
        return ExitCode::from(1);
    }
    let mut missed = 0usize;
    for (label, r, found) in checks {
        let what = match found {
            Some(i) => {
                let v = &r.violations[i];
                format!("caught: {} ({})", v.check, v.id)
            }
            None => {
                missed += 1;
                format!("NOT CAUGHT by a broken promise in {} states", r.states_checked)
            }
        };
        let _ = writeln!(out, "self-check: {label}: {what}");
    }
    if missed > 0 {
        let _ = writeln!(
            out,
            "FAIL: {missed} ordering mechanism(s) switched off went uncaught: the explorer is suspect"
        );
        return ExitCode::from(1);
    }
    if let Some(s) = file.shard {
        let _ = writeln!(
            out,
            "shard {}/{}: no violation in its runs (`crashfuzz merge` of every shard's --json gives the campaign's verdict)",
            s.index, s.count
        );
        return ExitCode::SUCCESS;
    }
    if !strict && none_runs > 0 && caught == 0 && reports.len() > 1 {
        let _ = writeln!(
            out,
            "FAIL: Ext4-NJ (mode none) was never caught: the oracle is suspect"
        );
        return ExitCode::from(1);
    }
    let _ = writeln!(out, "PASS");
    ExitCode::SUCCESS
}

fn replay_cmd(id: &str, context: usize, trace: Option<&Path>) -> Result<ExitCode, Error> {
    if trace.is_none() {
        if let Some(r) = pm::replay_pm(id)? {
            return Ok(print_pm_replay(&r));
        }
    }
    let r = match trace {
        Some(path) => replay_saved(path, id, context)?,
        None => replay(id, context)?,
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "promises in force at the crash point:");
    for p in &r.promises {
        let _ = writeln!(out, "  {p}");
    }
    let _ = writeln!(out, "bus transactions around the crash point (>> marks it):");
    for l in &r.context {
        let _ = writeln!(out, "  {l}");
    }
    let _ = writeln!(out, "recovery:");
    for l in &r.log {
        let _ = writeln!(out, "  {l}");
    }
    if r.failures.is_empty() {
        let _ = writeln!(out, "result: the state passes every check");
        return Ok(ExitCode::SUCCESS);
    }
    for f in &r.failures {
        let _ = writeln!(out, "result: {} failed: {}", f.check, f.detail);
    }
    Ok(ExitCode::from(1))
}

/// Prints a replayed PM crash state: the run, the operations (`>>` at the
/// one in flight), the recovered tree and the verdict.
fn print_pm_replay(r: &pm::PmReplay) -> ExitCode {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "{} on {} (seed {}), promise: {}; {} pending item(s) at the crash point",
        r.run.label(),
        pm::domain_name(r.run.domain),
        r.run.seed,
        r.promise.name(),
        r.pending
    );
    let _ = writeln!(
        out,
        "operations ({} returned; >> marks the one in flight):",
        r.returned
    );
    for (i, op) in r.ops.iter().enumerate() {
        let mark = if i == r.returned { ">>" } else { "  " };
        let _ = writeln!(out, "  {mark} {op}");
    }
    for f in &r.refused {
        let _ = writeln!(out, "  refused: {f}");
    }
    let _ = writeln!(out, "recovered tree:");
    match &r.tree {
        Ok(t) => {
            if t.is_empty() {
                let _ = writeln!(out, "  (empty)");
            }
            for (p, n) in t {
                let _ = writeln!(
                    out,
                    "  {p}: {:?} {:o} links {} {} bytes",
                    n.ftype,
                    n.perm,
                    n.links,
                    n.data.len()
                );
            }
        }
        Err(e) => {
            let _ = writeln!(out, "  none: {e}");
        }
    }
    match &r.verdict {
        Ok(()) => {
            let _ = writeln!(out, "result: the state keeps the promise");
            ExitCode::SUCCESS
        }
        Err(why) => {
            let _ = writeln!(out, "result: pm-{} failed: {why}", r.promise.name());
            ExitCode::from(1)
        }
    }
}

fn show_cmd(one: &OneRun) -> Result<ExitCode, Error> {
    let cfg = run_config(one)?;
    let name = one
        .workload
        .as_deref()
        .ok_or_else(|| Error::Failed("no workload given: -w WORKLOAD".into()))?;
    let mut out = std::io::stdout().lock();
    for w in resolve(name)? {
        let rec = crashfuzz::record(&w, &cfg)?;
        let _ = writeln!(out, "{} ({} trace entries)", w.name, rec.trace.entries().len());
        for o in &rec.ops {
            let _ = writeln!(
                out,
                "  t{} [{:>7}..{:>7}] {:>12} .. {:>12}  {}{}",
                o.thread,
                o.start,
                o.end,
                o.start_time,
                o.end_time,
                o.op,
                o.error.as_ref().map(|e| format!("  -> {e}")).unwrap_or_default()
            );
        }
        for p in &rec.promises {
            let until = if p.until == usize::MAX {
                "end".to_string()
            } else {
                p.until.to_string()
            };
            let _ = writeln!(out, "  promise [{}..{until}) {}", p.from, p.op);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    keep_freed_memory();
    let cli = Cli::parse();
    let result = match &cli.cmd {
        None => run(&cli.run, false),
        Some(Cmd::Explore(a)) => run(a, true),
        Some(Cmd::Replay { id, context, trace }) => replay_cmd(id, *context, trace.as_deref()),
        Some(Cmd::Save { one, output }) => save_cmd(one, output),
        Some(Cmd::Trace { one, trace, output }) => trace_cmd(one, trace.as_deref(), output.as_deref()),
        Some(Cmd::Show(one)) => show_cmd(one),
        Some(Cmd::Merge { files, json, show }) => merge_cmd(files, json.as_deref(), *show),
        Some(Cmd::List) => {
            println!("workloads: {}", names().join(", "));
            println!("  (also: ace1-NN-P, ace2-NN-MM-PQ, random-SEED-THREADSxOPS, or a workload file)");
            let modes: Vec<&str> = ModeName::ALL.iter().map(|m| m.name()).collect();
            println!("modes: {}", modes.join(", "));
            let profiles: Vec<&str> = nvme_ctrl::SsdProfile::all().iter().map(|p| p.name).collect();
            println!("profiles: {}", profiles.join(", "));
            let pm_modes: Vec<&str> = PmMode::ALL.iter().map(|m| m.name()).collect();
            println!("PM modes: {}", pm_modes.join(", "));
            let pm_profiles: Vec<&str> = pm::PM_PROFILES.iter().map(|p| p.0).collect();
            println!("PM profiles: {}", pm_profiles.join(", "));
            let pm_faults: Vec<String> = PmFault::all().iter().map(PmFault::name).collect();
            println!("PM fault switches: {}", pm_faults.join(", "));
            Ok(ExitCode::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("crashfuzz: {e}");
            ExitCode::from(2)
        }
    }
}

/// mimalloc instead of the system allocator: checking a crash state boots a
/// machine whose DMA payloads and file reads allocate and free buffers of
/// every size millions of times; glibc's malloc returned the large ones
/// to the kernel and took page faults to get them back (a third of a
/// cached-drive run's CPU time in `perf`).
///
/// It is built without transparent huge pages (`no_thp`): a check touches
/// a few KiB here and there of memory it just allocated, and each first
/// touch of a huge page zeroed 2 MiB (`clear_page_erms`, an eighth of a
/// campaign's CPU time).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its place in `mi_option_e` of the
/// mimalloc 3 that `libmimalloc-sys` builds).
const MI_OPTION_PURGE_DELAY: std::ffi::c_int = 15;

#[allow(unsafe_code)]
extern "C" {
    /// Sets one of mimalloc's options (`mimalloc.h`).
    fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
}

/// Tells mimalloc never to hand freed memory back to the kernel: every
/// check boots a machine that allocates and frees about the same memory
/// again, and memory purged in between was faulted in and zeroed afresh
/// each time (the kernel's page faults, a sixth of a campaign's CPU time).
/// The process's footprint stays at its peak, which is what it reached
/// anyway.
#[allow(unsafe_code)]
fn keep_freed_memory() {
    // SAFETY: `mi_option_set` only stores a value in mimalloc's option
    // table (option 15 is `mi_option_purge_delay`, -1: never purge); it
    // is called first thing in `main`, before any other thread exists, as
    // mimalloc asks of it (it is not thread safe).
    unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
}

/// A state count for the table: exact below a million, else in powers of
/// ten; `u64::MAX` (a saturated count) as "at least" it.
fn count(n: u64) -> String {
    match n {
        u64::MAX => ">=1.8e19".into(),
        0..=999_999 => n.to_string(),
        _ => format!("{:.1e}", n as f64),
    }
}
