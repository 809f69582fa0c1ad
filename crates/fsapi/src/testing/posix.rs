//! POSIX-level behaviour through [`FileSystem`]: results, link counts,
//! typed errors (by [`ErrorKind`]), that a refused call changes nothing
//! (the tree and the adapter's usage are the same after it), and that a
//! remount rebuilds the same tree and free space. Each runs on a fresh
//! [`Env`] (seed 11) and panics on a failed check; each holds for any
//! POSIX file system. The [`posix_tests!`](crate::posix_tests) macro
//! declares them for a file system; WOFS, PMFS and MQFS (each mode) run
//! it whole, SoupFS runs by hand those that fit its contract (its
//! tests/posix.rs says which not, and why).
//!
//! Where the file systems part ways within what POSIX allows, a check
//! takes the limit as a parameter (the longest name, the largest file,
//! whether a getattr of an inode no entry names is ENOENT) or accepts
//! each answer (a hard link to a directory: POSIX's EPERM, which the
//! persistent-memory file systems give as [`ErrorKind::Invalid`], or
//! MQFS's EISDIR; creating `.` or `..`: EEXIST, as Linux says, or
//! EINVAL).

use std::fmt::Debug;
use std::future::Future;

use super::{Adapter, Env, Error, CTX};
use crate::{ErrorKind, FileSystem, FileType, FsError, Tree};

fn env<A: Adapter>() -> Env<A> {
    Env::formatted(11)
}

/// The names in the directory at `path`.
async fn names<F: FileSystem>(fs: &F, path: &str) -> Result<Vec<String>, F::Error> {
    Ok(fs
        .readdir_path(CTX, path)
        .await?
        .into_iter()
        .map(|e| e.0)
        .collect())
}

/// Runs `program` on a fresh mount of a freshly formatted file system.
fn on_fresh<A: Adapter, F, Fut>(program: F)
where
    F: FnOnce(A::Fs) -> Fut + 'static,
    Fut: Future<Output = Result<(), Error<A>>> + 'static,
{
    env::<A>().run(A::Mount::default(), program).expect("the run");
}

/// The kind of the error `r` must be.
fn err<T: std::fmt::Debug, E: FsError>(r: Result<T, E>) -> ErrorKind {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.kind(),
    }
}

/// The kind of `r`'s error, `None` if it succeeded.
fn kind<T, E: FsError>(r: &Result<T, E>) -> Option<ErrorKind> {
    r.as_ref().err().map(FsError::kind)
}

/// A hard link to a directory: EPERM (POSIX; [`ErrorKind::Invalid`]) or
/// EISDIR (MQFS, see its model test).
const LINK_A_DIR: &[ErrorKind] = &[ErrorKind::Invalid, ErrorKind::IsDir];
/// Creating `.` or `..`: EEXIST (Linux's mkdir) or EINVAL.
const MAKE_A_DOT: &[ErrorKind] = &[ErrorKind::Exists, ErrorKind::Invalid];

/// The tree and the usage: what a refused call leaves as it was.
async fn state<A: Adapter>(fs: &A::Fs) -> Result<(Tree, A::Usage), Error<A>> {
    Ok((fs.snapshot(CTX).await?, A::usage(fs).await))
}

/// Runs `op`, which must be refused with one of `kinds`, and checks that
/// it changed nothing.
async fn refused<A: Adapter, T: Debug>(
    fs: &A::Fs,
    what: &str,
    kinds: &[ErrorKind],
    op: impl Future<Output = Result<T, Error<A>>>,
) -> Result<(), Error<A>> {
    let before = state::<A>(fs).await?;
    match op.await {
        Ok(v) => panic!("{what}: succeeded with {v:?}, want {kinds:?}"),
        Err(e) => assert!(
            kinds.contains(&e.kind()),
            "{what}: {:?} ({e}), want {kinds:?}",
            e.kind()
        ),
    }
    assert!(
        state::<A>(fs).await? == before,
        "{what}: the refused call changed the tree or the usage"
    );
    Ok(())
}

/// Runs `op`, which must succeed, and checks that it changed nothing.
async fn unchanged<A: Adapter, T: Debug>(
    fs: &A::Fs,
    what: &str,
    op: impl Future<Output = Result<T, Error<A>>>,
) -> Result<(), Error<A>> {
    let before = state::<A>(fs).await?;
    op.await?;
    assert!(
        state::<A>(fs).await? == before,
        "{what}: the call changed the tree or the usage"
    );
    Ok(())
}

