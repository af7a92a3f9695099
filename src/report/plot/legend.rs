//! Where a chart's legend goes. Drawn at a fixed corner, the legend hid the data whenever
//! the data lived there: a throughput line that starts high under an upper-left legend, a
//! cloud of sectors under an upper-right one. Each chart now notes, in pixels, what it drew
//! ([`Marks`]), and the legend takes the corner of the plot area where it covers the fewest
//! marks; ties keep the chart's usual corner.

use std::ops::Range;

use plotters::chart::SeriesLabelPosition;

use super::{draw_err, PlotError, FONT};

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

/// The legend's box at `corner` of the plot area `area`, as plotters lays it out (5 px
/// from the edges; 30 px of sample and 10 px margins around the text). The text's size is
/// estimated from the label font (13 px): about 7 px per character, 16 px per line.
fn legend_box(
    area: &(Range<i32>, Range<i32>),
    labels: &[&str],
    corner: &SeriesLabelPosition,
) -> (Range<i32>, Range<i32>) {
    use SeriesLabelPosition::*;
    let chars = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0) as i32;
    let (w, h) = (chars * 7 + 30 + 20, labels.len() as i32 * 16 + 20);
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
}
