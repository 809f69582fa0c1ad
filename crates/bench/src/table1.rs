//! ccNVMe Table 1: the bus operations one transaction of N 4 KiB blocks
//! costs, per system, counted by the simulated machine (never written in).
//!
//! # The workload
//!
//! A fresh file system of the system's mode on the Optane 905P profile (no
//! volatile write cache, so the block layer drops FLUSH and FUA), one core,
//! one thread, one transaction in flight, no request merging (every block
//! is its own command). A file `/f` with one 4 KiB block is created and
//! `sync`ed, one tick of the timestamp clock passes
//! (`FsProfile::timestamp_tick`: Linux stamps with the time of the last
//! tick, so a change within the tick of the last one would leave the
//! times as they were), then one change makes a transaction of exactly `N` blocks
//! (`docs/decisions.md` E1: the file's data blocks plus its journaled metadata,
//! besides the journal descriptor and commit record):
//!
//! - `N = 1`: a chmod (the inode's table block);
//! - `N = 2`: an overwrite of the file's block (the data block and the
//!   inode block, whose mtime changed);
//! - `N >= 3`: an append of `N - 2` blocks (the data blocks, the inode
//!   block and the block bitmap).
//!
//! Then the primitive runs (fsync, or fatomic for `mq-atomic`).
//!
//! Each completion is its own interrupt and CQ head doorbell
//! (`ccnvme::CqReap::OnePerInterrupt`), the paper's counting model: Linux's
//! handler reaps every completion it finds and rings the doorbell once,
//! so completions that arrive together would share a doorbell (and the
//! messages that arrive during a handler one run of it), which the paper's
//! 2(N+2) MMIOs do not count.
//!
//! Periodic writeback is off (`FsProfile::dirty_writeback_interval`
//! `None`, Linux's `vm.dirty_writeback_centisecs = 0`): the windows below
//! run the executor until it is idle, and the flusher would otherwise
//! write the change home 30 simulated seconds after it was made, before
//! the primitive (and the Ext4-NJ bitmap after it).
//!
//! # The windows
//!
//! - **Critical path**: the counters from the primitive's start to its
//!   return. For `mq-atomic` the phase attribution of `docs/architecture.md` 5 keeps
//!   only the host-initiated traffic (MMIO writes and their flush reads):
//!   the device may start fetching data before fatomic returns, but
//!   fatomic does not wait for it. The raw window is checked to hold no
//!   completion entry and no interrupt (nothing device-side was waited
//!   for); its TLPs and wire bytes are those of the host-initiated TLP
//!   kinds (MMIO writes, MMIO reads and their completions).
//! - **Whole transaction**: from the primitive's start until the executor
//!   is idle again, i.e. until everything the transaction issued
//!   (including fatomic's asynchronous execute and complete phases)
//!   finished.
//!
//! # Expected counts
//!
//! The four paper rows take their formulas from the paper's Table 1. The
//! `none` mode (Ext4-NJ) is not in the paper; its fsync (mqfs
//! `sync_in_place`, as Linux's no-journal `ext4_sync_file`) writes the
//! data and the inode block home, each block its own NVMe command, and
//! then issues a FLUSH that the block layer drops (no volatile cache), so
//! every block costs what one Ext4 command costs: SQ doorbell and CQ
//! doorbell (2 MMIO), SQE fetch and CQE post (2 DMA(Q)), one block, one
//! interrupt. The block bitmap an append dirtied is not the fsync's (it
//! goes home by periodic writeback), so its derived row is 2N, 2N, N, N,
//! less one block (2, 2, 1, 1) for an append (N >= 3). Whole-transaction
//! counts equal the critical path for every durable primitive but one:
//! HoraeFS redirects the overwrite (N = 2) to its p-area, and the commit
//! write that follows once the stream is idle (read the slot, write the
//! block home: HoRAE 5.4, `docs/decisions.md` H9) adds two NVMe commands,
//! 4, 4, 2, 2. For `mq-atomic` they are MQFS's fsync row (ccNVMe Table 1:
//! steps 4-9 still happen, asynchronously): 4, N+1, N+1, N+1.
//!
//! Two more critical-path columns are checked against derived formulas:
//! the Horae ordering-queue writes, N+7 on a drive without a volatile
//! cache (the `ccnvme::horae` module docs: the N+2 entries of two epochs
//! as one burst per epoch, two tail pointers, N+2 `dr` words, one
//! `flushed` pointer; `docs/decisions.md` H1) plus a burst and a tail
//! pointer when the change wrote file data (N >= 2 here: the fsync caller
//! dispatches its data as an epoch of its own before the journal's two,
//! `docs/decisions.md` H10), 0 elsewhere; and the zero-length flush reads,
//! one per persistent MMIO write: Horae's N+7 (+2), MQFS's 3 (P-SQ burst,
//! P-SQDB, P-SQ-head), MQFS-A's 2, none for plain NVMe.
//!
//! Only the paper's four columns of its four rows decide whether the
//! table matches the paper; the derived formulas are reported beside them.

