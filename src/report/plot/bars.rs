//! Bars with CI whiskers, one per configuration (case 0's r/s and %sys per placement and
//! rq_affinity): the whisker shows at a glance which bars could be the same.

use plotters::prelude::*;

use crate::report::format::short;

use super::{
    check_finite, color, draw_err, padded_range, whisker_ends, whisker_floor, PlotError, Slots,
    FONT, SIZE, WHISKER,
};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bar {
    pub label: String,
    /// `None` where the configuration has no value (not applicable here, or no run
    /// succeeded): its slot stays, labelled `LABEL: WHY` (`missing`), with no bar.
    pub value: Option<f64>,
    /// Why a configuration has no value, as `show` marks it (`n/a`, `failed`).
    pub missing: &'static str,
    /// 95% CI (low, high) drawn as a whisker; `None` for n < 2.
    pub ci: Option<(f64, f64)>,
    /// Bars with the same group share a colour (e.g. the rq_affinity level).
    pub group: usize,
    /// Marked with `*` after the label when the configuration has outliers.
    pub outliers: bool,
}

pub(crate) fn bars_with_ci(title: &str, y_label: &str, bars: &[Bar]) -> Result<String, PlotError> {
    if bars.iter().all(|b| b.value.is_none()) {
        return Err(PlotError::NoData("no bar has a value".into()));
    }
    check_finite(
        "bars",
        bars.iter()
            .flat_map(|b| [b.value, b.ci.map(|c| c.0), b.ci.map(|c| c.1)])
            .flatten(),
    )?;
    let valued = || bars.iter().filter_map(|b| Some((b.value?, b.ci)));
    let floor = whisker_floor(valued().map(|(v, _)| v));
    let lo = valued()
        .map(|(v, ci)| ci.map_or(v, |c| c.0.min(v)).max(floor))
        .fold(f64::INFINITY, f64::min);
    let hi = valued()
        .map(|(v, ci)| ci.map_or(v, |c| c.1.max(v)))
        .fold(f64::NEG_INFINITY, f64::max);
    let (y0, y1) = padded_range(lo, hi, true);
    let labels: Vec<String> = bars
        .iter()
        .map(|b| match b.value {
            Some(_) => format!("{}{}", b.label, if b.outliers { "*" } else { "" }),
            None => format!("{}: {}", b.label, b.missing),
        })
        .collect();

    let slots = Slots(bars.len());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(super::y_label_area(y0, y1))
            .build_cartesian_2d(slots.range().into_segmented(), y0..y1)
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(slots.count())
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(s) => slots
                    .item(*s)
                    .map(|i| labels[i].clone())
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .y_label_formatter(&|v| short(*v))
            .y_desc(y_label)
            .label_style((FONT, 13))
            .draw()
            .map_err(draw_err)?;
        chart
            .draw_series(bars.iter().enumerate().filter_map(|(i, b)| {
                let s = slots.of(i);
                let mut r = Rectangle::new(
                    [
                        (SegmentValue::Exact(s), 0.0),
                        (SegmentValue::Exact(s + 1), b.value?),
                    ],
                    color(b.group).filled(),
                );
                r.set_margin(0, 0, 8, 8);
                Some(r)
            }))
            .map_err(draw_err)?;
        let whisker = WHISKER.stroke_width(2);
        for (i, b) in bars.iter().enumerate() {
            let Some((lo, hi)) = b.ci else { continue };
            let ((lo, hi), caps) = whisker_ends(lo, hi, floor);
            let x = SegmentValue::CenterOf(slots.of(i));
            chart
                .draw_series([PathElement::new(
                    vec![(x.clone(), lo), (x.clone(), hi)],
                    whisker,
                )])
                .map_err(draw_err)?;
            chart
                .draw_series(caps.into_iter().map(|y| {
                    EmptyElement::at((x.clone(), y))
                        + PathElement::new(vec![(-7, 0), (7, 0)], whisker)
                }))
                .map_err(draw_err)?;
        }
        root.present().map_err(draw_err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::super::svg_check::*;
    use super::*;

    fn bar(label: &str, value: f64, group: usize) -> Bar {
        Bar {
            label: label.into(),
            value: Some(value),
            missing: "n/a",
            ci: Some((value * 0.97, value * 1.03)),
            group,
            outliers: label == "far/rq=1",
        }
    }

    /// A value near f64's end (from someone's database) is refused: its padded range was
    /// infinite and plotters never finished placing the ticks.
    #[test]
    fn a_value_too_large_to_draw_is_refused_not_drawn_forever() {
        let e = bars_with_ci("t", "y", &[bar("a", 1.7e308, 0)]).unwrap_err();
        assert!(e.to_string().contains("too large to draw"), "{e}");
        let e = bars_with_ci("t", "y", &[bar("a", 1.0, 0), bar("b", -1.7e308, 0)]).unwrap_err();
        assert!(e.to_string().contains("too large to draw"), "{e}");
        bars_with_ci("t", "y", &[bar("a", 1e99, 0)]).unwrap();
    }

    #[test]
    fn one_rect_per_bar_and_whiskers_and_labels() {
        let bars = vec![
            bar("on/rq=0", 69112.0, 0),
            bar("near/rq=0", 70210.0, 0),
            bar("far/rq=0", 66050.0, 0),
            bar("on/rq=1", 69000.0, 1),
            bar("near/rq=1", 71000.0, 1),
            Bar {
                ci: None,
                ..bar("far/rq=1", 64000.0, 1)
            },
        ];
        let svg = bars_with_ci("r/s by placement and rq_affinity", "r/s [IO/s]", &bars).unwrap();
        let doc = parse(&svg);
        assert_eq!(rects_filled(&doc, color(0)), 3);
        assert_eq!(rects_filled(&doc, color(1)), 3);
        let texts = texts(&doc);
        for l in ["on/rq=0", "near/rq=1", "far/rq=1*", "r/s [IO/s]"] {
            assert!(texts.iter().any(|t| t == l), "label {l} missing: {texts:?}");
        }
        // 5 bars with a CI: a vertical line and two caps each.
        assert_eq!(stroked(&doc, "polyline", WHISKER), 15);
    }

    #[test]
    fn a_single_bar_with_markup_characters_still_gives_valid_xml() {
        let svg = bars_with_ci("a <b> & c", "y", &[bar("rw=r&w", 5.0, 2)]).unwrap();
        let doc = parse(&svg);
        assert_eq!(rects_filled(&doc, color(2)), 1);
        assert!(texts(&doc).iter().any(|t| t == "rw=r&w"));
    }

    /// One bar stands where the middle one of three does, not in the left half of the chart.
    #[test]
    fn a_single_bar_is_centred() {
        let three = [bar("a", 5.0, 0), bar("b", 5.0, 1), bar("c", 5.0, 0)];
        let svg = bars_with_ci("t", "y", &three).unwrap();
        let middle = rect_boxes(&parse(&svg), color(1));
        let svg = bars_with_ci("t", "y", &three[1..2]).unwrap();
        let doc = parse(&svg);
        assert_eq!(rect_boxes(&doc, color(1)), middle);
        assert_eq!(texts(&doc).iter().filter(|t| *t == "b").count(), 1);
    }

    #[test]
    fn a_whisker_below_zero_is_cut_at_the_axis() {
        let noisy = Bar {
            ci: Some((-11_000.0, 29_000.0)),
            ..bar("far/rq=0", 9_000.0, 0)
        };
        let svg = bars_with_ci("t", "r/s", &[bar("on/rq=0", 12_000.0, 0), noisy]).unwrap();
        let doc = parse(&svg);
        let labels = texts(&doc);
        assert!(!labels.iter().any(|t| t.starts_with('-')), "{labels:?}");
        // The cut whisker has its top cap only.
        assert_eq!(stroked(&doc, "polyline", WHISKER), 3 + 2);
    }

    #[test]
    fn a_configuration_without_a_value_keeps_its_slot_and_says_so() {
        let none = Bar {
            value: None,
            ci: None,
            ..bar("hipri=true", 0.0, 1)
        };
        let svg = bars_with_ci("t", "y", &[bar("hipri=false", 25_000.0, 0), none]).unwrap();
        let doc = parse(&svg);
        assert_eq!(rects_filled(&doc, color(0)), 1);
        assert_eq!(rects_filled(&doc, color(1)), 0);
        let labels = texts(&doc);
        assert!(labels.iter().any(|t| t == "hipri=true: n/a"), "{labels:?}");
        assert!(matches!(
            bars_with_ci(
                "t",
                "y",
                &[Bar {
                    value: None,
                    ..bar("x", 1.0, 0)
                }]
            ),
            Err(PlotError::NoData(_))
        ));
    }

    #[test]
    fn empty_and_nan_are_errors() {
        assert!(matches!(
            bars_with_ci("t", "y", &[]),
            Err(PlotError::NoData(_))
        ));
        let nan = bar("x", f64::NAN, 0);
        assert!(matches!(
            bars_with_ci("t", "y", &[nan]),
            Err(PlotError::BadInput { .. })
        ));
    }
}
