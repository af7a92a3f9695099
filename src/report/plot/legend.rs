//! Where a chart's legend goes. Drawn at a fixed corner, the legend hid the data whenever
//! the data lived there: a throughput line that starts high under an upper-left legend, a
//! cloud of sectors under an upper-right one. Each chart now notes, in pixels, what it drew
//! ([`Marks`]), and the legend takes the corner of the plot area where it covers the fewest
//! marks; ties keep the chart's usual corner. A chart drawn cheaply enough to draw twice
//! ([`inside_or_below`]) puts its legend below the plot instead when every corner would hide
//! some data: four latency CDFs with their p50 and p99 in the labels made a legend half the
//! plot wide, and it hid the bottom of every curve.

use std::ops::Range;

use plotters::chart::SeriesLabelPosition;
use plotters::coord::Shift;
use plotters::prelude::{DrawingArea, IntoDrawingArea, PathElement, Rectangle, SVGBackend, Text};
use plotters::style::{Color, BLACK, WHITE};

use super::{color, draw_err, PlotError, FONT, SIZE};

/// What a chart drew under each corner's legend box, counted in pixels as it is noted:
/// points as they are, lines and bars sampled every few pixels, so a long line or a wide bar
/// weighs more than one dot. Nothing is stored per mark (a sector cloud has millions).
#[derive(Debug)]
pub(crate) struct Marks {
    /// Each corner, in the order a tie is broken, with its legend box and what lies under it.
    corners: [(SeriesLabelPosition, Range<i32>, Range<i32>, usize); 4],
}

/// Sampling step along lines and across bars, in pixels.
const STEP: i32 = 3;

impl Marks {
    /// Marks on the plot area `area` (its pixel range) of a chart whose legend lists
    /// `labels` and usually sits at `usual`.
    pub(crate) fn new(
        area: (Range<i32>, Range<i32>),
        labels: &[&str],
        usual: SeriesLabelPosition,
    ) -> Marks {
        Marks {
            corners: corners(usual).map(|c| {
                let (xs, ys) = legend_box(&area, labels, &c);
                (c, xs, ys, 0)
            }),
        }
    }

    pub(crate) fn point(&mut self, (x, y): (i32, i32)) {
        for (_, xs, ys, n) in &mut self.corners {
            *n += usize::from(xs.contains(&x) && ys.contains(&y));
        }
    }

    pub(crate) fn segment(&mut self, a: (i32, i32), b: (i32, i32)) {
        let n = ((b.0 - a.0).abs().max((b.1 - a.1).abs()) / STEP).max(1);
        for i in 0..=n {
            self.point((a.0 + (b.0 - a.0) * i / n, a.1 + (b.1 - a.1) * i / n));
        }
    }

    pub(crate) fn rect(&mut self, a: (i32, i32), b: (i32, i32)) {
        let (x0, x1) = (a.0.min(b.0), a.0.max(b.0));
        let (y0, y1) = (a.1.min(b.1), a.1.max(b.1));
        for x in (x0..=x1).step_by(STEP as usize) {
            for y in (y0..=y1).step_by(STEP as usize) {
                self.point((x, y));
            }
        }
    }

    /// Whether the legend would hide data in every corner.
    fn hides_data(&self) -> bool {
        self.corners.iter().all(|(.., n)| *n > 0)
    }

    /// The corner whose legend would cover the fewest marks; the usual one wins ties.
    pub(crate) fn corner(&self) -> SeriesLabelPosition {
        let (c, ..) = self
            .corners
            .iter()
            .min_by_key(|(.., n)| *n)
            .expect("four corners");
        c.clone()
    }
}

/// The corners in the order a tie is broken: `usual` first, then the others.
fn corners(usual: SeriesLabelPosition) -> [SeriesLabelPosition; 4] {
    use SeriesLabelPosition::*;
    let mut all = [UpperRight, UpperLeft, LowerRight, LowerLeft];
    if let Some(i) = all.iter().position(|c| *c == usual) {
        all[..=i].rotate_right(1);
    }
    all
}