use ccnvme::Traffic;
use mqfs::testing::new_fs_with;
use mqfs::{Ctx, Fs, FsProfile, Mode, SetAttr};
use nvme_ctrl::SsdProfile;
use pcie_sim::{Counters, EventKind, Tally};
use serde::Serialize;

use crate::Error;

/// Device size of every run, in 4 KiB blocks (as the mqfs Table 1 test).
const DEVICE_BLOCKS: u64 = 65536;

/// A system of Table 1 (plus Ext4-NJ).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum System {
    /// Ext4-NJ: no journal, fsync writes in place (not in the paper).
    None,
    /// Ext4/NVMe: JBD2 journaling on plain NVMe.
    Classic,
    /// HoraeFS/NVMe: journaling ordered by the Horae ordering queue.
    Horae,
    /// MQFS/ccNVMe with fsync.
    Mq,
    /// MQFS-A/ccNVMe: MQFS with fatomic.
    MqAtomic,
}

impl System {
    /// Every system, in the paper's row order, Ext4-NJ last.
    pub const ALL: [System; 5] = [
        System::Classic,
        System::Horae,
        System::Mq,
        System::MqAtomic,
        System::None,
    ];

    /// Name in the JSON output and on command lines.
    pub fn name(self) -> &'static str {
        match self {
            System::None => "none",
            System::Classic => "classic",
            System::Horae => "horae",
            System::Mq => "mq",
            System::MqAtomic => "mq-atomic",
        }
    }

    /// The paper's label.
    pub fn label(self) -> &'static str {
        match self {
            System::None => "Ext4-NJ",
            System::Classic => "Ext4/NVMe",
            System::Horae => "HoraeFS/NVMe",
            System::Mq => "MQFS/ccNVMe",
            System::MqAtomic => "MQFS-A/ccNVMe",
        }
    }

    /// The file system's mode.
    pub fn mode(self) -> Mode {
        match self {
            System::None => Mode::None,
            System::Classic => Mode::Classic,
            System::Horae => Mode::Horae,
            System::Mq | System::MqAtomic => Mode::Mq,
        }
    }

    /// True when the system has a row in the paper's Table 1.
    pub fn in_paper(self) -> bool {
        self != System::None
    }

    /// The expected critical-path counts: the paper's formulas, or for
    /// `none` the derived one (see the module docs).
    pub fn critical_formula(self) -> Row4 {
        match self {
            System::Classic | System::Horae => Row4 {
                mmio: Formula::new(2, 4, "2(N+2)"),
                dma_q: Formula::new(2, 4, "2(N+2)"),
                block_io: Formula::new(1, 2, "N+2"),
                irq: Formula::new(1, 2, "N+2"),
            },
            System::Mq => Row4 {
                mmio: Formula::new(0, 4, "4"),
                dma_q: Formula::new(1, 1, "N+1"),
                block_io: Formula::new(1, 1, "N+1"),
                irq: Formula::new(1, 1, "N+1"),
            },
            System::MqAtomic => Row4 {
                mmio: Formula::new(0, 2, "2"),
                dma_q: Formula::new(0, 0, "0"),
                block_io: Formula::new(0, 0, "0"),
                irq: Formula::new(0, 0, "0"),
            },
            System::None => Row4 {
                mmio: Formula::new(2, 0, "2N (2N-2 with an append)").less_with_append(2),
                dma_q: Formula::new(2, 0, "2N (2N-2 with an append)").less_with_append(2),
                block_io: Formula::new(1, 0, "N (N-1 with an append)").less_with_append(1),
                irq: Formula::new(1, 0, "N (N-1 with an append)").less_with_append(1),
            },
        }
    }

    /// The expected whole-transaction counts (derived, not in the paper).
    pub fn total_formula(self) -> Row4 {
        match self {
            System::MqAtomic => System::Mq.critical_formula(),
            // The overwrite is redirected to the p-area; its commit write
            // (a read of the slot and a write home, HoRAE 5.4) follows
            // once the stream is idle: two more NVMe commands.
            System::Horae => {
                let c = self.critical_formula();
                Row4 {
                    mmio: c.mmio.plus_with_overwrite(4, "2(N+2) (+4 with an overwrite)"),
                    dma_q: c.dma_q.plus_with_overwrite(4, "2(N+2) (+4 with an overwrite)"),
                    block_io: c.block_io.plus_with_overwrite(2, "N+2 (+2 with an overwrite)"),
                    irq: c.irq.plus_with_overwrite(2, "N+2 (+2 with an overwrite)"),
                }
            }
            s => s.critical_formula(),
        }
    }

    /// The expected critical-path columns beyond the paper (derived, see
    /// the module docs): Horae ordering-queue writes, then flush reads.
    pub fn extra_formula(self) -> [Formula; 2] {
        match self {
            System::Horae => [
                Formula::new(1, 7, "N+7 (+2 with data)").plus_with_data(2),
                Formula::new(1, 7, "N+7 (+2 with data)").plus_with_data(2),
            ],
            System::Mq => [Formula::new(0, 0, "0"), Formula::new(0, 3, "3")],
            System::MqAtomic => [Formula::new(0, 0, "0"), Formula::new(0, 2, "2")],
            System::Classic | System::None => [Formula::new(0, 0, "0"), Formula::new(0, 0, "0")],
        }
    }
}

