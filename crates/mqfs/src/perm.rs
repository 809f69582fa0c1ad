//! Who may do what to an inode: the POSIX permission rules, as Linux
//! applies them, written once as pure functions of the inode's attributes
//! ([`Attr`]: owner, group, mode, type) and the caller's credentials
//! ([`Cred`]).
//!
//! The operations themselves do not check permissions (crashfuzz, bench
//! and the tests act as the machine's only user); a front end that serves
//! several users, such as the FUSE adapter of `mqfs-cli`, asks these
//! functions before each operation and answers their error. The one
//! exception is [`Fs::make_as`](crate::Fs::make_as), which checks
//! [`may_create`] and applies [`inherit_owner`] under the directory's lock.
//!
//! Privilege: a FUSE request carries the caller's uid and gid, not its
//! capabilities, so uid 0 stands for a caller with `CAP_DAC_OVERRIDE`,
//! `CAP_DAC_READ_SEARCH`, `CAP_FOWNER`, `CAP_CHOWN` and `CAP_FSETID`, and
//! every other uid for one with none of them (a root process that dropped
//! capabilities, or a user process given some, is judged by its uid).

use crate::error::FsError;
use crate::layout::FileType;
use crate::ops::Attr;

/// Read permission (`R_OK` of access(2), Linux `MAY_READ`).
pub const MAY_READ: u8 = 4;
/// Write permission (`W_OK`, Linux `MAY_WRITE`).
pub const MAY_WRITE: u8 = 2;
/// Execute permission, or search for a directory (`X_OK`, Linux
/// `MAY_EXEC`).
pub const MAY_EXEC: u8 = 1;

/// Set-user-ID bit (`S_ISUID`).
pub const S_ISUID: u16 = 0o4000;
/// Set-group-ID bit (`S_ISGID`).
pub const S_ISGID: u16 = 0o2000;
/// Sticky bit (`S_ISVTX`).
pub const S_ISVTX: u16 = 0o1000;
/// Group execute bit (`S_IXGRP`).
pub const S_IXGRP: u16 = 0o010;
/// Any execute bit (`S_IXUGO`).
pub const S_IXUGO: u16 = 0o111;

/// The access mode bits of open(2) flags (`O_ACCMODE`, Linux numbering).
const O_ACCMODE: i32 = 0o3;
/// `O_WRONLY`.
const O_WRONLY: i32 = 0o1;
/// `O_RDWR`.
const O_RDWR: i32 = 0o2;
/// `O_TRUNC`.
pub const O_TRUNC: i32 = 0o1000;
/// Linux `__FMODE_EXEC`: the flag of the open that execve(2) makes of the
/// program (include/linux/fs.h), which reaches a FUSE file system in the
/// open flags.
pub const FMODE_EXEC: i32 = 0x20;

/// Who is asking: the caller's file-system uid and gid and its
/// supplementary groups (credentials(7)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Cred {
    /// Effective (file-system) user ID.
    pub uid: u32,
    /// Effective (file-system) group ID.
    pub gid: u32,
    /// Supplementary group IDs.
    pub groups: Vec<u32>,
}

impl Cred {
    /// The superuser (uid 0, gid 0, no supplementary group).
    pub fn root() -> Cred {
        Cred::default()
    }

    /// True for uid 0, the caller that holds every capability (see the
    /// module documentation).
    pub fn is_root(&self) -> bool {
        self.uid == 0
    }

    /// True if `gid` is the caller's group or one of its supplementary
    /// groups (Linux `in_group_p`).
    pub fn in_group(&self, gid: u32) -> bool {
        self.gid == gid || self.groups.contains(&gid)
    }

    /// True if the caller owns `a` (Linux `inode_owner_or_capable` without
    /// the capability).
    pub fn owns(&self, a: &Attr) -> bool {
        self.uid == a.uid
    }

    /// True if the caller owns `a` or is privileged (Linux
    /// `inode_owner_or_capable`: owner or `CAP_FOWNER`).
    pub fn owns_or_root(&self, a: &Attr) -> bool {
        self.owns(a) || self.is_root()
    }
}

