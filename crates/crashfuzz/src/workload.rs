//! Workloads: file-system operations on absolute paths, run by one or more
//! simulated threads, after an untraced setup. A workload can be written
//! in a small text format, one operation a line:
//!
//! ```text
//! # comment
//! setup mkdir /a            # runs before recording, then sync + unmount
//! mkdir /a/b                # thread 0
//! t1 create /a/c            # thread 1
//! write /a/c 0 4096 7       # offset, length, fill byte seed
//! truncate /a/c 100
//! link /a/c /a/d
//! rename /a/c /a/e
//! unlink /a/d
//! rmdir /a/b
//! symlink /a/s target
//! fsync /a/e                # also fdatasync, fatomic, fdataatomic
//! sync
//! t1 sleep 30               # simulated microseconds (to shape races)
//! t1 wait /a/e              # until the path exists (another thread's)
//! setup fill /big           # setup only: write until the disk is full
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

/// One operation.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// Create an empty regular file.
    Create(String),
    /// Create a directory.
    Mkdir(String),
    /// Write `len` bytes at `off`; byte `i` is `pattern(seed, off + i)`.
    Write(String, u64, u64, u8),
    /// Set a file's size.
    Truncate(String, u64),
    /// Hard link: `link(from, to)`.
    Link(String, String),
    /// Remove a non-directory.
    Unlink(String),
    /// Remove an empty directory.
    Rmdir(String),
    /// `rename(from, to)`.
    Rename(String, String),
    /// Symbolic link at the first path pointing to the second string.
    Symlink(String, String),
    /// fsync.
    Fsync(String),
    /// fdatasync.
    Fdatasync(String),
    /// MQFS fatomic.
    Fatomic(String),
    /// MQFS fdataatomic.
    Fdataatomic(String),
    /// sync.
    Sync,
    /// Let this many simulated microseconds pass (shapes races between
    /// threads; no file-system effect).
    Sleep(u64),
    /// Wait until the path exists (made by another thread), polling every
    /// simulated microsecond, for at most one simulated second.
    WaitFor(String),
    /// Setup only: append to the file until the disk is full (so that
    /// the recorded run reuses freed blocks at once). Bytes follow
    /// [`pattern`] with seed [`FILL_SEED`].
    Fill(String),
}

/// The pattern seed of [`Op::Fill`].
pub const FILL_SEED: u8 = 0xf1;

/// The byte written at file offset `pos` by a write with `seed`.
pub fn pattern(seed: u8, pos: u64) -> u8 {
    let p = b"abcdefghijklmnopqrstuvwxyz123456";
    p[(pos % 32) as usize].wrapping_add(seed.wrapping_mul(7))
}

impl Op {
    /// The paths the operation changes, in its own order (a link's or a
    /// rename's target last); none for syncs and waits.
    pub fn changed_paths(&self) -> Vec<&str> {
        match self {
            Op::Create(p)
            | Op::Mkdir(p)
            | Op::Write(p, ..)
            | Op::Truncate(p, _)
            | Op::Unlink(p)
            | Op::Rmdir(p)
            | Op::Symlink(p, _)
            | Op::Fill(p) => vec![p],
            Op::Link(a, b) | Op::Rename(a, b) => vec![a, b],
            Op::Fsync(_)
            | Op::Fdatasync(_)
            | Op::Fatomic(_)
            | Op::Fdataatomic(_)
            | Op::Sync
            | Op::Sleep(_)
            | Op::WaitFor(_) => vec![],
        }
    }

    /// True for operations that promise durability or atomicity.
    pub fn is_sync(&self) -> bool {
        matches!(
            self,
            Op::Fsync(_) | Op::Fdatasync(_) | Op::Fatomic(_) | Op::Fdataatomic(_) | Op::Sync
        )
    }

    /// The atomic-only counterpart (mq-atomic mode runs fsync as fatomic).
    pub fn atomic_variant(&self) -> Op {
        match self {
            Op::Fsync(p) => Op::Fatomic(p.clone()),
            Op::Fdatasync(p) => Op::Fdataatomic(p.clone()),
            o => o.clone(),
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Op::Create(p) => write!(f, "create {p}"),
            Op::Mkdir(p) => write!(f, "mkdir {p}"),
            Op::Write(p, o, l, s) => write!(f, "write {p} {o} {l} {s}"),
            Op::Truncate(p, s) => write!(f, "truncate {p} {s}"),
            Op::Link(a, b) => write!(f, "link {a} {b}"),
            Op::Unlink(p) => write!(f, "unlink {p}"),
            Op::Rmdir(p) => write!(f, "rmdir {p}"),
            Op::Rename(a, b) => write!(f, "rename {a} {b}"),
            Op::Symlink(p, t) => write!(f, "symlink {p} {t}"),
            Op::Fsync(p) => write!(f, "fsync {p}"),
            Op::Fdatasync(p) => write!(f, "fdatasync {p}"),
            Op::Fatomic(p) => write!(f, "fatomic {p}"),
            Op::Fdataatomic(p) => write!(f, "fdataatomic {p}"),
            Op::Sync => write!(f, "sync"),
            Op::Sleep(us) => write!(f, "sleep {us}"),
            Op::WaitFor(p) => write!(f, "wait {p}"),
            Op::Fill(p) => write!(f, "fill {p}"),
        }
    }
}

