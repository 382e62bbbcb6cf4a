//! The credentials of a kubeconfig (and of the pod's service account), checked before the
//! Kubernetes client sees them: a token, password or impersonation value that cannot be an
//! HTTP header (a control character: the client panicked on such a token), a certificate or
//! key that is not base64 or PEM, a file it names that cannot be read or is far too large.
//! Each is an error naming the field (`users[0] (admin).user.token`); the CLI adds the file.
//!
//! The files a kubeconfig names (`certificate-authority`, `client-certificate`, `client-key`)
//! are read here, with the limits of [`autoscaler_options::read_bounded`], and handed to the client as the
//! matching `-data` fields, so it never reads them itself; relative paths are taken from the
//! kubeconfig's directory, as client-go does. Only the current context's cluster and user are
//! checked: the client uses no other. It never contacts a cluster and never runs a plugin
//! (that is [`crate::exec_plugin`]).

use std::path::{Path, PathBuf};

use base64::Engine;
use kube::config::{AuthInfo, Cluster, Kubeconfig};
use secrecy::{ExposeSecret, SecretString};

use crate::exec_plugin;
use autoscaler_options::CERTIFICATE_LIMIT;

/// A kubeconfig field that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {why}")]
pub struct FieldError {
    /// Its path (`clusters[0] (prod).cluster.certificate-authority-data`).
    pub field: String,
    /// What is wrong (never the secret itself).
    pub why: String,
}

/// The service account's files in a pod.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Makes the relative paths of `kc`, a file in `dir`, absolute (files and exec commands with a
/// path separator, as client-go resolves them).
pub fn resolve_relative(kc: &mut Kubeconfig, dir: &Path) {
    let abs = |p: &mut Option<String>| {
        if let Some(s) = p
            && Path::new(s).is_relative()
            && let Some(joined) = dir.join(&*s).to_str()
        {
            *s = joined.to_string();
        }
    };
    for c in kc.clusters.iter_mut().filter_map(|c| c.cluster.as_mut()) {
        abs(&mut c.certificate_authority);
    }
    for u in kc
        .auth_infos
        .iter_mut()
        .filter_map(|u| u.auth_info.as_mut())
    {
        abs(&mut u.client_certificate);
        abs(&mut u.client_key);
        abs(&mut u.token_file);
        if let Some(exec) = &mut u.exec
            && exec.command.as_deref().is_some_and(|c| c.contains('/'))
        {
            abs(&mut exec.command);
        }
    }
}

/// Checks the current context's cluster and user and reads the files they name into their
/// `-data` fields. A missing context, cluster or user is left for the client to report.
pub fn check(kc: &mut Kubeconfig) -> Result<(), FieldError> {
    let Some(context) = kc
        .current_context
        .as_deref()
        .and_then(|name| kc.contexts.iter().find(|c| c.name == name))
        .and_then(|c| c.context.clone())
    else {
        return Ok(());
    };
    if let Some((i, named)) = kc
        .clusters
        .iter_mut()
        .enumerate()
        .find(|(_, c)| c.name == context.cluster)
        && let Some(cluster) = &mut named.cluster
    {
        check_cluster(cluster, &format!("clusters[{i}] ({}).cluster", named.name))?;
    }
    if let Some(user) = &context.user
        && let Some((i, named)) = kc
            .auth_infos
            .iter_mut()
            .enumerate()
            .find(|(_, u)| &u.name == user)
        && let Some(auth) = &mut named.auth_info
    {
        check_user(auth, &format!("users[{i}] ({}).user", named.name))?;
    }
    Ok(())
}

fn err(field: String, why: impl Into<String>) -> FieldError {
    FieldError {
        field,
        why: why.into(),
    }
}

fn check_cluster(c: &mut Cluster, at: &str) -> Result<(), FieldError> {
    if let Some(proxy) = c.proxy_url.as_deref().filter(|p| !p.is_empty()) {
        let field = format!("{at}.proxy-url");
        proxy
            .parse::<http::Uri>()
            .map_err(|e| err(field.clone(), format!("invalid URL: {e}")))?;
        // The client is built without proxy support: say so here, with the field.
        return Err(err(
            field,
            "proxies are not supported; reach the server directly",
        ));
    }
    match (&c.certificate_authority_data, &c.certificate_authority) {
        (Some(data), _) => {
            let field = format!("{at}.certificate-authority-data");
            certificates(&decode(data, &field)?, &field)?;
        }
        (None, Some(path)) => {
            let field = format!("{at}.certificate-authority");
            let bytes = read(path, &field)?;
            certificates(&bytes, &field)?;
            c.certificate_authority_data = Some(encode(&bytes));
            c.certificate_authority = None;
        }
        (None, None) => {}
    }
    Ok(())
}

