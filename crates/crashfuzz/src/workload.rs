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
//! fsync /                   # the root directory is `/`
//! dwrite /a/e 0 8192 3      # O_DIRECT write: block-aligned offset and length
//! sfr /a/e 0 8192           # sync_file_range(WAIT_BEFORE|WRITE|WAIT_AFTER)
//! mwrite /a/e 100 20 4      # a store through a shared mapping (within the size)
//! msync /a/e 0 4096         # msync(MS_SYNC) of that range
//! open 3 /a/e               # descriptor 3 names the file, not the path
//! unlink /a/e
//! fdwrite 3 0 100 5         # through the descriptor (also fdfsync 3, fdfdatasync 3)
//! fstat 3                   # size and link count checked against the model
//! close 3                   # the last close of a nameless file frees it
//! setxattr /a/e user.k 100 6  # value: 100 bytes of pattern(6, 0..100)
//! setxattr /a/e user.k 9 2 replace  # also `create` (XATTR_CREATE)
//! removexattr /a/e user.k
//! sync
//! t1 sleep 30               # simulated microseconds (to shape races)
//! t1 wait /a/e              # until the path exists (another thread's)
//! setup fill /big           # setup only: write until the disk is full
//! expect pass               # every run of the workload must pass
//! expect caught mq+no-revoke  # ... but this mode (and fault) must be caught
//! ```
//!
//! An operation the file system refuses (EINVAL for an unaligned `dwrite`,
//! a `mwrite` past the end of the file, ENODATA for a `removexattr` of an
//! absent attribute) changes nothing and promises nothing; the recorder
//! keeps it, with its line, for the report.

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
    /// HoRAE's `fbarrier` (Table 1): the file's data and metadata ordered
    /// before every later write, without durability (fsync elsewhere).
    Fbarrier(String),
    /// HoRAE's `fdatabarrier`: the file's data ordered, no commit
    /// (fdatasync elsewhere).
    Fdatabarrier(String),
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
    /// A write through a file descriptor opened with `O_DIRECT` (open(2)):
    /// `off` and `len` must be multiples of the block size, else EINVAL
    /// as Linux gives. The data goes to the device before the call
    /// returns, past the page cache, but without a FLUSH (it may sit in
    /// the drive's volatile cache) and without the allocation metadata:
    /// it promises nothing until a later fsync.
    Dwrite(String, u64, u64, u8),
    /// sync_file_range(2) with `SYNC_FILE_RANGE_WAIT_BEFORE | WRITE |
    /// WAIT_AFTER` over `len` bytes at `off` (`len` 0: to the end):
    /// writes the range's dirty pages and waits, with no metadata and no
    /// FLUSH. Promises nothing (the man page says so); it changes which
    /// writes are in flight when.
    Sfr(String, u64, u64),
    /// A store of `len` bytes at `off` through a `MAP_SHARED` mapping of
    /// the file: the whole range must lie within the file's size (beyond
    /// it a store faults with SIGBUS, mmap(2); refused here as EINVAL).
    /// It changes the page cache as a write does, never the size.
    Mwrite(String, u64, u64, u8),
    /// msync(2) with `MS_SYNC` over `len` bytes at `off`: Linux runs
    /// `vfs_fsync_range(file, start, end, 1)` (mm/msync.c), so it promises
    /// what fdatasync of the file promises.
    Msync(String, u64, u64),
    /// Opens the regular file at the path as descriptor `fd` (a number
    /// the workload picks, shared by its threads, as a process's
    /// descriptors are): the descriptor names the file, not the path, so
    /// it keeps working after a rename or the last `unlink` (unlink(2)).
    /// Refused if `fd` is open already.
    Open(u32, String),
    /// Closes `fd`; the last close of a file with no name left frees it.
    Close(u32),
    /// [`Op::Write`] through `fd`.
    Fdwrite(u32, u64, u64, u8),
    /// fsync(2) through `fd`: promises as fsync of the file's name does,
    /// if it still has one; the data of an unlinked file is visible
    /// nowhere, so then nothing.
    Fdfsync(u32),
    /// fdatasync(2) through `fd` (as [`Op::Fdfsync`]).
    Fdfdatasync(u32),
    /// fstat(2) through `fd`: the recorder checks the size and link count
    /// against the model (a mismatch fails the recording).
    Fstat(u32),
    /// fallocate(2) of `len` bytes at `off` in the given mode. What a read
    /// then sees changes as a write of zeros does: allocate extends the
    /// size (new bytes read as zeros), keep-size changes nothing visible,
    /// punch-hole and the zero-range modes zero the range (punch-hole and
    /// zero-range-keep-size within the size only).
    Fallocate(String, Falloc, u64, u64),
    /// setxattr(2) of attribute `name` (with its namespace prefix,
    /// `user.k`) of the node at the path, to `len` bytes where byte `i` is
    /// `pattern(seed, i)`, with the flags `how`. Refused as Linux refuses
    /// it (EEXIST, ENODATA, ENOSPC when the attributes outgrow their block,
    /// E2BIG over 64 KiB, EOPNOTSUPP for an unknown namespace).
    Setxattr(String, String, u64, u8, XattrHow),
    /// removexattr(2) of attribute `name` of the node at the path
    /// (ENODATA if absent).
    Removexattr(String, String),
}