/// The chart area and, when the legend goes below, the area under it.
pub(crate) type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Draws a chart on a white canvas, twice at most: `draw(chart, None)` draws it on a
/// [`SIZE`] canvas with its legend in the best corner, and returns what it drew; when that
/// legend hides data in every corner, `draw(chart, Some(below))` draws it again on a canvas
/// taller by the legend, the chart in its top [`SIZE`] and the legend on `below`
/// ([`draw_below`]).
pub(crate) fn inside_or_below(
    labels: &[&str],
    mut draw: impl FnMut(&Area<'_>, Option<&Area<'_>>) -> Result<Marks, PlotError>,
) -> Result<String, PlotError> {
    let mut render = |below: bool| -> Result<(String, Marks), PlotError> {
        let extra = if below { size(labels).1 as u32 + 12 } else { 0 };
        let mut svg = String::new();
        let marks = {
            let root =
                SVGBackend::with_string(&mut svg, (SIZE.0, SIZE.1 + extra)).into_drawing_area();
            root.fill(&WHITE).map_err(draw_err)?;
            let (chart, bottom) = root.split_vertically(SIZE.1);
            let marks = draw(&chart, below.then_some(&bottom))?;
            root.present().map_err(draw_err)?;
            marks
        };
        Ok((svg, marks))
    };
    let (svg, marks) = render(false)?;
    if marks.hides_data() {
        Ok(render(true)?.0)
    } else {
        Ok(svg)
    }
}

/// Draws the legend of a chart drawn by [`inside_or_below`] whose i-th label's series is a
/// line in [`color`]`(i)`: on `below` when given, else in `marks`' best corner.
pub(crate) fn draw_lines<'a, CT>(
    chart: &mut plotters::chart::ChartContext<'a, SVGBackend<'a>, CT>,
    marks: &Marks,
    below: Option<&Area<'_>>,
    labels: &[&str],
) -> Result<(), PlotError>
where
    CT: plotters::coord::CoordTranslate,
{
    match below {
        Some(area) => draw_below(
            area,
            chart.plotting_area().get_pixel_range().0.start,
            labels,
        ),
        None => draw(chart, marks.corner(), 0.85),
    }
}

/// The legend below the plot, on `bottom` (the canvas under the [`SIZE`]-tall chart): each
/// label after a line sample in its series' colour, boxed as plotters boxes a legend, lined
/// up with the plot area's left edge `left`. plotters itself cannot draw it there: it clips
/// a legend's box to the plot area.
fn draw_below(bottom: &Area<'_>, left: i32, labels: &[&str]) -> Result<(), PlotError> {
    let (w, h) = size(labels);
    bottom
        .draw(&Rectangle::new([(left, 0), (left + w, h)], BLACK))
        .map_err(draw_err)?;
    for (i, label) in labels.iter().enumerate() {
        let y = 10 + (i as f64 * 13.0 * 1.25).round() as i32;
        bottom
            .draw(&PathElement::new(
                vec![(left + 10, y + 5), (left + 30, y + 5)],
                color(i).stroke_width(2),
            ))
            .map_err(draw_err)?;
        bottom
            .draw(&Text::new(label.to_string(), (left + 40, y), (FONT, 13)))
            .map_err(draw_err)?;
    }
    Ok(())
}

/// The legend's size as plotters lays it out in SVG, where it estimates text rather than
/// measuring it: 0.7 of its em (the 13 px label font / 1.24²) per byte and a line every 1.25
/// of the font size; 30 px of sample and 10 px margins around the text.
fn size(labels: &[&str]) -> (i32, i32) {
    let em = 13.0 / 1.24 / 1.24;
    let bytes = labels.iter().map(|l| l.len()).max().unwrap_or(0);
    let text_w = (em * 0.7 * bytes as f64).round() as i32;
    let lines = labels.len().max(1) as f64;
    let text_h = ((lines - 1.0) * 13.0 * 1.25).round() as i32 + (em * 1.24) as i32;
    (text_w + 30 + 20, text_h + 20)
}

/// The legend's box at `corner` of the plot area `area`, 5 px from the edges.
fn legend_box(
    area: &(Range<i32>, Range<i32>),
    labels: &[&str],
    corner: &SeriesLabelPosition,
) -> (Range<i32>, Range<i32>) {
    use SeriesLabelPosition::*;
    let (w, h) = size(labels);
    let (x, y) = (&area.0, &area.1);
    let left = match corner {
        UpperLeft | LowerLeft => x.start + 5,
        _ => x.end - w - 5,
    };
    let top = match corner {
        UpperLeft | UpperRight => y.start + 5,
        _ => y.end - h - 5,
    };
    (left..left + w, top..top + h)
}

