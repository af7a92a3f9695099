//! The experiment file's engine: `engine = "fio" | "command" | "iperf3" | "sockperf"` and
//! the engine's own table (`[command]`, `[iperf3]`, `[sockperf]`). Kept apart from the rest
//! of the file's parsing so the engines' syntax grows here. `command` runs any program, so
//! it is refused, at the line naming the engine, unless the file says `allow_exec = true`.

use std::time::Duration;

use toml::de::DeValue;

use super::{scalar_text, Value, Walker};
use crate::sys::parse::duration;
use crate::workload::command::{self, CommandEngine};
use crate::workload::engine::{is_json_path, is_metric_name, EngineSpec, ENGINE_NAMES};
use crate::workload::net::{Iperf3, NetSpec, Sockperf, IPERF3_OPTIONS, SOCKPERF_OPTIONS};

const COMMAND_KEYS: &[&str] = &[
    "program",
    "args",
    "regex",
    "json",
    "output",
    "time_limit",
    "vars",
];
const NET_KEYS: &[&str] = &["server", "port", "netns", "server_netns", "server_cpus"];
/// The engines' own tables.
pub(super) const TABLES: &[&str] = &["command", "iperf3", "sockperf"];

/// A network namespace name `ip netns` accepts (and that cannot be read as an option).
fn netns_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with('-')
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// An engine option's value as text (booleans as true/false, not fio's 1/0).
pub(super) fn option_text(v: &DeValue) -> Option<String> {
    match v {
        DeValue::Boolean(b) => Some(b.to_string()),
        other => scalar_text(other),
    }
}