/// The flags of a setxattr(2), as the workload language names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum XattrHow {
    /// Flags 0: create or replace (no word in the language).
    Any,
    /// `XATTR_CREATE` (`create`): EEXIST if the attribute exists.
    Create,
    /// `XATTR_REPLACE` (`replace`): ENODATA if it does not.
    Replace,
}

impl XattrHow {
    /// The file system's flags.
    pub fn fs_flags(self) -> mqfs::XattrFlags {
        match self {
            XattrHow::Any => mqfs::XattrFlags::Any,
            XattrHow::Create => mqfs::XattrFlags::Create,
            XattrHow::Replace => mqfs::XattrFlags::Replace,
        }
    }
}

/// The longest attribute value a workload may set: larger than Linux
/// accepts (`XATTR_SIZE_MAX`, 64 KiB), so that E2BIG can be tested.
pub const XATTR_VALUE_LIMIT: u64 = 1 << 20;

/// The value [`Op::Setxattr`] sets: `len` bytes of `seed`'s pattern from
/// position 0.
pub fn xattr_value(len: u64, seed: u8) -> Vec<u8> {
    (0..len).map(|i| pattern(seed, i)).collect()
}

/// A fallocate(2) mode, as the workload language names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Falloc {
    /// Mode 0: allocate, extending the size.
    Alloc,
    /// `FALLOC_FL_KEEP_SIZE`.
    KeepSize,
    /// `FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`.
    PunchHole,
    /// `FALLOC_FL_ZERO_RANGE`.
    ZeroRange,
    /// `FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE`.
    ZeroRangeKeepSize,
}

impl Falloc {
    /// Every mode, with its name in the language.
    pub const ALL: [(Falloc, &'static str); 5] = [
        (Falloc::Alloc, "alloc"),
        (Falloc::KeepSize, "keep-size"),
        (Falloc::PunchHole, "punch-hole"),
        (Falloc::ZeroRange, "zero-range"),
        (Falloc::ZeroRangeKeepSize, "zero-range-keep-size"),
    ];

    /// Its name in the language.
    pub fn name(self) -> &'static str {
        Falloc::ALL
            .iter()
            .find(|(m, _)| *m == self)
            .map_or("?", |(_, n)| n)
    }

    /// The file system's mode.
    pub fn fs_mode(self) -> mqfs::FallocMode {
        match self {
            Falloc::Alloc => mqfs::FallocMode::Allocate,
            Falloc::KeepSize => mqfs::FallocMode::KeepSize,
            Falloc::PunchHole => mqfs::FallocMode::PunchHole,
            Falloc::ZeroRange => mqfs::FallocMode::ZeroRange,
            Falloc::ZeroRangeKeepSize => mqfs::FallocMode::ZeroRangeKeepSize,
        }
    }

