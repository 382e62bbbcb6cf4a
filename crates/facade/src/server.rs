//! The REST handlers: routing of `/api`, `/apis` and `/version` paths, list, get, create,
//! update, patch and delete of every resource in [`crate::resources::RESOURCES`], the `eviction`
//! and `scale` subresources, and fault injection in front of them.
//!
//! It decides how an HTTP request maps onto a world operation and which Status a refusal gets.
//! Writes always go through the world (so its controllers and change log see them); it never
//! holds the world's lock across an await.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use autoscaler_model::ObjectKey;
use autoscaler_world::object_key as key;
use autoscaler_world::{EvictionError, World, WorldError};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::faults::{FaultAction, RequestInfo, Verb};
use crate::paging::PagingError;
use crate::patch::{self, PatchKind};
use crate::resources::{self, Resource};
use crate::selectors::{FieldSelector, LabelSelector, parse_query};
use crate::status::{ApiError, json_response, success};
use crate::{Shared, View};

/// The router: one handler parses every path itself (Kubernetes paths overlap too much for
/// pattern routes).
pub(crate) fn router(shared: Arc<Shared>, view: Arc<View>) -> Router {
    Router::new().fallback(handle).with_state((shared, view))
}

/// A request on a resource.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub res: &'static Resource,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub sub: Option<String>,
}

impl Target {
    /// The store key of the named object.
    fn key(&self) -> ObjectKey {
        key(
            self.res.group,
            self.res.kind,
            self.namespace.as_deref().unwrap_or(""),
            self.name.as_deref().unwrap_or(""),
        )
    }

    fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }

    /// Whether a stored object belongs to this collection (kind and namespace).
    pub fn holds(&self, k: &ObjectKey) -> bool {
        k.group == self.res.group
            && k.kind == self.res.kind
            && self.namespace.as_deref().is_none_or(|ns| ns == k.namespace)
    }
}

enum Route {
    Version,
    Api,
    Apis,
    Group(String),
    ResourceList(String, String),
    Resource(Target),
}

fn route(path: &str, surface: &resources::Surface) -> Option<Route> {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Some(Route::Version),
        ["api"] => return Some(Route::Api),
        ["apis"] => return Some(Route::Apis),
        ["apis", g] => return Some(Route::Group(g.to_string())),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    if !surface.serves(group, version) {
        return None;
    }
    if rest.is_empty() {
        return Some(Route::ResourceList(group.to_string(), version.to_string()));
    }
    let namespaced = match rest {
        ["namespaces", ns, plural, tail @ ..] => resources::find(group, version, plural)
            .filter(|r| r.namespaced)
            .map(|r| (r, Some(ns.to_string()), tail)),
        _ => None,
    };
    let (res, namespace, tail) = match namespaced {
        Some(x) => x,
        None => {
            let (plural, tail) = rest.split_first()?;
            (resources::find(group, version, plural)?, None, tail)
        }
    };
    let (name, sub) = match tail {
        [] => (None, None),
        [name] => (Some(name.to_string()), None),
        [name, sub] if res.subresources.contains(sub) => {
            (Some(name.to_string()), Some(sub.to_string()))
        }
        _ => return None,
    };
    // A namespaced object is only addressed inside its namespace.
    if res.namespaced && namespace.is_none() && name.is_some() {
        return None;
    }
    Some(Route::Resource(Target {
        res,
        namespace,
        name,
        sub,
    }))
}

async fn handle(State((sh, view)): State<(Arc<Shared>, Arc<View>)>, req: Request) -> Response {
    let received = sh.elapsed();
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let response = serve(sh.clone(), &view, req).await;
    let verb = match method {
        Method::POST => Some(Verb::Create),
        Method::PUT => Some(Verb::Update),
        Method::PATCH => Some(Verb::Patch),
        Method::DELETE => Some(Verb::Delete),
        _ => None,
    };
    if let Some(verb) = verb {
        sh.record_write(crate::WriteRecord {
            received,
            answered: sh.elapsed(),
            verb,
            path,
            code: response.status().as_u16(),
        });
    }
    response
}

