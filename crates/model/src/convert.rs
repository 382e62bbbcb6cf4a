//! Conversion of `k8s_openapi` API objects (Pod, Node, Namespace) into the compact model views.
//!
//! This module decides what the scheduler-relevant meaning of an API object is: effective pod
//! requests exactly as kube-scheduler computes them (app containers, sidecars, init containers,
//! pod-level requests, overhead), the API server's defaulting that an undefaulted YAML snapshot
//! lacks (request = limit when only a limit is given, `hostPort = containerPort` on the host
//! network, operator `Equal`, protocol `TCP`), and the normalisation of affinity terms and spread
//! constraints (own namespace, `matchLabelKeys` / `mismatchLabelKeys` merged into selectors).
//!
//! It must never panic on any input, never read the clock and never perform I/O: every malformed
//! field becomes a [`ModelError`] naming the object (`Pod ns/name`, `Node name`) and the field
//! path (`spec.initContainers[1].resources.requests.memory`).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1 as api;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use smallvec::SmallVec;

use crate::affinity::{
    InclusionPolicy, NamespaceLabels, NodeSelector, NodeSelectorOp, NodeSelectorRequirement,
    NodeSelectorTerm, PodAffinityTerm, TopologySpreadConstraint, WhenUnsatisfiable,
};
use crate::intern::Sym;
use crate::labels::{LabelSelector, Labels, SelectorOp, SelectorRequirement};
use crate::node::{Node, NodeCondition};
use crate::pod::{HostPort, ModelError, OwnerRef, Pod, PodCondition, PodPhase, Volume, VolumeRef};
use crate::quantity::{Quantity, QuantityError};
use crate::recent::RecentTable;
use crate::resources::{ResourceName, Resources};
use crate::taints::{Taint, TaintEffect, Toleration, TolerationOp};

/// The namespace a pod without `metadata.namespace` lives in (what `kubectl` and the API server
/// assume for a namespaced object without one).
const DEFAULT_NAMESPACE: &str = "default";

/// The object being converted, for error messages.
struct Ctx {
    object: String,
}

impl Ctx {
    fn invalid(
        &self,
        field: impl Into<String>,
        value: impl Into<String>,
        why: impl Into<String>,
    ) -> ModelError {
        ModelError::Invalid {
            object: self.object.clone(),
            field: field.into(),
            value: value.into(),
            why: why.into(),
        }
    }

    fn missing(&self, field: impl Into<String>) -> ModelError {
        ModelError::Missing {
            object: self.object.clone(),
            field: field.into(),
        }
    }

    fn quantity(&self, field: impl Into<String>, source: QuantityError) -> ModelError {
        ModelError::Quantity {
            object: self.object.clone(),
            field: field.into(),
            error: source,
        }
    }
}

/// Parses a quantity string with the exact quantity parser.
fn parse_quantity(text: &str) -> Result<Quantity, QuantityError> {
    crate::quantity::parse(text)
}

/// Milliseconds since the Unix epoch of an API timestamp.
fn time_ms(t: Option<&meta::Time>) -> Option<i64> {
    t.map(|t| t.0.as_millisecond())
}

/// Labels from an optional string map.
fn labels_of(map: Option<&BTreeMap<String, String>>) -> Labels {
    map.map_or_else(Labels::new, |m| Labels::from_pairs(m.iter()))
}

/// Annotations sorted by key (a `BTreeMap` already iterates in key order).
fn annotations_of(map: Option<&BTreeMap<String, String>>) -> Vec<(Arc<str>, Arc<str>)> {
    map.map_or_else(Vec::new, |m| {
        m.iter()
            .map(|(k, v)| (Arc::from(k.as_str()), Arc::from(v.as_str())))
            .collect()
    })
}

// ---------------------------------------------------------------------------------------------
// Resources
// ---------------------------------------------------------------------------------------------

/// The amount of one resource in the model's unit: millicores for CPU (rounded up), whole units
/// rounded up for everything else.
fn resource_value(
    ctx: &Ctx,
    field: &str,
    name: ResourceName,
    q: &ApiQuantity,
) -> Result<i64, ModelError> {
    let parsed = parse_quantity(&q.0).map_err(|e| ctx.quantity(field, e))?;
    let value = if name.is_milli() {
        parsed.to_milli_ceil()
    } else {
        parsed.to_units_ceil()
    }
    .map_err(|e| ctx.quantity(field, e))?;
    if value < 0 {
        return Err(ctx.invalid(
            field,
            q.0.as_str(),
            "a resource amount must not be negative",
        ));
    }
    Ok(value)
}

/// Adds every entry of a resource list (`status.allocatable`, `spec.overhead`, ...) at `path`
/// into `out`, replacing what `out` had for those resources.
fn resource_list_into(
    ctx: &Ctx,
    path: &str,
    list: &BTreeMap<String, ApiQuantity>,
    out: &mut Resources,
) -> Result<(), ModelError> {
    for (key, q) in list {
        let name = ResourceName::parse(key);
        let value = resource_value(ctx, &format!("{path}.{key}"), name, q)?;
        out.set(name, value);
    }
    Ok(())
}

/// A resource list as [`Resources`].
fn resource_list(
    ctx: &Ctx,
    path: &str,
    list: Option<&BTreeMap<String, ApiQuantity>>,
) -> Result<Resources, ModelError> {
    let mut out = Resources::default();
    if let Some(list) = list {
        resource_list_into(ctx, path, list, &mut out)?;
    }
    Ok(out)
}

/// Requests of a `ResourceRequirements`, with the API server's defaulting applied: a resource
/// that has a limit but no request is requested at its limit. `path` is the path of the
/// `resources` field.
fn requests_with_defaults(
    ctx: &Ctx,
    path: &str,
    res: Option<&api::ResourceRequirements>,
) -> Result<Resources, ModelError> {
    let mut out = Resources::default();
    let Some(res) = res else { return Ok(out) };
    let requests = res.requests.as_ref();
    for (key, q) in requests.into_iter().flatten() {
        let name = ResourceName::parse(key);
        out.set(
            name,
            resource_value(ctx, &format!("{path}.requests.{key}"), name, q)?,
        );
    }
    for (key, q) in res.limits.iter().flatten() {
        if !requests.is_some_and(|r| r.contains_key(key)) {
            let name = ResourceName::parse(key);
            out.set(
                name,
                resource_value(ctx, &format!("{path}.limits.{key}"), name, q)?,
            );
        }
    }
    Ok(out)
}

/// Whether a resource may be set at pod level (`spec.resources`): CPU, memory and hugepages.
fn is_pod_level_resource(name: &str) -> bool {
    name == "cpu" || name == "memory" || name.starts_with("hugepages-")
}

/// Whether an init container is a sidecar (restartable init container).
fn is_sidecar(c: &api::Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// Which view of a container's requests an aggregate is computed from (in-place resize lets the
/// spec, what the kubelet allocated and what it actuated differ for a running pod).
#[derive(Clone, Copy, PartialEq, Eq)]
enum RequestSource {
    /// The spec, with limit-to-request defaulting.
    Spec,
    /// `status.containerStatuses[].allocatedResources`, else the spec.
    Allocated,
    /// `status.containerStatuses[].resources.requests`, else allocated, else the spec.
    Actuated,
}

/// The status of the container named `name` and its field path: app statuses are searched
/// first, then init statuses, as the scheduler does.
fn container_status<'a>(
    status: Option<&'a api::PodStatus>,
    name: &str,
) -> Option<(String, &'a api::ContainerStatus)> {
    let status = status?;
    let find = |list: Option<&'a Vec<api::ContainerStatus>>, field: &str| {
        list.into_iter()
            .flatten()
            .enumerate()
            .find(|(_, cs)| cs.name == name)
            .map(|(i, cs)| (format!("status.{field}[{i}]"), cs))
    };
    find(status.container_statuses.as_ref(), "containerStatuses").or_else(|| {
        find(
            status.init_container_statuses.as_ref(),
            "initContainerStatuses",
        )
    })
}

/// The requests of one container (at `path`, e.g. `spec.containers[0]`) from `source`.
/// `infeasible`: a resize is pending as infeasible, so the spec is not used as a fallback.
fn container_requests(
    ctx: &Ctx,
    path: &str,
    c: &api::Container,
    status: Option<&api::PodStatus>,
    source: RequestSource,
    infeasible: bool,
) -> Result<Resources, ModelError> {
    if source != RequestSource::Spec
        && let Some((status_path, cs)) = container_status(status, &c.name)
    {
        if source == RequestSource::Actuated
            && let Some(actuated) = cs.resources.as_ref().and_then(|r| r.requests.as_ref())
        {
            let field = format!("{status_path}.resources.requests");
            return resource_list(ctx, &field, Some(actuated));
        }
        if let Some(allocated) = cs.allocated_resources.as_ref() {
            let field = format!("{status_path}.allocatedResources");
            return resource_list(ctx, &field, Some(allocated));
        }
    }
    if source != RequestSource::Spec && infeasible {
        return Ok(Resources::default());
    }
    requests_with_defaults(ctx, &format!("{path}.resources"), c.resources.as_ref())
}

