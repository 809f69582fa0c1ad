//! SIGKILL of `mqfs mount` in the middle of a write-heavy run is a power
//! failure of the simulated machine: the next mount recovers to a state
//! that passes fsck and holds every byte an fsync had acknowledged.

mod common;

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{fsck_ok, mkfs, Mount, TempDir};

/// Writers, each appending to its own files.
const WRITERS: usize = 3;
/// Files per writer (a new one every this many blocks).
const BLOCKS_PER_FILE: u64 = 96;
/// Acknowledged fsyncs (all writers) before the kill.
const KILL_AFTER: u64 = 400;

/// Block `i` of file `f` of writer `w`: recognisable anywhere.
fn block(w: usize, f: u64, i: u64) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    for (k, x) in b.iter_mut().enumerate() {
        *x = (w as u64 * 131 + f * 31 + i * 7 + k as u64 / 8) as u8;
    }
    b[..24].copy_from_slice(&[w as u64, f, i].map(u64::to_le_bytes).concat());
    b
}

fn path(root: &Path, w: usize, f: u64) -> PathBuf {
    root.join(format!("w{w}/file{f}"))
}

/// Appends 4 KiB blocks with an fsync after each (and an fsync of the
/// directory after each new file) until a write fails; `acked[w]` counts
/// the blocks whose fsync returned.
fn writer(root: PathBuf, w: usize, acked: Arc<Vec<AtomicU64>>, total: Arc<AtomicU64>, stop: Arc<AtomicBool>) {
    let dir = root.join(format!("w{w}"));
    let run = || -> std::io::Result<()> {
        std::fs::create_dir(&dir)?;
        File::open(&root)?.sync_all()?;
        let mut n = 0u64;
        loop {
            let (f, i) = (n / BLOCKS_PER_FILE, n % BLOCKS_PER_FILE);
            let mut file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path(&root, w, f))?;
            if i == 0 {
                file.sync_all()?;
                File::open(&dir)?.sync_all()?;
            }
            file.write_all(&block(w, f, i))?;
            file.sync_all()?;
            n += 1;
            acked[w].store(n, Ordering::SeqCst);
            total.fetch_add(1, Ordering::SeqCst);
            if stop.load(Ordering::SeqCst) && n > 4 * BLOCKS_PER_FILE {
                return Ok(());
            }
        }
    };
    // The mount dies under the writer: its error ends the run.
    let _ = run();
}

/// Every acknowledged block of writer `w` is on the remounted image.
fn check_writer(root: &Path, w: usize, acked: u64) {
    let mut n = 0;
    for f in 0..acked.div_ceil(BLOCKS_PER_FILE) {
        let mut data = Vec::new();
        File::open(path(root, w, f))
            .unwrap_or_else(|e| panic!("writer {w} file {f} (acked {acked} blocks): {e}"))
            .read_to_end(&mut data)
            .unwrap();
        let want = (acked - f * BLOCKS_PER_FILE).min(BLOCKS_PER_FILE);
        assert!(
            data.len() as u64 >= want * 4096,
            "writer {w} file {f}: {} bytes, {want} blocks were fsynced",
            data.len()
        );
        for i in 0..want {
            let got = &data[(i * 4096) as usize..((i + 1) * 4096) as usize];
            assert!(
                got == block(w, f, i).as_slice(),
                "writer {w} file {f} block {i} differs"
            );
            n += 1;
        }
    }
    assert_eq!(n, acked);
}

fn killed_mid_run_recovers(mode: &str, profile: &str) {
    let t = TempDir::new(&format!("kill-{mode}-{profile}"));
    let img = mkfs(
        &t,
        "img",
        &[
            "--size",
            "128M",
            "--mode",
            mode,
            "--profile",
            profile,
            "--queues",
            "2",
        ],
    );
    let mnt = t.dir("mnt");
    let m = Mount::start(&img, &mnt, &[]);
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..WRITERS).map(|_| AtomicU64::new(0)).collect());
    let total = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (root, acked, total, stop) = (m.dir.clone(), acked.clone(), total.clone(), stop.clone());
            std::thread::spawn(move || writer(root, w, acked, total, stop))
        })
        .collect();
    let start = Instant::now();
    while total.load(Ordering::SeqCst) < KILL_AFTER {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "writers stalled: {}",
            m.stderr()
        );
        std::thread::sleep(Duration::from_millis(2));
    }
    // The writers are still writing: the kill lands mid-operation.
    m.kill();
    stop.store(true, Ordering::SeqCst);
    for th in threads {
        th.join().unwrap();
    }
    let acked: Vec<u64> = acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
    assert!(acked.iter().sum::<u64>() >= KILL_AFTER);
    // fsck recovers in memory first (the image is not changed).
    let report = fsck_ok(&img);
    assert!(report.contains("0 errors"), "{report}");
    let m = Mount::start(&img, &mnt, &[]);
    for (w, a) in acked.iter().enumerate() {
        check_writer(&m.dir, w, *a);
    }
    m.unmount();
    let report = fsck_ok(&img);
    assert!(!report.contains("not unmounted cleanly"), "{report}");
}

#[test]
fn sigkill_mid_run_classic_recovers_every_fsynced_byte() {
    killed_mid_run_recovers("classic", "optane-905p");
}

#[test]
fn sigkill_mid_run_horae_recovers_every_fsynced_byte() {
    killed_mid_run_recovers("horae", "optane-905p");
}

#[test]
fn sigkill_mid_run_mq_recovers_every_fsynced_byte() {
    killed_mid_run_recovers("mq", "optane-905p");
}

/// A drive whose volatile cache loses what was not flushed, and one whose
/// protected cache keeps it: the files must follow the drive.
#[test]
fn sigkill_mid_run_with_write_caches_recovers_every_fsynced_byte() {
    killed_mid_run_recovers("mq", "flash-vwc");
    killed_mid_run_recovers("classic", "intel-750");
}
