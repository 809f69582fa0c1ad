//! Table 1 through the bench's own helpers: every paper row equals the
//! paper's formula, every derived formula (Ext4-NJ, the whole transaction,
//! the Horae ordering writes, the flush reads) holds, and a JSON row has
//! the keys CI reads.

use ccnvme_bench::table1::{measure, rows, Row, System};

/// N values the test sweeps: both ends of the bench's range and the
/// special cases of the workload (chmod, overwrite, appends).
const NS: [u64; 6] = [1, 2, 3, 4, 8, 16];

#[test]
fn every_row_matches_its_formula() {
    let rows = rows(NS).expect("the Table 1 workload runs");
    assert_eq!(rows.len(), NS.len() * System::ALL.len());
    for r in &rows {
        assert!(r.ok(), "{} N={}: {r:?}", r.system, r.n);
        assert!(r.ok_derived(), "{} N={}: {r:?}", r.system, r.n);
    }
}

#[test]
fn counts_come_from_the_machine() {
    // The same workload measured twice gives the same counts (the model is
    // deterministic), and more blocks cost more wire bytes: the numbers are
    // counted, not tabulated.
    for s in System::ALL {
        let a = measure(s, 3).expect("runs");
        let b = measure(s, 3).expect("runs");
        assert_eq!(a, b, "{s:?}");
        let c = measure(s, 4).expect("runs");
        assert!(c.total.wire_bytes > a.total.wire_bytes, "{s:?}: {a:?} {c:?}");
    }
}

#[test]
fn fatomic_critical_path_is_host_traffic_only() {
    let m = measure(System::MqAtomic, 5).expect("runs");
    assert_eq!((m.window.dma_q, m.window.irq), (0, 0), "{m:?}");
    assert_eq!(m.critical.mmio, 2);
    // N+1 queue-entry stores and one doorbell, two flush reads of two TLPs.
    assert_eq!(m.critical.tlps, (5 + 1) + 1 + 2 * 2, "{m:?}");
    assert!(m.total.tlps > m.critical.tlps);
}

#[test]
fn json_rows_have_the_keys_ci_reads() {
    let r = Row::judge(&measure(System::Horae, 1).expect("runs"));
    let v = serde_json::to_value(vec![r]).expect("serializes");
    let row = v[0].as_object().expect("an object");
    for k in [
        "system",
        "n",
        "mmio",
        "dma_q",
        "block_io",
        "irq",
        "ordering_mmio",
        "tlps",
        "wire_bytes",
        "tlps_total",
        "wire_bytes_total",
    ] {
        assert!(row.contains_key(k), "missing {k}");
    }
    assert_eq!(row["system"], "horae");
    assert!(row["ordering_mmio"].as_u64().expect("a count") > 0);
}

#[test]
fn a_count_off_its_formula_is_flagged() {
    let mut m = measure(System::Mq, 2).expect("runs");
    assert!(Row::judge(&m).ok());
    m.critical.mmio += 1;
    let r = Row::judge(&m);
    assert!(!r.ok());
    assert_eq!(r.matches, [false, true, true, true]);
}
