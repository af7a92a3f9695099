//! Completion-latency CDFs from fio json+ histograms, one line per variant. Each variant's
//! histogram should already be the exact merge of its repetitions
//! (`LatencyHistogram::merged`); the legend quotes the merged p50 and p99 so the picture
//! and the numbers in the table agree.

use plotters::prelude::*;

use crate::report::format::{log_tick, number};
use crate::stats::LatencyHistogram;

use super::legend::{self, Marks};
use super::{color, draw_err, PlotError, FONT, SIZE};

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
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let mut chart = ChartBuilder::on(&root)
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
        let labels: Vec<String> = series
            .iter()
            .map(|(name, h)| {
                format!(
                    "{name} (p50 {} us, p99 {} us, {} I/Os)",
                    number(us(h.percentile(50.0).unwrap_or(0))),
                    number(us(h.percentile(99.0).unwrap_or(0))),
                    h.total()
                )
            })
            .collect();
        let names: Vec<&str> = labels.iter().map(String::as_str).collect();
        let area = chart.plotting_area().get_pixel_range();
        let mut marks = Marks::new(area, &names, SeriesLabelPosition::LowerRight);
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
        legend::draw(&mut chart, marks.corner(), 0.85)?;
        root.present().map_err(draw_err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::super::svg_check::*;
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
}
