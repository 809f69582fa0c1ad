//! The ioctls that reach MQFS's `fatomic` and `fdataatomic` (ccNVMe 5.1)
//! on a file of a mounted image.
//!
//! | request | number | does |
//! | --- | --- | --- |
//! | [`FATOMIC`] | `_IO('M', 1)` = `0x4d01` | `fatomic(fd)`: fsync's blocks, returning once they are atomic (in `mq` mode; other modes give fsync's guarantee) |
//! | [`FDATAATOMIC`] | `_IO('M', 2)` = `0x4d02` | `fdataatomic(fd)`: fatomic without the inode when only timestamps changed |
//!
//! Both take no argument and return 0, or -1 with `errno` set to the file
//! system's error. From C:
//!
//! ```c
//! #include <sys/ioctl.h>
//! #define MQFS_IOC_FATOMIC _IO('M', 1)
//! if (ioctl(fd, MQFS_IOC_FATOMIC) != 0) perror("fatomic");
//! ```
//!
//! `examples/fatomic.rs` is the same from Rust; the [`fatomic`] and
//! [`fdataatomic`] functions here wrap it with the `nix` crate's
//! `ioctl_none!` (the request encodings are nix's `request_code_none!`, the
//! `_IO` macro of Linux's `asm-generic/ioctl.h`).
//!
//! This is the crate's only `unsafe` code: the `ioctl` system call itself.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;

/// The ioctl type (magic) byte of MQFS.
pub const MAGIC: u8 = b'M';

/// `_IO(type, nr)` of Linux's asm-generic/ioctl.h (nix's
/// `request_code_none!`): direction "none" and size 0, so FUSE forwards the
/// request without copying any argument. FUSE hands the adapter the low 32
/// bits, which hold the whole encoding.
pub const fn io(ty: u8, nr: u8) -> u32 {
    nix::request_code_none!(ty, nr) as u32
}

/// `fatomic` of the open file.
pub const FATOMIC: u32 = io(MAGIC, 1);

/// `fdataatomic` of the open file.
pub const FDATAATOMIC: u32 = io(MAGIC, 2);

/// The system calls, as nix generates them.
mod sys {
    nix::ioctl_none!(
        /// `ioctl(fd, FATOMIC)`.
        fatomic,
        super::MAGIC,
        1
    );
    nix::ioctl_none!(
        /// `ioctl(fd, FDATAATOMIC)`.
        fdataatomic,
        super::MAGIC,
        2
    );
}

/// Calls the `_IO` (argument-less) ioctl `request` on `file` (any number,
/// e.g. one MQFS does not know, to see it refused).
pub fn raw(file: &File, request: u32) -> io::Result<()> {
    if (request >> 16) != 0 {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: `request` is an `_IO` request (no direction, size 0, checked
    // above), which takes no argument: the kernel reads and writes no user
    // memory for it, and the descriptor is open while `file` is borrowed.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), request as libc::Ioctl) };
    nix::errno::Errno::result(r).map(drop).map_err(io::Error::from)
}

/// Calls MQFS's `fatomic` on `file`.
pub fn fatomic(file: &File) -> io::Result<()> {
    // SAFETY: an `_IO` request takes no argument, so the kernel touches no
    // user memory; the descriptor is open while `file` is borrowed.
    unsafe { sys::fatomic(file.as_raw_fd()) }
        .map(drop)
        .map_err(io::Error::from)
}

/// Calls MQFS's `fdataatomic` on `file`.
pub fn fdataatomic(file: &File) -> io::Result<()> {
    // SAFETY: as for `fatomic`.
    unsafe { sys::fdataatomic(file.as_raw_fd()) }
        .map(drop)
        .map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_linux_io_encodings() {
        assert_eq!(FATOMIC, 0x4d01);
        assert_eq!(FDATAATOMIC, 0x4d02);
        assert_eq!(io(MAGIC, 9), 0x4d09);
        // Not an MQFS file: the kernel says so.
        let f = File::open("/dev/null").unwrap();
        assert!(fatomic(&f).is_err());
    }
}
