//! Output of the figures: CSV tables and SVG plots (line charts with
//! optional error bars, grouped bar charts), drawn with plotters.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use plotters::coord::Shift;
use plotters::prelude::*;

use super::common::{BenchError, BenchResult};

/// A table written as CSV.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// Rows of cells (already formatted).
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with `header`.
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row.
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Writes the header and the rows as CSV (RFC 4180, with `\n` line
    /// ends; the `csv` crate quotes a cell with a comma, quote or line
    /// break) to `w`. Every row has the header's width.
    fn write_to<W: std::io::Write>(&self, w: W) -> Result<(), csv::Error> {
        let mut out = csv::Writer::from_writer(w);
        out.write_record(&self.header)?;
        for row in &self.rows {
            out.write_record(row)?;
        }
        out.flush()?;
        Ok(())
    }

    /// The CSV text.
    pub fn csv(&self) -> BenchResult<String> {
        let mut out = Vec::new();
        self.write_to(&mut out)?;
        String::from_utf8(out).map_err(|e| BenchError::Invalid(format!("csv: {e}")))
    }

    /// The table as markdown.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "| {} |", self.header.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(self.header.len()));
        for r in &self.rows {
            let _ = writeln!(out, "| {} |", r.join(" | "));
        }
        out
    }

    /// Writes the CSV to `path`.
    pub fn write_csv(&self, path: &Path) -> BenchResult<()> {
        let file = std::fs::File::create(path).map_err(|source| BenchError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        self.write_to(std::io::BufWriter::new(file))?;
        Ok(())
    }
}

/// One line of a line chart: points and, optionally, an error bar
/// (low, high) at each point.
#[derive(Clone, Debug, Default)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// (x, y) points.
    pub points: Vec<(f64, f64)>,
    /// (low, high) for each point, if drawn.
    pub bars: Option<Vec<(f64, f64)>>,
}

/// One panel of a figure.
#[derive(Clone, Debug)]
pub enum Panel {
    /// Lines over a numeric x axis.
    Lines {
        /// Panel caption.
        title: String,
        /// X axis name.
        x: String,
        /// Y axis name.
        y: String,
        /// The lines.
        series: Vec<Series>,
    },
    /// Grouped bars: one group per category, one bar per series.
    Bars {
        /// Panel caption.
        title: String,
        /// Y axis name.
        y: String,
        /// Category names (x axis).
        groups: Vec<String>,
        /// (series name, one value per group).
        series: Vec<(String, Vec<f64>)>,
    },
}

/// Colours of the series, in order.
const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

fn plot_err<E: std::fmt::Debug>(e: E) -> BenchError {
    BenchError::Plot(format!("{e:?}"))
}

/// Draws `panels` in a grid of `cols` columns into an SVG file at `path`.
pub fn write_svg(path: &Path, title: &str, panels: &[Panel], cols: usize) -> BenchResult<()> {
    let cols = cols.max(1);
    let rows = panels.len().div_ceil(cols).max(1);
    let size = (480 * cols as u32, 360 * rows as u32 + 30);
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let root = root.titled(title, ("sans-serif", 20)).map_err(plot_err)?;
    let areas = root.split_evenly((rows, cols));
    for (panel, area) in panels.iter().zip(areas.iter()) {
        match panel {
            Panel::Lines { title, x, y, series } => draw_lines(area, title, x, y, series)?,
            Panel::Bars {
                title,
                y,
                groups,
                series,
            } => draw_bars(area, title, y, groups, series)?,
        }
    }
    root.present().map_err(plot_err)?;
    Ok(())
}