/// The container aggregate from one source: app containers summed, every sidecar added to that
/// sum, and the maximum with each regular init container plus the sidecars started before it.
fn aggregate_requests(
    ctx: &Ctx,
    spec: &api::PodSpec,
    status: Option<&api::PodStatus>,
    source: RequestSource,
    infeasible: bool,
) -> Result<Resources, ModelError> {
    let mut sum = Resources::default();
    for (i, c) in spec.containers.iter().enumerate() {
        let path = format!("spec.containers[{i}]");
        sum.add(&container_requests(
            ctx, &path, c, status, source, infeasible,
        )?);
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let path = format!("spec.initContainers[{i}]");
        let own = container_requests(ctx, &path, c, status, source, infeasible)?;
        if is_sidecar(c) {
            sum.add(&own);
            sidecars.add(&own);
            init_peak.max_with(&sidecars);
        } else {
            let mut during = own;
            during.add(&sidecars);
            init_peak.max_with(&during);
        }
    }
    sum.max_with(&init_peak);
    Ok(sum)
}

/// Whether any container status reports resources (only then can an in-place resize make the
/// status differ from the spec).
fn status_reports_resources(status: Option<&api::PodStatus>) -> bool {
    status.is_some_and(|s| {
        s.container_statuses
            .iter()
            .chain(s.init_container_statuses.iter())
            .flatten()
            .any(|cs| cs.allocated_resources.is_some() || cs.resources.is_some())
    })
}

/// Whether the pod's `PodResizePending` condition says the resize is infeasible.
fn resize_infeasible(status: Option<&api::PodStatus>) -> bool {
    status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodResizePending"))
        .is_some_and(|c| c.reason.as_deref() == Some("Infeasible"))
}

/// Effective pod requests as kube-scheduler computes them (with in-place pod resize enabled).
///
/// The container aggregate ([`aggregate_requests`]) is taken from the spec; for a pod whose
/// container statuses report allocated or actuated resources it is the component-wise maximum
/// of the spec, allocated and actuated aggregates (without the spec when the resize is
/// infeasible). Pod-level requests (`spec.resources`) replace the aggregate for the resources
/// they cover; `spec.overhead` is added; `pods` is 1.
fn pod_requests(
    ctx: &Ctx,
    spec: &api::PodSpec,
    status: Option<&api::PodStatus>,
) -> Result<Resources, ModelError> {
    let mut sum = if status_reports_resources(status) {
        let infeasible = resize_infeasible(status);
        let allocated =
            aggregate_requests(ctx, spec, status, RequestSource::Allocated, infeasible)?;
        let mut out = aggregate_requests(ctx, spec, status, RequestSource::Actuated, infeasible)?;
        out.max_with(&allocated);
        if !infeasible {
            out.max_with(&aggregate_requests(
                ctx,
                spec,
                status,
                RequestSource::Spec,
                false,
            )?);
        }
        out
    } else {
        aggregate_requests(ctx, spec, status, RequestSource::Spec, false)?
    };

    if let Some(pod_level) = spec.resources.as_ref() {
        let explicit = pod_level.requests.as_ref();
        for (key, q) in explicit.into_iter().flatten() {
            if is_pod_level_resource(key) {
                let name = ResourceName::parse(key);
                sum.set(
                    name,
                    resource_value(ctx, &format!("spec.resources.requests.{key}"), name, q)?,
                );
            }
        }
        // Defaulting: a pod-level limit without a pod-level request becomes the request when no
        // container requests that resource.
        for (key, q) in pod_level.limits.iter().flatten() {
            if is_pod_level_resource(key) && !explicit.is_some_and(|r| r.contains_key(key)) {
                let name = ResourceName::parse(key);
                let value = resource_value(ctx, &format!("spec.resources.limits.{key}"), name, q)?;
                if sum.get(name) == 0 {
                    sum.set(name, value);
                }
            }
        }
    }

    sum.add(&resource_list(
        ctx,
        "spec.overhead",
        spec.overhead.as_ref(),
    )?);
    sum.pods = 1;
    Ok(sum)
}

// ---------------------------------------------------------------------------------------------
// Selectors and affinity
// ---------------------------------------------------------------------------------------------

fn selector_op(ctx: &Ctx, field: &str, op: &str) -> Result<SelectorOp, ModelError> {
    match op {
        "In" => Ok(SelectorOp::In),
        "NotIn" => Ok(SelectorOp::NotIn),
        "Exists" => Ok(SelectorOp::Exists),
        "DoesNotExist" => Ok(SelectorOp::DoesNotExist),
        other => Err(ctx.invalid(
            field,
            other,
            "operator must be one of In, NotIn, Exists, DoesNotExist",
        )),
    }
}

/// A `metav1.LabelSelector` of any object (`object` as errors name it, e.g.
/// `PodDisruptionBudget ns/name`) at `path`.
pub(crate) fn label_selector(
    object: &str,
    path: &str,
    sel: &meta::LabelSelector,
) -> Result<LabelSelector, ModelError> {
    selector_of(
        &Ctx {
            object: object.to_string(),
        },
        path,
        sel,
    )
}

/// A `metav1.LabelSelector` at `path`.
fn selector_of(
    ctx: &Ctx,
    path: &str,
    sel: &meta::LabelSelector,
) -> Result<LabelSelector, ModelError> {
    let mut out = LabelSelector {
        match_labels: labels_of(sel.match_labels.as_ref()),
        match_expressions: Vec::new(),
    };
    for (i, r) in sel.match_expressions.iter().flatten().enumerate() {
        let op = selector_op(
            ctx,
            &format!("{path}.matchExpressions[{i}].operator"),
            &r.operator,
        )?;
        out.match_expressions.push(SelectorRequirement {
            key: Sym::new(&r.key),
            op,
            values: r.values.iter().flatten().map(|v| Sym::new(v)).collect(),
        });
    }
    Ok(out)
}

/// ANDs `key op [value]` into `selector` for each of `keys` that the pod carries as a label,
/// skipping a requirement the selector already has (the API server may have merged it already).
fn merge_label_keys(
    selector: &mut LabelSelector,
    pod_labels: &Labels,
    keys: &[Sym],
    op: SelectorOp,
) {
    for &key in keys {
        if let Some(value) = pod_labels.get(key) {
            let req = SelectorRequirement {
                key,
                op,
                values: vec![value],
            };
            if !selector.match_expressions.contains(&req) {
                selector.match_expressions.push(req);
            }
        }
    }
}

fn node_selector_op(ctx: &Ctx, field: &str, op: &str) -> Result<NodeSelectorOp, ModelError> {
    match op {
        "In" => Ok(NodeSelectorOp::In),
        "NotIn" => Ok(NodeSelectorOp::NotIn),
        "Exists" => Ok(NodeSelectorOp::Exists),
        "DoesNotExist" => Ok(NodeSelectorOp::DoesNotExist),
        "Gt" => Ok(NodeSelectorOp::Gt),
        "Lt" => Ok(NodeSelectorOp::Lt),
        other => Err(ctx.invalid(
            field,
            other,
            "operator must be one of In, NotIn, Exists, DoesNotExist, Gt, Lt",
        )),
    }
}

fn node_selector_requirements(
    ctx: &Ctx,
    path: &str,
    reqs: Option<&Vec<api::NodeSelectorRequirement>>,
) -> Result<Vec<NodeSelectorRequirement>, ModelError> {
    let mut out = Vec::new();
    for (i, r) in reqs.into_iter().flatten().enumerate() {
        let op = node_selector_op(ctx, &format!("{path}[{i}].operator"), &r.operator)?;
        out.push(NodeSelectorRequirement {
            key: Sym::new(&r.key),
            op,
            values: r.values.iter().flatten().map(|v| Sym::new(v)).collect(),
        });
    }
    Ok(out)
}

/// The required node affinity (`spec.affinity.nodeAffinity.requiredDuringScheduling...`).
fn required_node_affinity(
    ctx: &Ctx,
    spec: &api::PodSpec,
) -> Result<Option<NodeSelector>, ModelError> {
    let Some(sel) = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
    else {
        return Ok(None);
    };
    let base = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms";
    let mut terms = Vec::with_capacity(sel.node_selector_terms.len());
    for (i, t) in sel.node_selector_terms.iter().enumerate() {
        terms.push(NodeSelectorTerm {
            match_expressions: node_selector_requirements(
                ctx,
                &format!("{base}[{i}].matchExpressions"),
                t.match_expressions.as_ref(),
            )?,
            match_fields: node_selector_requirements(
                ctx,
                &format!("{base}[{i}].matchFields"),
                t.match_fields.as_ref(),
            )?,
        });
    }
    Ok(Some(NodeSelector { terms }))
}

