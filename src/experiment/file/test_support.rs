//! The experiment file's unit tests share a good file and a way to list a bad one's errors.

use super::parse;

pub(super) const GOOD: &str = r#"
name = "rq_affinity vs placement"
seed = 42
repetitions = 5
warmup = true
[target]
device = "default"
size = "2G"
[workload]
rw = "randread"
bs = "4k"
iodepth = 32
ioengine = "io_uring"
direct = 1
runtime = "10s"
time_based = true
[factors]
rq_affinity = [0, 1, 2]
placement = ["on", "near", "far", [0, 1]]
hipri = [false, true]
bs = ["4k", "64k", "1m"]
irq_cpu = ["on-node", "far"]
scheduler = ["none", "mq-deadline"]
"queue/iosched/fifo_batch" = [8, 16]
"#;

pub(super) fn errors(text: &str) -> Vec<String> {
    parse("x.toml", text)
        .unwrap_err()
        .to_string()
        .lines()
        .map(str::to_string)
        .collect()
}
