//! SVG line charts of the figures, which the figures binaries write into `docs/plots/` when run in
//! full (not `quick`).
//!
//! The charts are plain SVG with text left to the viewer's `sans-serif` font: nothing is
//! embedded, and drawing them needs no font library.

use plotters::coord::ranged1d::{AsRangedCoord, Ranged, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};

/// Where the binaries write their charts: the workspace's `docs/plots/`.
pub const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/plots");

/// The path of the chart called `name` (without extension) in [`DIR`].
pub fn path(name: &str) -> PathBuf {
    Path::new(DIR).join(format!("{name}.svg"))
}

/// One line of a chart: its name in the legend and its points.
pub type Series<'a> = (&'a str, Vec<(f64, f64)>);

/// A line chart with linear axes; see [`Chart`] for logarithmic axes and named x positions.
pub fn lines(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series<'_>],
) -> io::Result<()> {
    Chart::new(title, x_label, y_label).draw(path, series)
}

/// Percentiles of several samples side by side: one line per series through its `levels`, each
/// level an x position named after it, the values on a logarithmic y axis when `log_y`.
///
/// `levels` are quantiles in 0..=1 (1 is drawn as "max", 0 as "min"); each series gives its
/// value at some of them, as `(quantile, value)`, so that a series known only at a few levels
/// (p50, p99, max) sits beside complete ones.
pub fn percentiles(
    path: &Path,
    title: &str,
    y_label: &str,
    levels: &[f64],
    log_y: bool,
    series: &[Series<'_>],
) -> io::Result<()> {
    let names: Vec<(f64, String)> = levels
        .iter()
        .enumerate()
        .map(|(at, &q)| (at as f64, level_name(q)))
        .collect();
    let placed: Vec<Series<'_>> = series
        .iter()
        .map(|(name, points)| {
            let points = points
                .iter()
                .filter_map(|&(q, value)| {
                    let at = levels.iter().position(|&level| (level - q).abs() < 1e-9)?;
                    Some((at as f64, value))
                })
                .collect();
            (*name, points)
        })
        .collect();
    let mut chart = Chart::new(title, "percentile", y_label);
    chart.log_y = log_y;
    chart.x_names = names;
    chart.draw(path, &placed)
}

/// A count with its thousands grouped, for titles: 1,000,000.
pub fn count(n: usize) -> String {
    let digits = n.to_string();
    let mut grouped = String::new();
    for (at, digit) in digits.chars().enumerate() {
        if at > 0 && (digits.len() - at).is_multiple_of(3) {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    grouped
}

/// How a quantile is written on an axis: "p50", "p99.9", "max".
pub fn level_name(q: f64) -> String {
    if q >= 1.0 {
        "max".to_owned()
    } else if q <= 0.0 {
        "min".to_owned()
    } else {
        format!("p{}", short(q * 100.0))
    }
}

/// The quantiles `levels` of `sorted` (ascending), as points for [`percentiles`]; "max" (1.0) is
/// the last sample and "min" (0.0) the first.
pub fn quantiles(sorted: &[f64], levels: &[f64]) -> Vec<(f64, f64)> {
    if sorted.is_empty() {
        return Vec::new();
    }
    levels
        .iter()
        .map(|&q| (q, crate::figures::quantile(sorted, q.clamp(0.0, 1.0))))
        .collect()
}

/// A line chart's settings.
pub struct Chart {
    /// Written above the chart.
    pub title: String,
    /// Written under the x axis.
    pub x_label: String,
    /// Written beside the y axis.
    pub y_label: String,
    /// A logarithmic x axis (points at or below zero are left out).
    pub log_x: bool,
    /// A logarithmic y axis (points at or below zero are left out).
    pub log_y: bool,
    /// Names for x positions, written instead of numbers (only these positions are labelled).
    pub x_names: Vec<(f64, String)>,
}

impl Chart {
    /// Linear axes, numbers on them.
    pub fn new(title: &str, x_label: &str, y_label: &str) -> Chart {
        Chart {
            title: title.to_owned(),
            x_label: x_label.to_owned(),
            y_label: y_label.to_owned(),
            log_x: false,
            log_y: false,
            x_names: Vec::new(),
        }
    }

    /// Writes the chart of `series` to `path` as SVG, creating its directory.
    pub fn draw(&self, path: &Path, series: &[Series<'_>]) -> io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let points = || series.iter().flat_map(|(_, points)| points.iter());
        let x = span(
            points().map(|&(x, _)| x),
            self.log_x,
            !self.x_names.is_empty(),
        );
        let y = span(points().map(|&(_, y)| y), self.log_y, false);
        match (self.log_x, self.log_y) {
            (false, false) => self.render(path, x, y, series),
            (false, true) => self.render(path, x, y.log_scale(), series),
            (true, false) => self.render(path, x.log_scale(), y, series),
            (true, true) => self.render(path, x.log_scale(), y.log_scale(), series),
        }
        .map_err(|error| io::Error::other(format!("{}: {error}", path.display())))
    }

    fn render<X, Y>(
        &self,
        path: &Path,
        x: impl AsRangedCoord<CoordDescType = X, Value = f64>,
        y: impl AsRangedCoord<CoordDescType = Y, Value = f64>,
        series: &[Series<'_>],
    ) -> Result<(), Box<dyn std::error::Error>>
    where
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        // The legend has a column of its own at the right, so that it never hides a line.
        let longest = series.iter().map(|(name, _)| name.chars().count()).max();
        let legend_width = longest.map_or(0, |chars| 48 + 7 * chars as u32);
        let root = SVGBackend::new(path, (PLOT_WIDTH + legend_width, HEIGHT)).into_drawing_area();
        root.fill(&WHITE)?;
        let (plot_area, legend_area) = root.split_horizontally(PLOT_WIDTH);
        let mut chart = ChartBuilder::on(&plot_area)
            .caption(&self.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(x, y)?;
        let x_format = |value: &f64| {
            if self.x_names.is_empty() {
                return short(*value);
            }
            self.x_names
                .iter()
                .find(|(at, _)| (at - value).abs() < 1e-6)
                .map_or_else(String::new, |(_, name)| name.clone())
        };
        let y_format = |value: &f64| {
            // On a logarithmic axis, label 1, 2 and 5 times a power of ten; the others are lines.
            let mantissa = value / 10f64.powf(value.log10().floor());
            let labelled = [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6);
            if self.log_y && !labelled {
                return String::new();
            }
            short(*value)
        };
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(self.x_label.as_str())
            .y_desc(self.y_label.as_str())
            .x_label_formatter(&x_format)
            .y_label_formatter(&y_format)
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .light_line_style(WHITE.mix(0.0))
            .bold_line_style(BLACK.mix(0.12));
        if !self.x_names.is_empty() {
            mesh.x_labels(self.x_names.len() + 2);
        }
        if self.log_y {
            mesh.y_labels(24);
        }
        mesh.draw()?;
        let label = TextStyle::from(("sans-serif", 13)).pos(Pos::new(HPos::Left, VPos::Center));
        for (index, (name, points)) in series.iter().enumerate() {
            let color = COLORS[index % COLORS.len()];
            chart.draw_series(
                LineSeries::new(points.iter().copied(), color.stroke_width(2)).point_size(3),
            )?;
            let y = 48 + 24 * index as i32;
            legend_area.draw(&PathElement::new(
                vec![(4, y), (28, y)],
                color.stroke_width(2),
            ))?;
            legend_area.draw(&Circle::new((16, y), 3, color.stroke_width(2)))?;
            legend_area.draw(&Text::new(name.to_string(), (36, y), label.clone()))?;
        }
        root.present()?;
        Ok(())
    }
}

/// The size of the chart without its legend, in pixels.
const PLOT_WIDTH: u32 = 620;
const HEIGHT: u32 = 400;

/// The first colour goes to the first series, which by convention is this workspace's crate.
const COLORS: [RGBColor; 7] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(127, 127, 127),
];

/// The range an axis needs for `values`, with some room at both ends (and above zero on a
/// logarithmic axis); `whole` widens it by half a step so that named positions sit inside.
fn span(values: impl Iterator<Item = f64>, log: bool, whole: bool) -> Range<f64> {
    let values: Vec<f64> = values
        .filter(|value| value.is_finite() && (!log || *value > 0.0))
        .collect();
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if values.is_empty() {
        return if log { 1.0..10.0 } else { 0.0..1.0 };
    }
    if whole {
        return low - 0.5..high + 0.5;
    }
    if log {
        // From a power of ten, where the axis's first label is.
        return 10f64.powf((low / 1.2).log10().floor()) * 0.999..high * 1.5;
    }
    let room = ((high - low) * 0.08).max(high.abs() * 0.05).max(1e-9);
    let bottom = if low >= 0.0 && low - room < 0.0 {
        0.0
    } else {
        low - room
    };
    bottom..high + room
}

/// A number as short as it can be written without losing what an axis needs: 1,200, 45, 3.5,
/// 0.25, 0.012.
fn short(value: f64) -> String {
    let magnitude = value.abs();
    let text = if magnitude >= 100.0 || magnitude == 0.0 {
        format!("{value:.0}")
    } else if magnitude >= 1.0 {
        format!("{value:.1}")
    } else if magnitude >= 0.01 {
        format!("{value:.3}")
    } else {
        format!("{value:.5}")
    };
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_written_short() {
        assert_eq!(short(1200.0), "1200");
        assert_eq!(short(45.0), "45");
        assert_eq!(short(3.5), "3.5");
        assert_eq!(short(0.25), "0.25");
        assert_eq!(short(0.0123), "0.012");
        assert_eq!(level_name(0.5), "p50");
        assert_eq!(level_name(0.999), "p99.9");
        assert_eq!(level_name(1.0), "max");
        assert_eq!(count(1_000_000), "1,000,000");
        assert_eq!(count(500), "500");
    }

    #[test]
    fn a_chart_is_written_as_svg() {
        let dir = std::env::temp_dir().join(format!("plot-test-{}", std::process::id()));
        let file = dir.join("deeper/chart.svg");
        lines(
            &file,
            "title",
            "threads",
            "ns",
            &[
                ("a", vec![(1.0, 60.0), (2.0, 35.0)]),
                ("b", vec![(1.0, 400.0)]),
            ],
        )
        .unwrap();
        percentiles(
            &dir.join("p.svg"),
            "hand-off",
            "ms",
            &[0.5, 0.9, 0.99, 1.0],
            true,
            &[("a", quantiles(&[0.1, 0.2, 0.3], &[0.5, 0.9, 0.99, 1.0]))],
        )
        .unwrap();
        let svg = std::fs::read_to_string(&file).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("threads"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