/// The legend every chart draws the same way; only its corner and background opacity differ.
pub(crate) fn draw<'a, DB, CT>(
    chart: &mut plotters::chart::ChartContext<'a, DB, CT>,
    corner: SeriesLabelPosition,
    opacity: f64,
) -> Result<(), PlotError>
where
    DB: plotters::prelude::DrawingBackend + 'a,
    CT: plotters::coord::CoordTranslate,
{
    use plotters::style::{Color, BLACK, WHITE};
    chart
        .configure_series_labels()
        .position(corner)
        .background_style(WHITE.mix(opacity))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()
        .map_err(draw_err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use SeriesLabelPosition::*;

    const AREA: (Range<i32>, Range<i32>) = (0..600, 0..400);

    #[test]
    fn the_legend_avoids_the_corner_the_data_fills() {
        // A line falling from the upper left to the middle, and a bar in the upper right.
        let mut marks = Marks::new(AREA, &["reads", "writes"], UpperLeft);
        marks.segment((0, 0), (300, 200));
        marks.rect((500, 0), (600, 400));
        assert_eq!(marks.corner(), LowerLeft);
    }

    #[test]
    fn with_nothing_in_the_way_the_usual_corner_stays() {
        for usual in [UpperLeft, UpperRight, LowerLeft, LowerRight] {
            let mut marks = Marks::new(AREA, &["a"], usual.clone());
            marks.point((300, 200));
            assert_eq!(marks.corner(), usual);
        }
    }

    #[test]
    fn a_long_label_widens_the_box_it_must_keep_clear() {
        // A point 250 px from the right edge: clear of a short legend, under a long one.
        let mut marks = Marks::new(AREA, &["a"], UpperRight);
        marks.point((350, 20));
        assert_eq!(marks.corner(), UpperRight);
        let long = "x".repeat(40);
        let mut marks = Marks::new(AREA, &[&long], UpperRight);
        marks.point((350, 20));
        assert_eq!(marks.corner(), UpperLeft);
    }

    #[test]
    fn the_box_kept_clear_is_the_box_plotters_draws() {
        use plotters::prelude::*;
        let labels = [
            "hipri=false bs=512 (p50 1,761 us, p99 4,112 us, 66,495 I/Os)",
            "b",
            "c",
        ];
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
            let mut chart = ChartBuilder::on(&root)
                .build_cartesian_2d(0.0..1.0, 0.0..1.0)
                .unwrap();
            for label in labels {
                chart
                    .draw_series(LineSeries::new([(0.0, 0.0)], BLACK))
                    .unwrap()
                    .label(label);
            }
            draw(&mut chart, UpperLeft, 1.0).unwrap();
        }
        let doc = roxmltree::Document::parse(&svg).unwrap();
        let border = doc
            .descendants()
            .find(|n| n.has_tag_name("rect") && n.attribute("stroke") == Some("#000000"))
            .expect("the legend's border");
        let dim = |a| border.attribute(a).unwrap().parse::<i32>().unwrap();
        assert_eq!((dim("width"), dim("height")), size(&labels));
    }

    #[test]
    fn the_legend_goes_below_only_when_every_corner_hides_data() {
        let drawn = |fill: &[(i32, i32)]| {
            let mut calls = Vec::new();
            let svg = inside_or_below(&["a", "b"], |_, below| {
                calls.push(below.is_some());
                let mut marks = Marks::new(AREA, &["a", "b"], UpperLeft);
                for &p in fill {
                    marks.point(p);
                }
                Ok(marks)
            })
            .unwrap();
            let doc = roxmltree::Document::parse(&svg).unwrap();
            let height = doc.root_element().attribute("height").unwrap().to_string();
            (height, calls)
        };
        let corners = [(10, 10), (590, 10), (10, 390), (590, 390)];
        assert_eq!(drawn(&corners[..3]), ("480".into(), vec![false]));
        // Two lines of legend (16 + 10 px), 20 px of margins in the box, 12 below it.
        assert_eq!(drawn(&corners), ("538".into(), vec![false, true]));
    }
}
