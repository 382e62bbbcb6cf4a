//! Fault injection at the API: rules that, for a verb, a resource and optionally an object name,
//! during a window of real time since the facade started, answer 500, 409 or 429, delay the
//! response, or cut watch streams; and the counts of what was injected.
//!
//! It decides which rule applies to a request. It never changes the world: a refused request
//! has no effect on any object.

use std::time::Duration;

/// The API verb of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// GET of one object (also of a subresource such as `scale`).
    Get,
    /// GET of a collection.
    List,
    /// GET of a collection with `watch=true`.
    Watch,
    /// POST (also evictions: resource `pods/eviction`).
    Create,
    /// PUT.
    Update,
    /// PATCH.
    Patch,
    /// DELETE.
    Delete,
}

impl Verb {
    /// The RBAC verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`).
    pub fn rbac(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        }
    }
}

/// What a rule does to a matching request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultAction {
    /// Answer `500 InternalError`.
    InternalError,
    /// Answer `409 Conflict`.
    Conflict,
    /// Answer `429 TooManyRequests` (as a budget-refused eviction looks).
    TooManyRequests,
    /// Hold the response for this long before serving it.
    Delay(Duration),
    /// End a watch stream after it has sent this many events (bookmarks excluded).
    DropWatchAfterEvents(u64),
    /// End a watch stream this long after it started.
    DropWatchAfter(Duration),
}

/// One fault rule. Unset filters match anything; the window is in real time since
/// [`crate::Facade::start`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRule {
    /// The verb, or any.
    pub verb: Option<Verb>,
    /// The resource as in URLs (`pods`, `machinedeployments/scale`, `pods/eviction`), or any.
    pub resource: Option<String>,
    /// The object name, or any (collections have no name).
    pub name: Option<String>,
    /// Start of the window, inclusive.
    pub from: Duration,
    /// End of the window, exclusive (`None`: never ends).
    pub until: Option<Duration>,
    /// At most this many injections (`None`: no limit).
    pub max_injections: Option<u64>,
    /// What happens.
    pub action: FaultAction,
}

impl FaultRule {
    /// A rule doing `action` to every request, from the start, forever.
    pub fn new(action: FaultAction) -> FaultRule {
        FaultRule {
            verb: None,
            resource: None,
            name: None,
            from: Duration::ZERO,
            until: None,
            max_injections: None,
            action,
        }
    }

    /// Restricts the rule to one verb.
    pub fn verb(mut self, verb: Verb) -> FaultRule {
        self.verb = Some(verb);
        self
    }

    /// Restricts the rule to one resource (`pods`, `pods/eviction`, `machinedeployments/scale`).
    pub fn resource(mut self, resource: &str) -> FaultRule {
        self.resource = Some(resource.to_string());
        self
    }

    /// Restricts the rule to one object name.
    pub fn name(mut self, name: &str) -> FaultRule {
        self.name = Some(name.to_string());
        self
    }

    /// Limits the rule to `[from, until)` of real time since the facade started.
    pub fn during(mut self, from: Duration, until: Duration) -> FaultRule {
        self.from = from;
        self.until = Some(until);
        self
    }

    /// Limits the number of injections.
    pub fn at_most(mut self, n: u64) -> FaultRule {
        self.max_injections = Some(n);
        self
    }

    /// Whether the rule covers this request at `elapsed` after start.
    pub(crate) fn matches(&self, req: &RequestInfo<'_>, elapsed: Duration) -> bool {
        self.verb.is_none_or(|v| v == req.verb)
            && self.resource.as_deref().is_none_or(|r| r == req.resource)
            && self.name.as_deref().is_none_or(|n| Some(n) == req.name)
            && self.from <= elapsed
            && self.until.is_none_or(|u| elapsed < u)
    }
}

/// What a request is, for matching rules.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestInfo<'a> {
    pub verb: Verb,
    pub resource: &'a str,
    pub name: Option<&'a str>,
}

