//! The resources the facade serves and the discovery documents that describe them (`/api`,
//! `/apis`, `/api/v1`, `/apis/<group>/<version>`, `/version`).
//!
//! It decides which URL names which stored kind and which verbs and subresources are advertised,
//! and what an API server of another version or without some groups would advertise: a
//! [`Surface`] withholds group-versions (as a cluster without a CRD, or an old server without
//! `policy/v1`, serves them not at all) and names the server's version. It never touches the
//! world: a resource here is only a mapping onto the store's (group, kind) keys.

use std::collections::BTreeSet;

use serde_json::{Value, json};

/// One served resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource {
    /// API group (`""` for core).
    pub group: &'static str,
    /// Version (`v1`, `v1beta1`).
    pub version: &'static str,
    /// Plural name in URLs (`pods`).
    pub plural: &'static str,
    /// Kind (`Pod`).
    pub kind: &'static str,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// Subresources served (`eviction`, `scale`, `status`).
    pub subresources: &'static [&'static str],
}

impl Resource {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `deployments.apps`, as Status messages name resources.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

const fn r(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    subresources: &'static [&'static str],
) -> Resource {
    Resource {
        group,
        version,
        plural,
        kind,
        namespaced,
        subresources,
    }
}

/// Every resource served. Kinds the world never creates are still listable (empty), so that
/// clients watching them start up.
pub const RESOURCES: &[Resource] = &[
    r("", "v1", "nodes", "Node", false, &["status"]),
    r("", "v1", "pods", "Pod", true, &["status", "eviction"]),
    r("", "v1", "namespaces", "Namespace", false, &["status"]),
    r("", "v1", "configmaps", "ConfigMap", true, &[]),
    r("", "v1", "events", "Event", true, &[]),
    r(
        "",
        "v1",
        "replicationcontrollers",
        "ReplicationController",
        true,
        &["status", "scale"],
    ),
    r("", "v1", "services", "Service", true, &["status"]),
    r(
        "",
        "v1",
        "persistentvolumes",
        "PersistentVolume",
        false,
        &["status"],
    ),
    r(
        "",
        "v1",
        "persistentvolumeclaims",
        "PersistentVolumeClaim",
        true,
        &["status"],
    ),
    r("apps", "v1", "daemonsets", "DaemonSet", true, &["status"]),
    r(
        "apps",
        "v1",
        "replicasets",
        "ReplicaSet",
        true,
        &["status", "scale"],
    ),
    r(
        "apps",
        "v1",
        "statefulsets",
        "StatefulSet",
        true,
        &["status", "scale"],
    ),
    r(
        "apps",
        "v1",
        "deployments",
        "Deployment",
        true,
        &["status", "scale"],
    ),
    r("batch", "v1", "jobs", "Job", true, &["status"]),
    r(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "PodDisruptionBudget",
        true,
        &["status"],
    ),
    r("coordination.k8s.io", "v1", "leases", "Lease", true, &[]),
    r("events.k8s.io", "v1", "events", "Event", true, &[]),
    r(
        "storage.k8s.io",
        "v1",
        "storageclasses",
        "StorageClass",
        false,
        &[],
    ),
    r("storage.k8s.io", "v1", "csinodes", "CSINode", false, &[]),
    r(
        "storage.k8s.io",
        "v1",
        "csidrivers",
        "CSIDriver",
        false,
        &[],
    ),
    r(
        "storage.k8s.io",
        "v1",
        "csistoragecapacities",
        "CSIStorageCapacity",
        true,
        &[],
    ),
    r(
        "resource.k8s.io",
        "v1",
        "deviceclasses",
        "DeviceClass",
        false,
        &[],
    ),
    r(
        "resource.k8s.io",
        "v1",
        "resourceclaims",
        "ResourceClaim",
        true,
        &["status"],
    ),
    r(
        "resource.k8s.io",
        "v1",
        "resourceclaimtemplates",
        "ResourceClaimTemplate",
        true,
        &[],
    ),
    r(
        "resource.k8s.io",
        "v1",
        "resourceslices",
        "ResourceSlice",
        false,
        &[],
    ),
    r(
        "cluster.x-k8s.io",
        "v1beta1",
        "machinedeployments",
        "MachineDeployment",
        true,
        &["status", "scale"],
    ),
    r(
        "cluster.x-k8s.io",
        "v1beta1",
        "machinesets",
        "MachineSet",
        true,
        &["status", "scale"],
    ),
    r(
        "cluster.x-k8s.io",
        "v1beta1",
        "machines",
        "Machine",
        true,
        &["status"],
    ),
    r(
        "cluster.x-k8s.io",
        "v1beta1",
        "machinepools",
        "MachinePool",
        true,
        &["status", "scale"],
    ),
    // Cluster API infrastructure machine templates, whose `status.capacity` and
    // `status.nodeInfo` tell what a group's nodes look like (scale from zero): the Docker
    // provider's kind, and the one the world's MachineDeployments reference. Other kinds of
    // the group answer `404`, as on a cluster without their provider's CRDs.
    r(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "dockermachinetemplates",
        "DockerMachineTemplate",
        true,
        &[],
    ),
    r(
        "infrastructure.cluster.x-k8s.io",
        "v1beta1",
        "simmachinetemplates",
        "SimMachineTemplate",
        true,
        &[],
    ),
    r("", "v1", "podtemplates", "PodTemplate", true, &[]),
    // SIG Autoscaling's CRDs, with the status subresource their CRDs declare; withheld by
    // default (a cluster without the CRDs), served once installed
    // ([`crate::FacadeHandle::install`] `autoscaling.x-k8s.io/v1` and `/v1beta1`).
    r(
        "autoscaling.x-k8s.io",
        "v1",
        "provisioningrequests",
        "ProvisioningRequest",
        true,
        &["status"],
    ),
    r(
        "autoscaling.x-k8s.io",
        "v1beta1",
        "capacitybuffers",
        "CapacityBuffer",
        true,
        &["status"],
    ),
    // OpenShift's cluster-scoped singleton (`default`) that configures the autoscaler; served
    // as its CRD serves it, so that `run` without `--config` finds and watches it.
    r(
        "autoscaling.openshift.io",
        "v1",
        "clusterautoscalers",
        "ClusterAutoscaler",
        false,
        &["status"],
    ),
];