/// May `c` access `a` for `mask` (an or of [`MAY_READ`], [`MAY_WRITE`],
/// [`MAY_EXEC`])? POSIX.1-2017 section 4.5 (file access permissions) as
/// Linux `generic_permission` (fs/namei.c) applies it: the owner class if
/// the caller owns the file, else the group class if the caller is in the
/// file's group, else the other class; every bit asked must be granted by
/// that one class (an owner denied by the owner bits is denied, whatever
/// the group and other bits say). Root may read and write anything and
/// search any directory, but may execute a non-directory only if at least
/// one execute bit is set (`capable_wrt_inode_uidgid`, `CAP_DAC_OVERRIDE`).
/// Refusal is `EACCES`.
pub fn may(a: &Attr, c: &Cred, mask: u8) -> Result<(), FsError> {
    let mask = mask & (MAY_READ | MAY_WRITE | MAY_EXEC);
    if c.is_root() {
        let exec_denied = mask & MAY_EXEC != 0 && a.ftype != FileType::Dir && a.perm & S_IXUGO == 0;
        return if exec_denied { Err(FsError::Access) } else { Ok(()) };
    }
    let class = if c.owns(a) {
        a.perm >> 6
    } else if c.in_group(a.gid) {
        a.perm >> 3
    } else {
        a.perm
    };
    if (class as u8) & mask == mask {
        Ok(())
    } else {
        Err(FsError::Access)
    }
}

/// What open(2) `flags` ask of the file (Linux `build_open_flags` and
/// `ACC_MODE`): read for `O_RDONLY`, write for `O_WRONLY`, both for
/// `O_RDWR`; `O_TRUNC` asks write too ("O_TRUNC implies we need access
/// checks for write permissions"); the open that execve(2) makes
/// ([`FMODE_EXEC`]) asks execute, not read.
pub fn open_mask(flags: i32) -> u8 {
    if flags & FMODE_EXEC != 0 {
        return MAY_EXEC;
    }
    let mut mask = match flags & O_ACCMODE {
        O_WRONLY => MAY_WRITE,
        O_RDWR => MAY_READ | MAY_WRITE,
        _ => MAY_READ,
    };
    if flags & O_TRUNC != 0 {
        mask |= MAY_WRITE;
    }
    mask
}

/// May `c` make a new entry in `dir` (creat(2), mkdir(2), mknod(2),
/// symlink(2), link(2) and rename(2) to a new name)? Write and search
/// permission on the directory (Linux `may_create`, fs/namei.c);
/// `ENOTDIR` if it is not a directory.
pub fn may_create(dir: &Attr, c: &Cred) -> Result<(), FsError> {
    if dir.ftype != FileType::Dir {
        return Err(FsError::NotDir);
    }
    may(dir, c, MAY_WRITE | MAY_EXEC)
}

/// True if the sticky bit of `dir` lets `c` remove or rename `victim`
/// from it: always if `dir` is not sticky, else only for the owner of
/// `victim`, the owner of `dir`, or root (Linux `check_sticky` /
/// `__check_sticky`, fs/namei.c; unlink(2) and rename(2) `EPERM`: "The
/// directory containing pathname has the sticky bit (S_ISVTX) set and the
/// process's effective UID is neither the UID of the file to be deleted
/// nor that of the directory containing it, and the process is not
/// privileged").
pub fn sticky_may_delete(dir: &Attr, victim: &Attr, c: &Cred) -> bool {
    dir.perm & S_ISVTX == 0 || c.owns(victim) || c.owns(dir) || c.is_root()
}

/// May `c` remove `victim` from `dir` (unlink(2), rmdir(2), the source of
/// rename(2), and a target rename(2) replaces)? Write and search
/// permission on `dir` (`EACCES`), then the sticky rule
/// ([`sticky_may_delete`], `EPERM`), as Linux `may_delete` orders them.
pub fn may_delete(dir: &Attr, victim: &Attr, c: &Cred) -> Result<(), FsError> {
    may(dir, c, MAY_WRITE | MAY_EXEC)?;
    if sticky_may_delete(dir, victim, c) {
        Ok(())
    } else {
        Err(FsError::NotPermitted)
    }
}

