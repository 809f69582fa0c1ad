//! The paper's claims beside the measured values, and the markdown report
//! that gathers every figure.

use std::fmt::Write as _;
use std::path::Path;

use super::common::BenchResult;
use super::output::{write_svg, Panel, Table};

/// How a claim's number reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A ratio ("2.1x").
    Times,
    /// A reduction in percent ("56% lower").
    LowerPct,
    /// An increase in percent ("47% more").
    MorePct,
    /// A share in percent ("68% of").
    SharePct,
    /// An absolute time in microseconds.
    Micros,
    /// A count (threads, cores): agrees within the relative tolerance.
    Count,
    /// A trend the paper states without a number, with the criterion in
    /// the claim's text: 1 if it holds in the measurement, 0 if not; the
    /// paper's value is 1.
    Holds,
}

/// Relative gap (ratio, time) or percentage points (percent kinds) within
/// which a measured value is said to agree with the paper.
const TOLERANCE_REL: f64 = 0.15;
const TOLERANCE_PTS: f64 = 10.0;

/// What a side experiment that takes one mechanism out (`what`: "the
/// wait", "the read") says of a claim of `kind` with the paper's value
/// `paper`: measured `with` it and `without` it, by the report's own
/// tolerance ([`Check::agrees`]). One wording for every side experiment.
pub fn side_verdict(kind: Kind, paper: f64, with: f64, without: f64, what: &str) -> String {
    let agrees = |v: f64| Check::new("", "", kind, paper, v).agrees();
    match (agrees(with), agrees(without)) {
        (true, _) => format!("it agrees with {what}"),
        (false, true) => format!("without {what} it agrees: {what} is the gap"),
        (false, false) if (with - paper).signum() != (without - paper).signum() => {
            format!("the paper's value lies between the two: {what} is the gap, and more")
        }
        (false, false) => format!("it differs either way: {what} is not the whole gap"),
    }
}

/// One claim of the paper and the simulator's value for it.
#[derive(Clone, Debug)]
pub struct Check {
    /// The claim's id (F for the ccNVMe paper's figures, with the figure's
    /// number and an index).
    pub id: &'static str,
    /// What is compared.
    pub claim: String,
    /// The paper's number (ratio, percent or microseconds per `kind`).
    pub paper: f64,
    /// The measured number, in the same unit.
    pub measured: f64,
    /// How to read the numbers.
    pub kind: Kind,
}

impl Check {
    /// A trend claim ([`Kind::Holds`]) and whether the measurement shows it.
    pub fn holds(id: &'static str, claim: impl Into<String>, holds: bool) -> Check {
        Check::new(id, claim, Kind::Holds, 1.0, if holds { 1.0 } else { 0.0 })
    }

    /// A claim.
    pub fn new(id: &'static str, claim: impl Into<String>, kind: Kind, paper: f64, measured: f64) -> Check {
        Check {
            id,
            claim: claim.into(),
            paper,
            measured,
            kind,
        }
    }

    fn fmt_value(&self, v: f64) -> String {
        match self.kind {
            Kind::Times => format!("{v:.2}x"),
            Kind::LowerPct if v < 0.0 => format!("{:.0}% higher", -v),
            Kind::LowerPct => format!("{v:.0}% lower"),
            Kind::MorePct => format!("{v:+.0}%"),
            Kind::SharePct => format!("{v:.0}%"),
            Kind::Micros => format!("{v:.1} us"),
            Kind::Count => format!("{v:.0}"),
            Kind::Holds if v == 1.0 => "holds".into(),
            Kind::Holds => "does not hold".into(),
        }
    }

    /// Whether the measured value is within tolerance of the paper's.
    pub fn agrees(&self) -> bool {
        match self.kind {
            Kind::Times | Kind::Micros | Kind::Count => {
                self.paper != 0.0 && ((self.measured / self.paper) - 1.0).abs() <= TOLERANCE_REL
            }
            Kind::LowerPct | Kind::MorePct | Kind::SharePct => {
                (self.measured - self.paper).abs() <= TOLERANCE_PTS
            }
            Kind::Holds => self.measured == self.paper,
        }
    }

    /// How far the measured value is from the paper's, in words.
    pub fn gap(&self) -> String {
        match self.kind {
            Kind::Holds => "trend".into(),
            Kind::Times | Kind::Micros | Kind::Count => {
                if self.paper == 0.0 {
                    return "n/a".into();
                }
                let r = (self.measured / self.paper - 1.0) * 100.0;
                format!("{r:+.0}% of the paper's value")
            }
            Kind::LowerPct | Kind::MorePct | Kind::SharePct => {
                format!("{:+.0} points", self.measured - self.paper)
            }
        }
    }

