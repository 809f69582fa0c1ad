//! Permissions on a mount other users reach: `mqfs mount -o allow_other`
//! without `default_permissions`, so every refusal below is MQFS's own
//! (`mqfs::perm`), not the kernel's. The test runs as root and makes each
//! system call in a child process that switched to another user (fork,
//! then `setgroups`, `setresgid`, `setresuid`), whose exit status is the
//! call's errno. Each family of rules runs in every journaling mode; the
//! expected errnos are those POSIX and the Linux man pages give (cited at
//! each test).
// fork(2) and the raw set*id(2) system calls of the child: see `as_user`.
#![allow(unsafe_code)]

mod common;

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use common::{mkfs, Mount, TempDir, MODES};
use libc::{c_int, EACCES, ENODATA, EPERM};

/// A user to act as.
#[derive(Clone, Debug)]
struct User {
    uid: u32,
    gid: u32,
    groups: Vec<u32>,
    umask: u32,
}

/// A user whose only group is its own.
fn user(uid: u32, gid: u32) -> User {
    User {
        uid,
        gid,
        groups: Vec::new(),
        umask: 0,
    }
}

const U: u32 = 1001;
const V: u32 = 1002;
/// A group neither U nor V is in unless told.
const G: u32 = 1003;

/// The path as a C string (made before the fork: the child allocates
/// nothing).
fn c(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// Runs `op` as `u` in a child process; returns 0 if it returned 0 or
/// more, else the errno it left.
fn as_user(u: &User, op: impl FnOnce() -> c_int) -> i32 {
    let groups = u.groups.clone();
    // SAFETY: fork in a multi-threaded test: the child only makes raw
    // system calls on memory prepared before the fork (`groups`, the C
    // strings `op` captured) and leaves with _exit, never touching a lock
    // another thread may have held.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        // SAFETY: see above; the pointers are valid for the lengths given.
        unsafe {
            let ok = libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) == 0
                && libc::syscall(libc::SYS_setresgid, u.gid, u.gid, u.gid) == 0
                && libc::syscall(libc::SYS_setresuid, u.uid, u.uid, u.uid) == 0;
            if !ok {
                libc::_exit(255);
            }
            libc::umask(u.umask);
            let r = op();
            libc::_exit(if r < 0 { *libc::__errno_location() } else { 0 });
        }
    }
    let mut status = 0;
    // SAFETY: waits for the child just forked; `status` is a valid int.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(libc::WIFEXITED(status), "child died: {status}");
    let code = libc::WEXITSTATUS(status);
    assert_ne!(code, 255, "cannot become {u:?}");
    code
}

/// open(2) `p` with `flags` (and `mode` if it creates), closing it again.
fn open(p: &CString, flags: c_int, mode: u32) -> c_int {
    // SAFETY: `p` is a NUL-terminated string living across the call.
    let fd = unsafe { libc::open(p.as_ptr(), flags, mode) };
    if fd >= 0 {
        // SAFETY: closes the descriptor just opened.
        unsafe { libc::close(fd) };
    }
    fd
}

/// A file system call on one path, by name.
fn call1(op: &str, p: &CString, arg: u32) -> c_int {
    let p = p.as_ptr();
    // SAFETY: `p` is a NUL-terminated string that outlives the call; the
    // other arguments are plain numbers.
    unsafe {
        match op {
            "mkdir" => libc::mkdir(p, arg),
            "rmdir" => libc::rmdir(p),
            "unlink" => libc::unlink(p),
            "mkfifo" => libc::mknod(p, libc::S_IFIFO | arg, 0),
            "chmod" => libc::chmod(p, arg),
            "access" => libc::access(p, arg as c_int),
            "truncate" => libc::truncate(p, arg as libc::off_t),
            "stat" => {
                let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
                libc::stat(p, st.as_mut_ptr())
            }
            "opendir" => open_raw(p, libc::O_RDONLY | libc::O_DIRECTORY),
            _ => unreachable!("no call {op}"),
        }
    }
}

/// open(2) on a raw path, closed again.
///
/// # Safety
/// `p` must be a NUL-terminated string.
unsafe fn open_raw(p: *const libc::c_char, flags: c_int) -> c_int {
    // SAFETY: the caller's promise.
    let fd = unsafe { libc::open(p, flags) };
    if fd >= 0 {
        // SAFETY: closes the descriptor just opened.
        unsafe { libc::close(fd) };
    }
    fd
}

