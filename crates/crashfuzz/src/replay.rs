//! Replaying one crash state from its id: the workload is recorded again
//! (the simulation is deterministic, so the trace is the same), the state
//! is rebuilt from its crash point and choice, and checked with the
//! recovery log kept. The bus transactions around the crash point show
//! what was in flight.
//!
//! An id is `WORKLOAD:MODE:PROFILE:SEED:POINT:CHOICE`, where CHOICE is
//! [`crate::explore::encode_choice`]'s `f<prefixes>.l<lines>.m<blocks>`. The workload
//! name may itself contain `:` (a file path); the other fields may not.
//! A workload field `@PATH` names a saved run ([`crate::saved`]): the run
//! is loaded from the file instead of recorded, and MODE, PROFILE and SEED
//! must be the ones it was recorded with.

use std::path::Path;

use ccnvme::traffic::purpose_name;
use nvme_ctrl::crash::StateChoice;
use pcie_sim::{BusTrace, TraceEntry};

use crate::builtin::resolve;
use crate::check::{check_state, CheckContext};
use crate::error::Error;
use crate::explore::{decode_choice, explorer_of};
use crate::oracle::Failure;
use crate::record::{parse_mode_label, record, Fault, ModeName, Recording, RunConfig};
use crate::saved::{SavedConfig, SavedRun};
use crate::workload::Workload;

/// A parsed replay id.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayId {
    /// Workload name (built-in or file).
    pub workload: String,
    /// Mode.
    pub mode: ModeName,
    /// Fault injected, if any.
    pub fault: Option<Fault>,
    /// Drive profile name.
    pub profile: String,
    /// Simulation seed.
    pub seed: u64,
    /// Crash point (trace entry).
    pub point: usize,
    /// Which pending items landed.
    pub choice: StateChoice,
    /// On a machine of several drives (`horae2`): which pending items of
    /// each landed ([`crate::devices::encode_devices_choice`]); `choice`
    /// is then empty.
    pub devices: Option<nvme_ctrl::crash::DevicesChoice>,
}

impl ReplayId {
    /// Parses an id.
    pub fn parse(id: &str) -> Result<ReplayId, Error> {
        let bad = |why: &str| Error::BadReplayId {
            id: id.into(),
            why: why.into(),
        };
        let mut f: Vec<&str> = id.rsplitn(6, ':').collect();
        if f.len() != 6 {
            return Err(bad("expected WORKLOAD:MODE:PROFILE:SEED:POINT:CHOICE"));
        }
        f.reverse();
        let (mode, fault) = parse_mode_label(f[1]).map_err(|e| bad(&e.to_string()))?;
        let seed = f[3].parse().map_err(|_| bad("seed is not a number"))?;
        let point = f[4].parse().map_err(|_| bad("crash point is not a number"))?;
        let (choice, devices) = if mode.drives() > 1 {
            let d = crate::devices::decode_devices_choice(f[5], mode.drives() as usize)
                .ok_or_else(|| bad("choice is not f<..>.l<..>.m<..>~<..> (one media list per drive)"))?;
            (StateChoice::default(), Some(d))
        } else {
            let c = decode_choice(f[5]).ok_or_else(|| bad("choice is not f<..>.l<..>.m<..>"))?;
            (c, None)
        };
        Ok(ReplayId {
            workload: f[0].into(),
            mode,
            fault,
            profile: f[2].into(),
            seed,
            point,
            choice,
            devices,
        })
    }
}

/// What a replay shows.
#[derive(Debug, Clone)]
pub struct ReplayOutcome {
    /// Failed checks (empty: the state passes).
    pub failures: Vec<Failure>,
    /// Driver, file-system and oracle log of the recovery.
    pub log: Vec<String>,
    /// The trace entries around the crash point, formatted; the crash
    /// point's entry is marked.
    pub context: Vec<String>,
    /// Promises in force at the crash point.
    pub promises: Vec<String>,
}

/// Formats one trace entry for people.
pub fn describe(trace: &BusTrace, i: usize, e: &TraceEntry) -> String {
    let payload = trace.payload(e);
    let head: Vec<String> = payload.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!(
        "#{i:<7} t={:>12} {:<12} {:<14} src={} addr={:#012x} len={:<5} {}",
        e.time.to_string(),
        e.kind.name(),
        purpose_name(e.purpose),
        e.source,
        e.addr,
        e.len,
        head.join(" "),
    )
}

/// Replays the state `id` names, showing `context` trace entries on each
/// side of its crash point. A workload field `@PATH` names a saved run
/// (the ids [`crate::explore::explore_saved`] reports).
pub fn replay(id: &str, context: usize) -> Result<ReplayOutcome, Error> {
    let rid = ReplayId::parse(id)?;
    if let Some(path) = rid.workload.strip_prefix('@') {
        let saved = SavedRun::load(Path::new(path))?;
        check_saved_id(&rid, &saved, id)?;
        return replay_state(
            &saved.recording,
            &saved.config,
            rid.point,
            &rid.choice,
            context,
            id,
        );
    }
    let workloads = resolve(&rid.workload)?;
    let w: Workload = match workloads.as_slice() {
        [w] => w.clone(),
        _ => {
            return Err(Error::BadReplayId {
                id: id.into(),
                why: format!("`{}` names {} workloads, not one", rid.workload, workloads.len()),
            })
        }
    };
    let cfg = RunConfig {
        fault: rid.fault,
        ..RunConfig::new(rid.mode, RunConfig::profile_by_name(&rid.profile)?, rid.seed)
    };
    let rec = record(&w, &cfg)?;
    if let Some(d) = &rid.devices {
        return replay_devices_state(&rec, &SavedConfig::of_run(&w, &cfg), rid.point, d, context, id);
    }
    replay_state(
        &rec,
        &SavedConfig::of_run(&w, &cfg),
        rid.point,
        &rid.choice,
        context,
        id,
    )
}

