//! The image files on the host: `IMAGE` (the drive's media, or the
//! persistent memory's bytes), `IMAGE.pmr` (PMR bytes; empty on persistent
//! memory) and `IMAGE.hdr` (the [`Header`]), the lock that keeps one
//! `mqfs` process per image, and the write-through of the PMR and of the
//! persistent memory.

use std::cell::RefCell;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use nvme_ctrl::{Image, Media, BLOCK};
use pcie_sim::{PageStore, PmrWriteHook};

use crate::error::CliError;
use crate::header::Header;

/// The three files of an image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paths {
    /// The media: block `b` at byte `b * 4096`.
    pub media: PathBuf,
    /// The PMR's bytes.
    pub pmr: PathBuf,
    /// The header.
    pub header: PathBuf,
}

impl Paths {
    /// The files of the image called `image` (its media file).
    pub fn new(image: &Path) -> Paths {
        let with = |ext: &str| {
            let mut s = image.as_os_str().to_owned();
            s.push(ext);
            PathBuf::from(s)
        };
        Paths {
            media: image.to_path_buf(),
            pmr: with(".pmr"),
            header: with(".hdr"),
        }
    }

    fn any_exists(&self) -> bool {
        [&self.media, &self.pmr, &self.header].iter().any(|p| p.exists())
    }
}

/// An image this process holds the lock of.
#[derive(Debug)]
pub struct LockedImage {
    /// Its files.
    pub paths: Paths,
    /// Its header.
    pub header: Header,
    /// The media file, locked (`flock`, exclusive) while this lives.
    _lock: File,
}

/// Takes the exclusive lock on `file`, or says the image is busy.
fn lock(file: &File, path: &Path) -> Result<(), CliError> {
    match file.try_lock() {
        Ok(()) => Ok(()),
        Err(TryLockError::WouldBlock) => Err(CliError::Busy(path.to_path_buf())),
        Err(TryLockError::Error(e)) => Err(CliError::io(path, e)),
    }
}

impl LockedImage {
    /// Opens an existing image: checks its files, locks it, reads the
    /// header and checks the files' sizes against it. Writes nothing.
    pub fn open(image: &Path) -> Result<LockedImage, CliError> {
        let paths = Paths::new(image);
        let not_image = |why: String| CliError::NotImage {
            path: image.to_path_buf(),
            why,
        };
        if paths.media.is_dir() {
            return Err(not_image("a directory".into()));
        }
        if !paths.media.exists() && !paths.header.exists() {
            return Err(not_image("no such file".into()));
        }
        if !paths.header.is_file() {
            return Err(not_image(format!("no header file {}", paths.header.display())));
        }
        if !paths.media.is_file() {
            return Err(not_image("no media file".into()));
        }
        let media = File::open(&paths.media).map_err(|e| CliError::open(&paths.media, e))?;
        lock(&media, &paths.media)?;
        let mut text = String::new();
        File::open(&paths.header)
            .and_then(|mut f| f.read_to_string(&mut text))
            .map_err(|e| CliError::open(&paths.header, e))?;
        let header = Header::parse(&text).map_err(|why| not_image(format!("header: {why}")))?;
        let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).ok();
        let want = header.blocks * BLOCK as u64;
        if size(&paths.media) != Some(want) {
            return Err(not_image(format!(
                "media file is {} bytes, the header says {want}",
                size(&paths.media).unwrap_or(0)
            )));
        }
        if size(&paths.pmr) != Some(header.pmr_bytes) {
            return Err(not_image(format!(
                "PMR file {} is missing or not {} bytes",
                paths.pmr.display(),
                header.pmr_bytes
            )));
        }
        Ok(LockedImage {
            paths,
            header,
            _lock: media,
        })
    }

    /// Creates the files of a new image (zero-filled media and PMR) and
    /// locks it; the header is written by [`LockedImage::commit_header`].
    /// Refuses to replace an existing image unless `force`.
    pub fn create(image: &Path, header: Header, force: bool) -> Result<LockedImage, CliError> {
        let paths = Paths::new(image);
        if paths.media.is_dir() {
            return Err(CliError::NotImage {
                path: image.to_path_buf(),
                why: "a directory".into(),
            });
        }
        if paths.any_exists() && !force {
            return Err(CliError::Exists(image.to_path_buf()));
        }
        let media = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&paths.media)
            .map_err(|e| CliError::open(&paths.media, e))?;
        lock(&media, &paths.media)?;
        // The lock is ours: nothing else uses these files now.
        match std::fs::remove_file(&paths.header) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(CliError::io(&paths.header, e)),
        }
        let zero = |f: &File, p: &Path, len: u64| {
            f.set_len(0)
                .and_then(|()| f.set_len(len))
                .map_err(|e| CliError::io(p, e))
        };
        zero(&media, &paths.media, header.blocks * BLOCK as u64)?;
        let pmr = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&paths.pmr)
            .map_err(|e| CliError::io(&paths.pmr, e))?;
        zero(&pmr, &paths.pmr, header.pmr_bytes)?;
        Ok(LockedImage {
            paths,
            header,
            _lock: media,
        })
    }

    /// Writes the header (to a temporary file renamed over it).
    pub fn commit_header(&self) -> Result<(), CliError> {
        let mut tmp = self.paths.header.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        std::fs::write(&tmp, self.header.render()).map_err(|e| CliError::io(&tmp, e))?;
        File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(|e| CliError::io(&tmp, e))?;
        std::fs::rename(&tmp, &self.paths.header).map_err(|e| CliError::io(&self.paths.header, e))
    }

    /// The media, read-write through a shared map of `IMAGE`.
    pub fn media_rw(&self) -> Result<Media, CliError> {
        // A file the user cannot write is bad input, said before the drive
        // is built over it.
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(&self.paths.media)
            .map_err(|e| CliError::open(&self.paths.media, e))?;
        Ok(Media::file(&self.paths.media, self.header.blocks)?)
    }

    /// A read-only view of the media (for copy-on-write sandboxes).
    pub fn media_snapshot(&self) -> Result<Arc<Image>, CliError> {
        Ok(Arc::new(Image::open(&self.paths.media)?))
    }

    /// The PMR's current bytes.
    pub fn pmr_store(&self) -> Result<PageStore, CliError> {
        let bytes = std::fs::read(&self.paths.pmr).map_err(|e| CliError::io(&self.paths.pmr, e))?;
        let mut store = PageStore::zeroed(self.header.pmr_bytes);
        store.write(0, &bytes);
        Ok(store)
    }

    /// The PMR file, open for the write-through.
    pub fn pmr_file(&self) -> Result<Rc<WriteThrough>, CliError> {
        WriteThrough::open(&self.paths.pmr, self.header.pmr_bytes)
    }

    /// The persistent memory's bytes as `IMAGE` holds them (only the 4 KiB
    /// pages that are not all zero are stored).
    pub fn pm_store(&self) -> Result<PageStore, CliError> {
        let path = &self.paths.media;
        let len = self.header.blocks * BLOCK as u64;
        let file = File::open(path).map_err(|e| CliError::open(path, e))?;
        let mut store = PageStore::zeroed(len);
        let mut page = vec![0u8; BLOCK];
        for at in (0..len).step_by(BLOCK) {
            file.read_exact_at(&mut page, at)
                .map_err(|e| CliError::io(path, e))?;
            if page.iter().any(|&b| b != 0) {
                store.write(at, &page);
            }
        }
        Ok(store)
    }

    /// `IMAGE`, open for the persistent memory's write-through.
    pub fn pm_file(&self) -> Result<Rc<WriteThrough>, CliError> {
        WriteThrough::open(&self.paths.media, self.header.blocks * BLOCK as u64)
    }
}