/// The resource with this group, version and plural.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The Kubernetes version a server claims (`/version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerVersion {
    /// Major version (1).
    pub major: u32,
    /// Minor version (34).
    pub minor: u32,
}

impl Default for ServerVersion {
    /// The version the workspace's Kubernetes API types are built for.
    fn default() -> Self {
        ServerVersion {
            major: 1,
            minor: 34,
        }
    }
}

/// What the facade serves of [`RESOURCES`]: every group-version but the withheld ones, under a
/// claimed server version.
#[derive(Debug, Clone, Default)]
pub struct Surface {
    /// Group-versions not served (`policy/v1`, `cluster.x-k8s.io/v1beta1`; `v1` for core).
    pub withheld: BTreeSet<String>,
    /// What `/version` answers.
    pub version: ServerVersion,
}

impl Surface {
    /// Whether this group-version is served.
    pub fn serves(&self, group: &str, version: &str) -> bool {
        let gv = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        !self.withheld.contains(&gv) && of(self, group, version).next().is_some()
    }

    /// The resources served, in table order.
    fn resources(&self) -> impl Iterator<Item = &'static Resource> + '_ {
        RESOURCES
            .iter()
            .filter(|r| !self.withheld.contains(&r.api_version()))
    }

    /// The version of `policy` an Eviction is served at: `v1`, or `v1beta1` (as before
    /// Kubernetes 1.22) when `policy/v1` is withheld.
    fn eviction_version(&self) -> &'static str {
        if self.withheld.contains("policy/v1") {
            "v1beta1"
        } else {
            "v1"
        }
    }
}

