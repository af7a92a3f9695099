//! A block trace the agent records on its host for one run of a `trace = true` experiment
//! (`trace_start` / `trace_stop`): the device's events (and those of the devices stacked below
//! it) through tracefs as `iolab run` records them here, analysed on the host, and only the
//! run's `trace_*` metrics sent back. The files
//! go once analysed: a run's trace is tens to hundreds of MB, too much to carry over the
//! control channel, and a host's disk is not iolab's to fill.

use std::path::PathBuf;

use crate::experiment::run::trace as run_trace;
use crate::trace::capture::{self, Recording};

/// One recording under way; dropped unfinished, it stops and its files go.
pub(crate) struct AgentTrace {
    recording: Option<Recording>,
    dir: PathBuf,
    base: PathBuf,
    /// The device, then the devices below it that are recorded.
    devices: Vec<run_trace::Traced>,
}

/// The trace directory of agent PID is `STATE_DIR/agent-trace-PID`; `iolab restore` removes
/// those of agents that were killed (their own Drop removes the rest).
pub(crate) const DIR_PREFIX: &str = "agent-trace-";

impl AgentTrace {
    /// Starts recording `device` and the devices `below` it (those that can be traced) into a
    /// directory of its own under `state_dir`.
    pub(crate) fn start(
        state_dir: &std::path::Path,
        (device, below): (&str, &[String]),
        buffer_kb: u64,
    ) -> Result<AgentTrace, String> {
        let machine =
            crate::model::Machine::read(&crate::sys::SysRoot::live()).map_err(|e| e.to_string())?;
        let target = machine
            .device(device)
            .map(|d| run_trace::Traced::new(device, &d.dev))
            .ok_or_else(|| format!("no block device {device:?} on this host"))?;
        for b in below {
            super::agent::known_below(&machine, b)?;
        }
        let devices = run_trace::with_devices_below(vec![target], below);
        let state_dir = &crate::knobs::trusted_state_dir(state_dir).map_err(|e| e.to_string())?;
        let dir = state_dir.join(format!("{DIR_PREFIX}{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let base = dir.join(device);
        let mut trace = AgentTrace {
            recording: None,
            dir,
            base: base.clone(),
            devices,
        };
        let recording = capture::start(capture::Config {
            devices: trace.devices.iter().map(|d| d.name.clone()).collect(),
            output: base,
            duration: None,
            buffer_kb,
            command: Vec::new(),
            status_line: false,
            command_stdout_to_stderr: false,
            state_dir: state_dir.to_path_buf(),
        })
        .map_err(|e| format!("cannot record /dev/{device}: {e:#}"))?;
        trace.recording = Some(recording);
        Ok(trace)
    }

    /// The devices below the target being recorded.
    pub(crate) fn below(&self) -> Vec<String> {
        self.devices
            .iter()
            .filter(|d| d.below)
            .map(|d| d.name.clone())
            .collect()
    }

    /// Stops recording and analyses the trace into the run's `trace_*` metrics, and the MB
    /// its bios completed within `window` (`[start, end)` ns on the monotonic clock, the
    /// trace's) when given; the files go.
    pub(crate) fn stop(
        mut self,
        window: Option<(u64, u64)>,
    ) -> Result<run_trace::Analysed, String> {
        let recording = self.recording.take().ok_or("not recording")?;
        let summary = recording.stop().map_err(|e| format!("{e:#}"))?;
        // The window is the target's: the devices below have no bytes check.
        run_trace::analyse(&self.base, &self.devices, &summary, &[window])
            .map_err(|e| format!("{e:#}"))
    }
}

impl Drop for AgentTrace {
    fn drop(&mut self) {
        if let Some(r) = self.recording.take() {
            let _ = r.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
