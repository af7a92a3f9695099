//! `iolab restore --host H`: a host that died or was cut off mid-experiment keeps the journal
//! its killed agent left; once the host is back, its own `iolab restore` (run over the same
//! ssh as the agent) puts its knobs back. Nothing is replayed from here: the journal and the
//! allow-list it is checked against live on the host.

use std::process::Stdio;

use anyhow::anyhow;

use super::ssh::{command, shell_quote, SshOptions};
use crate::workload::process::output_kept;

/// What one host's `iolab restore` said.
#[derive(Debug, serde::Serialize)]
pub(crate) struct HostRestore {
    pub host: String,
    /// Its exit status was 0.
    pub ok: bool,
    /// Its standard output: text, or its `--json` document when asked for JSON.
    pub output: serde_json::Value,
    /// What it (or ssh) printed on standard error.
    pub errors: String,
}

/// Runs `iolab restore` on `host` over ssh; `json` asks it for its JSON report. An error only
/// when ssh itself cannot be started; a host that cannot be reached is a failed `HostRestore`.
pub(crate) fn restore(host: &str, options: &SshOptions, json: bool) -> anyhow::Result<HostRestore> {
    // Refused as a failed restore of that host, not an error: the others still go on.
    if let Some(why) = super::ssh::destination_problem(host) {
        return Ok(HostRestore {
            host: host.to_string(),
            ok: false,
            output: serde_json::Value::Null,
            errors: why,
        });
    }
    let remote = format!(
        "{} restore{}",
        shell_quote(&options.remote_iolab),
        if json { " --json" } else { "" }
    );
    let (status, stdout, stderr) =
        output_kept(command(options, host, &remote).stdin(Stdio::null()))
            .map_err(|e| anyhow!("cannot run ssh ({e}); install the OpenSSH client"))?;
    let output = match json {
        true => {
            serde_json::from_str(&stdout.text).unwrap_or(serde_json::Value::String(stdout.text))
        }
        false => serde_json::Value::String(stdout.text),
    };
    let mut errors = stderr.text;
    for (stream, left_out) in [("output", stdout.left_out), ("errors", stderr.left_out)] {
        if left_out > 0 {
            errors.push_str(&format!(
                "\n(the host's {stream} went on for {left_out} bytes more, left out)"
            ));
        }
    }
    Ok(HostRestore {
        host: host.to_string(),
        ok: status.success() && stdout.left_out == 0,
        output,
        errors,
    })
}

/// `iolab restore --host H...`: each host's own restore, in the order asked; its JSON is the
/// list of [`HostRestore`]s, its text each host's output under a `== HOST` line.
#[derive(Debug, serde::Serialize)]
#[serde(transparent)]
pub(crate) struct HostRestores(pub(crate) Vec<HostRestore>);

impl HostRestores {
    /// The hosts whose restore did not finish.
    pub(crate) fn failed(&self) -> Vec<&str> {
        self.0
            .iter()
            .filter(|d| !d.ok)
            .map(|d| d.host.as_str())
            .collect()
    }
}

impl crate::output::Render for HostRestores {
    fn text(&self) -> String {
        let mut out = String::new();
        for d in &self.0 {
            out += &format!("== {}\n", d.host);
            out += d.output.as_str().unwrap_or_default();
            for line in d.errors.lines() {
                out += &format!("{}: {line}\n", d.host);
            }
        }
        out
    }
}