/// A count as a linear function of N: `mul * N + add`, plus `with_data`
/// when the workload's change writes file data (N >= 2), less
/// `less_with_append` when it appends (N >= 3; see the module
/// documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Formula {
    /// Coefficient of N.
    pub mul: u64,
    /// Constant.
    pub add: u64,
    /// Added when the change writes file data.
    pub with_data: u64,
    /// Taken off when the change is an append (N >= 3): Ext4-NJ's fsync
    /// leaves the block bitmap to the flusher.
    pub less_with_append: u64,
    /// Added when the change overwrites a block in place (N = 2).
    pub with_overwrite: u64,
    /// As the paper writes it.
    pub text: &'static str,
}

impl Formula {
    const fn new(mul: u64, add: u64, text: &'static str) -> Formula {
        Formula {
            mul,
            add,
            with_data: 0,
            less_with_append: 0,
            with_overwrite: 0,
            text,
        }
    }

    const fn plus_with_overwrite(self, with_overwrite: u64, text: &'static str) -> Formula {
        Formula {
            with_overwrite,
            text,
            ..self
        }
    }

    const fn less_with_append(self, less_with_append: u64) -> Formula {
        Formula {
            less_with_append,
            ..self
        }
    }

    const fn plus_with_data(self, with_data: u64) -> Formula {
        Formula { with_data, ..self }
    }

    /// The value at `n`.
    pub fn at(&self, n: u64) -> u64 {
        let less = if n >= 3 { self.less_with_append } else { 0 };
        let overwrite = if n == 2 { self.with_overwrite } else { 0 };
        (self.mul * n + self.add + overwrite + if n >= 2 { self.with_data } else { 0 }).saturating_sub(less)
    }
}

/// One value per Table 1 column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row4<T = Formula> {
    /// MMIO operations.
    pub mmio: T,
    /// Queue-entry DMAs.
    pub dma_q: T,
    /// 4 KiB blocks.
    pub block_io: T,
    /// Interrupts.
    pub irq: T,
}

impl Row4<Formula> {
    /// The values at `n`.
    pub fn at(&self, n: u64) -> Row4<u64> {
        Row4 {
            mmio: self.mmio.at(n),
            dma_q: self.dma_q.at(n),
            block_io: self.block_io.at(n),
            irq: self.irq.at(n),
        }
    }
}

impl Row4<u64> {
    /// The Table 1 columns of `t`.
    pub fn of(t: &Traffic) -> Row4<u64> {
        Row4 {
            mmio: t.mmio,
            dma_q: t.dma_q,
            block_io: t.block_io,
            irq: t.irq,
        }
    }

    /// The columns as an array, in table order.
    pub fn cells(&self) -> [u64; 4] {
        [self.mmio, self.dma_q, self.block_io, self.irq]
    }
}

/// What one run measured, before it is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Measurement {
    /// The system.
    pub system: System,
    /// Blocks in the transaction.
    pub n: u64,
    /// Critical path, phase-attributed (see the module docs).
    pub critical: Traffic,
    /// Everything between the primitive's start and its return.
    pub window: Traffic,
    /// Whole transaction: until the machine was idle again.
    pub total: Traffic,
}

