//! SVG charts of the kinds people post with performance results: bars with CI whiskers per
//! configuration, a metric against a numeric factor with one line per variant, latency
//! CDFs from merged fio histograms, per-CPU interrupt-rate heatmaps and per-CPU time
//! breakdowns; and plain x-y charts of many points (`xy`), which the trace charts use.
//!
//! SVG on purpose: plotters' SVG backend writes `<text>` elements and lets the viewer
//! pick the font, so no font file is loaded here and the charts inline into an offline HTML
//! report. PNG is a rasterised copy of the same SVG (`report::png`). Every function takes plain data and returns the SVG document as a
//! `String`; empty or non-finite input is an error that names what is missing.

mod bars;
mod cpu_breakdown;
mod heatmap;
mod latency;
mod legend;
mod lines;
mod xy;

pub(crate) use bars::{bars_with_ci, Bar};
pub(crate) use cpu_breakdown::cpu_breakdown;
pub(crate) use heatmap::{irq_heatmap, RateGrid};
pub(crate) use latency::latency_cdf;
pub(crate) use lines::{metric_vs_factor, Series, SeriesPoint};
pub(crate) use xy::{Axes, Chart};

use plotters::style::RGBColor;
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub(crate) enum PlotError {
    #[error("nothing to plot: {0}")]
    NoData(String),
    #[error("cannot plot {what}: {reason}")]
    BadInput { what: String, reason: String },
    #[error("drawing the chart failed: {0}")]
    Draw(String),
}

pub(crate) fn draw_err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// The axes and grid of an x-y chart on a linear or log x axis, labelled the same way on
/// every chart: `x_tick` formats the x labels, values on y are shortened.
pub(crate) fn draw_xy_mesh<'a, X>(
    chart: &mut plotters::chart::ChartContext<
        'a,
        plotters::prelude::SVGBackend<'a>,
        plotters::prelude::Cartesian2d<X, plotters::coord::types::RangedCoordf64>,
    >,
    (x_label, y_label): (&str, &str),
    x_tick: fn(f64) -> String,
    font_size: u32,
) -> Result<(), PlotError>
where
    X: plotters::prelude::Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_label_formatter(&|v| x_tick(*v))
        .y_label_formatter(&|v| crate::report::format::short(*v))
        .label_style((FONT, font_size))
        .draw()
        .map_err(draw_err)
}

/// Width of the y axis's label area for an axis from `lo` to `top`: room for the wider of
/// their tick labels at 13 px (about 7.5 px a character) beside the axis's name; a fixed
/// 70 px let "1,000,000" run into the name.
pub(crate) fn y_label_area(lo: f64, top: f64) -> u32 {
    let widest = [lo, top]
        .iter()
        .map(|v| crate::report::format::short(*v).chars().count())
        .max()
        .unwrap_or(1);
    (28 + widest as u32 * 15 / 2).max(60)
}

/// Chart size in SVG pixels; wide enough for 8-12 labelled bars.
pub(crate) const SIZE: (u32, u32) = (800, 480);

/// Okabe–Ito colours: distinguishable with the common colour-vision deficiencies.
pub(crate) const PALETTE: [RGBColor; 8] = [
    RGBColor(0x00, 0x72, 0xB2),
    RGBColor(0xE6, 0x9F, 0x00),
    RGBColor(0x00, 0x9E, 0x73),
    RGBColor(0xD5, 0x5E, 0x00),
    RGBColor(0xCC, 0x79, 0xA7),
    RGBColor(0x56, 0xB4, 0xE9),
    RGBColor(0xF0, 0xE4, 0x42),
    RGBColor(0x00, 0x00, 0x00),
];

/// CI whiskers and bands: dark grey, distinct from the black axes.
pub(crate) const WHISKER: RGBColor = RGBColor(0x33, 0x33, 0x33);

pub(crate) fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

pub(crate) const FONT: &str = "sans-serif";

/// The largest magnitude a chart draws. No measured figure comes near it; beyond it an axis
/// range and its padding overflow to infinity, and plotters then never finishes placing its
/// ticks (a database holding 1.7e308 hung `plot` and `report`).
pub(crate) const DRAWABLE: f64 = 1e100;

/// A value a chart can draw: finite and within [`DRAWABLE`].
pub(crate) fn drawable(v: f64) -> bool {
    v.is_finite() && v.abs() <= DRAWABLE
}

/// Rejects NaN, infinite and undrawably large values, naming the series and position.
pub(crate) fn check_finite(
    what: &str,
    values: impl IntoIterator<Item = f64>,
) -> Result<(), PlotError> {
    for (i, v) in values.into_iter().enumerate() {
        if !drawable(v) {
            return Err(PlotError::BadInput {
                what: what.into(),
                reason: if v.is_finite() {
                    format!("value {i} is {v}, too large to draw (at most {DRAWABLE:e})")
                } else {
                    format!("value {i} is {v}")
                },
            });
        }
    }
    Ok(())
}

