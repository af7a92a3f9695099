//! Answers from stored results: importing old fio outputs, one experiment's tables (`show`),
//! two groups of runs compared (`compare`), the charts (`plot`) and the self-contained HTML
//! page (`report`). This is the layer between the store (which only speaks SQL) and the
//! statistics and report libraries (which know nothing of databases): it selects runs, groups
//! them into cells by their factor levels, and feeds plain vectors to `stats` and `report`.

pub mod basis;
pub mod cells;
pub mod compare;
pub mod import;
pub mod metrics;
pub mod over_time;
pub mod page;
pub mod plots;
pub mod show;