    /// A markdown table row.
    pub fn row(&self) -> String {
        let verdict = if self.agrees() { "agrees" } else { "differs" };
        format!(
            "| {} | {} | {} | {} | {} ({}) |",
            self.id,
            self.claim,
            self.fmt_value(self.paper),
            self.fmt_value(self.measured),
            verdict,
            self.gap()
        )
    }
}

/// A plot of a figure.
#[derive(Clone, Debug)]
pub struct Plot {
    /// File stem (`.svg` is added).
    pub stem: String,
    /// Title over the panels.
    pub title: String,
    /// The panels.
    pub panels: Vec<Panel>,
    /// Panels per row.
    pub cols: usize,
}

/// Everything one figure produced.
#[derive(Clone, Debug, Default)]
pub struct FigureOut {
    /// Heading in the report.
    pub title: String,
    /// What was run (workload, sweep, profiles), markdown.
    pub setup: String,
    /// CSV tables: (file stem, table).
    pub csv: Vec<(String, Table)>,
    /// Tables shown in the report: (caption, table).
    pub shown: Vec<(String, Table)>,
    /// Plots.
    pub plots: Vec<Plot>,
    /// The paper's claims beside the measurements.
    pub checks: Vec<Check>,
    /// The analysis: where the simulation disagrees and why (markdown
    /// paragraphs; every number in them is measured).
    pub notes: Vec<String>,
}

impl FigureOut {
    /// Writes its CSV files and plots into `dir` and returns its report
    /// section.
    pub fn write(&self, dir: &Path) -> BenchResult<String> {
        for (stem, t) in &self.csv {
            t.write_csv(&dir.join(format!("{stem}.csv")))?;
        }
        for p in &self.plots {
            write_svg(&dir.join(format!("{}.svg", p.stem)), &p.title, &p.panels, p.cols)?;
        }
        let mut s = String::new();
        let _ = writeln!(s, "## {}\n", self.title);
        let _ = writeln!(s, "{}\n", self.setup);
        let files: Vec<String> = self
            .csv
            .iter()
            .map(|(stem, _)| format!("`{stem}.csv`"))
            .chain(self.plots.iter().map(|p| format!("`{}.svg`", p.stem)))
            .collect();
        let _ = writeln!(s, "Files: {}.\n", files.join(", "));
        if !self.checks.is_empty() {
            let _ = writeln!(s, "| id | claim | paper | simulated | verdict |");
            let _ = writeln!(s, "|---|---|---|---|---|");
            for c in &self.checks {
                let _ = writeln!(s, "{}", c.row());
            }
            let _ = writeln!(s);
        }
        for (caption, t) in &self.shown {
            let _ = writeln!(s, "{caption}\n");
            let _ = writeln!(s, "{}", t.markdown());
        }
        for n in &self.notes {
            let _ = writeln!(s, "{n}\n");
        }
        Ok(s)
    }
}

/// Formats a number with `d` decimals (for table cells).
pub fn f(v: f64, d: usize) -> String {
    format!("{v:.d$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert!(Check::new("x", "r", Kind::Times, 2.0, 2.2).agrees());
        assert!(!Check::new("x", "r", Kind::Times, 2.0, 2.5).agrees());
        assert!(Check::new("x", "p", Kind::LowerPct, 40.0, 31.0).agrees());
        assert!(!Check::new("x", "p", Kind::LowerPct, 40.0, 29.0).agrees());
        assert!(Check::holds("x", "t", true).agrees());
        assert!(!Check::holds("x", "t", false).agrees());
        assert!(Check::holds("x", "t", false).row().contains("does not hold"));
        assert!(!Check::new("x", "n", Kind::Count, 2.0, 6.0).agrees());
        let row = Check::new("F", "c", Kind::LowerPct, 40.0, -5.0).row();
        assert!(row.contains("5% higher"), "{row}");
    }

    #[test]
    fn side_experiment_verdicts() {
        let v = |with, without| side_verdict(Kind::Times, 1.5, with, without, "the wait");
        assert!(v(1.45, 1.0).starts_with("it agrees with"));
        assert!(v(1.0, 1.6).contains("the wait is the gap"));
        assert!(v(1.0, 2.2).contains("lies between"));
        assert!(v(1.0, 1.1).contains("not the whole gap"));
        assert!(v(3.0, 2.0).contains("not the whole gap"));
    }
}