/// Makes the change that gives `/f` a transaction of `n` blocks (see the
/// module docs); returns the file's inode number.
async fn make_transaction(fs: &Fs, c: Ctx, n: u64) -> Result<mqfs::Ino, Error> {
    let ino = fs.create_path(c, "/f").await?.ino;
    fs.write(c, ino, 0, &[7u8; 4096]).await?;
    fs.sync(c).await?;
    // One tick of the timestamp clock passes, so the change finds the
    // file's times older than the clock (N = 2's overwrite changes the
    // mtime, as the paper's row counts the inode block).
    fs.machine().sim().sleep(fs.profile().timestamp_tick).await;
    match n {
        0 => return Err(Error::Invalid("a transaction has at least one block".into())),
        1 => {
            let set = SetAttr {
                perm: Some(0o600),
                ..Default::default()
            };
            fs.setattr(c, ino, &set).await?;
        }
        2 => {
            fs.write(c, ino, 0, &[8u8; 4096]).await?;
        }
        k => {
            let data = vec![9u8; 4096 * (k as usize - 2)];
            fs.write(c, ino, 4096, &data).await?;
        }
    }
    Ok(ino)
}

/// The host-initiated part of `c` at TLP level: MMIO writes, MMIO reads
/// and the completions answering them.
fn host_initiated(c: &Counters) -> Tally {
    let mut t = Tally::default();
    for k in [
        EventKind::MmioWrite,
        EventKind::MmioRead,
        EventKind::MmioReadCompletion,
    ] {
        let x = c.kind(k);
        t.ops += x.ops;
        t.tlps += x.tlps;
        t.wire_bytes += x.wire_bytes;
        t.payload_bytes += x.payload_bytes;
    }
    t
}

/// Runs the `n`-block transaction of `system` on a fresh machine and
/// counts its critical path and whole-transaction traffic.
pub fn measure(system: System, n: u64) -> Result<Measurement, Error> {
    // Periodic writeback off (`vm.dirty_writeback_centisecs = 0`): the
    // change stays dirty for the primitive, however long the executor
    // idles (see the module docs).
    let profile = FsProfile {
        dirty_writeback_interval: None,
        driver: ccnvme::DriverProfile::per_request_interrupts(),
        ..FsProfile::default()
    };
    let t = new_fs_with(
        system.mode(),
        SsdProfile::optane_905p(),
        DEVICE_BLOCKS,
        1,
        profile,
    )?;
    let fs = t.fs.clone();
    let ino =
        t.ex.block_on(async move { make_transaction(&fs, Ctx::on(0), n).await })??;
    // Let whatever the setup left running finish: the counters from here
    // on are the transaction's alone.
    t.ex.run();
    let before = t.machine.counters();
    let (fs, m) = (t.fs.clone(), t.machine.clone());
    let atomic = system == System::MqAtomic;
    let window = t.ex.block_on(async move {
        let c = Ctx::on(0);
        if atomic {
            fs.fatomic(c, ino).await?;
        } else {
            fs.fsync(c, ino).await?;
        }
        Ok::<_, Error>(m.counters().since(&before))
    })??;
    t.ex.run();
    let total = Traffic::from_counters(&t.machine.counters().since(&before));
    let raw = Traffic::from_counters(&window);
    let critical = if atomic {
        if raw.dma_q != 0 || raw.irq != 0 {
            return Err(Error::Invalid(format!(
                "fatomic (N={n}) returned after device completions: {raw:?}"
            )));
        }
        let host = host_initiated(&window);
        Traffic {
            tlps: host.tlps,
            wire_bytes: host.wire_bytes,
            ..raw.submit_phase()
        }
    } else {
        raw
    };
    Ok(Measurement {
        system,
        n,
        critical,
        window: raw,
        total,
    })
}

