//! The file system's error type, with the POSIX errno of each error.

use ccnvme::DriverError;

/// What a file-system operation can fail with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FsError {
    /// No such file or directory.
    #[error("no such file or directory")]
    NotFound,
    /// The name exists already.
    #[error("file exists")]
    Exists,
    /// A path component is not a directory.
    #[error("not a directory")]
    NotDir,
    /// A directory where a non-directory was needed.
    #[error("is a directory")]
    IsDir,
    /// The directory is not empty.
    #[error("directory not empty")]
    NotEmpty,
    /// A name longer than 255 bytes.
    #[error("file name too long")]
    NameTooLong,
    /// No free block or inode.
    #[error("no space left on device")]
    NoSpace,
    /// A bad argument (an empty name, '/' in a name, renaming a directory
    /// into itself...).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// A file larger than the layout can map.
    #[error("file too large")]
    TooBig,
    /// Too many links.
    #[error("too many links")]
    TooManyLinks,
    /// The image is not an MQFS image.
    #[error("not an MQFS image")]
    NotMqfs,
    /// The image is damaged.
    #[error("corrupt file system: {0}")]
    Corrupt(String),
    /// The device failed.
    #[error("I/O error: {0}")]
    Io(String),
    /// The block device (driver or controller) failed.
    #[error("I/O error: {0}")]
    Driver(#[from] DriverError),
    /// The machine refused a host memory or bus access.
    #[error("I/O error: {0}")]
    Bus(#[from] pcie_sim::PcieError),
    /// The simulation could not finish the operation (deadlock or time
    /// limit).
    #[error("simulation: {0}")]
    Sim(#[from] pcie_sim::RunError),
    /// The operation is not supported in this mode or on this device.
    #[error("not supported: {0}")]
    Unsupported(String),
    /// The devices do not make the striped volume asked for (a missing,
    /// foreign or mismatched member; [`crate::volume`]).
    #[error("striped volume: {0}")]
    Volume(String),
    /// The file system is read-only (after an error).
    #[error("read-only file system")]
    ReadOnly,
    /// No such extended attribute (getxattr(2), removexattr(2), and
    /// setxattr(2) with `XATTR_REPLACE`).
    #[error("no such attribute")]
    NoData,
    /// A result or name out of range: an attribute name empty or longer
    /// than 255 bytes (setxattr(2)), or a caller's buffer too small for a
    /// value or name list (getxattr(2), listxattr(2)).
    #[error("result out of range")]
    Range,
    /// An argument too large: an attribute value over 64 KiB (setxattr(2)
    /// `E2BIG`).
    #[error("argument list too long")]
    ArgTooBig,
    /// The operation is not permitted on this inode (a `user.` attribute
    /// on a symlink, setxattr(2) `EPERM`).
    #[error("operation not permitted")]
    NotPermitted,
    /// Not a regular file where one is needed (fallocate(2) on a symlink,
    /// `ENODEV`).
    #[error("not a regular file")]
    NotRegular,
    /// The permission bits refuse the caller (`EACCES`, see
    /// [`crate::perm`]).
    #[error("permission denied")]
    Access,
    /// An MQFS image of another layout version than this build reads (the
    /// layout is not converted: make the image again with `mqfs mkfs`).
    #[error("MQFS image of layout version {found}, this build reads version {supported} only (make it again with mkfs)")]
    LayoutVersion {
        /// The version in the image's superblock.
        found: u32,
        /// The version this build reads and writes.
        supported: u32,
    },
}

impl FsError {
    /// The name of [`FsError::errno`] (`ENOENT`, `EINVAL`, ...).
    pub fn errno_name(&self) -> &'static str {
        match self.errno() {
            1 => "EPERM",
            2 => "ENOENT",
            5 => "EIO",
            7 => "E2BIG",
            13 => "EACCES",
            17 => "EEXIST",
            19 => "ENODEV",
            20 => "ENOTDIR",
            21 => "EISDIR",
            22 => "EINVAL",
            27 => "EFBIG",
            28 => "ENOSPC",
            30 => "EROFS",
            31 => "EMLINK",
            34 => "ERANGE",
            36 => "ENAMETOOLONG",
            39 => "ENOTEMPTY",
            61 => "ENODATA",
            95 => "EOPNOTSUPP",
            117 => "EUCLEAN",
            n => unreachable!("errno {n} has no name here: FsError::errno and errno_name disagree"),
        }
    }

    /// The POSIX errno value (Linux numbering).
    pub fn errno(&self) -> i32 {
        match self {
            FsError::NotPermitted => 1, // EPERM
            FsError::NotFound => 2,     // ENOENT
            FsError::Io(_) | FsError::Driver(_) | FsError::Bus(_) | FsError::Sim(_) => 5, // EIO
            FsError::ArgTooBig => 7,    // E2BIG
            FsError::Access => 13,      // EACCES
            FsError::Exists => 17,      // EEXIST
            FsError::NotRegular => 19,  // ENODEV
            FsError::NotDir => 20,      // ENOTDIR
            FsError::IsDir => 21,       // EISDIR
            FsError::Invalid(_) | FsError::Volume(_) => 22, // EINVAL
            FsError::TooBig => 27,      // EFBIG
            FsError::NoSpace => 28,     // ENOSPC
            FsError::ReadOnly => 30,    // EROFS
            FsError::TooManyLinks => 31, // EMLINK
            FsError::Range => 34,       // ERANGE
            FsError::NameTooLong => 36, // ENAMETOOLONG
            FsError::NotEmpty => 39,    // ENOTEMPTY
            FsError::NoData => 61,      // ENODATA
            FsError::Unsupported(_) => 95, // EOPNOTSUPP
            FsError::NotMqfs | FsError::Corrupt(_) | FsError::LayoutVersion { .. } => 117, // EUCLEAN
        }
    }
}

/// The shared POSIX refusals (what `fsapi`'s path helpers refuse with) as
/// MQFS's own variants.
impl From<fsapi::Errno> for FsError {
    fn from(e: fsapi::Errno) -> FsError {
        use fsapi::Errno as E;
        match e {
            E::NotFound => FsError::NotFound,
            E::Exists => FsError::Exists,
            E::NotDir => FsError::NotDir,
            E::IsDir => FsError::IsDir,
            E::NotEmpty => FsError::NotEmpty,
            E::Invalid(why) => FsError::Invalid(why.to_string()),
            E::NameTooLong => FsError::NameTooLong,
            E::TooLarge { .. } => FsError::TooBig,
            E::NoSpace(_) => FsError::NoSpace,
        }
    }
}

/// The kind of each error, by its errno: MQFS has its own POSIX variants
/// (no [`fsapi::Errno`] inside, so [`fsapi::FsError::errno`] is `None`).
impl fsapi::FsError for FsError {
    fn kind(&self) -> fsapi::ErrorKind {
        use fsapi::ErrorKind as K;
        match self {
            FsError::NotFound => K::NotFound,
            FsError::Exists => K::Exists,
            FsError::NotDir => K::NotDir,
            FsError::IsDir => K::IsDir,
            FsError::NotEmpty => K::NotEmpty,
            FsError::NameTooLong => K::NameTooLong,
            FsError::NoSpace => K::NoSpace,
            // EINVAL and EPERM.
            FsError::Invalid(_) | FsError::Volume(_) | FsError::NotPermitted => K::Invalid,
            FsError::TooBig => K::TooLarge,
            FsError::TooManyLinks => K::TooManyLinks,
            // EIO and EUCLEAN.
            FsError::Io(_)
            | FsError::Driver(_)
            | FsError::Bus(_)
            | FsError::Sim(_)
            | FsError::NotMqfs
            | FsError::Corrupt(_)
            | FsError::LayoutVersion { .. } => K::Io,
            FsError::Unsupported(_)
            | FsError::ReadOnly
            | FsError::NoData
            | FsError::Range
            | FsError::ArgTooBig
            | FsError::NotRegular
            | FsError::Access => K::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::FsError;

    /// One error of each variant (the match makes the compiler list any
    /// variant added later).
    fn one_of_each() -> Vec<FsError> {
        let all = vec![
            FsError::NotFound,
            FsError::Exists,
            FsError::NotDir,
            FsError::IsDir,
            FsError::NotEmpty,
            FsError::NameTooLong,
            FsError::NoSpace,
            FsError::Invalid(String::new()),
            FsError::TooBig,
            FsError::TooManyLinks,
            FsError::NotMqfs,
            FsError::Corrupt(String::new()),
            FsError::Io(String::new()),
            FsError::Unsupported(String::new()),
            FsError::Volume(String::new()),
            FsError::ReadOnly,
            FsError::NoData,
            FsError::Range,
            FsError::ArgTooBig,
            FsError::NotPermitted,
            FsError::NotRegular,
            FsError::Access,
            FsError::LayoutVersion {
                found: 4,
                supported: 5,
            },
        ];
        for e in &all {
            match e {
                FsError::NotFound
                | FsError::Exists
                | FsError::NotDir
                | FsError::IsDir
                | FsError::NotEmpty
                | FsError::NameTooLong
                | FsError::NoSpace
                | FsError::Invalid(_)
                | FsError::TooBig
                | FsError::TooManyLinks
                | FsError::NotMqfs
                | FsError::Corrupt(_)
                | FsError::Io(_)
                | FsError::Unsupported(_)
                | FsError::Volume(_)
                | FsError::ReadOnly
                | FsError::NoData
                | FsError::Range
                | FsError::ArgTooBig
                | FsError::NotPermitted
                | FsError::NotRegular
                | FsError::Access
                | FsError::LayoutVersion { .. } => {}
                // The same errno as Io: EIO.
                FsError::Driver(_) | FsError::Bus(_) | FsError::Sim(_) => {}
            }
        }
        all
    }

    #[test]
    fn every_errno_has_its_name() {
        // errno_name once lacked the attribute errors (ENODATA, ERANGE,
        // E2BIG), EPERM and ENODEV: a refused removexattr panicked in
        // crashfuzz's report of refused operations.
        let names: Vec<(i32, &str)> = one_of_each()
            .iter()
            .map(|e| (e.errno(), e.errno_name()))
            .collect();
        assert!(names.contains(&(61, "ENODATA")), "{names:?}");
        assert!(names.contains(&(34, "ERANGE")) && names.contains(&(7, "E2BIG")));
        assert!(names.contains(&(1, "EPERM")) && names.contains(&(19, "ENODEV")));
        assert!(names.contains(&(13, "EACCES")));
        assert_eq!(names.len(), 23);
    }

    #[test]
    fn each_kind_agrees_with_the_errno() {
        use fsapi::{ErrorKind as K, FsError as _};
        for e in one_of_each() {
            let want = match e.errno() {
                2 => K::NotFound,
                17 => K::Exists,
                20 => K::NotDir,
                21 => K::IsDir,
                39 => K::NotEmpty,
                36 => K::NameTooLong,
                28 => K::NoSpace,
                1 | 22 => K::Invalid,
                27 => K::TooLarge,
                31 => K::TooManyLinks,
                5 | 117 => K::Io,
                _ => K::Other,
            };
            assert_eq!(e.kind(), want, "{e:?}");
        }
    }

    #[test]
    fn the_shared_errnos_become_the_same_errno() {
        use fsapi::{Errno, FsError as _};
        let all = [
            Errno::NotFound,
            Errno::Exists,
            Errno::NotDir,
            Errno::IsDir,
            Errno::NotEmpty,
            Errno::Invalid("x"),
            Errno::NameTooLong,
            Errno::TooLarge { size: 2, max: 1 },
            Errno::NoSpace("x"),
        ];
        for e in all {
            assert_eq!(FsError::from(e).kind(), e.kind(), "{e:?}");
        }
    }
}
