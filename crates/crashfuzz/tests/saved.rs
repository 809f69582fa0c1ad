//! Saved runs: a built-in workload's recording saved, loaded and explored
//! gives the numbers of exploring the workload directly; its violations
//! replay from the file; the recorder-side API builds an equivalent run;
//! damaged files are typed errors.

use std::path::{Path, PathBuf};

use crashfuzz::explore::{explore_recording, explore_saved};
use crashfuzz::replay::{replay, replay_saved};
use crashfuzz::saved::{SavedConfig, SavedRun, FORMAT_VERSION};
use crashfuzz::{explore, record, Error, ExploreReport, ModeName};
use nvme_ctrl::BLOCK;
use pcie_sim::{BusTrace, TraceMode};

mod common;
use common::{config, opts, workload};

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("crashfuzz-saved-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    dir.join(name)
}

fn same_numbers(a: &ExploreReport, b: &ExploreReport, what: &str) {
    assert_eq!(a.crash_points, b.crash_points, "{what}");
    assert_eq!(a.states_total, b.states_total, "{what}");
    assert_eq!(a.states_checked, b.states_checked, "{what}");
    assert_eq!(a.states_deduplicated, b.states_deduplicated, "{what}");
    assert_eq!(a.states_not_visited, b.states_not_visited, "{what}");
    assert_eq!(a.violations.len(), b.violations.len(), "{what}");
    assert_eq!(a.mode, b.mode, "{what}");
    assert_eq!(a.profile, b.profile, "{what}");
}

#[test]
fn a_saved_run_explores_like_its_workload_and_replays() {
    let w = workload("generic_035");
    for (mode, profile) in [
        (ModeName::Mq, "optane-905p"),
        (ModeName::Classic, "flash-vwc"),
        (ModeName::None, "optane-905p"),
    ] {
        let cfg = config(mode, profile);
        let direct = explore(&w, &cfg, &opts(), &w.name).expect("explore");
        let rec = record(&w, &cfg).expect("record");
        let path = tmp(&format!("g035-{}-{profile}.cfz", mode.name()));
        let bytes = SavedRun::from_recording(&rec, &cfg)
            .expect("saveable")
            .save(&path)
            .expect("save");
        assert_eq!(bytes, std::fs::metadata(&path).expect("file").len());
        let loaded = SavedRun::load(&path).expect("load");
        // The file holds the run exactly.
        assert_eq!(loaded.config, SavedConfig::of_run(&w, &cfg));
        assert_eq!(loaded.recording.trace.entries(), rec.trace.entries());
        for e in rec.trace.entries() {
            assert_eq!(loaded.recording.trace.payload(e), rec.trace.payload(e));
        }
        assert_eq!(loaded.recording.promises, rec.promises);
        assert_eq!(loaded.recording.ops, rec.ops);
        assert_eq!(loaded.recording.refused, rec.refused);
        assert_eq!(loaded.recording.layout, rec.layout);
        assert_eq!(loaded.recording.machine, rec.machine);
        assert_eq!(loaded.recording.base_pmr.to_vec(), rec.base_pmr.to_vec());
        let (mut a, mut b) = ([0u8; BLOCK], [0u8; BLOCK]);
        assert_eq!(loaded.recording.base_media.blocks(), rec.base_media.blocks());
        for blk in 0..rec.base_media.blocks() {
            rec.base_media.read(blk, &mut a);
            loaded.recording.base_media.read(blk, &mut b);
            assert!(a == b, "media block {blk}");
        }
        // Exploring it finds exactly what exploring the workload finds.
        let from_file = explore_saved(&path, &opts()).expect("explore saved");
        let what = format!("{mode:?} {profile}");
        same_numbers(&direct, &from_file, &what);
        let ids_direct: Vec<String> = direct.violations.iter().map(|v| v.id.clone()).collect();
        let ids_file: Vec<String> = from_file
            .violations
            .iter()
            .map(|v| {
                let prefix = format!("@{}:", path.display());
                assert!(v.id.starts_with(&prefix), "{}", v.id);
                v.id.replacen(&prefix, &format!("{}:", w.name), 1)
            })
            .collect();
        assert_eq!(ids_direct, ids_file, "{what}");
        assert_eq!(from_file.workload, format!("@{}", path.display()));
        if mode == ModeName::None {
            assert!(
                !from_file.violations.is_empty(),
                "Ext4-NJ is caught from the file"
            );
            for v in from_file.violations.iter().take(3) {
                assert_eq!(v.replay, format!("crashfuzz replay {}", v.id));
                let out = replay(&v.id, 2).expect("replay by id");
                assert!(
                    out.failures.iter().any(|f| f.check == v.check),
                    "{}: replay found {:?}, exploration {}",
                    v.id,
                    out.failures,
                    v.check
                );
                assert_eq!(out.context.len(), 5);
                let short = format!("{}:{}", v.crash_point, v.choice);
                let out2 = replay_saved(&path, &short, 2).expect("replay POINT:CHOICE");
                assert_eq!(out2.failures, out.failures);
                assert_eq!(out2.context, out.context);
                let full = replay_saved(&path, &ids_file[0], 0).expect("replay a workload id");
                assert!(!full.failures.is_empty());
            }
            // An id whose mode is not the file's is refused.
            let wrong = from_file.violations[0].id.replacen(":none:", ":mq:", 1);
            assert!(
                matches!(replay(&wrong, 0), Err(Error::BadReplayId { .. })),
                "{wrong}"
            );
        } else {
            assert!(
                from_file.violations.is_empty(),
                "{what}: {:?}",
                from_file.violations
            );
        }
    }
}

