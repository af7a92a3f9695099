//! Where each cell's workload was pinned, and why, read back from the plan stored with the
//! experiment. Case 0's table (placement x rq_affinity) means little without "on = CPU 3,
//! near = CPUs 0-1, far = CPUs 4-15", and that depends on the machine and on where the
//! device's interrupt was when the experiment ran, so `show` and the report say it.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

/// One placement as resolved: the cells it applies to and the resolver's own words (which
/// name the CPUs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Placed {
    /// `placement=near` where every cell of that level ran on the same CPUs, else one
    /// cell's key (an `irq_cpu` factor moves the interrupt, and near with it).
    pub cells: String,
    pub why: String,
}

/// The placements in the stored plan (`[]` for experiments without one or without any
/// placement: an unpinned workload, an imported run).
fn from_plan(plan_json: &str) -> Vec<Placed> {
    let Ok(Value::Array(cells)) = serde_json::from_str::<Value>(plan_json) else {
        return Vec::new();
    };
    // (placement level, cell key, why), in plan order.
    let placed: Vec<(Option<&str>, &str, &str)> = cells
        .iter()
        .filter_map(|c| {
            let why = c["placement_why"].as_str()?;
            let level = c["levels"].as_array().and_then(|levels| {
                levels
                    .iter()
                    .find(|l| l[0] == "placement")
                    .and_then(|l| l[1].as_str())
            });
            Some((level, c["key"].as_str().unwrap_or("?"), why))
        })
        .collect();
    // Whether every cell of a placement level ran where the first did (once per level: a
    // plan may hold tens of thousands of cells).
    let mut first_why: HashMap<Option<&str>, (&str, bool)> = HashMap::new();
    for &(level, _, why) in &placed {
        let (first, agree) = first_why.entry(level).or_insert((why, true));
        *agree &= *first == why;
    }
    let mut out: Vec<Placed> = Vec::new();
    let mut seen: HashSet<(String, &str)> = HashSet::new();
    for &(level, key, why) in &placed {
        let cells = match (level, first_why[&level].1) {
            (Some(l), true) => format!("placement={l}"),
            (None, true) => "every cell".to_string(),
            _ => key.to_string(),
        };
        if seen.insert((cells.clone(), why)) {
            out.push(Placed {
                cells,
                why: why.to_string(),
            });
        }
    }
    out
}

/// The placements of the plan among an experiment's stored environment entries.
pub(crate) fn from_environment(env: &[crate::store::EnvironmentEntry]) -> Vec<Placed> {
    env.iter()
        .find(|e| e.key == "plan")
        .map(|e| from_plan(&e.value))
        .unwrap_or_default()
}

/// What `show` prints: `where the workload ran:` and a line per placement
/// (`  placement=near: CPUs 0-1 share the last-level cache of interrupt CPU 3`), wrapped at
/// 80 columns; nothing when there is none.
pub(crate) fn text(placed: &[Placed]) -> String {
    if placed.is_empty() {
        return String::new();
    }
    use crate::report::table::{wrap, MAX_WIDTH};
    let safe = crate::report::format::terminal_safe;
    let lines: String = placed
        .iter()
        .flat_map(|p| {
            let text = format!("{}: {}", safe(&p.cells), safe(&p.why));
            wrap(&text, MAX_WIDTH - 2)
                .lines()
                .map(|l| format!("  {l}\n"))
                .collect::<Vec<_>>()
        })
        .collect();
    format!("where the workload ran:\n{lines}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A stored plan's cell of levels `other=level` (and `placement=P` when given).
    fn cell(other: (&str, &str), placement: Option<&str>, why: Option<&str>) -> Value {
        let mut levels = vec![json!([other.0, other.1])];
        let mut key = format!("{}={}", other.0, other.1);
        if let Some(p) = placement {
            levels.push(json!(["placement", p]));
            key.push_str(&format!(",placement={p}"));
        }
        json!({"index": 0, "key": key, "levels": levels, "cpus": [3], "placement_why": why})
    }

    fn text_of(cells: &[Value]) -> String {
        text(&from_plan(&Value::Array(cells.to_vec()).to_string()))
    }

    #[test]
    fn each_level_once_when_its_cells_agree_else_each_cell() {
        let (on, near) = (Some("CPU 3 takes it"), Some("CPU 0-1 near 3"));
        let plan = [
            cell(("rq", "0"), Some("on"), on),
            cell(("rq", "0"), Some("near"), near),
            cell(("rq", "1"), Some("on"), on),
            cell(("rq", "1"), Some("near"), near),
        ];
        assert_eq!(
            text_of(&plan),
            "where the workload ran:\n  placement=on: CPU 3 takes it\n  \
             placement=near: CPU 0-1 near 3\n"
        );
        // An irq_cpu factor moves the interrupt: near differs between cells, so each is named.
        let plan = [
            cell(("irq", "9"), Some("near"), Some("CPU 10-11 near 9")),
            cell(("irq", "-"), Some("near"), near),
            cell(("irq", "9"), Some("on"), Some("CPU 9 takes it")),
            cell(("irq", "-"), Some("on"), Some("CPU 9 takes it")),
        ];
        assert_eq!(
            text_of(&plan),
            "where the workload ran:\n  irq=9,placement=near: CPU 10-11 near 9\n  \
             irq=-,placement=near: CPU 0-1 near 3\n  placement=on: CPU 9 takes it\n"
        );
    }

    #[test]
    fn a_placement_without_a_factor_or_none_at_all() {
        let plan = [
            cell(("rq", "0"), None, Some("CPU 3 takes it")),
            cell(("rq", "1"), None, Some("CPU 3 takes it")),
        ];
        assert_eq!(
            text_of(&plan),
            "where the workload ran:\n  every cell: CPU 3 takes it\n"
        );
        assert_eq!(text_of(&[cell(("rq", "0"), None, None)]), "");
        assert!(from_plan("not json").is_empty());
    }

    /// A plan of 30,000 cells (a 5-factor matrix) is read in one pass: this took 5 s in a
    /// debug build when each cell looked at every other.
    #[test]
    fn a_large_plan_says_each_level_once() {
        let plan: Vec<Value> = (0..30_000)
            .map(|i| {
                let (p, why) = [("on", "CPU 3"), ("near", "CPUs 0-1"), ("far", "CPUs 4-15")][i % 3];
                cell(("bs", &i.to_string()), Some(p), Some(why))
            })
            .collect();
        assert_eq!(
            text_of(&plan),
            "where the workload ran:\n  placement=on: CPU 3\n  placement=near: CPUs 0-1\n  \
             placement=far: CPUs 4-15\n"
        );
    }
}