    /// The content and size a file of `content` has after this mode over
    /// `len` bytes at `off`.
    pub fn apply(self, content: &mut crate::content::Content, off: u64, len: u64) {
        let (off, end) = (off as usize, off.saturating_add(len) as usize);
        let size = content.len();
        match self {
            Falloc::Alloc => {
                if end > size {
                    content.set_len(end);
                }
            }
            Falloc::KeepSize => {}
            Falloc::PunchHole | Falloc::ZeroRangeKeepSize => content.zero(off, end),
            Falloc::ZeroRange => {
                if end > size {
                    content.set_len(end);
                }
                content.zero(off.min(end), end);
            }
        }
    }
}

/// Descriptors a workload may use: `0..MAX_FD`.
pub const MAX_FD: u32 = 1024;

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
            | Op::Fill(p)
            | Op::Dwrite(p, ..)
            | Op::Mwrite(p, ..)
            | Op::Fallocate(p, ..)
            | Op::Setxattr(p, ..)
            | Op::Removexattr(p, _) => vec![p],
            Op::Link(a, b) | Op::Rename(a, b) => vec![a, b],
            Op::Fsync(_)
            | Op::Fdatasync(_)
            | Op::Sfr(..)
            | Op::Msync(..)
            // A descriptor's file: the recorder knows its names.
            | Op::Open(..)
            | Op::Close(_)
            | Op::Fdwrite(..)
            | Op::Fdfsync(_)
            | Op::Fdfdatasync(_)
            | Op::Fstat(_)
            | Op::Fatomic(_)
            | Op::Fdataatomic(_)
            | Op::Fbarrier(_)
            | Op::Fdatabarrier(_)
            | Op::Sync
            | Op::Sleep(_)
            | Op::WaitFor(_) => vec![],
        }
    }

    /// The name the operation makes, if it makes one (create, mkdir,
    /// symlink, a link's or a rename's target).
    pub fn made_name(&self) -> Option<&str> {
        match self {
            Op::Create(p) | Op::Mkdir(p) | Op::Symlink(p, _) | Op::Link(_, p) | Op::Rename(_, p) => Some(p),
            _ => None,
        }
    }

    /// True for HoRAE's ordering primitives (fbarrier, fdatabarrier).
    pub fn is_barrier(&self) -> bool {
        matches!(self, Op::Fbarrier(_) | Op::Fdatabarrier(_))
    }

    /// True for operations that promise durability, atomicity or order.
    pub fn is_sync(&self) -> bool {
        matches!(
            self,
            Op::Fsync(_)
                | Op::Fdatasync(_)
                | Op::Fatomic(_)
                | Op::Fdataatomic(_)
                | Op::Fbarrier(_)
                | Op::Fdatabarrier(_)
                | Op::Sync
                | Op::Msync(..)
                | Op::Fdfsync(_)
                | Op::Fdfdatasync(_)
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
            Op::Fbarrier(p) => write!(f, "fbarrier {p}"),
            Op::Fdatabarrier(p) => write!(f, "fdatabarrier {p}"),
            Op::Sync => write!(f, "sync"),
            Op::Sleep(us) => write!(f, "sleep {us}"),
            Op::WaitFor(p) => write!(f, "wait {p}"),
            Op::Fill(p) => write!(f, "fill {p}"),
            Op::Dwrite(p, o, l, s) => write!(f, "dwrite {p} {o} {l} {s}"),
            Op::Fallocate(p, m, o, l) => write!(f, "fallocate {p} {} {o} {l}", m.name()),
            Op::Sfr(p, o, l) => write!(f, "sfr {p} {o} {l}"),
            Op::Mwrite(p, o, l, s) => write!(f, "mwrite {p} {o} {l} {s}"),
            Op::Msync(p, o, l) => write!(f, "msync {p} {o} {l}"),
            Op::Open(fd, p) => write!(f, "open {fd} {p}"),
            Op::Close(fd) => write!(f, "close {fd}"),
            Op::Fdwrite(fd, o, l, s) => write!(f, "fdwrite {fd} {o} {l} {s}"),
            Op::Fdfsync(fd) => write!(f, "fdfsync {fd}"),
            Op::Fdfdatasync(fd) => write!(f, "fdfdatasync {fd}"),
            Op::Fstat(fd) => write!(f, "fstat {fd}"),
            Op::Setxattr(p, n, l, s, how) => {
                write!(f, "setxattr {p} {n} {l} {s}")?;
                match how {
                    XattrHow::Any => Ok(()),
                    XattrHow::Create => write!(f, " create"),
                    XattrHow::Replace => write!(f, " replace"),
                }
            }
            Op::Removexattr(p, n) => write!(f, "removexattr {p} {n}"),
        }
    }
}

