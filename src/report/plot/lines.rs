//! A metric against a numeric factor, one line per variant (case 4: aggregated
//! throughput vs block size, stock vs backported kernel), with each point's CI as a
//! whisker so crossing lines can be told from noise.

use plotters::coord::combinators::LogCoord;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use crate::report::format::{log_tick, short};

use super::legend::{self, Marks};
use super::{
    check_finite, color, draw_err, padded_range, whisker_ends, whisker_floor, PlotError, FONT,
    WHISKER,
};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SeriesPoint {
    pub x: f64,
    pub y: f64,
    /// 95% CI of y; drawn as a whisker.
    pub ci: Option<(f64, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    pub name: String,
    pub points: Vec<SeriesPoint>,
}

/// Most levels of a factor labelled one by one on the x axis; beyond, plotters picks ticks.
const MAX_LEVEL_TICKS: usize = 12;

/// `log_x` suits factors that double (block sizes, queue depths); it needs x > 0.
pub(crate) fn metric_vs_factor(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    log_x: bool,
) -> Result<String, PlotError> {
    let points: Vec<&SeriesPoint> = series.iter().flat_map(|s| &s.points).collect();
    if points.is_empty() {
        return Err(PlotError::NoData("no series with points given".into()));
    }
    for s in series {
        check_finite(
            &format!("series {:?}", s.name),
            s.points.iter().flat_map(|p| {
                [Some(p.x), Some(p.y), p.ci.map(|c| c.0), p.ci.map(|c| c.1)]
                    .into_iter()
                    .flatten()
            }),
        )?;
    }
    let (xmin, xmax) = min_max(points.iter().map(|p| p.x));
    if log_x && xmin <= 0.0 {
        return Err(PlotError::BadInput {
            what: x_label.into(),
            reason: format!("a log scale needs x > 0, got {xmin}"),
        });
    }
    let floor = whisker_floor(points.iter().map(|p| p.y));
    let (ylo, yhi) = min_max(points.iter().flat_map(|p| {
        let (lo, hi) = p.ci.unwrap_or((p.y, p.y));
        [lo.min(p.y).max(floor), hi.max(p.y)]
    }));
    let (y0, y1) = padded_range(ylo, yhi, ylo >= 0.0);
    // The factor's levels are what was measured: with few of them, the x axis is
    // labelled at those (rq_affinity 0, 1, 2; bs 4, 16, 64, ...), not at 0.2, 0.4, ...
    let mut levels: Vec<f64> = points.iter().map(|p| p.x).collect();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    // Levels too close to label apart (the per-second series of runs whose windows end
    // at 4.002, 4.005 and 4.006 s) get the axis's own ticks instead.
    let at = |x: f64| if log_x { x.ln() } else { x };
    let span = at(xmax) - at(xmin);
    let crowded = levels.windows(2).any(|w| at(w[1]) - at(w[0]) < span / 40.0);
    let ticks = (levels.len() <= MAX_LEVEL_TICKS && !crowded).then_some(levels);
    let text = (title, x_label, y_label);
    let (lx0, lx1) = (xmin / 1.3, xmax * 1.3);
    let (x0, x1) = padded_range(xmin, xmax, false);
    let labels: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    legend::inside_or_below(&labels, |top, legend_below| match (log_x, &ticks) {
        (true, Some(l)) => plot_on(
            top,
            text,
            Levels {
                axis: LogCoord::<f64>::from((lx0..lx1).log_scale()),
                at: l.clone(),
            },
            y0..y1,
            series,
            legend_below,
            short,
        ),
        (true, None) => plot_on(
            top,
            text,
            (lx0..lx1).log_scale(),
            y0..y1,
            series,
            legend_below,
            log_tick,
        ),
        (false, Some(l)) => plot_on(
            top,
            text,
            Levels {
                axis: RangedCoordf64::from(x0..x1),
                at: l.clone(),
            },
            y0..y1,
            series,
            legend_below,
            short,
        ),
        (false, None) => plot_on(top, text, x0..x1, y0..y1, series, legend_below, short),
    })
}

/// An x axis ticked at given values (the factor's levels); its minor grid stays the inner
/// axis's. plotters' own `with_key_points` would do, but on an f64 axis it loses the value
/// formatter that drawing the mesh asks for.
struct Levels<R> {
    axis: R,
    at: Vec<f64>,
}

impl<R: Ranged<ValueType = f64>> Ranged for Levels<R> {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.axis.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.axis.key_points(hint)
        } else {
            self.at.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.axis.range()
    }

    fn axis_pixel_range(&self, limit: (i32, i32)) -> std::ops::Range<i32> {
        self.axis.axis_pixel_range(limit)
    }
}