fn draw_lines(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    title: &str,
    x: &str,
    y: &str,
    series: &[Series],
) -> BenchResult<()> {
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let x_max = xs.fold(1.0f64, f64::max);
    let x_min = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold(x_max, f64::min)
        .min(0.0);
    let y_max = series
        .iter()
        .flat_map(|s| {
            let bars = s.bars.iter().flatten().map(|b| b.1);
            s.points.iter().map(|p| p.1).chain(bars)
        })
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.1;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(x_min..x_max * 1.02, 0.0..y_max)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc(x)
        .y_desc(y)
        .draw()
        .map_err(plot_err)?;
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))
            .map_err(plot_err)?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(s.points.iter().map(|p| Circle::new(*p, 3, c.filled())))
            .map_err(plot_err)?;
        if let Some(bars) = &s.bars {
            let whisker = (x_max - x_min) * 0.008;
            chart
                .draw_series(s.points.iter().zip(bars).flat_map(|(p, (lo, hi))| {
                    [
                        PathElement::new(vec![(p.0, *lo), (p.0, *hi)], c),
                        PathElement::new(vec![(p.0 - whisker, *lo), (p.0 + whisker, *lo)], c),
                        PathElement::new(vec![(p.0 - whisker, *hi), (p.0 + whisker, *hi)], c),
                    ]
                }))
                .map_err(plot_err)?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(plot_err)?;
    Ok(())
}

fn draw_bars(
    area: &DrawingArea<SVGBackend<'_>, Shift>,
    title: &str,
    y: &str,
    groups: &[String],
    series: &[(String, Vec<f64>)],
) -> BenchResult<()> {
    let y_max = series
        .iter()
        .flat_map(|s| s.1.iter().copied())
        .fold(0.0f64, f64::max)
        .max(1e-9)
        * 1.15;
    let n = groups.len().max(1);
    let labels = groups.to_vec();
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..n as f64, 0.0..y_max)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|v| {
            let i = v.floor() as usize;
            if (v - i as f64 - 0.5).abs() < 0.01 {
                labels.get(i).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(y)
        .draw()
        .map_err(plot_err)?;
    let k = series.len().max(1) as f64;
    let width = 0.8 / k;
    for (j, (name, values)) in series.iter().enumerate() {
        let c = color(j);
        chart
            .draw_series(values.iter().enumerate().map(|(g, v)| {
                let x0 = g as f64 + 0.1 + j as f64 * width;
                Rectangle::new([(x0, 0.0), (x0 + width * 0.9, *v)], c.filled())
            }))
            .map_err(plot_err)?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .border_style(BLACK)
        .background_style(WHITE.mix(0.8))
        .draw()
        .map_err(plot_err)?;
    Ok(())
}

/// Where the figures go: `figures/` in the crate's [`crate::target_dir`]
/// (`$CARGO_TARGET_DIR`, else the workspace's `target/`), beside Table 1's
/// output.
pub fn figures_dir() -> PathBuf {
    crate::target_dir().join("figures")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_what_needs_it() {
        let mut t = Table::new(&["a", "b"]);
        t.push(vec!["1,5".into(), "say \"hi\"".into()]);
        assert_eq!(t.csv().unwrap(), "a,b\n\"1,5\",\"say \"\"hi\"\"\"\n");
        // A row of another width is refused, not written.
        t.push(vec!["only one".into()]);
        assert!(t.csv().is_err());
        assert!(t.markdown().starts_with("| a | b |\n|---|---|\n"));
    }

    #[test]
    fn svg_is_written() {
        let dir = std::env::temp_dir().join(format!("ccnvme-bench-svg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.svg");
        let panels = [
            Panel::Lines {
                title: "l".into(),
                x: "x".into(),
                y: "y".into(),
                series: vec![Series {
                    name: "s".into(),
                    points: vec![(1.0, 2.0), (2.0, 3.0)],
                    bars: Some(vec![(1.5, 2.5), (2.5, 3.5)]),
                }],
            },
            Panel::Bars {
                title: "b".into(),
                y: "y".into(),
                groups: vec!["g".into()],
                series: vec![("s".into(), vec![1.0])],
            },
        ];
        write_svg(&path, "t", &panels, 2).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.starts_with("<svg"));
        assert!(svg.contains("<polyline") || svg.contains("<path"));
        assert!(svg.contains("<rect"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