/// The resources of one group-version, unless withheld.
fn of<'a>(
    surface: &'a Surface,
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'static Resource> + 'a {
    surface
        .resources()
        .filter(move |r| r.group == group && r.version == version)
}

/// The named groups served, in table order, each with its versions.
fn groups(surface: &Surface) -> Vec<(&'static str, Vec<&'static str>)> {
    let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
    for r in surface.resources().filter(|r| !r.group.is_empty()) {
        match out.iter_mut().find(|(g, _)| *g == r.group) {
            Some((_, vs)) if !vs.contains(&r.version) => vs.push(r.version),
            Some(_) => {}
            None => out.push((r.group, vec![r.version])),
        }
    }
    out
}

fn group_doc(name: &str, versions: &[&str]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/api`: the core group's versions.
pub fn api_versions(server: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server}],
    })
}

/// `/apis`: the named groups.
pub fn api_group_list(surface: &Surface) -> Value {
    let groups: Vec<Value> = groups(surface)
        .iter()
        .map(|(g, vs)| {
            let mut d = group_doc(g, vs);
            if let Some(o) = d.as_object_mut() {
                o.remove("kind");
                o.remove("apiVersion");
            }
            d
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`: one group, if served.
pub fn api_group(surface: &Surface, group: &str) -> Option<Value> {
    groups(surface)
        .into_iter()
        .find(|(g, _)| *g == group)
        .map(|(g, vs)| group_doc(g, &vs))
}

/// `/api/v1` or `/apis/<group>/<version>`: the resources with their verbs and subresources.
pub fn api_resource_list(surface: &Surface, group: &str, version: &str) -> Option<Value> {
    if !surface.serves(group, version) {
        return None;
    }
    let mut resources = Vec::new();
    for r in of(surface, group, version) {
        let singular = r.kind.to_lowercase();
        resources.push(json!({
            "name": r.plural,
            "singularName": singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        }));
        for sub in r.subresources {
            let (kind, group_v, verbs): (&str, Option<(&str, &str)>, &[&str]) = match *sub {
                "eviction" => (
                    "Eviction",
                    Some(("policy", surface.eviction_version())),
                    &["create"],
                ),
                "scale" => (
                    "Scale",
                    Some(("autoscaling", "v1")),
                    &["get", "patch", "update"],
                ),
                _ => (r.kind, None, &["get", "patch", "update"]),
            };
            let mut d = json!({
                "name": format!("{}/{}", r.plural, sub),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": kind,
                "verbs": verbs,
            });
            if let Some((g, v)) = group_v {
                d["group"] = json!(g);
                d["version"] = json!(v);
            }
            resources.push(d);
        }
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": resources,
    }))
}

/// The `Accept` value of aggregated discovery (`apidiscovery.k8s.io/v2`).
pub const AGGREGATED_CONTENT_TYPE: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