/// A file receiving every write into a persistent part of the simulated
/// machine as it happens: `IMAGE.pmr` the PMR's (see
/// `Machine::set_pmr_write_hook`), `IMAGE` of a persistent-memory image
/// the persistence domain's (see `Pmem::set_persist_hook`). Each write is
/// a `pwrite`, so it is in the host's page cache, and survives this
/// process, before the simulated machine goes on.
#[derive(Debug)]
pub struct WriteThrough {
    file: File,
    len: u64,
    path: PathBuf,
    /// The first write that failed (reported by [`WriteThrough::check`]).
    error: RefCell<Option<std::io::Error>>,
}

impl WriteThrough {
    /// `path` (of `len` bytes), open for writing through.
    pub fn open(path: &Path, len: u64) -> Result<Rc<WriteThrough>, CliError> {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| CliError::io(path, e))?;
        Ok(Rc::new(WriteThrough {
            file,
            len,
            path: path.to_path_buf(),
            error: RefCell::new(None),
        }))
    }

    /// The hook to give the machine.
    pub fn hook(self: &Rc<Self>) -> PmrWriteHook {
        let me = self.clone();
        Rc::new(move |offset: u64, data: &[u8]| me.write(offset, data))
    }

    fn write(&self, offset: u64, data: &[u8]) {
        // The stores drop bytes past their end; so does the file.
        let n = self.len.saturating_sub(offset).min(data.len() as u64) as usize;
        if n == 0 {
            return;
        }
        if let Err(e) = self.file.write_all_at(&data[..n], offset) {
            self.error.borrow_mut().get_or_insert(e);
        }
    }

    /// Fails if a write-through failed since the last check.
    pub fn check(&self) -> Result<(), CliError> {
        match self.error.borrow_mut().take() {
            Some(e) => Err(CliError::io(&self.path, e)),
            None => Ok(()),
        }
    }

    /// Makes the file durable on the host.
    pub fn sync(&self) -> Result<(), CliError> {
        self.check()?;
        self.file.sync_data().map_err(|e| CliError::io(&self.path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mqfs::Mode;

    fn tmpdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mqfs-cli-image-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn header() -> Header {
        Header {
            fs: crate::header::ImageFs::Mqfs(Mode::Classic),
            profile: "optane-905p".into(),
            queues: 2,
            blocks: 64,
            pmr_bytes: nvme_ctrl::SsdProfile::optane_905p().pmr_bytes,
        }
    }

    #[test]
    fn create_lock_open_and_write_through() {
        let d = tmpdir("basic");
        let img = d.join("a.img");
        let made = LockedImage::create(&img, header(), false).unwrap();
        assert!(matches!(LockedImage::open(&img), Err(CliError::NotImage { .. })));
        made.commit_header().unwrap();
        assert!(matches!(LockedImage::open(&img), Err(CliError::Busy(_))));
        let pmr = made.pmr_file().unwrap();
        let hook = pmr.hook();
        hook(10, &[1, 2, 3]);
        hook(made.header.pmr_bytes - 1, &[9, 9]);
        pmr.sync().unwrap();
        drop(made);
        assert!(matches!(
            LockedImage::create(&img, header(), false),
            Err(CliError::Exists(_))
        ));
        let again = LockedImage::open(&img).unwrap();
        let store = again.pmr_store().unwrap();
        let mut b = [0u8; 3];
        store.read(10, &mut b);
        assert_eq!(b, [1, 2, 3]);
        store.read(again.header.pmr_bytes - 1, &mut b[..1]);
        assert_eq!(b[0], 9);
        assert_eq!(again.media_rw().unwrap().blocks(), 64);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