/// A `v1.NodeSelector` of any object (`object` as errors name it, e.g.
/// `PersistentVolume pv-1`) at `path` (its `nodeSelectorTerms` are read).
pub(crate) fn node_selector(
    object: &str,
    path: &str,
    sel: &api::NodeSelector,
) -> Result<NodeSelector, ModelError> {
    let ctx = Ctx {
        object: object.to_string(),
    };
    let mut terms = Vec::with_capacity(sel.node_selector_terms.len());
    for (i, t) in sel.node_selector_terms.iter().enumerate() {
        terms.push(NodeSelectorTerm {
            match_expressions: node_selector_requirements(
                &ctx,
                &format!("{path}.nodeSelectorTerms[{i}].matchExpressions"),
                t.match_expressions.as_ref(),
            )?,
            match_fields: node_selector_requirements(
                &ctx,
                &format!("{path}.nodeSelectorTerms[{i}].matchFields"),
                t.match_fields.as_ref(),
            )?,
        });
    }
    Ok(NodeSelector { terms })
}

/// One required pod (anti-)affinity term at `path`, normalised for the pod in `namespace`.
fn pod_affinity_term(
    ctx: &Ctx,
    path: &str,
    term: &api::PodAffinityTerm,
    namespace: Sym,
    pod_labels: &Labels,
) -> Result<PodAffinityTerm, ModelError> {
    let match_label_keys: Vec<Sym> = term
        .match_label_keys
        .iter()
        .flatten()
        .map(|k| Sym::new(k))
        .collect();
    let mismatch_label_keys: Vec<Sym> = term
        .mismatch_label_keys
        .iter()
        .flatten()
        .map(|k| Sym::new(k))
        .collect();
    // A missing selector selects no pod; label keys are not merged into it.
    let label_selector = match term.label_selector.as_ref() {
        None => None,
        Some(s) => {
            let mut sel = selector_of(ctx, &format!("{path}.labelSelector"), s)?;
            merge_label_keys(&mut sel, pod_labels, &match_label_keys, SelectorOp::In);
            merge_label_keys(
                &mut sel,
                pod_labels,
                &mismatch_label_keys,
                SelectorOp::NotIn,
            );
            Some(sel)
        }
    };
    let namespace_selector = match term.namespace_selector.as_ref() {
        None => None,
        Some(s) => Some(selector_of(ctx, &format!("{path}.namespaceSelector"), s)?),
    };
    let mut namespaces: Vec<Sym> = term
        .namespaces
        .iter()
        .flatten()
        .map(|n| Sym::new(n))
        .collect();
    if namespaces.is_empty() && namespace_selector.is_none() {
        namespaces.push(namespace);
    }
    Ok(PodAffinityTerm {
        label_selector,
        namespaces,
        namespace_selector,
        topology_key: Sym::new(&term.topology_key),
        match_label_keys,
        mismatch_label_keys,
    })
}

fn pod_affinity_terms(
    ctx: &Ctx,
    path: &str,
    terms: Option<&Vec<api::PodAffinityTerm>>,
    namespace: Sym,
    pod_labels: &Labels,
) -> Result<Vec<PodAffinityTerm>, ModelError> {
    let mut out = Vec::new();
    for (i, t) in terms.into_iter().flatten().enumerate() {
        out.push(pod_affinity_term(
            ctx,
            &format!("{path}[{i}]"),
            t,
            namespace,
            pod_labels,
        )?);
    }
    Ok(out)
}

fn inclusion_policy(
    ctx: &Ctx,
    field: &str,
    value: Option<&str>,
    default: InclusionPolicy,
) -> Result<InclusionPolicy, ModelError> {
    match value {
        None | Some("") => Ok(default),
        Some("Honor") => Ok(InclusionPolicy::Honor),
        Some("Ignore") => Ok(InclusionPolicy::Ignore),
        Some(other) => Err(ctx.invalid(field, other, "must be Honor or Ignore")),
    }
}

fn spread_constraint(
    ctx: &Ctx,
    path: &str,
    c: &api::TopologySpreadConstraint,
    pod_labels: &Labels,
) -> Result<TopologySpreadConstraint, ModelError> {
    if c.max_skew < 1 {
        return Err(ctx.invalid(
            format!("{path}.maxSkew"),
            c.max_skew.to_string(),
            "must be at least 1",
        ));
    }
    if let Some(m) = c.min_domains
        && m < 1
    {
        return Err(ctx.invalid(
            format!("{path}.minDomains"),
            m.to_string(),
            "must be at least 1",
        ));
    }
    let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
        "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
        "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
        other => {
            return Err(ctx.invalid(
                format!("{path}.whenUnsatisfiable"),
                other,
                "must be DoNotSchedule or ScheduleAnyway",
            ));
        }
    };
    let keys: Vec<Sym> = c
        .match_label_keys
        .iter()
        .flatten()
        .map(|k| Sym::new(k))
        .collect();
    let label_selector = match c.label_selector.as_ref() {
        None => None,
        Some(s) => {
            let mut sel = selector_of(ctx, &format!("{path}.labelSelector"), s)?;
            merge_label_keys(&mut sel, pod_labels, &keys, SelectorOp::In);
            Some(sel)
        }
    };
    Ok(TopologySpreadConstraint {
        max_skew: c.max_skew,
        topology_key: Sym::new(&c.topology_key),
        when_unsatisfiable,
        label_selector,
        min_domains: c.min_domains,
        node_affinity_policy: inclusion_policy(
            ctx,
            &format!("{path}.nodeAffinityPolicy"),
            c.node_affinity_policy.as_deref(),
            InclusionPolicy::Honor,
        )?,
        node_taints_policy: inclusion_policy(
            ctx,
            &format!("{path}.nodeTaintsPolicy"),
            c.node_taints_policy.as_deref(),
            InclusionPolicy::Ignore,
        )?,
    })
}

// ---------------------------------------------------------------------------------------------
// Taints, tolerations, ports, owners, status
// ---------------------------------------------------------------------------------------------

fn toleration(ctx: &Ctx, path: &str, t: &api::Toleration) -> Result<Toleration, ModelError> {
    let op = match t.operator.as_deref() {
        None | Some("") | Some("Equal") => TolerationOp::Equal,
        Some("Exists") => TolerationOp::Exists,
        Some(other) => {
            return Err(ctx.invalid(format!("{path}.operator"), other, "must be Equal or Exists"));
        }
    };
    let effect = match t.effect.as_deref() {
        None | Some("") => None,
        Some(e) => Some(TaintEffect::parse(e).ok_or_else(|| {
            ctx.invalid(
                format!("{path}.effect"),
                e,
                "must be NoSchedule, PreferNoSchedule or NoExecute",
            )
        })?),
    };
    Ok(Toleration {
        key: t.key.as_deref().filter(|k| !k.is_empty()).map(Sym::new),
        op,
        value: Sym::new(t.value.as_deref().unwrap_or("")),
        effect,
    })
}

fn taint(ctx: &Ctx, path: &str, t: &api::Taint) -> Result<Taint, ModelError> {
    let effect = TaintEffect::parse(&t.effect).ok_or_else(|| {
        ctx.invalid(
            format!("{path}.effect"),
            t.effect.as_str(),
            "must be NoSchedule, PreferNoSchedule or NoExecute",
        )
    })?;
    Ok(Taint {
        key: Sym::new(&t.key),
        value: Sym::new(t.value.as_deref().unwrap_or("")),
        effect,
    })
}

/// Host ports of one list of containers at `path` (`spec.containers`, `spec.initContainers`).
fn host_ports_into(
    ctx: &Ctx,
    path: &str,
    containers: &[api::Container],
    host_network: bool,
    out: &mut SmallVec<[HostPort; 1]>,
) -> Result<(), ModelError> {
    for (i, c) in containers.iter().enumerate() {
        for (j, p) in c.ports.iter().flatten().enumerate() {
            let mut port = p.host_port.unwrap_or(0);
            // On the host network the API server defaults hostPort to containerPort.
            if port == 0 && host_network {
                port = p.container_port;
            }
            if port == 0 {
                continue;
            }
            let port = u16::try_from(port)
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| {
                    ctx.invalid(
                        format!("{path}[{i}].ports[{j}].hostPort"),
                        port.to_string(),
                        "must be in 1..=65535",
                    )
                })?;
            let ip = match p.host_ip.as_deref() {
                None | Some("") => "0.0.0.0",
                Some(ip) => ip,
            };
            let protocol = match p.protocol.as_deref() {
                None | Some("") => "TCP",
                Some(proto) => proto,
            };
            out.push(HostPort {
                ip: Sym::new(ip),
                protocol: Sym::new(protocol),
                port,
            });
        }
    }
    Ok(())
}

/// The controller owner reference, else the first one.
fn owner_of(refs: Option<&Vec<meta::OwnerReference>>) -> Option<OwnerRef> {
    let refs = refs?;
    let r = refs
        .iter()
        .find(|r| r.controller == Some(true))
        .or_else(|| refs.first())?;
    Some(OwnerRef {
        kind: Sym::new(&r.kind),
        api_version: Sym::new(&r.api_version),
        name: recent_owner_text(&r.name),
        uid: recent_owner_text(&r.uid),
        controller: r.controller == Some(true),
    })
}

/// Slots of a thread's table of recent owner names and uids.
const RECENT_OWNER_SLOTS: usize = 64;

thread_local! {
    /// The owner names and uids this thread converted last: the replicas of one workload share
    /// their owner's name and uid instead of each holding copies (two allocations fewer per pod;
    /// with 450,000 pods, ~45 MB). Owner texts are not interned: workloads come and go, and the
    /// interner only grows.
    static RECENT_OWNERS: RefCell<RecentTable<Arc<str>>> =
        RefCell::new(RecentTable::new(RECENT_OWNER_SLOTS));
}