/// How many faults were injected, by kind and by rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// `500` answers.
    pub internal_errors: u64,
    /// `409` answers.
    pub conflicts: u64,
    /// `429` answers.
    pub too_many_requests: u64,
    /// Delayed responses.
    pub delays: u64,
    /// Watch streams cut.
    pub dropped_watches: u64,
    /// Injections per rule, in the order the rules were given (options first, then
    /// [`crate::FacadeHandle::add_fault`]).
    pub per_rule: Vec<u64>,
}

/// The rules with their counters.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    rules: Vec<(FaultRule, u64)>,
    counts: FaultCounts,
}

/// The faults chosen for one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Chosen {
    /// Delay before answering.
    pub delay: Option<Duration>,
    /// The error to answer instead of serving.
    pub error: Option<FaultAction>,
    /// For watches: cut after this many events.
    pub drop_after_events: Option<u64>,
    /// For watches: cut after this long.
    pub drop_after: Option<Duration>,
}

impl Faults {
    /// Adds a rule, returning its index in [`FaultCounts::per_rule`].
    pub fn add(&mut self, rule: FaultRule) -> usize {
        self.rules.push((rule, 0));
        self.counts.per_rule.push(0);
        self.rules.len() - 1
    }

    /// The counts so far.
    pub fn counts(&self) -> FaultCounts {
        self.counts.clone()
    }

    /// Counts a watch stream cut by a rule.
    pub fn count_dropped_watch(&mut self) {
        self.counts.dropped_watches += 1;
    }

    /// Picks the faults for a request and counts them: the longest matching delay, the first
    /// matching error, and for watches the first matching cut.
    pub fn choose(&mut self, req: &RequestInfo<'_>, elapsed: Duration) -> Chosen {
        let mut chosen = Chosen::default();
        for (i, (rule, used)) in self.rules.iter_mut().enumerate() {
            if !rule.matches(req, elapsed) || rule.max_injections.is_some_and(|m| *used >= m) {
                continue;
            }
            let applied = match rule.action {
                FaultAction::Delay(d) => {
                    chosen.delay = Some(chosen.delay.map_or(d, |c| c.max(d)));
                    self.counts.delays += 1;
                    true
                }
                FaultAction::InternalError
                | FaultAction::Conflict
                | FaultAction::TooManyRequests
                    if chosen.error.is_none() =>
                {
                    chosen.error = Some(rule.action);
                    match rule.action {
                        FaultAction::InternalError => self.counts.internal_errors += 1,
                        FaultAction::Conflict => self.counts.conflicts += 1,
                        _ => self.counts.too_many_requests += 1,
                    }
                    true
                }
                FaultAction::DropWatchAfterEvents(n)
                    if req.verb == Verb::Watch && chosen.drop_after_events.is_none() =>
                {
                    chosen.drop_after_events = Some(n);
                    true
                }
                FaultAction::DropWatchAfter(d)
                    if req.verb == Verb::Watch && chosen.drop_after.is_none() =>
                {
                    chosen.drop_after = Some(d);
                    true
                }
                _ => false,
            };
            if applied {
                *used += 1;
                if let Some(c) = self.counts.per_rule.get_mut(i) {
                    *c += 1;
                }
            }
        }
        chosen
    }
}

/// One object served malformed: the object of `kind`, `namespace` (`None` for cluster-scoped
/// objects) and `name` is served, in lists, watch events and reads, with the top-level fields
/// of `fields` in place of its own (`{"status": "x"}`), as a server holding a malformed object
/// (a CRD-backed object written without validation, say) serves it. The world keeps the
/// object as it is: only what is served changes.
#[derive(Debug, Clone, PartialEq)]
pub struct Malformation {
    /// The kind (`Node`, `Pod`, `MachineDeployment`).
    pub kind: String,
    /// The namespace, `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
    /// The top-level fields served in place of the object's (an object).
    pub fields: serde_json::Value,
}

