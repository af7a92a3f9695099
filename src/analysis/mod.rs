//! Answers from stored results: importing old fio outputs, one experiment's tables (`show`),
//! two groups of runs compared (`compare`), the charts (`plot`) and the self-contained HTML
//! page (`report`). This is the layer between the store (which only speaks SQL) and the
//! statistics and report libraries (which know nothing of databases): it selects runs, groups
//! them into cells by their factor levels, and feeds plain vectors to `stats` and `report`.

pub(crate) mod basis;
pub(crate) mod cells;
pub(crate) mod compare;
pub(crate) mod import;
pub(crate) mod import_cells;
pub(crate) mod metrics;
pub(crate) mod over_time;
pub(crate) mod page;
pub(crate) mod placements;
pub(crate) mod plots;
pub(crate) mod show;
pub(crate) mod summary;
