//! The whole tree as a value: every path with its type, permissions, link
//! count and content. Crash tests compare a recovered tree with the trees
//! the live run had.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::fs::{Ctx, Pmfs};
use crate::layout::{FileType, ROOT};

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

impl Pmfs {
    /// The tree, read through the file system (data loaded from the
    /// persistent memory).
    pub async fn snapshot(&self, ctx: Ctx) -> Result<Tree> {
        let mut out = Tree::new();
        let mut todo = vec![(ROOT, String::new())];
        while let Some((dir, path)) = todo.pop() {
            for (name, ino, ftype) in self.readdir(ctx, dir).await? {
                let p = format!("{path}/{name}");
                let a = self.getattr(ctx, ino).await?;
                let data = match ftype {
                    FileType::File => self.read(ctx, ino, 0, a.size as usize).await?,
                    FileType::Dir => {
                        todo.push((ino, p.clone()));
                        Vec::new()
                    }
                };
                out.insert(
                    p,
                    Node {
                        ftype,
                        perm: a.perm,
                        links: a.links,
                        data,
                    },
                );
            }
        }
        Ok(out)
    }
}
