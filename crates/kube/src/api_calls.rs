//! The one list of the Kubernetes API calls the live shell makes, and a classifier from an HTTP
//! request to the (API group, resource, verb) it exercises.
//!
//! The RBAC rules in `deploy/rbac.yaml` are checked against [`API_CALLS`] in both directions (a
//! test below), and mock-API tests of every module call [`is_declared`] on each request they
//! see, so a call the code makes but the list (and thus RBAC) forgets fails a test. This module
//! makes no call itself and never grants anything: it is a declaration.

/// One kind of API call: a verb on a resource (or subresource) of an API group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ApiCall {
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// Resource, with its subresource when there is one (`pods/eviction`); `*` for every
    /// resource of the group (the infrastructure templates, whose kinds only the references
    /// name).
    pub resource: &'static str,
    /// RBAC verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`.
    pub verb: &'static str,
    /// The call only targets objects in `--namespace` (kube-system), so a Role there grants it
    /// rather than the ClusterRole.
    pub namespaced_only: bool,
}

const fn call(group: &'static str, resource: &'static str, verb: &'static str) -> ApiCall {
    ApiCall {
        group,
        resource,
        verb,
        namespaced_only: false,
    }
}

const fn own_ns(group: &'static str, resource: &'static str, verb: &'static str) -> ApiCall {
    ApiCall {
        group,
        resource,
        verb,
        namespaced_only: true,
    }
}

/// Builds [`API_CALLS`]: the listed calls, then for each Machine API group the calls on its
/// objects (upstream Cluster API and OpenShift's Machine API share the resource names).
macro_rules! api_calls {
    (calls: [$($c:expr),* $(,)?], machine_api_groups: [$($g:literal),* $(,)?] $(,)?) => {
        &[
            $($c,)*
            $(
                call($g, "machinedeployments", "get"),
                call($g, "machinedeployments", "list"),
                call($g, "machinedeployments", "watch"),
                call($g, "machinesets", "get"),
                call($g, "machinesets", "list"),
                call($g, "machinesets", "watch"),
                call($g, "machinepools", "get"),
                call($g, "machinepools", "list"),
                call($g, "machinepools", "watch"),
                call($g, "machines", "get"),
                call($g, "machines", "list"),
                call($g, "machines", "watch"),
                call($g, "machines", "update"),
                call($g, "machines", "patch"),
                call($g, "machines", "delete"),
                call($g, "machinedeployments/scale", "get"),
                call($g, "machinedeployments/scale", "patch"),
                call($g, "machinedeployments/scale", "update"),
                call($g, "machinesets/scale", "get"),
                call($g, "machinesets/scale", "patch"),
                call($g, "machinesets/scale", "update"),
                call($g, "machinepools/scale", "get"),
                call($g, "machinepools/scale", "patch"),
                call($g, "machinepools/scale", "update"),
            )*
        ]
    };
}

