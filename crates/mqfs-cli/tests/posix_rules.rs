//! POSIX rules a conformance suite (pjdfstest's categories: chmod, chown,
//! link, mkdir, mkfifo, mknod, open, rename, rmdir, symlink, truncate,
//! ftruncate, unlink, utimensat) checks through a mount, as root, in every
//! journaling mode, that no other test covered:
//!
//! - timestamps: each call that POSIX says marks a file's or a directory's
//!   times for update moves them, as a program sees it after sleeping a
//!   second (the suites compare whole seconds, so the file system's clock
//!   must run while the simulation idles between requests, M17);
//! - errnos the mount gives for the path and type rules (ENAMETOOLONG,
//!   ELOOP, ENOTDIR, EISDIR, EEXIST, ENOTEMPTY, EINVAL, EPERM), with the
//!   values POSIX.1-2017 and the Linux man pages give (cited at each).
// The raw system calls whose errno is the point (mknod, utimensat, calls
// std has no wrapper for or maps errors of).
#![allow(unsafe_code)]

mod common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{fsck_ok, mkfs, Mount, TempDir, MODES};

/// (atime, mtime, ctime) in whole seconds, of the link itself.
fn times(p: &Path) -> (i64, i64, i64) {
    let m = std::fs::symlink_metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    (m.atime(), m.mtime(), m.ctime())
}

fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// A system call to make, returning its result.
type Call = Box<dyn Fn() -> libc::c_int>;

/// open(2), closing what it opened; the result is open's.
fn open_close(p: &CString, flags: libc::c_int, mode: libc::c_uint) -> libc::c_int {
    // SAFETY: `p` is a NUL-terminated string living across the call; the
    // descriptor, if any, is ours to close.
    unsafe {
        let fd = libc::open(p.as_ptr(), flags, mode);
        if fd >= 0 {
            libc::close(fd);
        }
        fd
    }
}

/// The errno of a call returning -1, or 0.
fn errno_of(r: libc::c_int) -> i32 {
    if r < 0 {
        std::io::Error::last_os_error().raw_os_error().unwrap_or(-1)
    } else {
        0
    }
}

/// Runs `f` on a fresh mount of every journaling mode, then unmounts and
/// checks the image.
fn each_mode(name: &str, f: impl Fn(&Mount)) {
    for mode in MODES {
        let t = TempDir::new(&format!("posix-{name}-{mode}"));
        let img = mkfs(&t, "img", &["--size", "64M", "--mode", mode, "--queues", "2"]);
        let m = Mount::start(&img, &t.dir("mnt"), &[]);
        f(&m);
        m.unmount();
        fsck_ok(&img);
    }
}

/// What a change must have moved: the times of `path` before it.
struct Before {
    path: PathBuf,
    what: &'static str,
    was: (i64, i64, i64),
    /// Which of (atime, mtime, ctime) must be later.
    later: (bool, bool, bool),
}

fn before(path: PathBuf, what: &'static str, later: (bool, bool, bool)) -> Before {
    let was = times(&path);
    Before {
        path,
        what,
        was,
        later,
    }
}

impl Before {
    fn check(&self, mode: &Path) {
        let now = times(&self.path);
        let (a, m, c) = self.later;
        let msg = format!("{:?} {}: {:?} -> {:?}", mode, self.what, self.was, now);
        if a {
            assert!(now.0 > self.was.0, "atime: {msg}");
        }
        if m {
            assert!(now.1 > self.was.1, "mtime: {msg}");
        }
        if c {
            assert!(now.2 > self.was.2, "ctime: {msg}");
        }
    }
}

const MC: (bool, bool, bool) = (false, true, true);
const C: (bool, bool, bool) = (false, false, true);

