//! fio as one engine among others. What every engine answers (its nominal time, primary
//! metric and metrics) is answered here from fio's options and JSON; what fio has more than
//! the program engines — a job file with a section per target device, status reports that
//! place its measured window, json+ histograms to cross-check — is said by the trait's
//! `runs_job_file`, `reports_measured_window` and `checks_its_output`, and done by `runner`,
//! `fio_window` and the run loop's checks.

use super::engine::{Engine, Figures, Invocation};
use crate::sys::parse::duration;

/// The fio engine. Its options are the experiment's `[workload]` with the cell's fio levels.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Fio;

impl Engine for Fio {
    fn name(&self) -> &'static str {
        "fio"
    }

    /// fio's base options are `[workload]`, checked by fio's own rules (`options`), not an
    /// engine table.
    fn base_options(&self) -> &[(String, String)] {
        &[]
    }

    fn is_option(&self, _: &str) -> bool {
        false
    }

    fn invocation(&self, _: &[(String, String)]) -> Option<Invocation> {
        None
    }

    /// ramp_time + runtime when fio is told a runtime and `time_based`; `None` when fio
    /// decides by size.
    fn nominal_seconds(&self, opts: &[(String, String)]) -> Option<f64> {
        let get = |name: &str| {
            opts.iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        let time_based = get("time_based").is_some_and(|v| v.trim() != "0");
        if !time_based {
            return None;
        }
        // The bounded parser (at most 30 days each) keeps the estimate and the time limit
        // derived from it finite; validation refused anything else already.
        let secs = |text: &str| duration::duration(text).ok().map(|d| d.as_secs_f64());
        let runtime = secs(get("runtime")?)?;
        let ramp = get("ramp_time").and_then(secs).unwrap_or(0.0);
        // fio waits `startdelay` before it starts.
        let delay = get("startdelay").and_then(secs).unwrap_or(0.0);
        Some(runtime + ramp + delay)
    }

    /// The final report's figures (status reports before it only place the window).
    fn metrics(&self, stdout: &str, _: &str) -> Result<Figures, String> {
        let report = super::fio_json::parse(stdout).map_err(|e| e.to_string())?;
        Ok(Figures {
            metrics: report.metrics(),
            series: Vec::new(),
        })
    }

    /// Total IOPS, whatever the workload's direction.
    fn primary_metric(&self) -> Option<String> {
        None
    }

    fn runs_job_file(&self) -> bool {
        true
    }

    fn reports_measured_window(&self) -> bool {
        true
    }

    fn checks_its_output(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn nominal_time_is_ramp_plus_runtime_when_time_based() {
        let timed = o(&[("time_based", "1"), ("runtime", "4s"), ("ramp_time", "1")]);
        assert_eq!(Fio.nominal_seconds(&timed), Some(5.0));
        assert_eq!(Fio.nominal_seconds(&o(&[("runtime", "4s")])), None);
        assert_eq!(Fio.nominal_seconds(&o(&[("time_based", "0")])), None);
    }

    #[test]
    fn metrics_come_from_the_json_and_garbage_is_an_error() {
        let e = Fio.metrics("no json here", "").unwrap_err();
        assert!(e.contains("no JSON document"), "{e}");
        assert!(Fio.invocation(&[]).is_none() && Fio.runs_job_file());
    }
}
