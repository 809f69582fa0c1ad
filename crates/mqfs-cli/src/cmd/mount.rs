//! `mqfs mount`: serve an image through FUSE in the foreground until it is
//! unmounted (Ctrl-C, SIGTERM or `fusermount3 -u MOUNTPOINT`).
//!
//! Nothing is written to the image before the mount is known to work: the
//! image is first mounted in a copy-on-write sandbox (the drive probes, the
//! file system recovers, fsck checks the result; on persistent memory the
//! file system recovers and unmounts), and only if that passes is it
//! mounted for real over its files. With `--record FILE`, the file's
//! directory is checked first, and the real mount runs on the machine of a
//! crashfuzz saved run, recorded from power-on (see [`crate::record`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::thread::JoinHandle;

use fuser::{MountOption, Session};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

use std::rc::Rc;

use crashfuzz::pm::PmMode;
use fsapi::crash::PmFs;

use crate::error::CliError;
use crate::fuse::{MqfsFuse, Outcome, Served, Unmounted};
use crate::header::ImageFs;
use crate::image::LockedImage;
use crate::record::{self, At};
use crate::rig::{host_time_ns, Rig};

/// Arguments of `mqfs mount`.
#[derive(Clone, Debug, clap::Args)]
pub struct MountArgs {
    /// The image.
    pub image: PathBuf,
    /// An existing directory to mount it on.
    pub mountpoint: PathBuf,
    /// Record the run to FILE, a crashfuzz saved run: the bus trace with
    /// payloads from power-on, and what each fsync, fdatasync, directory
    /// fsync and fatomic promised. Saved at the unmount; explore its crash
    /// states with `crashfuzz explore --trace FILE`. Slower, and the trace
    /// is held in memory until then.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Mount options, comma-separated, as mount(8) takes them:
    /// `allow_other` lets every user reach the mount (a user other than
    /// root needs `user_allow_other` in /etc/fuse.conf), and
    /// `default_permissions` makes the kernel check permissions too.
    /// MQFS checks owner, group and mode itself either way. `data=journal`
    /// journals file data with the metadata, as ext4's option does
    /// (`classic` and `horae` images; `data=ordered` is the default).
    #[arg(short = 'o', value_name = "OPTION[,OPTION...]", value_delimiter = ',')]
    pub options: Vec<String>,
}

/// The `-o` options `mqfs mount` knows (see fuse(8)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `allow_other`: every user may use the mount, not only the one who
    /// mounted it.
    pub allow_other: bool,
    /// `default_permissions`: the kernel checks permissions against the
    /// attributes it cached, before asking MQFS (which checks again).
    pub default_permissions: bool,
    /// `data=journal` (`data=ordered` turns it off): file data through
    /// the journal ([`mqfs::FsProfile::data_journal`]).
    pub data_journal: bool,
}

impl Options {
    /// Parses `-o` options; an unknown one is a usage error.
    pub fn parse(options: &[String]) -> Result<Options, CliError> {
        let mut o = Options::default();
        for opt in options.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
            match opt {
                "allow_other" => o.allow_other = true,
                "default_permissions" => o.default_permissions = true,
                "data=journal" => o.data_journal = true,
                "data=ordered" => o.data_journal = false,
                _ => {
                    return Err(CliError::Usage(format!(
                        "unknown mount option {opt:?} (known: allow_other, default_permissions, \
                         data=journal, data=ordered)"
                    )))
                }
            }
        }
        Ok(o)
    }

    /// The FUSE mount options these add.
    pub fn fuse(self) -> Vec<MountOption> {
        let mut v = Vec::new();
        if self.allow_other {
            v.push(MountOption::AllowOther);
        }
        if self.default_permissions {
            v.push(MountOption::DefaultPermissions);
        }
        v
    }
}