/// `text` as an `Arc<str>`, shared with the last owner reference of this thread that had it.
fn recent_owner_text(text: &str) -> Arc<str> {
    RECENT_OWNERS
        .try_with(|t| {
            t.borrow_mut()
                .get_or_insert(text, |held| held, || Arc::from(text))
        })
        .unwrap_or_else(|_| Arc::from(text))
}

fn phase_of(phase: Option<&str>) -> PodPhase {
    match phase {
        None | Some("") | Some("Pending") => PodPhase::Pending,
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        // Unknown and any phase this version does not know.
        Some(_) => PodPhase::Unknown,
    }
}

/// The claim or inline CSI volume behind a pod volume, if any: `persistentVolumeClaim`, a
/// generic `ephemeral` volume (its claim is named `<pod>-<volume>`), or an inline `csi`
/// volume.
fn volume_ref_of(pod: &str, v: &api::Volume) -> Option<VolumeRef> {
    if let Some(c) = v.persistent_volume_claim.as_ref() {
        return Some(VolumeRef::Claim {
            claim: Arc::from(c.claim_name.as_str()),
            ephemeral: false,
        });
    }
    if v.ephemeral.is_some() {
        return Some(VolumeRef::Claim {
            claim: Arc::from(format!("{pod}-{}", v.name)),
            ephemeral: true,
        });
    }
    v.csi.as_ref().map(|c| VolumeRef::InlineCsi {
        driver: Sym::new(&c.driver),
        volume: Arc::from(v.name.as_str()),
    })
}

fn volume_of(v: &api::Volume) -> Volume {
    let empty_dir_on_disk = v
        .empty_dir
        .as_ref()
        .is_some_and(|e| e.medium.as_deref() != Some("Memory"));
    Volume {
        name: Arc::from(v.name.as_str()),
        local_storage: v.host_path.is_some() || empty_dir_on_disk,
    }
}

// ---------------------------------------------------------------------------------------------
// Public entry points
// ---------------------------------------------------------------------------------------------

