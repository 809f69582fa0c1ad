//! The whole tree as a value: every path with its type, permissions, link
//! count and content. Crash tests compare a recovered tree with the trees
//! the live run had.

use std::collections::BTreeMap;

use crate::api::FileType;

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
