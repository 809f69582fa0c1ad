//! The crate's one error type, and how an error becomes one line and an
//! exit status.

use std::path::PathBuf;

use mqfs::FsError;

/// What an `mqfs` command can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// An I/O error on a host file.
    #[error("{path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// A file the user named cannot be opened or created (missing
    /// directory, no permission, a directory where a file should be).
    #[error("{path}: cannot open")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A bad command-line value.
    #[error("{0}")]
    Usage(String),
    /// The mountpoint does not exist or is not a directory.
    #[error("{0}: mountpoint is not an existing directory")]
    NoMountpoint(PathBuf),
    /// The mountpoint is already a live mqfs mount.
    #[error("{0}: already an mqfs mount (unmount it first)")]
    AlreadyMounted(PathBuf),
    /// Another `mqfs` process holds the image.
    #[error("{0}: image is in use (mounted or being checked by another mqfs process)")]
    Busy(PathBuf),
    /// A file of the image is missing or the header is not ours.
    #[error("{path}: not an mqfs image ({why})")]
    NotImage {
        /// The image.
        path: PathBuf,
        /// What is missing or wrong.
        why: String,
    },
    /// `mkfs` over an existing image without `--force`.
    #[error("{0}: already exists (use --force to overwrite)")]
    Exists(PathBuf),
    /// A command could not use the image (damaged, or its recovery
    /// fails).
    #[error("{path}: cannot {action}")]
    Image {
        /// The image.
        path: PathBuf,
        /// What was tried ("mount", "check"...).
        action: &'static str,
        /// Why.
        #[source]
        source: Box<CliError>,
    },
    /// The file system failed.
    #[error(transparent)]
    Fs(#[from] FsError),
    /// The driver failed.
    #[error(transparent)]
    Driver(#[from] ccnvme::DriverError),
    /// The controller could not be built.
    #[error(transparent)]
    Ctrl(#[from] nvme_ctrl::CtrlError),
    /// The simulation stopped before an operation finished.
    #[error(transparent)]
    Run(#[from] pcie_sim::RunError),
    /// fsck found errors.
    #[error("fsck found {0} errors")]
    FsckErrors(u64),
    /// The FUSE mount failed.
    #[error("{0}: FUSE mount failed")]
    Fuse(PathBuf, #[source] std::io::Error),
    /// `mount --record FILE` cannot write FILE (checked before mounting).
    #[error("--record {path}: {why}")]
    RecordFile {
        /// The file.
        path: PathBuf,
        /// Why it cannot be written.
        why: String,
    },
    /// Saving a recorded run failed.
    #[error("saving the recorded run")]
    Record(#[source] crashfuzz::Error),
}

impl CliError {
    /// `self` as the reason `path` could not be used for `action`.
    pub fn on_image(self, path: &std::path::Path, action: &'static str) -> CliError {
        CliError::Image {
            path: path.to_path_buf(),
            action,
            source: Box::new(self),
        }
    }

    /// `path`, which the user named, cannot be opened or created.
    pub fn open(path: impl Into<PathBuf>, source: std::io::Error) -> CliError {
        CliError::Open {
            path: path.into(),
            source,
        }
    }

    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> CliError {
        CliError::Io {
            path: path.into(),
            source,
        }
    }

    /// True for errors caused by what the user gave (exit status 2).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            CliError::Usage(_)
                | CliError::Open { .. }
                | CliError::NoMountpoint(_)
                | CliError::AlreadyMounted(_)
                | CliError::Busy(_)
                | CliError::NotImage { .. }
                | CliError::Exists(_)
                | CliError::Image { .. }
                | CliError::RecordFile { .. }
                | CliError::Fs(FsError::NotMqfs | FsError::Corrupt(_) | FsError::LayoutVersion { .. })
        )
    }

    /// The exit status for this error: 2 for bad input, else 1.
    pub fn exit_code(&self) -> i32 {
        if self.is_bad_input() {
            2
        } else {
            1
        }
    }

    /// The error and its sources on one line, joined by ": ".
    pub fn one_line(&self) -> String {
        let mut s = self.to_string();
        let mut cur: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(self);
        while let Some(e) = cur {
            let part = e.to_string();
            if !part.is_empty() && !s.ends_with(&part) {
                s.push_str(": ");
                s.push_str(&part);
            }
            cur = e.source();
        }
        s.replace('\n', " ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_joins_the_chain_and_classifies() {
        let e = CliError::Fs(FsError::Corrupt("bad superblock".into())).on_image("img".as_ref(), "mount");
        assert_eq!(
            e.one_line(),
            "img: cannot mount: corrupt file system: bad superblock"
        );
        assert_eq!(e.exit_code(), 2);
        assert_eq!(CliError::FsckErrors(3).exit_code(), 1);
    }
}