impl Walker<'_> {
    /// The engine from the top-level `engine` value and the tables; `allow_exec` is the
    /// file's flag. Reports a table of another engine, a missing one, and every bad key.
    pub(super) fn engine(
        &mut self,
        name: Option<&Value>,
        tables: &[(String, std::ops::Range<usize>, &Value)],
        allow_exec: bool,
    ) -> EngineSpec {
        let engine = match name {
            None => "fio".to_string(),
            Some(v) => match self.string(v, "engine") {
                Some(s) if ENGINE_NAMES.contains(&s.as_str()) => s,
                Some(s) => {
                    self.error(
                        v.span(),
                        format!("unknown engine `{s}`"),
                        Some(ENGINE_NAMES.join(", ")),
                    );
                    return EngineSpec::Fio;
                }
                None => return EngineSpec::Fio,
            },
        };
        for (t, span, _) in tables {
            if *t != engine {
                self.error(
                    span.clone(),
                    format!("[{t}] configures the {t} engine, but the engine is {engine}"),
                    Some(format!("engine = \"{t}\", or remove [{t}]")),
                );
            }
        }
        let table = tables.iter().find(|(t, _, _)| *t == engine).map(|x| x.2);
        if let Some((_, span, _)) = tables.iter().find(|(t, _, _)| *t == engine) {
            self.engine_line = self.position(span.start).0;
        }
        let span = name.map(|v| v.span()).unwrap_or(0..0);
        if engine != "fio" && table.is_none() {
            self.error(
                span.clone(),
                format!("engine = \"{engine}\" needs a [{engine}] table"),
                None,
            );
            return EngineSpec::Fio;
        }
        let spec = match (engine.as_str(), table) {
            ("command", Some(t)) => {
                if !allow_exec {
                    self.error(
                        span,
                        "engine = \"command\" runs a program of the file's choosing; it needs \
                         allow_exec = true"
                            .to_string(),
                        Some("allow_exec = true at the top of the file".to_string()),
                    );
                }
                self.command_table(t)
                    .map_or(EngineSpec::Fio, EngineSpec::Command)
            }
            ("iperf3", Some(t)) => self
                .net_table(t, "iperf3", IPERF3_OPTIONS, 5201)
                .map_or(EngineSpec::Fio, |n| EngineSpec::Iperf3(Iperf3(n))),
            ("sockperf", Some(t)) => self
                .net_table(t, "sockperf", SOCKPERF_OPTIONS, 11111)
                .map_or(EngineSpec::Fio, |n| EngineSpec::Sockperf(Sockperf(n))),
            _ => EngineSpec::Fio,
        };
        self.engine_broken = engine != "fio" && spec.program().is_none();
        spec
    }

    /// What a program engine cannot go with: fio's `[workload]`, fio options and `hipri` as
    /// factors, `hosts` (fio's client mode); and a `command` placeholder nothing sets.
    pub(super) fn engine_fits(
        &mut self,
        workload_spans: &[(std::ops::Range<usize>, String)],
        factors: &[crate::experiment::Factor],
        target: &super::TargetSpec,
    ) {
        use crate::experiment::FactorKind;
        let Some(e) = self.engine.program() else {
            if let (Some((nic, line)), false) = (&target.nic, self.engine_broken) {
                self.diags.push(super::Diagnostic {
                    line: *line,
                    column: 1,
                    message: format!(
                        "`nic = \"{nic}\"` is the target of a network or command engine; fio \
                         drives block devices"
                    ),
                    allowed: Some("engine = \"iperf3\", \"sockperf\" or \"command\"".to_string()),
                });
            }
            return;
        };
        let name = e.name();
        let replaced: Vec<String> = factors
            .iter()
            .filter_map(|f| {
                let FactorKind::Engine { option } = &f.kind else {
                    return None;
                };
                let (_, value) = e.base_options().iter().find(|(o, _)| o == option)?;
                Some(super::workload_table::replaced_by_factor(
                    option, value, name, f,
                ))
            })
            .collect();
        self.warnings.extend(replaced);
        if let Some((span, _)) = workload_spans.first() {
            self.error(
                span.clone(),
                format!("[workload] holds fio options, but the engine is {name}"),
                Some(format!("the options of [{name}]")),
            );
        }
        let mut diags = Vec::new();
        for f in factors {
            if matches!(f.kind, FactorKind::Fio { .. } | FactorKind::Polling) {
                diags.push(super::Diagnostic {
                    line: f.line,
                    column: 1,
                    message: format!(
                        "factor `{}` is a fio option, but the engine is {name}",
                        f.name
                    ),
                    allowed: Some(format!(
                        "the options of [{name}], knobs, placement, irq_cpu"
                    )),
                });
            }
        }
        if let Some((nic, _)) = &target.nic {
            for f in factors {
                if matches!(f.kind, FactorKind::QueueKnob { .. }) {
                    diags.push(super::Diagnostic {
                        line: f.line,
                        column: 1,
                        message: format!(
                            "factor `{}` is a block device's queue attribute, but the target \
                             is NIC `{nic}`",
                            f.name
                        ),
                        allowed: Some(
                            "placement, irq_cpu, system knobs, engine options".to_string(),
                        ),
                    });
                }
            }
        }
        if !target.hosts.is_empty() {
            diags.push(super::Diagnostic {
                line: 0,
                column: 0,
                message: format!(
                    "`hosts` ([target] hosts or [[target.host]]) runs fio on other machines, but \
                     the engine is {name}"
                ),
                allowed: Some("no hosts, or the fio engine".to_string()),
            });
        }
        if let EngineSpec::Command(c) = &self.engine {
            for p in c.all_placeholders() {
                let set =
                    c.vars.iter().any(|(n, _)| *n == p) || factors.iter().any(|f| f.name == p);
                if !set {
                    diags.push(super::Diagnostic {
                        line: self.engine_line,
                        column: 1,
                        message: format!(
                            "[command] uses {{{p}}}, but neither [command] vars nor a factor sets it"
                        ),
                        allowed: Some(format!("vars = {{ {p} = \"...\" }}, or a factor {p}")),
                    });
                }
            }
        }
        self.diags.extend(diags);
    }

    /// `sysctl.net.*` controls are (nearly all) each network namespace's own: iolab writes
    /// its own namespace's, so with the client or server in a namespace of its own they
    /// would change nothing the engine runs in, while its figures were stored under them.
    pub(super) fn net_sysctls_fit(
        &mut self,
        factors: &[crate::experiment::Factor],
        stabilise: &super::Stabilise,
        stabilise_span: Option<std::ops::Range<usize>>,
    ) {
        use crate::experiment::system_knobs::SystemKnob;
        use crate::experiment::FactorKind;
        let namespaces = self.engine.namespaces();
        if namespaces.is_empty() {
            return;
        }
        let is_net = |k: &SystemKnob| matches!(k, SystemKnob::Sysctl(n) if n.starts_with("net."));
        let why = format!(
            "net.* sysctls belong to each network namespace, and iolab sets this one's, not \
             those the {} runs in ({})",
            self.engine.name(),
            namespaces.join(", ")
        );
        let allowed = "set it in those namespaces yourself (ip netns exec NAME sysctl -w ...), \
                       or leave netns and server_netns out";
        for f in factors {
            if matches!(&f.kind, FactorKind::System(k) if is_net(k)) {
                self.diags.push(super::Diagnostic {
                    line: f.line,
                    column: 1,
                    message: format!("factor `{}`: {why}", f.name),
                    allowed: Some(allowed.to_string()),
                });
            }
        }
        if let Some((knob, _)) = stabilise.settings.iter().find(|(k, _)| is_net(k)) {
            self.error(
                stabilise_span.unwrap_or(0..0),
                format!("[stabilise] `{}`: {why}", knob.name()),
                Some(allowed.to_string()),
            );
        }
    }

    /// Whether a `command` engine reads a metric of this name (a regex group, a JSON name).
    pub(super) fn engine_metric(&self, name: &str) -> bool {
        let EngineSpec::Command(c) = &self.engine else {
            return false;
        };
        c.json.iter().any(|(n, _)| n == name)
            || c.regex.iter().any(|p| {
                regex::Regex::new(p).is_ok_and(|re| re.capture_names().flatten().any(|g| g == name))
            })
    }

    fn string_list(&mut self, v: &Value, key: &str) -> Option<Vec<String>> {
        match v.get_ref() {
            DeValue::String(s) => Some(vec![s.to_string()]),
            DeValue::Array(items) => items.iter().map(|i| self.string(i, key)).collect(),
            _ => {
                self.expected(v, "a string or a list of strings", key);
                None
            }
        }
    }

    fn command_table(&mut self, v: &Value) -> Option<CommandEngine> {
        let DeValue::Table(table) = v.get_ref() else {
            self.expected(v, "a table ([command])", "command");
            return None;
        };
        let before = self.diags.len();
        let mut c = CommandEngine {
            program: String::new(),
            args: Vec::new(),
            regex: Vec::new(),
            json: Vec::new(),
            from_stderr: false,
            time_limit: Duration::from_secs(600),
            vars: Vec::new(),
        };
        let mut program_seen = false;
        for (key, value) in table.iter() {
            match key.get_ref().as_ref() {
                "program" => {
                    program_seen = true;
                    c.program = self.nonempty_string(value, "program").unwrap_or_default();
                }
                "args" => c.args = self.string_list(value, "args").unwrap_or_default(),
                "regex" => {
                    for p in self.string_list(value, "regex").unwrap_or_default() {
                        if let Err(e) = command::check_regex(&p) {
                            self.error(value.span(), format!("regex `{p}` {e}"), None);
                        }
                        c.regex.push(p);
                    }
                }
                "json" => {
                    let DeValue::Table(t) = value.get_ref() else {
                        self.expected(value, "a table { metric = \"path\" }", "json");
                        continue;
                    };
                    for (k, p) in t.iter() {
                        let name = k.get_ref().to_string();
                        let Some(path) = self.string(p, &name) else {
                            continue;
                        };
                        if !is_metric_name(&name) {
                            self.error(
                                k.span(),
                                format!("`{name}` is not a metric name"),
                                Some("lower case letters, digits and _".to_string()),
                            );
                        } else if !is_json_path(&path) {
                            self.error(
                                p.span(),
                                format!("`{path}` is not a JSON path"),
                                Some("keys and indices: a.b[0].c".to_string()),
                            );
                        } else {
                            c.json.push((name, path));
                        }
                    }
                }
                "output" => match self.string(value, "output").as_deref() {
                    Some("stdout") => c.from_stderr = false,
                    Some("stderr") => c.from_stderr = true,
                    Some(o) => self.error(
                        value.span(),
                        format!("`output` is stdout or stderr, not `{o}`"),
                        None,
                    ),
                    None => {}
                },
                "time_limit" => {
                    let text = scalar_text(value.get_ref()).unwrap_or_default();
                    match duration::duration(&text) {
                        Ok(d) if !d.is_zero() => c.time_limit = d,
                        _ => self.error(
                            value.span(),
                            format!("`time_limit` is a duration such as \"90s\", not `{text}`"),
                            None,
                        ),
                    }
                }
                "vars" => {
                    let DeValue::Table(t) = value.get_ref() else {
                        self.expected(value, "a table { NAME = value }", "vars");
                        continue;
                    };
                    for (k, x) in t.iter() {
                        match scalar_text(x.get_ref()) {
                            Some(text) => c.vars.push((k.get_ref().to_string(), text)),
                            None => self.expected(x, "a string or number", k.get_ref()),
                        }
                    }
                }
                other => self.unknown_key(key.span(), other, "[command]", COMMAND_KEYS),
            }
        }
        if !program_seen {
            self.error(
                v.span(),
                "[command] has no `program`".to_string(),
                Some("program = \"dd\"".to_string()),
            );
        }
        if c.regex.is_empty() && c.json.is_empty() {
            self.error(
                v.span(),
                "[command] reads no metric: give `regex` (named groups are metrics) or `json` \
                 (metric = \"path\")"
                    .to_string(),
                None,
            );
        }
        (self.diags.len() == before).then_some(c)
    }

    fn net_table(
        &mut self,
        v: &Value,
        engine: &str,
        options: &[(&str, crate::workload::net::Kind)],
        default_port: u16,
    ) -> Option<NetSpec> {
        let DeValue::Table(table) = v.get_ref() else {
            self.expected(v, &format!("a table ([{engine}])"), engine);
            return None;
        };
        let before = self.diags.len();
        let mut n = NetSpec {
            server: String::new(),
            port: default_port,
            netns: None,
            server_netns: None,
            server_cpus: None,
            options: Vec::new(),
        };
        let allowed: Vec<&str> = NET_KEYS
            .iter()
            .copied()
            .chain(options.iter().map(|(k, _)| *k))
            .collect();
        for (key, value) in table.iter() {
            let k = key.get_ref().as_ref();
            match k {
                "server" => {
                    let s = self.nonempty_string(value, "server").unwrap_or_default();
                    if s.starts_with('-') || s.contains(char::is_whitespace) {
                        self.error(value.span(), format!("`{s}` is not an address"), None);
                    }
                    n.server = s;
                }
                "port" => {
                    n.port = self.integer_in(value, "port", 1, 65535).unwrap_or(1) as u16;
                }
                "netns" | "server_netns" => {
                    let s = self.string(value, k).unwrap_or_default();
                    if !netns_name(&s) {
                        self.error(
                            value.span(),
                            format!("`{s}` is not a network namespace name"),
                            Some("letters, digits, - _ . (see `ip netns list`)".to_string()),
                        );
                    }
                    if k == "netns" {
                        n.netns = Some(s);
                    } else {
                        n.server_netns = Some(s);
                    }
                }
                "server_cpus" => {
                    let s = self.string(value, k).unwrap_or_default();
                    match crate::sys::parse::cpulist(&s) {
                        Ok(c) if !c.is_empty() => n.server_cpus = Some(c),
                        _ => self.error(
                            value.span(),
                            format!("`{s}` is not a CPU list"),
                            Some("server_cpus = \"2\" or \"2-3\" (see `iolab inspect`)".into()),
                        ),
                    }
                }
                _ if options.iter().any(|(o, _)| *o == k) => {
                    let text = option_text(value.get_ref()).unwrap_or_default();
                    match crate::workload::net::check_option(options, k, &text) {
                        Ok(()) => n.options.push((k.to_string(), text)),
                        Err(e) => self.error(value.span(), e, None),
                    }
                }
                other => self.unknown_key(key.span(), other, &format!("[{engine}]"), &allowed),
            }
        }
        if n.server.is_empty() && self.diags.len() == before {
            self.error(
                v.span(),
                format!("[{engine}] has no `server` (the address the client connects to)"),
                Some("server = \"10.0.0.2\"".to_string()),
            );
        }
        if n.server_cpus.is_some() && n.server_netns.is_none() && self.diags.len() == before {
            self.error(
                v.span(),
                format!(
                    "[{engine}] server_cpus pins the server iolab starts, but iolab starts \
                     none without `server_netns`"
                ),
                Some("add server_netns = \"NAME\", or pin your own server yourself".into()),
            );
        }
        (self.diags.len() == before).then_some(n)
    }
}