/// One row of `table1.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Row {
    /// System name (`classic`, `horae`, `mq`, `mq-atomic`, `none`).
    pub system: String,
    /// Blocks in the transaction.
    pub n: u64,
    /// Critical-path MMIO operations (Horae ordering queue excluded).
    pub mmio: u64,
    /// Critical-path queue-entry DMAs.
    pub dma_q: u64,
    /// Critical-path 4 KiB block transfers.
    pub block_io: u64,
    /// Critical-path interrupts.
    pub irq: u64,
    /// Critical-path Horae ordering-queue MMIO writes.
    pub ordering_mmio: u64,
    /// Critical-path TLPs, both directions.
    pub tlps: u64,
    /// Critical-path bytes on the wire, headers and framing included.
    pub wire_bytes: u64,
    /// Whole-transaction TLPs.
    pub tlps_total: u64,
    /// Whole-transaction wire bytes.
    pub wire_bytes_total: u64,
    /// Critical-path zero-length flush reads (inside their MMIO operations).
    pub flush_reads: u64,
    /// Whole-transaction MMIO operations.
    pub mmio_total: u64,
    /// Whole-transaction queue-entry DMAs.
    pub dma_q_total: u64,
    /// Whole-transaction block transfers.
    pub block_io_total: u64,
    /// Whole-transaction interrupts.
    pub irq_total: u64,
    /// Whole-transaction ordering-queue MMIO writes.
    pub ordering_mmio_total: u64,
    /// Whole-transaction flush reads.
    pub flush_reads_total: u64,
    /// True when the system has a row in the paper.
    pub in_paper: bool,
    /// Expected critical path (MMIO, DMA(Q), Block I/O, IRQ): the paper's
    /// formula, or the derived one for `none`.
    pub expected: [u64; 4],
    /// Expected whole-transaction counts (derived).
    pub expected_total: [u64; 4],
    /// Per critical-path cell: does it equal its formula.
    pub matches: [bool; 4],
    /// Per whole-transaction cell: does it equal its derived formula.
    pub matches_total: [bool; 4],
    /// Expected critical-path ordering-queue writes and flush reads
    /// (derived).
    pub expected_extra: [u64; 2],
    /// Per extra cell (ordering MMIO, flush reads): does it equal its
    /// derived formula.
    pub matches_extra: [bool; 2],
}

impl Row {
    /// Judges a measurement against its formulas.
    pub fn judge(m: &Measurement) -> Row {
        let got = Row4::of(&m.critical).cells();
        let got_total = Row4::of(&m.total).cells();
        let expected = m.system.critical_formula().at(m.n).cells();
        let expected_total = m.system.total_formula().at(m.n).cells();
        let expected_extra = m.system.extra_formula().map(|f| f.at(m.n));
        let got_extra = [m.critical.ordering_mmio, m.critical.flush_reads];
        Row {
            system: m.system.name().into(),
            n: m.n,
            mmio: m.critical.mmio,
            dma_q: m.critical.dma_q,
            block_io: m.critical.block_io,
            irq: m.critical.irq,
            ordering_mmio: m.critical.ordering_mmio,
            tlps: m.critical.tlps,
            wire_bytes: m.critical.wire_bytes,
            tlps_total: m.total.tlps,
            wire_bytes_total: m.total.wire_bytes,
            flush_reads: m.critical.flush_reads,
            mmio_total: m.total.mmio,
            dma_q_total: m.total.dma_q,
            block_io_total: m.total.block_io,
            irq_total: m.total.irq,
            ordering_mmio_total: m.total.ordering_mmio,
            flush_reads_total: m.total.flush_reads,
            in_paper: m.system.in_paper(),
            expected,
            expected_total,
            matches: std::array::from_fn(|i| got[i] == expected[i]),
            matches_total: std::array::from_fn(|i| got_total[i] == expected_total[i]),
            expected_extra,
            matches_extra: std::array::from_fn(|i| got_extra[i] == expected_extra[i]),
        }
    }

    /// True when every critical-path cell equals its formula.
    pub fn ok(&self) -> bool {
        self.matches.iter().all(|m| *m)
    }

    /// True when every derived formula holds: the critical path of a
    /// system not in the paper, the whole transaction, the extra columns.
    pub fn ok_derived(&self) -> bool {
        (self.in_paper || self.ok())
            && self.matches_total.iter().all(|m| *m)
            && self.matches_extra.iter().all(|m| *m)
    }
}

/// Measures and judges every system for every N in `ns`, in
/// [`System::ALL`] order, N ascending within a system.
pub fn rows(ns: impl IntoIterator<Item = u64> + Clone) -> Result<Vec<Row>, Error> {
    let mut out = Vec::new();
    for s in System::ALL {
        for n in ns.clone() {
            out.push(Row::judge(&measure(s, n)?));
        }
    }
    Ok(out)
}

fn mark(ok: bool) -> &'static str {
    if ok {
        "✓"
    } else {
        "✗"
    }
}

