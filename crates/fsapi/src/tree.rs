//! The whole tree as a value: every path with its type ([`FileType`]),
//! permissions, link count and content. Crash tests compare a recovered tree with the trees
//! the live run had.

use std::collections::BTreeMap;

/// A file's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileType {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (only some file systems have them; the trait
    /// neither makes nor reads one).
    Symlink,
    /// A fifo, a device or a socket (only some file systems have them).
    Special,
}

/// One path's node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Node {
    /// Type.
    pub ftype: FileType,
    /// Permission bits.
    pub perm: u16,
    /// Link count.
    pub links: u32,
    /// Content (files).
    pub data: Vec<u8>,
}

/// Every path below the root (`/a/b`), by path.
pub type Tree = BTreeMap<String, Node>;
