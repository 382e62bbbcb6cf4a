//! Whether the API server is one this autoscaler supports: its version (`/version`) and the APIs
//! the autoscaler reads and writes, found by discovery before it watches anything or takes the
//! Lease.
//!
//! [`check`] decides, as a pure function of what discovery found: a server older than
//! [`MIN_MINOR`] or one that does not serve a needed API (at the version used) is unsupported,
//! and the error names what is missing. [`discover`] only asks the server. It never retries
//! (the caller does) and never treats a server newer than the API types this build knows as
//! unsupported: the APIs used are stable.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResourceList;

/// The oldest supported minor version of Kubernetes 1.x: 1.22 is the first release serving the
/// Eviction API at `policy/v1` (1.21 added `policy/v1` PodDisruptionBudgets, not Evictions).
pub const MIN_MINOR: u32 = 22;

/// The newest minor version of Kubernetes 1.x whose API types this build uses.
pub const MAX_KNOWN_MINOR: u32 = 34;

/// One API the autoscaler needs: a resource at a group-version, and what it is used for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequiredApi {
    /// API group (`""` for core).
    pub group: &'static str,
    /// Version.
    pub version: &'static str,
    /// Resource (plural).
    pub resource: &'static str,
    /// What the autoscaler does with it.
    pub used_for: &'static str,
}

impl RequiredApi {
    /// `v1` or `group/version`.
    pub fn group_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }
}

impl std::fmt::Display for RequiredApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.group_version(), self.resource)
    }
}

const fn api(
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    used_for: &'static str,
) -> RequiredApi {
    RequiredApi {
        group,
        version,
        resource,
        used_for,
    }
}

/// The APIs every run needs (the Lease is added when leader election is on).
pub const REQUIRED: &[RequiredApi] = &[
    api("", "v1", "nodes", "watching and tainting nodes"),
    api("", "v1", "pods", "watching pods"),
    api("", "v1", "namespaces", "watching namespaces"),
    api(
        "",
        "v1",
        "configmaps",
        "the status and priority-expander ConfigMaps",
    ),
    api("", "v1", "replicationcontrollers", "watching pod owners"),
    api("apps", "v1", "daemonsets", "watching DaemonSets"),
    api("apps", "v1", "replicasets", "watching pod owners"),
    api("apps", "v1", "statefulsets", "watching pod owners"),
    api("batch", "v1", "jobs", "watching pod owners"),
    api(
        "policy",
        "v1",
        "poddisruptionbudgets",
        "respecting PodDisruptionBudgets",
    ),
    api("events.k8s.io", "v1", "events", "publishing events"),
];

/// The Lease leader election needs.
pub const LEASE: RequiredApi = api("coordination.k8s.io", "v1", "leases", "leader election");

/// The Eviction API: the `pods/eviction` subresource answering `policy/v1` Evictions.
pub const EVICTION: RequiredApi = api("policy", "v1", "evictions", "draining nodes");

/// The group-versions [`discover`] asks about for `leader_elect`.
pub fn group_versions(leader_elect: bool) -> BTreeSet<String> {
    required(leader_elect)
        .iter()
        .map(RequiredApi::group_version)
        .collect()
}

fn required(leader_elect: bool) -> Vec<RequiredApi> {
    let mut all = REQUIRED.to_vec();
    if leader_elect {
        all.push(LEASE);
    }
    all
}

/// What discovery found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Discovered {
    /// `gitVersion` of `/version` (`v1.30.2`), if it answered.
    pub git_version: Option<String>,
    /// `(major, minor)` read from `/version`, if it parsed.
    pub version: Option<(u32, u32)>,
    /// Per group-version asked about and served, the resources it serves (with subresources,
    /// `pods/eviction`). A group-version not served is absent.
    pub served: BTreeMap<String, BTreeSet<String>>,
    /// The group-version of the Eviction the core group's `pods/eviction` answers, if served.
    pub eviction: Option<String>,
}

impl Discovered {
    /// Records one group-version's resource list.
    pub fn add(&mut self, list: &APIResourceList) {
        let names = list.resources.iter().map(|r| r.name.clone()).collect();
        if list.group_version == "v1" {
            self.eviction = list
                .resources
                .iter()
                .find(|r| r.name == "pods/eviction")
                .map(|r| match (&r.group, &r.version) {
                    (Some(g), Some(v)) => format!("{g}/{v}"),
                    // An older server does not say; it served policy/v1beta1 then.
                    _ => "policy/v1beta1".to_string(),
                });
        }
        self.served.insert(list.group_version.clone(), names);
    }