/// A workload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workload {
    /// Name (used in reports and replay ids).
    pub name: String,
    /// Operations run before recording starts (then sync and unmount).
    pub setup: Vec<Op>,
    /// Per thread, its operations; thread i runs on core i.
    pub threads: Vec<Vec<Op>>,
}

impl Workload {
    /// A single-threaded workload.
    pub fn single(name: &str, setup: Vec<Op>, ops: Vec<Op>) -> Workload {
        Workload {
            name: name.to_string(),
            setup,
            threads: vec![ops],
        }
    }

    /// Operations in all threads.
    pub fn op_count(&self) -> usize {
        self.threads.iter().map(|t| t.len()).sum()
    }

    /// The workload with every fsync/fdatasync turned into fatomic/
    /// fdataatomic.
    pub fn atomic(&self) -> Workload {
        Workload {
            name: self.name.clone(),
            setup: self.setup.clone(),
            threads: self
                .threads
                .iter()
                .map(|t| t.iter().map(Op::atomic_variant).collect())
                .collect(),
        }
    }

    /// The text form (parses back to the same workload).
    pub fn to_text(&self) -> String {
        let mut s = format!("# workload {}\n", self.name);
        for op in &self.setup {
            s.push_str(&format!("setup {op}\n"));
        }
        for (t, ops) in self.threads.iter().enumerate() {
            for op in ops {
                if t == 0 {
                    s.push_str(&format!("{op}\n"));
                } else {
                    s.push_str(&format!("t{t} {op}\n"));
                }
            }
        }
        s
    }
}

/// A workload file that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

/// A path operand: absolute and canonical (no empty, `.` or `..`
/// component, no trailing `/`), so that the model, the oracle and the file
/// system agree on which object it names.
fn path(s: Option<&str>, line: usize) -> Result<String, ParseError> {
    match s {
        Some(p) if p.starts_with('/') && p.len() > 1 => {
            if p[1..].split('/').any(|c| c.is_empty() || c == "." || c == "..") {
                return Err(ParseError {
                    line,
                    what: format!(
                        "{p:?} is not canonical (no empty, `.` or `..` component, no trailing `/`)"
                    ),
                });
            }
            Ok(p.to_string())
        }
        Some(p) => Err(ParseError {
            line,
            what: format!("{p:?} is not an absolute path"),
        }),
        None => Err(ParseError {
            line,
            what: "missing path".into(),
        }),
    }
}

fn num(s: Option<&str>, line: usize, what: &str) -> Result<u64, ParseError> {
    s.ok_or_else(|| ParseError {
        line,
        what: format!("missing {what}"),
    })?
    .parse()
    .map_err(|_| ParseError {
        line,
        what: format!("{what} is not a number"),
    })
}

