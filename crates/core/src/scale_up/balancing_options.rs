//! The validated way into [`BalancingOptions`]: one accessor per field, named like it, and a
//! setter per field. A difference ratio must be a finite number `>= 0` (a negative or NaN ratio
//! would make no two groups similar, an infinite one every two). The label lists take any value;
//! whether both are set at once is checked by [`BalancingOptions::validate`] once both are set.

use crate::invalid_option::{InvalidOption, ratio};
use crate::scale_up::balance::BalancingOptions;

impl BalancingOptions {
    /// Largest relative difference of allocatable, per resource
    /// (`--max-allocatable-difference-ratio`).
    pub fn max_allocatable_difference_ratio(&self) -> f64 {
        self.max_allocatable_difference_ratio
    }

    /// Largest relative difference of free resources, per resource
    /// (`--max-free-difference-ratio`).
    pub fn max_free_difference_ratio(&self) -> f64 {
        self.max_free_difference_ratio
    }

    /// Largest relative difference of memory capacity (`--memory-difference-ratio`).
    pub fn memory_difference_ratio(&self) -> f64 {
        self.memory_difference_ratio
    }

    /// Labels ignored in the comparison besides the built-in ones (`--balancing-ignore-label`).
    pub fn ignored_labels(&self) -> &[String] {
        &self.ignored_labels
    }

    /// Labels that alone decide similarity, if any (`--balancing-label`).
    pub fn balancing_labels(&self) -> &[String] {
        &self.balancing_labels
    }

    /// Sets [`Self::max_allocatable_difference_ratio`]; it must be finite and `>= 0`.
    pub fn set_max_allocatable_difference_ratio(
        &mut self,
        value: f64,
    ) -> Result<(), InvalidOption> {
        self.max_allocatable_difference_ratio = ratio("max_allocatable_difference_ratio", value)?;
        Ok(())
    }

    /// Sets [`Self::max_free_difference_ratio`]; it must be finite and `>= 0`.
    pub fn set_max_free_difference_ratio(&mut self, value: f64) -> Result<(), InvalidOption> {
        self.max_free_difference_ratio = ratio("max_free_difference_ratio", value)?;
        Ok(())
    }

    /// Sets [`Self::memory_difference_ratio`]; it must be finite and `>= 0`.
    pub fn set_memory_difference_ratio(&mut self, value: f64) -> Result<(), InvalidOption> {
        self.memory_difference_ratio = ratio("memory_difference_ratio", value)?;
        Ok(())
    }

    /// Sets [`Self::ignored_labels`] (not to be combined with [`Self::balancing_labels`]:
    /// [`BalancingOptions::validate`] checks that once both are set).
    pub fn set_ignored_labels(&mut self, value: Vec<String>) {
        self.ignored_labels = value;
    }

    /// Sets [`Self::balancing_labels`] (see [`Self::set_ignored_labels`]).
    pub fn set_balancing_labels(&mut self, value: Vec<String>) {
        self.balancing_labels = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invalid_option::OptionRule;

    #[test]
    fn a_negative_or_unbounded_ratio_is_refused_and_the_value_kept() {
        let mut o = BalancingOptions::default();
        for bad in [-0.1, f64::NAN, f64::INFINITY] {
            let e = o.set_memory_difference_ratio(bad).unwrap_err();
            assert_eq!(
                (e.field(), e.rule()),
                ("memory_difference_ratio", OptionRule::Ratio)
            );
            assert!(o.set_max_free_difference_ratio(bad).is_err());
            assert!(o.set_max_allocatable_difference_ratio(bad).is_err());
        }
        assert_eq!(o, BalancingOptions::default());
    }

    #[test]
    fn valid_values_land() {
        let mut o = BalancingOptions::default();
        o.set_max_allocatable_difference_ratio(0.1).unwrap();
        o.set_max_free_difference_ratio(0.0).unwrap();
        o.set_memory_difference_ratio(2.0).unwrap();
        o.set_ignored_labels(vec!["zone".to_string()]);
        assert_eq!(
            (
                o.max_allocatable_difference_ratio(),
                o.max_free_difference_ratio(),
                o.memory_difference_ratio()
            ),
            (0.1, 0.0, 2.0)
        );
        assert_eq!(o.ignored_labels(), ["zone"]);
        assert!(o.validate().is_ok());
        o.set_balancing_labels(vec!["pool".to_string()]);
        assert_eq!(o.balancing_labels(), ["pool"]);
        assert!(o.validate().is_err());
    }
}
