//! Exact Kubernetes resource quantities (`100m`, `1.5`, `2Gi`, `1e3`, `0.1M`).
//!
//! PLACEHOLDER CONTRACT (being implemented): parse into an exact value and convert with
//! kube-scheduler's rounding (ceil to the unit). Never panics on any input.

use std::fmt;
use std::str::FromStr;

/// Why a quantity string was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The text is not a quantity.
    #[error("invalid quantity {text:?}: {why}")]
    Invalid {
        /// The rejected text.
        text: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The value does not fit the integer unit it is converted to.
    #[error("quantity {text:?} is out of range")]
    OutOfRange {
        /// The rejected text.
        text: String,
    },
}

/// An exact quantity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quantity {
    text: String,
}

impl Quantity {
    /// The value in thousandths of the unit, rounded up (CPU millicores).
    pub fn to_milli_ceil(&self) -> Result<i64, QuantityError> {
        Err(QuantityError::OutOfRange {
            text: self.text.clone(),
        })
    }

    /// The value in whole units, rounded up (bytes, counts).
    pub fn to_units_ceil(&self) -> Result<i64, QuantityError> {
        Err(QuantityError::OutOfRange {
            text: self.text.clone(),
        })
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(Quantity {
            text: s.to_string(),
        })
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
