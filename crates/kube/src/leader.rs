//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's semantics: a lease held
//! by another process is taken over only after it has not been renewed for its whole duration
//! as measured on *this* process's clock (so clock skew between nodes cannot cause two leaders),
//! and a leader that has not renewed within `renew_deadline` stops being leader at once, even if
//! the API server is unreachable and nobody else could have taken the lease yet.
//!
//! It decides only who leads; it never acts on the cluster otherwise. `kube-lease-manager` was
//! considered: it keeps reporting leadership while renewals fail (an error only backs off), which
//! is exactly the case where the controller must stop acting, and it counts in whole seconds.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Where the lease is and how it is kept.
#[derive(Clone, Debug)]
pub struct LeaderConfig {
    /// Namespace of the Lease (`--namespace`).
    pub namespace: String,
    /// Name of the Lease (`--leader-elect-resource-name`, `cluster-autoscaler`).
    pub name: String,
    /// This process's identity (holderIdentity).
    pub identity: String,
    /// `--leader-elect-lease-duration`: how long a lease is valid after its last renewal.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`: how long a leader keeps leading without a renewal.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`: time between attempts.
    pub retry_period: Duration,
}

/// A failed attempt to read or write the Lease.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The API call failed.
    #[error("lease {namespace}/{name}: {source}")]
    Api {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Why.
        source: kube::Error,
    },
    /// The attempt took longer than the time left before the renew deadline.
    #[error("lease {namespace}/{name}: no answer before the renew deadline")]
    Timeout {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
}

/// The elector: the last Lease record seen and when (on the local clock).
struct Elector {
    api: Api<Lease>,
    config: LeaderConfig,
    /// resourceVersion of the last record seen, and when it was first seen.
    observed: Option<(String, Instant)>,
}

fn now_time() -> MicroTime {
    MicroTime(jiff::Timestamp::now())
}

fn is_status(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

impl Elector {
    fn error(&self, source: kube::Error) -> LeaderError {
        LeaderError::Api {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        }
    }

    fn duration_secs(&self) -> i32 {
        i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    /// One attempt to acquire or renew: `Ok(None)` if this process holds the lease after it,
    /// else the other holder's identity (empty when another process won a race for it).
    async fn try_acquire_or_renew(&mut self) -> Result<Option<String>, LeaderError> {
        let now = Instant::now();
        let id = self.config.identity.clone();
        let current = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.error(e))?;
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(id),
                    lease_duration_seconds: Some(self.duration_secs()),
                    acquire_time: Some(now_time()),
                    renew_time: Some(now_time()),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(&created, now);
                    Ok(None)
                }
                // Another process created it first.
                Err(e) if is_status(&e, 409) => Ok(Some(String::new())),
                Err(e) => Err(self.error(e)),
            };
        };
        let rv = lease.metadata.resource_version.clone().unwrap_or_default();
        if self.observed.as_ref().is_none_or(|(seen, _)| *seen != rv) {
            self.observed = Some((rv, now));
        }
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let valid_for = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.config.lease_duration, Duration::from_secs);
        let seen_at = self.observed.as_ref().map_or(now, |o| o.1);
        if !holder.is_empty() && holder != id && now < seen_at + valid_for {
            return Ok(Some(holder));
        }
        let mut new_spec = spec;
        if holder != id {
            new_spec.acquire_time = Some(now_time());
            if !holder.is_empty() {
                new_spec.lease_transitions = Some(new_spec.lease_transitions.unwrap_or(0) + 1);
            }
        }
        new_spec.holder_identity = Some(id);
        new_spec.renew_time = Some(now_time());
        new_spec.lease_duration_seconds = Some(self.duration_secs());
        lease.spec = Some(new_spec);
        // A replace carries the resourceVersion read: a concurrent writer makes it fail with 409.
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.observe(&written, now);
                Ok(None)
            }
            Err(e) if is_status(&e, 409) => Ok(Some(String::new())),
            Err(e) => Err(self.error(e)),
        }
    }

    fn observe(&mut self, lease: &Lease, at: Instant) {
        let rv = lease.metadata.resource_version.clone().unwrap_or_default();
        self.observed = Some((rv, at));
    }

    /// Gives the lease up (holder cleared) if this process holds it, so a successor need not
    /// wait for it to expire.
    async fn release(&mut self) -> Result<(), LeaderError> {
        let Some(mut lease) = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.error(e))?
        else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(&self.config.identity) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(now_time());
        self.api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
            .map_err(|e| self.error(e))
    }
}