/// Every API call the live shell makes. Discovery reads (`/api`, `/apis`, `/apis/<group>`,
/// `/apis/<group>/<version>`, `/version`) are not listed: they are non-resource URLs that the
/// default `system:discovery` ClusterRole grants to every authenticated user.
pub const API_CALLS: &[ApiCall] = api_calls! {
    calls: [
        // Watching, taints (get + update with resourceVersion), taint cleanup at start (list).
        call("", "nodes", "get"),
        call("", "nodes", "list"),
        call("", "nodes", "watch"),
        call("", "nodes", "update"),
        call("", "pods", "list"),
        call("", "pods", "watch"),
        call("", "pods/eviction", "create"),
        call("", "namespaces", "list"),
        call("", "namespaces", "watch"),
        call("policy", "poddisruptionbudgets", "list"),
        call("policy", "poddisruptionbudgets", "watch"),
        call("apps", "daemonsets", "list"),
        call("apps", "daemonsets", "watch"),
        call("apps", "replicasets", "list"),
        call("apps", "replicasets", "watch"),
        call("apps", "statefulsets", "list"),
        call("apps", "statefulsets", "watch"),
        call("batch", "jobs", "list"),
        call("batch", "jobs", "watch"),
        call("", "replicationcontrollers", "list"),
        call("", "replicationcontrollers", "watch"),
        // Storage, for the volume filters (CSIDriver and CSIStorageCapacity may be refused:
        // optional).
        call("", "persistentvolumeclaims", "list"),
        call("", "persistentvolumeclaims", "watch"),
        call("", "persistentvolumes", "list"),
        call("", "persistentvolumes", "watch"),
        call("storage.k8s.io", "storageclasses", "list"),
        call("storage.k8s.io", "storageclasses", "watch"),
        call("storage.k8s.io", "csinodes", "list"),
        call("storage.k8s.io", "csinodes", "watch"),
        call("storage.k8s.io", "csidrivers", "list"),
        call("storage.k8s.io", "csidrivers", "watch"),
        call("storage.k8s.io", "csistoragecapacities", "list"),
        call("storage.k8s.io", "csistoragecapacities", "watch"),
        // DRA, for the DynamicResources filter (optional: a server below 1.34 has none).
        call("resource.k8s.io", "deviceclasses", "list"),
        call("resource.k8s.io", "deviceclasses", "watch"),
        call("resource.k8s.io", "resourceclaims", "list"),
        call("resource.k8s.io", "resourceclaims", "watch"),
        call("resource.k8s.io", "resourceclaimtemplates", "list"),
        call("resource.k8s.io", "resourceclaimtemplates", "watch"),
        call("resource.k8s.io", "resourceslices", "list"),
        call("resource.k8s.io", "resourceslices", "watch"),
        // Capacity on request (optional: with --enable-provisioning-requests or the buffer
        // flags): read, status replaced through the status subresource; PodTemplates and
        // Deployments shape the requests' and buffers' pods.
        call("autoscaling.x-k8s.io", "provisioningrequests", "list"),
        call("autoscaling.x-k8s.io", "provisioningrequests", "watch"),
        call("autoscaling.x-k8s.io", "provisioningrequests/status", "update"),
        call("autoscaling.x-k8s.io", "capacitybuffers", "list"),
        call("autoscaling.x-k8s.io", "capacitybuffers", "watch"),
        call("autoscaling.x-k8s.io", "capacitybuffers/status", "update"),
        call("", "podtemplates", "list"),
        call("", "podtemplates", "watch"),
        call("apps", "deployments", "list"),
        call("apps", "deployments", "watch"),
        // Priority expander ConfigMap (read) and the status ConfigMap (written), in --namespace.
        own_ns("", "configmaps", "get"),
        own_ns("", "configmaps", "list"),
        own_ns("", "configmaps", "watch"),
        own_ns("", "configmaps", "create"),
        own_ns("", "configmaps", "update"),
        // Events land in the namespace of the object they are about (pods anywhere, nodes in
        // `default`, the status ConfigMap in --namespace), hence cluster-wide.
        call("", "events", "create"),
        call("", "events", "patch"),
        call("events.k8s.io", "events", "create"),
        call("events.k8s.io", "events", "patch"),
        // Leader election.
        own_ns("coordination.k8s.io", "leases", "get"),
        own_ns("coordination.k8s.io", "leases", "create"),
        own_ns("coordination.k8s.io", "leases", "update"),
        // OpenShift's MachineAutoscaler resources (min/max of the groups).
        call("autoscaling.openshift.io", "machineautoscalers", "list"),
        call("autoscaling.openshift.io", "machineautoscalers", "watch"),
        // OpenShift's ClusterAutoscaler singleton `default` (the settings, watched).
        call("autoscaling.openshift.io", "clusterautoscalers", "list"),
        call("autoscaling.openshift.io", "clusterautoscalers", "watch"),
        // The infrastructure machine templates the scalable resources reference (scale from
        // zero by `status.capacity`): any kind of the providers' group, as upstream grants.
        call("infrastructure.cluster.x-k8s.io", "*", "list"),
        call("infrastructure.cluster.x-k8s.io", "*", "watch"),
    ],
    machine_api_groups: ["cluster.x-k8s.io", "machine.openshift.io"],
};