/// Replays one state of the saved run at `path`. `state` is either a
/// whole id (its workload field is ignored; its mode, profile and seed
/// must be the run's) or just `POINT:CHOICE`.
pub fn replay_saved(path: &Path, state: &str, context: usize) -> Result<ReplayOutcome, Error> {
    let saved = SavedRun::load(path)?;
    let c = &saved.config;
    let full = if state.split(':').count() == 2 {
        format!(
            "@{}:{}:{}:{}:{state}",
            path.display(),
            saved.mode_label(),
            c.profile.name,
            c.seed
        )
    } else {
        state.to_string()
    };
    let rid = ReplayId::parse(&full)?;
    check_saved_id(&rid, &saved, state)?;
    replay_state(&saved.recording, c, rid.point, &rid.choice, context, state)
}

/// An id's mode, fault, profile and seed must be the saved run's.
fn check_saved_id(rid: &ReplayId, saved: &SavedRun, id: &str) -> Result<(), Error> {
    let c = &saved.config;
    if rid.mode != c.mode || rid.fault != c.fault || rid.profile != c.profile.name || rid.seed != c.seed {
        return Err(Error::BadReplayId {
            id: id.into(),
            why: format!(
                "the saved run is {}:{}:{}",
                saved.mode_label(),
                c.profile.name,
                c.seed
            ),
        });
    }
    Ok(())
}

/// A replay id's crash point must be one of the run's.
fn point_in_run(rec: &Recording, point: usize, id: &str) -> Result<(), Error> {
    let points = rec.trace.entries().len();
    if point >= points {
        return Err(Error::BadReplayId {
            id: id.into(),
            why: format!("the run has {points} crash points"),
        });
    }
    Ok(())
}

/// Rebuilds the state after entry `point` given by `choice` of a recorded
/// run and checks it with its recovery log kept.
pub fn replay_state(
    rec: &Recording,
    cfg: &SavedConfig,
    point: usize,
    choice: &StateChoice,
    context: usize,
    id: &str,
) -> Result<ReplayOutcome, Error> {
    point_in_run(rec, point, id)?;
    let mut explorer = explorer_of(rec)?;
    let state = explorer.state(point, choice).map_err(|e| Error::BadReplayId {
        id: id.into(),
        why: e.to_string(),
    })?;
    let cx = CheckContext::for_run(cfg, rec, true);
    let out = check_state(&cx, &state);
    Ok(outcome(rec, point, context, out.failures, out.log))
}

/// [`replay_state`] for a run on several drives (`horae2`).
pub fn replay_devices_state(
    rec: &Recording,
    cfg: &SavedConfig,
    point: usize,
    choice: &nvme_ctrl::crash::DevicesChoice,
    context: usize,
    id: &str,
) -> Result<ReplayOutcome, Error> {
    point_in_run(rec, point, id)?;
    let bad = |e: nvme_ctrl::CtrlError| Error::BadReplayId {
        id: id.into(),
        why: e.to_string(),
    };
    let mut explorer = crate::devices::devices_explorer_of(rec)?;
    // Makes `point` the current one (the choices themselves are not needed).
    explorer.choices_at(point, 0, 0).map_err(bad)?;
    let state = explorer.build(point, choice).map_err(bad)?;
    let cx = CheckContext::for_run(cfg, rec, true);
    let out = check_state(&cx, &state);
    Ok(outcome(rec, point, context, out.failures, out.log))
}

/// The outcome of a replay: the check's failures and log, the trace
/// around the crash point and the promises in force.
fn outcome(
    rec: &Recording,
    point: usize,
    context: usize,
    failures: Vec<Failure>,
    log: Vec<String>,
) -> ReplayOutcome {
    let points = rec.trace.entries().len();
    let entries = rec.trace.entries();
    let lo = point.saturating_sub(context);
    let hi = (point + context + 1).min(points);
    let context = (lo..hi)
        .map(|i| {
            let mark = if i == point { ">> " } else { "   " };
            format!("{mark}{}", describe(&rec.trace, i, &entries[i]))
        })
        .collect();
    let promises = rec
        .promises
        .iter()
        .filter(|p| p.covers(point + 1))
        .map(|p| p.op.clone())
        .collect();
    ReplayOutcome {
        failures,
        log,
        context,
        promises,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_and_reject() {
        let id = ReplayId::parse("/tmp/a:b.txt:mq:optane-905p:7:1234:f3.l0-2.m").unwrap();
        assert_eq!(id.fault, None);
        let f = ReplayId::parse("w:mq+no-fence:optane-905p:7:1:f.l.m").unwrap();
        assert_eq!(f.fault, Some(Fault::NoFence));
        assert_eq!(id.workload, "/tmp/a:b.txt");
        assert_eq!(id.mode, ModeName::Mq);
        assert_eq!(id.point, 1234);
        assert_eq!(id.choice.pmr.in_flight_landed, vec![3]);
        assert_eq!(id.choice.pmr.lines_landed, vec![0, 2]);
        assert!(id.choice.media.is_empty());
        for bad in [
            "",
            "w:mq:p:1:2",
            "w:zz:p:1:2:f.l.m",
            "w:mq:p:x:2:f.l.m",
            "w:mq:p:1:-2:f.l.m",
            "w:mq:p:1:2:garbage",
            "w:mq+nope:p:1:2:f.l.m",
        ] {
            assert!(
                matches!(ReplayId::parse(bad), Err(Error::BadReplayId { .. })),
                "{bad}"
            );
        }
    }
}
