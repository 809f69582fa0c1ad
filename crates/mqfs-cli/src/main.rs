//! The `mqfs` command (see the crate docs of `mqfs_cli`). Every error is
//! one line on stderr: status 2 for bad input (arguments, paths, images),
//! 1 for a check that found errors or a failure of the run itself.

use clap::error::ErrorKind;
use clap::{Parser, Subcommand};
use mqfs_cli::cmd::{fsck, mkfs, mount, stat};
use mqfs_cli::CliError;

/// Make, check, inspect and mount MQFS images on the simulated machine.
#[derive(Debug, Parser)]
#[command(name = "mqfs", version, color = clap::ColorChoice::Never)]
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

/// The parse error as one line: the lines before clap's usage screen
/// (without its tips), joined. Usage screens are for `--help` only.
fn one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:"))
        .filter(|l| !l.is_empty() && !l.starts_with("tip:") && !l.starts_with("For more information"))
        .collect();
    parts.join(" ").trim_start_matches("error: ").to_string()
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => match e.kind() {
            // Asked for: the help or version screen, status 0.
            ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => e.exit(),
            ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
                eprintln!("mqfs: no subcommand (mkfs, mount, fsck or stat; --help lists them)");
                std::process::exit(2);
            }
            _ => {
                eprintln!("mqfs: {}", one_line(&e));
                std::process::exit(2);
            }
        },
    };
    if let Err(e) = run(cli.command) {
        eprintln!("mqfs: {}", e.one_line());
        std::process::exit(e.exit_code());
    }
}
