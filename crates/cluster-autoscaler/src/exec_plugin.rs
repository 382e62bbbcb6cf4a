//! Client credentials that change while the autoscaler runs: an exec credential plugin's
//! (kubeconfig `users[].user.exec`) and a token file's (`tokenFile`, the service account's
//! token in a pod). We run the plugin and read the file ourselves, bounded, instead of leaving
//! them to the Kubernetes client, which reads a plugin's output and a token file without limit
//! and waits for a plugin without end.
//!
//! A plugin runs as client-go runs it: its `args` and `env` over our environment,
//! `KUBERNETES_EXEC_INFO` holding an `ExecCredential` (`apiVersion`, `spec.interactive`, and
//! `spec.cluster` with `provideClusterInfo`), standard input given only when interactive and
//! standard input is a terminal (`interactiveMode`), standard error passed through. Its
//! `ExecCredential` (JSON, or YAML as client-go's decoder also takes) gives a token or a client
//! certificate and key. Deviation from client-go, which waits for a plugin for as long as it
//! runs: a plugin is killed after [`EXEC_TIMEOUT`] or once it writes more than
//! [`EXEC_OUTPUT_LIMIT`], with an error naming the kubeconfig user and the limit. A token is
//! fetched again a minute before its `expirationTimestamp` (as the Kubernetes client does); if
//! that fails while the old token is still valid, the old one is used. A token file is read
//! again at most once a minute (as client-go and the Kubernetes client do), with surrounding
//! white space trimmed (as client-go does), and the last good token kept if it cannot be.
//!
//! It decides nothing about the cluster and never blocks an async worker: a plugin runs on the
//! blocking pool.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use http::{HeaderValue, Request};
use jiff::{SignedDuration, Timestamp};
use kube::config::{ExecConfig, ExecInteractiveMode};
use serde::{Deserialize, Serialize};

use autoscaler_options::{FileError, TOKEN_LIMIT, file_size, read_bounded_text};

/// How long a plugin may run before it is killed (client-go has no limit).
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(60);
/// How much a plugin may write on its standard output.
pub const EXEC_OUTPUT_LIMIT: u64 = 1024 * 1024;
/// How long before its expiry a plugin's token is fetched again.
const REFRESH_BEFORE: SignedDuration = SignedDuration::from_secs(60);
/// How often a token file is read again.
const TOKEN_FILE_RELOAD: SignedDuration = SignedDuration::from_secs(60);

/// Why a credential could not be had.
#[derive(Debug, thiserror::Error)]
pub enum CredentialError {
    /// The plugin could not be started, failed, overran a limit or wrote no usable credential.
    #[error("exec credential plugin of kubeconfig user {user:?} ({command}): {why}")]
    Exec {
        /// The kubeconfig user (`users[].name`).
        user: String,
        /// The plugin's command.
        command: String,
        /// What went wrong.
        why: String,
    },
    /// The token file cannot be read or holds no usable token.
    #[error("token file {}: {why}", path.display())]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        why: String,
    },
}

/// What a plugin gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Credential {
    /// A bearer token, valid until the expiry if one was given.
    Token {
        /// The token.
        token: String,
        /// `status.expirationTimestamp`.
        expires: Option<Timestamp>,
    },
    /// A client certificate and key (PEM).
    Certificate {
        /// `status.clientCertificateData`.
        certificate: String,
        /// `status.clientKeyData`.
        key: String,
    },
}

/// The limits a plugin runs under (the constants above, smaller in tests).
#[derive(Clone, Copy, Debug)]
pub struct ExecLimits {
    /// How long it may run.
    pub timeout: Duration,
    /// How many bytes it may write on standard output.
    pub output: u64,
}

impl Default for ExecLimits {
    fn default() -> Self {
        ExecLimits {
            timeout: EXEC_TIMEOUT,
            output: EXEC_OUTPUT_LIMIT,
        }
    }
}

