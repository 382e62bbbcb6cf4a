//! Configuration of the Cluster API provider: which API group the machine objects live in, and
//! which scalable resources node-group auto-discovery admits.
//!
//! It decides the annotation and label keys that follow from the API group, and parses
//! `--node-group-auto-discovery=clusterapi:...` specs. It never reads the environment or any
//! file: the binary passes `CAPI_GROUP` in.

use serde_json::Value;

/// The Cluster API group (the default).
pub const DEFAULT_API_GROUP: &str = "cluster.x-k8s.io";
/// OpenShift's Machine API group.
pub const OPENSHIFT_API_GROUP: &str = "machine.openshift.io";
/// Namespace of OpenShift's Machine API MachineSets (the only one `--cloud-provider=openshift`
/// reads them from, as OpenShift's own autoscaler does).
pub const OPENSHIFT_MACHINE_API_NAMESPACE: &str = "openshift-machine-api";
/// Namespace of OpenShift's Cluster API MachineSets (mirrors of the Machine API ones).
pub const OPENSHIFT_CLUSTER_API_NAMESPACE: &str = "openshift-cluster-api";
/// The architecture given to scale-from-zero templates unless configured otherwise.
pub const DEFAULT_ARCH: &str = "amd64";

/// Why a configuration text was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The spec is not `clusterapi:key=value,...`.
    #[error("auto-discovery spec {spec:?} should look like clusterapi:key=value,key=value")]
    Shape {
        /// The rejected spec.
        spec: String,
    },
    /// The discoverer before `:` is not `clusterapi`.
    #[error(
        "auto-discovery spec {spec:?}: unsupported discoverer {discoverer:?} (only clusterapi)"
    )]
    Discoverer {
        /// The rejected spec.
        spec: String,
        /// The discoverer named.
        discoverer: String,
    },
    /// An item is not `key=value` (or has an empty key).
    #[error("auto-discovery spec {spec:?}: {item:?} is not a key=value pair")]
    Pair {
        /// The rejected spec.
        spec: String,
        /// The offending item.
        item: String,
    },
    /// The API group is not a DNS-subdomain-like name.
    #[error("API group {group:?} is not a valid group name")]
    Group {
        /// The rejected group.
        group: String,
    },
}

/// One `--node-group-auto-discovery=clusterapi:...` spec: every given field must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AutoDiscovery {
    /// Only resources in this namespace.
    pub namespace: Option<String>,
    /// Only resources of this cluster (`spec.clusterName`, else the `<group>/cluster-name` label).
    pub cluster_name: Option<String>,
    /// Only resources carrying all these labels (`key=value`).
    pub labels: Vec<(String, String)>,
}

impl AutoDiscovery {
    /// Parses `clusterapi:namespace=NS,clusterName=NAME,<label>=<value>`; empty items are
    /// ignored; any other shape is an error naming the text.
    pub fn parse(spec: &str) -> Result<AutoDiscovery, ConfigError> {
        let Some((discoverer, rest)) = spec.split_once(':') else {
            return Err(ConfigError::Shape { spec: spec.into() });
        };
        if rest.contains(':') {
            return Err(ConfigError::Shape { spec: spec.into() });
        }
        if discoverer != "clusterapi" {
            return Err(ConfigError::Discoverer {
                spec: spec.into(),
                discoverer: discoverer.into(),
            });
        }
        let mut out = AutoDiscovery::default();
        for item in rest.split(',').filter(|i| !i.is_empty()) {
            let pair = item.split_once('=').filter(|(k, v)| {
                !k.is_empty() && !v.contains('=') && !k.contains(char::is_whitespace)
            });
            let Some((k, v)) = pair else {
                return Err(ConfigError::Pair {
                    spec: spec.into(),
                    item: item.into(),
                });
            };
            match k {
                "namespace" => out.namespace = Some(v.to_string()),
                "clusterName" => out.cluster_name = Some(v.to_string()),
                _ => out.labels.push((k.to_string(), v.to_string())),
            }
        }
        Ok(out)
    }

    /// Whether the resource `obj` (in `namespace`, of cluster `cluster_name`) is admitted.
    pub(crate) fn admits(&self, obj: &Value, namespace: &str, cluster_name: &str) -> bool {
        if self.namespace.as_deref().is_some_and(|n| n != namespace) {
            return false;
        }
        if self
            .cluster_name
            .as_deref()
            .is_some_and(|c| c != cluster_name)
        {
            return false;
        }
        let labels = obj.pointer("/metadata/labels");
        self.labels.iter().all(|(k, v)| {
            labels
                .and_then(|l| l.get(k))
                .and_then(Value::as_str)
                .is_some_and(|x| x == v)
        })
    }
}

