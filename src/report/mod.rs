//! Turning statistics into things people read and post: aligned plain-text tables that fit a
//! mailing-list message, CSV and JSON for scripts, and SVG charts.

pub(crate) mod comparisons;
pub(crate) mod format;
pub(crate) mod html;
pub(crate) mod pivot;
pub(crate) mod plot;
pub(crate) mod png;
pub(crate) mod table;