    /// Whether `api` is served.
    fn serves(&self, api: &RequiredApi) -> bool {
        self.served
            .get(&api.group_version())
            .is_some_and(|rs| rs.contains(api.resource))
    }
}

/// `(major, minor)` from `/version`'s fields, as managed services report them too (`"28+"`,
/// `v1.28.3-eks-1234`); `None` when neither parses.
pub fn parse_version(major: &str, minor: &str, git_version: &str) -> Option<(u32, u32)> {
    let digits = |s: &str| -> Option<u32> {
        let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
        s[..end].parse().ok()
    };
    if let (Some(a), Some(b)) = (digits(major), digits(minor)) {
        return Some((a, b));
    }
    let mut parts = git_version.trim_start_matches('v').splitn(3, '.');
    Some((digits(parts.next()?)?, digits(parts.next()?)?))
}

/// Why the server is not supported.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unsupported {
    /// Older than [`MIN_MINOR`].
    #[error(
        "the API server runs Kubernetes {found}, older than 1.{MIN_MINOR}; supported Kubernetes \
         versions: 1.{MIN_MINOR} to 1.{MAX_KNOWN_MINOR}"
    )]
    TooOld {
        /// `gitVersion` or `major.minor`.
        found: String,
    },
    /// Needed APIs not served.
    #[error(
        "the API server does not serve {}; supported Kubernetes versions: 1.{MIN_MINOR} to \
         1.{MAX_KNOWN_MINOR}",
        .missing.iter().map(|a| format!("{a} (for {})", a.used_for)).collect::<Vec<_>>().join(", ")
    )]
    Missing {
        /// What is missing.
        missing: Vec<RequiredApi>,
    },
}

/// What [`check`] notes about a supported server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Supported {
    /// Within the known range.
    Yes,
    /// Its version did not parse; the APIs are all there.
    UnknownVersion,
    /// Newer than [`MAX_KNOWN_MINOR`]; the APIs are all there.
    Newer,
}

/// Decides whether the server `found` describes is supported, for a run with or without
/// leader election.
pub fn check(found: &Discovered, leader_elect: bool) -> Result<Supported, Unsupported> {
    if let Some((major, minor)) = found.version
        && major == 1
        && minor < MIN_MINOR
    {
        return Err(Unsupported::TooOld {
            found: found
                .git_version
                .clone()
                .unwrap_or_else(|| format!("{major}.{minor}")),
        });
    }
    let mut missing: Vec<RequiredApi> = required(leader_elect)
        .into_iter()
        .filter(|a| !found.serves(a))
        .collect();
    if found.eviction.as_deref() != Some("policy/v1") {
        missing.push(EVICTION);
    }
    if !missing.is_empty() {
        return Err(Unsupported::Missing { missing });
    }
    Ok(match found.version {
        None => Supported::UnknownVersion,
        Some((major, minor)) if major > 1 || minor > MAX_KNOWN_MINOR => Supported::Newer,
        Some(_) => Supported::Yes,
    })
}