/// The chart on `x` (a linear or log axis, with or without fixed ticks) and `y`.
fn plot_on<X>(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    (title, x_label, y_label): (&str, &str, &str),
    x: X,
    y: std::ops::Range<f64>,
    series: &[Series],
    legend_below: Option<&legend::Area<'_>>,
    x_tick: fn(f64) -> String,
) -> Result<Marks, PlotError>
where
    X: plotters::coord::ranged1d::AsRangedCoord<Value = f64>,
    X::CoordDescType: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    let chart = builder(root, title, &y)
        .build_cartesian_2d(x, y)
        .map_err(draw_err)?;
    draw(chart, x_label, y_label, series, legend_below, x_tick)
}

fn builder<'a, 'b>(
    root: &'a DrawingArea<SVGBackend<'b>, Shift>,
    title: &str,
    y: &std::ops::Range<f64>,
) -> ChartBuilder<'a, 'b, SVGBackend<'b>> {
    let mut b = ChartBuilder::on(root);
    b.caption(title, (FONT, 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(super::y_label_area(y.start, y.end));
    b
}

fn min_max(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    })
}

/// The drawing shared by the linear and the log x axis; the legend goes on `legend_below`
/// when given, else in the chart's best corner.
fn draw<'a, X>(
    mut chart: ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, RangedCoordf64>>,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    legend_below: Option<&legend::Area<'_>>,
    x_tick: fn(f64) -> String,
) -> Result<Marks, PlotError>
where
    X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
{
    super::draw_xy_mesh(&mut chart, (x_label, y_label), x_tick, 13)?;
    let floor = chart.y_range().start;
    let labels: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    let area = chart.plotting_area().get_pixel_range();
    let mut marks = Marks::new(area.clone(), &labels, SeriesLabelPosition::UpperLeft);
    for (i, s) in series.iter().enumerate() {
        let c = color(i);
        let mut pts: Vec<(f64, f64)> = s.points.iter().map(|p| (p.x, p.y)).collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        for pair in pts.windows(2) {
            marks.segment(chart.backend_coord(&pair[0]), chart.backend_coord(&pair[1]));
        }
        for p in &s.points {
            let (lo, hi) = p.ci.unwrap_or((p.y, p.y));
            let lo = lo.max(floor);
            marks.segment(
                chart.backend_coord(&(p.x, lo)),
                chart.backend_coord(&(p.x, hi)),
            );
        }
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))
            .map_err(draw_err)?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(draw_err)?;
        let whisker = WHISKER.stroke_width(1);
        for p in &s.points {
            let Some((lo, hi)) = p.ci else { continue };
            let ((lo, hi), caps) = whisker_ends(lo, hi, floor);
            chart
                .draw_series([PathElement::new(vec![(p.x, lo), (p.x, hi)], whisker)])
                .map_err(draw_err)?;
            chart
                .draw_series(caps.into_iter().map(|y| {
                    EmptyElement::at((p.x, y)) + PathElement::new(vec![(-5, 0), (5, 0)], whisker)
                }))
                .map_err(draw_err)?;
        }
    }
    legend::draw_lines(&mut chart, &marks, legend_below, &labels)?;
    Ok(marks)
}

#[cfg(test)]
mod tests {
    use super::super::svg_check::*;
    use super::*;

    fn series(name: &str, scale: f64) -> Series {
        Series {
            name: name.into(),
            points: [4.0f64, 16.0, 64.0, 256.0, 1024.0]
                .iter()
                .map(|&bs| {
                    let y = scale * 100.0 * bs.ln();
                    SeriesPoint {
                        x: bs,
                        y,
                        ci: Some((y * 0.95, y * 1.05)),
                    }
                })
                .collect(),
        }
    }

    #[test]
    fn one_line_per_variant_with_legend_and_whiskers() {
        let s = [series("stock", 1.0), series("backport", 1.3)];
        for log_x in [true, false] {
            let svg = metric_vs_factor("throughput vs bs", "bs [KiB]", "MB/s", &s, log_x).unwrap();
            let doc = parse(&svg);
            // One data line per series plus one legend sample line per series.
            assert_eq!(stroked(&doc, "polyline", color(0)), 2, "log_x={log_x}");
            assert_eq!(stroked(&doc, "polyline", color(1)), 2);
            let circles = doc
                .descendants()
                .filter(|n| n.has_tag_name("circle"))
                .count();
            assert_eq!(circles, 10);
            assert_eq!(stroked(&doc, "polyline", WHISKER), 30);
            let texts = texts(&doc);
            assert!(texts.iter().any(|t| t == "stock"));
            assert!(texts.iter().any(|t| t == "backport"));
            assert!(texts.iter().any(|t| t == "bs [KiB]"));
        }
    }