/// May `c` rename `src` (in `src_dir`) to a name in `dst_dir`, replacing
/// `dst` if there is one? Linux `vfs_rename` (fs/namei.c): the source
/// must be deletable from its directory ([`may_delete`]); the target
/// deletable from its directory, or, if there is none, the new name
/// creatable there ([`may_create`]); and a directory moved to another
/// parent needs write permission on itself, to update its `..`
/// (rename(2) `EACCES`: "oldpath is a directory and does not allow write
/// permission (needed to update the .. entry)").
pub fn may_rename(
    (src_dir, src): (&Attr, &Attr),
    (dst_dir, dst): (&Attr, Option<&Attr>),
    c: &Cred,
) -> Result<(), FsError> {
    may_delete(src_dir, src, c)?;
    match dst {
        Some(t) => may_delete(dst_dir, t, c)?,
        None => may_create(dst_dir, c)?,
    }
    if src.ftype == FileType::Dir && src_dir.ino != dst_dir.ino {
        may(src, c, MAY_WRITE)?;
    }
    Ok(())
}

/// May `c` change the size of `a`? truncate(2) needs write permission
/// (`EACCES`, Linux `vfs_truncate`); ftruncate(2) (`by_fd`) was checked
/// when the file was opened for writing, so needs nothing more (Linux
/// `do_sys_ftruncate`).
pub fn may_truncate(a: &Attr, c: &Cred, by_fd: bool) -> Result<(), FsError> {
    if by_fd {
        Ok(())
    } else {
        may(a, c, MAY_WRITE)
    }
}

/// May `c` change the mode of `a` (chmod(2))? Only its owner or root
/// (`EPERM`; Linux `setattr_prepare`: "Make sure a caller can chmod").
pub fn chmod_allowed(a: &Attr, c: &Cred) -> Result<(), FsError> {
    if c.owns_or_root(a) {
        Ok(())
    } else {
        Err(FsError::NotPermitted)
    }
}

/// The permission bits chmod(2) sets when `c` asks for `perm` on `a`:
/// `perm`, without `S_ISGID` if the caller is not root and not in the
/// file's group (chmod(2): "If the calling process is not privileged ...
/// and the group of the file does not match the effective group ID of the
/// process or one of its supplementary group IDs, the S_ISGID bit will be
/// turned off, but this will not cause an error to be returned"; Linux
/// `setattr_prepare`, `in_group_or_capable`).
pub fn mode_after_chmod(a: &Attr, c: &Cred, perm: u16) -> u16 {
    let perm = perm & 0o7777;
    if c.is_root() || c.in_group(a.gid) {
        perm
    } else {
        perm & !S_ISGID
    }
}

/// May `c` change the owner of `a` to `uid` and its group to `gid` (`None`:
/// unchanged, the -1 of chown(2))? Linux `chown_ok` and `chgrp_ok`
/// (fs/attr.c): root may do anything; the owner may "change" the owner to
/// himself and the group to the file's group or any group he is a member
/// of; anything else is `EPERM` (chown(2): "Only a privileged process may
/// change the owner of a file. The owner of a file may change the group
/// of the file to any group of which that owner is a member").
pub fn chown_allowed(a: &Attr, c: &Cred, uid: Option<u32>, gid: Option<u32>) -> Result<(), FsError> {
    if c.is_root() {
        return Ok(());
    }
    let uid_ok = uid.is_none_or(|u| c.owns(a) && u == a.uid);
    let gid_ok = gid.is_none_or(|g| c.owns(a) && (g == a.gid || c.in_group(g)));
    if uid_ok && gid_ok {
        Ok(())
    } else {
        Err(FsError::NotPermitted)
    }
}