fn check_user(u: &mut AuthInfo, at: &str) -> Result<(), FieldError> {
    // The client's order: auth-provider, basic, token, tokenFile, exec.
    let basic = u.username.is_some() && u.password.is_some();
    if let Some(token) = &u.token {
        exec_plugin::bearer(token.expose_secret())
            .map_err(|why| err(format!("{at}.token"), why))?;
    } else if let Some(path) = &u.token_file
        && u.auth_provider.is_none()
        && !basic
    {
        exec_plugin::read_token_file(Path::new(path))
            .map_err(|e| err(format!("{at}.tokenFile"), e.to_string()))?;
    }
    let header = |value: &str, field: String| {
        http::HeaderValue::from_str(value).map(|_| ()).map_err(|_| {
            err(
                field,
                "is not a valid HTTP header value (a control character or line break)",
            )
        })
    };
    // The client sends these tokens of an auth-provider (oidc, gcp) as they are.
    if let Some(provider) = &u.auth_provider {
        for key in ["id-token", "access-token"] {
            if let Some(token) = provider.config.get(key) {
                exec_plugin::bearer(token)
                    .map_err(|why| err(format!("{at}.auth-provider.config.{key}"), why))?;
            }
        }
    }
    if let Some(v) = &u.impersonate {
        header(v, format!("{at}.as"))?;
    }
    if let Some(v) = &u.impersonate_uid {
        header(v, format!("{at}.as-uid"))?;
    }
    for (k, v) in u.impersonate_groups.iter().flatten().enumerate() {
        header(v, format!("{at}.as-groups[{k}]"))?;
    }
    if let Some(extra) = &u.impersonate_user_extra {
        for (key, values) in extra {
            for (k, v) in values.iter().enumerate() {
                header(v, format!("{at}.as-user-extra.{key}[{k}]"))?;
            }
        }
    }
    // Client certificate and key: data wins over the file, as in the client.
    let certificate = match (&u.client_certificate_data, &u.client_certificate) {
        (Some(data), _) => {
            let field = format!("{at}.client-certificate-data");
            Some((decode(data, &field)?, field, false))
        }
        (None, Some(path)) => {
            let field = format!("{at}.client-certificate");
            Some((read(path, &field)?, field, true))
        }
        (None, None) => None,
    };
    let key = match (&u.client_key_data, &u.client_key) {
        (Some(data), _) => {
            let field = format!("{at}.client-key-data");
            Some((decode(data.expose_secret(), &field)?, field, false))
        }
        (None, Some(path)) => {
            let field = format!("{at}.client-key");
            Some((read(path, &field)?, field, true))
        }
        (None, None) => None,
    };
    match (certificate, key) {
        (Some((cert, field, from_file)), Some((key, key_field, key_from_file))) => {
            certificates(&cert, &field)?;
            private_key(&key, &key_field)?;
            if from_file {
                u.client_certificate_data = Some(encode(&cert));
                u.client_certificate = None;
            }
            if key_from_file {
                u.client_key_data = Some(SecretString::from(encode(&key)));
                u.client_key = None;
            }
        }
        (Some((_, field, _)), None) => {
            return Err(err(field, "a client certificate without a client key"));
        }
        (None, Some((_, field, _))) => {
            return Err(err(field, "a client key without a client certificate"));
        }
        (None, None) => {}
    }
    if let Some(exec) = &u.exec
        && exec.command.as_deref().is_none_or(str::is_empty)
    {
        return Err(err(format!("{at}.exec.command"), "missing"));
    }
    Ok(())
}

fn read(path: &str, field: &str) -> Result<Vec<u8>, FieldError> {
    autoscaler_options::read_bounded(Path::new(path), CERTIFICATE_LIMIT, "file")
        .map_err(|e| err(field.to_string(), e.to_string()))
}

fn decode(data: &str, field: &str) -> Result<Vec<u8>, FieldError> {
    base64::engine::general_purpose::STANDARD
        .decode(data.trim())
        .map_err(|e| err(field.to_string(), format!("not base64: {e}")))
}

fn encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// PEM blocks of `bytes`, or why they are not PEM.
fn pem_blocks(bytes: &[u8], field: &str) -> Result<Vec<pem::Pem>, FieldError> {
    pem::parse_many(bytes).map_err(|e| err(field.to_string(), format!("not PEM: {e}")))
}

