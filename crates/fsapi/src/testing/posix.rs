//! POSIX-level behaviour through [`FileSystem`]: results, link counts,
//! typed errors (by [`ErrorKind`]), and that a remount rebuilds the same
//! tree and free space. Each runs on a fresh [`Env`] (seed 11) and panics
//! on a failed check.

use std::future::Future;

use super::{Adapter, Env, Error, CTX};
use crate::{ErrorKind, FileSystem, FileType, FsError};

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
/// longest name, `max_size` the largest file, `absent` an unused inode.
pub fn errors_are_typed<A: Adapter>(name_max: usize, max_size: u64, absent: <A::Fs as FileSystem>::Ino) {
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
        assert_eq!(err(fs.link_path(CTX, "/d", "/e").await), ErrorKind::Invalid);
        assert_eq!(err(fs.rename_path(CTX, "/d", "/d/sub").await), ErrorKind::Invalid);
        assert_eq!(
            err(fs
                .create_path(CTX, &format!("/{}", "n".repeat(name_max + 1)))
                .await),
            ErrorKind::Invalid
        );
        assert_eq!(
            err(fs.create(CTX, fs.root(), "..", 0o644).await),
            ErrorKind::Invalid
        );
        assert_eq!(
            err(fs.write_path(CTX, "/d/f", max_size, b"x").await),
            ErrorKind::TooLarge
        );
        assert_eq!(err(fs.truncate_path(CTX, "/d", 0).await), ErrorKind::IsDir);
        assert_eq!(err(fs.getattr(CTX, absent).await), ErrorKind::NotFound);
        // Nothing changed.
        assert_eq!(fs.readdir_path(CTX, "/d").await?.len(), 1);
        Ok(())
    });
}

/// Hard links share content; the last unlink frees the data.
pub fn link_unlink_and_link_counts<A: Adapter>() {
    on_fresh::<A, _, _>(|fs: A::Fs| async move {
        fs.create_path(CTX, "/a").await?;
        fs.write_path(CTX, "/a", 0, b"data").await?;
        assert_eq!(fs.link_path(CTX, "/a", "/b").await?.links, 2);
        fs.unlink_path(CTX, "/a").await?;
        assert_eq!(fs.read_path(CTX, "/b").await?, b"data");
        let b = fs.resolve(CTX, "/b").await?;
        assert_eq!(fs.getattr(CTX, b).await?.links, 1);
        let free = A::free_pages(&fs);
        fs.unlink_path(CTX, "/b").await?;
        assert_eq!(A::free_pages(&fs), free + 1, "the last link frees the data");
        assert_eq!(kind(&fs.getattr(CTX, b).await), Some(ErrorKind::NotFound));
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

/// After a churn of operations, a power cycle and remount give the same
/// tree and the same usage; returns that usage.
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
            Ok((fs.snapshot(CTX).await?, A::usage(&fs)))
        })
        .expect("the run");
    env.power_cycle();
    let (tree2, usage2) = env
        .run(A::Mount::default(), |fs: A::Fs| async move {
            Ok((fs.snapshot(CTX).await?, A::usage(&fs)))
        })
        .expect("the run");
    assert_eq!(tree, tree2);
    assert_eq!(usage, usage2);
    usage
}

/// Declares one `#[test]` for each shared check of this module that needs
/// nothing but the adapter `$a` (and, for the typed errors, the longest
/// name `$name_max`, the largest file `$max_size` and an unused inode
/// `$absent`).
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
            $crate::testing::posix::link_unlink_and_link_counts::<$a>();
        }

        #[test]
        fn rename_moves_replaces_and_checks_types() {
            $crate::testing::posix::rename_moves_replaces_and_checks_types::<$a>();
        }

        #[test]
        fn truncate_shrinks_and_grows_with_zeros() {
            $crate::testing::posix::truncate_shrinks_and_grows_with_zeros::<$a>();
        }
    };
}