/// A file system call on two paths, by name.
fn call2(op: &str, a: &CString, b: &CString) -> c_int {
    let (a, b) = (a.as_ptr(), b.as_ptr());
    // SAFETY: both are NUL-terminated strings that outlive the call.
    unsafe {
        match op {
            "rename" => libc::rename(a, b),
            "link" => libc::link(a, b),
            "symlink" => libc::symlink(a, b),
            _ => unreachable!("no call {op}"),
        }
    }
}

/// chown(2); `None` is -1 (unchanged).
fn chown(p: &CString, uid: Option<u32>, gid: Option<u32>) -> c_int {
    // SAFETY: `p` is a NUL-terminated string that outlives the call.
    unsafe { libc::chown(p.as_ptr(), uid.unwrap_or(u32::MAX), gid.unwrap_or(u32::MAX)) }
}

/// utimensat(2) with `times` (`None`: a NULL pointer).
fn utimensat(p: &CString, times: Option<[libc::timespec; 2]>) -> c_int {
    let ptr = times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
    // SAFETY: `p` is a NUL-terminated string and `ptr` NULL or two
    // timespecs, both outliving the call.
    unsafe { libc::utimensat(libc::AT_FDCWD, p.as_ptr(), ptr, 0) }
}

/// Opens `p` for writing and writes one byte at its end.
fn append_byte(p: &CString) -> c_int {
    // SAFETY: `p` is a NUL-terminated string; the buffer is one byte.
    unsafe {
        let fd = libc::open(p.as_ptr(), libc::O_WRONLY | libc::O_APPEND);
        if fd < 0 {
            return fd;
        }
        let n = libc::write(fd, b"x".as_ptr().cast(), 1);
        libc::close(fd);
        n as c_int
    }
}

fn ts(sec: i64, nsec: i64) -> libc::timespec {
    libc::timespec {
        tv_sec: sec,
        tv_nsec: nsec,
    }
}

/// A fresh image mounted with `allow_other` in `mode`, with a world-
/// writable directory `w` for the users to work in.
fn mounted(t: &TempDir, mode: &str) -> Mount {
    let img = mkfs(t, "img", &["--size", "64M", "--mode", mode, "--queues", "2"]);
    let m = Mount::start(&img, &t.dir("mnt"), &["-o", "allow_other"]);
    std::fs::create_dir(m.join("w")).unwrap();
    set_mode(&m.join("w"), 0o777);
    m
}