/// /d (a directory) holding f (5000 bytes) and sub (an empty directory),
/// /e (an empty directory), /g (a file of 2 bytes), /h (a second name of
/// /d/f).
async fn populate<F: FileSystem>(fs: &F) -> Result<(), F::Error> {
    fs.mkdir_path(CTX, "/d").await?;
    fs.create_path(CTX, "/d/f").await?;
    fs.write_path(CTX, "/d/f", 0, &[7u8; 5000]).await?;
    fs.mkdir_path(CTX, "/d/sub").await?;
    fs.mkdir_path(CTX, "/e").await?;
    fs.create_path(CTX, "/g").await?;
    fs.write_path(CTX, "/g", 0, b"gg").await?;
    fs.link_path(CTX, "/d/f", "/h").await?;
    Ok(())
}

/// Create, write (overwrite, a hole), read, readdir, root link count, fsync.
pub fn create_write_read_and_readdir<A: Adapter>() {
    on_fresh::<A, _, _>(|fs: A::Fs| async move {
        fs.mkdir_path(CTX, "/d").await?;
        let a = fs.create_path(CTX, "/d/f").await?;
        assert_eq!((a.ftype, a.size, a.links, a.perm), (FileType::File, 0, 1, 0o644));
        assert_eq!(fs.write_path(CTX, "/d/f", 0, b"hello").await?, 5);
        assert_eq!(fs.write_path(CTX, "/d/f", 3, b"p me").await?, 4);
        assert_eq!(fs.read_path(CTX, "/d/f").await?, b"help me");
        // A write past the end leaves a hole of zeros.
        fs.write_path(CTX, "/d/f", 10000, b"x").await?;
        let data = fs.read_path(CTX, "/d/f").await?;
        assert_eq!(data.len(), 10001);
        assert!(data[7..10000].iter().all(|&b| b == 0));
        assert_eq!(
            fs.getattr(CTX, a.ino).await?.pages,
            2,
            "the middle page is a hole"
        );
        assert_eq!(fs.read(CTX, a.ino, 2, 3).await?, b"lp ");
        assert_eq!(fs.read(CTX, a.ino, 20000, 3).await?, b"");
        assert_eq!(names(&fs, "/").await?, ["d"]);
        assert_eq!(fs.getattr(CTX, fs.root()).await?.links, 3);
        fs.fsync_path(CTX, "/d/f").await
    });
}

/// Each refusal has its kind and changes nothing; `name_max` is the
/// longest name, `max_size` the largest file, `absent` an unused inode
/// whose `getattr` is ENOENT (`None` where asking for an inode no entry
/// names is not ENOENT: MQFS finds a free inode's number damage).
pub fn errors_are_typed<A: Adapter>(
    name_max: usize,
    max_size: u64,
    absent: Option<<A::Fs as FileSystem>::Ino>,
) {
    on_fresh::<A, _, _>(move |fs: A::Fs| async move {
        fs.mkdir_path(CTX, "/d").await?;
        fs.create_path(CTX, "/d/f").await?;
        assert_eq!(err(fs.create_path(CTX, "/d/f").await), ErrorKind::Exists);
        assert_eq!(err(fs.mkdir_path(CTX, "/d").await), ErrorKind::Exists);
        assert_eq!(err(fs.create_path(CTX, "/nope/f").await), ErrorKind::NotFound);
        assert_eq!(err(fs.unlink_path(CTX, "/d/g").await), ErrorKind::NotFound);
        assert_eq!(err(fs.read_path(CTX, "/x").await), ErrorKind::NotFound);
        assert_eq!(err(fs.rmdir_path(CTX, "/d").await), ErrorKind::NotEmpty);
        assert_eq!(err(fs.unlink_path(CTX, "/d").await), ErrorKind::IsDir);
        assert_eq!(err(fs.rmdir_path(CTX, "/d/f").await), ErrorKind::NotDir);
        assert_eq!(err(fs.create_path(CTX, "/d/f/g").await), ErrorKind::NotDir);
        assert_eq!(err(fs.read_path(CTX, "/d").await), ErrorKind::IsDir);
        assert_eq!(err(fs.write_path(CTX, "/d", 0, b"x").await), ErrorKind::IsDir);
        assert!(LINK_A_DIR.contains(&err(fs.link_path(CTX, "/d", "/e").await)));
        assert_eq!(err(fs.rename_path(CTX, "/d", "/d/sub").await), ErrorKind::Invalid);
        assert_eq!(
            err(fs
                .create_path(CTX, &format!("/{}", "n".repeat(name_max + 1)))
                .await),
            ErrorKind::NameTooLong
        );
        assert!(MAKE_A_DOT.contains(&err(fs.create(CTX, fs.root(), "..", 0o644).await)));
        assert_eq!(
            err(fs.write_path(CTX, "/d/f", max_size, b"x").await),
            ErrorKind::TooLarge
        );
        assert_eq!(err(fs.truncate_path(CTX, "/d", 0).await), ErrorKind::IsDir);
        if let Some(absent) = absent {
            assert_eq!(err(fs.getattr(CTX, absent).await), ErrorKind::NotFound);
        }
        // Nothing changed.
        assert_eq!(fs.readdir_path(CTX, "/d").await?.len(), 1);
        Ok(())
    });
}

