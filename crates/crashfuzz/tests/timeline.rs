//! Timelines: a built-in workload exported as Chrome trace event JSON
//! parses back, has every track, and every span lies within the run and
//! nests properly on its thread; a saved run exports the same bytes.

use std::collections::BTreeMap;

use crashfuzz::builtin::by_name;
use crashfuzz::timeline::export;
use crashfuzz::{record, ModeName, RunConfig, SavedConfig, SavedRun};
use serde_json::Value;

#[test]
fn a_workload_exports_every_track_with_spans_inside_the_run() {
    let w = by_name("create_delete").expect("built-in").remove(0);
    let cfg = RunConfig::new(
        ModeName::Mq,
        RunConfig::profile_by_name("flash-vwc").expect("profile"),
        1,
    );
    let rec = record(&w, &cfg).expect("record");
    let sc = SavedConfig::of_run(&w, &cfg);
    let mut out = Vec::new();
    let stats = export(&rec, &sc, &mut out).expect("export");
    let json: Value = serde_json::from_slice(&out).expect("valid JSON");
    let events = json["traceEvents"].as_array().expect("traceEvents");
    assert_eq!(events.len() as u64, stats.events);
    let run_end = json["otherData"]["run_end_us"].as_f64().expect("run end");
    assert!((run_end - stats.run_end_ps as f64 / 1e6).abs() < 1e-6);

    let mut threads: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let mut processes: BTreeMap<u64, String> = BTreeMap::new();
    for e in events.iter().filter(|e| e["ph"] == "M") {
        let (pid, tid) = (e["pid"].as_u64().expect("pid"), e["tid"].as_u64().expect("tid"));
        let name = e["args"]["name"].as_str().map(String::from);
        match (e["name"].as_str(), name) {
            (Some("thread_name"), Some(n)) => {
                threads.insert((pid, tid), n);
            }
            (Some("process_name"), Some(n)) => {
                processes.insert(pid, n);
            }
            _ => {}
        }
    }
    for p in ["cores", "NVMe queues", "PCIe link", "media"] {
        assert!(processes.values().any(|n| n == p), "process {p}: {processes:?}");
    }

    // Spans per track (lanes folded together), and per thread.
    let mut per_track: BTreeMap<String, usize> = BTreeMap::new();
    let mut per_thread: BTreeMap<(u64, u64), Vec<(f64, f64)>> = BTreeMap::new();
    let mut spans = 0u64;
    for e in events.iter().filter(|e| e["ph"] == "X") {
        spans += 1;
        let ts = e["ts"].as_f64().expect("ts");
        let dur = e["dur"].as_f64().expect("dur");
        assert!(dur >= 0.0, "{e}");
        assert!(ts >= 0.0, "{e}");
        assert!(
            ts + dur <= run_end + 1e-6,
            "{e} ends after the run ({run_end} us)"
        );
        let key = (e["pid"].as_u64().expect("pid"), e["tid"].as_u64().expect("tid"));
        let name = threads
            .get(&key)
            .unwrap_or_else(|| panic!("unnamed thread {key:?}"));
        let track = name.split(" #").next().unwrap_or(name).to_string();
        *per_track.entry(track).or_default() += 1;
        per_thread.entry(key).or_default().push((ts, ts + dur));
    }
    assert_eq!(spans, stats.spans);
    for t in [
        "core 0",
        "core 0 mmio",
        "host -> device",
        "device -> host",
        "media programs",
        "media events",
    ] {
        assert!(
            per_track.get(t).copied().unwrap_or(0) > 0,
            "track {t}: {per_track:?}"
        );
    }
    assert_eq!(
        per_track["core 0"],
        rec.ops.iter().filter(|o| o.thread == 0).count()
    );
    let queues: Vec<&String> = per_track.keys().filter(|k| k.starts_with("sq ")).collect();
    assert!(queues.len() >= 2, "admin and I/O queues: {queues:?}");
    let commands = events.iter().filter(|e| e["cat"] == "command").count();
    let writes = events
        .iter()
        .filter(|e| e["cat"] == "command" && e["name"] == "write")
        .count();
    assert!(
        writes > 0 && commands > writes,
        "{commands} commands, {writes} writes"
    );
    // Spans of one thread never overlap (they nest trivially).
    for (key, mut v) in per_thread {
        v.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        for pair in v.windows(2) {
            assert!(
                pair[1].0 >= pair[0].1 - 1e-6,
                "thread {key:?}: {:?} overlaps {:?}",
                pair[0],
                pair[1]
            );
        }
    }

    // A saved run of the same recording exports the same timeline.
    let dir = std::env::temp_dir().join(format!("crashfuzz-timeline-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let path = dir.join("cd.cfz");
    SavedRun::from_recording(&rec, &cfg)
        .expect("saveable")
        .save(&path)
        .expect("save");
    let loaded = SavedRun::load(&path).expect("load");
    let mut again = Vec::new();
    export(&loaded.recording, &loaded.config, &mut again).expect("export");
    assert!(again == out, "the saved run's timeline differs");
}