impl Pod {
    /// Builds the compact view of an API pod. Fails with a [`ModelError`] naming the pod and the
    /// field when a field is missing or malformed; never panics.
    pub fn from_k8s(pod: &api::Pod) -> Result<Pod, ModelError> {
        let md = &pod.metadata;
        let namespace = md
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(DEFAULT_NAMESPACE);
        let Some(name) = md.name.as_deref().filter(|n| !n.is_empty()) else {
            let ctx = Ctx {
                object: format!("Pod {namespace}/<unnamed>"),
            };
            return Err(ctx.missing("metadata.name"));
        };
        let ctx = Ctx {
            object: format!("Pod {namespace}/{name}"),
        };
        let mut out = Pod::new(namespace, name);
        out.uid = Arc::from(md.uid.as_deref().unwrap_or(""));
        out.labels = labels_of(md.labels.as_ref());
        out.annotations = annotations_of(md.annotations.as_ref());
        out.owner = owner_of(md.owner_references.as_ref());
        out.creation_ms = time_ms(md.creation_timestamp.as_ref());
        out.deletion_ms = time_ms(md.deletion_timestamp.as_ref());
        out.termination_grace_ms = md
            .deletion_grace_period_seconds
            .or_else(|| {
                pod.spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .map(|s| s.max(0).saturating_mul(1000));

        if let Some(spec) = pod.spec.as_ref() {
            out.requests = pod_requests(&ctx, spec, pod.status.as_ref())?;
            out.node_name = spec
                .node_name
                .as_deref()
                .filter(|n| !n.is_empty())
                .map(Sym::new);
            if let Some(name) = spec.scheduler_name.as_deref().filter(|n| !n.is_empty()) {
                out.scheduler_name = Sym::new(name);
            }
            out.node_selector = labels_of(spec.node_selector.as_ref());
            out.required_node_affinity = required_node_affinity(&ctx, spec)?;
            for (i, t) in spec.tolerations.iter().flatten().enumerate() {
                out.tolerations
                    .push(toleration(&ctx, &format!("spec.tolerations[{i}]"), t)?);
            }
            let affinity = spec.affinity.as_ref();
            out.affinity = pod_affinity_terms(
                &ctx,
                "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                affinity
                    .and_then(|a| a.pod_affinity.as_ref())
                    .and_then(|a| {
                        a.required_during_scheduling_ignored_during_execution
                            .as_ref()
                    }),
                out.namespace,
                &out.labels,
            )?;
            out.anti_affinity = pod_affinity_terms(
                &ctx,
                "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution",
                affinity
                    .and_then(|a| a.pod_anti_affinity.as_ref())
                    .and_then(|a| {
                        a.required_during_scheduling_ignored_during_execution
                            .as_ref()
                    }),
                out.namespace,
                &out.labels,
            )?;
            for (i, c) in spec
                .topology_spread_constraints
                .iter()
                .flatten()
                .enumerate()
            {
                out.spread.push(spread_constraint(
                    &ctx,
                    &format!("spec.topologySpreadConstraints[{i}]"),
                    c,
                    &out.labels,
                )?);
            }
            let host_network = spec.host_network == Some(true);
            host_ports_into(
                &ctx,
                "spec.containers",
                &spec.containers,
                host_network,
                &mut out.host_ports,
            )?;
            if let Some(init) = spec.init_containers.as_ref() {
                host_ports_into(
                    &ctx,
                    "spec.initContainers",
                    init,
                    host_network,
                    &mut out.host_ports,
                )?;
            }
            out.priority = spec.priority.unwrap_or(0);
            out.volumes = spec.volumes.iter().flatten().map(volume_of).collect();
            out.volume_refs = spec
                .volumes
                .iter()
                .flatten()
                .filter_map(|v| volume_ref_of(name, v))
                .collect();
        }

        if let Some(status) = pod.status.as_ref() {
            out.phase = phase_of(status.phase.as_deref());
            out.nominated_node_name = status
                .nominated_node_name
                .as_deref()
                .filter(|n| !n.is_empty())
                .map(Sym::new);
            out.conditions = status
                .conditions
                .iter()
                .flatten()
                .map(|c| PodCondition {
                    type_: Sym::new(&c.type_),
                    status: Sym::new(&c.status),
                    reason: c.reason.as_deref().filter(|r| !r.is_empty()).map(Sym::new),
                    last_transition_ms: time_ms(c.last_transition_time.as_ref()),
                })
                .collect();
        }

        out.resource_claims = crate::dra::pod_claims(&ctx.object, pod)?.into();
        out.update_equivalence();
        Ok(out)
    }
}

impl TryFrom<&api::Pod> for Pod {
    type Error = ModelError;

    fn try_from(pod: &api::Pod) -> Result<Self, Self::Error> {
        Pod::from_k8s(pod)
    }
}

impl Node {
    /// Builds the compact view of an API node. Fails with a [`ModelError`] naming the node and
    /// the field when a field is missing or malformed; never panics.
    pub fn from_k8s(node: &api::Node) -> Result<Node, ModelError> {
        let md = &node.metadata;
        let Some(name) = md.name.as_deref().filter(|n| !n.is_empty()) else {
            return Err(Ctx {
                object: "Node <unnamed>".to_string(),
            }
            .missing("metadata.name"));
        };
        let ctx = Ctx {
            object: format!("Node {name}"),
        };
        let mut out = Node::new(name);
        out.uid = Arc::from(md.uid.as_deref().unwrap_or(""));
        out.labels = labels_of(md.labels.as_ref());
        out.annotations = annotations_of(md.annotations.as_ref());
        out.creation_ms = time_ms(md.creation_timestamp.as_ref());
        out.deletion_ms = time_ms(md.deletion_timestamp.as_ref());

        if let Some(spec) = node.spec.as_ref() {
            for (i, t) in spec.taints.iter().flatten().enumerate() {
                out.taints
                    .push(taint(&ctx, &format!("spec.taints[{i}]"), t)?);
            }
            out.unschedulable = spec.unschedulable == Some(true);
            out.provider_id = spec
                .provider_id
                .as_deref()
                .filter(|p| !p.is_empty())
                .map(Arc::from);
        }

        if let Some(status) = node.status.as_ref() {
            out.capacity = resource_list(&ctx, "status.capacity", status.capacity.as_ref())?;
            out.allocatable =
                resource_list(&ctx, "status.allocatable", status.allocatable.as_ref())?;
            // Per resource, capacity stands in for a missing allocatable.
            for (key, q) in status.capacity.iter().flatten() {
                if !status
                    .allocatable
                    .as_ref()
                    .is_some_and(|a| a.contains_key(key))
                {
                    let name = ResourceName::parse(key);
                    out.allocatable.set(
                        name,
                        resource_value(&ctx, &format!("status.capacity.{key}"), name, q)?,
                    );
                }
            }
            out.conditions = status
                .conditions
                .iter()
                .flatten()
                .map(|c| NodeCondition {
                    type_: Sym::new(&c.type_),
                    status: Sym::new(&c.status),
                    last_transition_ms: time_ms(c.last_transition_time.as_ref()),
                })
                .collect();
        }
        Ok(out)
    }
}

impl TryFrom<&api::Node> for Node {
    type Error = ModelError;

    fn try_from(node: &api::Node) -> Result<Self, Self::Error> {
        Node::from_k8s(node)
    }
}

impl NamespaceLabels {
    /// The name and labels of an API namespace; fails only when `metadata.name` is missing.
    pub fn from_k8s(ns: &api::Namespace) -> Result<NamespaceLabels, ModelError> {
        let Some(name) = ns.metadata.name.as_deref().filter(|n| !n.is_empty()) else {
            return Err(Ctx {
                object: "Namespace <unnamed>".to_string(),
            }
            .missing("metadata.name"));
        };
        Ok(NamespaceLabels {
            name: Sym::new(name),
            labels: labels_of(ns.metadata.labels.as_ref()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// (case, pod spec, cpu millis, memory bytes, extended resources).
    type RequestCase = (&'static str, Value, i64, i64, Vec<(&'static str, i64)>);
    /// (case, owner references, expected (kind, controller)).
    type OwnerCase = (&'static str, Value, Option<(&'static str, bool)>);

    /// (case, spec cpu, container statuses, conditions, cpu millis incl. the 50m sidecar).
    type ResizeCase = (&'static str, &'static str, Value, Value, i64);

    const MI: i64 = 1 << 20;
    const GI: i64 = 1 << 30;

    fn api_pod(v: Value) -> api::Pod {
        serde_json::from_value(v).expect("test pod JSON must deserialize")
    }

    fn api_node(v: Value) -> api::Node {
        serde_json::from_value(v).expect("test node JSON must deserialize")
    }

    /// Replicas of one workload share their owner's name and uid; other owners keep their own
    /// texts, also when they take turns in the same slot.
    #[test]
    fn replicas_share_their_owner_texts() {
        let owned = |pod: &str, owner: &str| {
            let p = api_pod(json!({"metadata": {"name": pod, "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner,
                 "uid": format!("uid-{owner}"), "controller": true}]}}));
            Pod::from_k8s(&p).expect("pod").owner.expect("owner")
        };
        let (a, b) = (owned("a", "web"), owned("b", "web"));
        assert!(Arc::ptr_eq(&a.name, &b.name) && Arc::ptr_eq(&a.uid, &b.uid));
        let owners: Vec<String> = (0..4 * RECENT_OWNER_SLOTS)
            .map(|i| format!("rs-{i}"))
            .collect();
        for round in 0..2 {
            for o in &owners {
                let r = owned(&format!("p-{round}"), o);
                assert_eq!(
                    (&*r.name, &*r.uid),
                    (o.as_str(), format!("uid-{o}").as_str())
                );
            }
        }
        assert_eq!(&*owned("c", "web").name, "web");
    }

    /// A pod named `p` in `default` with the given spec.
    fn pod_with_spec(spec: Value) -> Result<Pod, ModelError> {
        Pod::try_from(&api_pod(json!({"metadata": {"name": "p"}, "spec": spec})))
    }

    fn ok_pod(spec: Value) -> Pod {
        match pod_with_spec(spec) {
            Ok(p) => p,
            Err(e) => panic!("conversion failed: {e}"),
        }
    }

    fn ctr(name: &str, resources: Value) -> Value {
        json!({"name": name, "resources": resources})
    }

    fn cpu_req(q: &str) -> Value {
        json!({"requests": {"cpu": q}})
    }

    fn sidecar(name: &str, cpu: &str) -> Value {
        json!({"name": name, "restartPolicy": "Always", "resources": {"requests": {"cpu": cpu}}})
    }

    fn ext(name: &str) -> ResourceName {
        ResourceName::parse(name)
    }

    #[test]
    fn pod_requests_table() {
        let cases: Vec<RequestCase> = vec![
            (
                "app containers are summed",
                json!({"containers": [
                    ctr("a", json!({"requests": {"cpu": "100m", "memory": "100Mi"}})),
                    ctr("b", cpu_req("250m")),
                ]}),
                350,
                100 * MI,
                vec![],
            ),
            (
                "init container bigger than app containers wins per resource",
                json!({
                    "initContainers": [ctr("init", json!({"requests": {"cpu": "1", "memory": "50Mi"}}))],
                    "containers": [
                        ctr("a", json!({"requests": {"cpu": "100m", "memory": "100Mi"}})),
                        ctr("b", cpu_req("200m")),
                    ],
                }),
                1000,
                100 * MI,
                vec![],
            ),
            (
                "sidecar after an init container does not add to it",
                json!({
                    "initContainers": [sidecar("s1", "100m"), ctr("init", cpu_req("1")), sidecar("s2", "200m")],
                    "containers": [ctr("app", cpu_req("300m"))],
                }),
                1100,
                0,
                vec![],
            ),
            (
                "sidecars before an init container add to it",
                json!({
                    "initContainers": [sidecar("s1", "100m"), sidecar("s2", "200m"), ctr("init", cpu_req("1"))],
                    "containers": [ctr("app", cpu_req("300m"))],
                }),
                1300,
                0,
                vec![],
            ),
            (
                "sidecars are added to the app sum when it is the peak",
                json!({
                    "initContainers": [ctr("init", cpu_req("100m")), sidecar("s1", "500m")],
                    "containers": [ctr("app", cpu_req("700m"))],
                }),
                1200,
                0,
                vec![],
            ),
            (
                "overhead is added",
                json!({
                    "containers": [ctr("a", json!({"requests": {"cpu": "100m", "memory": "10Mi"}}))],
                    "overhead": {"cpu": "250m", "memory": "120Mi"},
                }),
                350,
                130 * MI,
                vec![],
            ),
            (
                "limits without requests default the requests",
                json!({
                    "initContainers": [ctr("init", json!({"limits": {"memory": "2Gi"}}))],
                    "containers": [ctr("a", json!({
                        "requests": {"cpu": "100m"},
                        "limits": {"cpu": "500m", "memory": "1Gi"},
                    }))],
                }),
                100,
                2 * GI,
                vec![],
            ),
            (
                "extended resources, GPUs and hugepages",
                json!({"containers": [
                    ctr("a", json!({
                        "requests": {"hugepages-2Mi": "4Mi", "example.com/foo": "3", "ephemeral-storage": "1Gi"},
                        "limits": {"nvidia.com/gpu": "2", "hugepages-2Mi": "4Mi"},
                    })),
                    ctr("b", json!({"limits": {"nvidia.com/gpu": "1"}})),
                ]}),
                0,
                0,
                vec![
                    ("nvidia.com/gpu", 3),
                    ("hugepages-2Mi", 4 * MI),
                    ("example.com/foo", 3),
                ],
            ),
            (
                "cpu rounds up to whole millicores",
                json!({"containers": [ctr("a", cpu_req("0.0001"))]}),
                1,
                0,
                vec![],
            ),
            (
                "pod-level requests replace the container aggregate",
                json!({
                    "resources": {"requests": {"cpu": "2"}, "limits": {"memory": "3Gi"}},
                    "containers": [ctr("a", json!({"requests": {"cpu": "100m"}}))],
                }),
                2000,
                3 * GI,
                vec![],
            ),
            (
                "no containers still takes a pod slot",
                json!({"containers": []}),
                0,
                0,
                vec![],
            ),
        ];
        for (case, spec, cpu, memory, extended) in cases {
            let p = match pod_with_spec(spec) {
                Ok(p) => p,
                Err(e) => panic!("{case}: {e}"),
            };
            assert_eq!(p.requests.cpu, cpu, "{case}: cpu");
            assert_eq!(p.requests.memory, memory, "{case}: memory");
            assert_eq!(p.requests.pods, 1, "{case}: pods");
            for (name, want) in &extended {
                assert_eq!(p.requests.get(ext(name)), *want, "{case}: {name}");
            }
            if case.starts_with("extended") {
                assert_eq!(
                    p.requests.ephemeral_storage, GI,
                    "{case}: ephemeral-storage"
                );
                assert_eq!(
                    p.requests.extended.len(),
                    extended.len(),
                    "{case}: no other resources"
                );
            }
        }
    }

    fn running_pod(spec_cpu: &str, statuses: Value, conditions: Value) -> Result<Pod, ModelError> {
        Pod::from_k8s(&api_pod(json!({
            "metadata": {"name": "p"},
            "spec": {
                "initContainers": [sidecar("side", "50m")],
                "containers": [ctr("app", cpu_req(spec_cpu))],
            },
            "status": {"phase": "Running", "containerStatuses": statuses, "conditions": conditions},
        })))
    }

    fn status(name: &str, allocated: Option<&str>, actuated: Option<&str>) -> Value {
        let mut s = json!({"name": name, "image": "i", "imageID": "", "ready": true,
                           "restartCount": 0});
        if let Some(obj) = s.as_object_mut() {
            if let Some(a) = allocated {
                obj.insert("allocatedResources".into(), json!({"cpu": a}));
            }
            if let Some(a) = actuated {
                obj.insert("resources".into(), json!({"requests": {"cpu": a}}));
            }
        }
        s
    }

    #[test]
    fn in_place_resize_uses_the_larger_of_spec_and_status() {
        let infeasible =
            json!([{"type": "PodResizePending", "status": "True", "reason": "Infeasible"}]);
        let cases: Vec<ResizeCase> = vec![
            (
                "no status resources: spec",
                "100m",
                json!([status("app", None, None)]),
                json!([]),
                150,
            ),
            (
                "allocated above spec",
                "100m",
                json!([status("app", Some("500m"), None)]),
                json!([]),
                550,
            ),
            (
                "actuated above allocated",
                "100m",
                json!([status("app", Some("200m"), Some("300m"))]),
                json!([]),
                350,
            ),
            (
                "spec above status",
                "1",
                json!([status("app", Some("200m"), None)]),
                json!([]),
                1050,
            ),
            (
                "infeasible resize ignores the spec (a status-less container counts 0)",
                "1",
                json!([status("app", Some("200m"), None)]),
                infeasible,
                200,
            ),
        ];
        for (case, cpu, statuses, conditions, want) in cases {
            match running_pod(cpu, statuses, conditions) {
                Ok(p) => assert_eq!(p.requests.cpu, want, "{case}"),
                Err(e) => panic!("{case}: {e}"),
            }
        }
        let bad = running_pod("1", json!([status("app", Some("x"), None)]), json!([]));
        let msg = bad.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            msg.starts_with(
                "Pod default/p: field status.containerStatuses[0].allocatedResources.cpu: "
            ),
            "{msg}"
        );
    }

    #[test]
    fn node_view() {
        let n = Node::try_from(&api_node(json!({
            "metadata": {
                "name": "n1",
                "uid": "u-1",
                "labels": {"topology.kubernetes.io/zone": "z1"},
                "annotations": {"z": "1", "a": "2"},
                "creationTimestamp": "2024-01-01T00:00:00Z",
                "deletionTimestamp": "2024-01-01T00:00:01Z",
            },
            "spec": {
                "providerID": "aws:///z1/i-1",
                "unschedulable": true,
                "taints": [
                    {"key": "gpu", "value": "true", "effect": "NoSchedule"},
                    {"key": "ToBeDeletedByClusterAutoscaler", "effect": "NoExecute"},
                ],
            },
            "status": {
                "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110", "nvidia.com/gpu": "1"},
                "allocatable": {"cpu": "3800m", "memory": "15Gi"},
                "conditions": [{
                    "type": "Ready", "status": "True",
                    "lastTransitionTime": "2024-01-01T00:01:00Z",
                }],
            },
        })))
        .expect("valid node");
        assert_eq!(n.name.as_str(), "n1");
        assert_eq!(&*n.uid, "u-1");
        assert_eq!(n.labels.get_str("topology.kubernetes.io/zone"), Some("z1"));
        let keys: Vec<&str> = n.annotations.iter().map(|(k, _)| k.as_ref()).collect();
        assert_eq!(keys, ["a", "z"]);
        assert_eq!(n.annotation("z"), Some("1"));
        assert_eq!(n.creation_ms, Some(1_704_067_200_000));
        assert_eq!(n.deletion_ms, Some(1_704_067_201_000));
        assert!(n.unschedulable);
        assert_eq!(n.provider_id.as_deref(), Some("aws:///z1/i-1"));
        assert_eq!(n.taints.len(), 2);
        assert_eq!(n.taints[0].effect, TaintEffect::NoSchedule);
        assert_eq!(n.taints[1].value.as_str(), "");
        assert_eq!(n.taints[1].effect, TaintEffect::NoExecute);
        assert_eq!(
            (n.capacity.cpu, n.capacity.memory, n.capacity.pods),
            (4000, 16 * GI, 110)
        );
        assert_eq!(n.allocatable.cpu, 3800);
        assert_eq!(n.allocatable.memory, 15 * GI);
        assert_eq!(n.allocatable.pods, 110, "pods falls back to capacity");
        assert_eq!(
            n.allocatable.get(ext("nvidia.com/gpu")),
            1,
            "gpu falls back to capacity"
        );
        assert!(n.is_ready());
        assert_eq!(n.conditions[0].last_transition_ms, Some(1_704_067_260_000));
    }