/// What one HTTP request exercises, as RBAC sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classified {
    /// API group (`""` for the core group and for discovery).
    pub group: String,
    /// Resource with its subresource (`machinedeployments/scale`), or `discovery`.
    pub resource: String,
    /// RBAC verb.
    pub verb: &'static str,
    /// Namespace in the path, if any.
    pub namespace: Option<String>,
}

impl Classified {
    /// Whether this is the call `c` (group, resource and verb; `c`'s resource `*` matches
    /// every resource, as in RBAC).
    pub fn is(&self, c: &ApiCall) -> bool {
        self.group == c.group
            && (c.resource == "*" || self.resource == c.resource)
            && self.verb == c.verb
    }
}

/// Why a request could not be classified.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClassifyError {
    /// The URI does not parse.
    #[error("malformed URI {uri:?}")]
    BadUri {
        /// The URI given.
        uri: String,
    },
    /// The path is neither under `/api/v1` nor under `/apis/<group>/<version>`, nor discovery.
    #[error("{method} {path}: not a Kubernetes API path")]
    NotApiPath {
        /// HTTP method.
        method: String,
        /// Path.
        path: String,
    },
    /// The HTTP method has no RBAC verb for this path.
    #[error("{method} {path}: no RBAC verb for this method")]
    UnknownMethod {
        /// HTTP method.
        method: String,
        /// Path.
        path: String,
    },
}

/// Namespace subresources of the core API, told apart from a namespaced resource path
/// (`/api/v1/namespaces/<ns>/<resource>`) by name.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

/// Maps a request (`method`, and a URI that is a path with an optional query, or an absolute
/// URL) to its group, resource (with subresource) and RBAC verb: `GET` is `get` with a name,
/// `list` without, `watch` with `watch=true` (or under the legacy `/watch/` prefix); `POST` is
/// `create`; `PUT` `update`; `PATCH` `patch`; `DELETE` `delete` with a name, `deletecollection`
/// without. Discovery reads are `("", "discovery", "get")`.
pub fn classify(method: &http::Method, uri: &str) -> Result<Classified, ClassifyError> {
    let parsed: http::Uri = uri.parse().map_err(|_| ClassifyError::BadUri {
        uri: uri.to_string(),
    })?;
    let path = parsed.path();
    let watch_query = parsed.query().is_some_and(|q| {
        q.split('&')
            .any(|kv| kv == "watch=true" || kv == "watch=1" || kv == "watch")
    });
    let not_api = || ClassifyError::NotApiPath {
        method: method.to_string(),
        path: path.to_string(),
    };
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let discovery = Classified {
        group: String::new(),
        resource: "discovery".into(),
        verb: "get",
        namespace: None,
    };
    let (group, rest) = match segs.as_slice() {
        ["version"] | ["api"] | ["apis"] | ["api", _] | ["apis", _] | ["apis", _, _]
            if *method == http::Method::GET =>
        {
            return Ok(discovery);
        }
        ["api", "v1", rest @ ..] if !rest.is_empty() => ("", rest),
        ["apis", group, _version, rest @ ..] if !rest.is_empty() => (*group, rest),
        _ => return Err(not_api()),
    };
    let (legacy_watch, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let (namespace, rest) = match rest {
        ["namespaces", _, sub] if group.is_empty() && NAMESPACE_SUBRESOURCES.contains(sub) => {
            (None, rest)
        }
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some(ns.to_string()), rest),
        _ => (None, rest),
    };
    let (resource, name) = match rest {
        [resource] => (resource.to_string(), None),
        [resource, name] => (resource.to_string(), Some(*name)),
        [resource, name, sub] => (format!("{resource}/{sub}"), Some(*name)),
        _ => return Err(not_api()),
    };
    let verb = match *method {
        http::Method::GET | http::Method::HEAD if watch_query || legacy_watch => "watch",
        http::Method::GET | http::Method::HEAD if name.is_some() => "get",
        http::Method::GET | http::Method::HEAD => "list",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE if name.is_some() => "delete",
        http::Method::DELETE => "deletecollection",
        _ => {
            return Err(ClassifyError::UnknownMethod {
                method: method.to_string(),
                path: path.to_string(),
            });
        }
    };
    Ok(Classified {
        group: group.to_string(),
        resource,
        verb,
        namespace,
    })
}

