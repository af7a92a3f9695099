//! A plain x-y chart of many points: clouds of small squares, lines that break where there is
//! no data, and bars over x intervals, on a linear or logarithmic x axis. The trace charts
//! (`trace plot`: sectors, latency, depth and rates over time, the latency histogram) are
//! drawn with it, so every chart iolab writes comes from this one plotters engine.
//!
//! The layers are collected first and drawn in `finish`, because plotters' SVG backend
//! borrows the output string for the whole drawing.

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::report::format::{log_tick, short};

use super::legend::{self, Marks};
use super::{draw_err, PlotError, FONT};

/// What the axes show: names, data ranges, and whether x is logarithmic.
pub(crate) struct Axes<'a> {
    pub x_name: &'a str,
    pub y_name: &'a str,
    pub x: (f64, f64),
    pub y: (f64, f64),
    pub log_x: bool,
}

enum Shape {
    /// Small squares, one per point.
    Points(Vec<(f64, f64)>),
    /// A line through the points; a NaN y breaks it.
    Line(Vec<(f64, f64)>),
    /// Bars from the bottom of the y axis, each (x0, x1, y).
    Bars(Vec<(f64, f64, f64)>),
}

struct Layer {
    shape: Shape,
    colour: RGBColor,
    /// 1 for solid marks; below 1 where layers overlap and each must show through.
    opacity: f64,
    label: String,
}

/// The opacity of see-through points: where two clouds overlap both stay visible, and the
/// mixed colour shows the overlap.
const SEE_THROUGH: f64 = 0.5;

/// A chart being described; `finish` draws it.
pub(crate) struct Chart {
    size: (u32, u32),
    title: String,
    x_name: String,
    y_name: String,
    x: (f64, f64),
    y: (f64, f64),
    log_x: bool,
    layers: Vec<Layer>,
}

/// A usable axis range: an empty, reversed or undrawable one (`super::drawable`) becomes one
/// unit from 0.
fn fix(r: (f64, f64)) -> (f64, f64) {
    if r.1 > r.0 && super::drawable(r.0) && super::drawable(r.1) {
        r
    } else if super::drawable(r.0) {
        (r.0.min(0.0), r.0.max(0.0) + 1.0)
    } else {
        (0.0, 1.0)
    }
}

impl Chart {
    /// Starts a chart of `size` (width, height) pixels with a title and axes.
    pub(crate) fn new(size: (u32, u32), title: &str, axes: Axes) -> Chart {
        let mut x = fix(axes.x);
        if axes.log_x && x.0 <= 0.0 {
            // A log axis cannot start at 0: nine decades below the top is the view.
            x.0 = x.1 * 1e-9;
        }
        Chart {
            size,
            title: title.to_string(),
            x_name: axes.x_name.to_string(),
            y_name: axes.y_name.to_string(),
            x,
            y: fix(axes.y),
            log_x: axes.log_x,
            layers: Vec::new(),
        }
    }

    /// Small squares, one per point, with a legend entry.
    pub(crate) fn points(&mut self, points: &[(f64, f64)], colour: RGBColor, label: &str) {
        // Nothing to draw, nothing to name in the legend.
        if points.is_empty() {
            return;
        }
        self.push(Shape::Points(points.to_vec()), colour, label);
    }

    /// Points that let the layers below show through: for clouds drawn over each other (one
    /// trace's over another's), where solid marks would hide the first under the last.
    pub(crate) fn see_through_points(
        &mut self,
        points: &[(f64, f64)],
        colour: RGBColor,
        label: &str,
    ) {
        self.push(Shape::Points(points.to_vec()), colour, label);
        if let Some(l) = self.layers.last_mut() {
            l.opacity = SEE_THROUGH;
        }
    }

    /// A line through the points, with a legend entry. A point whose y is NaN breaks the
    /// line (no data there: nothing is interpolated); a line with no point is not drawn.
    pub(crate) fn line(&mut self, points: &[(f64, f64)], colour: RGBColor, label: &str) {
        if points.iter().all(|p| p.1.is_nan()) {
            return;
        }
        self.push(Shape::Line(points.to_vec()), colour, label);
    }