/// `obj` of `kind` as served under `rules`: `None` when no rule names it (served as it is).
pub(crate) fn malformed(
    rules: &[Malformation],
    kind: &str,
    obj: &serde_json::Value,
) -> Option<serde_json::Value> {
    let md = obj.get("metadata")?;
    let name = md.get("name").and_then(serde_json::Value::as_str)?;
    let namespace = md.get("namespace").and_then(serde_json::Value::as_str);
    let rule = rules
        .iter()
        .find(|r| r.kind == kind && r.name == name && r.namespace.as_deref() == namespace)?;
    let mut out = obj.clone();
    if let (Some(o), Some(fields)) = (out.as_object_mut(), rule.fields.as_object()) {
        for (k, v) in fields {
            o.insert(k.clone(), v.clone());
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(verb: Verb, resource: &str, name: Option<&'static str>) -> RequestInfo<'static> {
        let resource: &'static str = Box::leak(resource.to_string().into_boxed_str());
        RequestInfo {
            verb,
            resource,
            name,
        }
    }

    #[test]
    fn rules_match_by_verb_resource_name_and_window() {
        let s = Duration::from_secs;
        let mut f = Faults::default();
        f.add(
            FaultRule::new(FaultAction::InternalError)
                .verb(Verb::List)
                .resource("nodes")
                .during(s(1), s(3)),
        );
        f.add(
            FaultRule::new(FaultAction::TooManyRequests)
                .resource("pods/eviction")
                .name("p")
                .at_most(1),
        );
        f.add(FaultRule::new(FaultAction::Delay(s(2))).verb(Verb::Get));
        let list_nodes = req(Verb::List, "nodes", None);
        assert_eq!(f.choose(&list_nodes, s(0)), Chosen::default());
        assert_eq!(
            f.choose(&list_nodes, s(2)).error,
            Some(FaultAction::InternalError)
        );
        assert_eq!(f.choose(&list_nodes, s(3)), Chosen::default());
        let evict = req(Verb::Create, "pods/eviction", Some("p"));
        assert_eq!(
            f.choose(&evict, s(5)).error,
            Some(FaultAction::TooManyRequests)
        );
        assert_eq!(f.choose(&evict, s(5)).error, None, "at most once");
        assert_eq!(
            f.choose(&req(Verb::Create, "pods/eviction", Some("q")), s(5))
                .error,
            None
        );
        assert_eq!(
            f.choose(&req(Verb::Get, "pods", Some("q")), s(5)).delay,
            Some(s(2))
        );
        let c = f.counts();
        assert_eq!(
            (c.internal_errors, c.too_many_requests, c.delays),
            (1, 1, 1)
        );
        assert_eq!(c.per_rule, vec![1, 1, 1]);
    }

    #[test]
    fn watch_cuts_apply_only_to_watches() {
        let mut f = Faults::default();
        f.add(FaultRule::new(FaultAction::DropWatchAfterEvents(3)));
        assert_eq!(
            f.choose(&req(Verb::List, "pods", None), Duration::ZERO),
            Chosen::default()
        );
        assert_eq!(
            f.choose(&req(Verb::Watch, "pods", None), Duration::ZERO)
                .drop_after_events,
            Some(3)
        );
    }

    #[test]
    fn a_malformed_object_is_served_with_the_fields_given() {
        use serde_json::json;
        let rules = vec![Malformation {
            kind: "Node".into(),
            namespace: None,
            name: "bad".into(),
            fields: json!({"status": "x"}),
        }];
        let bad = json!({"metadata": {"name": "bad"}, "status": {"allocatable": {}}});
        assert_eq!(
            malformed(&rules, "Node", &bad),
            Some(json!({"metadata": {"name": "bad"}, "status": "x"}))
        );
        let good = json!({"metadata": {"name": "good"}, "status": {}});
        assert_eq!(malformed(&rules, "Node", &good), None);
        assert_eq!(malformed(&rules, "Pod", &bad), None);
    }
}