/// The permission bits of `a` after `c` changed its owner or group
/// (chown(2): "When the owner or group of an executable file is changed by
/// an unprivileged user, the S_ISUID and S_ISGID mode bits are cleared ...
/// since Linux 2.2.13, root is treated like other users"). As Linux
/// `chown_common` and `setattr_should_drop_sgid` (fs/open.c, fs/attr.c):
/// for a non-directory, `S_ISUID` is cleared, and `S_ISGID` if the group
/// execute bit is set (else it marks mandatory locking) or if the caller
/// is neither root nor in the file's group. Directories keep both.
pub fn mode_after_chown(a: &Attr, c: &Cred) -> u16 {
    let mut perm = a.perm;
    if a.ftype == FileType::Dir {
        return perm;
    }
    perm &= !S_ISUID;
    if perm & S_ISGID != 0 && (perm & S_IXGRP != 0 || !(c.is_root() || c.in_group(a.gid))) {
        perm &= !S_ISGID;
    }
    perm
}

/// The permission bits of `a` after `c` wrote to it or changed its size,
/// if they change: Linux `file_remove_privs` and `should_remove_suid`
/// (fs/inode.c), also applied by `do_truncate`: unless the caller is root
/// (`CAP_FSETID`), a regular file loses `S_ISUID`, and `S_ISGID` when the
/// group execute bit is set too (without it, `S_ISGID` marks mandatory
/// locking and stays). `None` when nothing changes.
pub fn mode_after_write(a: &Attr, c: &Cred) -> Option<u16> {
    if c.is_root() || a.ftype != FileType::File {
        return None;
    }
    let mut perm = a.perm & !S_ISUID;
    if perm & (S_ISGID | S_IXGRP) == S_ISGID | S_IXGRP {
        perm &= !S_ISGID;
    }
    (perm != a.perm).then_some(perm)
}

/// May `c` set the times of `a`? utimensat(2): setting both to the
/// current time (`touch`: `times` NULL or both `UTIME_NOW`) needs the
/// owner, write permission, or privilege (`EACCES`); any other change
/// (an explicit time, or one `UTIME_NOW` beside a `UTIME_OMIT`) needs the
/// owner or privilege (`EPERM`). Linux `vfs_utimes` (`ATTR_TOUCH` /
/// `ATTR_TIMES_SET`), `notify_change` and `setattr_prepare`.
pub fn utimes_allowed(a: &Attr, c: &Cred, touch: bool) -> Result<(), FsError> {
    if c.owns_or_root(a) {
        Ok(())
    } else if touch {
        may(a, c, MAY_WRITE)
    } else {
        Err(FsError::NotPermitted)
    }
}

/// May `c` read (`write` false: getxattr(2)) or set and remove (`write`
/// true: setxattr(2), removexattr(2)) the extended attribute `name` of
/// `a`? Linux `xattr_permission` (fs/xattr.c): `security.` and `system.`
/// are left to the file system (allowed); `trusted.` only for root
/// (`EPERM` to write, `ENODATA` to read); `user.` only on regular files
/// and directories (`EPERM` / `ENODATA` otherwise), and in a sticky
/// directory written only by its owner or root (`EPERM`); then, for
/// `user.` and any other name, read or write permission on the inode
/// (`EACCES`), as [`may`].
pub fn xattr_allowed(a: &Attr, c: &Cred, name: &str, write: bool) -> Result<(), FsError> {
    let refused = || {
        if write {
            FsError::NotPermitted
        } else {
            FsError::NoData
        }
    };
    if name.starts_with("security.") || name.starts_with("system.") {
        return Ok(());
    }
    if name.starts_with("trusted.") {
        return if c.is_root() { Ok(()) } else { Err(refused()) };
    }
    if name.starts_with("user.") {
        if a.ftype != FileType::File && a.ftype != FileType::Dir {
            return Err(refused());
        }
        if a.ftype == FileType::Dir && a.perm & S_ISVTX != 0 && write && !c.owns_or_root(a) {
            return Err(FsError::NotPermitted);
        }
    }
    may(a, c, if write { MAY_WRITE } else { MAY_READ })
}

/// Does listxattr(2) show the attribute `name` to `c`? `trusted.` names
/// only to root (Linux `ext4_xattr_trusted_list`: "capable(CAP_SYS_ADMIN)";
/// xattr(7): "trusted extended attributes are visible and accessible only
/// to processes that have the CAP_SYS_ADMIN capability"); every other name
/// to anyone who may look the file up.
pub fn xattr_listed(name: &str, c: &Cred) -> bool {
    !name.starts_with("trusted.") || c.is_root()
}

