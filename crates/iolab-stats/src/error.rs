//! One error type for every statistics routine, so callers can tell the user what is
//! missing ("group `baseline` is empty", "value 3 is NaN") instead of printing NaN.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum StatsError {
    /// A sample vector with no values: nothing can be summarised or compared.
    #[error("no values in {what}")]
    Empty { what: String },
    /// NaN or infinity in the input; the index says which measurement to look at.
    #[error("value {index} of {what} is not a finite number ({value})")]
    NonFinite {
        what: String,
        index: usize,
        value: f64,
    },
    /// A parameter outside its domain (a confidence level of 1.5, a negative target).
    #[error("invalid parameter {name}: {reason}")]
    InvalidParameter { name: &'static str, reason: String },
}

/// Rejects empty vectors and NaN/infinite values, naming `what` in the error.
pub fn check_finite(values: &[f64], what: &str) -> Result<(), StatsError> {
    if values.is_empty() {
        return Err(StatsError::Empty { what: what.into() });
    }
    match values.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(StatsError::NonFinite {
            what: what.into(),
            index,
            value: values[index],
        }),
        None => Ok(()),
    }
}