/// Hard links share content; the last unlink frees the data (and, where
/// `freed_is_enoent`, the inode: its getattr is ENOENT; MQFS finds a free
/// inode reached by number damage).
pub fn link_unlink_and_link_counts<A: Adapter>(freed_is_enoent: bool) {
    on_fresh::<A, _, _>(move |fs: A::Fs| async move {
        fs.create_path(CTX, "/a").await?;
        fs.write_path(CTX, "/a", 0, b"data").await?;
        assert_eq!(fs.link_path(CTX, "/a", "/b").await?.links, 2);
        fs.unlink_path(CTX, "/a").await?;
        assert_eq!(fs.read_path(CTX, "/b").await?, b"data");
        let b = fs.resolve(CTX, "/b").await?;
        assert_eq!(fs.getattr(CTX, b).await?.links, 1);
        let free = fs.statfs(CTX).await?.free_pages;
        fs.unlink_path(CTX, "/b").await?;
        assert_eq!(
            fs.statfs(CTX).await?.free_pages,
            free + 1,
            "the last link frees the data"
        );
        if freed_is_enoent {
            assert_eq!(kind(&fs.getattr(CTX, b).await), Some(ErrorKind::NotFound));
        }
        Ok(())
    });
}

/// Rename moves, replaces, refuses mismatched types and non-empty
/// targets, and renaming onto itself is a no-op.
pub fn rename_moves_replaces_and_checks_types<A: Adapter>() {
    on_fresh::<A, _, _>(|fs: A::Fs| async move {
        fs.mkdir_path(CTX, "/d").await?;
        fs.mkdir_path(CTX, "/e").await?;
        fs.create_path(CTX, "/d/a").await?;
        fs.write_path(CTX, "/d/a", 0, b"A").await?;
        fs.create_path(CTX, "/b").await?;
        fs.write_path(CTX, "/b", 0, b"B").await?;
        fs.rename_path(CTX, "/d/a", "/b").await?;
        assert_eq!(fs.read_path(CTX, "/b").await?, b"A");
        assert!(fs.readdir_path(CTX, "/d").await?.is_empty());
        assert_eq!(
            kind(&fs.rename_path(CTX, "/d", "/b").await),
            Some(ErrorKind::NotDir)
        );
        assert_eq!(
            kind(&fs.rename_path(CTX, "/b", "/d").await),
            Some(ErrorKind::IsDir)
        );
        fs.create_path(CTX, "/e/x").await?;
        assert_eq!(
            kind(&fs.rename_path(CTX, "/d", "/e").await),
            Some(ErrorKind::NotEmpty)
        );
        fs.rename_path(CTX, "/e", "/d").await?;
        assert_eq!(fs.readdir_path(CTX, "/d").await?[0].0, "x");
        fs.rename_path(CTX, "/b", "/d/y").await?;
        fs.rename_path(CTX, "/d/y", "/d/y").await?;
        assert_eq!(fs.read_path(CTX, "/d/y").await?, b"A");
        assert_eq!(names(&fs, "/").await?, ["d"]);
        Ok(())
    });
}

