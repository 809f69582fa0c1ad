//! A reference model of the namespace and file contents, and random
//! system calls checked against it.

use std::collections::{BTreeMap, BTreeSet};

use fsapi::{Ctx, Errno, FileSystem as _, FileType};
use rand::Rng;
use rand_chacha::ChaCha8Rng;
use soupfs::{FsError, SoupFs};

#[derive(Default, Debug)]
pub struct Model {
    pub dirs: BTreeSet<String>,
    pub files: BTreeMap<String, usize>,
    pub data: Vec<Vec<u8>>,
}

const NAMES: [&str; 4] = [
    "a",
    "b",
    "c",
    "a-much-longer-name-over-fifty-six-bytes-so-it-takes-two-lines",
];

fn join(dir: &str, name: &str) -> String {
    if dir == "/" {
        format!("/{name}")
    } else {
        format!("{dir}/{name}")
    }
}

fn parent(path: &str) -> String {
    match path.rsplit_once('/') {
        Some(("", _)) | None => "/".to_string(),
        Some((p, _)) => p.to_string(),
    }
}

impl Model {
    fn exists(&self, p: &str) -> bool {
        self.dirs.contains(p) || self.files.contains_key(p)
    }

    fn children(&self, d: &str) -> Vec<String> {
        self.dirs
            .iter()
            .chain(self.files.keys())
            .filter(|p| p.as_str() != "/" && parent(p) == d)
            .cloned()
            .collect()
    }

    pub fn pick<'a>(rng: &mut ChaCha8Rng, from: impl Iterator<Item = &'a String>) -> Option<String> {
        let v: Vec<&String> = from.collect();
        if v.is_empty() {
            None
        } else {
            Some(v[rng.gen_range(0..v.len())].clone())
        }
    }

    /// Moves `from` (and, for a directory, everything under it) to `to`.
    fn move_tree(&mut self, from: &str, to: &str) {
        let prefix = format!("{from}/");
        let re = |p: &String| {
            if p == from {
                Some(to.to_string())
            } else {
                p.strip_prefix(&prefix).map(|rest| format!("{to}/{rest}"))
            }
        };
        let dirs: Vec<String> = self.dirs.iter().filter(|p| re(p).is_some()).cloned().collect();
        for d in dirs {
            self.dirs.remove(&d);
            self.dirs.insert(re(&d).unwrap_or_default());
        }
        let files: Vec<(String, usize)> = self
            .files
            .iter()
            .filter(|(p, _)| re(p).is_some())
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        for (f, id) in files {
            self.files.remove(&f);
            self.files.insert(re(&f).unwrap_or_default(), id);
        }
    }

    /// What a rename should return, applying it if it succeeds.
    fn rename(&mut self, from: &str, to: &str) -> Result<(), FsError> {
        let is_dir = self.dirs.contains(from);
        let pd = parent(to);
        if is_dir && (pd == from || pd.starts_with(&format!("{from}/"))) {
            return Err(FsError::Fs(Errno::Invalid("a directory moved into itself")));
        }
        if self.exists(to) {
            if from == to || (!is_dir && self.files.get(from) == self.files.get(to)) {
                return Ok(());
            }
            match (is_dir, self.dirs.contains(to)) {
                (true, false) => return Err(FsError::Fs(Errno::NotDir)),
                (false, true) => return Err(FsError::Fs(Errno::IsDir)),
                _ => {}
            }
            if !self.children(to).is_empty() {
                return Err(FsError::Fs(Errno::NotEmpty));
            }
            self.dirs.remove(to);
            self.files.remove(to);
        }
        self.move_tree(from, to);
        Ok(())
    }
}

/// Directories, and files with their contents and link counts.
pub type Tree = (BTreeSet<String>, BTreeMap<String, (Vec<u8>, u64)>);