/// Owner, group and permission bits of a new inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NewOwner {
    /// Owner: the caller.
    pub uid: u32,
    /// Group: the caller's, or the directory's if it is set-group-ID.
    pub gid: u32,
    /// Permission bits.
    pub perm: u16,
}

/// The owner, group and permission bits of a new `ftype` that `c` makes in
/// `dir` asking for `perm` (already without the umask). Linux
/// `inode_init_owner` and `mode_strip_sgid` (fs/inode.c), as POSIX allows
/// (open(2), mkdir(2)): the owner is the caller; in a set-group-ID
/// directory the group is the directory's and a new directory is
/// set-group-ID too (the BSD semantics), else the group is the caller's;
/// a new non-directory in a set-group-ID directory that asks for
/// set-group-ID with group execute keeps it only if the caller is root or
/// in the directory's group. A new directory keeps only its rwx and
/// sticky bits of `perm` (Linux `vfs_mkdir`: `S_IRWXUGO | S_ISVTX`;
/// mkdir(2): "Whether other mode bits are honored for the created
/// directory depends on the operating system").
pub fn inherit_owner(dir: &Attr, c: &Cred, ftype: FileType, perm: u16) -> NewOwner {
    let mut perm = if ftype == FileType::Dir {
        perm & (0o777 | S_ISVTX)
    } else {
        perm & 0o7777
    };
    let gid = if dir.perm & S_ISGID != 0 {
        if ftype == FileType::Dir {
            perm |= S_ISGID;
        } else if perm & (S_ISGID | S_IXGRP) == S_ISGID | S_IXGRP && !(c.is_root() || c.in_group(dir.gid)) {
            perm &= !S_ISGID;
        }
        dir.gid
    } else {
        c.gid
    };
    NewOwner {
        uid: c.uid,
        gid,
        perm,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn attr(ftype: FileType, perm: u16, uid: u32, gid: u32) -> Attr {
        Attr {
            ino: 10,
            ftype,
            perm,
            links: 1,
            uid,
            gid,
            size: 0,
            blocks: 0,
            atime: 0,
            mtime: 0,
            ctime: 0,
            rdev: 0,
        }
    }

    fn file(perm: u16, uid: u32, gid: u32) -> Attr {
        attr(FileType::File, perm, uid, gid)
    }

    fn dir(perm: u16, uid: u32, gid: u32) -> Attr {
        attr(FileType::Dir, perm, uid, gid)
    }

    fn user(uid: u32, gid: u32, groups: &[u32]) -> Cred {
        Cred {
            uid,
            gid,
            groups: groups.to_vec(),
        }
    }

    const EACCES: Result<(), FsError> = Err(FsError::Access);
    const EPERM: Result<(), FsError> = Err(FsError::NotPermitted);

    #[test]
    fn one_class_decides_owner_then_group_then_other() {
        let f = file(0o064, 100, 50);
        let owner = user(100, 50, &[]);
        // The owner bits (none) decide for the owner, though group and
        // other grant read.
        assert_eq!(may(&f, &owner, MAY_READ), EACCES);
        let member = user(200, 7, &[50]);
        assert_eq!(may(&f, &member, MAY_READ | MAY_WRITE), Ok(()));
        assert_eq!(may(&f, &member, MAY_EXEC), EACCES);
        let other = user(300, 7, &[8]);
        assert_eq!(may(&f, &other, MAY_READ), Ok(()));
        assert_eq!(may(&f, &other, MAY_WRITE), EACCES);
        // Every bit asked must be granted.
        assert_eq!(may(&f, &other, MAY_READ | MAY_WRITE), EACCES);
    }

    #[test]
    fn root_bypasses_all_but_exec_without_any_x() {
        let root = Cred::root();
        assert_eq!(may(&file(0, 5, 5), &root, MAY_READ | MAY_WRITE), Ok(()));
        assert_eq!(may(&file(0o644, 5, 5), &root, MAY_EXEC), EACCES);
        assert_eq!(may(&file(0o001, 5, 5), &root, MAY_EXEC), Ok(()));
        assert_eq!(may(&dir(0, 5, 5), &root, MAY_EXEC | MAY_WRITE), Ok(()));
    }

    #[test]
    fn open_flags_ask_what_linux_asks() {
        assert_eq!(open_mask(0), MAY_READ);
        assert_eq!(open_mask(O_WRONLY), MAY_WRITE);
        assert_eq!(open_mask(O_RDWR), MAY_READ | MAY_WRITE);
        assert_eq!(open_mask(O_TRUNC), MAY_READ | MAY_WRITE);
        assert_eq!(open_mask(FMODE_EXEC), MAY_EXEC);
    }

    #[test]
    fn create_and_delete_need_write_and_search_on_the_directory() {
        let u = user(100, 100, &[]);
        assert_eq!(may_create(&dir(0o755, 0, 0), &u), EACCES);
        assert_eq!(may_create(&dir(0o773, 0, 0), &u), Ok(()));
        assert_eq!(may_create(&dir(0o772, 0, 0), &u), EACCES, "write without search");
        assert_eq!(may_create(&file(0o777, 0, 0), &u), Err(FsError::NotDir));
        let f = file(0o600, 0, 0);
        assert_eq!(may_delete(&dir(0o775, 0, 0), &f, &u), EACCES);
        assert_eq!(may_delete(&dir(0o777, 0, 0), &f, &u), Ok(()));
    }

    #[test]
    fn sticky_directory_lets_only_owners_and_root_delete() {
        let tmp = dir(0o1777, 10, 10);
        let theirs = file(0o666, 20, 20);
        assert_eq!(may_delete(&tmp, &theirs, &user(30, 30, &[])), EPERM);
        assert_eq!(may_delete(&tmp, &theirs, &user(20, 30, &[])), Ok(()));
        assert_eq!(may_delete(&tmp, &theirs, &user(10, 30, &[])), Ok(()));
        assert_eq!(may_delete(&tmp, &theirs, &Cred::root()), Ok(()));
        // Without write permission the answer is EACCES, checked first.
        let closed = dir(0o1755, 10, 10);
        assert_eq!(may_delete(&closed, &theirs, &user(20, 30, &[])), EACCES);
        // Not sticky: anyone with write and search.
        assert!(sticky_may_delete(
            &dir(0o777, 10, 10),
            &theirs,
            &user(30, 30, &[])
        ));
    }

    #[test]
    fn rename_checks_both_parents_and_a_moved_directory() {
        let u = user(100, 100, &[]);
        let open = dir(0o777, 0, 0);
        let shut = dir(0o755, 0, 0);
        let mut other_open = dir(0o777, 0, 0);
        other_open.ino = 11;
        let f = file(0o644, 100, 100);
        assert_eq!(may_rename((&open, &f), (&other_open, None), &u), Ok(()));
        assert_eq!(may_rename((&shut, &f), (&open, None), &u), EACCES);
        let mut shut2 = shut.clone();
        shut2.ino = 12;
        assert_eq!(may_rename((&open, &f), (&shut2, None), &u), EACCES);
        let mut sticky = dir(0o1777, 0, 0);
        sticky.ino = 13;
        let target = file(0o644, 5, 5);
        assert_eq!(may_rename((&open, &f), (&sticky, Some(&target)), &u), EPERM);
        let mut d = dir(0o555, 100, 100);
        d.ino = 14;
        assert_eq!(
            may_rename((&open, &d), (&other_open, None), &u),
            EACCES,
            "moved dir needs write"
        );
        assert_eq!(
            may_rename((&open, &d), (&open, None), &u),
            Ok(()),
            "same parent: no"
        );
    }

    #[test]
    fn chmod_by_owner_or_root_and_sgid_dropped_for_non_members() {
        let f = file(0o644, 100, 50);
        assert_eq!(chmod_allowed(&f, &user(200, 50, &[])), EPERM);
        assert_eq!(chmod_allowed(&f, &user(100, 1, &[])), Ok(()));
        assert_eq!(chmod_allowed(&f, &Cred::root()), Ok(()));
        assert_eq!(mode_after_chmod(&f, &user(100, 1, &[]), 0o2755), 0o755);
        assert_eq!(mode_after_chmod(&f, &user(100, 1, &[50]), 0o2755), 0o2755);
        assert_eq!(mode_after_chmod(&f, &Cred::root(), 0o6755), 0o6755);
    }

    #[test]
    fn chown_rules_of_chown_2() {
        let f = file(0o644, 100, 50);
        let owner = user(100, 50, &[60]);
        assert_eq!(chown_allowed(&f, &owner, Some(200), None), EPERM);
        assert_eq!(chown_allowed(&f, &owner, Some(100), None), Ok(()));
        assert_eq!(chown_allowed(&f, &owner, None, Some(60)), Ok(()));
        assert_eq!(chown_allowed(&f, &owner, None, Some(70)), EPERM);
        assert_eq!(chown_allowed(&f, &owner, Some(100), Some(50)), Ok(()));
        assert_eq!(chown_allowed(&f, &user(300, 60, &[]), None, Some(60)), EPERM);
        assert_eq!(chown_allowed(&f, &Cred::root(), Some(1), Some(2)), Ok(()));
    }

    #[test]
    fn chown_clears_suid_and_executable_sgid_of_non_directories() {
        let root = Cred::root();
        assert_eq!(mode_after_chown(&file(0o6755, 1, 1), &root), 0o755);
        // Without group execute, S_ISGID stays for root and members ...
        assert_eq!(mode_after_chown(&file(0o6745, 1, 1), &root), 0o2745);
        assert_eq!(mode_after_chown(&file(0o2745, 1, 1), &user(1, 1, &[])), 0o2745);
        // ... but not for a caller outside the file's group.
        assert_eq!(mode_after_chown(&file(0o2745, 1, 1), &user(1, 2, &[])), 0o745);
        assert_eq!(mode_after_chown(&dir(0o6755, 1, 1), &root), 0o6755);
    }

    #[test]
    fn writes_by_others_than_root_drop_suid() {
        let u = user(1, 1, &[]);
        assert_eq!(mode_after_write(&file(0o6755, 1, 1), &u), Some(0o755));
        assert_eq!(mode_after_write(&file(0o6745, 1, 1), &u), Some(0o2745));
        assert_eq!(mode_after_write(&file(0o755, 1, 1), &u), None);
        assert_eq!(mode_after_write(&file(0o6755, 1, 1), &Cred::root()), None);
        assert_eq!(mode_after_write(&dir(0o6755, 1, 1), &u), None);
    }

    #[test]
    fn truncate_needs_write_unless_by_descriptor() {
        let f = file(0o444, 1, 1);
        assert_eq!(may_truncate(&f, &user(1, 1, &[]), false), EACCES);
        assert_eq!(may_truncate(&f, &user(1, 1, &[]), true), Ok(()));
    }

    #[test]
    fn utimensat_rules() {
        let f = file(0o646, 100, 100);
        let writer = user(200, 200, &[]);
        let reader = user(200, 200, &[]);
        let ro = file(0o644, 100, 100);
        assert_eq!(utimes_allowed(&f, &writer, true), Ok(()));
        assert_eq!(utimes_allowed(&f, &writer, false), EPERM);
        assert_eq!(utimes_allowed(&ro, &reader, true), EACCES);
        assert_eq!(utimes_allowed(&ro, &user(100, 1, &[]), false), Ok(()));
        assert_eq!(utimes_allowed(&ro, &Cred::root(), false), Ok(()));
    }

    #[test]
    fn new_inodes_take_the_caller_or_a_setgid_directorys_group() {
        let u = user(100, 100, &[]);
        let plain = dir(0o777, 0, 50);
        assert_eq!(
            inherit_owner(&plain, &u, FileType::File, 0o644),
            NewOwner {
                uid: 100,
                gid: 100,
                perm: 0o644
            }
        );
        let sgid = dir(0o2777, 0, 50);
        assert_eq!(inherit_owner(&sgid, &u, FileType::File, 0o644).gid, 50);
        assert_eq!(inherit_owner(&sgid, &u, FileType::Dir, 0o755).perm, 0o2755);
        assert_eq!(inherit_owner(&sgid, &u, FileType::File, 0o2755).perm, 0o755);
        assert_eq!(
            inherit_owner(&sgid, &user(100, 100, &[50]), FileType::File, 0o2755).perm,
            0o2755
        );
        assert_eq!(inherit_owner(&sgid, &u, FileType::File, 0o2745).perm, 0o2745);
        assert_eq!(inherit_owner(&plain, &u, FileType::Dir, 0o755).perm, 0o755);
        assert_eq!(inherit_owner(&plain, &u, FileType::Dir, 0o7755).perm, 0o1755);
        assert_eq!(inherit_owner(&sgid, &u, FileType::Dir, 0o5755).perm, 0o3755);
        assert_eq!(inherit_owner(&plain, &u, FileType::File, 0o4755).perm, 0o4755);
    }

    #[test]
    fn xattr_namespaces_as_linux() {
        let u = user(100, 100, &[]);
        let f = file(0o644, 0, 0);
        assert_eq!(xattr_allowed(&f, &u, "user.a", false), Ok(()));
        assert_eq!(xattr_allowed(&f, &u, "user.a", true), EACCES);
        assert_eq!(xattr_allowed(&file(0o600, 0, 0), &u, "user.a", false), EACCES);
        assert_eq!(xattr_allowed(&f, &u, "trusted.a", true), EPERM);
        assert_eq!(xattr_allowed(&f, &u, "trusted.a", false), Err(FsError::NoData));
        assert_eq!(xattr_allowed(&f, &Cred::root(), "trusted.a", true), Ok(()));
        assert_eq!(xattr_allowed(&f, &u, "security.a", true), Ok(()));
        let link = attr(FileType::Symlink, 0o777, 0, 0);
        assert_eq!(xattr_allowed(&link, &u, "user.a", true), EPERM);
        assert_eq!(xattr_allowed(&dir(0o1777, 0, 0), &u, "user.a", true), EPERM);
        assert_eq!(xattr_allowed(&dir(0o777, 0, 0), &u, "user.a", true), Ok(()));
        assert!(!xattr_listed("trusted.a", &u) && xattr_listed("trusted.a", &Cred::root()));
        assert!(xattr_listed("user.a", &u) && xattr_listed("security.a", &u));
    }

    fn any_type() -> impl Strategy<Value = FileType> {
        prop_oneof![
            Just(FileType::File),
            Just(FileType::Dir),
            Just(FileType::Symlink),
            Just(FileType::Fifo),
        ]
    }

    proptest! {
        /// Root may do everything but execute a non-directory without any
        /// execute bit; the check is monotone: asking fewer bits never
        /// turns a grant into a refusal.
        #[test]
        fn root_may_all_but_exec_without_x_and_fewer_bits_never_hurt(
            ftype in any_type(),
            perm in 0u16..0o10000,
            uid in 0u32..4,
            gid in 0u32..4,
            cuid in 1u32..4,
            cgid in 0u32..4,
            groups in proptest::collection::vec(0u32..4, 0..3),
            mask in 0u8..8,
            sub in 0u8..8,
        ) {
            let a = attr(ftype, perm, uid, gid);
            let root = may(&a, &Cred::root(), mask);
            let exec_blocked = mask & MAY_EXEC != 0 && ftype != FileType::Dir && perm & S_IXUGO == 0;
            prop_assert_eq!(root.is_ok(), !exec_blocked);
            let c = Cred { uid: cuid, gid: cgid, groups };
            if may(&a, &c, mask).is_ok() {
                prop_assert!(may(&a, &c, mask & sub).is_ok());
            }
            // Root passes every owner rule.
            prop_assert!(chown_allowed(&a, &Cred::root(), Some(cuid), Some(cgid)).is_ok());
            prop_assert!(chmod_allowed(&a, &Cred::root()).is_ok());
            prop_assert!(utimes_allowed(&a, &Cred::root(), false).is_ok());
            // Ownership changes and writes only ever clear bits.
            prop_assert_eq!(mode_after_chown(&a, &c) & !perm, 0);
            prop_assert_eq!(mode_after_write(&a, &c).unwrap_or(perm) & !perm, 0);
        }
    }
}
