//! The reduced smoke exploration `cargo test` runs: safe modes pass, the
//! unsafe ones are caught and their violations replay, sharding partitions
//! the states, runs are deterministic, and bad input is a typed error.

use crashfuzz::builtin::resolve;
use crashfuzz::record::Fault;
use crashfuzz::replay::{replay, ReplayId};
use crashfuzz::shard::Shard;
use crashfuzz::{explore, record, Error, ModeName, RunConfig};

mod common;
use common::{config, opts, workload, SAFE_MODES};

#[test]
fn safe_modes_keep_every_promise_on_generic_035() {
    let w = workload("generic_035");
    for mode in SAFE_MODES {
        for profile in ["optane-905p", "flash-vwc"] {
            let r = explore(&w, &config(mode, profile), &opts(), &w.name).expect("explore");
            assert!(r.crash_points > 100, "{mode:?} {profile}: {r:?}");
            assert!(r.states_checked > 5, "{mode:?} {profile}: {r:?}");
            // Every state is checked, equal to one checked, or judged by
            // its read-set class; none is left out.
            assert_eq!(
                r.states_total,
                r.states_checked + r.states_deduplicated + r.states_by_read_set,
                "{mode:?} {profile}"
            );
            assert_eq!(r.states_not_visited, 0, "{mode:?} {profile}");
            assert!(r.violations.is_empty(), "{mode:?} {profile}: {:?}", r.violations);
        }
    }
}

#[test]
fn ext4_nj_is_caught_and_each_violation_replays() {
    let w = workload("generic_035");
    let r = explore(&w, &config(ModeName::None, "optane-905p"), &opts(), &w.name).expect("explore");
    assert!(!r.violations.is_empty(), "{r:?}");
    for v in r.violations.iter().take(3) {
        assert_eq!(v.replay, format!("crashfuzz replay {}", v.id));
        let out = replay(&v.id, 2).expect("replay");
        assert!(
            out.failures.iter().any(|f| f.check == v.check),
            "{}: replay found {:?}, exploration {}",
            v.id,
            out.failures,
            v.check
        );
        assert_eq!(out.context.len(), 5);
        assert!(out.context[2].starts_with(">> "));
    }
}

#[test]
fn the_paper_literal_rule_is_caught_on_the_cross_queue_workload() {
    let w = workload("m9_cross_queue");
    let lit = explore(&w, &config(ModeName::MqLiteral, "optane-905p"), &opts(), &w.name).expect("explore");
    assert!(!lit.violations.is_empty(), "{lit:?}");
    let out = replay(&lit.violations[0].id, 0).expect("replay");
    assert!(!out.failures.is_empty());
    let safe = explore(&w, &config(ModeName::Mq, "optane-905p"), &opts(), &w.name).expect("explore");
    assert!(safe.violations.is_empty(), "{:?}", safe.violations);
}

/// Ext4's fsync flushes the data it wrote itself when the transaction
/// that last changed its inode sent its flush before that data completed
/// (`ext4_sync_file`'s `needs_barrier`, `Jbd::will_flush_for`): on the
/// cross-queue workload another thread's fsync commits the fatomic file's
/// metadata while that file's data are still being written, and without
/// the flush they stay in the volatile cache after its sync returned.
#[test]
fn ext4_flushes_data_its_inodes_transaction_did_not_cover() {
    let w = workload("m9_cross_queue");
    for mode in [ModeName::Classic, ModeName::ClassicCc] {
        let r = explore(&w, &config(mode, "flash-vwc"), &opts(), &w.name).expect("explore");
        assert!(r.violations.is_empty(), "{mode:?}: {:?}", r.violations);
        // The flush switched off (`Fault::NoDataFlush`): the data are lost.
        let off = RunConfig {
            fault: Some(Fault::NoDataFlush),
            ..config(mode, "flash-vwc")
        };
        let r = explore(&w, &off, &opts(), &w.name).expect("explore");
        assert!(
            r.violations.iter().any(|v| v.check == "durable-data"),
            "{mode:?} without the flush: {:?}",
            r.violations
        );
    }
}

#[test]
fn the_same_seed_records_the_same_bus_trace() {
    let w = workload("random-3-2x6");
    for mode in [ModeName::Classic, ModeName::Mq] {
        let cfg = config(mode, "flash-vwc");
        let a = record(&w, &cfg).expect("record");
        let b = record(&w, &cfg).expect("record");
        assert_eq!(a.trace.hash(), b.trace.hash(), "{mode:?}");
        assert_eq!(a.promises, b.promises);
    }
}

