//! The I/O paths besides write and fsync (O_DIRECT, sync_file_range,
//! mmap stores, msync), expected outcomes and refused operations: each
//! takes effect in the recording, its promise is made and checked, and
//! what a run refused or did not expect is shown, never a silent pass.
//! (That fsync's FLUSH for data written outside a sync is needed, and
//! caught when switched off, is the `no-data-flush` self-check in
//! `tests/canaries.rs`.)

mod common;

use common::{config, opts, workload, SAFE_MODES};
use crashfuzz::oracle::Node;
use crashfuzz::{explore, record, Expect, ModeName, Recording};

/// The files `op`'s own promises name with exactly one allowed content
/// (absence aside: fdatasync does not promise a fresh name; not the
/// copies later operations widened), in promise order.
fn files_promised(rec: &Recording, op: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for p in rec.promises.iter().filter(|p| p.op == op) {
        let Expect::States(st) = &p.expect else { continue };
        for (path, allowed) in &st.paths {
            let contents: Vec<&crashfuzz::content::Content> = allowed
                .iter()
                .flatten()
                .filter_map(|n| match n {
                    Node::File { content: Some(c), .. } => Some(&**c),
                    _ => None,
                })
                .collect();
            if let [c] = contents.as_slice() {
                let f = (path.clone(), c.to_vec());
                if !out.contains(&f) {
                    out.push(f);
                }
            }
        }
    }
    out
}

#[test]
fn the_io_workloads_pass_in_every_safe_mode() {
    for name in [
        "direct_io",
        "sfr_writeback",
        "mmap_msync",
        "fd_unlinked",
        "fallocate_modes",
    ] {
        let w = workload(name);
        for mode in SAFE_MODES {
            for profile in ["optane-905p", "flash-vwc"] {
                let r = explore(&w, &config(mode, profile), &opts(), &w.name).expect("explore");
                assert!(
                    r.violations.is_empty(),
                    "{name} {mode:?} {profile}: {:?}",
                    r.violations
                );
            }
        }
    }
}

#[test]
fn msync_promises_the_stores_as_fdatasync_does() {
    let w = workload("mmap_msync");
    let rec = record(&w, &config(ModeName::Mq, "flash-vwc")).expect("record");
    let after_msync: Vec<Vec<u8>> = ["msync /m 0 4096", "msync /m 4096 4096"]
        .iter()
        .flat_map(|op| files_promised(&rec, op))
        .filter(|(path, _)| path == "/m")
        .map(|(_, c)| c)
        .collect();
    assert_eq!(after_msync.len(), 2, "{:?}", rec.promises);
    // The first store (seed 2 at 100..300) is in the first promise; the
    // second (seed 3 at 4096..8192) only in the second; the size stays.
    let p = crashfuzz::workload::pattern;
    assert_eq!(after_msync[0].len(), 8192);
    assert_eq!(after_msync[0][100], p(2, 100));
    assert_eq!(after_msync[0][5000], p(1, 5000));
    assert_eq!(after_msync[1][5000], p(4, 5000));
}

#[test]
fn refused_operations_are_kept_with_their_place() {
    let rec = record(&workload("direct_io"), &config(ModeName::Classic, "optane-905p")).expect("record");
    assert_eq!(rec.refused.len(), 1, "{:?}", rec.refused);
    assert_eq!(rec.refused[0].0, "dwrite /d 1 4096 5 (t0 op 6)");
    assert!(rec.refused[0].1.starts_with("EINVAL: "), "{}", rec.refused[0].1);
    // The same from a workload file: with its line.
    let w = crashfuzz::parse("f", "# x\nsetup create /a\nmwrite /a 0 1 1\nsync\n").expect("parse");
    let rec = record(&w, &config(ModeName::Mq, "optane-905p")).expect("record");
    assert_eq!(rec.refused.len(), 1);
    assert_eq!(rec.refused[0].0, "mwrite /a 0 1 1 (line 3)");
}

/// Runs the binary on a workload file; returns its exit code and output.
fn run_file(text: &str, args: &[&str]) -> (Option<i32>, String) {
    let dir = std::env::temp_dir().join(format!("crashfuzz-io-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join(format!("w{}.txt", text.len()));
    std::fs::write(&path, text).expect("write");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_crashfuzz"))
        .args(["-w", path.to_str().expect("utf-8"), "-j", "2"])
        .args(args)
        .output()
        .expect("run crashfuzz");
    let _ = std::fs::remove_file(&path);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn an_outcome_other_than_the_expected_one_fails_the_run() {
    let body = "setup create /f\nwrite /f 0 4096 3\nmwrite /f 9000 1 1\nfsync /f\n";
    // Passes, as expected; the refused store is listed.
    let (code, out) = run_file(
        &format!("expect pass\n{body}"),
        &["-m", "mq", "-p", "optane-905p"],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("1 operation(s) refused: mwrite /f 9000 1 1 (line 4): EINVAL"),
        "{out}"
    );
    // Expected to be caught, but passes: one line says so.
    let (code, out) = run_file(
        &format!("expect caught\n{body}"),
        &["-m", "mq", "-p", "optane-905p"],
    );
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("expected caught, was pass"), "{out}");
    // Caught where the workload says it must be: not a failure.
    let sfr = "expect pass\nexpect caught mq+no-data-flush\nsetup create /s\nsetup write /s 0 8192 1\n\
               write /s 0 4096 2\nsfr /s 0 0\nfdatasync /s\n";
    let (code, out) = run_file(sfr, &["-m", "mq", "-p", "flash-vwc", "--fault", "no-data-flush"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("caught (expected)"), "{out}");
}

#[test]
fn a_descriptor_syncs_its_file_under_its_current_name_and_nothing_once_nameless() {
    let rec = record(&workload("fd_unlinked"), &config(ModeName::Classic, "flash-vwc")).expect("record");
    let promised = |op: &str| -> Vec<(String, usize)> {
        files_promised(&rec, op)
            .into_iter()
            .map(|(p, c)| (p, c.len()))
            .collect()
    };
    assert_eq!(promised("fdfsync 2"), vec![("/b".to_string(), 4096)]);
    // The unlinked file's fsync: its data is visible nowhere.
    assert!(
        rec.promises.iter().all(|p| p.op != "fdfsync 1"),
        "{:?}",
        rec.promises
    );
    // After the rename, through the same descriptor: the new name.
    assert_eq!(promised("fdfdatasync 2"), vec![("/c".to_string(), 4196)]);
    assert!(rec.refused.is_empty(), "{:?}", rec.refused);
    // fstat agreed with the model (else the recording fails), and a
    // descriptor never opened is refused.
    let w = crashfuzz::parse("f", "setup create /a\nfdwrite 4 0 1 1\nclose 4\nsync\n").expect("parse");
    let rec = record(&w, &config(ModeName::Mq, "optane-905p")).expect("record");
    assert_eq!(rec.refused.len(), 2, "{:?}", rec.refused);
    assert!(
        rec.refused[0].1.contains("descriptor 4 is not open (EBADF)"),
        "{:?}",
        rec.refused
    );
}