    #[test]
    fn a_few_levels_are_the_x_axis_labels() {
        let point = |x: f64, y: f64| SeriesPoint { x, y, ci: None };
        let rq = Series {
            name: "placement=on".into(),
            points: vec![
                point(0.0, 15_000.0),
                point(1.0, 11_000.0),
                point(2.0, 10_000.0),
            ],
        };
        let svg = metric_vs_factor("t", "rq_affinity", "IOPS", &[rq], false).unwrap();
        let labels = texts(&parse(&svg));
        for level in ["0", "1", "2"] {
            assert!(
                labels.iter().any(|t| t == level),
                "{level} missing: {labels:?}"
            );
        }
        assert!(
            !labels.iter().any(|t| t == "0.5" || t == "0.2"),
            "{labels:?}"
        );
        // Block sizes on a log axis: labelled at the sizes measured.
        let bs = series("stock", 1.0);
        let svg = metric_vs_factor("t", "bs [KiB]", "MB/s", &[bs], true).unwrap();
        let labels = texts(&parse(&svg));
        for level in ["4", "16", "64", "256", "1,024"] {
            assert!(
                labels.iter().any(|t| t == level),
                "{level} missing: {labels:?}"
            );
        }
    }

    /// Per-second series of runs whose windows end 3 ms apart: labelled at the axis's own
    /// ticks, not at 4.002, 4.005 and 4.006 drawn over each other.
    #[test]
    fn levels_too_close_to_read_apart_are_not_the_labels() {
        let run = |name: &str, end: f64| Series {
            name: name.into(),
            points: [1.0, 2.0, 3.0, end]
                .iter()
                .map(|&x| SeriesPoint {
                    x,
                    y: 1_500_000.0,
                    ci: None,
                })
                .collect(),
        };
        let runs = [
            run("run 1", 4.002),
            run("run 2", 4.005),
            run("run 3", 4.006),
        ];
        let svg = metric_vs_factor("t", "seconds", "IOPS", &runs, false).unwrap();
        let labels = texts(&parse(&svg));
        assert!(!labels.iter().any(|t| t.starts_with("4.00")), "{labels:?}");
        assert!(labels.iter().any(|t| t == "2.5"), "{labels:?}");
        // The y axis's name stands clear of "1,500,000" (70 px made them touch).
        assert!(super::super::y_label_area(0.0, 1_600_000.0) >= 90);
    }

    #[test]
    fn an_interval_below_zero_is_cut_at_the_axis_of_a_metric_never_below_zero() {
        let iops = |ci: (f64, f64)| Series {
            name: "rq_affinity".into(),
            points: vec![
                SeriesPoint {
                    x: 0.0,
                    y: 12_000.0,
                    ci: Some((11_000.0, 13_000.0)),
                },
                SeriesPoint {
                    x: 1.0,
                    y: 9_000.0,
                    ci: Some(ci),
                },
            ],
        };
        let svg = metric_vs_factor(
            "t",
            "rq_affinity",
            "IOPS",
            &[iops((-11_000.0, 29_000.0))],
            false,
        )
        .unwrap();
        let doc = parse(&svg);
        let labels = texts(&doc);
        assert!(!labels.iter().any(|t| t.starts_with('-')), "{labels:?}");
        // Two whiskers, and caps at both ends of the first and the top of the second.
        assert_eq!(stroked(&doc, "polyline", WHISKER), 2 + 3);
        // A metric that is negative somewhere keeps its whole interval on the axis.
        let mut change = iops((-11_000.0, 29_000.0));
        change.points[0].y = -1.0;
        let svg = metric_vs_factor("t", "rq_affinity", "change", &[change], false).unwrap();
        let doc = parse(&svg);
        assert!(texts(&doc).iter().any(|t| t.starts_with('-')));
        assert_eq!(stroked(&doc, "polyline", WHISKER), 2 + 4);
    }

    #[test]
    fn log_scale_rejects_zero_and_empty_is_an_error() {
        let mut s = series("a", 1.0);
        s.points[0].x = 0.0;
        let err = metric_vs_factor("t", "qd", "y", &[s], true).unwrap_err();
        assert!(err.to_string().contains("x > 0"), "{err}");
        assert!(matches!(
            metric_vs_factor("t", "x", "y", &[], false),
            Err(PlotError::NoData(_))
        ));
    }
}
