//! The `mqfs` command (see the crate docs of `mqfs_cli`).

use clap::{Parser, Subcommand};
use mqfs_cli::cmd::{fsck, mkfs, mount, stat};
use mqfs_cli::CliError;

/// Make, check, inspect and mount MQFS images on the simulated machine.
#[derive(Debug, Parser)]
#[command(name = "mqfs", version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Make a new image with a fresh file system.
    Mkfs(mkfs::MkfsArgs),
    /// Mount an image through FUSE (foreground; Ctrl-C or `fusermount3 -u` unmounts;
    /// --record FILE saves the run for `crashfuzz explore --trace FILE`).
    Mount(mount::MountArgs),
    /// Check an image (after recovery in memory if it was not unmounted cleanly);
    /// --repair fixes orphans, link counts, bitmaps and unreachable inodes.
    Fsck {
        /// The image.
        image: std::path::PathBuf,
        /// Repair what can be repaired (through a real mount; an image with
        /// nothing to repair is left unchanged).
        #[arg(long)]
        repair: bool,
    },
    /// Show an image's machine, layout, journal areas and usage.
    Stat {
        /// The image.
        image: std::path::PathBuf,
    },
}

fn run(cmd: Cmd) -> Result<(), CliError> {
    match cmd {
        Cmd::Mkfs(a) => println!("{}", mkfs::run(&a)?),
        Cmd::Mount(a) => {
            let done = mount::run(&a)?;
            println!("mqfs: {} unmounted cleanly", a.image.display());
            print!("{}", done.stats.render());
            if let Some(r) = &done.recorded {
                print!("{}", r.render());
            }
        }
        Cmd::Fsck { image, repair } => {
            let (done, action) = if repair {
                (fsck::repair(&image), "repair")
            } else {
                (fsck::run(&image), "check")
            };
            print!("{}", done.map_err(|e| in_context(e, &image, action))?)
        }
        Cmd::Stat { image } => print!(
            "{}",
            stat::run(&image).map_err(|e| in_context(e, &image, "read"))?
        ),
    }
    Ok(())
}

/// Names the image in errors that do not name a file already.
fn in_context(e: CliError, image: &std::path::Path, action: &'static str) -> CliError {
    match e {
        CliError::Fs(_) | CliError::Driver(_) | CliError::Ctrl(_) | CliError::Run(_) => {
            e.on_image(image, action)
        }
        other => other,
    }
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = run(cli.command) {
        eprintln!("mqfs: {}", e.one_line());
        std::process::exit(e.exit_code());
    }
}