/// Truncate shrinks, and grows with zeros.
pub fn truncate_shrinks_and_grows_with_zeros<A: Adapter>() {
    on_fresh::<A, _, _>(|fs: A::Fs| async move {
        fs.create_path(CTX, "/f").await?;
        fs.write_path(CTX, "/f", 0, &[7u8; 6000]).await?;
        fs.truncate_path(CTX, "/f", 10).await?;
        assert_eq!(fs.read_path(CTX, "/f").await?, [7u8; 10]);
        // Growing again shows zeros, not the old bytes.
        fs.truncate_path(CTX, "/f", 5000).await?;
        let d = fs.read_path(CTX, "/f").await?;
        assert_eq!(d.len(), 5000);
        assert!(d[10..].iter().all(|&b| b == 0));
        fs.truncate_path(CTX, "/f", 20).await?;
        fs.write_path(CTX, "/f", 30, b"z").await?;
        let d = fs.read_path(CTX, "/f").await?;
        assert_eq!(&d[..], &[&[7u8; 10][..], &[0u8; 20][..], b"z"].concat()[..]);
        Ok(())
    });
}

/// After a churn of operations, an unmount ([`Adapter::unmount`]), a power
/// cycle and a remount give the same tree and the same usage; returns that
/// usage.
pub fn a_remount_rebuilds_the_same_tree_and_free_space<A: Adapter>() -> A::Usage {
    let mut env = env::<A>();
    let (tree, usage) = env
        .run(A::Mount::default(), |fs: A::Fs| async move {
            fs.mkdir_path(CTX, "/d").await?;
            fs.create_path(CTX, "/d/a").await?;
            fs.write_path(CTX, "/d/a", 0, &[1u8; 9000]).await?;
            fs.link_path(CTX, "/d/a", "/l").await?;
            fs.create_path(CTX, "/b").await?;
            fs.rename_path(CTX, "/d/a", "/b").await?;
            fs.unlink_path(CTX, "/l").await?;
            fs.truncate_path(CTX, "/b", 100).await?;
            fs.create_path(CTX, "/c").await?;
            fs.unlink_path(CTX, "/c").await?;
            let got = state::<A>(&fs).await?;
            A::unmount(fs).await?;
            Ok(got)
        })
        .expect("the run");
    env.power_cycle();
    let (tree2, usage2) = env
        .run(
            A::Mount::default(),
            |fs: A::Fs| async move { state::<A>(&fs).await },
        )
        .expect("the run");
    assert_eq!(tree, tree2);
    assert_eq!(usage, usage2);
    usage
}

/// Names through a missing directory, and missing names, are ENOENT and
/// change nothing; a removed name is gone.
pub fn a_missing_parent_or_name_is_enoent_and_changes_nothing<A: Adapter>() {
    on_fresh::<A, _, _>(|fs: A::Fs| async move {
        populate(&fs).await?;
        let r = fs.root();
        let e = &[ErrorKind::NotFound];
        refused::<A, _>(&fs, "create in missing", e, fs.create_path(CTX, "/nope/f")).await?;
        refused::<A, _>(&fs, "mkdir in missing", e, fs.mkdir_path(CTX, "/nope/x/y")).await?;
        refused::<A, _>(&fs, "link into missing", e, fs.link_path(CTX, "/d/f", "/nope/l")).await?;
        refused::<A, _>(&fs, "link of missing", e, fs.link_path(CTX, "/d/nope", "/l")).await?;
        refused::<A, _>(
            &fs,
            "rename into missing",
            e,
            fs.rename_path(CTX, "/d/f", "/nope/f"),
        )
        .await?;
        refused::<A, _>(
            &fs,
            "rename from missing dir",
            e,
            fs.rename_path(CTX, "/nope/f", "/f"),
        )
        .await?;
        refused::<A, _>(&fs, "rename of missing", e, fs.rename(CTX, r, "nope", r, "x")).await?;
        refused::<A, _>(&fs, "unlink missing", e, fs.unlink(CTX, r, "nope")).await?;
        refused::<A, _>(&fs, "unlink in missing", e, fs.unlink_path(CTX, "/nope/f")).await?;
        refused::<A, _>(&fs, "rmdir missing", e, fs.rmdir(CTX, r, "nope")).await?;
        refused::<A, _>(&fs, "lookup missing", e, fs.lookup(CTX, r, "nope")).await?;
        refused::<A, _>(&fs, "write missing", e, fs.write_path(CTX, "/d/nope", 0, b"x")).await?;
        refused::<A, _>(&fs, "read missing", e, fs.read_path(CTX, "/nope")).await?;
        refused::<A, _>(&fs, "fsync missing", e, fs.fsync_path(CTX, "/d/sub/nope")).await?;
        // A removed name is gone for good.
        fs.unlink_path(CTX, "/g").await?;
        refused::<A, _>(&fs, "unlink twice", e, fs.unlink_path(CTX, "/g")).await
    });
}

