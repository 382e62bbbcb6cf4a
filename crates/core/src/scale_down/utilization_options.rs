//! The way into [`UtilizationOptions`]: an accessor per field, named like it, and a setter per
//! field. Both are switches with no impossible value, so the setters are unchecked.

use crate::scale_down::utilization::UtilizationOptions;

impl UtilizationOptions {
    /// DaemonSet pods do not count toward utilization (`--ignore-daemonsets-utilization`).
    pub fn ignore_daemonsets(&self) -> bool {
        self.ignore_daemonsets
    }

    /// Mirror (static) pods do not count toward utilization (`--ignore-mirror-pods-utilization`).
    pub fn ignore_mirror_pods(&self) -> bool {
        self.ignore_mirror_pods
    }

    /// Sets [`Self::ignore_daemonsets`].
    pub fn set_ignore_daemonsets(&mut self, value: bool) {
        self.ignore_daemonsets = value;
    }

    /// Sets [`Self::ignore_mirror_pods`].
    pub fn set_ignore_mirror_pods(&mut self, value: bool) {
        self.ignore_mirror_pods = value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setters_land_their_value() {
        let mut o = UtilizationOptions::default();
        assert!(!o.ignore_daemonsets() && !o.ignore_mirror_pods());
        o.set_ignore_daemonsets(true);
        assert!(o.ignore_daemonsets() && !o.ignore_mirror_pods());
        o.set_ignore_mirror_pods(true);
        assert!(o.ignore_daemonsets() && o.ignore_mirror_pods());
    }
}