async fn serve(sh: Arc<Shared>, view: &View, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let body = match axum::body::to_bytes(body, 64 << 20).await {
        Ok(b) => b,
        Err(e) => {
            return ApiError::bad_request(format!("cannot read the body: {e}")).into_response();
        }
    };
    let query = parse_query(parts.uri.query());
    let path = parts.uri.path().to_string();
    let content_type = parts
        .headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_string();
    let aggregated = parts
        .headers
        .get(axum::http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("as=APIGroupDiscoveryList"));
    let surface = view.surface(&sh.surface());
    let routed = route(&path, &surface);
    let t = match routed {
        Some(Route::Resource(t)) => t,
        Some(Route::Api) if aggregated && parts.method == Method::GET => {
            return aggregated_response(&surface, true);
        }
        Some(Route::Apis) if aggregated && parts.method == Method::GET => {
            return aggregated_response(&surface, false);
        }
        Some(other) if parts.method == Method::GET => {
            return discovery(&sh, &surface, other, &path);
        }
        _ => return ApiError::no_route(&path).into_response(),
    };
    let watching = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
    let verb = match (&parts.method, &t.name) {
        (&Method::GET, None) if watching => Verb::Watch,
        (&Method::GET, None) => Verb::List,
        (&Method::GET, Some(_)) => Verb::Get,
        (&Method::POST, _) => Verb::Create,
        (&Method::PUT, Some(_)) => Verb::Update,
        (&Method::PATCH, Some(_)) => Verb::Patch,
        (&Method::DELETE, Some(_)) => Verb::Delete,
        (m, _) => {
            return ApiError::method_not_allowed(format!("{m} is not supported on {path}"))
                .into_response();
        }
    };
    let resource = match &t.sub {
        Some(s) => format!("{}/{s}", t.res.plural),
        None => t.res.plural.to_string(),
    };
    if let Some(e) = view.forbids(&t, verb, &resource) {
        return e.into_response();
    }
    let chosen = sh.faults().choose(
        &RequestInfo {
            verb,
            resource: &resource,
            name: t.name.as_deref(),
        },
        sh.elapsed(),
    );
    if let Some(d) = chosen.delay {
        tokio::time::sleep(d).await;
    }
    if let Some(action) = chosen.error {
        let e = match action {
            FaultAction::Conflict => ApiError::conflict(
                &t.res.qualified(),
                t.name(),
                "the object has been modified; please apply your changes to the latest version and try again (injected)",
            ),
            FaultAction::TooManyRequests => {
                ApiError::too_many_requests("too many requests (injected)")
            }
            _ => ApiError::internal("internal error (injected)"),
        };
        tracing::debug!(%path, code = e.code, "injected fault");
        return e.into_response();
    }
    let result = match verb {
        Verb::Watch => return crate::watch::serve(sh, t, &query, chosen),
        Verb::List => {
            return list(&sh, &t, &query).unwrap_or_else(IntoResponse::into_response);
        }
        Verb::Get => get(&sh, &t),
        Verb::Create => create(&sh, &t, &body),
        Verb::Update => update(&sh, &t, &body),
        Verb::Patch => patch_object(&sh, &t, &body, &content_type),
        Verb::Delete => delete(&sh, &t),
    };
    match result {
        Ok((code, v)) => json_response(code, &v),
        Err(e) => e.into_response(),
    }
}

fn discovery(sh: &Shared, surface: &resources::Surface, route: Route, path: &str) -> Response {
    let doc = match route {
        Route::Version => Some(resources::version_info(surface.version)),
        Route::Api => Some(resources::api_versions(&sh.addr)),
        Route::Apis => Some(resources::api_group_list(surface)),
        Route::Group(g) => resources::api_group(surface, &g),
        Route::ResourceList(g, v) => resources::api_resource_list(surface, &g, &v),
        Route::Resource(_) => None,
    };
    match doc {
        Some(d) => json_response(StatusCode::OK, &d),
        None => ApiError::no_route(path).into_response(),
    }
}

fn aggregated_response(surface: &resources::Surface, core: bool) -> Response {
    let doc = resources::aggregated(surface, core);
    (
        StatusCode::OK,
        [(
            axum::http::header::CONTENT_TYPE,
            resources::AGGREGATED_CONTENT_TYPE,
        )],
        doc.to_string(),
    )
        .into_response()
}