/// Parses the text format (see the module docs).
pub fn parse(name: &str, text: &str) -> Result<Workload, ParseError> {
    let mut w = Workload {
        name: name.to_string(),
        setup: Vec::new(),
        threads: vec![Vec::new()],
    };
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        let mut words = content.split_whitespace().peekable();
        let mut thread = Some(0usize);
        if let Some(first) = words.peek() {
            if *first == "setup" {
                thread = None;
                words.next();
            } else if let Some(n) = first.strip_prefix('t').and_then(|n| n.parse::<usize>().ok()) {
                if n >= 64 {
                    return Err(ParseError {
                        line,
                        what: format!("thread {n}: at most 64 threads"),
                    });
                }
                thread = Some(n);
                words.next();
            }
        }
        let verb = words.next().unwrap_or("");
        let op = match verb {
            "create" => Op::Create(path(words.next(), line)?),
            "mkdir" => Op::Mkdir(path(words.next(), line)?),
            "write" => {
                let p = path(words.next(), line)?;
                let off = num(words.next(), line, "offset")?;
                let len = num(words.next(), line, "length")?;
                if len > 16 << 20 {
                    return Err(ParseError {
                        line,
                        what: "writes are limited to 16 MiB".into(),
                    });
                }
                let seed = match words.next() {
                    Some(s) => s.parse().map_err(|_| ParseError {
                        line,
                        what: "seed is not a byte".into(),
                    })?,
                    None => 1,
                };
                Op::Write(p, off, len, seed)
            }
            "truncate" => Op::Truncate(path(words.next(), line)?, num(words.next(), line, "size")?),
            "link" => Op::Link(path(words.next(), line)?, path(words.next(), line)?),
            "unlink" => Op::Unlink(path(words.next(), line)?),
            "rmdir" => Op::Rmdir(path(words.next(), line)?),
            "rename" => Op::Rename(path(words.next(), line)?, path(words.next(), line)?),
            "symlink" => {
                let p = path(words.next(), line)?;
                let t = words.next().ok_or_else(|| ParseError {
                    line,
                    what: "missing symlink target".into(),
                })?;
                Op::Symlink(p, t.to_string())
            }
            "fsync" => Op::Fsync(path(words.next(), line)?),
            "fdatasync" => Op::Fdatasync(path(words.next(), line)?),
            "fatomic" => Op::Fatomic(path(words.next(), line)?),
            "fdataatomic" => Op::Fdataatomic(path(words.next(), line)?),
            "sync" => Op::Sync,
            "sleep" => {
                let us = num(words.next(), line, "duration")?;
                if us > 1_000_000 {
                    return Err(ParseError {
                        line,
                        what: "sleeps are limited to one simulated second".into(),
                    });
                }
                Op::Sleep(us)
            }
            "wait" => Op::WaitFor(path(words.next(), line)?),
            "fill" if thread.is_some() => {
                return Err(ParseError {
                    line,
                    what: "fill is a setup operation (write `setup fill PATH`)".into(),
                })
            }
            "fill" => Op::Fill(path(words.next(), line)?),
            "" => {
                return Err(ParseError {
                    line,
                    what: "missing operation".into(),
                })
            }
            other => {
                return Err(ParseError {
                    line,
                    what: format!("unknown operation {other:?}"),
                })
            }
        };
        if let Some(extra) = words.next() {
            return Err(ParseError {
                line,
                what: format!("unexpected {extra:?} after the operation"),
            });
        }
        match thread {
            None => w.setup.push(op),
            Some(t) => {
                while w.threads.len() <= t {
                    w.threads.push(Vec::new());
                }
                w.threads[t].push(op);
            }
        }
    }
    if w.op_count() == 0 {
        return Err(ParseError {
            line: text.lines().count().max(1),
            what: "no operations to record".into(),
        });
    }
    Ok(w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_round_trips() {
        let w = Workload {
            name: "x".into(),
            setup: vec![Op::Mkdir("/a".into())],
            threads: vec![
                vec![
                    Op::Create("/a/f".into()),
                    Op::Write("/a/f".into(), 3, 100, 2),
                    Op::Fsync("/a/f".into()),
                ],
                vec![
                    Op::Sleep(5),
                    Op::WaitFor("/a/f".into()),
                    Op::Rename("/a/f".into(), "/g".into()),
                    Op::Sync,
                ],
            ],
        };
        assert_eq!(parse("x", &w.to_text()).unwrap(), w);
    }

    #[test]
    fn non_canonical_paths_are_refused_with_their_line() {
        for bad in ["/a/", "/a//b", "/a/./b", "/a/../b", "/.."] {
            let e = parse("x", &format!("mkdir /a\ncreate {bad}\n")).unwrap_err();
            assert_eq!(e.line, 2, "{bad}");
            assert!(e.what.contains("not canonical"), "{bad}: {}", e.what);
        }
        assert!(parse("x", "mkdir /a\ncreate /a/b.c\n").is_ok());
    }

    #[test]
    fn bad_lines_name_the_line_and_the_problem() {
        let e = parse("x", "create /a\nwrite /a zero 1\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.what.contains("offset"));
        assert_eq!(
            parse("x", "frobnicate /a").unwrap_err().what,
            "unknown operation \"frobnicate\""
        );
        assert!(parse("x", "create relative")
            .unwrap_err()
            .what
            .contains("absolute"));
        assert!(parse("x", "sync extra").unwrap_err().what.contains("unexpected"));
        assert!(parse("x", "# nothing\n").is_err());
        assert!(parse("x", "t99 sync").is_err());
        assert!(parse("x", "fill /a").unwrap_err().what.contains("setup"));
        assert_eq!(
            parse("x", "setup fill /a\nsync").unwrap().setup,
            vec![Op::Fill("/a".into())]
        );
    }
}
