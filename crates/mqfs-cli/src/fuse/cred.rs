//! Who sent a FUSE request: its [`Cred`] for the permission rules of
//! [`mqfs::perm`].
//!
//! A FUSE request carries the caller's file-system uid and gid and its
//! thread id, but not its supplementary groups. They are read from
//! `/proc/<pid>/status` ("Groups:" line, proc(5)) when the request comes,
//! as other FUSE file systems do: libfuse's `fuse_req_getgroups` reads the
//! same line (of `/proc/<pid>/task/<pid>/status`), and MooseFS's mfsmount
//! parses it for its own permission checks. The caller may have
//! exited (or changed its groups) by then; it then counts as having no
//! supplementary group. Root's requests skip the read: root passes every
//! group check anyway.

use mqfs::Cred;

/// The supplementary groups of a "Groups:" line of a proc(5) status file
/// (none if there is no such line or a number does not parse).
pub fn groups_in_status(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| g.split_whitespace().map_while(|n| n.parse().ok()).collect())
        .unwrap_or_default()
}

/// The credentials of the request from `uid`, `gid` and thread `pid`.
pub fn cred_of(uid: u32, gid: u32, pid: u32) -> Cred {
    let groups = if uid == 0 || pid == 0 {
        Vec::new()
    } else {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map(|s| groups_in_status(&s))
            .unwrap_or_default()
    };
    Cred { uid, gid, groups }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_line_parses() {
        let status = "Name:\tcat\nUid:\t1000\t1000\t1000\t1000\nGroups:\t4 24 27 1000 \nNgid:\t0\n";
        assert_eq!(groups_in_status(status), vec![4, 24, 27, 1000]);
        assert_eq!(groups_in_status("Groups:\t\n"), Vec::<u32>::new());
        assert_eq!(groups_in_status("Name:\tx\n"), Vec::<u32>::new());
    }

    #[test]
    fn own_groups_are_read_for_a_user_and_skipped_for_root() {
        let me = std::process::id();
        let status = std::fs::read_to_string(format!("/proc/{me}/status")).unwrap();
        assert_eq!(cred_of(1234, 5, me).groups, groups_in_status(&status));
        assert!(cred_of(0, 0, me).groups.is_empty());
        assert_eq!(cred_of(1234, 5, me).uid, 1234);
    }
}
