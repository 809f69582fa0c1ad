//! Extended attributes: setxattr, getxattr, listxattr, removexattr
//! (Linux `fs/ext4/xattr.c`, setxattr(2)).
//!
//! An inode's attributes live in one external block (Ext4's EA block,
//! pointed to by `i_file_acl`; here [`Inode::xattr`](crate::layout::Inode)),
//! in the format of [`encode_xattr_block`]. The block is metadata: it is
//! allocated, changed and freed like an extent-tree block, marked dirty on
//! behalf of its inode, so each mode's fsync persists it with the inode (the JBD2
//! journal in `classic` and `horae`, the inode's transaction in `mq`, in
//! place in `none`). It is freed when its last attribute is removed (Ext4's
//! `ext4_xattr_release_block`) and when the inode is freed.
//!
//! Deviations from Ext4: no in-inode attribute area (every attribute is in
//! the block), no sharing of identical blocks between inodes (the refcount
//! is always 1, so no mbcache), no `ea_inode` for values larger than a
//! block (such a value fails with `NoSpace`, as Ext4 without `ea_inode`),
//! and no permission checks (the callers have no credentials; `trusted.`
//! needs `CAP_SYS_ADMIN` in Linux). `system.` names are stored as given,
//! except `system.posix_acl_*`: ACLs are not implemented, so they are
//! EOPNOTSUPP (ext4 without the `acl` option).

use std::collections::BTreeMap;

use crate::error::FsError;
use crate::fs::{Ctx, Fs, Ino, InodeState};
use crate::layout::{
    decode_xattr_block, encode_xattr_block, xattr_bytes, xattr_split, FileType, XATTR_NAME_MAX,
    XATTR_SIZE_MAX, XATTR_SPACE,
};

/// How [`Fs::setxattr`] treats an existing attribute (setxattr(2) flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum XattrFlags {
    /// Create or replace (flags 0).
    Any,
    /// `XATTR_CREATE`: fail with `Exists` (EEXIST) if it exists.
    Create,
    /// `XATTR_REPLACE`: fail with `NoData` (ENODATA) if it does not.
    Replace,
}

/// Checks an attribute name as Linux does: empty or longer than 255 bytes
/// is `Range` (ERANGE, `fs/xattr.c` `import_xattr_name`); a prefix other
/// than `user.`, `trusted.`, `security.` and `system.` is `Unsupported`
/// (EOPNOTSUPP: no handler); a known prefix with nothing after it is
/// `Invalid` (EINVAL, `xattr_resolve_name`).
fn check_name(name: &str) -> Result<(), FsError> {
    if name.is_empty() || name.len() > XATTR_NAME_MAX {
        return Err(FsError::Range);
    }
    // POSIX ACLs are not implemented: ext4 mounted without `acl` answers
    // EOPNOTSUPP for them, which makes programs (cp -a) fall back to
    // chmod; storing them opaquely would drop the mode they carry.
    if name.starts_with("system.posix_acl_") {
        return Err(FsError::Unsupported(format!("POSIX ACL {name:?}")));
    }
    match xattr_split(name) {
        None => Err(FsError::Unsupported(format!("attribute namespace of {name:?}"))),
        Some((_, "")) => Err(FsError::Invalid(format!("attribute name {name:?} has no suffix"))),
        Some(_) => Ok(()),
    }
}

impl Fs {
    /// The attributes of `st` (empty without a block). A damaged block is
    /// `Corrupt`.
    async fn load_xattrs(&self, ctx: Ctx, st: &InodeState) -> Result<BTreeMap<String, Vec<u8>>, FsError> {
        let b = st.inode.borrow().xattr;
        if b == 0 {
            return Ok(BTreeMap::new());
        }
        let buf = self.meta(ctx, b).await?;
        let attrs = decode_xattr_block(&buf.data()[..])?;
        Ok(attrs)
    }

