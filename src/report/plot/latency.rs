//! Completion-latency CDFs from fio json+ histograms, one line per variant. Each variant's
//! histogram should already be the exact merge of its repetitions
//! (`LatencyHistogram::merged`); the legend quotes the merged p50 and p99 so the picture
//! and the numbers in the table agree.

use plotters::prelude::*;

use crate::report::format::{log_tick, number, short};
use crate::stats::LatencyHistogram;

use super::legend::{self, Marks};
use super::{color, draw_err, PlotError, FONT};

/// `series`: (variant name, merged histogram). The x axis is log-scaled microseconds.
pub(crate) fn latency_cdf(
    title: &str,
    series: &[(String, LatencyHistogram)],
) -> Result<String, PlotError> {
    if series.is_empty() {
        return Err(PlotError::NoData("no latency histograms given".into()));
    }
    if let Some((name, _)) = series.iter().find(|(_, h)| h.is_empty()) {
        return Err(PlotError::NoData(format!(
            "the histogram of {name:?} has no I/Os (was fio run with --output-format=json+?)"
        )));
    }
    let us = |ns: u64| (ns.max(1) as f64) / 1000.0;
    let lo = series
        .iter()
        .filter_map(|(_, h)| h.bins().next().map(|b| us(b.0)))
        .fold(f64::INFINITY, f64::min);
    let hi = series
        .iter()
        .filter_map(|(_, h)| h.bins().last().map(|b| us(b.0)))
        .fold(f64::NEG_INFINITY, f64::max);
    let labels: Vec<String> = series
        .iter()
        .map(|(name, h)| {
            format!(
                "{name} (p50 {} us, p99 {} us, {} I/Os)",
                number(us(h.percentile(50.0).unwrap_or(0))),
                number(us(h.percentile(99.0).unwrap_or(0))),
                short(h.total() as f64)
            )
        })
        .collect();
    let names: Vec<&str> = labels.iter().map(String::as_str).collect();
    legend::inside_or_below(&names, |top, below| {
        let mut chart = ChartBuilder::on(top)
            .caption(title, (FONT, 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d((lo / 1.5..hi * 1.5).log_scale(), 0.0..1.0)
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .x_desc("completion latency [us]")
            .y_desc("fraction of I/Os")
            .x_label_formatter(&|v| log_tick(*v))
            .y_label_formatter(&|v| format!("{v:.2}"))
            .label_style((FONT, 13))
            .draw()
            .map_err(draw_err)?;
        let area = chart.plotting_area().get_pixel_range();
        // Upper left: a CDF rises from the lower left, so that corner is the emptiest.
        let mut marks = Marks::new(area.clone(), &names, SeriesLabelPosition::UpperLeft);
        for (i, ((_, h), label)) in series.iter().zip(&labels).enumerate() {
            let c = color(i);
            // A step line: the CDF is flat between bucket values.
            let mut pts = Vec::new();
            let mut prev = 0.0;
            for (ns, frac) in h.cdf() {
                pts.push((us(ns), prev));
                pts.push((us(ns), frac));
                prev = frac;
            }
            for pair in pts.windows(2) {
                marks.segment(chart.backend_coord(&pair[0]), chart.backend_coord(&pair[1]));
            }
            chart
                .draw_series(LineSeries::new(pts, c.stroke_width(2)))
                .map_err(draw_err)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2))
                });
        }
        legend::draw_lines(&mut chart, &marks, below, &names)?;
        Ok(marks)
    })
}

#[cfg(test)]
mod tests {
    use super::super::svg_check::*;
    use super::super::SIZE;
    use super::*;

    #[test]
    fn one_cdf_per_variant_from_merged_runs() {
        let run = |shift: u64| {
            LatencyHistogram::from_pairs((1..40u64).map(|i| (i * 1000 + shift, 40 - i)))
        };
        let stock = LatencyHistogram::merged([&run(0), &run(0), &run(100)]);
        let patched = LatencyHistogram::merged([&run(500), &run(700)]);
        let series = vec![
            ("stock".to_string(), stock),
            ("patched".to_string(), patched),
        ];
        let svg = latency_cdf("randread 4k clat", &series).unwrap();
        let doc = parse(&svg);
        assert_eq!(stroked(&doc, "polyline", color(0)), 2); // line + legend sample
        assert_eq!(stroked(&doc, "polyline", color(1)), 2);
        let texts = texts(&doc);
        assert!(
            texts
                .iter()
                .any(|t| t.starts_with("stock (p50 ") && t.ends_with("I/Os)")),
            "{texts:?}"
        );
        assert!(texts.iter().any(|t| t == "completion latency [us]"));
    }

    #[test]
    fn empty_histogram_is_named() {
        let err = latency_cdf("t", &[("a".into(), LatencyHistogram::new())]).unwrap_err();
        assert!(err.to_string().contains("\"a\""), "{err}");
    }

    /// The SVG's height and the y of the text that starts with `label`.
    fn height_and_label_y(svg: &str, label: &str) -> (f64, f64) {
        let doc = parse(svg);
        let num = |n: roxmltree::Node<'_, '_>, a| n.attribute(a).unwrap().parse::<f64>().unwrap();
        let text = doc
            .descendants()
            .find(|n| {
                n.has_tag_name("text") && n.text().is_some_and(|t| t.trim().starts_with(label))
            })
            .unwrap_or_else(|| panic!("no {label:?} in {svg}"));
        (num(doc.root_element(), "height"), num(text, "y"))
    }

    #[test]
    fn a_legend_that_would_hide_curves_in_every_corner_goes_below_the_plot() {
        // Eight CDFs from 1 us to 10 ms, each rising over two decades: curves everywhere.
        let series: Vec<(String, LatencyHistogram)> = (0..8u32)
            .map(|k| {
                let start = 1_000u64 * 2u64.pow(k);
                let bins = (0..50u64).map(|i| (start + i * start * 2, 10));
                (format!("variant {k}"), LatencyHistogram::from_pairs(bins))
            })
            .collect();
        let svg = latency_cdf("crowded", &series).unwrap();
        let (height, y) = height_and_label_y(&svg, "variant 7 (p50");
        assert!(height > f64::from(SIZE.1), "height {height}");
        assert!(y > f64::from(SIZE.1), "label at y = {y}, inside the chart");

        // One CDF leaves a corner free: the legend stays inside and the chart its size.
        let svg = latency_cdf("one", &series[..1]).unwrap();
        let (height, y) = height_and_label_y(&svg, "variant 0 (p50");
        assert_eq!(height, f64::from(SIZE.1));
        assert!(y < f64::from(SIZE.1), "label at y = {y}");
    }
}