/// A segmented axis for `n` items, a slot each: plotters' integer ranges include their end,
/// so `0..n` would leave an empty slot after the last item. A zero-length range has no scale,
/// so one item gets three slots and takes the middle one: centred, and its label too.
pub(crate) struct Slots(pub(crate) usize);

impl Slots {
    pub(crate) fn range(&self) -> std::ops::Range<usize> {
        if self.0 <= 1 {
            0..2
        } else {
            0..self.0 - 1
        }
    }

    /// The slot of item `i`.
    pub(crate) fn of(&self, i: usize) -> usize {
        if self.0 <= 1 {
            i + 1
        } else {
            i
        }
    }

    /// The item in slot `slot`, if one is there.
    pub(crate) fn item(&self, slot: usize) -> Option<usize> {
        let i = if self.0 <= 1 {
            slot.checked_sub(1)?
        } else {
            slot
        };
        (i < self.0).then_some(i)
    }

    /// How many slots the axis has (for the number of labels to ask for).
    pub(crate) fn count(&self) -> usize {
        self.range().end + 1
    }
}

/// Where CI whiskers are cut: at 0 when no measured value is below 0 (IOPS, MB/s, latency),
/// so that a wide interval from a few noisy runs does not stretch the axis to negative
/// throughput; nowhere otherwise. Tables and --json keep the interval as computed.
pub(crate) fn whisker_floor(values: impl IntoIterator<Item = f64>) -> f64 {
    if values.into_iter().all(|v| v >= 0.0) {
        0.0
    } else {
        f64::NEG_INFINITY
    }
}

/// A whisker from `lo` to `hi` as drawn above `floor`: its ends, and the ends that get a cap
/// (a cut end has none: the interval goes on below).
pub(crate) fn whisker_ends(lo: f64, hi: f64, floor: f64) -> ((f64, f64), Vec<f64>) {
    if lo < floor {
        ((floor, hi), vec![hi])
    } else {
        ((lo, hi), vec![lo, hi])
    }
}

/// A value range with some headroom, always including 0 for quantities drawn from 0 (bars).
pub(crate) fn padded_range(lo: f64, hi: f64, include_zero: bool) -> (f64, f64) {
    let (mut lo, mut hi) = if include_zero {
        (lo.min(0.0), hi.max(0.0))
    } else {
        (lo, hi)
    };
    if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
        lo -= 1.0;
        hi += 1.0;
    }
    let pad = 0.08 * (hi - lo);
    (
        if include_zero && lo == 0.0 {
            0.0
        } else {
            lo - pad
        },
        hi + pad,
    )
}

#[cfg(test)]
pub(crate) mod svg_check {
    //! Test helpers: parse the SVG as XML and count what was drawn.

    pub(crate) fn parse(svg: &str) -> roxmltree::Document<'_> {
        roxmltree::Document::parse(svg).unwrap_or_else(|e| panic!("not XML: {e}\n{svg}"))
    }

    /// Rectangles filled with `rgb` (plotters writes `fill="#RRGGBB"`).
    pub(crate) fn rects_filled(
        doc: &roxmltree::Document<'_>,
        rgb: plotters::style::RGBColor,
    ) -> usize {
        rect_boxes(doc, rgb).len()
    }

    /// Where the rectangles filled with `rgb` are: (x, y, width, height) each, in order.
    pub(crate) fn rect_boxes(
        doc: &roxmltree::Document<'_>,
        rgb: plotters::style::RGBColor,
    ) -> Vec<(f64, f64, f64, f64)> {
        let hex = format!("#{:02X}{:02X}{:02X}", rgb.0, rgb.1, rgb.2);
        doc.descendants()
            .filter(|n| n.has_tag_name("rect"))
            .filter(|n| {
                n.attribute("fill")
                    .is_some_and(|f| f.eq_ignore_ascii_case(&hex))
            })
            .map(|n| {
                let f = |a: &str| n.attribute(a).and_then(|v| v.parse().ok()).unwrap();
                (f("x"), f("y"), f("width"), f("height"))
            })
            .collect()
    }

    /// Elements of any kind stroked with `rgb` (lines, polylines).
    pub(crate) fn stroked(
        doc: &roxmltree::Document<'_>,
        tag: &str,
        rgb: plotters::style::RGBColor,
    ) -> usize {
        let hex = format!("#{:02X}{:02X}{:02X}", rgb.0, rgb.1, rgb.2);
        doc.descendants()
            .filter(|n| n.has_tag_name(tag))
            .filter(|n| {
                n.attribute("stroke")
                    .is_some_and(|f| f.eq_ignore_ascii_case(&hex))
            })
            .count()
    }

    pub(crate) fn texts(doc: &roxmltree::Document<'_>) -> Vec<String> {
        doc.descendants()
            .filter(|n| n.has_tag_name("text"))
            .map(|n| n.text().unwrap_or("").trim().to_string())
            .collect()
    }
}
