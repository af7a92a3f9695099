//! Per-CPU interrupt rate over time as a heatmap (case 2): cumulative counts in
//! /proc/interrupts hide that heavy IRQs pile onto one CPU; a row per CPU and a column per
//! sampling interval shows the pile-up and when it moved.

use plotters::prelude::*;

use crate::report::format::{number, short};

use super::{draw_err, PlotError, Slots, FONT, SIZE};

/// Rates per CPU and interval. `times_s` holds the interval boundaries (seconds since the
/// start), so it is one longer than each row of `rates`. `None` is "no value" (a counter
/// that went backwards, a CPU that was offline) and is drawn grey.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RateGrid {
    pub cpus: Vec<u32>,
    pub times_s: Vec<f64>,
    pub rates: Vec<Vec<Option<f64>>>,
    /// The run's measured interval on the same axis, drawn as two lines: the sampler starts
    /// before the workload does (under a slow guest, seconds before), and the run's figures
    /// come from this interval only.
    pub window_s: Option<(f64, f64)>,
}

/// Colour for a rate from 0 (white) to `max` (dark red), linear.
pub(super) fn heat(value: f64, max: f64) -> RGBColor {
    let f = if max > 0.0 {
        (value / max).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let lerp = |a: f64, b: f64| (a + (b - a) * f).round() as u8;
    RGBColor(lerp(255.0, 153.0), lerp(255.0, 0.0), lerp(255.0, 13.0))
}

/// "No value" cells.
pub(super) const MISSING: RGBColor = RGBColor(0xBB, 0xBB, 0xBB);

pub(crate) fn irq_heatmap(title: &str, unit: &str, grid: &RateGrid) -> Result<String, PlotError> {
    validate(grid)?;
    let max = grid
        .rates
        .iter()
        .flatten()
        .flatten()
        .fold(0.0f64, |m, &v| m.max(v));
    let (t0, t1) = (grid.times_s[0], *grid.times_s.last().expect("validated"));
    let ncpu = grid.cpus.len();
    // Marked only where it is not the whole span (a program engine's runs are measured over
    // all of it).
    let window = grid
        .window_s
        .map(|(a, b)| (a.max(t0), b.min(t1)))
        .filter(|(a, b)| a < b && (*a > t0 || *b < t1));
    let x_desc = if window.is_some() {
        "time [s]; between the black lines: the measured interval"
    } else {
        "time [s]"
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let (main, legend) = root.split_horizontally(SIZE.0 - 110);
        let cpu_labels: Vec<String> = grid.cpus.iter().map(|c| format!("cpu{c}")).collect();
        let slots = Slots(ncpu);
        let mut chart = ChartBuilder::on(&main)
            .caption(title, (FONT, 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(t0..t1, slots.range().into_segmented())
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(x_desc)
            .x_label_formatter(&|v| short(*v))
            .y_labels(slots.count().min(64))
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(s) => slots
                    .item(*s)
                    .map(|i| cpu_labels[i].clone())
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .label_style((FONT, 12))
            .draw()
            .map_err(draw_err)?;
        for (row, rates) in grid.rates.iter().enumerate() {
            // A lone CPU's row fills the height (its label stays in the middle slot).
            let (bottom, top) = if ncpu == 1 {
                (SegmentValue::Exact(0), SegmentValue::Last)
            } else {
                (SegmentValue::Exact(row), SegmentValue::Exact(row + 1))
            };
            chart
                .draw_series(rates.iter().enumerate().map(|(j, r)| {
                    let fill = r.map_or(MISSING, |v| heat(v, max));
                    Rectangle::new(
                        [
                            (grid.times_s[j], bottom.clone()),
                            (grid.times_s[j + 1], top.clone()),
                        ],
                        fill.filled(),
                    )
                }))
                .map_err(draw_err)?;
        }
        for t in window.iter().flat_map(|(a, b)| [*a, *b]) {
            chart
                .draw_series(LineSeries::new(
                    [(t, SegmentValue::Exact(0)), (t, SegmentValue::Last)],
                    BLACK.stroke_width(2),
                ))
                .map_err(draw_err)?;
        }
        draw_scale(&legend, max, unit)?;
        root.present().map_err(draw_err)?;
    }
    Ok(svg)
}

fn validate(grid: &RateGrid) -> Result<(), PlotError> {
    let bad = |reason: String| PlotError::BadInput {
        what: "the interrupt-rate grid".into(),
        reason,
    };
    if grid.cpus.is_empty() || grid.times_s.len() < 2 {
        return Err(PlotError::NoData(
            "the interrupt-rate grid needs at least one CPU and one interval".into(),
        ));
    }
    if grid.rates.len() != grid.cpus.len() {
        return Err(bad(format!(
            "{} CPUs but {} rows of rates",
            grid.cpus.len(),
            grid.rates.len()
        )));
    }
    let increasing = grid.times_s.iter().all(|t| super::drawable(*t))
        && grid.times_s.windows(2).all(|w| w[0] < w[1]);
    if !increasing {
        return Err(bad("interval boundaries must be finite and increase".into()));
    }
    let m = grid.times_s.len() - 1;
    for (cpu, row) in grid.cpus.iter().zip(&grid.rates) {
        if row.len() != m {
            return Err(bad(format!(
                "cpu{cpu} has {} rates for {m} intervals",
                row.len()
            )));
        }
        if let Some(v) = row
            .iter()
            .flatten()
            .find(|v| !super::drawable(**v) || **v < 0.0)
        {
            return Err(bad(format!("cpu{cpu} has rate {v}; use None for no value")));
        }
    }
    Ok(())
}

/// A vertical colour bar from 0 to `max` with its two end labels.
fn draw_scale(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    max: f64,
    unit: &str,
) -> Result<(), PlotError> {
    const STEPS: i32 = 20;
    let (top, bottom, x0, x1) = (60, 400, 20, 45);
    let step_h = (bottom - top) / STEPS;
    for s in 0..STEPS {
        let f = (s as f64 + 0.5) / STEPS as f64;
        let y = bottom - (s + 1) * step_h;
        area.draw(&Rectangle::new(
            [(x0, y), (x1, y + step_h)],
            heat(f * max, max).filled(),
        ))
        .map_err(draw_err)?;
    }
    let style = (FONT, 12).into_font();
    area.draw(&Text::new(number(max), (x1 + 4, top - 6), style.clone()))
        .map_err(draw_err)?;
    area.draw(&Text::new(
        "0".to_string(),
        (x1 + 4, bottom - 6),
        style.clone(),
    ))
    .map_err(draw_err)?;
    area.draw(&Text::new(unit.to_string(), (x0, top - 30), style))
        .map_err(draw_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::svg_check::*;
    use super::*;

    #[test]
    fn one_cell_per_cpu_and_interval_and_a_scale() {
        let grid = RateGrid {
            cpus: vec![0, 1, 2, 3],
            times_s: vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
            rates: vec![
                vec![Some(90_000.0); 5],
                vec![Some(100.0), Some(120.0), None, Some(90.0), Some(80.0)],
                vec![Some(0.0); 5],
                vec![Some(50.0); 5],
            ],
            window_s: None,
        };
        let svg = irq_heatmap("interrupts per CPU", "IRQ/s", &grid).unwrap();
        let doc = parse(&svg);
        assert_eq!(rects_filled(&doc, heat(90_000.0, 90_000.0)), 5);
        assert_eq!(rects_filled(&doc, MISSING), 1);
        // 20 cells of 4 CPUs x 5 intervals, 20 steps of the colour scale, 1 background.
        let rects = doc.descendants().filter(|n| n.has_tag_name("rect")).count();
        assert_eq!(rects, 20 + 20 + 1);
        let texts = texts(&doc);
        for l in ["cpu0", "cpu3", "90,000", "IRQ/s", "time [s]"] {
            assert!(texts.iter().any(|t| t == l), "{l} missing: {texts:?}");
        }
        let marks = |svg: &str| svg.matches(r#"stroke-width="2" points"#).count();
        assert_eq!(marks(&svg), 0, "no window, no lines");

        // A measured interval inside the span: two lines from the bottom row to the top one,
        // and the axis says what they are; one covering the whole span draws nothing.
        let svg = irq_heatmap(
            "t",
            "IRQ/s",
            &RateGrid {
                window_s: Some((1.5, 3.5)),
                ..grid.clone()
            },
        )
        .unwrap();
        assert_eq!(marks(&svg), 2, "{svg}");
        assert!(svg.contains("between the black lines: the measured interval"));
        let whole = RateGrid {
            window_s: Some((0.0, 5.0)),
            ..grid
        };
        let svg = irq_heatmap("t", "IRQ/s", &whole).unwrap();
        assert_eq!(marks(&svg), 0, "the whole span is not marked");
    }

    /// A lone CPU's row fills the chart's height, as two CPUs' rows do together.
    #[test]
    fn a_single_cpus_row_fills_the_height() {
        let grid = |cpus: Vec<u32>| RateGrid {
            rates: vec![vec![Some(10.0)]; cpus.len()],
            cpus,
            times_s: vec![0.0, 1.0],
            window_s: None,
        };
        let two = irq_heatmap("t", "IRQ/s", &grid(vec![0, 1])).unwrap();
        let rows = rect_boxes(&parse(&two), heat(10.0, 10.0));
        let top = rows.iter().map(|r| r.1).fold(f64::INFINITY, f64::min);
        let bottom = rows.iter().map(|r| r.1 + r.3).fold(0.0, f64::max);
        let one = irq_heatmap("t", "IRQ/s", &grid(vec![5])).unwrap();
        let doc = parse(&one);
        let row = rect_boxes(&doc, heat(10.0, 10.0));
        assert_eq!(row.len(), 1);
        assert!((row[0].1 - top).abs() <= 1.0, "{row:?} vs {rows:?}");
        assert!(
            (row[0].1 + row[0].3 - bottom).abs() <= 1.0,
            "{row:?} vs {rows:?}"
        );
        assert!(texts(&doc).iter().any(|t| t == "cpu5"));
    }

    #[test]
    fn shape_errors_name_the_cpu() {
        let grid = RateGrid {
            cpus: vec![0, 7],
            times_s: vec![0.0, 1.0, 2.0],
            rates: vec![vec![Some(1.0); 2], vec![Some(1.0)]],
            window_s: None,
        };
        let err = irq_heatmap("t", "IRQ/s", &grid).unwrap_err();
        assert!(err.to_string().contains("cpu7"), "{err}");
        let empty = RateGrid {
            cpus: vec![],
            times_s: vec![],
            rates: vec![],
            window_s: None,
        };
        assert!(matches!(
            irq_heatmap("t", "u", &empty),
            Err(PlotError::NoData(_))
        ));
    }
}