/// Whether the request is a discovery read or one of [`API_CALLS`]; an unclassifiable request is
/// not declared.
pub fn is_declared(method: &http::Method, uri: &str) -> bool {
    match classify(method, uri) {
        Ok(c) if c.resource == "discovery" && c.group.is_empty() => true,
        Ok(c) => API_CALLS.iter().any(|a| c.is(a)),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;
    use rustc_hash::FxHashSet;
    use serde_yaml_ng::Value;

    fn cl(m: Method, uri: &str) -> (String, String, &'static str) {
        let c = classify(&m, uri).unwrap();
        (c.group, c.resource, c.verb)
    }

    fn t(g: &str, r: &str, v: &'static str) -> (String, String, &'static str) {
        (g.to_string(), r.to_string(), v)
    }

    #[test]
    fn all_calls_are_distinct_and_complete() {
        assert!(API_CALLS.iter().all(|c| !c.resource.is_empty()));
        let set: FxHashSet<_> = API_CALLS
            .iter()
            .map(|c| (c.group, c.resource, c.verb))
            .collect();
        assert_eq!(set.len(), API_CALLS.len(), "duplicates");
        for g in ["cluster.x-k8s.io", "machine.openshift.io"] {
            assert!(set.contains(&(g, "machinepools/scale", "update")));
            assert!(set.contains(&(g, "machines", "delete")));
        }
        assert!(set.contains(&("", "pods/eviction", "create")));
        for (g, r) in [
            ("", "persistentvolumeclaims"),
            ("", "persistentvolumes"),
            ("storage.k8s.io", "storageclasses"),
            ("storage.k8s.io", "csinodes"),
            ("storage.k8s.io", "csidrivers"),
            ("storage.k8s.io", "csistoragecapacities"),
            ("resource.k8s.io", "deviceclasses"),
            ("resource.k8s.io", "resourceclaims"),
            ("resource.k8s.io", "resourceclaimtemplates"),
            ("resource.k8s.io", "resourceslices"),
        ] {
            assert!(set.contains(&(g, r, "list")) && set.contains(&(g, r, "watch")));
            assert!(!set.contains(&(g, r, "get")), "{r}: list/watch only");
        }
        assert!(set.contains(&("autoscaling.openshift.io", "machineautoscalers", "watch")));
        // Infrastructure templates: read only, of any kind of the providers' group, and the
        // only wildcard.
        let infra = autoscaler_clusterapi::INFRASTRUCTURE_GROUP;
        assert!(set.contains(&(infra, "*", "list")) && set.contains(&(infra, "*", "watch")));
        assert!(
            API_CALLS
                .iter()
                .filter(|c| c.resource.contains('*'))
                .all(|c| c.group == infra
                    && c.resource == "*"
                    && ["list", "watch"].contains(&c.verb))
        );
        assert!(API_CALLS.iter().all(|c| {
            const VERBS: [&str; 7] = [
                "get", "list", "watch", "create", "update", "patch", "delete",
            ];
            VERBS.contains(&c.verb)
        }));
    }

    #[test]
    fn classifies_requests() {
        assert_eq!(
            cl(
                Method::GET,
                "/api/v1/nodes?&watch=true&timeoutSeconds=290&allowWatchBookmarks=true&resourceVersion=1"
            ),
            t("", "nodes", "watch")
        );
        assert_eq!(cl(Method::GET, "/api/v1/nodes?"), t("", "nodes", "list"));
        assert_eq!(cl(Method::GET, "/api/v1/nodes/n1"), t("", "nodes", "get"));
        assert_eq!(
            cl(Method::PUT, "/api/v1/nodes/n1?"),
            t("", "nodes", "update")
        );
        assert_eq!(
            cl(
                Method::PATCH,
                "/apis/cluster.x-k8s.io/v1beta1/namespaces/ns/machinedeployments/md/scale"
            ),
            t("cluster.x-k8s.io", "machinedeployments/scale", "patch")
        );
        assert_eq!(
            cl(Method::POST, "/api/v1/namespaces/ns/pods/p/eviction?"),
            t("", "pods/eviction", "create")
        );
        assert_eq!(
            cl(Method::GET, "/api/v1/pods?fieldSelector=spec.nodeName%3Dn"),
            t("", "pods", "list")
        );
        assert_eq!(
            cl(Method::GET, "/api/v1/namespaces"),
            t("", "namespaces", "list")
        );
        assert_eq!(
            cl(Method::GET, "/api/v1/namespaces/ns"),
            t("", "namespaces", "get")
        );
        assert_eq!(
            cl(Method::PUT, "/api/v1/namespaces/ns/finalize"),
            t("", "namespaces/finalize", "update")
        );
        assert_eq!(
            cl(Method::GET, "/api/v1/namespaces/kube-system/configmaps"),
            t("", "configmaps", "list")
        );
        assert_eq!(
            cl(Method::GET, "/api/v1/watch/namespaces/ns/pods"),
            t("", "pods", "watch")
        );
        assert_eq!(
            cl(
                Method::PUT,
                "https://10.0.0.1:6443/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cluster-autoscaler"
            ),
            t("coordination.k8s.io", "leases", "update")
        );
        assert_eq!(
            cl(
                Method::DELETE,
                "/apis/machine.openshift.io/v1beta1/namespaces/ns/machines"
            ),
            t("machine.openshift.io", "machines", "deletecollection")
        );
        let c = classify(&Method::GET, "/apis/apps/v1/namespaces/ns/daemonsets/d").unwrap();
        assert_eq!(c.namespace.as_deref(), Some("ns"));
        for p in [
            "/api",
            "/apis",
            "/api/v1",
            "/apis/cluster.x-k8s.io",
            "/apis/cluster.x-k8s.io/v1beta1",
            "/version",
        ] {
            assert_eq!(cl(Method::GET, p), t("", "discovery", "get"), "{p}");
            assert!(is_declared(&Method::GET, p), "{p}");
        }
        assert!(classify(&Method::POST, "/apis").is_err());
        assert!(classify(&Method::GET, "/healthz").is_err());
        assert!(classify(&Method::GET, "/api/v1/namespaces/ns/pods/p/log/extra").is_err());
        assert!(classify(&Method::OPTIONS, "/api/v1/nodes").is_err());
        assert!(classify(&Method::GET, "not a uri at all").is_err());
    }

    #[test]
    fn declared_requests() {
        assert!(is_declared(&Method::GET, "/api/v1/nodes?watch=true"));
        assert!(is_declared(
            &Method::PATCH,
            "/apis/machine.openshift.io/v1beta1/namespaces/ns/machinesets/ms/scale?"
        ));
        assert!(is_declared(
            &Method::POST,
            "/api/v1/namespaces/ns/pods/p/eviction?"
        ));
        assert!(
            !is_declared(&Method::DELETE, "/api/v1/nodes/n1"),
            "node deletion is the provider's"
        );
        assert!(
            !is_declared(&Method::DELETE, "/api/v1/namespaces/ns/pods/p"),
            "pods go by eviction"
        );
        assert!(!is_declared(&Method::PATCH, "/api/v1/nodes/n1"));
        assert!(!is_declared(&Method::GET, "/api/v1/secrets"));
        assert!(is_declared(
            &Method::GET,
            "/apis/storage.k8s.io/v1/csistoragecapacities?watch=true"
        ));
        assert!(is_declared(&Method::GET, "/api/v1/persistentvolumeclaims?"));
        assert!(
            !is_declared(
                &Method::PATCH,
                "/api/v1/namespaces/ns/persistentvolumeclaims/c"
            ),
            "storage is read only"
        );
        assert!(!is_declared(&Method::GET, "/metrics"));
        // Any infrastructure template kind, read only.
        assert!(is_declared(
            &Method::GET,
            "/apis/infrastructure.cluster.x-k8s.io/v1beta2/namespaces/ns/awsmachinetemplates?watch=true"
        ));
        assert!(is_declared(
            &Method::GET,
            "/apis/infrastructure.cluster.x-k8s.io/v1beta1/dockermachinetemplates?"
        ));
        assert!(!is_declared(
            &Method::GET,
            "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/ns/dockermachinetemplates/t"
        ));
        assert!(!is_declared(
            &Method::PATCH,
            "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/ns/dockermachinetemplates/t"
        ));
        assert!(!is_declared(
            &Method::GET,
            "/apis/infrastructure.example.com/v1/dockermachinetemplates?"
        ));
    }

    /// (group, resource, verb) granted by one role.
    type Grants = FxHashSet<(String, String, String)>;

    fn strs(v: &Value, field: &str, what: &str) -> Vec<String> {
        v.get(field)
            .and_then(Value::as_sequence)
            .unwrap_or_else(|| panic!("{what}: {field} is not a list"))
            .iter()
            .map(|s| {
                let s = s
                    .as_str()
                    .unwrap_or_else(|| panic!("{what}: {field} holds a non-string"));
                // The one wildcard: every resource of a group, declared as such in API_CALLS
                // (which the comparisons below hold the grants to).
                assert!(
                    !s.contains('*') || (field == "resources" && s == "*"),
                    "{what}: wildcard {s:?} in {field}"
                );
                s.to_string()
            })
            .collect()
    }

    fn grants(doc: &Value, what: &str) -> Grants {
        let mut out = Grants::default();
        let rules = doc
            .get("rules")
            .and_then(Value::as_sequence)
            .unwrap_or_else(|| panic!("{what}: no rules"));
        for rule in rules {
            assert!(
                rule.get("nonResourceURLs").is_none(),
                "{what}: nonResourceURLs"
            );
            assert!(
                rule.get("resourceNames").is_none(),
                "{what}: resourceNames unsupported here"
            );
            for g in strs(rule, "apiGroups", what) {
                for r in strs(rule, "resources", what) {
                    for v in strs(rule, "verbs", what) {
                        assert!(
                            out.insert((g.clone(), r.clone(), v.clone())),
                            "{what}: {g} {r} {v} granted twice"
                        );
                    }
                }
            }
        }
        out
    }

    fn str_at<'a>(v: &'a Value, path: &[&str]) -> &'a str {
        let mut cur = v;
        for p in path {
            cur = cur.get(*p).unwrap_or_else(|| panic!("missing {path:?}"));
        }
        cur.as_str()
            .unwrap_or_else(|| panic!("{path:?} is not a string"))
    }

    #[test]
    fn rbac_grants_exactly_the_declared_calls() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/rbac.yaml"
        ));
        let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(text)
            .map(|d| serde::Deserialize::deserialize(d).expect("rbac.yaml parses"))
            .filter(|d: &Value| !d.is_null())
            .collect();
        let of_kind = |k: &str| -> Vec<&Value> {
            docs.iter()
                .filter(|d| d.get("kind").and_then(Value::as_str) == Some(k))
                .collect()
        };
        let sa = of_kind("ServiceAccount");
        assert_eq!(sa.len(), 1);
        assert_eq!(str_at(sa[0], &["metadata", "name"]), "cluster-autoscaler");
        assert_eq!(str_at(sa[0], &["metadata", "namespace"]), "kube-system");
        let cluster_roles = of_kind("ClusterRole");
        let roles = of_kind("Role");
        assert_eq!((cluster_roles.len(), roles.len()), (1, 1));
        assert_eq!(str_at(roles[0], &["metadata", "namespace"]), "kube-system");
        let cluster = grants(cluster_roles[0], "ClusterRole");
        let own = grants(roles[0], "Role");

        // Bindings: each role bound to the ServiceAccount (and only to it).
        for (binding_kind, role_kind, role) in [
            ("ClusterRoleBinding", "ClusterRole", cluster_roles[0]),
            ("RoleBinding", "Role", roles[0]),
        ] {
            let b = of_kind(binding_kind);
            assert_eq!(b.len(), 1, "{binding_kind}");
            assert_eq!(str_at(b[0], &["roleRef", "kind"]), role_kind);
            assert_eq!(
                str_at(b[0], &["roleRef", "apiGroup"]),
                "rbac.authorization.k8s.io"
            );
            assert_eq!(
                str_at(b[0], &["roleRef", "name"]),
                str_at(role, &["metadata", "name"])
            );
            let subjects = b[0]
                .get("subjects")
                .and_then(Value::as_sequence)
                .expect("subjects");
            assert_eq!(subjects.len(), 1, "{binding_kind}");
            assert_eq!(str_at(&subjects[0], &["kind"]), "ServiceAccount");
            assert_eq!(str_at(&subjects[0], &["name"]), "cluster-autoscaler");
            assert_eq!(str_at(&subjects[0], &["namespace"]), "kube-system");
        }
        if let Some(rb) = of_kind("RoleBinding").first() {
            assert_eq!(str_at(rb, &["metadata", "namespace"]), "kube-system");
        }

        // Declared -> granted, by the right role.
        for c in API_CALLS {
            let key = (
                c.group.to_string(),
                c.resource.to_string(),
                c.verb.to_string(),
            );
            let (right, wrong) = if c.namespaced_only {
                (&own, &cluster)
            } else {
                (&cluster, &own)
            };
            assert!(right.contains(&key), "{c:?} is not granted by its role");
            assert!(
                !wrong.contains(&key),
                "{c:?} is granted by the other role too"
            );
        }
        // Granted -> declared (no extra privilege).
        for (g, r, v) in cluster.iter().chain(own.iter()) {
            assert!(
                API_CALLS
                    .iter()
                    .any(|c| c.group == g && c.resource == r && c.verb == v),
                "{g:?} {r} {v} is granted but never called"
            );
        }
        assert_eq!(cluster.len() + own.len(), API_CALLS.len());
    }

    #[test]
    fn the_namespaced_cluster_api_role_grants_exactly_the_cluster_api_calls() {
        let text = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/rbac-clusterapi-namespaced.yaml"
        ));
        let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(text)
            .map(|d| serde::Deserialize::deserialize(d).expect("the manifest parses"))
            .filter(|d: &Value| !d.is_null())
            .collect();
        let kinds: Vec<&str> = docs.iter().map(|d| str_at(d, &["kind"])).collect();
        assert_eq!(kinds, ["Role", "RoleBinding"]);
        let (role, binding) = (&docs[0], &docs[1]);
        let namespace = str_at(role, &["metadata", "namespace"]);
        assert_eq!(str_at(binding, &["metadata", "namespace"]), namespace);
        assert_eq!(
            str_at(binding, &["roleRef", "name"]),
            str_at(role, &["metadata", "name"])
        );
        // The Cluster API objects and the infrastructure templates they reference, both read
        // in the auto-discovery namespace.
        let groups = [
            "cluster.x-k8s.io",
            autoscaler_clusterapi::INFRASTRUCTURE_GROUP,
        ];
        let wanted: Grants = API_CALLS
            .iter()
            .filter(|c| groups.contains(&c.group))
            .map(|c| (c.group.into(), c.resource.into(), c.verb.into()))
            .collect();
        assert!(!wanted.is_empty());
        assert_eq!(grants(role, "Role"), wanted);
        // The Kustomize overlay for the management cluster carries its own copy of the Role
        // (an overlay cannot load files above its directory): the same rules.
        let overlay = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../kustomize/management-workload/management/rbac.yaml"
        ));
        let docs: Vec<Value> = serde_yaml_ng::Deserializer::from_str(overlay)
            .map(|d| serde::Deserialize::deserialize(d).expect("the overlay's rbac parses"))
            .filter(|d: &Value| !d.is_null())
            .collect();
        let roles: Vec<&Value> = (docs.iter())
            .filter(|d| str_at(d, &["kind"]) == "Role")
            .collect();
        assert_eq!(roles.len(), 1);
        assert_eq!(grants(roles[0], "overlay Role"), wanted);
    }
}