    /// Bars from the bottom of the y axis, each spanning [x0, x1), with a legend entry.
    pub(crate) fn bars(&mut self, bars: &[(f64, f64, f64)], colour: RGBColor, label: &str) {
        self.push(Shape::Bars(bars.to_vec()), colour, label);
    }

    fn push(&mut self, shape: Shape, colour: RGBColor, label: &str) {
        self.layers.push(Layer {
            shape,
            colour,
            opacity: 1.0,
            label: label.to_string(),
        });
    }

    /// Draws the chart; returns the SVG document.
    pub(crate) fn finish(self) -> Result<String, PlotError> {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, self.size).into_drawing_area();
            root.fill(&WHITE).map_err(draw_err)?;
            let mut builder = ChartBuilder::on(&root);
            builder
                .caption(&self.title, (FONT, 16))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(70);
            let ((x0, x1), (y0, y1)) = (self.x, self.y);
            if self.log_x {
                let chart = builder
                    .build_cartesian_2d((x0..x1).log_scale(), y0..y1)
                    .map_err(draw_err)?;
                self.draw(chart, log_tick)?;
            } else {
                let chart = builder
                    .build_cartesian_2d(x0..x1, y0..y1)
                    .map_err(draw_err)?;
                self.draw(chart, short)?;
            }
            root.present().map_err(draw_err)?;
        }
        Ok(svg)
    }

    /// The drawing shared by the linear and the log x axis. Values are clamped into the
    /// axes' ranges, so nothing is drawn outside the plot area.
    fn draw<'a, X>(
        &self,
        mut chart: ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, RangedCoordf64>>,
        x_tick: fn(f64) -> String,
    ) -> Result<(), PlotError>
    where
        X: Ranged<ValueType = f64> + plotters::coord::ranged1d::ValueFormatter<f64>,
    {
        super::draw_xy_mesh(&mut chart, (&self.x_name, &self.y_name), x_tick, 12)?;
        let cx = |v: f64| v.clamp(self.x.0, self.x.1);
        let cy = |v: f64| v.clamp(self.y.0, self.y.1);
        let labels: Vec<&str> = self.layers.iter().map(|l| l.label.as_str()).collect();
        let area = chart.plotting_area().get_pixel_range();
        let mut marks = Marks::new(area, &labels, SeriesLabelPosition::UpperRight);
        for layer in &self.layers {
            let px = |x: f64, y: f64| chart.backend_coord(&(cx(x), cy(y)));
            match &layer.shape {
                Shape::Points(points) => {
                    for &(x, y) in points.iter().filter(|p| p.1.is_finite()) {
                        marks.point(px(x, y));
                    }
                }
                Shape::Line(points) => {
                    for pair in points
                        .windows(2)
                        .filter(|w| !w[0].1.is_nan() && !w[1].1.is_nan())
                    {
                        marks.segment(px(pair[0].0, pair[0].1), px(pair[1].0, pair[1].1));
                    }
                }
                Shape::Bars(bars) => {
                    for &(x0, x1, y) in bars {
                        marks.rect(px(x0, self.y.0), px(x1, y));
                    }
                }
            }
        }
        for layer in &self.layers {
            let c = layer.colour;
            let drawn = match &layer.shape {
                Shape::Points(points) => chart
                    .draw_series(points.iter().filter(|p| p.1.is_finite()).map(|&(x, y)| {
                        EmptyElement::at((cx(x), cy(y)))
                            + Rectangle::new([(-1, -1), (1, 1)], c.mix(layer.opacity).filled())
                    }))
                    .map_err(draw_err)?,
                Shape::Line(points) => {
                    // One polyline per run of points with data.
                    let runs = points
                        .split(|p| p.1.is_nan())
                        .filter(|run| !run.is_empty())
                        .map(|run| {
                            let pts: Vec<(f64, f64)> =
                                run.iter().map(|&(x, y)| (cx(x), cy(y))).collect();
                            PathElement::new(pts, c.stroke_width(1))
                        });
                    chart.draw_series(runs).map_err(draw_err)?
                }
                Shape::Bars(bars) => chart
                    .draw_series(bars.iter().map(|&(x0, x1, y)| {
                        Rectangle::new([(cx(x0), self.y.0), (cx(x1), cy(y))], c.filled())
                    }))
                    .map_err(draw_err)?,
            };
            drawn
                .label(layer.label.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], c.filled()));
        }
        if !self.layers.is_empty() {
            legend::draw(&mut chart, marks.corner(), 0.8)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::svg_check::*;
    use super::*;

    fn axes(log_x: bool) -> Axes<'static> {
        Axes {
            x_name: "time (s)",
            y_name: "sector",
            x: (0.0, 10.0),
            y: (0.0, 5.0),
            log_x,
        }
    }

    #[test]
    fn points_lines_and_bars_with_a_legend() {
        let (a, b, c) = (RGBColor(1, 2, 3), RGBColor(4, 5, 6), RGBColor(7, 8, 9));
        let mut chart = Chart::new((600, 400), "t <1>", axes(false));
        chart.points(&[(1.0, 1.0), (2.0, 2.0), (3.0, f64::NAN)], a, "cloud");
        // The NaN breaks the line into two runs.
        chart.line(
            &[(0.0, 0.0), (1.0, 1.0), (2.0, f64::NAN), (3.0, 1.0)],
            b,
            "line",
        );
        chart.bars(&[(4.0, 5.0, 2.0), (5.0, 6.0, 9.0)], c, "bars");
        let svg = chart.finish().unwrap();
        let doc = parse(&svg);
        // Two points and one legend square; two bars and one legend square.
        assert_eq!(rects_filled(&doc, a), 3);
        assert_eq!(rects_filled(&doc, c), 3);
        assert_eq!(stroked(&doc, "polyline", b), 2);
        let texts = texts(&doc);
        for t in ["t <1>", "cloud", "line", "bars", "time (s)", "sector"] {
            assert!(texts.iter().any(|x| x == t), "{t} missing: {texts:?}");
        }
    }

    /// The x of the legend's frame: the one rect stroked black with no fill.
    fn legend_x(svg: &str) -> f64 {
        let doc = parse(svg);
        let frames: Vec<f64> = doc
            .descendants()
            .filter(|n| n.has_tag_name("rect") && n.attribute("fill") == Some("none"))
            .filter(|n| n.attribute("stroke") == Some("#000000"))
            .map(|n| n.attribute("x").unwrap().parse().unwrap())
            .collect();
        assert_eq!(frames.len(), 1, "{svg}");
        frames[0]
    }

    #[test]
    fn the_legend_moves_off_data_in_its_usual_corner() {
        let colour = RGBColor(1, 2, 3);
        // Throughput along the top of the right half: the usual upper-right corner is taken.
        let mut chart = Chart::new((600, 400), "t", axes(false));
        chart.line(&[(5.0, 4.9), (7.5, 5.0), (10.0, 4.8)], colour, "reads");
        let x = legend_x(&chart.finish().unwrap());
        assert!(x < 300.0, "legend at x = {x}, over the line");
        // The same line in the lower half leaves the usual corner to the legend.
        let mut chart = Chart::new((600, 400), "t", axes(false));
        chart.line(&[(5.0, 0.2), (7.5, 0.1), (10.0, 0.3)], colour, "reads");
        let x = legend_x(&chart.finish().unwrap());
        assert!(x > 300.0, "legend at x = {x}, away from its usual corner");
    }

    #[test]
    fn empty_ranges_a_zero_log_start_and_an_empty_line_still_draw() {
        let mut axes = axes(true);
        axes.x = (0.0, 1.0);
        axes.y = (3.0, 3.0);
        let mut chart = Chart::new((600, 400), "t", axes);
        chart.line(&[(0.5, f64::NAN)], RGBColor(1, 2, 3), "nothing");
        let svg = chart.finish().unwrap();
        let doc = parse(&svg);
        assert!(!texts(&doc).iter().any(|t| t == "nothing"));
    }
}