/// `client.authentication.k8s.io` `ExecCredential`, as far as it is read or written here.
#[derive(Debug, Serialize, Deserialize)]
struct ExecCredential {
    #[serde(
        rename = "apiVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    api_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    spec: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<ExecStatus>,
}

#[derive(Debug, Serialize, Deserialize)]
struct ExecStatus {
    #[serde(rename = "expirationTimestamp", default)]
    expiration_timestamp: Option<String>,
    #[serde(default)]
    token: Option<String>,
    #[serde(rename = "clientCertificateData", default)]
    client_certificate_data: Option<String>,
    #[serde(rename = "clientKeyData", default)]
    client_key_data: Option<String>,
}

/// Runs the plugin of kubeconfig user `user` once, within `limits`.
pub fn run_plugin(
    user: &str,
    exec: &ExecConfig,
    limits: ExecLimits,
) -> Result<Credential, CredentialError> {
    let command = exec.command.clone().unwrap_or_default();
    let fail = |why: String| CredentialError::Exec {
        user: user.to_string(),
        command: command.clone(),
        why,
    };
    if command.is_empty() {
        return Err(fail("no command".into()));
    }
    let mut cmd = Command::new(&command);
    cmd.args(exec.args.iter().flatten());
    for env in exec.env.iter().flatten() {
        if let (Some(name), Some(value)) = (env.get("name"), env.get("value")) {
            cmd.env(name, value);
        }
    }
    for name in exec.drop_env.iter().flatten() {
        cmd.env_remove(name);
    }
    let terminal = std::io::IsTerminal::is_terminal(&std::io::stdin());
    let interactive = match exec.interactive_mode {
        Some(ExecInteractiveMode::Never) => false,
        Some(ExecInteractiveMode::Always) if !terminal => {
            return Err(fail(
                "interactiveMode Always needs a terminal on standard input, and there is none"
                    .into(),
            ));
        }
        _ => terminal,
    };
    let mut spec = serde_json::json!({ "interactive": interactive });
    if exec.provide_cluster_info {
        let cluster = exec
            .cluster
            .as_ref()
            .ok_or_else(|| fail("provideClusterInfo without a cluster".into()))?;
        spec["cluster"] = serde_json::to_value(cluster).map_err(|e| fail(e.to_string()))?;
    }
    let info = ExecCredential {
        api_version: exec.api_version.clone(),
        kind: Some("ExecCredential".into()),
        spec: Some(spec),
        status: None,
    };
    let info = serde_json::to_string(&info).map_err(|e| fail(e.to_string()))?;
    cmd.env("KUBERNETES_EXEC_INFO", info)
        .stdin(if interactive {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if !interactive {
        // Its own process group, so that killing it also kills what it started (a plugin is
        // often a script); an interactive one stays in the terminal's foreground group.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    }
    let mut child = spawn_unless_busy(&mut cmd).map_err(|e| fail(format!("cannot start: {e}")))?;
    let mut stdout = child.stdout.take().expect("stdout is piped");
    let limit = limits.output;
    let (tx, rx) = std::sync::mpsc::channel();
    // The plugin's output is read on a thread of its own so that the wait below can time out.
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let r = (&mut stdout)
            .take(limit.saturating_add(1))
            .read_to_end(&mut out);
        let _ = tx.send(r.map(|_| out));
    });
    let deadline = Instant::now() + limits.timeout;
    let timed_out = || {
        format!(
            "did not finish within {} s (the limit; it was killed)",
            limits.timeout.as_secs_f64()
        )
    };
    let out = match rx.recv_timeout(limits.timeout) {
        Ok(Ok(out)) if out.len() as u64 > limit => {
            kill(&mut child);
            return Err(fail(format!(
                "wrote more than {} on standard output (the limit; it was killed)",
                file_size(limit)
            )));
        }
        Ok(Ok(out)) => out,
        Ok(Err(e)) => {
            kill(&mut child);
            return Err(fail(format!("cannot read its output: {e}")));
        }
        Err(_) => {
            kill(&mut child);
            return Err(fail(timed_out()));
        }
    };
    // Its output is closed; it may still run.
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() >= deadline => {
                kill(&mut child);
                return Err(fail(timed_out()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(fail(format!("cannot wait for it: {e}"))),
        }
    };
    if !status.success() {
        let mut why = format!("failed ({status})");
        if let Some(hint) = &exec.install_hint {
            why.push_str(&format!("; {hint}"));
        }
        return Err(fail(why));
    }
    parse_credential(&out, exec.api_version.as_deref()).map_err(fail)
}

/// Kills and reaps a child (it may have exited already), and the process group it leads if
/// it leads one.
fn kill(child: &mut std::process::Child) {
    let pid = rustix::process::Pid::from_child(child);
    if rustix::process::getpgid(Some(pid)) == Ok(pid) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The credential in a plugin's output; `expected` is the kubeconfig's `apiVersion`.
fn parse_credential(out: &[u8], expected: Option<&str>) -> Result<Credential, String> {
    let text = std::str::from_utf8(out).map_err(|e| format!("output is not UTF-8: {e}"))?;
    autoscaler_model::check_depth(text).map_err(|e| format!("output: {e}"))?;
    let cred: ExecCredential = serde_yaml_ng::from_str(text)
        .map_err(|e| format!("output is not an ExecCredential: {e}"))?;
    if let (Some(want), Some(got)) = (expected, cred.api_version.as_deref())
        && want != got
    {
        return Err(format!(
            "returned apiVersion {got:?}, the kubeconfig asks for {want:?}"
        ));
    }
    let status = cred
        .status
        .ok_or("output has no status (an ExecCredential's credential)")?;
    let expires = status
        .expiration_timestamp
        .as_deref()
        .map(|t| {
            t.parse::<Timestamp>()
                .map_err(|e| format!("status.expirationTimestamp {t:?}: {e}"))
        })
        .transpose()?;
    match (
        status.token,
        status.client_certificate_data,
        status.client_key_data,
    ) {
        (_, Some(certificate), Some(key)) => Ok(Credential::Certificate { certificate, key }),
        (_, Some(_), None) => Err("status.clientCertificateData without clientKeyData".into()),
        (_, None, Some(_)) => Err("status.clientKeyData without clientCertificateData".into()),
        (Some(token), None, None) if !token.is_empty() => {
            bearer(&token).map_err(|e| format!("status.token: {e}"))?;
            Ok(Credential::Token { token, expires })
        }
        _ => Err("status has neither a token nor a client certificate and key".into()),
    }
}

/// The `Authorization` header of a bearer token, or why the token cannot be one.
pub fn bearer(token: &str) -> Result<HeaderValue, String> {
    let mut v = HeaderValue::try_from(format!("Bearer {token}")).map_err(|_| {
        "is not a valid HTTP header value (a control character or line break)".to_string()
    })?;
    v.set_sensitive(true);
    Ok(v)
}

/// The token of a token file: read with [`autoscaler_options::TOKEN_LIMIT`], trimmed, non-empty and
/// valid in a header.
pub fn read_token_file(path: &std::path::Path) -> Result<HeaderValue, CredentialError> {
    let fail = |why: String| CredentialError::TokenFile {
        path: path.to_path_buf(),
        why,
    };
    let text = read_bounded_text(path, TOKEN_LIMIT, "token file").map_err(|e| match e {
        FileError::Read { error, .. } => fail(format!("cannot read: {error}")),
        FileError::TooLarge { limit, .. } => {
            fail(format!("larger than {} (the limit)", file_size(limit)))
        }
        FileError::NotText { error, .. } => fail(format!("not UTF-8 text: {error}")),
    })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(fail("empty".into()));
    }
    bearer(token).map_err(fail)
}

/// Where a refreshed token comes from.
#[derive(Debug)]
enum Source {
    /// A plugin: the kubeconfig user and its `exec`.
    Exec {
        user: String,
        exec: Box<ExecConfig>,
        limits: ExecLimits,
    },
    /// A token file.
    File(PathBuf),
}

/// A bearer token set on every request ([`BearerLayer`]) and fetched again in the background
/// ([`RefreshingToken::spawn`]) before it expires, so that no request waits for a plugin.
#[derive(Debug)]
pub struct RefreshingToken {
    source: Source,
    current: Arc<RwLock<HeaderValue>>,
    /// When to fetch it again; `None`: never (a plugin's token without expiry).
    next: Option<Timestamp>,
}

impl RefreshingToken {
    /// The token of a plugin's first answer, fetched again a minute before `expires`.
    pub fn exec(
        user: &str,
        exec: ExecConfig,
        limits: ExecLimits,
        token: &str,
        expires: Option<Timestamp>,
    ) -> Result<RefreshingToken, CredentialError> {
        let header = bearer(token).map_err(|why| CredentialError::Exec {
            user: user.to_string(),
            command: exec.command.clone().unwrap_or_default(),
            why: format!("status.token: {why}"),
        })?;
        Ok(RefreshingToken {
            source: Source::Exec {
                user: user.to_string(),
                exec: Box::new(exec),
                limits,
            },
            current: Arc::new(RwLock::new(header)),
            next: refresh_time(expires, Timestamp::now()),
        })
    }

    /// The token of a token file, read now (errors name the file) and again every minute.
    pub fn file(path: PathBuf) -> Result<RefreshingToken, CredentialError> {
        let header = read_token_file(&path)?;
        Ok(RefreshingToken {
            source: Source::File(path),
            current: Arc::new(RwLock::new(header)),
            next: Some(Timestamp::now() + TOKEN_FILE_RELOAD),
        })
    }

    /// The layer that sets the current token on each request.
    pub fn layer(&self) -> BearerLayer {
        BearerLayer(self.current.clone())
    }

    /// The header requests carry now.
    #[cfg(test)]
    pub fn header(&self) -> HeaderValue {
        read_header(&self.current)
    }

    /// Fetches the token again (now, whatever `next` says) and sets when to next time. On an
    /// error the current token stays and it is tried again [`RETRY_AFTER`] later.
    pub async fn refresh(&mut self) -> Result<(), CredentialError> {
        let now = Timestamp::now();
        let fetched = match &self.source {
            Source::File(path) => {
                self.next = Some(now + TOKEN_FILE_RELOAD);
                read_token_file(path).map(|h| (h, self.next))
            }
            Source::Exec { user, exec, limits } => {
                let (user, exec, limits) = (user.clone(), exec.clone(), *limits);
                tokio::task::spawn_blocking(move || fetch_token(&user, &exec, limits))
                    .await
                    .unwrap_or_else(|e| {
                        Err(CredentialError::Exec {
                            user: String::new(),
                            command: String::new(),
                            why: format!("the plugin's task failed: {e}"),
                        })
                    })
                    .map(|(h, expires)| (h, refresh_time(expires, now)))
            }
        };
        match fetched {
            Ok((header, next)) => {
                *self.current.write().unwrap_or_else(|p| p.into_inner()) = header;
                self.next = next;
                Ok(())
            }
            Err(e) => {
                if let Source::Exec { .. } = self.source {
                    self.next = Some(now + RETRY_AFTER);
                }
                Err(e)
            }
        }
    }

    /// Keeps the token fresh in the background for as long as the runtime runs. Failures are
    /// logged and the current token kept (as client-go keeps a token file's last token).
    pub fn spawn(mut self) {
        tokio::spawn(async move {
            while let Some(next) = self.next {
                let wait = Timestamp::now().duration_until(next);
                tokio::time::sleep(wait.try_into().unwrap_or(Duration::ZERO)).await;
                if let Err(e) = self.refresh().await {
                    tracing::warn!(error = %e, "cannot refresh the API credential; keeping the current one");
                }
            }
        });
    }
}

/// How soon a failed plugin is run again, and the least time between two runs.
pub const RETRY_AFTER: SignedDuration = SignedDuration::from_secs(10);

/// When to fetch a token expiring at `expires` again: a minute before, but not sooner than
/// [`RETRY_AFTER`] from `now` (a plugin giving tokens that live less than a minute is not run
/// in a loop).
fn refresh_time(expires: Option<Timestamp>, now: Timestamp) -> Option<Timestamp> {
    expires.map(|t| (t - REFRESH_BEFORE).max(now + RETRY_AFTER))
}

/// Runs a plugin for a token (a certificate where a token was given at start is an error:
/// the TLS identity is set once).
fn fetch_token(
    user: &str,
    exec: &ExecConfig,
    limits: ExecLimits,
) -> Result<(HeaderValue, Option<Timestamp>), CredentialError> {
    let fail = |why: String| CredentialError::Exec {
        user: user.to_string(),
        command: exec.command.clone().unwrap_or_default(),
        why,
    };
    match run_plugin(user, exec, limits)? {
        Credential::Token { token, expires } => bearer(&token)
            .map(|h| (h, expires))
            .map_err(|why| fail(format!("status.token: {why}"))),
        Credential::Certificate { .. } => Err(fail(
            "returned a client certificate where it gave a token at start".into(),
        )),
    }
}

fn read_header(current: &RwLock<HeaderValue>) -> HeaderValue {
    current.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Sets `Authorization` to the current token of a [`RefreshingToken`] on each request.
#[derive(Clone, Debug)]
pub struct BearerLayer(Arc<RwLock<HeaderValue>>);

impl<S> tower::Layer<S> for BearerLayer {
    type Service = Bearer<S>;

    fn layer(&self, inner: S) -> Bearer<S> {
        Bearer {
            inner,
            current: self.0.clone(),
        }
    }
}

/// See [`BearerLayer`].
#[derive(Clone, Debug)]
pub struct Bearer<S> {
    inner: S,
    current: Arc<RwLock<HeaderValue>>,
}

impl<S: tower::Service<Request<B>>, B> tower::Service<Request<B>> for Bearer<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<B>) -> S::Future {
        request
            .headers_mut()
            .insert(http::header::AUTHORIZATION, read_header(&self.current));
        self.inner.call(request)
    }
}

/// Starts `cmd`, trying again a few times while its executable is busy (`ETXTBSY`): a plugin
/// file just written (by an installer, a credential rotation, another thread of ours) stays busy
/// while any process forked meanwhile holds it open for writing, until that process execs.
fn spawn_unless_busy(cmd: &mut Command) -> std::io::Result<std::process::Child> {
    let busy = rustix::io::Errno::TXTBSY.raw_os_error();
    let mut tries = 0u64;
    loop {
        match cmd.spawn() {
            Err(e) if e.raw_os_error() == Some(busy) && tries < 5 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20 * tries));
            }
            started => return started,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An executable shell script `name` with `body`.
    fn script(name: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("ca-exec-plugin-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p.to_str().unwrap().to_string()
    }

    fn exec(command: &str) -> ExecConfig {
        ExecConfig {
            api_version: Some("client.authentication.k8s.io/v1".into()),
            command: Some(command.into()),
            args: Some(vec!["--flag".into()]),
            env: Some(vec![
                [
                    ("name".to_string(), "PLUGIN_VAR".to_string()),
                    ("value".to_string(), "v1".to_string()),
                ]
                .into_iter()
                .collect(),
            ]),
            drop_env: None,
            install_hint: None,
            interactive_mode: Some(ExecInteractiveMode::Never),
            provide_cluster_info: false,
            cluster: None,
            other: Default::default(),
        }
    }

    const SMALL: ExecLimits = ExecLimits {
        timeout: Duration::from_secs(2),
        output: 64 * 1024,
    };

    #[test]
    fn a_plugin_that_writes_without_end_is_killed_at_the_output_limit() {
        let p = script("endless.sh", "yes");
        let start = Instant::now();
        let e = run_plugin("admin", &exec(&p), SMALL)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"admin\"") && e.contains("more than 64 KiB"),
            "{e}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn a_plugin_that_never_returns_is_killed_at_the_timeout() {
        let p = script("sleeps.sh", "exec sleep 1000");
        let start = Instant::now();
        let e = run_plugin("admin", &exec(&p), SMALL)
            .unwrap_err()
            .to_string();
        assert!(e.contains("\"admin\"") && e.contains("within 2 s"), "{e}");
        let took = start.elapsed();
        assert!(
            took >= Duration::from_secs(2) && took < Duration::from_secs(10),
            "{took:?}"
        );
        // A script whose child holds its output open: both are killed, nothing lingers.
        let pidfile =
            std::env::temp_dir().join(format!("ca-exec-grandchild-{}", std::process::id()));
        let p = script(
            "grandchild.sh",
            &format!("sleep 1000 &\necho $! > {}\nwait", pidfile.display()),
        );
        let e = run_plugin("admin", &exec(&p), SMALL)
            .unwrap_err()
            .to_string();
        assert!(e.contains("within 2 s"), "{e}");
        std::thread::sleep(Duration::from_millis(200));
        let pid = std::fs::read_to_string(&pidfile).unwrap();
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
        // Gone, or a zombie waiting for its reaper.
        assert!(stat.is_empty() || stat.contains(") Z "), "{stat}");
        // One that closes its output and goes on running is killed too.
        let p = script("lingers.sh", "exec >&-; exec sleep 1000");
        let e = run_plugin("admin", &exec(&p), SMALL)
            .unwrap_err()
            .to_string();
        assert!(e.contains("within 2 s"), "{e}");
    }

    #[test]
    fn a_good_plugin_gets_args_env_and_exec_info_and_gives_its_token() {
        // The token echoes what the plugin was given, so the test sees it.
        let p = script(
            "good.sh",
            r#"case "$KUBERNETES_EXEC_INFO" in
  *'"apiVersion":"client.authentication.k8s.io/v1"'*'"interactive":false'*) ;;
  *) echo "bad exec info: $KUBERNETES_EXEC_INFO" >&2; exit 3 ;;
esac
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"tok-%s-%s","expirationTimestamp":"2030-01-01T00:00:00Z"}}' "$1" "$PLUGIN_VAR""#,
        );
        let c = run_plugin("admin", &exec(&p), SMALL).unwrap();
        assert_eq!(
            c,
            Credential::Token {
                token: "tok---flag-v1".into(),
                expires: Some("2030-01-01T00:00:00Z".parse().unwrap())
            }
        );
    }

    #[test]
    fn plugin_failures_and_bad_credentials_name_the_user_and_the_field() {
        let p = script("fails.sh", "exit 7");
        let e = run_plugin("ops", &exec(&p), SMALL).unwrap_err().to_string();
        assert!(e.contains("\"ops\"") && e.contains("exit status: 7"), "{e}");
        let e = run_plugin("ops", &exec("/nonexistent/plugin"), SMALL)
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot start"), "{e}");
        for (out, why) in [
            (r#"{"status":{"token":"a\u0001b"}}"#, "status.token"),
            (r#"{"status":{}}"#, "neither a token"),
            (r#"{"kind":"ExecCredential"}"#, "no status"),
            (
                r#"{"status":{"token":"t","expirationTimestamp":"soon"}}"#,
                "expirationTimestamp",
            ),
            (
                r#"{"apiVersion":"client.authentication.k8s.io/v1beta1","status":{"token":"t"}}"#,
                "v1beta1",
            ),
            ("[[[[", "not an ExecCredential"),
        ] {
            let e = parse_credential(out.as_bytes(), Some("client.authentication.k8s.io/v1"))
                .unwrap_err();
            assert!(e.contains(why), "{out}: {e}");
        }
        // YAML, as client-go's decoder takes it.
        let c = parse_credential(b"status:\n  token: y\n", None).unwrap();
        assert_eq!(
            c,
            Credential::Token {
                token: "y".into(),
                expires: None
            }
        );
    }

    #[test]
    fn token_files_are_trimmed_bounded_and_checked() {
        let dir = std::env::temp_dir().join(format!("ca-token-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good");
        std::fs::write(&good, "abc\n").unwrap();
        assert_eq!(read_token_file(&good).unwrap(), "Bearer abc");
        let bad = dir.join("bad");
        std::fs::write(&bad, "a\u{1}b").unwrap();
        let e = read_token_file(&bad).unwrap_err().to_string();
        assert!(e.contains("bad") && e.contains("header"), "{e}");
        let e = read_token_file(std::path::Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/dev/zero") && e.contains("1 MiB"), "{e}");
    }

    #[tokio::test]
    async fn a_token_is_fetched_again_before_it_expires() {
        let count = std::env::temp_dir().join(format!("ca-exec-count-{}", std::process::id()));
        let _ = std::fs::remove_file(&count);
        // Each run appends a line and answers with the number of lines: tokens 1, 2, ...
        let p = script(
            "counts.sh",
            &format!(
                "echo x >> {c}\nn=$(wc -l < {c})\nprintf '{{\"status\":{{\"token\":\"t%s\",\"expirationTimestamp\":\"%s\"}}}}' $n \"$(date -u -d @$(( $(date +%s) + 30 )) +%Y-%m-%dT%H:%M:%SZ)\"",
                c = count.display()
            ),
        );
        let e = exec(&p);
        let Credential::Token { token, expires } = run_plugin("u", &e, SMALL).unwrap() else {
            panic!("a token")
        };
        assert_eq!(token, "t1");
        // A token expiring in 30 s is fetched again at once, but not in a loop.
        let mut t = RefreshingToken::exec("u", e, SMALL, &token, expires).unwrap();
        let now = Timestamp::now();
        assert!(
            t.next.unwrap() > now + SignedDuration::from_secs(5),
            "{:?}",
            t.next
        );
        assert_eq!(t.header(), "Bearer t1");
        let layer = t.layer();
        t.refresh().await.unwrap();
        assert_eq!(t.header(), "Bearer t2");
        // Requests carry the new token.
        let mut svc = tower::Layer::layer(
            &layer,
            tower::service_fn(|r: Request<()>| async move {
                Ok::<_, std::convert::Infallible>(r.headers()[http::header::AUTHORIZATION].clone())
            }),
        );
        let sent = tower::Service::call(&mut svc, Request::new(()))
            .await
            .unwrap();
        assert_eq!(sent, "Bearer t2");
        // A token without expiry is never fetched again.
        let kept = RefreshingToken::exec("u", exec(&p), SMALL, "fixed", None).unwrap();
        assert_eq!(
            (kept.header(), kept.next),
            (HeaderValue::from_static("Bearer fixed"), None)
        );
        // A failing plugin keeps the current token and is tried again later.
        let mut failing = RefreshingToken::exec(
            "u",
            exec(&script("now-fails.sh", "exit 1")),
            SMALL,
            "old",
            expires,
        )
        .unwrap();
        assert!(failing.refresh().await.is_err());
        assert_eq!(failing.header(), "Bearer old");
        assert!(failing.next.unwrap() > Timestamp::now());
        let _ = std::fs::remove_file(&count);
    }
}