fn set_mode(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn set_owner(p: &Path, uid: u32, gid: u32) {
    std::os::unix::fs::chown(p, Some(uid), Some(gid)).unwrap();
}

/// A root-made file `p` with `mode`, owned by `uid`:`gid`.
fn file(p: &Path, mode: u32, uid: u32, gid: u32) -> CString {
    std::fs::write(p, b"data").unwrap();
    set_owner(p, uid, gid);
    set_mode(p, mode);
    c(p)
}

fn mode_of(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

/// Runs `family` in every journaling mode on a fresh mount.
fn each_mode(name: &str, family: impl Fn(&Mount)) {
    for mode in MODES {
        let t = TempDir::new(&format!("perm-{name}-{mode}"));
        let m = mounted(&t, mode);
        family(&m);
        m.unmount();
    }
}

/// open(2) EACCES: "The requested access to the file is not allowed";
/// one class of bits decides (POSIX.1-2017 4.5); O_TRUNC needs write
/// permission; root reads and writes anything but executes only what has
/// an x bit (access(2), execve(2) EACCES).
#[test]
fn open_modes_follow_the_callers_class() {
    each_mode("open", |m| {
        let u = user(U, U);
        let p = m.join("w/f");
        // Owned by root, others may read only.
        let f = file(&p, 0o604, 0, 0);
        assert_eq!(as_user(&u, || open(&f, libc::O_RDONLY, 0)), 0);
        assert_eq!(as_user(&u, || open(&f, libc::O_WRONLY, 0)), EACCES);
        assert_eq!(as_user(&u, || open(&f, libc::O_RDWR, 0)), EACCES);
        assert_eq!(
            as_user(&u, || open(&f, libc::O_RDONLY | libc::O_TRUNC, 0)),
            EACCES
        );
        assert_eq!(
            std::fs::metadata(&p).unwrap().len(),
            4,
            "a refused O_TRUNC truncated"
        );
        // The owner class decides for the owner, though others may write.
        set_owner(&p, U, U);
        set_mode(&p, 0o406);
        assert_eq!(as_user(&u, || open(&f, libc::O_RDONLY, 0)), 0);
        assert_eq!(as_user(&u, || open(&f, libc::O_WRONLY, 0)), EACCES);
        assert_eq!(as_user(&user(V, V), || open(&f, libc::O_WRONLY, 0)), 0);
        // The group class, through a supplementary group.
        set_owner(&p, 0, G);
        set_mode(&p, 0o060);
        let member = User {
            groups: vec![G],
            ..user(V, V)
        };
        assert_eq!(as_user(&member, || open(&f, libc::O_RDWR, 0)), 0);
        assert_eq!(as_user(&user(V, V), || open(&f, libc::O_RDONLY, 0)), EACCES);
        assert_eq!(as_user(&user(V, G), || open(&f, libc::O_RDONLY, 0)), 0);
        // O_TRUNC with write permission truncates.
        assert_eq!(
            as_user(&member, || open(&f, libc::O_WRONLY | libc::O_TRUNC, 0)),
            0
        );
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 0);
        // access(2) answers the same rules.
        assert_eq!(
            as_user(&member, || call1(
                "access",
                &f,
                libc::R_OK as u32 | libc::W_OK as u32
            )),
            0
        );
        assert_eq!(
            as_user(&member, || call1("access", &f, libc::X_OK as u32)),
            EACCES
        );
        assert_eq!(as_user(&u, || call1("access", &f, libc::F_OK as u32)), 0);
        assert_eq!(as_user(&u, || call1("access", &f, libc::R_OK as u32)), EACCES);
        // Root: anything but executing a file without any x bit.
        set_mode(&p, 0o000);
        let root = user(0, 0);
        assert_eq!(as_user(&root, || open(&f, libc::O_RDWR, 0)), 0);
        assert_eq!(as_user(&root, || call1("access", &f, libc::X_OK as u32)), EACCES);
        set_mode(&p, 0o010);
        assert_eq!(as_user(&root, || call1("access", &f, libc::X_OK as u32)), 0);
        // execve(2) EACCES: a program others may read but only its owner
        // execute (the kernel sees an x bit and leaves the check to the
        // open it makes of the program); executing needs x, not r.
        let prog = m.join("w/prog");
        std::fs::write(&prog, b"#!/bin/true\n").unwrap();
        set_mode(&prog, 0o704);
        let pc = c(&prog);
        let argv = [pc.as_ptr(), std::ptr::null()];
        // SAFETY: `pc` and `argv` (NULL-terminated) outlive the call.
        let exec = || unsafe { libc::execv(pc.as_ptr(), argv.as_ptr()) };
        assert_eq!(as_user(&u, exec), EACCES);
        set_mode(&prog, 0o711);
        assert_eq!(as_user(&u, exec), 0, "a permitted exec runs /bin/true");
    });
}

/// path_resolution(7): "If the process does not have search permission
/// on the current lookup directory, an EACCES error is returned"; a name
/// is made or removed only with write and search permission on its
/// directory (open(2), mkdir(2), mknod(2), symlink(2), link(2), unlink(2),
/// rmdir(2), rename(2) EACCES, both parents for rename, and write
/// permission on a directory moved to another parent).
#[test]
fn search_and_directory_write_permission() {
    each_mode("search", |m| {
        let u = user(U, U);
        let d = m.join("w/d");
        std::fs::create_dir(&d).unwrap();
        let f = file(&d.join("f"), 0o666, 0, 0);
        set_mode(&d, 0o700);
        // Root walked to d/f just now: the kernel must still ask.
        assert!(std::fs::metadata(d.join("f")).is_ok());
        assert_eq!(as_user(&u, || call1("stat", &f, 0)), EACCES);
        assert_eq!(as_user(&u, || open(&f, libc::O_RDONLY, 0)), EACCES);
        set_mode(&d, 0o711);
        assert_eq!(as_user(&u, || call1("stat", &f, 0)), 0, "search without read");
        assert_eq!(
            as_user(&u, || call1("opendir", &c(&d), 0)),
            EACCES,
            "reading needs read"
        );
        set_mode(&d, 0o744);
        assert_eq!(
            as_user(&u, || call1("stat", &f, 0)),
            EACCES,
            "read without search"
        );
        assert_eq!(as_user(&u, || call1("opendir", &c(&d), 0)), 0);
        // Making and removing names: write and search on the directory.
        let (x0, n) = (c(&d.join("x0")), c(&d.join("n")));
        let dx = c(&d.join("dx"));
        for (mode, want) in [(0o755, EACCES), (0o776, EACCES), (0o773, 0)] {
            set_mode(&d, 0o777);
            file(&d.join("x0"), 0o644, 0, 0);
            std::fs::create_dir_all(d.join("dx")).unwrap();
            set_mode(&d, mode);
            let creating: [(&str, &dyn Fn() -> c_int); 6] = [
                ("creat", &|| open(&n, libc::O_CREAT | libc::O_WRONLY, 0o644)),
                ("mkdir", &|| call1("mkdir", &n, 0o755)),
                ("mkfifo", &|| call1("mkfifo", &n, 0o644)),
                ("symlink", &|| call2("symlink", &f, &n)),
                ("link", &|| call2("link", &x0, &n)),
                ("rename", &|| call2("rename", &x0, &n)),
            ];
            for (name, op) in creating {
                assert_eq!(as_user(&u, op), want, "{name} in a {mode:o} directory");
                if want == 0 {
                    // Undo it (root), so that the next one makes `n` anew.
                    let np = d.join("n");
                    if np.is_dir() && !np.is_symlink() {
                        std::fs::remove_dir(&np).unwrap();
                    } else {
                        std::fs::remove_file(&np).unwrap();
                    }
                    file(&d.join("x0"), 0o644, 0, 0);
                }
            }
            assert_eq!(
                as_user(&u, || call1("unlink", &x0, 0)),
                want,
                "unlink in {mode:o}"
            );
            assert_eq!(as_user(&u, || call1("rmdir", &dx, 0)), want, "rmdir in {mode:o}");
        }
        // rename(2) needs write on both parents.
        set_mode(&d, 0o755);
        let mine = file(&m.join("w/mine"), 0o644, U, U);
        assert_eq!(
            as_user(&u, || call2("rename", &mine, &c(&d.join("mine")))),
            EACCES
        );
        set_mode(&d, 0o777);
        assert_eq!(as_user(&u, || call2("rename", &mine, &c(&d.join("mine")))), 0);
        // A directory moved to another parent needs write on itself.
        let e = m.join("w/e");
        std::fs::create_dir(&e).unwrap();
        set_mode(&e, 0o777);
        let moved = m.join("w/moved");
        std::fs::create_dir(&moved).unwrap();
        set_mode(&moved, 0o555);
        let (from, to) = (c(&moved), c(&e.join("moved")));
        assert_eq!(as_user(&u, || call2("rename", &from, &to)), EACCES);
        assert_eq!(
            as_user(&u, || call2("rename", &from, &c(&m.join("w/renamed")))),
            0
        );
    });
}

/// unlink(2), rmdir(2), rename(2) EPERM: "The directory containing
/// pathname has the sticky bit (S_ISVTX) set and the process's effective
/// UID is neither the UID of the file to be deleted nor that of the
/// directory containing it, and the process is not privileged".
#[test]
fn sticky_directory() {
    each_mode("sticky", |m| {
        let (u, v) = (user(U, U), user(V, V));
        let t = m.join("w/t");
        std::fs::create_dir(&t).unwrap();
        set_mode(&t, 0o1777);
        let (a, b) = (c(&t.join("a")), c(&t.join("b")));
        assert_eq!(as_user(&u, || open(&a, libc::O_CREAT | libc::O_WRONLY, 0o666)), 0);
        assert_eq!(as_user(&u, || call1("mkdir", &c(&t.join("ud")), 0o777)), 0);
        assert_eq!(as_user(&v, || call1("unlink", &a, 0)), EPERM);
        assert_eq!(as_user(&v, || call2("rename", &a, &b)), EPERM);
        assert_eq!(as_user(&v, || call1("rmdir", &c(&t.join("ud")), 0)), EPERM);
        // Replacing someone else's file is removing it.
        assert_eq!(as_user(&v, || open(&b, libc::O_CREAT | libc::O_WRONLY, 0o666)), 0);
        assert_eq!(as_user(&v, || call2("rename", &b, &a)), EPERM);
        // The file's owner may.
        assert_eq!(as_user(&u, || call2("rename", &a, &c(&t.join("a2")))), 0);
        // The directory's owner may.
        set_owner(&t, V, V);
        assert_eq!(as_user(&v, || call1("unlink", &c(&t.join("a2")), 0)), 0);
        assert_eq!(as_user(&v, || call1("rmdir", &c(&t.join("ud")), 0)), 0);
        // Root may.
        assert_eq!(as_user(&user(0, 0), || call1("unlink", &b, 0)), 0);
        // Without the sticky bit anyone with write and search may.
        set_mode(&t, 0o777);
        assert_eq!(as_user(&u, || open(&a, libc::O_CREAT | libc::O_WRONLY, 0o666)), 0);
        assert_eq!(as_user(&user(1005, 1005), || call1("unlink", &a, 0)), 0);
    });
}

/// open(2) and mkdir(2): a new file is owned by the caller's effective
/// uid and, in a set-group-ID directory, takes the directory's group (a
/// new directory is set-group-ID too), else the caller's group; the umask
/// clears bits; a non-member's set-group-ID request on a file in such a
/// directory is dropped (Linux `inode_init_owner`, `mode_strip_sgid`).
#[test]
fn new_files_take_the_caller_or_a_setgid_directory() {
    each_mode("owner", |m| {
        let u = User {
            umask: 0o027,
            ..user(U, U)
        };
        let plain = m.join("w/plain");
        std::fs::create_dir(&plain).unwrap();
        set_mode(&plain, 0o777);
        let f = c(&plain.join("f"));
        assert_eq!(as_user(&u, || open(&f, libc::O_CREAT | libc::O_WRONLY, 0o666)), 0);
        let md = std::fs::metadata(plain.join("f")).unwrap();
        assert_eq!((md.uid(), md.gid(), md.mode() & 0o7777), (U, U, 0o640));
        assert_eq!(as_user(&u, || call1("mkdir", &c(&plain.join("d")), 0o777)), 0);
        let md = std::fs::metadata(plain.join("d")).unwrap();
        assert_eq!((md.uid(), md.gid(), md.mode() & 0o7777), (U, U, 0o750));
        let sg = m.join("w/sg");
        std::fs::create_dir(&sg).unwrap();
        set_owner(&sg, 0, G);
        set_mode(&sg, 0o2777);
        let u = user(U, U);
        assert_eq!(
            as_user(&u, || open(
                &c(&sg.join("f")),
                libc::O_CREAT | libc::O_WRONLY,
                0o644
            )),
            0
        );
        let md = std::fs::metadata(sg.join("f")).unwrap();
        assert_eq!((md.uid(), md.gid(), md.mode() & 0o7777), (U, G, 0o644));
        assert_eq!(as_user(&u, || call1("mkdir", &c(&sg.join("d")), 0o755)), 0);
        let md = std::fs::metadata(sg.join("d")).unwrap();
        assert_eq!((md.uid(), md.gid(), md.mode() & 0o7777), (U, G, 0o2755));
        // A set-group-ID executable asked by a non-member loses the bit.
        assert_eq!(
            as_user(&u, || open(
                &c(&sg.join("x")),
                libc::O_CREAT | libc::O_WRONLY,
                0o2755
            )),
            0
        );
        assert_eq!(mode_of(&sg.join("x")), 0o755);
        let member = User {
            groups: vec![G],
            ..user(V, V)
        };
        assert_eq!(
            as_user(&member, || open(
                &c(&sg.join("y")),
                libc::O_CREAT | libc::O_WRONLY,
                0o2755
            )),
            0
        );
        assert_eq!(mode_of(&sg.join("y")), 0o2755);
        // Symlinks and special files follow the same ownership.
        assert_eq!(as_user(&u, || call2("symlink", &f, &c(&sg.join("l")))), 0);
        let md = std::fs::symlink_metadata(sg.join("l")).unwrap();
        assert_eq!((md.uid(), md.gid()), (U, G));
        assert_eq!(as_user(&u, || call1("mkfifo", &c(&sg.join("p")), 0o600)), 0);
        let md = std::fs::symlink_metadata(sg.join("p")).unwrap();
        assert_eq!((md.uid(), md.gid()), (U, G));
    });
}

/// chmod(2) EPERM: "The effective UID does not match the owner of the
/// file, and the process is not privileged"; a non-member's S_ISGID is
/// turned off without error. chown(2): "Only a privileged process may
/// change the owner of a file. The owner of a file may change the group
/// of the file to any group of which that owner is a member"; "When the
/// owner or group of an executable file is changed ... the S_ISUID and
/// S_ISGID mode bits are cleared ... root is treated like other users";
/// a non-group-executable file keeps S_ISGID.
#[test]
fn chown_and_chmod_rules() {
    each_mode("chown", |m| {
        let owner = User {
            groups: vec![G],
            ..user(U, U)
        };
        let v = user(V, V);
        let p = m.join("w/f");
        let f = file(&p, 0o644, U, U);
        assert_eq!(as_user(&v, || call1("chmod", &f, 0o777)), EPERM);
        assert_eq!(as_user(&owner, || call1("chmod", &f, 0o600)), 0);
        assert_eq!(mode_of(&p), 0o600);
        assert_eq!(as_user(&owner, || chown(&f, Some(V), None)), EPERM);
        assert_eq!(as_user(&owner, || chown(&f, Some(U), None)), 0);
        assert_eq!(as_user(&owner, || chown(&f, None, Some(G))), 0);
        assert_eq!(std::fs::metadata(&p).unwrap().gid(), G);
        assert_eq!(as_user(&owner, || chown(&f, None, Some(1004))), EPERM);
        assert_eq!(as_user(&v, || chown(&f, None, Some(V))), EPERM);
        assert_eq!(as_user(&user(0, 0), || chown(&f, Some(V), Some(V))), 0);
        let md = std::fs::metadata(&p).unwrap();
        assert_eq!((md.uid(), md.gid()), (V, V));
        // S_ISGID by a non-member of the file's group is dropped.
        set_owner(&p, U, G);
        assert_eq!(as_user(&user(U, U), || call1("chmod", &f, 0o2755)), 0);
        assert_eq!(mode_of(&p), 0o755);
        assert_eq!(as_user(&owner, || call1("chmod", &f, 0o2755)), 0);
        assert_eq!(mode_of(&p), 0o2755);
        // chown clears the set-ID bits of an executable.
        set_mode(&p, 0o6755);
        assert_eq!(as_user(&owner, || chown(&f, None, Some(U))), 0);
        assert_eq!(mode_of(&p), 0o755);
        set_mode(&p, 0o6755);
        assert_eq!(as_user(&user(0, 0), || chown(&f, Some(U), None)), 0);
        assert_eq!(mode_of(&p), 0o755, "root is treated like other users");
        // Without group execute S_ISGID stays (it marks locking).
        set_mode(&p, 0o6745);
        assert_eq!(as_user(&user(0, 0), || chown(&f, Some(U), None)), 0);
        assert_eq!(mode_of(&p), 0o2745);
        // Directories keep theirs.
        let d = m.join("w/d");
        std::fs::create_dir(&d).unwrap();
        set_mode(&d, 0o2755);
        assert_eq!(as_user(&user(0, 0), || chown(&c(&d), Some(U), None)), 0);
        assert_eq!(mode_of(&d), 0o2755);
    });
}

/// chown(2) with owner and group both -1 still clears the set-ID bits of a
/// non-directory as any chown does (Linux `chown_common`, fs/open.c,
/// asks for `ATTR_KILL_SUID` and `setattr_should_drop_sgid`, fs/attr.c,
/// on every chown): `S_ISUID` always, `S_ISGID` when group execute is set
/// (for root also when it is outside the file's group; for others the
/// kernel's request is the same as before a write, whose rule keeps it:
/// see `chown_unchanged` in the FUSE adapter); root is treated like
/// others (chown(2): "since Linux 2.2.13, root is treated like other
/// users"); directories keep both; a file with no such bit is left alone,
/// even by a caller who neither owns it nor is root (chown -1 -1 needs no
/// privilege). A FIFO follows the file rules.
#[test]
fn chown_with_both_ids_unchanged_still_clears_set_id_bits() {
    each_mode("chown-keep", |m| {
        let owner = User {
            groups: vec![G],
            ..user(U, U)
        };
        let root = user(0, 0);
        let p = m.join("w/f");
        let f = file(&p, 0o6755, U, G);
        assert_eq!(as_user(&owner, || chown(&f, None, None)), 0);
        assert_eq!(mode_of(&p), 0o755, "group execute: both bits go");
        set_mode(&p, 0o6745);
        assert_eq!(as_user(&owner, || chown(&f, None, None)), 0);
        assert_eq!(mode_of(&p), 0o2745, "no group execute, caller in the group");
        assert_eq!(as_user(&user(U, U), || chown(&f, None, None)), 0);
        assert_eq!(mode_of(&p), 0o2745, "no group execute, the write rule");
        set_owner(&p, U, G);
        set_mode(&p, 0o6745);
        assert_eq!(as_user(&root, || chown(&f, None, None)), 0);
        assert_eq!(mode_of(&p), 0o2745, "root is in every group");
        set_mode(&p, 0o4755);
        assert_eq!(as_user(&root, || chown(&f, None, None)), 0);
        assert_eq!(mode_of(&p), 0o755, "root too");
        // Nothing to clear: anyone may, and nothing changes.
        set_mode(&p, 0o644);
        assert_eq!(as_user(&user(V, V), || chown(&f, None, None)), 0);
        let md = std::fs::metadata(&p).unwrap();
        assert_eq!((md.mode() & 0o7777, md.uid(), md.gid()), (0o644, U, G));
        // A FIFO: an unprivileged owner's chown to its own group.
        let q = m.join("w/fifo");
        assert_eq!(call1("mkfifo", &c(&q), 0o644), 0);
        set_owner(&q, U, U);
        set_mode(&q, 0o6555);
        assert_eq!(as_user(&owner, || chown(&c(&q), None, Some(G))), 0);
        assert_eq!(mode_of(&q), 0o555);
        // A directory keeps its bits.
        let d = m.join("w/d");
        std::fs::create_dir(&d).unwrap();
        set_owner(&d, U, G);
        set_mode(&d, 0o6755);
        assert_eq!(as_user(&owner, || chown(&c(&d), None, None)), 0);
        assert_eq!(mode_of(&d), 0o6755);
    });
}

/// utimensat(2): times NULL or both UTIME_NOW need "the effective user ID
/// of the caller must match the owner of the file; or the caller must have
/// write access to the file; or the caller must be privileged" (else
/// EACCES); any other change needs the owner or privilege (else EPERM).
#[test]
fn utimensat_rules() {
    each_mode("utimes", |m| {
        let u = user(U, U);
        let p = m.join("w/f");
        let f = file(&p, 0o646, 0, 0);
        let now = libc::UTIME_NOW;
        let omit = libc::UTIME_OMIT;
        assert_eq!(as_user(&u, || utimensat(&f, None)), 0);
        assert_eq!(as_user(&u, || utimensat(&f, Some([ts(0, now), ts(0, now)]))), 0);
        assert_eq!(as_user(&u, || utimensat(&f, Some([ts(5, 0), ts(6, 0)]))), EPERM);
        assert_eq!(
            as_user(&u, || utimensat(&f, Some([ts(0, now), ts(0, omit)]))),
            EPERM
        );
        set_mode(&p, 0o644);
        assert_eq!(as_user(&u, || utimensat(&f, None)), EACCES);
        set_owner(&p, U, U);
        assert_eq!(as_user(&u, || utimensat(&f, Some([ts(5, 7), ts(6, 8)]))), 0);
        let md = std::fs::metadata(&p).unwrap();
        assert_eq!(
            (md.atime(), md.atime_nsec(), md.mtime(), md.mtime_nsec()),
            (5, 7, 6, 8)
        );
        assert_eq!(
            as_user(&user(0, 0), || utimensat(&f, Some([ts(9, 0), ts(9, 0)]))),
            0
        );
        assert_eq!(std::fs::metadata(&p).unwrap().mtime(), 9);
    });
}

/// A write, truncate or fallocate by anyone but root clears S_ISUID, and
/// S_ISGID when the group execute bit is set (Linux `file_remove_privs`,
/// `should_remove_suid`); truncate(2) needs write permission (EACCES),
/// ftruncate(2) only a descriptor open for writing.
#[test]
fn writes_clear_set_id_bits() {
    each_mode("suid", |m| {
        let u = user(U, U);
        let p = m.join("w/f");
        let f = file(&p, 0o6777, 0, 0);
        assert_eq!(as_user(&u, || append_byte(&f)), 0);
        assert_eq!(mode_of(&p), 0o777);
        set_mode(&p, 0o6767);
        assert_eq!(as_user(&u, || append_byte(&f)), 0);
        assert_eq!(mode_of(&p), 0o2767, "S_ISGID without group execute stays");
        set_mode(&p, 0o6777);
        assert_eq!(as_user(&user(0, 0), || append_byte(&f)), 0);
        assert_eq!(mode_of(&p), 0o6777, "root keeps them (CAP_FSETID)");
        assert_eq!(as_user(&u, || call1("truncate", &f, 1)), 0);
        assert_eq!(mode_of(&p), 0o777);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 1);
        set_mode(&p, 0o644);
        assert_eq!(as_user(&u, || call1("truncate", &f, 0)), EACCES);
        // ftruncate on a descriptor opened while writing was allowed.
        set_mode(&p, 0o666);
        let ftrunc = || {
            // SAFETY: `f` is a NUL-terminated string; the descriptor is ours.
            unsafe {
                let fd = libc::open(f.as_ptr(), libc::O_WRONLY);
                if fd < 0 {
                    return fd;
                }
                libc::chmod(f.as_ptr(), 0o444);
                let r = libc::ftruncate(fd, 0);
                libc::close(fd);
                r
            }
        };
        set_owner(&p, U, U);
        assert_eq!(as_user(&u, ftrunc), 0);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 0);
        assert_eq!(mode_of(&p), 0o444);
    });
}