/// Aggregated discovery (`APIGroupDiscoveryList`): of the core group (`/api`, `core = true`) or
/// of the named groups (`/apis`).
pub fn aggregated(surface: &Surface, core: bool) -> Value {
    let mut names: Vec<&'static str> = Vec::new();
    for r in surface.resources().filter(|r| r.group.is_empty() == core) {
        if !names.contains(&r.group) {
            names.push(r.group);
        }
    }
    let items: Vec<Value> = names
        .iter()
        .map(|g| {
            let mut versions: Vec<&'static str> = Vec::new();
            for r in surface.resources().filter(|r| r.group == *g) {
                if !versions.contains(&r.version) {
                    versions.push(r.version);
                }
            }
            let versions: Vec<Value> = versions
                .iter()
                .map(|v| {
                    let resources: Vec<Value> = of(surface, g, v)
                        .map(|r| {
                            let subs: Vec<Value> = r
                                .subresources
                                .iter()
                                .map(|sub| {
                                    let (gr, ve, kind, verbs): (&str, &str, &str, &[&str]) =
                                        match *sub {
                                            "eviction" => ("policy", surface.eviction_version(), "Eviction", &["create"]),
                                            "scale" => (
                                                "autoscaling",
                                                "v1",
                                                "Scale",
                                                &["get", "patch", "update"],
                                            ),
                                            _ => (r.group, r.version, r.kind, &["get", "patch", "update"]),
                                        };
                                    json!({
                                        "subresource": sub,
                                        "responseKind": {"group": gr, "version": ve, "kind": kind},
                                        "verbs": verbs,
                                    })
                                })
                                .collect();
                            json!({
                                "resource": r.plural,
                                "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
                                "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
                                "singularResource": r.kind.to_lowercase(),
                                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
                                "subresources": subs,
                            })
                        })
                        .collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            json!({"metadata": {"name": g}, "versions": versions})
        })
        .collect();
    json!({
        "kind": "APIGroupDiscoveryList",
        "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {},
        "items": items,
    })
}

/// `/version`.
pub fn version_info(version: ServerVersion) -> Value {
    let ServerVersion { major, minor } = version;
    json!({
        "major": major.to_string(),
        "minor": minor.to_string(),
        "gitVersion": format!("v{major}.{minor}.0-facade"),
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discovery_lists_groups_resources_and_subresources() {
        let all = Surface::default();
        let groups = api_group_list(&all);
        let names: Vec<&str> = groups["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|g| g["name"].as_str())
            .collect();
        assert!(names.contains(&"cluster.x-k8s.io") && names.contains(&"apps"));
        assert!(!names.contains(&""), "core group is under /api");
        let capi = api_resource_list(&all, "cluster.x-k8s.io", "v1beta1").unwrap();
        let res: Vec<&str> = capi["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert!(res.contains(&"machinedeployments/scale"));
        let core = api_resource_list(&all, "", "v1").unwrap();
        let ev = core["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["name"] == "pods/eviction")
            .unwrap();
        assert_eq!(ev["group"], "policy");
        assert!(api_resource_list(&all, "nope", "v1").is_none());
        assert_eq!(
            find("apps", "v1", "deployments").unwrap().kind,
            "Deployment"
        );
    }

    fn group_names(doc: &Value, pointer: &str, key: &str) -> Vec<String> {
        doc.pointer(pointer)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|g| g.pointer(key)?.as_str().map(str::to_string))
            .collect()
    }

    #[test]
    fn a_withheld_group_version_is_advertised_nowhere() {
        let old = Surface {
            withheld: ["policy/v1".to_string(), "cluster.x-k8s.io/v1beta1".into()].into(),
            version: ServerVersion {
                major: 1,
                minor: 20,
            },
        };
        assert!(!old.serves("policy", "v1"));
        assert!(!old.serves("cluster.x-k8s.io", "v1beta1"));
        assert!(old.serves("apps", "v1") && old.serves("", "v1"));
        let names = group_names(&api_group_list(&old), "/groups", "/name");
        assert!(!names.contains(&"policy".to_string()), "{names:?}");
        assert!(!names.contains(&"cluster.x-k8s.io".to_string()));
        assert!(names.contains(&"apps".to_string()));
        assert!(api_group(&old, "policy").is_none());
        assert!(api_resource_list(&old, "policy", "v1").is_none());
        let agg = group_names(&aggregated(&old, false), "/items", "/metadata/name");
        assert!(!agg.contains(&"policy".to_string()), "{agg:?}");
        // Pods are still evictable, at the version a server of that age served.
        let core = api_resource_list(&old, "", "v1").unwrap();
        let ev = core["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["name"] == "pods/eviction")
            .unwrap();
        assert_eq!(
            (&ev["group"], &ev["version"]),
            (&json!("policy"), &json!("v1beta1"))
        );
        let v = version_info(old.version);
        assert_eq!((&v["major"], &v["minor"]), (&json!("1"), &json!("20")));
        assert_eq!(v["gitVersion"], "v1.20.0-facade");
    }
}
