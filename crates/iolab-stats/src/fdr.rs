//! Benjamini–Hochberg false discovery rate control. `compare` tests many cells × metrics at
//! once; at 5% each, one in twenty unchanged cells would look "significant". BH-adjusted
//! p-values keep the expected share of false discoveries among the reported ones at alpha.

/// BH-adjusted p-values in input order (scipy's `false_discovery_control(p, method="bh")`):
/// p_(i) * m / i, made monotone from the largest rank down, capped at 1. NaN entries are
/// passed through as NaN and not counted in m.
pub fn benjamini_hochberg(p_values: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..p_values.len())
        .filter(|&i| !p_values[i].is_nan())
        .collect();
    idx.sort_by(|&a, &b| p_values[a].total_cmp(&p_values[b]));
    let m = idx.len() as f64;
    let mut adjusted = vec![f64::NAN; p_values.len()];
    let mut running_min = 1.0f64;
    for (rank, &i) in idx.iter().enumerate().rev() {
        let q = p_values[i] * m / (rank + 1) as f64;
        running_min = running_min.min(q);
        adjusted[i] = running_min.clamp(0.0, 1.0);
    }
    adjusted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn textbook_example() {
        let q = benjamini_hochberg(&[0.01, 0.04, 0.03, 0.005]);
        let expect = [0.02, 0.04, 0.04, 0.02];
        for (a, b) in q.iter().zip(expect) {
            assert!((a - b).abs() < 1e-12, "{q:?}");
        }
    }

    #[test]
    fn nan_is_skipped_and_empty_is_fine() {
        let q = benjamini_hochberg(&[0.01, f64::NAN]);
        assert_eq!(q[0], 0.01);
        assert!(q[1].is_nan());
        assert!(benjamini_hochberg(&[]).is_empty());
    }
}
