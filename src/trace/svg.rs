//! A minimal SVG chart writer for the trace charts: axes with ticks and labels, polylines,
//! points and bars. Output is deterministic text, so it can be tested. The experiment charts
//! (`report::plot`) draw through plotters' SVG backend instead; two chart engines is a known
//! duplication, to be folded into one.

use std::fmt::Write;

/// A chart being drawn; coordinates are data values mapped into the plot area.
pub struct Chart {
    out: String,
    width: f64,
    height: f64,
    left: f64,
    top: f64,
    plot_w: f64,
    plot_h: f64,
    x: (f64, f64),
    y: (f64, f64),
    log_x: bool,
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A short number for a tick label.
pub fn short(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e9 {
        format!("{:.3}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.3}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.001 {
        format!("{v:.4}")
    } else {
        format!("{v:.1e}")
    }
}

/// What the axes show: names, data ranges, and whether x is logarithmic.
pub struct Axes<'a> {
    pub x_name: &'a str,
    pub y_name: &'a str,
    pub x: (f64, f64),
    pub y: (f64, f64),
    pub log_x: bool,
}

impl Chart {
    /// Starts a chart of `width` x `height` pixels with a title and axes.
    pub fn new(width: f64, height: f64, title: &str, axes: Axes) -> Chart {
        let Axes {
            x_name,
            y_name,
            x,
            y,
            log_x,
        } = axes;
        let fix = |r: (f64, f64)| {
            if r.1 > r.0 && r.0.is_finite() && r.1.is_finite() {
                r
            } else {
                (r.0.min(0.0), r.0.max(0.0) + 1.0)
            }
        };
        let mut c = Chart {
            out: String::new(),
            width,
            height,
            left: 70.0,
            top: 30.0,
            plot_w: width - 90.0,
            plot_h: height - 75.0,
            x: fix(x),
            y: fix(y),
            log_x,
        };
        let _ = writeln!(
            c.out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">"#
        );
        let _ = writeln!(c.out, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            c.out,
            r#"<text x="{}" y="18" text-anchor="middle" font-size="14">{}</text>"#,
            width / 2.0,
            esc(title)
        );
        let _ = writeln!(
            c.out,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            c.left + c.plot_w / 2.0,
            height - 8.0,
            esc(x_name)
        );
        let _ = writeln!(
            c.out,
            r#"<text x="14" y="{}" text-anchor="middle" transform="rotate(-90 14 {})">{}</text>"#,
            c.top + c.plot_h / 2.0,
            c.top + c.plot_h / 2.0,
            esc(y_name)
        );
        c.axes();
        c
    }

    fn px(&self, v: f64) -> f64 {
        let (lo, hi) = self.x;
        let f = if self.log_x {
            (v.max(lo).ln() - lo.ln()) / (hi.ln() - lo.ln())
        } else {
            (v - lo) / (hi - lo)
        };
        self.left + f.clamp(0.0, 1.0) * self.plot_w
    }

    fn py(&self, v: f64) -> f64 {
        let (lo, hi) = self.y;
        self.top + self.plot_h - ((v - lo) / (hi - lo)).clamp(0.0, 1.0) * self.plot_h
    }

    fn axes(&mut self) {
        let (l, t, w, h) = (self.left, self.top, self.plot_w, self.plot_h);
        let _ = writeln!(
            self.out,
            r##"<rect x="{l}" y="{t}" width="{w}" height="{h}" fill="none" stroke="#444"/>"##
        );
        for i in 0..=5 {
            let f = f64::from(i) / 5.0;
            let xv = if self.log_x {
                (self.x.0.ln() + f * (self.x.1.ln() - self.x.0.ln())).exp()
            } else {
                self.x.0 + f * (self.x.1 - self.x.0)
            };
            let yv = self.y.0 + f * (self.y.1 - self.y.0);
            let (x, y) = (self.px(xv), self.py(yv));
            let _ = writeln!(
                self.out,
                r##"<line x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}" stroke="#444"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
                t + h,
                t + h + 4.0,
                t + h + 16.0,
                short(xv)
            );
            let _ = writeln!(
                self.out,
                r##"<line x1="{}" y1="{y:.1}" x2="{l}" y2="{y:.1}" stroke="#444"/><line x1="{l}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
                l - 4.0,
                l + w,
                l - 6.0,
                y + 4.0,
                short(yv)
            );
        }
    }

    /// A polyline through the points, in a colour, with a legend entry at slot `legend`.
    /// A point whose y is NaN breaks the line (no data there: nothing is interpolated).
    pub fn line(&mut self, points: &[(f64, f64)], colour: &str, label: &str, legend: usize) {
        let mut d = String::new();
        let mut pen_down = false;
        for &(x, y) in points {
            if y.is_nan() {
                pen_down = false;
                continue;
            }
            let _ = write!(
                d,
                "{}{:.1},{:.1} ",
                if pen_down { "L" } else { "M" },
                self.px(x),
                self.py(y)
            );
            pen_down = true;
        }
        if d.is_empty() {
            return;
        }
        let _ = writeln!(
            self.out,
            r#"<path d="{}" fill="none" stroke="{colour}" stroke-width="1.2"/>"#,
            d.trim_end()
        );
        self.legend(colour, label, legend);
    }

    /// Small squares (one per point).
    pub fn points(&mut self, points: &[(f64, f64)], colour: &str, label: &str, legend: usize) {
        for &(x, y) in points {
            let _ = writeln!(
                self.out,
                r#"<rect x="{:.1}" y="{:.1}" width="2" height="2" fill="{colour}"/>"#,
                self.px(x) - 1.0,
                self.py(y) - 1.0
            );
        }
        self.legend(colour, label, legend);
    }

    /// Vertical bars from y = 0, each spanning [x0, x1).
    pub fn bars(&mut self, bars: &[(f64, f64, f64)], colour: &str, label: &str, legend: usize) {
        for &(x0, x1, y) in bars {
            let (a, b) = (self.px(x0), self.px(x1));
            let top = self.py(y);
            let base = self.py(self.y.0);
            let _ = writeln!(
                self.out,
                r##"<rect x="{:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="{colour}" stroke="#fff" stroke-width="0.5"/>"##,
                a,
                (b - a).max(1.0),
                (base - top).max(0.0)
            );
        }
        self.legend(colour, label, legend);
    }

    fn legend(&mut self, colour: &str, label: &str, slot: usize) {
        let x = self.left + 10.0 + slot as f64 * 150.0;
        let y = self.top + 14.0;
        let _ = writeln!(
            self.out,
            r#"<rect x="{x}" y="{}" width="10" height="10" fill="{colour}"/><text x="{}" y="{}">{}</text>"#,
            y - 9.0,
            x + 14.0,
            y,
            esc(label)
        );
    }

    pub fn finish(mut self) -> String {
        self.out.push_str("</svg>\n");
        let _ = (self.width, self.height);
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_a_closed_svg_with_labels() {
        let axes = Axes {
            x_name: "x",
            y_name: "y",
            x: (0.0, 10.0),
            y: (0.0, 5.0),
            log_x: false,
        };
        let mut c = Chart::new(400.0, 300.0, "t <1>", axes);
        c.line(&[(0.0, 0.0), (10.0, 5.0)], "red", "a", 0);
        let s = c.finish();
        assert!(s.starts_with("<svg") && s.ends_with("</svg>\n"));
        assert!(s.contains("t &lt;1&gt;"));
        assert!(s.contains("M70.0,255.0 L380.0,30.0"));
        assert_eq!(short(1_500_000.0), "1.500M");
    }
}