/// Mounts the image in a sandbox: the drive probes, the file system
/// mounts (recovering), and fsck must find no error, except the record of
/// damaged journal transactions a recovery dropped: that image mounts with
/// a warning on stderr, as Linux ext4 mounts a file system whose
/// superblock records errors (`EXT4_ERROR_FS`: "warning: mounting fs with
/// errors, running e2fsck is recommended", fs/ext4/super.c
/// `ext4_setup_super`). Refusing it would leave the image unmountable for
/// good: `fsck --repair` does not clear journal damage (M19). The mount
/// takes `profile` (the `-o` options'), so one it refuses fails here.
pub fn dry_run(image: &LockedImage, profile: mqfs::FsProfile) -> Result<(), CliError> {
    let rig = Rig::sandbox(image)?;
    let (_dev, _fs) = rig.mount_with(profile)?;
    let report = mqfs::fsck(&**rig.ctrl()?.backend())?;
    let (journal, other): (Vec<_>, Vec<_>) = report
        .errors()
        .partition(|f| f.kind == mqfs::fsck::FindingKind::JournalDamaged);
    for f in &journal {
        eprintln!("mqfs: warning: mounting with errors ({f}); `mqfs fsck` reports them");
    }
    if !other.is_empty() || report.suppressed_errors > 0 {
        let errors = other.len() as u64 + report.suppressed_errors;
        let first = other.first().map(|f| f.to_string()).unwrap_or_default();
        return Err(CliError::Fs(mqfs::FsError::Corrupt(format!(
            "fsck finds {errors} errors after recovery (first: {first})"
        ))));
    }
    Ok(())
}