/// Removing or renaming over a non-empty directory is ENOTEMPTY and
/// changes nothing; emptied, it goes.
pub fn a_non_empty_directory_is_enotempty_and_changes_nothing<A: Adapter>() {
    on_fresh::<A, _, _>(|fs: A::Fs| async move {
        populate(&fs).await?;
        let e = &[ErrorKind::NotEmpty];
        refused::<A, _>(&fs, "rmdir", e, fs.rmdir(CTX, fs.root(), "d")).await?;
        fs.mkdir_path(CTX, "/p").await?;
        fs.mkdir_path(CTX, "/p/q").await?;
        refused::<A, _>(&fs, "rmdir (a subdirectory)", e, fs.rmdir_path(CTX, "/p")).await?;
        refused::<A, _>(&fs, "rename over", e, fs.rename_path(CTX, "/e", "/d")).await?;
        refused::<A, _>(&fs, "rename over a parent", e, fs.rename_path(CTX, "/p/q", "/p")).await?;
        fs.rmdir_path(CTX, "/p/q").await?;
        fs.rmdir_path(CTX, "/p").await?;
        assert_eq!(names(&fs, "/").await?.len(), 4, "d, e, g, h");
        Ok(())
    });
}

/// Making a name that exists is EEXIST and changes nothing.
pub fn an_existing_name_is_eexist_and_changes_nothing<A: Adapter>() {
    on_fresh::<A, _, _>(|fs: A::Fs| async move {
        populate(&fs).await?;
        let r = fs.root();
        let d = fs.resolve(CTX, "/d").await?;
        let f = fs.resolve(CTX, "/d/f").await?;
        let e = &[ErrorKind::Exists];
        refused::<A, _>(&fs, "create over a file", e, fs.create(CTX, d, "f", 0o644)).await?;
        refused::<A, _>(&fs, "create over a dir", e, fs.create(CTX, d, "sub", 0o644)).await?;
        refused::<A, _>(&fs, "mkdir over a file", e, fs.mkdir(CTX, r, "g", 0o755)).await?;
        refused::<A, _>(&fs, "mkdir over a dir", e, fs.mkdir(CTX, r, "e", 0o755)).await?;
        refused::<A, _>(&fs, "link over a file", e, fs.link(CTX, f, r, "g")).await?;
        refused::<A, _>(&fs, "link over itself", e, fs.link(CTX, f, d, "f")).await
    });
}

/// A file where a directory is needed is ENOTDIR and changes nothing.
pub fn not_a_directory_is_enotdir_and_changes_nothing<A: Adapter>() {
    on_fresh::<A, _, _>(|fs: A::Fs| async move {
        populate(&fs).await?;
        let r = fs.root();
        let d = fs.resolve(CTX, "/d").await?;
        let f = fs.resolve(CTX, "/d/f").await?;
        let e = &[ErrorKind::NotDir];
        refused::<A, _>(&fs, "create in a file", e, fs.create(CTX, f, "x", 0o644)).await?;
        refused::<A, _>(&fs, "mkdir in a file", e, fs.mkdir(CTX, f, "x", 0o755)).await?;
        refused::<A, _>(&fs, "link into a file", e, fs.link(CTX, f, f, "x")).await?;
        refused::<A, _>(&fs, "path through a file", e, fs.resolve(CTX, "/d/f/x")).await?;
        refused::<A, _>(&fs, "create through a file", e, fs.create_path(CTX, "/d/f/x/y")).await?;
        refused::<A, _>(&fs, "rmdir of a file", e, fs.rmdir(CTX, d, "f")).await?;
        refused::<A, _>(
            &fs,
            "rename a dir over a file",
            e,
            fs.rename_path(CTX, "/e", "/g"),
        )
        .await?;
        refused::<A, _>(&fs, "rename into a file", e, fs.rename(CTX, r, "g", f, "x")).await?;
        refused::<A, _>(&fs, "rename out of a file", e, fs.rename(CTX, f, "x", r, "y")).await?;
        refused::<A, _>(&fs, "unlink in a file", e, fs.unlink(CTX, f, "x")).await?;
        refused::<A, _>(&fs, "lookup in a file", e, fs.lookup(CTX, f, "x")).await?;
        refused::<A, _>(&fs, "readdir of a file", e, fs.readdir(CTX, f)).await
    });
}