/// What a run of a workload must end with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Outcome {
    /// No violation.
    Pass,
    /// At least one violation.
    Caught,
}

impl Outcome {
    /// The word of the text format.
    pub fn name(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Caught => "caught",
        }
    }
}

/// An `expect` line: the outcome every run of the workload must have, or,
/// with a mode label (`mq`, `mq+no-revoke`), the runs in that mode and
/// fault only.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Expectation {
    /// The outcome.
    pub outcome: Outcome,
    /// The runs it is about ([`crate::record::mode_label`]); `None`: all.
    pub mode: Option<String>,
}

/// A workload.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Workload {
    /// Name (used in reports and replay ids).
    pub name: String,
    /// Operations run before recording starts (then sync and unmount).
    pub setup: Vec<Op>,
    /// Per thread, its operations; thread i runs on core i.
    pub threads: Vec<Vec<Op>>,
    /// The outcomes its runs must have (`expect` lines).
    #[serde(default)]
    pub expect: Vec<Expectation>,
    /// Per thread, the 1-based line of each operation in the text it was
    /// parsed from (empty for a workload built in code). Not part of the
    /// workload's identity: equality ignores it.
    #[serde(default)]
    pub lines: Vec<Vec<usize>>,
}

impl PartialEq for Workload {
    fn eq(&self, o: &Workload) -> bool {
        (&self.name, &self.setup, &self.threads, &self.expect) == (&o.name, &o.setup, &o.threads, &o.expect)
    }
}

impl Eq for Workload {}

impl Workload {
    /// A single-threaded workload.
    pub fn single(name: &str, setup: Vec<Op>, ops: Vec<Op>) -> Workload {
        Workload {
            name: name.to_string(),
            setup,
            threads: vec![ops],
            expect: Vec::new(),
            lines: Vec::new(),
        }
    }

    /// The outcome a run in `mode_label` (`mq`, `mq+no-revoke`) must
    /// have: the `expect` line naming that label, else the one naming
    /// none.
    pub fn expected(&self, mode_label: &str) -> Option<Outcome> {
        let named = self.expect.iter().find(|e| e.mode.as_deref() == Some(mode_label));
        named
            .or_else(|| self.expect.iter().find(|e| e.mode.is_none()))
            .map(|e| e.outcome)
    }

    /// Where operation `index` of `thread` is, for messages: `line N`
    /// when the workload was parsed from text, else `tT op I` (1-based).
    pub fn locate(&self, thread: usize, index: usize) -> String {
        match self.lines.get(thread).and_then(|l| l.get(index)) {
            Some(n) => format!("line {n}"),
            None => format!("t{thread} op {}", index + 1),
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
            threads: self
                .threads
                .iter()
                .map(|t| t.iter().map(Op::atomic_variant).collect())
                .collect(),
            ..self.clone()
        }
    }