type Reply = Result<(StatusCode, Value), ApiError>;

/// The label and field selectors of a list or watch.
pub(crate) fn selectors(
    query: &BTreeMap<String, String>,
) -> Result<(LabelSelector, FieldSelector), ApiError> {
    let ls = LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))
        .map_err(ApiError::bad_request)?;
    let fs = FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str))
        .map_err(ApiError::bad_request)?;
    Ok((ls, fs))
}

fn list(sh: &Shared, t: &Target, query: &BTreeMap<String, String>) -> Result<Response, ApiError> {
    let (ls, fs) = selectors(query)?;
    // `limit=0` or none: everything at once.
    let limit = match query.get("limit").map(String::as_str) {
        None | Some("") => None,
        Some(l) => match l.parse::<usize>() {
            Ok(0) => None,
            Ok(n) => Some(n),
            Err(_) => return Err(ApiError::bad_request(format!("invalid limit {l:?}"))),
        },
    };
    let token = query.get("continue").filter(|c| !c.is_empty());
    // `resourceVersion=0` is served from the API server's watch cache, which ignores `limit`
    // and answers the whole list at once (client-go's informers list this way).
    let limit = limit.filter(|_| !from_watch_cache(query, token.is_some()));
    let page = match (token, limit) {
        (Some(token), _) => sh
            .pager()
            .next(token, limit.unwrap_or(usize::MAX))
            .map_err(|e| match e {
                PagingError::Expired => ApiError::expired_continue(e.to_string()),
                PagingError::Invalid(_) => ApiError::bad_request(e.to_string()),
            })?,
        (None, limit) => {
            // Shared objects are collected under the lock; the deep copies into the response
            // are made after it is released, and only for the page served.
            let (items, rv) = {
                let w = sh.world();
                let items: Vec<Arc<Value>> = w
                    .objects()
                    .list(t.res.group, t.res.kind)
                    .filter(|(k, v)| t.holds(k) && ls.matches(v) && fs.matches(v))
                    .map(|(_, v)| v.clone())
                    .collect();
                (items, w.resource_version())
            };
            sh.pager().first(items, rv, limit.unwrap_or(usize::MAX))
        }
    };
    let mut metadata = json!({"resourceVersion": page.rv.to_string()});
    if let Some(next) = &page.next {
        metadata["continue"] = json!(next);
        metadata["remainingItemCount"] = json!(page.remaining);
    }
    // Written item by item from the shared objects: no deep copy of a page.
    let mut body = json!({
        "kind": format!("{}List", t.res.kind),
        "apiVersion": t.res.api_version(),
        "metadata": metadata,
    })
    .to_string();
    body.pop();
    body.push_str(",\"items\":[");
    let mut body = body.into_bytes();
    for (i, item) in page.items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        // Serialized in place: no string per item. A `Value` always serializes.
        let _ = serde_json::to_writer(&mut body, &*sh.served(t.res.kind, item));
    }
    body.extend_from_slice(b"]}");
    Ok((
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

/// Whether a list is one the API server answers from its watch cache: `resourceVersion=0`
/// (any `resourceVersionMatch`), not a continuation. The cache does not page (it has no
/// continue tokens to hand out), so `limit` is ignored there.
fn from_watch_cache(query: &BTreeMap<String, String>, continued: bool) -> bool {
    !continued && query.get("resourceVersion").is_some_and(|rv| rv == "0")
}

fn stored(w: &World, t: &Target) -> Result<Value, ApiError> {
    w.objects()
        .get(&t.key())
        .map(|v| (**v).clone())
        .ok_or_else(|| ApiError::not_found(&t.res.qualified(), t.name()))
}

fn get(sh: &Shared, t: &Target) -> Reply {
    let w = sh.world();
    let obj = stored(&w, t)?;
    match t.sub.as_deref() {
        Some("scale") => Ok((StatusCode::OK, scale_of(&obj))),
        _ => Ok((StatusCode::OK, sh.served(t.res.kind, &obj).into_owned())),
    }
}

fn parse_body(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the request body is not JSON: {e}")))
}

fn world_error(t: &Target, e: WorldError) -> ApiError {
    let (res, name) = (t.res.qualified(), t.name().to_string());
    match e {
        WorldError::NotFound(_) => ApiError::not_found(&res, &name),
        WorldError::AlreadyExists(_) => ApiError::already_exists(&res, &name),
        WorldError::ScaleApi { .. } => ApiError::internal(e.to_string()),
        WorldError::Conflict { .. } => ApiError::conflict(&res, &name, &e.to_string()),
        WorldError::Store(_) | WorldError::Invalid { .. } => {
            ApiError::invalid(&res, &name, e.to_string())
        }
    }
}

/// Fills `apiVersion`, `kind` and the namespace from the URL; refuses a body naming another
/// namespace.
fn normalize(t: &Target, obj: &mut Value) -> Result<(), ApiError> {
    if !obj.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    if obj.get("apiVersion").and_then(Value::as_str).is_none() {
        obj["apiVersion"] = json!(t.res.api_version());
    }
    if obj.get("kind").and_then(Value::as_str).is_none() {
        obj["kind"] = json!(t.res.kind);
    }
    if obj.get("kind").and_then(Value::as_str) != Some(t.res.kind) {
        return Err(ApiError::bad_request(format!(
            "the body is a {}, not a {}",
            obj["kind"], t.res.kind
        )));
    }
    if !obj.get("metadata").is_some_and(Value::is_object) {
        obj["metadata"] = json!({});
    }
    match (
        &t.namespace,
        obj.pointer("/metadata/namespace").and_then(Value::as_str),
    ) {
        (Some(ns), Some(b)) if b != ns => {
            return Err(ApiError::bad_request(format!(
                "the namespace of the object ({b}) does not match the namespace on the request ({ns})"
            )));
        }
        (Some(ns), _) => obj["metadata"]["namespace"] = json!(ns),
        (None, _) if t.res.namespaced => {
            return Err(ApiError::method_not_allowed(
                "namespaced objects are created in /namespaces/<namespace>/",
            ));
        }
        (None, _) => {
            if let Some(m) = obj["metadata"].as_object_mut() {
                m.remove("namespace");
            }
        }
    }
    if let Some(name) = &t.name {
        match obj.pointer("/metadata/name").and_then(Value::as_str) {
            Some(b) if b != name => {
                return Err(ApiError::bad_request(format!(
                    "the name of the object ({b}) does not match the name on the URL ({name})"
                )));
            }
            _ => obj["metadata"]["name"] = json!(name),
        }
    }
    Ok(())
}

fn create(sh: &Shared, t: &Target, body: &Bytes) -> Reply {
    match t.sub.as_deref() {
        Some("eviction") => return evict(sh, t, body),
        Some(s) => {
            return Err(ApiError::method_not_allowed(format!(
                "create is not supported on {s}"
            )));
        }
        None => {}
    }
    if t.name.is_some() {
        return Err(ApiError::method_not_allowed("POST goes to the collection"));
    }
    let mut obj = parse_body(body)?;
    normalize(t, &mut obj)?;
    // A custom resource whose CRD declares `subresources.status` (SIG Autoscaling's) is
    // created without status: only `/status` writes it.
    if t.res.group == "autoscaling.x-k8s.io"
        && t.res.subresources.contains(&"status")
        && let Some(o) = obj.as_object_mut()
    {
        o.remove("status");
    }
    if obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_none()
    {
        let Some(prefix) = obj
            .pointer("/metadata/generateName")
            .and_then(Value::as_str)
        else {
            return Err(ApiError::invalid(
                &t.res.qualified(),
                "",
                "metadata.name: Required value: name or generateName is required",
            ));
        };
        let n = sh.names.fetch_add(1, Ordering::Relaxed);
        obj["metadata"]["name"] = json!(format!("{prefix}{n:05x}"));
    }
    let name = obj["metadata"]["name"].as_str().unwrap_or("").to_string();
    let t = Target {
        name: Some(name.clone()),
        ..t.clone()
    };
    if let Some(m) = obj["metadata"].as_object_mut() {
        m.remove("resourceVersion");
        m.entry("generation").or_insert(json!(1));
    }
    create_object(sh, &t, obj)
}

fn create_object(sh: &Shared, t: &Target, obj: Value) -> Reply {
    sh.write(|w| {
        if w.objects().get(&t.key()).is_some() {
            return Err(ApiError::already_exists(&t.res.qualified(), t.name()));
        }
        w.apply(obj).map_err(|e| world_error(t, e))?;
        Ok((StatusCode::CREATED, stored(w, t)?))
    })
}

fn resource_version(obj: &Value) -> Option<&str> {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn stale(t: &Target) -> ApiError {
    ApiError::conflict(
        &t.res.qualified(),
        t.name(),
        "the object has been modified; please apply your changes to the latest version and try again",
    )
}

/// Writes `new` over `old` (the stored object) through the world: the status is kept unless
/// the status subresource is written (and only the status is taken then), and the generation
/// moves when the spec changes.
fn replace(w: &mut World, t: &Target, old: &Value, mut new: Value) -> Reply {
    let has_status = t.res.subresources.contains(&"status");
    if t.sub.as_deref() == Some("status") && t.res.group == "autoscaling.x-k8s.io" {
        // The world keeps these kinds' status on an ordinary write: only its status write
        // changes it, against the version the caller read (or the stored one).
        let rv = resource_version(&new)
            .or(resource_version(old))
            .unwrap_or_default()
            .to_string();
        let status = new.get("status").cloned().unwrap_or_else(|| json!({}));
        w.write_status(&t.key(), status, &rv)
            .map_err(|e| world_error(t, e))?;
        return Ok((StatusCode::OK, stored(w, t)?));
    }
    if t.sub.as_deref() == Some("status") {
        let status = new.get("status").cloned();
        new = old.clone();
        match status {
            Some(s) => new["status"] = s,
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        }
    } else if has_status {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        }
    }
    let generation = old
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    let bumped = if old.get("spec") != new.get("spec") {
        generation + 1
    } else {
        generation
    };
    new["metadata"]["generation"] = json!(bumped);
    w.replace_object(new).map_err(|e| world_error(t, e))?;
    Ok((StatusCode::OK, stored(w, t)?))
}

fn update(sh: &Shared, t: &Target, body: &Bytes) -> Reply {
    let mut obj = parse_body(body)?;
    if t.sub.as_deref() == Some("scale") {
        let rv = resource_version(&obj).map(str::to_string);
        return sh.write(|w| {
            let old = stored(w, t)?;
            if rv.is_some_and(|rv| Some(rv.as_str()) != resource_version(&old)) {
                return Err(stale(t));
            }
            set_scale(w, t, &old, &obj)
        });
    }
    normalize(t, &mut obj)?;
    sh.write(|w| {
        let old = stored(w, t)?;
        if let Some(rv) = resource_version(&obj)
            && Some(rv) != resource_version(&old)
        {
            return Err(stale(t));
        }
        replace(w, t, &old, obj)
    })
}

fn patch_object(sh: &Shared, t: &Target, body: &Bytes, content_type: &str) -> Reply {
    let kind = PatchKind::from_content_type(content_type)
        .ok_or_else(|| ApiError::unsupported_media_type(content_type))?;
    let body = parse_body(body)?;
    let apply = |old: &Value| -> Result<Value, ApiError> {
        match kind {
            PatchKind::Json => patch::json_patch(old, &body)
                .map_err(|e| ApiError::invalid(&t.res.qualified(), t.name(), e)),
            PatchKind::Merge | PatchKind::Strategic | PatchKind::Apply => {
                let mut new = old.clone();
                patch::merge(&mut new, &body);
                Ok(new)
            }
        }
    };
    // A resourceVersion in the patch is a precondition on the stored version.
    let check = |old: &Value, new: &Value| -> Result<(), ApiError> {
        let wanted = match kind {
            PatchKind::Json => {
                resource_version(new).filter(|rv| Some(*rv) != resource_version(old))
            }
            _ => resource_version(&body),
        };
        match wanted {
            Some(rv) if Some(rv) != resource_version(old) => Err(stale(t)),
            _ => Ok(()),
        }
    };
    if t.sub.as_deref() == Some("scale") {
        return sh.write(|w| {
            let old = stored(w, t)?;
            let scale = scale_of(&old);
            let new = apply(&scale)?;
            check(&scale, &new)?;
            set_scale(w, t, &old, &new)
        });
    }
    sh.write(|w| {
        let old = match stored(w, t) {
            Ok(o) => o,
            Err(e) if kind == PatchKind::Apply && t.sub.is_none() => {
                // Server-side apply creates what is missing.
                let mut obj = body.clone();
                normalize(t, &mut obj).map_err(|_| e)?;
                if let Some(m) = obj["metadata"].as_object_mut() {
                    m.remove("resourceVersion");
                    m.entry("generation").or_insert(json!(1));
                }
                w.apply(obj).map_err(|e| world_error(t, e))?;
                return Ok((StatusCode::CREATED, stored(w, t)?));
            }
            Err(e) => return Err(e),
        };
        let mut new = apply(&old)?;
        check(&old, &new)?;
        // The identity of an object is not patchable.
        for field in ["apiVersion", "kind"] {
            new[field] = old[field].clone();
        }
        if !new.get("metadata").is_some_and(Value::is_object) {
            new["metadata"] = json!({});
        }
        for field in ["name", "namespace", "uid", "resourceVersion"] {
            match old["metadata"].get(field) {
                Some(v) => new["metadata"][field] = v.clone(),
                None => {
                    if let Some(m) = new["metadata"].as_object_mut() {
                        m.remove(field);
                    }
                }
            }
        }
        replace(w, t, &old, new)
    })
}

fn delete(sh: &Shared, t: &Target) -> Reply {
    if t.sub.is_some() {
        return Err(ApiError::method_not_allowed(
            "delete is not supported on subresources",
        ));
    }
    sh.write(|w| {
        let last = w.delete_object(&t.key()).map_err(|e| world_error(t, e))?;
        Ok((StatusCode::OK, (*last).clone()))
    })
}

/// The `deleteOptions.gracePeriodSeconds` of an Eviction body (`None` without a body or the
/// field). Negative values count as 1 s, as the API server treats them on the delete path.
fn eviction_grace(body: &Bytes) -> Result<Option<u64>, ApiError> {
    if body.is_empty() {
        return Ok(None);
    }
    let eviction = parse_body(body)?;
    match eviction.pointer("/deleteOptions/gracePeriodSeconds") {
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_i64() {
            Some(g) => Ok(Some(u64::try_from(g).unwrap_or(1))),
            None => Err(ApiError::bad_request(
                "deleteOptions.gracePeriodSeconds: must be an integer",
            )),
        },
    }
}

fn evict(sh: &Shared, t: &Target, body: &Bytes) -> Reply {
    let ns = t.namespace.clone().unwrap_or_default();
    let name = t.name().to_string();
    let grace = eviction_grace(body)?;
    sh.write(|w| match w.evict(&ns, &name, grace) {
        Ok(()) => Ok((StatusCode::CREATED, success(201))),
        Err(EvictionError::NotFound(_)) => {
            // A pod that already finished goes without asking any budget.
            w.delete_object(&t.key())
                .map_err(|_| ApiError::not_found("pods", &name))?;
            Ok((StatusCode::CREATED, success(201)))
        }
        Err(e @ EvictionError::PdbViolation { .. }) => {
            let mut err = ApiError::too_many_requests(
                "Cannot evict pod as it would violate the pod's disruption budget.",
            );
            err.details =
                Some(json!({"causes": [{"reason": "DisruptionBudget", "message": e.to_string()}]}));
            Err(err)
        }
        Err(e @ EvictionError::MultiplePdbs { .. }) => Err(ApiError::internal(e.to_string())),
    })
}

/// The `autoscaling/v1` Scale of an object with `spec.replicas`.
fn scale_of(obj: &Value) -> Value {
    let selector = obj
        .pointer("/status/selector")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| {
            obj.pointer("/spec/selector/matchLabels")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default()
        });
    let mut meta = json!({});
    for f in [
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
    ] {
        if let Some(v) = obj["metadata"].get(f) {
            meta[f] = v.clone();
        }
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": meta,
        "spec": {"replicas": obj.pointer("/spec/replicas").and_then(Value::as_u64).unwrap_or(0)},
        "status": {
            "replicas": obj.pointer("/status/replicas").and_then(Value::as_u64).unwrap_or(0),
            "selector": selector,
        },
    })
}

