//! Helpers shared by the tests that run the real binary as a process (`e2e.rs`, `scale.rs`):
//! the process itself ([`Autoscaler`]: spawned on a free `--address`, its log in a file, its
//! endpoints and metrics read over plain HTTP, killed on drop), and the tail of its log.

// Each test crate includes this module and uses a subset of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `cluster-autoscaler run`, killed on drop; its stderr goes to a file, whose tail is
/// printed when a test fails.
pub struct Autoscaler {
    /// The process.
    pub child: Child,
    /// Its stderr.
    pub stderr: PathBuf,
    /// `127.0.0.1:<port>` of its `/metrics` and `/health-check`.
    pub address: String,
    /// When it was spawned.
    pub started: Instant,
}

impl Autoscaler {
    /// Spawns `cluster-autoscaler run --kubeconfig=<kubeconfig> --address=<free port> <args>`
    /// as pod `pod_name` (`POD_NAME`), under `wrapper` (a program and its arguments, e.g. a
    /// profiler; empty: none), its stderr in `ca-<tag>-<test pid>-<pod_name>-<port>.log` in
    /// the temporary directory.
    pub fn spawn(
        tag: &str,
        pod_name: &str,
        kubeconfig: &Path,
        wrapper: &[&str],
        args: &[&str],
    ) -> Autoscaler {
        let port = free_port();
        let address = format!("127.0.0.1:{port}");
        let stderr = std::env::temp_dir().join(format!(
            "ca-{tag}-{}-{pod_name}-{port}.log",
            std::process::id()
        ));
        let log = std::fs::File::create(&stderr).expect("log file");
        let started = Instant::now();
        let binary = binary();
        let mut words = wrapper.to_vec();
        words.push(binary.to_str().expect("UTF-8 binary path"));
        let child = Command::new(words[0])
            .args(&words[1..])
            .arg("run")
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--address={address}"))
            .args(args)
            .env("POD_NAME", pod_name)
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .expect("spawn cluster-autoscaler");
        Autoscaler {
            child,
            stderr,
            address,
            started,
        }
    }

    /// What the process logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// `(status code, body)` of `GET path`, or `None` if nothing answers.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(&self.address, path)
    }

    /// Sum of every sample of `metric` in `/metrics` (0 when absent or unreachable).
    pub fn metric(&self, metric: &str) -> f64 {
        self.metric_where(metric, "")
    }

    /// Sum of the samples of `metric` whose labels contain `labels` (0 when absent or
    /// unreachable).
    pub fn metric_where(&self, metric: &str, labels: &str) -> f64 {
        let Some((200, body)) = self.get("/metrics") else {
            return 0.0;
        };
        body.lines()
            .filter(|l| {
                l.strip_prefix(metric).is_some_and(|rest| {
                    (rest.starts_with(' ') || rest.starts_with('{')) && rest.contains(labels)
                })
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Autoscaler {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "----- {} -----\n{}",
                self.stderr.display(),
                tail(&self.log())
            );
        }
    }
}

/// The binary under test: the one cargo built for this test, or `CLUSTER_AUTOSCALER_BIN` when
/// set (a copy kept apart when several checkouts build into one shared target directory, where
/// another build may replace the binary while the tests run).
pub fn binary() -> PathBuf {
    std::env::var_os("CLUSTER_AUTOSCALER_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_cluster-autoscaler")))
}

/// The last 12,000 bytes of `s` (on a character boundary), for printing a process's log.
pub fn tail(s: &str) -> &str {
    let start = s.len().saturating_sub(12_000);
    let start = (start..s.len())
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(s.len());
    &s[start..]
}

/// A loopback port free at the time of the call (released again: a small race, acceptable in
/// tests).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// A minimal HTTP/1.1 GET with `Connection: close`: `(status code, body)`, or `None` if
/// nothing answers.
pub fn http_get(address: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(address).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Some((code, body.to_string()))
}

/// A minimal HTTP/1.1 request with a JSON body and `Connection: close` (a client writing an
/// object, as `kubectl apply` would): `(status code, body)`, or `None` if nothing answers.
pub fn http_send(address: &str, method: &str, path: &str, json: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(address).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
        json.len()
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let code = text.split(' ').nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Some((code, body.to_string()))
}

/// Waits until `cond` holds, polling every 100 ms; fails the test naming `what` after `timeout`.
pub async fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let end = tokio::time::Instant::now() + timeout;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < end,
            "timed out after {timeout:?} waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