    /// The text form (parses back to the same workload).
    pub fn to_text(&self) -> String {
        let mut s = format!("# workload {}\n", self.name);
        for e in &self.expect {
            match &e.mode {
                Some(m) => s.push_str(&format!("expect {} {m}\n", e.outcome.name())),
                None => s.push_str(&format!("expect {}\n", e.outcome.name())),
            }
        }
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
/// component, no trailing `/`; the root is `/`), so that the model, the
/// oracle and the file system agree on which object it names.
fn path(s: Option<&str>, line: usize) -> Result<String, ParseError> {
    match s {
        Some("/") => Ok("/".to_string()),
        Some(p) if p.starts_with('/') => {
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

/// An attribute name operand: one word. Whether the file system takes
/// it (a known namespace, at most 255 bytes) is its own to say: a name it
/// refuses makes a refused operation, as in Linux.
fn xattr_name(s: Option<&str>, line: usize) -> Result<String, ParseError> {
    s.map(str::to_string).ok_or_else(|| ParseError {
        line,
        what: "missing attribute name".into(),
    })
}

/// A descriptor operand.
fn fd(s: Option<&str>, line: usize) -> Result<u32, ParseError> {
    let n = num(s, line, "descriptor")?;
    u32::try_from(n)
        .ok()
        .filter(|n| *n < MAX_FD)
        .ok_or_else(|| ParseError {
            line,
            what: format!("descriptor {n}: at most {MAX_FD} descriptors"),
        })
}

/// The offset, length and optional seed (default 1) of a write.
fn write_args<'a>(
    words: &mut impl Iterator<Item = &'a str>,
    line: usize,
) -> Result<(u64, u64, u8), ParseError> {
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
    Ok((off, len, seed))
}

/// An `expect` line's operands: `pass` or `caught`, then an optional mode
/// label.
fn expectation<'a>(
    words: &mut impl Iterator<Item = &'a str>,
    line: usize,
) -> Result<Expectation, ParseError> {
    let outcome = match words.next() {
        Some("pass") => Outcome::Pass,
        Some("caught") => Outcome::Caught,
        other => {
            return Err(ParseError {
                line,
                what: format!("expect {other:?}: write `expect pass` or `expect caught` [MODE[+FAULT]]"),
            })
        }
    };
    let mode = match words.next() {
        Some(m) => {
            crate::record::parse_mode_label(m).map_err(|e| ParseError {
                line,
                what: e.to_string(),
            })?;
            Some(m.to_string())
        }
        None => None,
    };
    Ok(Expectation { outcome, mode })
}

/// Parses the text format (see the module docs).
pub fn parse(name: &str, text: &str) -> Result<Workload, ParseError> {
    let mut w = Workload {
        name: name.to_string(),
        setup: Vec::new(),
        threads: vec![Vec::new()],
        expect: Vec::new(),
        lines: vec![Vec::new()],
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
        if verb == "expect" && thread == Some(0) {
            let e = expectation(&mut words, line)?;
            if let Some(extra) = words.next() {
                return Err(ParseError {
                    line,
                    what: format!("unexpected {extra:?} after the expectation"),
                });
            }
            if w.expect.iter().any(|o| o.mode == e.mode) {
                return Err(ParseError {
                    line,
                    what: "a second expectation for the same runs".into(),
                });
            }
            w.expect.push(e);
            continue;
        }
        let op = match verb {
            "create" => Op::Create(path(words.next(), line)?),
            "mkdir" => Op::Mkdir(path(words.next(), line)?),
            "write" | "dwrite" | "mwrite" => {
                let p = path(words.next(), line)?;
                let (off, len, seed) = write_args(&mut words, line)?;
                match verb {
                    "write" => Op::Write(p, off, len, seed),
                    "dwrite" => Op::Dwrite(p, off, len, seed),
                    _ => Op::Mwrite(p, off, len, seed),
                }
            }
            "sfr" | "msync" => {
                let p = path(words.next(), line)?;
                let off = num(words.next(), line, "offset")?;
                let len = num(words.next(), line, "length")?;
                if verb == "sfr" {
                    Op::Sfr(p, off, len)
                } else {
                    Op::Msync(p, off, len)
                }
            }
            "truncate" => Op::Truncate(path(words.next(), line)?, num(words.next(), line, "size")?),
            "fallocate" => {
                let p = path(words.next(), line)?;
                let m = words.next().unwrap_or("");
                let mode = Falloc::ALL
                    .iter()
                    .find(|(_, n)| *n == m)
                    .map(|(f, _)| *f)
                    .ok_or_else(|| ParseError {
                        line,
                        what: format!(
                            "fallocate mode {m:?}: one of alloc, keep-size, punch-hole, zero-range, zero-range-keep-size"
                        ),
                    })?;
                Op::Fallocate(
                    p,
                    mode,
                    num(words.next(), line, "offset")?,
                    num(words.next(), line, "length")?,
                )
            }
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
            "setxattr" => {
                let p = path(words.next(), line)?;
                let name = xattr_name(words.next(), line)?;
                let len = num(words.next(), line, "value length")?;
                if len > XATTR_VALUE_LIMIT {
                    return Err(ParseError {
                        line,
                        what: "attribute values are limited to 1 MiB".into(),
                    });
                }
                let mut seed = 1;
                if let Some(w) = words.next_if(|w| w.starts_with(|c: char| c.is_ascii_digit())) {
                    seed = w.parse().map_err(|_| ParseError {
                        line,
                        what: "seed is not a byte".into(),
                    })?;
                }
                let how = match words.next() {
                    None => XattrHow::Any,
                    Some("create") => XattrHow::Create,
                    Some("replace") => XattrHow::Replace,
                    Some(other) => {
                        return Err(ParseError {
                            line,
                            what: format!("setxattr flag {other:?}: `create` or `replace`"),
                        })
                    }
                };
                Op::Setxattr(p, name, len, seed, how)
            }
            "removexattr" => {
                let p = path(words.next(), line)?;
                Op::Removexattr(p, xattr_name(words.next(), line)?)
            }
            "fsync" => Op::Fsync(path(words.next(), line)?),
            "fdatasync" => Op::Fdatasync(path(words.next(), line)?),
            "fatomic" => Op::Fatomic(path(words.next(), line)?),
            "fdataatomic" => Op::Fdataatomic(path(words.next(), line)?),
            "fbarrier" => Op::Fbarrier(path(words.next(), line)?),
            "fdatabarrier" => Op::Fdatabarrier(path(words.next(), line)?),
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
            "open" | "close" | "fdwrite" | "fdfsync" | "fdfdatasync" | "fstat" if thread.is_none() => {
                return Err(ParseError {
                    line,
                    what: format!("{verb}: descriptors are not for the setup (it ends with an unmount)"),
                })
            }
            "open" => {
                let n = fd(words.next(), line)?;
                Op::Open(n, path(words.next(), line)?)
            }
            "close" => Op::Close(fd(words.next(), line)?),
            "fdwrite" => {
                let n = fd(words.next(), line)?;
                let (off, len, seed) = write_args(&mut words, line)?;
                Op::Fdwrite(n, off, len, seed)
            }
            "fdfsync" => Op::Fdfsync(fd(words.next(), line)?),
            "fdfdatasync" => Op::Fdfdatasync(fd(words.next(), line)?),
            "fstat" => Op::Fstat(fd(words.next(), line)?),
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
                    w.lines.push(Vec::new());
                }
                w.threads[t].push(op);
                w.lines[t].push(line);
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
                    Op::Dwrite("/g".into(), 4096, 8192, 3),
                    Op::Sfr("/g".into(), 0, 0),
                    Op::Mwrite("/g".into(), 10, 20, 4),
                    Op::Msync("/g".into(), 0, 4096),
                    Op::Fallocate("/g".into(), Falloc::PunchHole, 100, 5000),
                    Op::Fallocate("/g".into(), Falloc::ZeroRangeKeepSize, 0, 1),
                    Op::Fbarrier("/g".into()),
                    Op::Fdatabarrier("/g".into()),
                    Op::Fsync("/".into()),
                    Op::Sync,
                ],
            ],
            expect: vec![
                Expectation {
                    outcome: Outcome::Pass,
                    mode: None,
                },
                Expectation {
                    outcome: Outcome::Caught,
                    mode: Some("mq+no-data-flush".into()),
                },
            ],
            lines: Vec::new(),
        };
        let back = parse("x", &w.to_text()).unwrap();
        assert_eq!(back, w);
        // The parsed one knows its lines: the header, two expectations,
        // the setup line, then the operations in thread order.
        assert_eq!(back.lines[0], vec![5, 6, 7]);
        assert_eq!(back.locate(1, 0), "line 8");
        assert_eq!(w.locate(1, 0), "t1 op 1");
    }