/// A directory where a file is needed is EISDIR (a hard link to one:
/// EPERM or EISDIR) and changes nothing.
pub fn a_directory_where_a_file_is_needed_is_eisdir_and_changes_nothing<A: Adapter>() {
    on_fresh::<A, _, _>(|fs: A::Fs| async move {
        populate(&fs).await?;
        let r = fs.root();
        let d = fs.resolve(CTX, "/d").await?;
        let e = &[ErrorKind::IsDir];
        refused::<A, _>(&fs, "unlink a dir", e, fs.unlink(CTX, r, "d")).await?;
        refused::<A, _>(&fs, "link a dir", LINK_A_DIR, fs.link(CTX, d, r, "l")).await?;
        refused::<A, _>(
            &fs,
            "rename a file over a dir",
            e,
            fs.rename_path(CTX, "/g", "/e"),
        )
        .await?;
        refused::<A, _>(&fs, "write a dir", e, fs.write(CTX, d, 0, b"x")).await?;
        refused::<A, _>(&fs, "read a dir", e, fs.read(CTX, d, 0, 10)).await?;
        refused::<A, _>(&fs, "truncate a dir", e, fs.truncate(CTX, d, 0)).await
    });
}

/// Bad names (empty, holding `/` or NUL), removing or renaming `.` or
/// `..`, and renaming a directory into itself are EINVAL (creating `.` or
/// `..`: EEXIST or EINVAL) and change nothing; what POSIX says succeeds
/// and does nothing (a rename onto itself or onto another name of the same
/// file, an empty write past the end, an fsync) changes nothing.
pub fn bad_names_and_dot_entries_are_einval_and_change_nothing<A: Adapter>() {
    on_fresh::<A, _, _>(|fs: A::Fs| async move {
        populate(&fs).await?;
        let r = fs.root();
        let d = fs.resolve(CTX, "/d").await?;
        let sub = fs.resolve(CTX, "/d/sub").await?;
        let f = fs.resolve(CTX, "/d/f").await?;
        let e = &[ErrorKind::Invalid];
        refused::<A, _>(&fs, "create ''", e, fs.create(CTX, d, "", 0o644)).await?;
        refused::<A, _>(&fs, "create a/b", e, fs.create(CTX, d, "a/b", 0o644)).await?;
        refused::<A, _>(&fs, "mkdir with NUL", e, fs.mkdir(CTX, d, "a\0b", 0o755)).await?;
        refused::<A, _>(&fs, "link to ''", e, fs.link(CTX, f, d, "")).await?;
        refused::<A, _>(&fs, "rename to a/b", e, fs.rename(CTX, d, "f", d, "a/b")).await?;
        refused::<A, _>(&fs, "unlink .", e, fs.unlink(CTX, d, ".")).await?;
        refused::<A, _>(&fs, "unlink ..", e, fs.unlink(CTX, d, "..")).await?;
        refused::<A, _>(&fs, "rmdir .", e, fs.rmdir(CTX, d, ".")).await?;
        refused::<A, _>(&fs, "rmdir ..", e, fs.rmdir(CTX, sub, "..")).await?;
        refused::<A, _>(&fs, "rename .", e, fs.rename(CTX, d, ".", r, "x")).await?;
        refused::<A, _>(&fs, "rename to ..", e, fs.rename(CTX, r, "g", d, "..")).await?;
        refused::<A, _>(&fs, "rename a dir into itself", e, fs.rename(CTX, r, "d", d, "x")).await?;
        refused::<A, _>(
            &fs,
            "rename a dir into its subtree",
            e,
            fs.rename_path(CTX, "/d", "/d/sub/x"),
        )
        .await?;
        refused::<A, _>(&fs, "create at /", e, fs.create_path(CTX, "/")).await?;
        refused::<A, _>(&fs, "mkdir .", MAKE_A_DOT, fs.mkdir(CTX, d, ".", 0o755)).await?;
        refused::<A, _>(&fs, "create ..", MAKE_A_DOT, fs.create(CTX, d, "..", 0o644)).await?;
        refused::<A, _>(&fs, "link ..", MAKE_A_DOT, fs.link(CTX, f, d, "..")).await?;
        // What POSIX says succeeds and does nothing.
        unchanged::<A, _>(&fs, "rename onto itself", fs.rename_path(CTX, "/d/f", "/d/f")).await?;
        unchanged::<A, _>(&fs, "rename onto another link", fs.rename_path(CTX, "/d/f", "/h")).await?;
        unchanged::<A, _>(
            &fs,
            "zero-length write past the end",
            fs.write(CTX, f, 1 << 20, b""),
        )
        .await?;
        unchanged::<A, _>(&fs, "fsync", fs.fsync(CTX, d)).await
    });
}

