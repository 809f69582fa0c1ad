//! A campaign split into 4 shards, each its own process, and merged with
//! `crashfuzz merge` reports what the unsharded campaign reports: the same
//! runs in the same order with the same counts and violations, and the
//! same verdict.

use std::path::Path;
use std::process::Command;

use crashfuzz::shard::ReportFile;
use crashfuzz::ExploreReport;

fn crashfuzz(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_crashfuzz"))
        .args(args)
        .output()
        .expect("run crashfuzz");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (out.status.code(), stderr)
}

/// A report without what depends on the machine that made it.
fn untimed(r: &ExploreReport) -> ExploreReport {
    ExploreReport {
        wall_seconds: 0.0,
        states_per_second: 0.0,
        record_seconds: 0.0,
        enumerate_seconds: 0.0,
        check_seconds: 0.0,
        // Which states find a recovery to reuse depends on which worker
        // checked what first; the verdicts do not.
        states_recovered_alike: 0,
        states_recovery_reused: 0,
        ..r.clone()
    }
}

fn runs(path: &Path) -> Vec<ExploreReport> {
    ReportFile::load(path)
        .expect("report")
        .runs
        .iter()
        .map(untimed)
        .collect()
}

#[test]
fn four_shards_merged_equal_the_unsharded_campaign() {
    let dir = std::env::temp_dir().join(format!("crashfuzz-shards-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    // `none` is caught, the safe modes pass: a campaign with both kinds
    // of run (one of them, caught, carries violations to merge).
    let campaign = [
        "-w",
        "generic_035,generic_106,create_delete",
        "-m",
        "none,classic,mq",
        "-p",
        "optane-905p",
        "-j",
        "1",
    ];
    let whole = dir.join("whole.json");
    let mut args: Vec<&str> = campaign.to_vec();
    let whole_s = whole.display().to_string();
    args.extend(["--json", &whole_s]);
    let (whole_code, err) = crashfuzz(&args);
    assert_eq!(whole_code, Some(0), "{err}");

    let mut shard_files = Vec::new();
    for i in 0..4 {
        let path = dir.join(format!("shard{i}.json"));
        let shard = format!("{i}/4");
        let path_s = path.display().to_string();
        let mut args: Vec<&str> = campaign.to_vec();
        args.extend(["--shard", &shard, "--json", &path_s]);
        let (code, err) = crashfuzz(&args);
        assert_eq!(code, Some(0), "shard {i}: {err}");
        let file = ReportFile::load(&path).expect("shard report");
        assert!(!file.runs.is_empty(), "9 runs over 4 shards: each has some");
        assert!(
            file.runs.iter().all(|r| r.run % 4 == i),
            "shard {i} did only its runs"
        );
        shard_files.push(path_s);
    }
    let merged = dir.join("merged.json");
    let merged_s = merged.display().to_string();
    let mut args = vec!["merge"];
    args.extend(shard_files.iter().rev().map(String::as_str));
    args.extend(["--json", &merged_s]);
    let (code, err) = crashfuzz(&args);
    assert_eq!(code, whole_code, "{err}");

    let (a, b) = (runs(&whole), runs(&merged));
    assert_eq!(a.len(), 9);
    assert!(a.iter().any(|r| !r.violations.is_empty()), "something to merge");
    assert_eq!(a, b, "merged shards differ from the whole campaign");

    // A shard left out, or given twice, is refused in one line.
    for bad in [
        &shard_files[..3],
        &[shard_files[0].clone(), shard_files[0].clone()][..],
    ] {
        let mut args = vec!["merge"];
        args.extend(bad.iter().map(String::as_str));
        let (code, err) = crashfuzz(&args);
        assert_eq!(code, Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("cannot merge"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
