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
pub(crate) mod workloads;

/// `f` of every item, in order, the items split evenly over the machine's cores (parsing
/// stored fio outputs and comparing many cells are each independent and CPU-bound).
pub(crate) fn map_on_every_core<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = items.len().div_ceil(threads).max(1);
    let f = &f;
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(chunk)
            .map(|part| s.spawn(move || part.iter().map(f).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}