/// A name one byte longer than `name_max` is ENAMETOOLONG wherever it is
/// used and changes nothing; a name of `name_max` bytes is fine.
pub fn a_name_too_long_is_enametoolong_and_changes_nothing<A: Adapter>(name_max: usize) {
    on_fresh::<A, _, _>(move |fs: A::Fs| async move {
        populate(&fs).await?;
        let r = fs.root();
        let d = fs.resolve(CTX, "/d").await?;
        let f = fs.resolve(CTX, "/d/f").await?;
        let long = "x".repeat(name_max + 1);
        let e = &[ErrorKind::NameTooLong];
        refused::<A, _>(&fs, "create", e, fs.create(CTX, d, &long, 0o644)).await?;
        refused::<A, _>(&fs, "mkdir", e, fs.mkdir(CTX, d, &long, 0o755)).await?;
        refused::<A, _>(&fs, "link", e, fs.link(CTX, f, d, &long)).await?;
        refused::<A, _>(&fs, "rename to", e, fs.rename(CTX, d, "f", d, &long)).await?;
        refused::<A, _>(&fs, "rename from", e, fs.rename(CTX, d, &long, d, "z")).await?;
        refused::<A, _>(&fs, "unlink", e, fs.unlink(CTX, d, &long)).await?;
        refused::<A, _>(&fs, "rmdir", e, fs.rmdir(CTX, d, &long)).await?;
        refused::<A, _>(&fs, "lookup", e, fs.lookup(CTX, d, &long)).await?;
        let through = format!("/{long}/f");
        refused::<A, _>(&fs, "resolve", e, fs.resolve(CTX, &through)).await?;
        let under = format!("/d/{long}");
        refused::<A, _>(&fs, "create_path", e, fs.create_path(CTX, &under)).await?;
        // `name_max` bytes is fine.
        let max = "m".repeat(name_max);
        fs.create(CTX, d, &max, 0o644).await?;
        assert_eq!(fs.lookup(CTX, d, &max).await?.size, 0);
        fs.rename(CTX, d, &max, r, &max).await?;
        assert!(names(&fs, "/").await?.contains(&max));
        Ok(())
    });
}

/// A zero-length write at an offset past the end changes nothing (MQFS's
/// model test found one that extended the file to the offset).
pub fn a_zero_length_write_past_the_end_changes_nothing<A: Adapter>() {
    on_fresh::<A, _, _>(|fs: A::Fs| async move {
        let f = fs.create_path(CTX, "/f").await?.ino;
        fs.write(CTX, f, 0, b"abc").await?;
        unchanged::<A, _>(&fs, "zero-length write past the end", fs.write(CTX, f, 5000, b"")).await?;
        assert_eq!(fs.getattr(CTX, f).await?.size, 3);
        Ok(())
    });
}

/// Creates, writes, an fsync, a rename and an unlink survive an unmount
/// ([`Adapter::unmount`]), a power cycle and a mount; refused calls
/// before it change nothing the mount sees.
pub fn operations_survive_a_remount<A: Adapter>() {
    let mut env = env::<A>();
    let data: Vec<u8> = (0..10000u32).map(|i| i as u8).collect();
    let d2 = data.clone();
    env.run(A::Mount::default(), |fs: A::Fs| async move {
        fs.mkdir_path(CTX, "/a").await?;
        fs.create_path(CTX, "/a/f").await?;
        fs.write_path(CTX, "/a/f", 0, &d2).await?;
        fs.fsync_path(CTX, "/a/f").await?;
        fs.create_path(CTX, "/a/g").await?;
        fs.write_path(CTX, "/a/g", 0, b"hello").await?;
        fs.rename_path(CTX, "/a/g", "/h").await?;
        fs.create_path(CTX, "/gone").await?;
        fs.unlink_path(CTX, "/gone").await?;
        assert_eq!(kind(&fs.create_path(CTX, "/a/f").await), Some(ErrorKind::Exists));
        assert_eq!(kind(&fs.rmdir_path(CTX, "/a").await), Some(ErrorKind::NotEmpty));
        A::unmount(fs).await
    })
    .expect("the run");
    env.power_cycle();
    env.run(A::Mount::default(), move |fs: A::Fs| async move {
        assert_eq!(fs.read_path(CTX, "/a/f").await?, data);
        assert_eq!(fs.read_path(CTX, "/h").await?, b"hello");
        assert_eq!(kind(&fs.resolve(CTX, "/a/g").await), Some(ErrorKind::NotFound));
        assert_eq!(kind(&fs.resolve(CTX, "/gone").await), Some(ErrorKind::NotFound));
        assert_eq!(names(&fs, "/").await?, ["a", "h"]);
        assert_eq!(names(&fs, "/a").await?, ["f"]);
        Ok(())
    })
    .expect("the remount");
}