/// Unmounts `mountpoint` when the process gets SIGINT, SIGTERM or SIGHUP
/// (the session then ends and the file system is unmounted cleanly). If
/// the mountpoint is busy, says so and keeps serving.
fn watch_signals(mountpoint: &Path) -> Result<(Handle, JoinHandle<()>), CliError> {
    let mut signals =
        Signals::new([SIGINT, SIGTERM, SIGHUP]).map_err(|e| CliError::io("signal handlers", e))?;
    let handle = signals.handle();
    let mp = mountpoint.to_path_buf();
    let thread = std::thread::spawn(move || {
        for _ in signals.forever() {
            match Command::new("fusermount3").arg("-u").arg(&mp).output() {
                Ok(o) if o.status.success() => {}
                Ok(o) => eprintln!(
                    "mqfs: cannot unmount {} yet: {}",
                    mp.display(),
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
                Err(e) => eprintln!("mqfs: cannot run fusermount3: {e}"),
            }
        }
    });
    Ok((handle, thread))
}

/// The prefix of an mqfs mount's source (its `fsname`) in
/// `/proc/self/mountinfo`: `mqfs:IMAGE`.
const FSNAME_PREFIX: &str = "mqfs:";

/// True if `dir` is a live mqfs mount: its line in `/proc/self/mountinfo`
/// (proc(5): the mount point is field 5, with space, tab, newline and
/// backslash escaped in octal; after the `-` separator come the
/// file-system type, `fuse` or `fuse.mqfs`, and the source, which names
/// the image after [`FSNAME_PREFIX`]). Mounting over it would hide the
/// first mount, which would then serve nobody until unmounted.
fn is_mqfs_mount(dir: &Path) -> bool {
    let Ok(dir) = dir.canonicalize() else { return false };
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    info.lines().any(|l| {
        let mut fields = l.split(' ');
        let point = fields.nth(4).map(unescape_octal);
        let mut after = fields.skip_while(|f| *f != "-").skip(1);
        let (fstype, source) = (after.next().unwrap_or(""), after.next().unwrap_or(""));
        point.as_deref() == Some(dir.as_os_str().as_encoded_bytes())
            && (fstype == "fuse" || fstype.starts_with("fuse."))
            && source.starts_with(FSNAME_PREFIX)
    })
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape_octal(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let oct = b
            .get(i + 1..i + 4)
            .filter(|d| b[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match oct {
            Some(d) => {
                out.push(
                    d.iter()
                        .fold(0u8, |v, c| v.wrapping_mul(8).wrapping_add(c - b'0')),
                );
                i += 4;
            }
            None => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    out
}

/// Mounts and serves until unmounted; returns the figures at the end and
/// the saved run, if recording.
pub fn run(args: &MountArgs) -> Result<Unmounted, CliError> {
    let opts = Options::parse(&args.options)?;
    if let Some(file) = &args.record {
        record::check_file(file)?;
    }
    match std::fs::metadata(&args.mountpoint) {
        Ok(m) if m.is_dir() => {}
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
            return Err(CliError::Usage(format!(
                "{}: a dead FUSE mount is there (`fusermount3 -u` it first)",
                args.mountpoint.display()
            )))
        }
        _ => return Err(CliError::NoMountpoint(args.mountpoint.clone())),
    }
    if is_mqfs_mount(&args.mountpoint) {
        return Err(CliError::AlreadyMounted(args.mountpoint.clone()));
    }
    let image = LockedImage::open(&args.image)?;
    match image.header.fs {
        ImageFs::Mqfs(mode) => mount_mqfs(args, opts, image, mode),
        ImageFs::Pm(fs) if args.record.is_some() => Err(CliError::Usage(format!(
            "--record saves MQFS runs; explore {} with `crashfuzz -m {}`",
            fs.name(),
            fs.name()
        ))),
        ImageFs::Pm(PmMode::Wofs) => mount_pm::<wofs::Wofs>(args, opts, image),
        ImageFs::Pm(PmMode::Soupfs) => mount_pm::<soupfs::SoupFs>(args, opts, image),
        ImageFs::Pm(PmMode::Pmfs) => mount_pm::<pmfs::Pmfs>(args, opts, image),
    }
}

/// Mounts a file system on persistent memory: first in a sandbox (its
/// recovery, then its unmount), then for real, served as owned by the
/// user who mounts (see [`crate::pm`]).
fn mount_pm<F: PmFs>(args: &MountArgs, opts: Options, image: LockedImage) -> Result<Unmounted, CliError>
where
    F::Ino: Ord,
{
    let unmountable = |e: CliError| e.on_image(&args.image, "mount");
    if opts.data_journal {
        return Err(CliError::Usage(format!(
            "data=journal is a JBD2 option; {} on persistent memory has no journal of that kind",
            F::NAME
        )));
    }
    let owner = (nix::unistd::getuid().as_raw(), nix::unistd::getgid().as_raw());
    // Read once: the sandbox and the real mount start from the same
    // bytes (the store's pages are shared until written).
    let bytes = image.pm_store()?;
    let sandbox = Rig::pm_sandbox(&image, bytes.clone())?;
    let (fs, _) = crate::pm::mount::<F>(&sandbox, owner, 0).map_err(unmountable)?;
    sandbox
        .run_fs(async move { fs.unmount(mqfs::Ctx::on(0)).await })
        .map_err(unmountable)?;
    drop(sandbox);
    let (rig, through) = Rig::on_pm_image(&image, bytes)?;
    let (fs, leaked) = crate::pm::mount::<F>(&rig, owner, host_time_ns()).map_err(unmountable)?;
    if leaked > 0 {
        eprintln!("mqfs: recovery freed {leaked} units of leaked space");
    }
    let what = format!("{} on persistent memory, {}", F::NAME, image.header.profile);
    let outcome = Outcome::default();
    let adapter = MqfsFuse::new((image, rig, through), None, Rc::new(fs), None, outcome.clone())?;
    serve(args, opts, adapter, outcome, what)
}

/// Mounts MQFS (recording the run with `--record`).
fn mount_mqfs(
    args: &MountArgs,
    opts: Options,
    image: LockedImage,
    mode: mqfs::Mode,
) -> Result<Unmounted, CliError> {
    let unmountable = |e: CliError| e.on_image(&args.image, "mount");
    let profile = |clock_base_ns| mqfs::FsProfile {
        clock_base_ns,
        data_journal: opts.data_journal,
        ..mqfs::FsProfile::default()
    };
    dry_run(&image, profile(0)).map_err(unmountable)?;
    let (rig, pmr, mut rec) = match &args.record {
        Some(file) => {
            let (rig, pmr, rec) = record::start(&image, file)?;
            (rig, pmr, Some(rec))
        }
        None => {
            let (rig, pmr) = Rig::on_image(&image)?;
            (rig, pmr, None)
        }
    };
    let start = At::of(&rig.machine);
    let (dev, fs) = rig.mount_with(profile(host_time_ns())).map_err(unmountable)?;
    if let Some(rec) = rec.as_mut() {
        rec.op("mount", 0, start, At::of(&rig.machine));
    }
    let what = format!("{} mode, {}", mode.name(), image.header.profile);
    let outcome = Outcome::default();
    let adapter = MqfsFuse::new((image, rig, pmr), Some(dev), fs, rec, outcome.clone())?;
    serve(args, opts, adapter, outcome, what)
}

/// Serves `adapter` on the mountpoint until it is unmounted; `what` says
/// what is mounted.
fn serve<S: Served>(
    args: &MountArgs,
    opts: Options,
    mut adapter: MqfsFuse<S>,
    outcome: Outcome,
    what: String,
) -> Result<Unmounted, CliError> {
    let queues = adapter.queues();
    if opts.allow_other && !opts.default_permissions {
        adapter.check_every_walk();
    }
    let mut options = vec![
        MountOption::FSName(format!("{FSNAME_PREFIX}{}", args.image.display())),
        MountOption::Subtype("mqfs".into()),
        MountOption::NoAtime,
    ];
    options.extend(opts.fuse());
    // On failure the adapter is dropped, which unmounts the file system.
    let mut session = Session::new(adapter, &args.mountpoint, &options)
        .map_err(|e| CliError::Fuse(args.mountpoint.clone(), e))?;
    let (signals, watcher) = watch_signals(&args.mountpoint)?;
    eprintln!(
        "mqfs: {} mounted on {} ({what}, {queues} queues); figures in {}/.mqfs/stats; Ctrl-C or `fusermount3 -u {}` unmounts",
        args.image.display(),
        args.mountpoint.display(),
        args.mountpoint.display(),
        args.mountpoint.display()
    );
    let served = session.run();
    drop(session);
    signals.close();
    let _ = watcher.join();
    served.map_err(|e| CliError::Fuse(args.mountpoint.clone(), e))?;
    let result = outcome.borrow_mut().take();
    result.unwrap_or_else(|| Err(CliError::Usage("the session ended without unmounting".into())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape_octal(r"/tmp/a\040b\134c"), b"/tmp/a b\\c");
        assert_eq!(unescape_octal(r"/x\04"), b"/x\\04");
        assert!(!is_mqfs_mount(Path::new("/")));
        assert!(!is_mqfs_mount(Path::new("/no/such/dir")));
    }

    #[test]
    fn mount_options_parse() {
        let o = |v: &[&str]| Options::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(o(&[]).unwrap(), Options::default());
        let both = o(&["allow_other", "default_permissions"]).unwrap();
        assert!(both.allow_other && both.default_permissions);
        assert_eq!(
            both.fuse(),
            vec![MountOption::AllowOther, MountOption::DefaultPermissions]
        );
        assert!(o(&["allow_other"]).unwrap().fuse() == vec![MountOption::AllowOther]);
        assert!(o(&["data=journal"]).unwrap().data_journal);
        assert!(!o(&["data=journal", "data=ordered"]).unwrap().data_journal);
        assert!(
            o(&["data=journal"]).unwrap().fuse().is_empty(),
            "not a FUSE option"
        );
        assert!(matches!(o(&["nosuid"]), Err(CliError::Usage(m)) if m.contains("nosuid")));
    }
}