/// The provider's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterApiConfig {
    /// API group of Machines, MachineSets, MachineDeployments and MachinePools; also the prefix
    /// of the size, option and delete-machine annotations and of the cluster-name label.
    pub api_group: String,
    /// Auto-discovery specs, ORed; empty admits every annotated resource.
    pub auto_discovery: Vec<AutoDiscovery>,
    /// `kubernetes.io/arch` of scale-from-zero templates (upstream reads
    /// `CAPI_SCALE_ZERO_DEFAULT_ARCH`; the binary passes it in).
    pub default_arch: String,
    /// The API version of the group's kinds (`CAPI_VERSION`, passed in by the binary); `None`
    /// uses the version the API server prefers.
    pub api_version: Option<String>,
    /// `--cloud-provider=openshift`: besides `api_group` (with `auto_discovery`), the Machine
    /// API MachineSets (`machine.openshift.io`) of `openshift-machine-api` are node groups,
    /// as in OpenShift's own autoscaler.
    pub openshift: bool,
}

impl Default for ClusterApiConfig {
    fn default() -> Self {
        ClusterApiConfig {
            api_group: DEFAULT_API_GROUP.to_string(),
            auto_discovery: Vec::new(),
            default_arch: DEFAULT_ARCH.to_string(),
            api_version: None,
            openshift: false,
        }
    }
}

impl ClusterApiConfig {
    /// The configuration for `api_group`, no auto-discovery filter.
    pub fn for_group(api_group: &str) -> ClusterApiConfig {
        ClusterApiConfig {
            api_group: api_group.to_string(),
            ..ClusterApiConfig::default()
        }
    }

    /// The API group from a flag (first) or the `CAPI_GROUP` environment value the caller read,
    /// else the default. Empty values count as unset. A value that cannot be a group name is an
    /// error.
    pub fn from_env_and_flag(
        flag: Option<&str>,
        env: Option<&str>,
    ) -> Result<ClusterApiConfig, ConfigError> {
        let group = flag
            .filter(|s| !s.trim().is_empty())
            .or(env.filter(|s| !s.trim().is_empty()))
            .unwrap_or(DEFAULT_API_GROUP)
            .trim();
        let valid = group.split('.').all(|part| {
            !part.is_empty()
                && part
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        });
        if !valid || group.len() > 253 {
            return Err(ConfigError::Group {
                group: group.to_string(),
            });
        }
        Ok(ClusterApiConfig::for_group(group))
    }

    /// The API groups whose machine objects are read: `api_group`, and first the Machine API
    /// group in OpenShift mode.
    pub fn groups(&self) -> Vec<&str> {
        if self.openshift && self.api_group != OPENSHIFT_API_GROUP {
            vec![OPENSHIFT_API_GROUP, self.api_group.as_str()]
        } else {
            vec![self.api_group.as_str()]
        }
    }

    /// The configuration of one pass of discovery in OpenShift mode over the Machine API group:
    /// its MachineSets in `openshift-machine-api` only.
    pub(crate) fn machine_api(&self) -> ClusterApiConfig {
        ClusterApiConfig {
            api_group: OPENSHIFT_API_GROUP.to_string(),
            auto_discovery: vec![AutoDiscovery {
                namespace: Some(OPENSHIFT_MACHINE_API_NAMESPACE.to_string()),
                ..AutoDiscovery::default()
            }],
            default_arch: self.default_arch.clone(),
            // CAPI_VERSION pins Cluster API's version, not the Machine API's.
            api_version: None,
            openshift: false,
        }
    }

    /// Adds auto-discovery specs (each `clusterapi:...`).
    pub fn with_auto_discovery<S: AsRef<str>>(
        mut self,
        specs: &[S],
    ) -> Result<ClusterApiConfig, ConfigError> {
        for s in specs {
            self.auto_discovery.push(AutoDiscovery::parse(s.as_ref())?);
        }
        Ok(self)
    }

    /// The one namespace every auto-discovery spec names, if they all name the same one: the
    /// Cluster API objects need only be listed and watched there (so a namespaced Role is
    /// enough). `None` (no spec, a spec without a namespace, or two namespaces): cluster-wide.
    pub fn watch_namespace(&self) -> Option<&str> {
        let first = self.auto_discovery.first()?.namespace.as_deref()?;
        self.auto_discovery
            .iter()
            .all(|a| a.namespace.as_deref() == Some(first))
            .then_some(first)
    }