    #[test]
    fn bare_node_and_namespace() {
        let n = Node::from_k8s(&api_node(json!({"metadata": {"name": "bare"}}))).expect("valid");
        assert_eq!(n, Node::new("bare"));
        let ns: api::Namespace = serde_json::from_value(
            json!({"metadata": {"name": "team-a", "labels": {"env": "prod"}}}),
        )
        .expect("namespace JSON");
        let nl = NamespaceLabels::from_k8s(&ns).expect("valid");
        assert_eq!(nl.name.as_str(), "team-a");
        assert_eq!(nl.labels.get_str("env"), Some("prod"));
        let unnamed: api::Namespace =
            serde_json::from_value(json!({"metadata": {}})).expect("JSON");
        assert!(NamespaceLabels::from_k8s(&unnamed).is_err());
    }

    fn term(extra: Value) -> Value {
        let mut t = json!({"topologyKey": "kubernetes.io/hostname"});
        if let (Some(t), Some(extra)) = (t.as_object_mut(), extra.as_object()) {
            t.extend(extra.clone());
        }
        t
    }

    #[test]
    fn affinity_namespaces_and_label_keys() {
        let p = Pod::from_k8s(&api_pod(json!({
            "metadata": {"name": "p", "namespace": "team-a",
                         "labels": {"app": "web", "pod-template-hash": "abc"}},
            "spec": {
                "containers": [],
                "affinity": {
                    "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        term(json!({"labelSelector": {"matchLabels": {"app": "db"}}})),
                        term(json!({"labelSelector": {}, "namespaceSelector": {}})),
                        term(json!({"namespaces": ["x", "y"],
                                    "namespaceSelector": {"matchLabels": {"env": "prod"}}})),
                    ]},
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        term(json!({
                            "labelSelector": {"matchLabels": {"app": "web"},
                                "matchExpressions": [{"key": "pod-template-hash", "operator": "In",
                                                      "values": ["abc"]}]},
                            "matchLabelKeys": ["pod-template-hash", "absent"],
                            "mismatchLabelKeys": ["app"],
                        })),
                        term(json!({"matchLabelKeys": ["app"]})),
                    ]},
                },
            },
        })))
        .expect("valid pod");
        assert!(p.has_pod_affinity());
        let ns = |t: &PodAffinityTerm| t.namespaces.iter().map(|n| n.as_str()).collect::<Vec<_>>();
        assert_eq!(
            ns(&p.affinity[0]),
            ["team-a"],
            "empty namespaces, no selector: own namespace"
        );
        assert!(p.affinity[0].namespace_selector.is_none());
        assert!(
            ns(&p.affinity[1]).is_empty(),
            "namespaceSelector set: no defaulting"
        );
        assert_eq!(
            p.affinity[1].namespace_selector,
            Some(LabelSelector::default())
        );
        assert_eq!(p.affinity[1].label_selector, Some(LabelSelector::default()));
        assert_eq!(ns(&p.affinity[2]), ["x", "y"]);
        let nsel = p.affinity[2].namespace_selector.as_ref().expect("selector");
        assert_eq!(nsel.match_labels.get_str("env"), Some("prod"));

        let anti = &p.anti_affinity[0];
        let sel = anti.label_selector.as_ref().expect("selector");
        let req = |k: &str, op: SelectorOp, v: &str| SelectorRequirement {
            key: Sym::new(k),
            op,
            values: vec![Sym::new(v)],
        };
        assert_eq!(
            sel.match_expressions,
            vec![
                req("pod-template-hash", SelectorOp::In, "abc"),
                req("app", SelectorOp::NotIn, "web"),
            ],
            "matchLabelKeys merged once (already present), absent key skipped, mismatch as NotIn"
        );
        let keys = |v: &[Sym]| v.iter().map(|k| k.as_str()).collect::<Vec<_>>();
        assert_eq!(
            keys(&anti.match_label_keys),
            ["pod-template-hash", "absent"]
        );
        assert_eq!(keys(&anti.mismatch_label_keys), ["app"]);
        assert_eq!(anti.topology_key.as_str(), "kubernetes.io/hostname");
        assert!(
            p.anti_affinity[1].label_selector.is_none(),
            "a missing selector stays match-none"
        );
        // The merged selector behaves as the scheduler's: same-hash web pods only.
        let other = Labels::from_pairs([("app", "web"), ("pod-template-hash", "abc")]);
        assert!(!sel.matches(&other), "mismatchLabelKeys excludes app=web");
    }

    #[test]
    fn node_affinity_tolerations_and_selector() {
        let p = ok_pod(json!({
            "containers": [],
            "nodeName": "n1",
            "nodeSelector": {"disk": "ssd"},
            "priority": 1000,
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [
                        {"key": "zone", "operator": "In", "values": ["a", "b"]},
                        {"key": "gen", "operator": "Gt", "values": ["3"]},
                        {"key": "spot", "operator": "DoesNotExist"},
                    ]},
                    {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n2"]}]},
                ],
            }}},
            "tolerations": [
                {"operator": "Exists"},
                {"key": "gpu", "value": "true", "effect": "NoSchedule"},
                {"key": "", "operator": "Exists", "effect": ""},
                {"key": "x", "operator": "Equal", "effect": "NoExecute", "tolerationSeconds": 30},
            ],
        }));
        assert_eq!(p.node_name.map(Sym::as_str), Some("n1"));
        assert_eq!(p.node_selector.get_str("disk"), Some("ssd"));
        assert_eq!(p.priority, 1000);
        let ns = p.required_node_affinity.as_ref().expect("node affinity");
        assert_eq!(ns.terms.len(), 2);
        let ops: Vec<_> = ns.terms[0].match_expressions.iter().map(|r| r.op).collect();
        assert_eq!(
            ops,
            [
                NodeSelectorOp::In,
                NodeSelectorOp::Gt,
                NodeSelectorOp::DoesNotExist
            ]
        );
        assert_eq!(
            ns.terms[0].match_expressions[0].values,
            vec![Sym::new("a"), Sym::new("b")]
        );
        assert!(ns.terms[0].match_fields.is_empty());
        assert_eq!(ns.terms[1].match_fields[0].key.as_str(), "metadata.name");
        assert_eq!(ns.terms[1].match_fields[0].op, NodeSelectorOp::NotIn);
        let t = &p.tolerations;
        assert_eq!(
            (t[0].key, t[0].op, t[0].effect),
            (None, TolerationOp::Exists, None)
        );
        assert_eq!(
            t[1],
            Toleration {
                key: Some(Sym::new("gpu")),
                op: TolerationOp::Equal,
                value: Sym::new("true"),
                effect: Some(TaintEffect::NoSchedule),
            }
        );
        assert_eq!(
            (t[2].key, t[2].effect),
            (None, None),
            "empty key and effect are None"
        );
        assert_eq!(t[3].effect, Some(TaintEffect::NoExecute));
        assert_eq!(t[3].value.as_str(), "");
    }

    #[test]
    fn spread_defaults_and_label_keys() {
        let p = Pod::from_k8s(&api_pod(json!({
            "metadata": {"name": "p", "labels": {"app": "web", "pod-template-hash": "abc"}},
            "spec": {"containers": [], "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                 "labelSelector": {"matchLabels": {"app": "web"}},
                 "matchLabelKeys": ["pod-template-hash", "absent"]},
                {"maxSkew": 2, "topologyKey": "kubernetes.io/hostname",
                 "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 3,
                 "nodeAffinityPolicy": "Ignore", "nodeTaintsPolicy": "Honor"},
            ]},
        })))
        .expect("valid pod");
        let [hard, soft] = p.spread.as_slice() else {
            panic!("two constraints expected")
        };
        assert_eq!(hard.when_unsatisfiable, WhenUnsatisfiable::DoNotSchedule);
        assert_eq!(
            hard.node_affinity_policy,
            InclusionPolicy::Honor,
            "default Honor"
        );
        assert_eq!(
            hard.node_taints_policy,
            InclusionPolicy::Ignore,
            "default Ignore"
        );
        assert_eq!(hard.min_domains, None);
        let sel = hard.label_selector.as_ref().expect("selector");
        assert_eq!(
            sel.match_expressions,
            vec![SelectorRequirement {
                key: Sym::new("pod-template-hash"),
                op: SelectorOp::In,
                values: vec![Sym::new("abc")],
            }]
        );
        assert_eq!(soft.when_unsatisfiable, WhenUnsatisfiable::ScheduleAnyway);
        assert_eq!((soft.max_skew, soft.min_domains), (2, Some(3)));
        assert_eq!(soft.node_affinity_policy, InclusionPolicy::Ignore);
        assert_eq!(soft.node_taints_policy, InclusionPolicy::Honor);
        assert!(soft.label_selector.is_none());
    }

    #[test]
    fn host_ports_from_app_and_init_containers() {
        let port = |ip: &str, proto: &str, port: u16| HostPort {
            ip: Sym::new(ip),
            protocol: Sym::new(proto),
            port,
        };
        let cases: Vec<(&str, Value, Vec<HostPort>)> = vec![
            (
                "defaults, skips and init containers",
                json!({
                    "containers": [{"name": "a", "ports": [
                        {"containerPort": 80, "hostPort": 8080},
                        {"containerPort": 81},
                        {"containerPort": 82, "hostPort": 0},
                        {"containerPort": 53, "hostPort": 53, "protocol": "UDP", "hostIP": "10.0.0.1"},
                        {"containerPort": 84, "hostPort": 8084, "hostIP": ""},
                    ]}],
                    "initContainers": [{"name": "i", "ports": [{"containerPort": 90, "hostPort": 9090}]}],
                }),
                vec![
                    port("0.0.0.0", "TCP", 8080),
                    port("10.0.0.1", "UDP", 53),
                    port("0.0.0.0", "TCP", 8084),
                    port("0.0.0.0", "TCP", 9090),
                ],
            ),
            (
                "host network defaults hostPort to containerPort",
                json!({"hostNetwork": true, "containers": [{"name": "a", "ports": [{"containerPort": 9100}]}]}),
                vec![port("0.0.0.0", "TCP", 9100)],
            ),
        ];
        for (case, spec, want) in cases {
            assert_eq!(
                ok_pod(spec).host_ports.as_slice(),
                want.as_slice(),
                "{case}"
            );
        }
    }

    fn owner_json(kind: &str, uid: &str, controller: Option<bool>) -> Value {
        let mut o =
            json!({"apiVersion": "apps/v1", "kind": kind, "name": kind.to_lowercase(), "uid": uid});
        if let (Some(c), Some(obj)) = (controller, o.as_object_mut()) {
            obj.insert("controller".into(), json!(c));
        }
        o
    }

    #[test]
    fn owner_selection() {
        let cases: Vec<OwnerCase> = vec![
            (
                "controller wins over earlier refs",
                json!([
                    owner_json("Foo", "1", Some(false)),
                    owner_json("ReplicaSet", "2", Some(true))
                ]),
                Some(("ReplicaSet", true)),
            ),
            (
                "no controller: first",
                json!([owner_json("Foo", "1", None), owner_json("Bar", "2", None)]),
                Some(("Foo", false)),
            ),
            ("none", json!([]), None),
        ];
        for (case, refs, want) in cases {
            let p = Pod::from_k8s(&api_pod(
                json!({"metadata": {"name": "p", "ownerReferences": refs}}),
            ))
            .expect("valid pod");
            let got = p.owner.as_ref().map(|o| (o.kind.as_str(), o.controller));
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn termination_grace_period_prefers_the_deletion_grace_period() {
        let spec = json!({"containers": [], "terminationGracePeriodSeconds": 600});
        let p = Pod::from_k8s(&api_pod(
            json!({"metadata": {"name": "p"}, "spec": spec.clone()}),
        ))
        .unwrap();
        assert_eq!(p.termination_grace_ms, Some(600_000));
        let p = Pod::from_k8s(&api_pod(json!({
            "metadata": {"name": "p", "deletionTimestamp": "1970-01-01T00:00:05Z", "deletionGracePeriodSeconds": 45},
            "spec": spec,
        })))
        .unwrap();
        assert_eq!(
            (p.deletion_ms, p.termination_grace_ms),
            (Some(5000), Some(45_000))
        );
    }

    #[test]
    fn claim_ephemeral_and_csi_volumes_become_volume_refs() {
        let p = Pod::from_k8s(&api_pod(json!({
            "metadata": {"name": "db-0", "namespace": "ns"},
            "spec": {"containers": [], "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
                {"name": "secrets", "csi": {"driver": "secrets-store.csi.k8s.io"}},
                {"name": "cfg", "configMap": {"name": "c"}},
            ]},
        })))
        .expect("valid pod");
        assert_eq!(
            p.volume_refs,
            [
                VolumeRef::Claim {
                    claim: Arc::from("data-db-0"),
                    ephemeral: false
                },
                VolumeRef::Claim {
                    claim: Arc::from("db-0-scratch"),
                    ephemeral: true
                },
                VolumeRef::InlineCsi {
                    driver: Sym::new("secrets-store.csi.k8s.io"),
                    volume: Arc::from("secrets")
                },
            ]
        );
        let plain = Pod::from_k8s(&api_pod(json!({
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"containers": []},
        })))
        .expect("valid pod");
        assert!(plain.volume_refs.is_empty());
        assert_ne!(plain.equivalence, p.equivalence);
    }

    #[test]
    fn status_volumes_and_metadata() {
        let p = Pod::from_k8s(&api_pod(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u", "annotations": {"b": "2", "a": "1"},
                         "creationTimestamp": "1970-01-01T00:00:01Z"},
            "spec": {"containers": [], "schedulerName": "batch-scheduler", "volumes": [
                {"name": "host", "hostPath": {"path": "/var/log"}},
                {"name": "scratch", "emptyDir": {}},
                {"name": "disk", "emptyDir": {"medium": ""}},
                {"name": "ram", "emptyDir": {"medium": "Memory"}},
                {"name": "cfg", "configMap": {"name": "c"}},
            ]},
            "status": {"phase": "Running", "nominatedNodeName": "n7", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "lastTransitionTime": "1970-01-01T00:00:02Z"},
                {"type": "Ready", "status": "True"},
            ]},
        })))
        .expect("valid pod");
        assert_eq!(p.key(), "ns/p");
        assert_eq!(&*p.uid, "u");
        assert_eq!(p.annotation("a"), Some("1"));
        assert_eq!(p.annotations[0].0.as_ref(), "a");
        assert_eq!(p.creation_ms, Some(1000));
        assert_eq!(p.deletion_ms, None);
        assert_eq!(p.termination_grace_ms, None);
        let local: Vec<(&str, bool)> = p
            .volumes
            .iter()
            .map(|v| (v.name.as_ref(), v.local_storage))
            .collect();
        assert_eq!(
            local,
            [
                ("host", true),
                ("scratch", true),
                ("disk", true),
                ("ram", false),
                ("cfg", false)
            ]
        );
        assert_eq!(p.phase, PodPhase::Running);
        assert_eq!(p.scheduler_name.as_str(), "batch-scheduler");
        assert_eq!(p.nominated_node_name.map(Sym::as_str), Some("n7"));
        assert_eq!(
            p.conditions[0].reason.map(Sym::as_str),
            Some("Unschedulable")
        );
        assert_eq!(p.conditions[0].last_transition_ms, Some(2000));
        assert_eq!(p.conditions[1].reason, None);
        let bare = Pod::from_k8s(&api_pod(json!({"metadata": {"name": "q"}}))).expect("valid");
        assert_eq!(bare.scheduler_name.as_str(), "default-scheduler");
        assert_eq!(bare.nominated_node_name, None);
        assert_eq!(
            bare,
            Pod::new("default", "q"),
            "no spec, no namespace: an empty default pod"
        );
    }

    #[test]
    fn malformed_objects_name_object_and_field() {
        let two_inits = |mem: &str| {
            json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {
                "containers": [],
                "initContainers": [{"name": "a"}, {"name": "b", "resources": {"requests": {"memory": mem}}}],
            }})
        };
        let spec = |spec: Value| json!({"metadata": {"name": "p"}, "spec": spec});
        let pod_cases: Vec<(&str, Value, &str)> = vec![
            (
                "bad quantity",
                two_inits("12Zi"),
                "Pod ns/p: field spec.initContainers[1].resources.requests.memory: ",
            ),
            (
                "bad quantity in a limit used as request",
                spec(
                    json!({"containers": [{"name": "a", "resources": {"limits": {"cpu": "lots"}}}]}),
                ),
                "Pod default/p: field spec.containers[0].resources.limits.cpu: ",
            ),
            (
                "bad overhead",
                spec(json!({"containers": [], "overhead": {"memory": "1..2"}})),
                "Pod default/p: field spec.overhead.memory: ",
            ),
            (
                "bad node affinity operator",
                spec(json!({"containers": [], "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "Like"}]},
                ]}}}})),
                "Pod default/p: field spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1].matchFields[0].operator: invalid value \"Like\"",
            ),
            (
                "bad label selector operator",
                spec(json!({"containers": [], "affinity": {"podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [term(json!({"labelSelector": {
                        "matchExpressions": [{"key": "k", "operator": "Gt", "values": ["1"]}]}}))]}}})),
                "Pod default/p: field spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator: invalid value \"Gt\"",
            ),
            (
                "bad toleration operator",
                spec(
                    json!({"containers": [], "tolerations": [{"key": "k", "operator": "Matches"}]}),
                ),
                "Pod default/p: field spec.tolerations[0].operator: invalid value \"Matches\"",
            ),
            (
                "bad toleration effect",
                spec(
                    json!({"containers": [], "tolerations": [{}, {"key": "k", "effect": "NoWay"}]}),
                ),
                "Pod default/p: field spec.tolerations[1].effect: invalid value \"NoWay\"",
            ),
            (
                "maxSkew 0",
                spec(
                    json!({"containers": [], "topologySpreadConstraints": [{"maxSkew": 0,
                    "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}),
                ),
                "Pod default/p: field spec.topologySpreadConstraints[0].maxSkew: invalid value \"0\"",
            ),
            (
                "bad whenUnsatisfiable",
                spec(
                    json!({"containers": [], "topologySpreadConstraints": [{"maxSkew": 1,
                    "topologyKey": "zone", "whenUnsatisfiable": "Sometimes"}]}),
                ),
                "Pod default/p: field spec.topologySpreadConstraints[0].whenUnsatisfiable: invalid value \"Sometimes\"",
            ),
            (
                "host port out of range",
                spec(
                    json!({"containers": [], "initContainers": [{"name": "i", "ports": [
                    {"containerPort": 1, "hostPort": 70000}]}]}),
                ),
                "Pod default/p: field spec.initContainers[0].ports[0].hostPort: invalid value \"70000\"",
            ),
            (
                "missing pod name",
                json!({"metadata": {"namespace": "ns"}, "spec": {"containers": []}}),
                "Pod ns/<unnamed>: missing required field metadata.name",
            ),
        ];
        for (case, pod, want) in pod_cases {
            match Pod::from_k8s(&api_pod(pod)) {
                Ok(_) => panic!("{case}: accepted"),
                Err(e) => assert!(
                    e.to_string().starts_with(want),
                    "{case}: got {e}, want prefix {want}"
                ),
            }
        }

        let node_cases: Vec<(&str, Value, &str)> = vec![
            (
                "bad taint effect",
                json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "k", "effect": "NoWhere"}]}}),
                "Node n1: field spec.taints[0].effect: invalid value \"NoWhere\"",
            ),
            (
                "bad allocatable",
                json!({"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "four"}}}),
                "Node n1: field status.allocatable.cpu: ",
            ),
            (
                "missing node name",
                json!({"metadata": {}}),
                "Node <unnamed>: missing required field metadata.name",
            ),
        ];
        for (case, node, want) in node_cases {
            match Node::from_k8s(&api_node(node)) {
                Ok(_) => panic!("{case}: accepted"),
                Err(e) => assert!(
                    e.to_string().starts_with(want),
                    "{case}: got {e}, want prefix {want}"
                ),
            }
        }
    }

    fn replica(name: &str, uid: &str, cpu: &str) -> Pod {
        Pod::from_k8s(&api_pod(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": uid, "labels": {"app": "web"},
                         "ownerReferences": [owner_json("ReplicaSet", "rs-1", Some(true))]},
            "spec": {"containers": [ctr("c", cpu_req(cpu))], "nodeSelector": {"pool": "a"}},
        })))
        .expect("valid pod")
    }

    #[test]
    fn equivalence_groups_replicas() {
        let a = replica("web-1", "u1", "100m");
        let b = replica("web-2", "u2", "100m");
        let c = replica("web-3", "u3", "200m");
        assert_eq!(a.equivalence, b.equivalence, "same ReplicaSet and spec");
        assert_ne!(a.equivalence, c.equivalence, "different requests");
        let lone1 =
            Pod::from_k8s(&api_pod(json!({"metadata": {"name": "x", "uid": "1"}}))).expect("valid");
        let lone2 =
            Pod::from_k8s(&api_pod(json!({"metadata": {"name": "y", "uid": "2"}}))).expect("valid");
        assert_eq!(
            lone1.equivalence, lone2.equivalence,
            "pods without owner and with the same spec are grouped"
        );
        assert_ne!(
            a.equivalence, lone1.equivalence,
            "owned and ownerless differ"
        );
        let lone3 = Pod::from_k8s(&api_pod(
            json!({"metadata": {"name": "z", "uid": "3", "labels": {"x": "y"}}}),
        ))
        .expect("valid");
        assert_ne!(lone1.equivalence, lone3.equivalence, "different labels");
    }

    proptest::proptest! {
        /// Arbitrary strings in every validated field never panic the conversion.
        #[test]
        fn never_panics(
            q in ".{0,12}",
            op in "[A-Za-z]{0,8}",
            effect in "[A-Za-z]{0,12}",
            skew in proptest::num::i32::ANY,
            host_port in proptest::num::i32::ANY,
        ) {
            let pod = api_pod(json!({"metadata": {"name": "p"}, "spec": {
                "containers": [{"name": "a", "resources": {"requests": {"cpu": q.clone(), "x.io/y": q.clone()}},
                                "ports": [{"containerPort": 1, "hostPort": host_port}]}],
                "initContainers": [{"name": "i", "restartPolicy": "Always",
                                    "resources": {"limits": {"memory": q.clone()}}}],
                "overhead": {"memory": q.clone()},
                "tolerations": [{"operator": op.clone(), "effect": effect.clone()}],
                "topologySpreadConstraints": [{"maxSkew": skew, "topologyKey": "z",
                                               "whenUnsatisfiable": op.clone()}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": op.clone()}]}]}}},
            }}));
            let _ = Pod::from_k8s(&pod);
            let node = api_node(json!({"metadata": {"name": "n"},
                "spec": {"taints": [{"key": "k", "effect": effect}]},
                "status": {"capacity": {"cpu": q.clone()}, "allocatable": {"memory": q}}}));
            let _ = Node::from_k8s(&node);
        }
    }
}
