//! Per-CPU time breakdown as stacked bars (usr, sys, irq, softirq, iowait, idle...): shows
//! which CPU pays for the I/O and in which currency, e.g. the softirq time that follows an
//! IRQ's affinity in case 0 and case 2. The bars fill the plot area to 100%, so the legend
//! stands beside it: in any corner it would hide a CPU's bar.

use plotters::prelude::*;

use super::{check_finite, color, draw_err, PlotError, Slots, FONT, SIZE};

/// Room beside the plot area for the legend, in pixels.
const LEGEND_WIDTH: u32 = 90;

/// `shares[cpu][category]` in percent of that CPU's time (each row sums to about 100).
pub(crate) fn cpu_breakdown(
    title: &str,
    cpus: &[u32],
    categories: &[&str],
    shares: &[Vec<f64>],
) -> Result<String, PlotError> {
    if cpus.is_empty() || categories.is_empty() {
        return Err(PlotError::NoData(
            "no CPUs or no time categories given".into(),
        ));
    }
    if shares.len() != cpus.len() {
        return Err(PlotError::BadInput {
            what: "the CPU time breakdown".into(),
            reason: format!("{} CPUs but {} rows of shares", cpus.len(), shares.len()),
        });
    }
    for (cpu, row) in cpus.iter().zip(shares) {
        if row.len() != categories.len() {
            return Err(PlotError::BadInput {
                what: format!("cpu{cpu}"),
                reason: format!("{} shares for {} categories", row.len(), categories.len()),
            });
        }
        check_finite(&format!("cpu{cpu}"), row.iter().copied())?;
        if let Some(v) = row.iter().find(|v| **v < 0.0) {
            return Err(PlotError::BadInput {
                what: format!("cpu{cpu}"),
                reason: format!("negative share {v}"),
            });
        }
    }
    let top = shares
        .iter()
        .map(|r| r.iter().sum::<f64>())
        .fold(100.0f64, f64::max);
    let labels: Vec<String> = cpus.iter().map(|c| format!("cpu{c}")).collect();
    let slots = Slots(cpus.len());
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let below_title = root.titled(title, (FONT, 20)).map_err(draw_err)?;
        let (main, side) = below_title.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let mut chart = ChartBuilder::on(&main)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(slots.range().into_segmented(), 0.0..top * 1.02)
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(slots.count().min(64))
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(s) => slots
                    .item(*s)
                    .map(|i| labels[i].clone())
                    .unwrap_or_default(),
                _ => String::new(),
            })
            .y_desc("CPU time [%]")
            .label_style((FONT, 13))
            .draw()
            .map_err(draw_err)?;
        for (k, name) in categories.iter().enumerate() {
            let c = color(k);
            chart
                .draw_series(shares.iter().enumerate().map(|(i, row)| {
                    let below: f64 = row[..k].iter().sum();
                    let s = slots.of(i);
                    let mut r = Rectangle::new(
                        [
                            (SegmentValue::Exact(s), below),
                            (SegmentValue::Exact(s + 1), below + row[k]),
                        ],
                        c.filled(),
                    );
                    r.set_margin(0, 0, 6, 6);
                    r
                }))
                .map_err(draw_err)?;
            // Top down in the order the bars stack bottom up, so the list reads like a bar.
            let y = 20 + 20 * (categories.len() - 1 - k) as i32;
            side.draw(&Rectangle::new([(4, y - 5), (14, y + 5)], c.filled()))
                .map_err(draw_err)?;
            side.draw(&Text::new(name.to_string(), (20, y - 7), (FONT, 13)))
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

    #[test]
    fn one_segment_per_cpu_and_category_plus_legend() {
        let cats = ["usr", "sys", "irq", "softirq", "iowait", "idle"];
        let shares = vec![
            vec![10.0, 35.0, 5.0, 30.0, 0.0, 20.0],
            vec![12.0, 8.0, 0.0, 1.0, 2.0, 77.0],
        ];
        let svg = cpu_breakdown("CPU time during randread", &[0, 1], &cats, &shares).unwrap();
        let doc = parse(&svg);
        for (k, cat) in cats.iter().enumerate() {
            // two CPUs + one legend swatch each
            assert_eq!(rects_filled(&doc, color(k)), 3, "category {cat}");
        }
        // The swatches (10 px squares) stand right of every bar: the legend hides none.
        let rects: Vec<(f64, f64)> = doc
            .descendants()
            .filter(|n| n.has_tag_name("rect") && n.attribute("fill") != Some("#FFFFFF"))
            .filter_map(|n| {
                let f = |a: &str| n.attribute(a)?.parse::<f64>().ok();
                Some((f("x")?, f("width")?))
            })
            .collect();
        let (swatches, bars): (Vec<&(f64, f64)>, Vec<_>) = rects.iter().partition(|r| r.1 == 10.0);
        assert_eq!(swatches.len(), cats.len(), "{rects:?}");
        let bars_end = bars.iter().map(|r| r.0 + r.1).fold(0.0, f64::max);
        assert!(swatches.iter().all(|r| r.0 > bars_end), "{rects:?}");
        let texts = texts(&doc);
        for l in ["cpu0", "cpu1", "softirq", "CPU time [%]"] {
            assert!(texts.iter().any(|t| t == l), "{l} missing: {texts:?}");
        }
    }

    /// One CPU's bar stands where the middle one of three does.
    #[test]
    fn a_single_cpu_is_centred() {
        let row = vec![40.0, 60.0];
        let three = cpu_breakdown("t", &[0, 1, 2], &["usr", "idle"], &vec![row.clone(); 3]);
        let middle = rect_boxes(&parse(&three.unwrap()), color(0))[1];
        let one = cpu_breakdown("t", &[1], &["usr", "idle"], &[row]).unwrap();
        let doc = parse(&one);
        // The bar and the legend's swatch.
        assert_eq!(rect_boxes(&doc, color(0))[0], middle);
        assert!(texts(&doc).iter().any(|t| t == "cpu1"));
    }

    #[test]
    fn mismatched_rows_name_the_cpu() {
        let err = cpu_breakdown("t", &[0, 3], &["usr"], &[vec![1.0], vec![]]).unwrap_err();
        assert!(err.to_string().contains("cpu3"), "{err}");
        assert!(cpu_breakdown("t", &[], &["usr"], &[]).is_err());
    }
}