#[test]
fn the_recorder_api_builds_an_equivalent_run() {
    let w = workload("generic_106");
    let cfg = config(ModeName::Mq, "flash-vwc");
    let rec = record(&w, &cfg).expect("record");
    let config = SavedConfig::of_run(&w, &cfg);
    let mut run = SavedRun::new(
        config.clone(),
        rec.layout.clone(),
        rec.base_pmr.clone(),
        rec.base_media.clone(),
    );
    // A trace that is not a full one is refused.
    assert!(matches!(
        run.finish(BusTrace::new(TraceMode::Events)),
        Err(Error::Failed(_))
    ));
    for p in &rec.promises {
        run.push_promise(p.clone());
    }
    for o in &rec.ops {
        run.push_op(o.clone());
    }
    run.finish(rec.trace.clone()).expect("finish");
    let path = tmp("g106-api.cfz");
    run.save(&path).expect("save");
    let loaded = SavedRun::load(&path).expect("load");
    assert_eq!(loaded.recording.promises, rec.promises);
    let direct = explore_recording(&rec, &config, &opts(), "x").expect("explore");
    let saved = explore_recording(&loaded.recording, &loaded.config, &opts(), "x").expect("explore");
    same_numbers(&direct, &saved, "generic_106 via the recorder API");
    assert!(saved.violations.is_empty(), "{:?}", saved.violations);

    // end_promises: a change to a promised path ends its promises there.
    let mut run = SavedRun::new(
        config,
        rec.layout.clone(),
        rec.base_pmr.clone(),
        rec.base_media.clone(),
    );
    // The kind of promise an outside recorder makes (the recipe's step 5).
    let file = crashfuzz::oracle::Promise {
        expect: crashfuzz::oracle::Expect::File {
            path: "/promised".into(),
            content: b"x".to_vec(),
            if_present: false,
        },
        from: 10,
        until: usize::MAX,
        op: "fsync /promised".into(),
    };
    let path_promised = file.expect.paths()[0].to_string();
    run.push_promise(crashfuzz::oracle::Promise {
        until: usize::MAX,
        ..file.clone()
    });
    run.end_promises("/elsewhere/entirely", file.from + 1);
    assert_eq!(run.recording.promises[0].until, usize::MAX);
    run.end_promises(&path_promised, file.from + 1);
    // It still covers the state just before the change's first entry.
    assert_eq!(run.recording.promises[0].until, file.from + 2);
}