    #[test]
    fn expectations_pick_the_mode_s_own_line_first() {
        let w = parse("x", "expect pass\nexpect caught mq+no-revoke\nsync\n").unwrap();
        assert_eq!(w.expected("mq"), Some(Outcome::Pass));
        assert_eq!(w.expected("mq+no-revoke"), Some(Outcome::Caught));
        assert_eq!(parse("x", "sync\n").unwrap().expected("mq"), None);
        for (bad, what) in [
            ("expect maybe", "expect pass"),
            ("expect", "expect pass"),
            ("expect pass nomode", "unknown mode"),
            ("expect pass none+no-revoke", "does not apply"),
            ("expect pass\nexpect caught", "second expectation"),
            ("expect pass mq extra", "unexpected"),
        ] {
            let e = parse("x", &format!("sync\n{bad}\n")).unwrap_err();
            assert!(e.line >= 2, "{bad}: line {}", e.line);
            assert!(e.what.contains(what), "{bad}: {}", e.what);
        }
    }

    #[test]
    fn the_root_is_slash_and_the_new_operations_parse() {
        let w = parse(
            "x",
            "fsync /\ndwrite /f 0 4096\nsfr /f 0 0\nmwrite /f 1 2 9\nmsync /f 0 10\n",
        )
        .unwrap();
        assert_eq!(
            w.threads[0],
            vec![
                Op::Fsync("/".into()),
                Op::Dwrite("/f".into(), 0, 4096, 1),
                Op::Sfr("/f".into(), 0, 0),
                Op::Mwrite("/f".into(), 1, 2, 9),
                Op::Msync("/f".into(), 0, 10),
            ]
        );
        assert!(Op::Msync("/f".into(), 0, 1).is_sync());
        let e = parse("x", "create /f\nfallocate /f shrink 0 1\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.what.contains("punch-hole"), "{}", e.what);
        assert!(!Op::Sfr("/f".into(), 0, 1).is_sync());
        assert_eq!(Op::Mwrite("/f".into(), 0, 1, 1).changed_paths(), vec!["/f"]);
        let fds = parse(
            "x",
            "open 3 /f\nfdwrite 3 0 10\nfdfsync 3\nfdfdatasync 3\nfstat 3\nclose 3\n",
        )
        .unwrap();
        assert_eq!(
            fds.threads[0],
            vec![
                Op::Open(3, "/f".into()),
                Op::Fdwrite(3, 0, 10, 1),
                Op::Fdfsync(3),
                Op::Fdfdatasync(3),
                Op::Fstat(3),
                Op::Close(3),
            ]
        );
        assert_eq!(parse("x", &fds.to_text()).unwrap(), fds);
        assert!(Op::Fdfsync(3).is_sync() && Op::Fdwrite(3, 0, 1, 1).changed_paths().is_empty());
        let e = parse("x", "sync\nclose 1024\n").unwrap_err();
        assert!(e.line == 2 && e.what.contains("1024 descriptors"), "{e}");
        let e = parse("x", "sync\nsetup open 1 /f\n").unwrap_err();
        assert!(e.line == 2 && e.what.contains("not for the setup"), "{e}");
        let e = parse("x", "sync\nopen 1\n").unwrap_err();
        assert_eq!((e.line, e.what.as_str()), (2, "missing path"));
        let e = parse("x", "sync\nsfr /f 0\n").unwrap_err();
        assert_eq!((e.line, e.what.as_str()), (2, "missing length"));
        let e = parse("x", "sync\ndwrite /f 0 99999999\n").unwrap_err();
        assert!(e.line == 2 && e.what.contains("16 MiB"), "{e}");
    }

    #[test]
    fn non_canonical_paths_are_refused_with_their_line() {
        for bad in ["/a/", "/a//b", "/a/./b", "/a/../b", "/..", "//", "/."] {
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