/// Declares one `#[test]` for each shared check of this module that needs
/// nothing but the adapter `$a` (and, for the typed errors, the longest
/// name `$name_max`, the largest file `$max_size` and an unused inode whose
/// `getattr` is ENOENT, `$absent`, an `Option`: `None` where a getattr of
/// an inode no entry names is not ENOENT, which the link check then does
/// not ask of a freed inode either). The remount of
/// [`operations_survive_a_remount`] is included (a file system whose calls
/// are durable only after a sync says so in its [`Adapter::unmount`]);
/// [`a_remount_rebuilds_the_same_tree_and_free_space`] returns the usage
/// for the caller's own checks, and is called by hand.
#[macro_export]
macro_rules! posix_tests {
    ($a:ty, $name_max:expr, $max_size:expr, $absent:expr) => {
        #[test]
        fn create_write_read_and_readdir() {
            $crate::testing::posix::create_write_read_and_readdir::<$a>();
        }

        #[test]
        fn errors_are_typed() {
            $crate::testing::posix::errors_are_typed::<$a>($name_max, $max_size, $absent);
        }

        #[test]
        fn link_unlink_and_link_counts() {
            let absent: ::core::option::Option<
                <<$a as $crate::testing::Adapter>::Fs as $crate::FileSystem>::Ino,
            > = $absent;
            $crate::testing::posix::link_unlink_and_link_counts::<$a>(absent.is_some());
        }

        #[test]
        fn rename_moves_replaces_and_checks_types() {
            $crate::testing::posix::rename_moves_replaces_and_checks_types::<$a>();
        }

        #[test]
        fn truncate_shrinks_and_grows_with_zeros() {
            $crate::testing::posix::truncate_shrinks_and_grows_with_zeros::<$a>();
        }

        #[test]
        fn a_missing_parent_or_name_is_enoent_and_changes_nothing() {
            $crate::testing::posix::a_missing_parent_or_name_is_enoent_and_changes_nothing::<$a>();
        }

        #[test]
        fn a_non_empty_directory_is_enotempty_and_changes_nothing() {
            $crate::testing::posix::a_non_empty_directory_is_enotempty_and_changes_nothing::<$a>();
        }

        #[test]
        fn an_existing_name_is_eexist_and_changes_nothing() {
            $crate::testing::posix::an_existing_name_is_eexist_and_changes_nothing::<$a>();
        }

        #[test]
        fn not_a_directory_is_enotdir_and_changes_nothing() {
            $crate::testing::posix::not_a_directory_is_enotdir_and_changes_nothing::<$a>();
        }

        #[test]
        fn a_directory_where_a_file_is_needed_is_eisdir_and_changes_nothing() {
            $crate::testing::posix::a_directory_where_a_file_is_needed_is_eisdir_and_changes_nothing::<$a>();
        }

        #[test]
        fn bad_names_and_dot_entries_are_einval_and_change_nothing() {
            $crate::testing::posix::bad_names_and_dot_entries_are_einval_and_change_nothing::<$a>();
        }

        #[test]
        fn a_name_too_long_is_enametoolong_and_changes_nothing() {
            $crate::testing::posix::a_name_too_long_is_enametoolong_and_changes_nothing::<$a>($name_max);
        }

        #[test]
        fn a_zero_length_write_past_the_end_changes_nothing() {
            $crate::testing::posix::a_zero_length_write_past_the_end_changes_nothing::<$a>();
        }

        #[test]
        fn operations_survive_a_remount() {
            $crate::testing::posix::operations_survive_a_remount::<$a>();
        }
    };
}
