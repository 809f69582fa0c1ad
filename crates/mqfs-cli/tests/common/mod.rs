//! Helpers for the tests that run `mqfs` and real programs on a FUSE
//! mount: required tools, temporary directories, images, and a mount that
//! is always unmounted (a drop guard).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The journaling modes every real-program test runs in.
pub const MODES: [&str; 3] = ["classic", "horae", "mq"];

/// The `mqfs` binary under test.
pub fn mqfs() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mqfs"))
}

/// Fails (never skips) if `tool` is not installed.
pub fn require(tool: &str) {
    let found =
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()));
    assert!(
        found,
        "{tool} is not installed: run scripts/install-deps.sh (it installs fuse3, fio and sqlite3) \
         before these tests"
    );
    assert!(
        Path::new("/dev/fuse").exists(),
        "/dev/fuse is missing: FUSE tests need it"
    );
}

/// A temporary directory, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    /// A new empty directory named after `name`.
    pub fn new(name: &str) -> TempDir {
        let d = std::env::temp_dir().join(format!("mqfs-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        TempDir(d)
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A path inside it.
    pub fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }

    /// A new directory inside it.
    pub fn dir(&self, p: &str) -> PathBuf {
        let d = self.0.join(p);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("MQFS_KEEP").is_some() {
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs a command and returns its output (whatever its status).
pub fn output(cmd: &mut Command) -> Output {
    cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

/// Runs a command that must succeed; returns its stdout.
pub fn ok(cmd: &mut Command) -> String {
    let o = output(cmd);
    assert!(
        o.status.success(),
        "{cmd:?} failed ({}):\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Makes an image `dir/name` with `args` after the image path.
pub fn mkfs(dir: &TempDir, name: &str, args: &[&str]) -> PathBuf {
    let img = dir.join(name);
    ok(mqfs().arg("mkfs").arg(&img).args(args));
    img
}

/// `mqfs fsck IMAGE` passes.
pub fn fsck_ok(img: &Path) -> String {
    ok(mqfs().arg("fsck").arg(img))
}

/// The three files of an image, for "untouched" checks.
pub fn image_bytes(img: &Path) -> Vec<Vec<u8>> {
    [".pmr", ".hdr", ""]
        .iter()
        .map(|ext| {
            let mut p = img.as_os_str().to_owned();
            p.push(ext);
            std::fs::read(PathBuf::from(p)).unwrap_or_default()
        })
        .collect()
}

/// True if `dir` is a mountpoint now.
pub fn is_mounted(dir: &Path) -> bool {
    let Ok(dir) = dir.canonicalize() else { return false };
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(4) == Some(dir.to_str().unwrap_or("")))
}

/// Waits for `child` to exit, at most `limit`.
fn wait_for(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

/// Runs `fusermount3 -u` until it works (a mount may be busy for a moment
/// after a program exits).
fn fusermount_u(dir: &Path) -> bool {
    for _ in 0..100 {
        if !is_mounted(dir) {
            return true;
        }
        let o = Command::new("fusermount3").arg("-u").arg(dir).output();
        if o.is_ok_and(|o| o.status.success()) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    !is_mounted(dir)
}

/// A running `mqfs mount`; unmounted on drop whatever happens.
pub struct Mount {
    child: Option<Child>,
    /// The mountpoint.
    pub dir: PathBuf,
    out: PathBuf,
    err: PathBuf,
}

impl Mount {
    /// Mounts `img` on `dir` (with `extra` arguments) and waits until it
    /// serves.
    pub fn start(img: &Path, dir: &Path, extra: &[&str]) -> Mount {
        require("fusermount3");
        let out = dir.with_extension("out");
        let err = dir.with_extension("err");
        let child = mqfs()
            .arg("mount")
            .arg(img)
            .arg(dir)
            .args(extra)
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let mut m = Mount {
            child: Some(child),
            dir: dir.to_path_buf(),
            out,
            err,
        };
        let start = Instant::now();
        while !dir.join(".mqfs/stats").exists() {
            if let Some(s) = m.child.as_mut().and_then(|c| c.try_wait().unwrap()) {
                panic!("mqfs mount exited ({s}): {}", m.stderr());
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "mount did not come up: {}",
                m.stderr()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        m
    }

    /// The mount process's id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// What the mount printed on stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// A path inside the mount.
    pub fn join(&self, p: &str) -> PathBuf {
        self.dir.join(p)
    }

    /// The live figures as (name, value) pairs.
    pub fn stats(&self) -> Vec<(String, u64)> {
        parse_stats(&std::fs::read_to_string(self.join(".mqfs/stats")).unwrap())
    }

    /// Unmounts with `fusermount3 -u`; the mount process must exit 0.
    /// Returns what it printed on stdout (the final figures).
    pub fn unmount(mut self) -> String {
        assert!(fusermount_u(&self.dir), "cannot unmount {}", self.dir.display());
        self.finish()
    }

    /// Sends `signal` (by name, e.g. "INT") to the mount process, which
    /// must unmount and exit 0; returns its stdout.
    pub fn signal(mut self, signal: &str) -> String {
        ok(Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid().to_string()));
        self.finish()
    }

    fn finish(&mut self) -> String {
        let mut child = self.child.take().unwrap();
        let status = wait_for(&mut child, Duration::from_secs(120)).expect("mqfs mount did not exit");
        assert!(
            status.success(),
            "mqfs mount exited with {status}: {}",
            self.stderr()
        );
        assert!(!is_mounted(&self.dir));
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// SIGKILLs the mount process (a power failure of the simulated
    /// machine) and detaches the dead mount (lazily: files may still be
    /// open on it).
    pub fn kill(mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        ok(Command::new("fusermount3").arg("-u").arg("-z").arg(&self.dir));
        assert!(!is_mounted(&self.dir), "cannot remove the dead mount");
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            fusermount_u(&self.dir);
            if wait_for(&mut child, Duration::from_secs(60)).is_none() {
                let _ = child.kill();
                let _ = child.wait();
                fusermount_u(&self.dir);
            }
        }
    }
}

/// Parses `name value` lines.
pub fn parse_stats(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// The value of `name` in parsed figures.
pub fn stat(stats: &[(String, u64)], name: &str) -> u64 {
    stats
        .iter()
        .find(|(k, _)| k == name)
        .unwrap_or_else(|| panic!("no {name} in {stats:?}"))
        .1
}
