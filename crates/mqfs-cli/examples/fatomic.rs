//! Appends a line to FILE on a mounted MQFS image and calls `fatomic` on
//! it through the ioctl (see `mqfs_cli::ioctl`):
//!
//! ```text
//! cargo run -p mqfs-cli --example fatomic -- MOUNTPOINT/notes.txt
//! ```
//!
//! Prints what happened; exits 1 if the write or the ioctl failed (on a
//! file outside MQFS the ioctl fails with ENOTTY).

use std::fs::OpenOptions;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: fatomic FILE");
        return ExitCode::from(2);
    };
    let shown = path.to_string_lossy().into_owned();
    let file = OpenOptions::new().create(true).append(true).open(&path);
    let mut file = match file {
        Ok(f) => f,
        Err(e) => {
            eprintln!("fatomic: {shown}: {e}");
            return ExitCode::from(1);
        }
    };
    let line = format!("written by the fatomic example (pid {})\n", std::process::id());
    if let Err(e) = file.write_all(line.as_bytes()) {
        eprintln!("fatomic: {shown}: write: {e}");
        return ExitCode::from(1);
    }
    match mqfs_cli::ioctl::fatomic(&file) {
        Ok(()) => {
            println!("{shown}: appended {} bytes; fatomic returned 0", line.len());
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("{shown}: appended {} bytes; fatomic failed: {e}", line.len());
            ExitCode::from(1)
        }
    }
}