/// Extended attributes (Linux `xattr_permission`, xattr(7)): `user.`
/// needs read or write permission on the file, `trusted.` is root's
/// alone (EPERM to set, ENODATA to read for others).
#[test]
fn xattr_permissions() {
    each_mode("xattr", |m| {
        let u = user(U, U);
        let p = m.join("w/f");
        let f = file(&p, 0o644, 0, 0);
        let (name, tname) = (
            CString::new("user.k").unwrap(),
            CString::new("trusted.k").unwrap(),
        );
        let set = |n: &CString| {
            // SAFETY: NUL-terminated strings and a 1-byte value, all
            // outliving the call.
            unsafe { libc::setxattr(f.as_ptr(), n.as_ptr(), b"v".as_ptr().cast(), 1, 0) }
        };
        let get = |n: &CString| {
            let mut buf = [0u8; 8];
            // SAFETY: NUL-terminated strings and an 8-byte buffer.
            let r = unsafe { libc::getxattr(f.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), 8) };
            r as c_int
        };
        assert_eq!(as_user(&u, || set(&name)), EACCES);
        assert_eq!(as_user(&user(0, 0), || set(&name)), 0);
        assert_eq!(as_user(&user(0, 0), || set(&tname)), 0);
        assert_eq!(as_user(&u, || get(&name)), 0);
        assert_eq!(as_user(&u, || get(&tname)), ENODATA);
        assert_eq!(as_user(&u, || set(&tname)), EPERM);
        // listxattr(2) hides trusted names from others: the list is
        // "user.k\0" (7 bytes) for u, with "trusted.k\0" (17) for root.
        let list = || {
            let mut buf = [0u8; 64];
            // SAFETY: a NUL-terminated string and a 64-byte buffer.
            let r = unsafe { libc::listxattr(f.as_ptr(), buf.as_mut_ptr().cast(), 64) };
            if r < 0 {
                return -1;
            }
            // The length, as an errno-free exit status (below 255).
            // SAFETY: _exit ends the child with the list's length.
            unsafe { libc::_exit(r as c_int) }
        };
        assert_eq!(as_user(&u, list), 7);
        assert_eq!(as_user(&user(0, 0), list), 17);
        set_mode(&p, 0o600);
        assert_eq!(as_user(&u, || get(&name)), EACCES);
    });
}

