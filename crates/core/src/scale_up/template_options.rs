//! The way into [`TemplateOptions`]: its one field, the taint configuration, is an option group
//! of its own (its setters refuse a key that is not a qualified name), so it is read through an
//! accessor and changed through a `_mut` borrow.

use autoscaler_model::TaintConfig;

use crate::scale_up::template::TemplateOptions;

impl TemplateOptions {
    /// Startup and status taints, left out of templates (`--startup-taint`, `--ignore-taint`,
    /// `--status-taint`).
    pub fn taints(&self) -> &TaintConfig {
        &self.taints
    }

    /// The taint configuration, to change.
    pub fn taints_mut(&mut self) -> &mut TaintConfig {
        &mut self.taints
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_taints_land_through_the_borrow() {
        let mut o = TemplateOptions::default();
        assert!(o.taints().startup().is_empty() && o.taints().status().is_empty());
        o.taints_mut().set_startup(vec!["a".into()]).unwrap();
        o.taints_mut().set_status(vec!["b".into()]).unwrap();
        assert!(o.taints_mut().set_status(vec!["not a key".into()]).is_err());
        assert_eq!(o.taints().startup(), ["a"]);
        assert_eq!(o.taints().status(), ["b"]);
    }
}