/// Checks that `bytes` hold PEM certificates (`field` names them in the error).
pub fn certificates(bytes: &[u8], field: &str) -> Result<(), FieldError> {
    let blocks = pem_blocks(bytes, field)?;
    if !blocks.iter().any(|p| p.tag() == "CERTIFICATE") {
        return Err(err(field.to_string(), "holds no PEM CERTIFICATE"));
    }
    Ok(())
}

/// Checks that `bytes` hold a PEM private key (`field` names them in the error).
pub fn private_key(bytes: &[u8], field: &str) -> Result<(), FieldError> {
    let blocks = pem_blocks(bytes, field)?;
    if !blocks.iter().any(|p| p.tag().ends_with("PRIVATE KEY")) {
        return Err(err(field.to_string(), "holds no PEM private key"));
    }
    Ok(())
}

/// Checks the service account's token, CA and namespace files in `dir` (bounded, as
/// [`check`] checks a kubeconfig's) before the client reads them for the in-cluster
/// configuration. Files that are not there are left for the client to report.
pub fn check_service_account(dir: &Path) -> Result<(), FieldError> {
    let token = dir.join("token");
    if token.exists() {
        exec_plugin::read_token_file(&token)
            .map_err(|e| err(token.display().to_string(), e.to_string()))?;
    }
    let ca = dir.join("ca.crt");
    if ca.exists() {
        let field = ca.display().to_string();
        certificates(&read(&field, &field)?, &field)?;
    }
    let namespace = dir.join("namespace");
    if namespace.exists() {
        autoscaler_options::read_bounded_text(&namespace, 1024, "namespace file")
            .map_err(|e| err(namespace.display().to_string(), e.to_string()))?;
    }
    Ok(())
}