/// Every call below marks the times POSIX.1-2017 names for update:
/// chmod(2) and chown(2) "shall mark for update the last file status
/// change timestamp"; link(2) the file's ctime and the directory's mtime
/// and ctime; unlink(2) and rmdir(2) the directory's mtime and ctime (and
/// the file's ctime if links remain); rename(2) both directories' mtime
/// and ctime (and, on Linux, the renamed file's ctime, `ext4_rename`);
/// truncate(2) and ftruncate(2) that change the size, and open(2) with
/// `O_TRUNC` of an existing file, the mtime and ctime; mkdir(2),
/// mkfifo(3), mknod(2), symlink(2) and open(2) with `O_CREAT` the
/// parent's mtime and ctime; write(2) the mtime and ctime; utimensat(2)
/// with NULL times all three (to now).
#[test]
fn calls_mark_the_times_posix_names_a_second_later() {
    each_mode("times", |m| {
        let d = m.join("d");
        std::fs::create_dir(&d).unwrap();
        let file = |n: &str| {
            let p = d.join(n);
            std::fs::write(&p, b"data").unwrap();
            p
        };
        let (chmod, chown, linked, unlinked) =
            (file("chmod"), file("chown"), file("linked"), file("unlinked"));
        let (trunc, otrunc, written, touched) =
            (file("trunc"), file("otrunc"), file("written"), file("touched"));
        std::fs::write(&otrunc, b"").unwrap();
        std::fs::hard_link(&unlinked, d.join("unlinked2")).unwrap();
        let dirs: Vec<PathBuf> = [
            "mkdir", "mkfifo", "mknod", "symlink", "create", "rmdir", "unlink", "link", "rename",
        ]
        .iter()
        .map(|n| {
            let p = d.join(format!("in-{n}"));
            std::fs::create_dir(&p).unwrap();
            p
        })
        .collect();
        std::fs::create_dir(dirs[5].join("gone")).unwrap();
        std::fs::write(dirs[6].join("gone"), b"x").unwrap();
        std::fs::write(dirs[8].join("from"), b"x").unwrap();
        let checks = vec![
            before(chmod.clone(), "chmod", C),
            before(chown.clone(), "chown", C),
            before(linked.clone(), "link (file)", C),
            before(unlinked.clone(), "unlink (file with a link left)", C),
            before(trunc.clone(), "truncate", MC),
            before(otrunc.clone(), "open O_TRUNC of an empty file", MC),
            before(written.clone(), "write", MC),
            before(touched.clone(), "utimensat NULL", (true, true, true)),
            before(dirs[0].clone(), "mkdir (parent)", MC),
            before(dirs[1].clone(), "mkfifo (parent)", MC),
            before(dirs[2].clone(), "mknod (parent)", MC),
            before(dirs[3].clone(), "symlink (parent)", MC),
            before(dirs[4].clone(), "open O_CREAT (parent)", MC),
            before(dirs[5].clone(), "rmdir (parent)", MC),
            before(dirs[6].clone(), "unlink (parent)", MC),
            before(dirs[7].clone(), "link (parent)", MC),
            before(dirs[8].clone(), "rename (parent)", MC),
            before(dirs[8].join("from"), "rename (file)", C),
        ];
        std::thread::sleep(Duration::from_millis(1100));
        std::fs::set_permissions(&chmod, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
        std::os::unix::fs::chown(&chown, Some(5), Some(6)).unwrap();
        std::fs::hard_link(&linked, dirs[7].join("l")).unwrap();
        std::fs::remove_file(d.join("unlinked2")).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&trunc)
            .unwrap()
            .set_len(1)
            .unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(&otrunc)
            .unwrap();
        std::fs::write(&written, b"new").unwrap();
        let touched_c = c(&touched);
        // SAFETY: a NUL-terminated path and a NULL times pointer.
        let r = unsafe { libc::utimensat(libc::AT_FDCWD, touched_c.as_ptr(), std::ptr::null(), 0) };
        assert_eq!(r, 0);
        std::fs::create_dir(dirs[0].join("x")).unwrap();
        // SAFETY: NUL-terminated paths living across the calls.
        unsafe {
            assert_eq!(libc::mkfifo(c(&dirs[1].join("x")).as_ptr(), 0o644), 0);
            assert_eq!(
                libc::mknod(
                    c(&dirs[2].join("x")).as_ptr(),
                    libc::S_IFCHR | 0o644,
                    libc::makedev(1, 3)
                ),
                0
            );
        }
        std::os::unix::fs::symlink("target", dirs[3].join("x")).unwrap();
        std::fs::write(dirs[4].join("x"), b"").unwrap();
        std::fs::remove_dir(dirs[5].join("gone")).unwrap();
        std::fs::remove_file(dirs[6].join("gone")).unwrap();
        std::fs::rename(dirs[8].join("from"), dirs[8].join("to")).unwrap();
        let mut checks = checks;
        checks.last_mut().unwrap().path = dirs[8].join("to");
        for b in &checks {
            b.check(m.join("").as_path());
        }
    });
}

