//! Turning statistics into things people read and post: aligned plain-text tables that fit a
//! mailing-list message, CSV and JSON for scripts, and SVG charts.

pub mod comparisons;
pub mod format;
pub mod html;
pub mod pivot;
pub mod plot;
pub mod png;
pub mod table;