/// The service account directory (for messages).
pub fn service_account_dir() -> PathBuf {
    PathBuf::from(SERVICE_ACCOUNT_DIR)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate's PEM shape (the content is not parsed here).
    const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n";

    fn kubeconfig(cluster: &str, user: &str) -> Kubeconfig {
        Kubeconfig::from_yaml(&format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: other\n  cluster: {{server: 'https://o'}}\n\
             - name: c\n  cluster: {cluster}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\n\
             current-context: x\nusers:\n- name: spare\n  user: {{token: \"bad\\u0001\"}}\n\
             - name: u\n  user: {user}\n"
        ))
        .unwrap()
    }

    fn checked(cluster: &str, user: &str) -> Result<Kubeconfig, String> {
        let mut kc = kubeconfig(cluster, user);
        check(&mut kc).map(|_| kc).map_err(|e| e.to_string())
    }

    const SERVER: &str = "{server: 'https://127.0.0.1:6443'}";

    #[test]
    fn header_values_with_control_characters_are_refused_naming_the_field() {
        for (user, field) in [
            (r#"{token: "a\u0001b"}"#, "users[1] (u).user.token"),
            (r#"{token: "abc\n"}"#, "users[1] (u).user.token"),
            (r#"{token: t, as: "x\ty\u007f"}"#, "users[1] (u).user.as"),
            (
                r#"{auth-provider: {name: oidc, config: {id-token: "a\u0002"}}}"#,
                "users[1] (u).user.auth-provider.config.id-token",
            ),
            (r#"{token: t, as-uid: "\r"}"#, "users[1] (u).user.as-uid"),
            (
                r#"{token: t, as-groups: [ok, "b\u0000"]}"#,
                "users[1] (u).user.as-groups[1]",
            ),
            (
                r#"{token: t, as-user-extra: {scopes: ["\n"]}}"#,
                "users[1] (u).user.as-user-extra.scopes[0]",
            ),
        ] {
            let e = checked(SERVER, user).unwrap_err();
            assert!(
                e.starts_with(field) && e.contains("header value"),
                "{user}: {e}"
            );
            // The secret itself is never in the message.
            assert!(!e.contains("a\u{1}b"), "{e}");
        }
        // The user of another context is not the client's concern.
        checked(SERVER, "{token: good, as: someone}").unwrap();
    }

    #[test]
    fn certificates_and_keys_must_be_base64_pem_naming_the_field() {
        let b64 = |s: &str| encode(s.as_bytes());
        let ok_user = format!(
            "{{client-certificate-data: {}, client-key-data: {}}}",
            b64(CERT),
            b64(KEY)
        );
        checked(SERVER, &ok_user).unwrap();
        for (cluster, user, field, why) in [
            (
                "{server: 'https://x', certificate-authority-data: '!!'}".to_string(),
                "{token: t}".to_string(),
                "clusters[1] (c).cluster.certificate-authority-data",
                "not base64",
            ),
            (
                format!(
                    "{{server: 'https://x', certificate-authority-data: {}}}",
                    b64("hello")
                ),
                "{token: t}".to_string(),
                "clusters[1] (c).cluster.certificate-authority-data",
                "no PEM CERTIFICATE",
            ),
            (
                SERVER.to_string(),
                format!(
                    "{{client-certificate-data: {}, client-key-data: {}}}",
                    b64(KEY),
                    b64(KEY)
                ),
                "users[1] (u).user.client-certificate-data",
                "no PEM CERTIFICATE",
            ),
            (
                SERVER.to_string(),
                format!(
                    "{{client-certificate-data: {}, client-key-data: {}}}",
                    b64(CERT),
                    b64(CERT)
                ),
                "users[1] (u).user.client-key-data",
                "no PEM private key",
            ),
            (
                SERVER.to_string(),
                format!("{{client-certificate-data: {}}}", b64(CERT)),
                "users[1] (u).user.client-certificate-data",
                "without a client key",
            ),
            (
                SERVER.to_string(),
                "{client-certificate: /nonexistent/c.pem, client-key: /nonexistent/k.pem}"
                    .to_string(),
                "users[1] (u).user.client-certificate",
                "cannot read file /nonexistent/c.pem",
            ),
            (
                "{server: 'https://x', certificate-authority: /dev/zero}".to_string(),
                "{token: t}".to_string(),
                "clusters[1] (c).cluster.certificate-authority",
                "4 MiB",
            ),
            (
                SERVER.to_string(),
                "{tokenFile: /dev/urandom}".to_string(),
                "users[1] (u).user.tokenFile",
                "1 MiB",
            ),
            (
                "{server: 'https://x', proxy-url: 'http://proxy:3128'}".to_string(),
                "{token: t}".to_string(),
                "clusters[1] (c).cluster.proxy-url",
                "not supported",
            ),
            (
                "{server: 'https://x', proxy-url: 'http://a b'}".to_string(),
                "{token: t}".to_string(),
                "clusters[1] (c).cluster.proxy-url",
                "invalid URL",
            ),
            (
                SERVER.to_string(),
                "{exec: {apiVersion: client.authentication.k8s.io/v1}}".to_string(),
                "users[1] (u).user.exec.command",
                "missing",
            ),
        ] {
            let e = checked(&cluster, &user).unwrap_err();
            assert!(
                e.starts_with(field) && e.contains(why),
                "{cluster} {user}: {e}"
            );
        }
    }

    #[test]
    fn files_named_are_read_once_into_data_fields_relative_to_the_kubeconfig() {
        let dir = std::env::temp_dir().join(format!("ca-credentials-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.pem"), CERT).unwrap();
        std::fs::write(dir.join("c.pem"), CERT).unwrap();
        std::fs::write(dir.join("k.pem"), KEY).unwrap();
        let mut kc = kubeconfig(
            "{server: 'https://x', certificate-authority: ca.pem}",
            "{client-certificate: c.pem, client-key: k.pem, exec: {command: ./bin/plugin}}",
        );
        resolve_relative(&mut kc, &dir);
        check(&mut kc).unwrap();
        let c = kc.clusters[1].cluster.as_ref().unwrap();
        assert_eq!(c.certificate_authority, None);
        assert_eq!(
            c.certificate_authority_data.as_deref(),
            Some(encode(CERT.as_bytes()).as_str())
        );
        let u = kc.auth_infos[1].auth_info.as_ref().unwrap();
        assert_eq!((&u.client_certificate, &u.client_key), (&None, &None));
        assert_eq!(
            u.client_key_data.as_ref().unwrap().expose_secret(),
            encode(KEY.as_bytes())
        );
        let command = u.exec.as_ref().unwrap().command.as_deref().unwrap();
        assert_eq!(Path::new(command), dir.join("./bin/plugin"));
    }

    #[test]
    fn service_account_files_are_checked_bounded() {
        let dir = std::env::temp_dir().join(format!("ca-sa-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        check_service_account(&dir).unwrap();
        std::fs::write(dir.join("token"), "tok\n").unwrap();
        std::fs::write(dir.join("ca.crt"), CERT).unwrap();
        std::fs::write(dir.join("namespace"), "kube-system").unwrap();
        check_service_account(&dir).unwrap();
        std::fs::write(dir.join("token"), "t\u{1}").unwrap();
        let e = check_service_account(&dir).unwrap_err().to_string();
        assert!(e.contains("token") && e.contains("header"), "{e}");
        std::fs::write(dir.join("token"), "tok").unwrap();
        std::fs::write(dir.join("ca.crt"), "not pem").unwrap();
        let e = check_service_account(&dir).unwrap_err().to_string();
        assert!(e.contains("ca.crt") && e.contains("CERTIFICATE"), "{e}");
    }
}
