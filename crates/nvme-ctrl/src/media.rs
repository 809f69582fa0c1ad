//! The non-volatile media: a store of 4 KiB blocks (the atomic write unit),
//! backed by memory, by a file through memmap2, or copy-on-write over a
//! frozen image.
//!
//! Copy-on-write is what crash exploration stands on: every crash state is
//! a frozen base image shared by all states plus a persistent map of the
//! blocks that differ, so building a state costs the blocks it changes and
//! cloning one costs nothing (`imbl` maps share structure).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::path::Path;
use std::sync::Arc;

use crate::error::CtrlError;

/// Bytes per media block (the atomic write unit).
pub const BLOCK: usize = 4096;

/// One media block.
pub type Block = Arc<[u8; BLOCK]>;

/// A zero-filled block.
pub fn zero_block() -> Block {
    Arc::new([0u8; BLOCK])
}

/// The zero-filled block every sparse image shares for its holes (one
/// allocation per process instead of one per read of a hole).
fn shared_zero_block() -> Block {
    static ZERO: std::sync::OnceLock<Block> = std::sync::OnceLock::new();
    ZERO.get_or_init(zero_block).clone()
}

/// A read-only media image, shareable across threads.
#[derive(Debug)]
pub struct Image {
    blocks: u64,
    data: ImageData,
}

#[derive(Debug)]
enum ImageData {
    /// Sparse: blocks not present read as zeros.
    Sparse(BTreeMap<u64, Block>),
    /// A mapped file, read-only.
    Mapped(memmap2::Mmap),
}

impl Image {
    /// An all-zero image of `blocks` blocks.
    pub fn zeroed(blocks: u64) -> Image {
        Image {
            blocks,
            data: ImageData::Sparse(BTreeMap::new()),
        }
    }

    /// An image holding `blocks`, zeros elsewhere.
    pub fn from_blocks(total: u64, blocks: BTreeMap<u64, Block>) -> Image {
        Image {
            blocks: total,
            data: ImageData::Sparse(blocks),
        }
    }

    /// A read-only view of a file (its length sets the size).
    pub fn open(path: &Path) -> Result<Image, CtrlError> {
        let file = File::open(path).map_err(|e| CtrlError::io(path.display().to_string(), e))?;
        let len = file
            .metadata()
            .map_err(|e| CtrlError::io(path.display().to_string(), e))?
            .len();
        // SAFETY: the map is read-only and private to this process; the
        // project never writes an image file while a frozen image maps it
        // (images are frozen only for crash exploration, after the run).
        #[allow(unsafe_code)]
        let map =
            unsafe { memmap2::Mmap::map(&file) }.map_err(|e| CtrlError::io(path.display().to_string(), e))?;
        Ok(Image {
            blocks: len / BLOCK as u64,
            data: ImageData::Mapped(map),
        })
    }

    /// Size in blocks.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Block `b` (zeros past the end): shared with the image where it
    /// holds the block in memory, copied out of a mapped file otherwise.
    pub fn block(&self, b: u64) -> Block {
        match &self.data {
            ImageData::Sparse(m) => m.get(&b).cloned().unwrap_or_else(shared_zero_block),
            ImageData::Mapped(_) => {
                let mut buf = Arc::new([0u8; BLOCK]);
                self.read(b, Arc::make_mut(&mut buf));
                buf
            }
        }
    }

    /// Copies block `b` into `buf` (zeros past the end).
    pub fn read(&self, b: u64, buf: &mut [u8; BLOCK]) {
        match &self.data {
            ImageData::Sparse(m) => match m.get(&b) {
                Some(blk) => buf.copy_from_slice(&blk[..]),
                None => buf.fill(0),
            },
            ImageData::Mapped(map) => {
                let off = b as usize * BLOCK;
                if off + BLOCK <= map.len() {
                    buf.copy_from_slice(&map[off..off + BLOCK]);
                } else {
                    buf.fill(0);
                }
            }
        }
    }
}

/// A writable media store.
#[derive(Debug)]
pub struct Media {
    blocks: u64,
    layer: Layer,
}

#[derive(Debug)]
enum Layer {
    Cow {
        base: Arc<Image>,
        delta: imbl::HashMap<u64, Block>,
    },
    File {
        map: memmap2::MmapMut,
        _file: File,
    },
}

impl Media {
    /// Zeroed media in memory.
    pub fn memory(blocks: u64) -> Media {
        Media::cow(Arc::new(Image::zeroed(blocks)), imbl::HashMap::new())
    }

    /// Media that reads `base` and keeps its own writes in `delta`.
    pub fn cow(base: Arc<Image>, delta: imbl::HashMap<u64, Block>) -> Media {
        Media {
            blocks: base.blocks(),
            layer: Layer::Cow { base, delta },
        }
    }

    /// Media backed by a file of `blocks` blocks, created (zero-filled) or
    /// extended if needed. Writes go to the file.
    pub fn file(path: &Path, blocks: u64) -> Result<Media, CtrlError> {
        let io = |e: std::io::Error| CtrlError::io(path.display().to_string(), e);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(io)?;
        let want = blocks * BLOCK as u64;
        if file.metadata().map_err(io)?.len() < want {
            file.set_len(want).map_err(io)?;
        }
        // SAFETY: the file is opened by this process for its exclusive use
        // as simulated media; nothing else truncates or maps it while the
        // controller runs, so the mapping stays valid for its lifetime.
        #[allow(unsafe_code)]
        let map = unsafe { memmap2::MmapMut::map_mut(&file) }.map_err(io)?;
        // The drive touches scattered 4 KiB blocks: no readahead on a
        // fault (madvise(2) MADV_RANDOM). Without it, each first touch of
        // a block in a sparse file zero-fills a whole readahead window,
        // which made mkfs of a 200 GiB image take half a minute.
        map.advise(memmap2::Advice::Random).map_err(io)?;
        Ok(Media {
            blocks,
            layer: Layer::File { map, _file: file },
        })
    }