/// Sets replicas from a Scale: MachineDeployments through the world's scale path (its
/// controller makes Machines, a `ScaleApiError` fault refuses), others by rewriting
/// `spec.replicas`.
fn set_scale(w: &mut World, t: &Target, old: &Value, scale: &Value) -> Reply {
    let replicas = scale
        .pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| {
            ApiError::invalid(
                &t.res.qualified(),
                t.name(),
                "spec.replicas: Required value",
            )
        })?;
    let (ns, name) = (
        t.namespace.clone().unwrap_or_default(),
        t.name().to_string(),
    );
    if t.res.kind == "MachineDeployment" && t.res.group == "cluster.x-k8s.io" {
        w.set_replicas(&ns, &name, replicas)
            .map_err(|e| world_error(t, e))?;
    } else {
        let mut new = old.clone();
        new["spec"]["replicas"] = json!(replicas);
        let main = Target {
            sub: None,
            ..t.clone()
        };
        replace(w, &main, old, new)?;
    }
    Ok((StatusCode::OK, scale_of(&stored(w, t)?)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(path: &str) -> Option<Route> {
        super::route(path, &resources::Surface::default())
    }

    fn target(path: &str) -> Target {
        match route(path) {
            Some(Route::Resource(t)) => t,
            _ => panic!("{path} is not a resource path"),
        }
    }

    #[test]
    fn an_eviction_carries_the_grace_of_its_delete_options() {
        let grace = |body: &str| eviction_grace(&Bytes::from(body.to_string()));
        assert_eq!(grace(""), Ok(None));
        assert_eq!(grace(r#"{"kind": "Eviction"}"#), Ok(None));
        assert_eq!(
            grace(r#"{"deleteOptions": {"gracePeriodSeconds": 45}}"#),
            Ok(Some(45))
        );
        assert_eq!(
            grace(r#"{"deleteOptions": {"gracePeriodSeconds": -3}}"#),
            Ok(Some(1))
        );
        assert!(grace(r#"{"deleteOptions": {"gracePeriodSeconds": "soon"}}"#).is_err());
        assert!(grace("not json").is_err());
    }

    #[test]
    fn paths_route_to_resources() {
        let t = target("/api/v1/namespaces/kube-system/pods/p1/eviction");
        assert_eq!(
            (
                t.res.plural,
                t.namespace.as_deref(),
                t.name.as_deref(),
                t.sub.as_deref()
            ),
            ("pods", Some("kube-system"), Some("p1"), Some("eviction"))
        );
        let t = target("/api/v1/namespaces/default");
        assert_eq!(
            (t.res.plural, t.name.as_deref()),
            ("namespaces", Some("default"))
        );
        let t = target("/api/v1/namespaces");
        assert_eq!((t.res.plural, t.name), ("namespaces", None));
        let t = target("/apis/cluster.x-k8s.io/v1beta1/namespaces/ns/machinedeployments/md/scale");
        assert_eq!(t.sub.as_deref(), Some("scale"));
        let t = target("/apis/apps/v1/deployments");
        assert_eq!((t.res.kind, t.namespace), ("Deployment", None));
        let t = target("/api/v1/nodes/n1");
        assert_eq!(t.name.as_deref(), Some("n1"));
        assert!(
            route("/api/v1/pods/p1").is_none(),
            "namespaced object outside a namespace"
        );
        assert!(route("/api/v1/nodes/n1/eviction").is_none());
        assert!(route("/apis/nope/v1/things").is_none());
        assert!(matches!(
            route("/apis/apps/v1"),
            Some(Route::ResourceList(..))
        ));
        assert!(matches!(route("/version"), Some(Route::Version)));
    }

    #[test]
    fn scale_of_reads_replicas_and_selector() {
        let md = json!({"metadata": {"name": "md", "namespace": "ns", "resourceVersion": "7"},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"a": "b"}}}, "status": {"replicas": 2}});
        let s = scale_of(&md);
        assert_eq!(s["spec"]["replicas"], 3);
        assert_eq!(s["status"]["replicas"], 2);
        assert_eq!(s["status"]["selector"], "a=b");
        assert_eq!(s["metadata"]["resourceVersion"], "7");
    }
}
