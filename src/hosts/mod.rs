//! Other machines as lab hosts. An experiment's `[target] hosts` run one fio job on several
//! `fio --server`s; controlling and sampling those hosts needs iolab on each of them. This
//! module is that control channel: `agent` (iolab on the host, answering JSON lines on
//! stdin/stdout; `agent_trace` is its block trace of a run), `protocol` (the wire format both
//! ends share), `ssh` (the OpenSSH client carrying it, with the user's own keys and config),
//! `check` (versions and clock skew, measured before a run) and `restore` (a host's own
//! `iolab restore`, once it is back). `fio_server` is the confined fio server an agent starts
//! for its session. `facts` is what a host says about itself; `touched`
//! lists the hosts a run may have left changed, for `iolab restore`.

pub(crate) mod agent;
pub(crate) mod agent_trace;
pub(crate) mod check;
pub(crate) mod facts;
pub(crate) mod fio_server;
pub(crate) mod listener;
pub mod protocol;
pub(crate) mod restore;
pub mod ssh;
pub mod touched;