/// The latest view as a [`Tree`], from [`fsapi::FileSystem::snapshot`].
pub async fn dump(fs: &SoupFs, c: Ctx) -> Result<Tree, FsError> {
    let mut dirs = BTreeSet::from(["/".to_string()]);
    let mut files = BTreeMap::new();
    for (p, n) in fs.snapshot(c).await? {
        if n.ftype == FileType::Dir {
            dirs.insert(p);
        } else {
            files.insert(p, (n.data, u64::from(n.links)));
        }
    }
    Ok((dirs, files))
}

pub fn expected(m: &Model) -> Tree {
    let mut links: BTreeMap<usize, u64> = BTreeMap::new();
    for id in m.files.values() {
        *links.entry(*id).or_default() += 1;
    }
    let files = m
        .files
        .iter()
        .map(|(p, id)| (p.clone(), (m.data[*id].clone(), links[id])))
        .collect();
    (m.dirs.clone(), files)
}

pub async fn step(fs: &SoupFs, c: Ctx, m: &mut Model, rng: &mut ChaCha8Rng) -> Result<String, FsError> {
    let dir = Model::pick(rng, m.dirs.iter()).unwrap_or_else(|| "/".into());
    let name = NAMES[rng.gen_range(0..NAMES.len())];
    let path = join(&dir, name);
    let file = Model::pick(rng, m.files.keys());
    let op = rng.gen_range(0..10);
    let what = format!("op {op} {path} {file:?}");
    match op {
        0 | 1 => {
            let got = fs.create_path(c, &path).await.map(|_| ());
            if m.exists(&path) {
                assert_eq!(got, Err(FsError::Fs(Errno::Exists)), "{what}");
            } else {
                got?;
                m.data.push(Vec::new());
                m.files.insert(path, m.data.len() - 1);
            }
        }
        2 => {
            let got = fs.mkdir_path(c, &path).await.map(|_| ());
            if m.exists(&path) {
                assert_eq!(got, Err(FsError::Fs(Errno::Exists)), "{what}");
            } else {
                got?;
                m.dirs.insert(path);
            }
        }
        3 | 4 => {
            if let Some(f) = file {
                let off = rng.gen_range(0..6000u64);
                let data: Vec<u8> = (0..rng.gen_range(1..300)).map(|_| rng.gen()).collect();
                fs.write_path(c, &f, off, &data).await?;
                let d = &mut m.data[m.files[&f]];
                let end = off as usize + data.len();
                if d.len() < end {
                    d.resize(end, 0);
                }
                d[off as usize..end].copy_from_slice(&data);
            }
        }
        5 => {
            if let Some(f) = file {
                let size = rng.gen_range(0..6000usize);
                fs.truncate_path(c, &f, size as u64).await?;
                m.data[m.files[&f]].resize(size, 0);
            }
        }
        6 => {
            if let Some(f) = file {
                fs.unlink_path(c, &f).await?;
                m.files.remove(&f);
            }
        }
        7 => {
            if dir != "/" {
                let got = fs.rmdir_path(c, &dir).await;
                if m.children(&dir).is_empty() {
                    got?;
                    m.dirs.remove(&dir);
                } else {
                    assert_eq!(got, Err(FsError::Fs(Errno::NotEmpty)), "{what}");
                }
            }
        }
        8 => {
            let src = Model::pick(
                rng,
                m.dirs.iter().filter(|d| d.as_str() != "/").chain(m.files.keys()),
            );
            if let Some(src) = src {
                let got = fs.rename_path(c, &src, &path).await;
                let want = m.rename(&src, &path);
                match want {
                    Ok(()) => got?,
                    Err(FsError::Fs(Errno::Invalid(_))) => {
                        assert!(matches!(got, Err(FsError::Fs(Errno::Invalid(_)))), "{what} {src}")
                    }
                    Err(e) => assert_eq!(got, Err(e), "{what} {src}"),
                }
            }
        }
        _ => {
            if let Some(f) = file {
                let got = fs.link_path(c, &f, &path).await.map(|_| ());
                if m.exists(&path) {
                    assert_eq!(got, Err(FsError::Fs(Errno::Exists)), "{what}");
                } else {
                    got?;
                    m.files.insert(path, m.files[&f]);
                }
            }
        }
    }
    Ok(what)
}