/// A running election: whether this process leads now, and how to stop.
pub struct Leadership {
    leading: watch::Receiver<bool>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

impl Leadership {
    /// A receiver of the leadership state (true while leading); `changed()` wakes on each flip.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Whether this process leads now.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// Stops the election, releasing the lease if held (waits for that last write).
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let _ = (&mut self.task).await;
    }
}

/// Starts electing on `client`'s API: a task tries every `retry_period`.
pub fn spawn(client: kube::Client, config: LeaderConfig) -> Leadership {
    let api = Api::namespaced(client, &config.namespace);
    let (tx, rx) = watch::channel(false);
    let (stop_tx, stop_rx) = oneshot::channel();
    let elector = Elector {
        api,
        config,
        observed: None,
    };
    let task = tokio::spawn(elect(elector, tx, stop_rx));
    Leadership {
        leading: rx,
        stop: Some(stop_tx),
        task,
    }
}

async fn elect(mut e: Elector, tx: watch::Sender<bool>, mut stop: oneshot::Receiver<()>) {
    let mut last_renew: Option<Instant> = None;
    // The other holder last logged, so a standby says who leads once per change.
    let mut holder_logged: Option<String> = None;
    loop {
        let started = Instant::now();
        // A leader's attempt may take only the time left before its deadline.
        let limit = match last_renew {
            Some(at) => (at + e.config.renew_deadline).saturating_duration_since(started),
            None => e.config.renew_deadline,
        };
        let attempt = tokio::select! {
            _ = &mut stop => break,
            r = tokio::time::timeout(limit, e.try_acquire_or_renew()) => r,
        };
        let result = attempt.unwrap_or_else(|_| {
            Err(LeaderError::Timeout {
                namespace: e.config.namespace.clone(),
                name: e.config.name.clone(),
            })
        });
        let lease = format!("{}/{}", e.config.namespace, e.config.name);
        match result {
            Ok(None) => {
                last_renew = Some(started);
                holder_logged = None;
                if !*tx.borrow() {
                    tracing::info!(%lease, identity = %e.config.identity, "became leader");
                    tx.send_replace(true);
                }
            }
            Ok(Some(holder)) => {
                last_renew = None;
                if *tx.borrow() {
                    tracing::warn!(%lease, %holder, "lost the lease to another holder");
                    tx.send_replace(false);
                }
                if !holder.is_empty() && holder_logged.as_deref() != Some(holder.as_str()) {
                    tracing::info!(%lease, %holder, "standing by: the lease is held by another process");
                    holder_logged = Some(holder);
                }
            }
            Err(err) => tracing::warn!(error = %err, "leader election attempt failed"),
        }
        if *tx.borrow()
            && last_renew.is_none_or(|at| Instant::now() >= at + e.config.renew_deadline)
        {
            tracing::warn!(lease = %e.config.name, "no renewal within the renew deadline: stepping down");
            last_renew = None;
            tx.send_replace(false);
        }
        tokio::select! {
            _ = &mut stop => break,
            _ = tokio::time::sleep(e.config.retry_period) => {}
        }
    }
    if *tx.borrow() {
        tx.send_replace(false);
        if let Err(err) = e.release().await {
            tracing::warn!(error = %err, "could not release the lease");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_api::{Mock, Reply, client, next, respond};
    use http::Method;
    use serde_json::{Value, json};

    const PATH: &str =
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cluster-autoscaler";
    const LIST: &str = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases";

    fn config(identity: &str) -> LeaderConfig {
        LeaderConfig {
            namespace: "kube-system".into(),
            name: "cluster-autoscaler".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    fn lease(holder: &str, rv: &str) -> Value {
        json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "cluster-autoscaler", "namespace": "kube-system", "resourceVersion": rv},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                     "renewTime": "2026-11-21T10:00:00.000000Z", "leaseTransitions": 3}})
    }

    fn status(code: u16, reason: &str) -> Value {
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": reason,
            "reason": reason, "code": code})
    }

    async fn expect(h: &mut Mock, method: Method, path: &str) -> (Value, Reply) {
        let (seen, send) = next(h).await.expect("a request");
        assert_eq!(seen.method, method, "{}", seen.uri);
        assert_eq!(seen.uri.split('?').next(), Some(path));
        (seen.body, send)
    }

    fn reply(send: Reply, code: u16, body: Value) {
        respond(send, code, &body);
    }

    /// An elector `me` that has just renewed its own lease (resourceVersion 2) and leads.
    async fn leading_elector() -> (Leadership, Mock) {
        let (c, mut h) = client();
        let l = spawn(c, config("me"));
        let (_, send) = expect(&mut h, Method::GET, PATH).await;
        reply(send, 200, lease("me", "1"));
        let (_, send) = expect(&mut h, Method::PUT, PATH).await;
        reply(send, 200, lease("me", "2"));
        settle().await;
        assert!(l.is_leader());
        (l, h)
    }

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn creates_a_missing_lease_and_leads() {
        let (c, mut h) = client();
        let l = spawn(c, config("me"));
        let (_, send) = expect(&mut h, Method::GET, PATH).await;
        reply(send, 404, status(404, "NotFound"));
        let (body, send) = expect(&mut h, Method::POST, LIST).await;
        assert_eq!(body["spec"]["holderIdentity"], "me");
        assert_eq!(body["spec"]["leaseDurationSeconds"], 15);
        assert_eq!(body["spec"]["leaseTransitions"], 0);
        reply(send, 201, lease("me", "1"));
        settle().await;
        assert!(l.is_leader());
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn waits_a_full_duration_before_taking_over_a_silent_holder() {
        let (c, mut h) = client();
        let l = spawn(c, config("me"));
        // Held by `other`, never renewed again: 15 s on our clock after first seeing it, take it.
        let mut gets = 0;
        loop {
            let (_, send) = expect(&mut h, Method::GET, PATH).await;
            reply(send, 200, lease("other", "7"));
            gets += 1;
            settle().await;
            assert!(!l.is_leader());
            if gets == 8 {
                break;
            }
        }
        // 8 attempts 2 s apart = 14 s: still not expired. The next one (16 s) takes over.
        let (_, send) = expect(&mut h, Method::GET, PATH).await;
        reply(send, 200, lease("other", "7"));
        let (body, send) = expect(&mut h, Method::PUT, PATH).await;
        assert_eq!(body["spec"]["holderIdentity"], "me");
        assert_eq!(body["metadata"]["resourceVersion"], "7");
        assert_eq!(body["spec"]["leaseTransitions"], 4);
        reply(send, 200, lease("me", "8"));
        settle().await;
        assert!(l.is_leader());
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_holder_that_keeps_renewing_is_never_displaced() {
        let (c, mut h) = client();
        let l = spawn(c, config("me"));
        for i in 0..20 {
            let (_, send) = expect(&mut h, Method::GET, PATH).await;
            reply(send, 200, lease("other", &i.to_string()));
            settle().await;
            assert!(!l.is_leader());
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_conflict_on_takeover_means_someone_else_won() {
        let (c, mut h) = client();
        let l = spawn(c, config("me"));
        let (_, send) = expect(&mut h, Method::GET, PATH).await;
        reply(send, 200, lease("", "3"));
        let (_, send) = expect(&mut h, Method::PUT, PATH).await;
        reply(send, 409, status(409, "Conflict"));
        settle().await;
        assert!(!l.is_leader());
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn failing_renewals_step_down_at_the_renew_deadline() {
        let (l, mut h) = leading_elector().await;
        let mut rx = l.subscribe();
        let led_at = Instant::now();
        // From now on the API fails every call.
        let stepped_down = async {
            rx.wait_for(|leading| !*leading)
                .await
                .expect("sender alive");
            Instant::now()
        };
        let fail = async {
            loop {
                let (_, send) = expect(&mut h, Method::GET, PATH).await;
                reply(send, 500, status(500, "InternalError"));
            }
        };
        let at = tokio::select! {
            at = stepped_down => at,
            _ = fail => unreachable!("the failing server loops forever"),
        };
        let after = at - led_at;
        assert!(
            after >= Duration::from_secs(10),
            "stepped down after {after:?}"
        );
        assert!(
            after <= Duration::from_secs(12),
            "stepped down after {after:?}"
        );
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_hanging_api_cannot_keep_a_leader_leading() {
        let (l, mut h) = leading_elector().await;
        let mut rx = l.subscribe();
        let led_at = Instant::now();
        // The next GET is never answered.
        let (_, _never_answered) = expect(&mut h, Method::GET, PATH).await;
        rx.wait_for(|leading| !*leading)
            .await
            .expect("sender alive");
        assert!(Instant::now() - led_at <= Duration::from_secs(10));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn stopping_releases_a_held_lease() {
        let (l, mut h) = leading_elector().await;
        let server = async {
            let (_, send) = expect(&mut h, Method::GET, PATH).await;
            reply(send, 200, lease("me", "2"));
            let (body, send) = expect(&mut h, Method::PUT, PATH).await;
            assert!(body["spec"]["holderIdentity"].is_null());
            assert_eq!(body["spec"]["leaseDurationSeconds"], 1);
            reply(send, 200, lease("", "3"));
        };
        tokio::join!(l.stop(), server);
    }
}