/// Asks the server for `/version` and the resources of the group-versions needed (a
/// group-version answering `404` is not served). Other errors are returned: the caller retries.
pub async fn discover(
    client: &kube::Client,
    leader_elect: bool,
) -> Result<Discovered, kube::Error> {
    let mut found = Discovered::default();
    match client.apiserver_version().await {
        Ok(info) => {
            found.version = parse_version(&info.major, &info.minor, &info.git_version);
            found.git_version = Some(info.git_version);
        }
        Err(e) if is_not_found(&e) => {}
        Err(e) => return Err(e),
    }
    for gv in group_versions(leader_elect) {
        let list = if gv == "v1" {
            client.list_core_api_resources("v1").await
        } else {
            client.list_api_group_resources(&gv).await
        };
        match list {
            Ok(l) => found.add(&l),
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(found)
}

/// Whether the API answered `404 Not Found`.
pub fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIResource;

    fn list(gv: &str, names: &[&str]) -> APIResourceList {
        APIResourceList {
            group_version: gv.to_string(),
            resources: names
                .iter()
                .map(|n| APIResource {
                    name: n.to_string(),
                    ..APIResource::default()
                })
                .collect(),
        }
    }

    fn eviction(version: &str) -> APIResource {
        APIResource {
            name: "pods/eviction".into(),
            group: Some("policy".into()),
            version: Some(version.into()),
            kind: "Eviction".into(),
            ..APIResource::default()
        }
    }

    /// What a server of version 1.`minor` serves, with or without policy/v1 and its Evictions.
    fn server(minor: u32, policy_v1: bool, eviction_v1: bool) -> Discovered {
        let mut d = Discovered {
            git_version: Some(format!("v1.{minor}.3")),
            version: Some((1, minor)),
            ..Discovered::default()
        };
        let mut core = list(
            "v1",
            &[
                "nodes",
                "pods",
                "namespaces",
                "configmaps",
                "replicationcontrollers",
            ],
        );
        core.resources
            .push(eviction(if eviction_v1 { "v1" } else { "v1beta1" }));
        d.add(&core);
        d.add(&list(
            "apps/v1",
            &["daemonsets", "replicasets", "statefulsets"],
        ));
        d.add(&list("batch/v1", &["jobs"]));
        if policy_v1 {
            d.add(&list("policy/v1", &["poddisruptionbudgets"]));
        }
        d.add(&list("events.k8s.io/v1", &["events"]));
        d.add(&list("coordination.k8s.io/v1", &["leases"]));
        d
    }

    #[test]
    fn a_current_server_is_supported() {
        assert_eq!(check(&server(30, true, true), true), Ok(Supported::Yes));
        assert_eq!(check(&server(22, true, true), true), Ok(Supported::Yes));
        assert_eq!(check(&server(36, true, true), true), Ok(Supported::Newer));
        let mut unknown = server(30, true, true);
        unknown.version = None;
        assert_eq!(check(&unknown, true), Ok(Supported::UnknownVersion));
    }

    #[test]
    fn an_old_server_is_refused_with_its_version() {
        let err = check(&server(20, false, false), true).expect_err("1.20");
        assert_eq!(
            err,
            Unsupported::TooOld {
                found: "v1.20.3".into()
            }
        );
        assert!(err.to_string().contains("v1.20.3"), "{err}");
        assert!(err.to_string().contains("1.22"), "{err}");
    }

    #[test]
    fn a_missing_api_is_named_even_when_the_version_would_do() {
        // A server that claims a supported version but does not serve policy/v1.
        let err = check(&server(30, false, true), true).expect_err("no policy/v1");
        let text = err.to_string();
        assert!(text.contains("policy/v1 poddisruptionbudgets"), "{text}");
        assert!(
            text.contains("policy/v1 poddisruptionbudgets (for respecting PodDisruptionBudgets)"),
            "{text}"
        );
        // 1.21 serves policy/v1 budgets but evicts at policy/v1beta1 only.
        let mut d = server(21, true, false);
        d.version = None;
        let err = check(&d, true).expect_err("no v1 Evictions");
        assert_eq!(
            err,
            Unsupported::Missing {
                missing: vec![EVICTION]
            }
        );
        assert!(err.to_string().contains("policy/v1 evictions"), "{err}");
    }

    #[test]
    fn the_lease_is_needed_only_with_leader_election() {
        let mut d = server(30, true, true);
        d.served.remove("coordination.k8s.io/v1");
        assert_eq!(check(&d, false), Ok(Supported::Yes));
        assert_eq!(
            check(&d, true),
            Err(Unsupported::Missing {
                missing: vec![LEASE]
            })
        );
        assert!(group_versions(true).contains("coordination.k8s.io/v1"));
        assert!(!group_versions(false).contains("coordination.k8s.io/v1"));
    }

    #[test]
    fn every_missing_api_is_listed() {
        let d = Discovered::default();
        let Err(Unsupported::Missing { missing }) = check(&d, true) else {
            panic!("nothing is served");
        };
        assert_eq!(missing.len(), REQUIRED.len() + 2);
    }

    #[test]
    fn versions_parse_as_managed_services_report_them() {
        assert_eq!(parse_version("1", "30", "v1.30.2"), Some((1, 30)));
        assert_eq!(parse_version("1", "28+", "v1.28.3-eks-1"), Some((1, 28)));
        assert_eq!(parse_version("", "", "v1.27.1-gke.2"), Some((1, 27)));
        assert_eq!(parse_version("", "", "weird"), None);
    }
}