    /// Size in blocks.
    pub fn blocks(&self) -> u64 {
        self.blocks
    }

    /// Block `b`: shared with the copy-on-write layer or its base image
    /// where they hold it in memory (no 4 KiB copy), copied otherwise.
    pub fn block(&self, b: u64) -> Block {
        match &self.layer {
            Layer::Cow { base, delta } => match delta.get(&b) {
                Some(blk) => blk.clone(),
                None => base.block(b),
            },
            Layer::File { .. } => {
                let mut buf = Arc::new([0u8; BLOCK]);
                self.read(b, Arc::make_mut(&mut buf));
                buf
            }
        }
    }

    /// Copies block `b` into `buf`.
    pub fn read(&self, b: u64, buf: &mut [u8; BLOCK]) {
        match &self.layer {
            Layer::Cow { base, delta } => match delta.get(&b) {
                Some(blk) => buf.copy_from_slice(&blk[..]),
                None => base.read(b, buf),
            },
            Layer::File { map, .. } => {
                let off = b as usize * BLOCK;
                if off + BLOCK <= map.len() {
                    buf.copy_from_slice(&map[off..off + BLOCK]);
                } else {
                    buf.fill(0);
                }
            }
        }
    }

    /// Replaces block `b` (ignored past the end; callers check ranges).
    pub fn write(&mut self, b: u64, data: &Block) {
        if b >= self.blocks {
            return;
        }
        match &mut self.layer {
            Layer::Cow { delta, .. } => {
                delta.insert(b, data.clone());
            }
            Layer::File { map, .. } => {
                let off = b as usize * BLOCK;
                if off + BLOCK <= map.len() {
                    map[off..off + BLOCK].copy_from_slice(&data[..]);
                }
            }
        }
    }

    /// Makes file-backed writes durable on the host file system.
    pub fn sync(&self) -> Result<(), CtrlError> {
        if let Layer::File { map, .. } = &self.layer {
            map.flush().map_err(|e| CtrlError::io("media", e))?;
        }
        Ok(())
    }

    /// A frozen copy of the current content (sharing blocks where it can).
    pub fn freeze(&self) -> Image {
        match &self.layer {
            Layer::Cow { base, delta } => {
                let mut blocks = BTreeMap::new();
                if let ImageData::Sparse(b) = &base.data {
                    blocks.extend(b.iter().map(|(k, v)| (*k, v.clone())));
                } else {
                    let mut buf = [0u8; BLOCK];
                    for b in 0..base.blocks() {
                        base.read(b, &mut buf);
                        if buf.iter().any(|x| *x != 0) {
                            blocks.insert(b, Arc::new(buf));
                        }
                    }
                }
                blocks.extend(delta.iter().map(|(k, v)| (*k, v.clone())));
                Image::from_blocks(self.blocks, blocks)
            }
            Layer::File { map, .. } => {
                let mut blocks = BTreeMap::new();
                for (i, chunk) in map.chunks_exact(BLOCK).enumerate() {
                    if chunk.iter().any(|x| *x != 0) {
                        let mut b = [0u8; BLOCK];
                        b.copy_from_slice(chunk);
                        blocks.insert(i as u64, Arc::new(b));
                    }
                }
                Image::from_blocks(self.blocks, blocks)
            }
        }
    }

    /// The blocks written since this media was created over its base (COW
    /// media only).
    pub fn delta(&self) -> Option<&imbl::HashMap<u64, Block>> {
        match &self.layer {
            Layer::Cow { delta, .. } => Some(delta),
            Layer::File { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cow_media_shares_base_and_keeps_writes_apart() {
        let mut base_blocks = BTreeMap::new();
        base_blocks.insert(3, Arc::new([7u8; BLOCK]));
        let base = Arc::new(Image::from_blocks(16, base_blocks));
        let mut a = Media::cow(base.clone(), imbl::HashMap::new());
        let b = Media::cow(base, imbl::HashMap::new());
        a.write(3, &Arc::new([9u8; BLOCK]));
        let mut buf = [0u8; BLOCK];
        a.read(3, &mut buf);
        assert_eq!(buf[0], 9);
        b.read(3, &mut buf);
        assert_eq!(buf[0], 7);
        b.read(4, &mut buf);
        assert_eq!(buf[0], 0);
        let frozen = a.freeze();
        frozen.read(3, &mut buf);
        assert_eq!(buf[0], 9);
    }

    #[test]
    fn file_media_persists_across_reopen() {
        let dir = std::env::temp_dir().join(format!("nvme-ctrl-media-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("img");
        {
            let mut m = Media::file(&path, 8).unwrap();
            m.write(5, &Arc::new([0xee; BLOCK]));
            m.write(100, &Arc::new([1; BLOCK])); // past the end: ignored
            m.sync().unwrap();
        }
        let m = Media::file(&path, 8).unwrap();
        let mut buf = [0u8; BLOCK];
        m.read(5, &mut buf);
        assert_eq!(buf[17], 0xee);
        let img = Image::open(&path).unwrap();
        assert_eq!(img.blocks(), 8);
        img.read(5, &mut buf);
        assert_eq!(buf[0], 0xee);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