fn rewrite(path: &Path, name: &str, f: impl Fn(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = std::fs::read(path).expect("read");
    f(&mut bytes);
    let out = tmp(name);
    std::fs::write(&out, bytes).expect("write");
    out
}

#[test]
fn damaged_files_are_typed_errors() {
    let w = workload("generic_035");
    let cfg = config(ModeName::Classic, "optane-905p");
    let rec = record(&w, &cfg).expect("record");
    let good = tmp("good.cfz");
    let len = SavedRun::from_recording(&rec, &cfg)
        .expect("saveable")
        .save(&good)
        .expect("save") as usize;
    SavedRun::load(&good).expect("the good file loads");
    let bad = |p: &Path| match SavedRun::load(p) {
        Err(Error::BadSavedRun { why, .. }) => why,
        other => panic!("{}: {other:?}", p.display()),
    };
    for cut in [0, 3, 8, 23, 24, 25, 100, len / 2, len - 1] {
        let p = rewrite(&good, "cut.cfz", |b| b.truncate(cut));
        let why = bad(&p);
        assert!(why.contains("truncated"), "cut at {cut}: {why}");
    }
    for at in [30, len / 3, len / 2, len - 1] {
        let p = rewrite(&good, "flip.cfz", |b| b[at] ^= 0x40);
        let why = bad(&p);
        assert!(why.contains("checksum"), "flip at {at}: {why}");
    }
    let p = rewrite(&good, "magic.cfz", |b| b[0] = b'X');
    assert!(bad(&p).contains("not a crashfuzz saved run"));
    let p = rewrite(&good, "tail.cfz", |b| b.extend_from_slice(b"junk"));
    assert!(bad(&p).contains("past the end"));
    let p = rewrite(&good, "version.cfz", |b| {
        b[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes())
    });
    assert!(matches!(
        SavedRun::load(&p),
        Err(Error::SavedRunVersion { found, .. }) if found == FORMAT_VERSION + 1
    ));
    // A body that passes its checksum but does not decode.
    let p = rewrite(&good, "garbage.cfz", |b| {
        for x in b[24..].iter_mut() {
            *x = 0xff;
        }
        let crc = crc32fast::hash(&b[24..]);
        b[20..24].copy_from_slice(&crc.to_le_bytes());
    });
    assert!(bad(&p).contains("corrupt body"));
    assert!(matches!(
        SavedRun::load(&tmp("does-not-exist.cfz")),
        Err(Error::Io { .. })
    ));
    assert!(matches!(
        explore_saved(&p, &opts()),
        Err(Error::BadSavedRun { .. })
    ));
}

/// A run saved by a build that did not record submissions (its
/// `SUBMITTED` events taken out here, entry numbers kept) is explored on
/// the narrower envelope of that build, and its report says so; the same
/// run as this build records it is not narrowed and has more states.
#[test]
fn a_run_saved_without_submission_events_reports_a_narrower_envelope() {
    let w = workload("generic_035");
    let cfg = config(ModeName::Mq, "optane-905p");
    let rec = record(&w, &cfg).expect("record");
    let mut old = rec.clone();
    old.trace = BusTrace::new(TraceMode::Full);
    for e in rec.trace.entries() {
        let mut kept = *e;
        if kept.kind == pcie_sim::EventKind::Device && kept.code == nvme_ctrl::events::SUBMITTED {
            // An event code the media replay does not know: ignored.
            kept.code = u16::MAX;
        }
        old.trace.record(kept, rec.trace.payload(e));
    }
    let saved = SavedConfig::of_run(&w, &cfg);
    let now = explore_recording(&rec, &saved, &opts(), "now").expect("explore");
    assert!(now.narrowed.is_empty(), "{:?}", now.narrowed);
    let path = tmp("g035-old.cfz");
    SavedRun::from_recording(&old, &cfg)
        .expect("saveable")
        .save(&path)
        .expect("save");
    let then = explore_saved(&path, &opts()).expect("explore the old run");
    assert_eq!(then.narrowed.len(), 1, "{:?}", then.narrowed);
    assert!(then.narrowed[0].contains("arrival only"), "{}", then.narrowed[0]);
    assert!(
        then.states_total < now.states_total,
        "the narrower envelope has fewer states: {} against {}",
        then.states_total,
        now.states_total
    );
    assert!(then.violations.is_empty() && now.violations.is_empty());
}