/// Runs the binary on `args`; returns its exit code and standard error.
fn crashfuzz_cli(args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_crashfuzz"))
        .args(args)
        .output()
        .expect("run crashfuzz");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_bound_or_budget_that_would_not_apply_is_a_usage_error() {
    let run = ["-w", "generic_035", "-m", "mq", "-p", "optane-905p"];
    // By default states are enumerated by what the checks read: a bound
    // would be ignored.
    for flag in ["--bound", "--bound-lines", "--bound-blocks", "--pm-bound"] {
        let (code, err) = crashfuzz_cli(&[&run[..], &[flag, "4"]].concat());
        assert_eq!(code, Some(2), "{flag}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains(&format!("{flag} applies only with --bounded or --brute-force")),
            "{err}"
        );
    }
    // Up to the bounds, a budget would be ignored.
    for mode in ["--bounded", "--brute-force"] {
        let (code, err) = crashfuzz_cli(&[&run[..], &[mode, "--budget", "64"]].concat());
        assert_eq!(code, Some(2), "{mode}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("--budget applies only"), "{err}");
        assert!(err.contains(mode), "{err}");
    }
}

#[test]
fn bad_input_is_a_typed_error() {
    assert!(matches!(
        resolve("no-such-workload"),
        Err(Error::UnknownWorkload(_))
    ));
    assert!(matches!(ModeName::parse("ext5"), Err(Error::UnknownMode(_))));
    assert!(matches!(Fault::parse("no-seatbelt"), Err(Error::UnknownFault(_))));
    // A fault switching off a mechanism the mode lacks would test nothing.
    assert!(matches!(
        Fault::NoFence.check_modes(&[ModeName::Mq, ModeName::Classic]),
        Err(Error::FaultNotApplicable { .. })
    ));
    assert!(matches!(
        Fault::NoCommitFua.check_modes(&[ModeName::None]),
        Err(Error::FaultNotApplicable { .. })
    ));
    assert!(Fault::NoCommitFua
        .check_modes(&[ModeName::Classic, ModeName::Horae, ModeName::Mq])
        .is_ok());
    match ReplayId::parse("generic_035:classic+no-revoke:optane-905p:1:3:f0.l.m") {
        Err(Error::BadReplayId { why, .. }) => assert!(why.contains("does not apply"), "{why}"),
        other => panic!("{other:?}"),
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_crashfuzz"))
        .args([
            "explore",
            "-w",
            "generic_035",
            "-m",
            "classic",
            "--fault",
            "no-fence",
        ])
        .output()
        .expect("run crashfuzz");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("does not apply to mode `classic`"), "{err}");
    assert!(matches!(
        RunConfig::profile_by_name("floppy"),
        Err(Error::UnknownProfile(..))
    ));
    for s in ["3/2", "1/0", "x/2", "2", "-1/3"] {
        assert!(matches!(Shard::parse(s), Err(Error::BadShard(..))), "{s}");
    }
    assert_eq!(Shard::parse("1/4").expect("shard"), Shard { index: 1, count: 4 });
    assert!(matches!(ReplayId::parse("nope"), Err(Error::BadReplayId { .. })));
    // A replay id past the end of the run.
    assert!(matches!(
        replay("generic_106:classic:optane-905p:1:999999:f0.l.m", 0),
        Err(Error::BadReplayId { .. })
    ));
    let dir = std::env::temp_dir().join(format!("crashfuzz-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let f = dir.join("w.txt");
    std::fs::write(&f, "create /a\nwrite /a zero 1\n").expect("write");
    match resolve(f.to_str().expect("utf-8")) {
        Err(Error::Parse { source, .. }) => assert_eq!(source.line, 2),
        other => panic!("{other:?}"),
    }
}

/// Regressions found by exploring ACE's seq-2 space: an fsync with nothing
/// to commit (HoraeFS) once used up a journal sequence number without
/// writing it, so recovery stopped before every later transaction; two
/// names of one file once kept a promise about one name alive across a
/// write through the other; a rename between two names of one file is a
/// no-op (POSIX).
#[test]
fn ace2_regressions_pass() {
    for name in ["ace2-00-02-00", "ace2-09-04-00", "ace2-09-15-03"] {
        let w = workload(name);
        for mode in [ModeName::Classic, ModeName::Horae, ModeName::Mq] {
            let r = explore(&w, &config(mode, "optane-905p"), &opts(), &w.name).expect("explore");
            assert!(r.violations.is_empty(), "{name} {mode:?}: {:?}", r.violations);
        }
    }
}

/// Oracle regressions from random-2-4x40: a file's data made durable by
/// another file's fsync (they share a directory block, so MQFS journals
/// them in one transaction) is a legitimate "old" version for a later
/// fatomic; and a rename right after an unsynced write promises nothing
/// about the new content.
#[test]
fn entangled_versions_and_rename_after_write_are_not_false_alarms() {
    let entangled = "create /a\nwrite /a 0 6000 1\ncreate /b\nwrite /b 0 3000 2\nfsync /b\n\
                     write /a 6000 5000 3\nfatomic /a\n";
    let renamed = "create /f\nwrite /f 0 4096 1\nfsync /f\nwrite /f 0 4096 2\nrename /f /g\n";
    for (name, text, modes) in [
        ("entangled", entangled, &[ModeName::Mq, ModeName::MqAtomic][..]),
        (
            "renamed",
            renamed,
            &[ModeName::Classic, ModeName::Horae, ModeName::Mq][..],
        ),
    ] {
        let w = crashfuzz::workload::parse(name, text).expect("parse");
        for &mode in modes {
            for profile in ["optane-905p", "flash-vwc"] {
                let r = explore(&w, &config(mode, profile), &opts(), name).expect("explore");
                assert!(r.states_checked > 5, "{name} {mode:?} {profile}: {r:?}");
                assert!(
                    r.violations.is_empty(),
                    "{name} {mode:?} {profile}: {:?}",
                    r.violations
                );
            }
        }
    }
}