/// Without `allow_other` only the mounting user (root here) reaches the
/// mount: the kernel refuses everyone else (fuse(8)).
#[test]
fn without_allow_other_other_users_are_refused() {
    let t = TempDir::new("perm-private");
    let img = mkfs(&t, "img", &["--size", "64M", "--mode", "mq", "--queues", "2"]);
    let m = Mount::start(&img, &t.dir("mnt"), &[]);
    let f = file(&m.join("f"), 0o666, 0, 0);
    assert_eq!(as_user(&user(U, U), || open(&f, libc::O_RDONLY, 0)), EACCES);
    assert_eq!(as_user(&user(0, 0), || open(&f, libc::O_RDONLY, 0)), 0);
    m.unmount();
}

/// With `default_permissions` as well, the kernel checks first (against
/// the attributes it cached) and MQFS again: the answers are the same.
#[test]
fn default_permissions_mount_gives_the_same_answers() {
    let t = TempDir::new("perm-default");
    let img = mkfs(
        &t,
        "img",
        &["--size", "64M", "--mode", "classic", "--queues", "2"],
    );
    let m = Mount::start(&img, &t.dir("mnt"), &["-o", "allow_other,default_permissions"]);
    let f = file(&m.join("f"), 0o604, 0, 0);
    let u = user(U, U);
    assert_eq!(as_user(&u, || open(&f, libc::O_RDONLY, 0)), 0);
    assert_eq!(as_user(&u, || open(&f, libc::O_WRONLY, 0)), EACCES);
    assert_eq!(as_user(&u, || call1("chmod", &f, 0o777)), EPERM);
    assert_eq!(as_user(&u, || call1("unlink", &f, 0)), EACCES);
    m.unmount();
}