/// Markdown: per system, one line per N with every count and a match mark
/// per Table 1 cell.
pub fn render_detail(rows: &[Row]) -> String {
    let mut s = String::new();
    for sys in System::ALL {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.system == sys.name()).collect();
        if mine.is_empty() {
            continue;
        }
        let f = sys.critical_formula();
        let t = sys.total_formula();
        let x = sys.extra_formula();
        let origin = if sys.in_paper() {
            "paper"
        } else {
            "not in the paper; derived"
        };
        s += &format!(
            "\n### {} (`{}`): MMIO {}, DMA(Q) {}, Block I/O {}, IRQ {} ({origin}); \
             ordering MMIO {}, flush reads {}, whole transaction {}, {}, {}, {} (derived)\n\n",
            sys.label(),
            sys.name(),
            f.mmio.text,
            f.dma_q.text,
            f.block_io.text,
            f.irq.text,
            x[0].text,
            x[1].text,
            t.mmio.text,
            t.dma_q.text,
            t.block_io.text,
            t.irq.text,
        );
        s += "| N | MMIO | DMA(Q) | Block I/O | IRQ | ordering MMIO | flush reads | TLPs | wire B \
              | total MMIO | total DMA(Q) | total Blk | total IRQ | total ord. | TLPs total | wire B total |\n";
        s += "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
        for r in mine {
            let got = [r.mmio, r.dma_q, r.block_io, r.irq];
            let got_t = [r.mmio_total, r.dma_q_total, r.block_io_total, r.irq_total];
            let cell = |i: usize| format!("{} {}", got[i], mark(r.matches[i]));
            let cell_t = |i: usize| format!("{} {}", got_t[i], mark(r.matches_total[i]));
            let extra = [r.ordering_mmio, r.flush_reads];
            let cell_x = |i: usize| format!("{} {}", extra[i], mark(r.matches_extra[i]));
            s += &format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                r.n,
                cell(0),
                cell(1),
                cell(2),
                cell(3),
                cell_x(0),
                cell_x(1),
                r.tlps,
                r.wire_bytes,
                cell_t(0),
                cell_t(1),
                cell_t(2),
                cell_t(3),
                r.ordering_mmio_total,
                r.tlps_total,
                r.wire_bytes_total,
            );
        }
    }
    s
}

/// Markdown in the paper's layout: one line per system, each cell its
/// formula with the match mark over every N measured, and the measured
/// values at the smallest and largest N.
pub fn render_summary(rows: &[Row]) -> String {
    let (lo, hi) = match (rows.iter().map(|r| r.n).min(), rows.iter().map(|r| r.n).max()) {
        (Some(lo), Some(hi)) => (lo, hi),
        _ => return String::from("(no rows)\n"),
    };
    let mut s = format!(
        "| System | MMIO | DMA(Q) | Block I/O | IRQ | ordering MMIO (apart) | TLPs / wire B (N={hi}) | \
         TLPs / wire B total (N={hi}) | source |\n|---|---|---|---|---|---|---|---|---|\n"
    );
    for sys in System::ALL {
        let mine: Vec<&Row> = rows.iter().filter(|r| r.system == sys.name()).collect();
        let (Some(first), Some(last)) = (mine.first(), mine.last()) else {
            continue;
        };
        let f = sys.critical_formula();
        let texts = [f.mmio.text, f.dma_q.text, f.block_io.text, f.irq.text];
        let vals = |r: &Row| [r.mmio, r.dma_q, r.block_io, r.irq];
        let cells: Vec<String> = (0..4)
            .map(|i| {
                let ok = mine.iter().all(|r| r.matches[i]);
                format!(
                    "{} {} ({}..{})",
                    texts[i],
                    mark(ok),
                    vals(first)[i],
                    vals(last)[i]
                )
            })
            .collect();
        let ord = format!(
            "{} {} ({}..{})",
            sys.extra_formula()[0].text,
            mark(mine.iter().all(|r| r.matches_extra[0])),
            first.ordering_mmio,
            last.ordering_mmio
        );
        let source = if sys.in_paper() {
            "paper".to_string()
        } else {
            "not in the paper (derived formula)".to_string()
        };
        s += &format!(
            "| {} | {} | {} | {} | {} | {} | {} / {} | {} / {} | {} |\n",
            sys.label(),
            cells[0],
            cells[1],
            cells[2],
            cells[3],
            ord,
            last.tlps,
            last.wire_bytes,
            last.tlps_total,
            last.wire_bytes_total,
            source
        );
    }
    s += &format!(
        "\nEach cell: formula, match over N = {lo}..={hi}, measured values at N = {lo} and N = {hi}.\n"
    );
    s
}