/// The errnos of the path and type rules, as the mount gives them:
/// a component over 255 bytes is ENAMETOOLONG and one of 255 works
/// (`NAME_MAX`, path_resolution(7)); a symlink loop is ELOOP; a file used
/// as a directory ENOTDIR; rmdir(2) of a non-empty directory ENOTEMPTY
/// (Linux; POSIX allows EEXIST) and of a file ENOTDIR; unlink(2) of a
/// directory EISDIR (Linux); mkdir(2) and symlink(2) over an existing
/// name and open(2) with `O_CREAT | O_EXCL` EEXIST; link(2) to a
/// directory EPERM; rename(2) of a directory into its own subtree EINVAL,
/// of a directory over a non-empty one ENOTEMPTY, of a file over a
/// directory EISDIR, of a directory over a file ENOTDIR; open(2) of a
/// directory for writing EISDIR; truncate(2) of a directory EISDIR and
/// to a negative length EINVAL; ftruncate(2) of a descriptor not open
/// for writing EINVAL.
#[test]
fn path_and_type_rules_give_posix_errnos() {
    each_mode("errnos", |m| {
        let p = |s: &str| c(&m.join(s));
        std::fs::create_dir(m.join("d")).unwrap();
        std::fs::create_dir(m.join("d/sub")).unwrap();
        std::fs::create_dir(m.join("full")).unwrap();
        std::fs::write(m.join("full/f"), b"x").unwrap();
        std::fs::create_dir(m.join("empty")).unwrap();
        std::fs::write(m.join("f"), b"x").unwrap();
        std::os::unix::fs::symlink("loop2", m.join("loop1")).unwrap();
        std::os::unix::fs::symlink("loop1", m.join("loop2")).unwrap();
        let long = "x".repeat(256);
        let max = "y".repeat(255);
        let cases: Vec<(&str, i32, Call)> = vec![
            ("create 256 bytes", libc::ENAMETOOLONG, {
                let q = p(&long);
                Box::new(move || open_close(&q, libc::O_CREAT | libc::O_WRONLY, 0o644))
            }),
            ("mkdir 256 bytes", libc::ENAMETOOLONG, {
                let q = p(&format!("d/{long}"));
                // SAFETY: a NUL-terminated path.
                Box::new(move || unsafe { libc::mkdir(q.as_ptr(), 0o755) })
            }),
            ("create 255 bytes", 0, {
                let q = p(&max);
                Box::new(move || open_close(&q, libc::O_CREAT | libc::O_WRONLY, 0o644))
            }),
            ("open a loop", libc::ELOOP, {
                let q = p("loop1");
                Box::new(move || open_close(&q, libc::O_RDONLY, 0))
            }),
            ("file as a directory", libc::ENOTDIR, {
                let q = p("f/x");
                // SAFETY: a NUL-terminated path.
                Box::new(move || unsafe { libc::mkdir(q.as_ptr(), 0o755) })
            }),
            ("rmdir non-empty", libc::ENOTEMPTY, {
                let q = p("full");
                // SAFETY: a NUL-terminated path.
                Box::new(move || unsafe { libc::rmdir(q.as_ptr()) })
            }),
            ("rmdir a file", libc::ENOTDIR, {
                let q = p("f");
                // SAFETY: a NUL-terminated path.
                Box::new(move || unsafe { libc::rmdir(q.as_ptr()) })
            }),
            ("unlink a directory", libc::EISDIR, {
                let q = p("empty");
                // SAFETY: a NUL-terminated path.
                Box::new(move || unsafe { libc::unlink(q.as_ptr()) })
            }),
            ("mkdir over a name", libc::EEXIST, {
                let q = p("f");
                // SAFETY: a NUL-terminated path.
                Box::new(move || unsafe { libc::mkdir(q.as_ptr(), 0o755) })
            }),
            ("symlink over a name", libc::EEXIST, {
                let (t, q) = (p("x"), p("d"));
                // SAFETY: NUL-terminated paths.
                Box::new(move || unsafe { libc::symlink(t.as_ptr(), q.as_ptr()) })
            }),
            ("O_CREAT|O_EXCL over a name", libc::EEXIST, {
                let q = p("f");
                Box::new(move || open_close(&q, libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY, 0o644))
            }),
            ("link a directory", libc::EPERM, {
                let (a, b) = (p("d"), p("d2"));
                // SAFETY: NUL-terminated paths.
                Box::new(move || unsafe { libc::link(a.as_ptr(), b.as_ptr()) })
            }),
            ("rename into its own subtree", libc::EINVAL, {
                let (a, b) = (p("d"), p("d/sub/d"));
                // SAFETY: NUL-terminated paths.
                Box::new(move || unsafe { libc::rename(a.as_ptr(), b.as_ptr()) })
            }),
            ("rename over a non-empty directory", libc::ENOTEMPTY, {
                let (a, b) = (p("empty"), p("full"));
                // SAFETY: NUL-terminated paths.
                Box::new(move || unsafe { libc::rename(a.as_ptr(), b.as_ptr()) })
            }),
            ("rename a file over a directory", libc::EISDIR, {
                let (a, b) = (p("f"), p("empty"));
                // SAFETY: NUL-terminated paths.
                Box::new(move || unsafe { libc::rename(a.as_ptr(), b.as_ptr()) })
            }),
            ("rename a directory over a file", libc::ENOTDIR, {
                let (a, b) = (p("empty"), p("f"));
                // SAFETY: NUL-terminated paths.
                Box::new(move || unsafe { libc::rename(a.as_ptr(), b.as_ptr()) })
            }),
            ("open a directory for writing", libc::EISDIR, {
                let q = p("d");
                Box::new(move || open_close(&q, libc::O_WRONLY, 0))
            }),
            ("truncate a directory", libc::EISDIR, {
                let q = p("d");
                // SAFETY: a NUL-terminated path.
                Box::new(move || unsafe { libc::truncate(q.as_ptr(), 0) })
            }),
            ("truncate to a negative length", libc::EINVAL, {
                let q = p("f");
                // SAFETY: a NUL-terminated path.
                Box::new(move || unsafe { libc::truncate(q.as_ptr(), -1) })
            }),
            ("ftruncate read-only", libc::EINVAL, {
                let q = p("f");
                // SAFETY: a NUL-terminated path; the descriptor is closed.
                Box::new(move || unsafe {
                    let fd = libc::open(q.as_ptr(), libc::O_RDONLY);
                    let r = libc::ftruncate(fd, 0);
                    let e = *libc::__errno_location();
                    libc::close(fd);
                    *libc::__errno_location() = e;
                    r
                })
            }),
        ];
        let mut wrong = Vec::new();
        for (what, want, call) in &cases {
            let got = errno_of(call());
            if got != *want {
                wrong.push(format!("{what}: errno {got}, want {want}"));
            }
        }
        assert!(wrong.is_empty(), "{:?}: {wrong:#?}", m.join(""));
        // Nothing the refused calls touched changed.
        assert!(m.join("full/f").exists() && m.join("d/sub").is_dir() && m.join("f").is_file());
        assert_eq!(std::fs::read(m.join("f")).unwrap(), b"x");
    });
}