    /// The namespace the kinds of API `group` are watched in. With `--cloud-provider=openshift`
    /// the Machine API's MachineSets and Machines (and the MachineAutoscalers that point at
    /// them) live in `openshift-machine-api` whatever auto-discovery names; every other group
    /// follows [`Self::watch_namespace`].
    pub fn watch_namespace_of(&self, group: &str) -> Option<&str> {
        let machine_api = group == OPENSHIFT_API_GROUP || group == "autoscaling.openshift.io";
        if self.openshift && machine_api {
            return Some(OPENSHIFT_MACHINE_API_NAMESPACE);
        }
        self.watch_namespace()
    }

    /// `<group>/cluster-api-autoscaler-node-group-min-size`.
    pub fn min_size_key(&self) -> String {
        format!(
            "{}/cluster-api-autoscaler-node-group-min-size",
            self.api_group
        )
    }

    /// `<group>/cluster-api-autoscaler-node-group-max-size`.
    pub fn max_size_key(&self) -> String {
        format!(
            "{}/cluster-api-autoscaler-node-group-max-size",
            self.api_group
        )
    }

    /// `<group>/cluster-api-autoscaler-node-price-per-hour`: the price of one node of the group
    /// per hour, for the `price` expander. Upstream's Cluster API provider has no pricing model;
    /// the key follows the naming of the size annotations.
    pub fn price_key(&self) -> String {
        format!(
            "{}/cluster-api-autoscaler-node-price-per-hour",
            self.api_group
        )
    }

    /// `<group>/cluster-api-autoscaler-<setting>`: consolidation's per-group settings (ours,
    /// named as the price annotation): `consolidation`, `disruption-budgets`,
    /// `node-expire-after` and `consolidation-min-node-age`.
    pub fn disruption_key(&self, setting: &str) -> String {
        format!("{}/cluster-api-autoscaler-{setting}", self.api_group)
    }

    /// `<group>/delete-machine`: the Machine annotation that makes its owner remove it first.
    pub fn delete_machine_key(&self) -> String {
        format!("{}/delete-machine", self.api_group)
    }

    /// `<group>/autoscaling-options-`: prefix of per-group option annotations.
    pub fn options_prefix(&self) -> String {
        format!("{}/autoscaling-options-", self.api_group)
    }

    /// `<group>/cluster-name`: the label naming an object's cluster.
    pub fn cluster_name_label(&self) -> String {
        format!("{}/cluster-name", self.api_group)
    }

    /// Whether `obj` passes the auto-discovery filter (always, when there is none).
    pub(crate) fn admits(&self, obj: &Value, namespace: &str) -> bool {
        if self.auto_discovery.is_empty() {
            return true;
        }
        let cluster = cluster_name_of(obj, &self.cluster_name_label());
        self.auto_discovery
            .iter()
            .any(|a| a.admits(obj, namespace, &cluster))
    }
}