    /// Sets attribute `name` of `ino` to `value` (setxattr(2)). Errors:
    /// `Exists` with [`XattrFlags::Create`] if present, `NoData` with
    /// [`XattrFlags::Replace`] if absent, `ArgTooBig` (E2BIG) for a value
    /// over 64 KiB, `NoSpace` when the attributes would not fit their block
    /// (or no block is free), `NotPermitted` for a `user.` attribute on
    /// other than a file or directory (Linux `xattr_permission`), and the
    /// name errors of the module.
    pub async fn setxattr(
        &self,
        ctx: Ctx,
        ino: Ino,
        name: &str,
        value: &[u8],
        flags: XattrFlags,
    ) -> Result<(), FsError> {
        check_name(name)?;
        if value.len() > XATTR_SIZE_MAX {
            return Err(FsError::ArgTooBig);
        }
        self.check_writable()?;
        let _op = self.begin(ctx).await?;
        let st = self.iget(ctx, ino).await?;
        let _g = st.lock.lock().await;
        let ftype = st.inode.borrow().file_type();
        if name.starts_with("user.") && !matches!(ftype, Some(FileType::File | FileType::Dir)) {
            return Err(FsError::NotPermitted);
        }
        let mut attrs = self.load_xattrs(ctx, &st).await?;
        match (flags, attrs.contains_key(name)) {
            (XattrFlags::Create, true) => return Err(FsError::Exists),
            (XattrFlags::Replace, false) => return Err(FsError::NoData),
            _ => {}
        }
        attrs.insert(name.to_string(), value.to_vec());
        if xattr_bytes(&attrs) > XATTR_SPACE {
            return Err(FsError::NoSpace);
        }
        self.store_xattrs(ctx, &st, &attrs).await
    }

    /// The value of attribute `name` of `ino` (getxattr(2)); `NoData` if
    /// absent. The FUSE adapter applies the size-probe protocol.
    pub async fn getxattr(&self, ctx: Ctx, ino: Ino, name: &str) -> Result<Vec<u8>, FsError> {
        self.cpu(ctx, self.profile.cpu.syscall).await;
        check_name(name)?;
        let st = self.iget(ctx, ino).await?;
        let _g = st.lock.lock().await;
        let mut attrs = self.load_xattrs(ctx, &st).await?;
        attrs.remove(name).ok_or(FsError::NoData)
    }

    /// The names of `ino`'s attributes, sorted (listxattr(2)).
    pub async fn listxattr(&self, ctx: Ctx, ino: Ino) -> Result<Vec<String>, FsError> {
        self.cpu(ctx, self.profile.cpu.syscall).await;
        let st = self.iget(ctx, ino).await?;
        let _g = st.lock.lock().await;
        let attrs = self.load_xattrs(ctx, &st).await?;
        Ok(attrs.into_keys().collect())
    }

    /// Removes attribute `name` of `ino` (removexattr(2)); `NoData` if
    /// absent. Removing the last one frees the block.
    pub async fn removexattr(&self, ctx: Ctx, ino: Ino, name: &str) -> Result<(), FsError> {
        check_name(name)?;
        self.check_writable()?;
        let _op = self.begin(ctx).await?;
        let st = self.iget(ctx, ino).await?;
        let _g = st.lock.lock().await;
        let mut attrs = self.load_xattrs(ctx, &st).await?;
        if attrs.remove(name).is_none() {
            return Err(FsError::NoData);
        }
        self.store_xattrs(ctx, &st, &attrs).await
    }

    /// Writes `attrs` as `st`'s attribute block: allocated on the first
    /// attribute, rewritten on a change, freed when none is left. The inode
    /// is written too (its block pointer, count and ctime). Everything that
    /// can fail (encoding, the allocation) comes before any change.
    async fn store_xattrs(
        &self,
        ctx: Ctx,
        st: &InodeState,
        attrs: &BTreeMap<String, Vec<u8>>,
    ) -> Result<(), FsError> {
        let old = st.inode.borrow().xattr;
        if attrs.is_empty() {
            if old != 0 {
                {
                    let mut i = st.inode.borrow_mut();
                    i.xattr = 0;
                    i.nblocks = i.nblocks.saturating_sub(1);
                }
                self.free_block(ctx, st, old, true).await?;
            }
        } else {
            let enc = encode_xattr_block(attrs)?;
            let (b, buf) = if old == 0 {
                let goal = st.inode.borrow().tree.first().map_or(0, |e| e.physical);
                let b = self.mb_new_block(ctx, st, None, goal).await?;
                {
                    let mut i = st.inode.borrow_mut();
                    i.xattr = b;
                    i.nblocks += 1;
                }
                (b, self.meta_new(b))
            } else {
                (old, self.meta(ctx, old).await?)
            };
            {
                let _l = buf.lock.lock().await;
                buf.modify().copy_from_slice(&enc[..]);
            }
            self.dirtied(b, &[st]);
        }
        st.inode.borrow_mut().ctime = self.current_time();
        self.write_inode(ctx, st).await
    }

    /// Frees `st`'s attribute block, if any (the inode is being freed).
    pub(crate) async fn free_xattrs(&self, ctx: Ctx, st: &InodeState) -> Result<(), FsError> {
        let b = std::mem::take(&mut st.inode.borrow_mut().xattr);
        if b != 0 {
            {
                let mut i = st.inode.borrow_mut();
                i.nblocks = i.nblocks.saturating_sub(1);
            }
            self.free_block(ctx, st, b, true).await?;
        }
        Ok(())
    }
}