/// The cluster an object belongs to: `spec.clusterName`, else the cluster-name label, else "".
pub(crate) fn cluster_name_of(obj: &Value, label: &str) -> String {
    if let Some(c) = obj.pointer("/spec/clusterName").and_then(Value::as_str) {
        return c.to_string();
    }
    obj.pointer("/metadata/labels")
        .and_then(|l| l.get(label))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_are_watched_in_the_one_namespace_every_spec_names() {
        let ns = |specs: &[&str]| {
            ClusterApiConfig::default()
                .with_auto_discovery(specs)
                .expect("valid")
                .watch_namespace()
                .map(str::to_string)
        };
        assert_eq!(ns(&[]), None);
        assert_eq!(ns(&["clusterapi:namespace=a"]), Some("a".into()));
        assert_eq!(
            ns(&[
                "clusterapi:namespace=a,color=x",
                "clusterapi:namespace=a,clusterName=c"
            ]),
            Some("a".into())
        );
        assert_eq!(
            ns(&["clusterapi:namespace=a", "clusterapi:namespace=b"]),
            None
        );
        assert_eq!(
            ns(&["clusterapi:namespace=a", "clusterapi:clusterName=c"]),
            None
        );
        assert_eq!(ns(&["clusterapi:clusterName=c"]), None);
    }

    #[test]
    fn openshift_machine_api_kinds_are_watched_in_their_own_namespace() {
        let c = ClusterApiConfig {
            openshift: true,
            auto_discovery: vec![
                AutoDiscovery::parse("clusterapi:namespace=openshift-cluster-api").unwrap(),
            ],
            ..ClusterApiConfig::default()
        };
        assert_eq!(
            c.watch_namespace_of("machine.openshift.io"),
            Some("openshift-machine-api")
        );
        assert_eq!(
            c.watch_namespace_of("autoscaling.openshift.io"),
            Some("openshift-machine-api")
        );
        assert_eq!(
            c.watch_namespace_of("cluster.x-k8s.io"),
            Some("openshift-cluster-api")
        );
        let plain = ClusterApiConfig {
            openshift: false,
            ..c
        };
        assert_eq!(
            plain.watch_namespace_of("autoscaling.openshift.io"),
            Some("openshift-cluster-api")
        );
    }

    #[test]
    fn auto_discovery_specs_parse_and_reject_with_the_text() {
        let a = AutoDiscovery::parse("clusterapi:namespace=blue,clusterName=test1,color=green")
            .unwrap();
        assert_eq!(a.namespace.as_deref(), Some("blue"));
        assert_eq!(a.cluster_name.as_deref(), Some("test1"));
        assert_eq!(a.labels, [("color".to_string(), "green".to_string())]);
        assert_eq!(
            AutoDiscovery::parse("clusterapi:").unwrap(),
            AutoDiscovery::default()
        );
        let e = AutoDiscovery::parse("asg:tag=x").unwrap_err();
        assert!(e.to_string().contains("\"asg\""), "{e}");
        let e = AutoDiscovery::parse("clusterapi:namespace").unwrap_err();
        assert!(e.to_string().contains("\"namespace\""), "{e}");
        assert!(AutoDiscovery::parse("clusterapi").is_err());
        assert!(AutoDiscovery::parse("clusterapi:a=b:c").is_err());
        assert!(AutoDiscovery::parse("clusterapi:a=b=c").is_err());
    }

    #[test]
    fn group_comes_from_flag_then_env_then_default() {
        let d = ClusterApiConfig::from_env_and_flag(None, None).unwrap();
        assert_eq!(d.api_group, DEFAULT_API_GROUP);
        let e = ClusterApiConfig::from_env_and_flag(None, Some("machine.openshift.io")).unwrap();
        assert_eq!(e.api_group, OPENSHIFT_API_GROUP);
        assert_eq!(
            e.min_size_key(),
            "machine.openshift.io/cluster-api-autoscaler-node-group-min-size"
        );
        assert_eq!(
            e.delete_machine_key(),
            "machine.openshift.io/delete-machine"
        );
        let f = ClusterApiConfig::from_env_and_flag(Some("test.k8s.io"), Some("x.io")).unwrap();
        assert_eq!(f.api_group, "test.k8s.io");
        let blank = ClusterApiConfig::from_env_and_flag(Some(""), Some(" ")).unwrap();
        assert_eq!(blank.api_group, DEFAULT_API_GROUP);
        assert!(ClusterApiConfig::from_env_and_flag(Some("Bad Group"), None).is_err());
    }

    #[test]
    fn openshift_mode_reads_both_groups() {
        let c = ClusterApiConfig {
            openshift: true,
            ..ClusterApiConfig::default()
        };
        assert_eq!(c.groups(), [OPENSHIFT_API_GROUP, DEFAULT_API_GROUP]);
        let m = c.machine_api();
        assert_eq!(m.groups(), [OPENSHIFT_API_GROUP]);
        assert_eq!(
            m.auto_discovery[0].namespace.as_deref(),
            Some(OPENSHIFT_MACHINE_API_NAMESPACE)
        );
        // CAPI_GROUP=machine.openshift.io with OpenShift mode is one group, read once.
        let one = ClusterApiConfig {
            openshift: true,
            ..ClusterApiConfig::for_group(OPENSHIFT_API_GROUP)
        };
        assert_eq!(one.groups(), [OPENSHIFT_API_GROUP]);
        assert_eq!(ClusterApiConfig::default().groups(), [DEFAULT_API_GROUP]);
    }

    #[test]
    fn specs_are_ored_and_cluster_name_falls_back_to_the_label() {
        let c = ClusterApiConfig::default()
            .with_auto_discovery(&["clusterapi:namespace=a", "clusterapi:clusterName=c1"])
            .unwrap();
        let by_spec = json!({"spec": {"clusterName": "c1"}});
        let by_label = json!({"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "c1"}}});
        let other = json!({"spec": {"clusterName": "c2"}});
        assert!(c.admits(&other, "a"));
        assert!(c.admits(&by_spec, "b"));
        assert!(c.admits(&by_label, "b"));
        assert!(!c.admits(&other, "b"));
    }
}
