//! Who the sync is to Neutron: a Keystone v3 login (password or application credential,
//! from clouds.yaml or `OS_*` variables) whose token and catalog give the Neutron
//! endpoint, or identity headers for a Neutron that trusts them (development and tests).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::client::{Client, Credentials, Retry};

/// How to reach and authenticate to Neutron.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// A Neutron that takes identity from `X-Project-Id`/`X-User-Id`/`X-Roles`.
    Headers {
        /// Neutron's URL.
        url: String,
        /// The project.
        project_id: String,
        /// The user.
        user_id: String,
    },
    /// A Keystone v3 login.
    Keystone(Keystone),
}

/// A Keystone v3 login and where to find Neutron in its catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keystone {
    /// Keystone's URL (with or without `/v3`).
    pub auth_url: String,
    /// The credential.
    pub method: Method,
    /// The catalog region (default: the first network endpoint of the interface).
    pub region: Option<String>,
    /// The catalog interface: `public` (default), `internal` or `admin`.
    pub interface: String,
    /// Neutron's URL, overriding the catalog.
    pub endpoint_override: Option<String>,
    /// A PEM file of the CA certificates to trust for Keystone and Neutron (default: the
    /// usual web roots).
    pub cacert: Option<PathBuf>,
}

/// A Keystone credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Method {
    /// A user's password, scoped to a project.
    Password {
        /// User name (with `user_domain`) or id.
        user: Named,
        /// The password.
        password: String,
        /// Project name (with `project_domain`) or id.
        project: Named,
    },
    /// An application credential (scoped by itself).
    ApplicationCredential {
        /// Its id, or its name with the owning user.
        credential: AppCredential,
        /// The secret.
        secret: String,
    },
}

/// An object given by id, or by name within a domain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Named {
    /// By id.
    Id(String),
    /// By name, in the domain named.
    Name {
        /// The name.
        name: String,
        /// The domain's name (`Default` when not given).
        domain: String,
    },
}

/// How an application credential is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AppCredential {
    /// By id.
    Id(String),
    /// By name, with its user.
    Name {
        /// The credential's name.
        name: String,
        /// Its user.
        user: Named,
    },
}

/// Why no session could be had.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// Settings are missing or contradictory.
    #[error("{0}")]
    Config(String),
    /// clouds.yaml could not be read.
    #[error("{}: {message}", path.display())]
    CloudsFile {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The CA file could not be read.
    #[error("CA certificates: {0}")]
    CaCert(String),
    /// Keystone refused the login or could not be reached.
    #[error("Keystone {url}: {message}")]
    Login {
        /// The token URL.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// The catalog has no network endpoint for the interface and region.
    #[error(
        "the Keystone catalog has no network (Neutron) endpoint for interface {interface}{}",
        region.as_ref().map(|r| format!(" in region {r}")).unwrap_or_default()
    )]
    NoEndpoint {
        /// The interface looked for.
        interface: String,
        /// The region looked for.
        region: Option<String>,
    },
}

/// A client for `auth`: logs in to Keystone first when needed.
pub fn connect(auth: &Auth, retry: Retry) -> Result<Client, AuthError> {
    match auth {
        Auth::Headers {
            url,
            project_id,
            user_id,
        } => Ok(Client::new(
            url,
            Credentials::Headers {
                project_id: project_id.clone(),
                user_id: user_id.clone(),
            },
            retry,
        )),
        Auth::Keystone(k) => {
            let roots = match &k.cacert {
                Some(path) => Some(crate::client::read_roots(path).map_err(AuthError::CaCert)?),
                None => None,
            };
            let (token, project_id, endpoint) = login(k, roots.as_deref())?;
            Ok(Client::with_roots(
                &endpoint,
                Credentials::Token { token, project_id },
                retry,
                roots.as_deref(),
            ))
        }
    }
}

/// Logs in (trusting `roots` when given): the token, the project it is scoped to, and
/// Neutron's URL.
pub fn login(
    k: &Keystone,
    roots: Option<&[ureq::tls::Certificate<'static>]>,
) -> Result<(String, String, String), AuthError> {
    let base = k.auth_url.trim_end_matches('/');
    let base = base.strip_suffix("/v3").unwrap_or(base);
    let url = format!("{base}/v3/auth/tokens");
    let fail = |message: String| AuthError::Login {
        url: url.clone(),
        message,
    };
    let agent = crate::client::agent(Duration::from_secs(60), roots);
    let mut response = agent
        .post(&url)
        .header("Accept", "application/json")
        .content_type("application/json")
        .send(request_body(&k.method).to_string().as_str())
        .map_err(|e| fail(e.to_string()))?;
    let status = response.status().as_u16();
    let token = response
        .headers()
        .get("X-Subject-Token")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let text = response
        .body_mut()
        .read_to_string()
        .map_err(|e| fail(e.to_string()))?;
    if !(200..300).contains(&status) {
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or(text);
        return Err(fail(format!("HTTP {status}: {message}")));
    }
    let token = token.ok_or_else(|| fail("no X-Subject-Token in the answer".into()))?;
    let body: Value = serde_json::from_str(&text).map_err(|e| fail(e.to_string()))?;
    let project_id = body["token"]["project"]["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| fail("the token is not scoped to a project".into()))?;
    if let Some(url) = &k.endpoint_override {
        return Ok((token, project_id, url.clone()));
    }
    let endpoint = network_endpoint(&body["token"]["catalog"], &k.interface, k.region.as_deref())
        .ok_or_else(|| AuthError::NoEndpoint {
        interface: k.interface.clone(),
        region: k.region.clone(),
    })?;
    Ok((token, project_id, endpoint))
}

fn named(n: &Named) -> Value {
    match n {
        Named::Id(id) => json!({"id": id}),
        Named::Name { name, domain } => json!({"name": name, "domain": {"name": domain}}),
    }
}

/// The body of `POST /v3/auth/tokens`.
fn request_body(method: &Method) -> Value {
    match method {
        Method::Password {
            user,
            password,
            project,
        } => {
            let mut user = named(user);
            user["password"] = json!(password);
            json!({"auth": {
                "identity": {"methods": ["password"], "password": {"user": user}},
                "scope": {"project": named(project)}
            }})
        }
        Method::ApplicationCredential { credential, secret } => {
            let mut cred = match credential {
                AppCredential::Id(id) => json!({"id": id}),
                AppCredential::Name { name, user } => json!({"name": name, "user": named(user)}),
            };
            cred["secret"] = json!(secret);
            json!({"auth": {"identity": {
                "methods": ["application_credential"],
                "application_credential": cred
            }}})
        }
    }
}

/// The URL of the catalog's `network` service for `interface` (and `region`).
fn network_endpoint(catalog: &Value, interface: &str, region: Option<&str>) -> Option<String> {
    catalog
        .as_array()?
        .iter()
        .filter(|s| s["type"] == "network")
        .flat_map(|s| s["endpoints"].as_array().into_iter().flatten())
        .find(|e| {
            e["interface"] == interface
                && region.is_none_or(|r| e["region_id"] == r || e["region"] == r)
        })
        .and_then(|e| e["url"].as_str().map(str::to_string))
}

/// A login from `OS_*` variables (`get` reads one), as the OpenStack clients take them.
pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Keystone, AuthError> {
    let need = |k: &str| get(k).ok_or_else(|| AuthError::Config(format!("{k} is not set")));
    let domain = |k: &str, fallback: &str| {
        get(k)
            .or_else(|| get(fallback))
            .unwrap_or_else(|| "Default".into())
    };
    let user = || match get("OS_USER_ID") {
        Some(id) => Ok(Named::Id(id)),
        None => Ok(Named::Name {
            name: need("OS_USERNAME")?,
            domain: domain("OS_USER_DOMAIN_NAME", "OS_DEFAULT_DOMAIN"),
        }),
    };
    let auth_type = get("OS_AUTH_TYPE").unwrap_or_else(|| "password".into());
    let method = match auth_type.replace('-', "_").as_str() {
        "v3applicationcredential" | "application_credential" | "v3application_credential" => {
            let credential = match get("OS_APPLICATION_CREDENTIAL_ID") {
                Some(id) => AppCredential::Id(id),
                None => AppCredential::Name {
                    name: need("OS_APPLICATION_CREDENTIAL_NAME")?,
                    user: user()?,
                },
            };
            Method::ApplicationCredential {
                credential,
                secret: need("OS_APPLICATION_CREDENTIAL_SECRET")?,
            }
        }
        "password" | "v3password" => Method::Password {
            user: user()?,
            password: need("OS_PASSWORD")?,
            project: match get("OS_PROJECT_ID").or_else(|| get("OS_TENANT_ID")) {
                Some(id) => Named::Id(id),
                None => Named::Name {
                    name: get("OS_PROJECT_NAME")
                        .or_else(|| get("OS_TENANT_NAME"))
                        .ok_or_else(|| {
                            AuthError::Config("OS_PROJECT_NAME or OS_PROJECT_ID is not set".into())
                        })?,
                    domain: domain("OS_PROJECT_DOMAIN_NAME", "OS_DEFAULT_DOMAIN"),
                },
            },
        },
        other => {
            return Err(AuthError::Config(format!(
                "OS_AUTH_TYPE={other}: only password and v3applicationcredential are supported"
            )));
        }
    };
    Ok(Keystone {
        auth_url: need("OS_AUTH_URL")?,
        method,
        region: get("OS_REGION_NAME"),
        interface: get("OS_INTERFACE")
            .or_else(|| get("OS_ENDPOINT_TYPE"))
            .map(|i| i.trim_end_matches("URL").to_string())
            .unwrap_or_else(|| "public".into()),
        endpoint_override: None,
        cacert: get("OS_CACERT").map(PathBuf::from),
    })
}

/// Where clouds.yaml is looked for: `OS_CLIENT_CONFIG_FILE`, then `./clouds.yaml`,
/// `~/.config/openstack/clouds.yaml`, `/etc/openstack/clouds.yaml`.
pub fn clouds_yaml_paths() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(p) = std::env::var_os("OS_CLIENT_CONFIG_FILE") {
        out.push(PathBuf::from(p));
    }
    out.push(PathBuf::from("clouds.yaml"));
    if let Some(home) = std::env::var_os("HOME") {
        out.push(Path::new(&home).join(".config/openstack/clouds.yaml"));
    }
    out.push(PathBuf::from("/etc/openstack/clouds.yaml"));
    out
}

/// The login of cloud `name` in the first clouds.yaml of [`clouds_yaml_paths`].
pub fn from_clouds(name: &str) -> Result<Keystone, AuthError> {
    let paths = clouds_yaml_paths();
    let path = paths.iter().find(|p| p.is_file()).ok_or_else(|| {
        let tried: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        AuthError::Config(format!(
            "--os-cloud {name}: no clouds.yaml (looked in {})",
            tried.join(", ")
        ))
    })?;
    let text = std::fs::read_to_string(path).map_err(|e| AuthError::CloudsFile {
        path: path.clone(),
        message: e.to_string(),
    })?;
    from_clouds_text(&text, name).map_err(|message| AuthError::CloudsFile {
        path: path.clone(),
        message,
    })
}

/// The login of cloud `name` in a clouds.yaml text.
pub fn from_clouds_text(text: &str, name: &str) -> Result<Keystone, String> {
    let docs = palisade_model::yaml::parse_documents(text).map_err(|e| e.to_string())?;
    let doc = docs
        .into_iter()
        .next()
        .map(|d| d.value)
        .unwrap_or(Value::Null);
    let cloud = &doc["clouds"][name];
    if cloud.is_null() {
        let names: Vec<&str> = doc["clouds"]
            .as_object()
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default();
        return Err(format!(
            "no cloud {name:?} (clouds: {})",
            if names.is_empty() {
                "none".into()
            } else {
                names.join(", ")
            }
        ));
    }
    let auth = &cloud["auth"];
    let s = |v: &Value| v.as_str().map(str::to_string);
    // clouds.yaml keys are the OS_* variables without the prefix, in lower case.
    let get = |key: &str| -> Option<String> {
        let k = key.trim_start_matches("OS_").to_ascii_lowercase();
        match k.as_str() {
            "auth_type" | "region_name" | "interface" | "cacert" => s(&cloud[&k]),
            "tenant_id" | "tenant_name" => None,
            _ => s(&auth[&k]),
        }
    };
    from_env(get).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion
    use super::*;
    use std::collections::HashMap;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;

    /// A loopback Keystone and Neutron in one: answers `POST /v3/auth/tokens` with a
    /// token and a catalog pointing at itself, and `GET /v2.0/...` only with that token.
    /// Returns its URL and the requests it saw (method, path, token header, body).
    fn fake() -> (
        String,
        std::sync::mpsc::Receiver<(String, String, String, String)>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let me = url.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(4) {
                let mut stream = stream.unwrap();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let mut parts = line.split_whitespace();
                let (method, path) = (
                    parts.next().unwrap().to_string(),
                    parts.next().unwrap().to_string(),
                );
                let mut headers = HashMap::new();
                loop {
                    let mut h = String::new();
                    reader.read_line(&mut h).unwrap();
                    if h.trim().is_empty() {
                        break;
                    }
                    if let Some((k, v)) = h.split_once(':') {
                        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
                    }
                }
                let len: usize = headers
                    .get("content-length")
                    .map_or(0, |l| l.parse().unwrap());
                let mut body = vec![0; len];
                reader.read_exact(&mut body).unwrap();
                let token = headers.get("x-auth-token").cloned().unwrap_or_default();
                let (status, extra, reply) = if path == "/v3/auth/tokens" {
                    let catalog = json!({"token": {"project": {"id": "p-1"}, "catalog": [
                        {"type": "identity", "endpoints": [{"interface": "public", "region_id": "r1", "url": "http://wrong"}]},
                        {"type": "network", "endpoints": [
                            {"interface": "internal", "region_id": "r1", "url": "http://wrong"},
                            {"interface": "public", "region_id": "r2", "url": "http://wrong"},
                            {"interface": "public", "region_id": "r1", "url": me}]}]}});
                    (
                        "201 Created",
                        "X-Subject-Token: tok-123\r\n",
                        catalog.to_string(),
                    )
                } else if token == "tok-123" {
                    ("200 OK", "", json!({"security_groups": []}).to_string())
                } else {
                    ("401 Unauthorized", "", "{}".to_string())
                };
                write!(stream, "HTTP/1.1 {status}\r\n{extra}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{reply}", reply.len()).unwrap();
                tx.send((method, path, token, String::from_utf8(body).unwrap()))
                    .unwrap();
            }
        });
        (url, rx)
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn password_login_finds_neutron_in_the_catalog() {
        let (url, seen) = fake();
        let k = from_env(env(&[
            ("OS_AUTH_URL", &format!("{url}/v3")),
            ("OS_USERNAME", "demo"),
            ("OS_PASSWORD", "secret"),
            ("OS_PROJECT_NAME", "k8s"),
            ("OS_USER_DOMAIN_NAME", "Default"),
            ("OS_PROJECT_DOMAIN_NAME", "Default"),
            ("OS_REGION_NAME", "r1"),
        ]))
        .unwrap();
        let client = connect(&Auth::Keystone(k), Retry::default()).unwrap();
        let (method, path, _, body) = seen.recv().unwrap();
        assert_eq!(
            (method.as_str(), path.as_str()),
            ("POST", "/v3/auth/tokens")
        );
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            body["auth"]["identity"]["password"]["user"]["name"], "demo",
            "user by name"
        );
        assert_eq!(
            body["auth"]["identity"]["password"]["user"]["password"],
            "secret"
        );
        assert_eq!(
            body["auth"]["scope"]["project"]["name"], "k8s",
            "scoped to the project"
        );
        client.get("security-groups").unwrap();
        let (_, path, token, _) = seen.recv().unwrap();
        assert_eq!(
            path, "/v2.0/security-groups",
            "the catalog's public network endpoint of r1"
        );
        assert_eq!(token, "tok-123", "the token from X-Subject-Token");
    }

    #[test]
    fn application_credential_from_clouds_yaml() {
        let (url, seen) = fake();
        let text = format!(
            "clouds:\n  prod:\n    auth_type: v3applicationcredential\n    region_name: r1\n    auth:\n      auth_url: {url}\n      application_credential_id: ac1\n      application_credential_secret: s3\n"
        );
        let k = from_clouds_text(&text, "prod").unwrap();
        assert_eq!(k.cacert, None, "no cacert: the usual roots");
        let client = connect(&Auth::Keystone(k), Retry::default()).unwrap();
        let (_, _, _, body) = seen.recv().unwrap();
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            body["auth"]["identity"]["methods"][0],
            "application_credential"
        );
        assert_eq!(
            body["auth"]["identity"]["application_credential"],
            json!({"id": "ac1", "secret": "s3"})
        );
        assert!(
            body["auth"]["scope"].is_null(),
            "an application credential carries its scope"
        );
        client.get("ports").unwrap();
        assert_eq!(seen.recv().unwrap().2, "tok-123");
    }

    #[test]
    fn refused_logins_and_bad_settings_are_errors() {
        let rows: [(&[(&str, &str)], &str); 3] = [
            (
                &[
                    ("OS_USERNAME", "u"),
                    ("OS_PASSWORD", "p"),
                    ("OS_PROJECT_NAME", "x"),
                ],
                "OS_AUTH_URL is not set",
            ),
            (
                &[
                    ("OS_AUTH_URL", "http://k"),
                    ("OS_USERNAME", "u"),
                    ("OS_PROJECT_NAME", "x"),
                ],
                "OS_PASSWORD is not set",
            ),
            (
                &[("OS_AUTH_URL", "http://k"), ("OS_AUTH_TYPE", "token")],
                "only password and v3applicationcredential",
            ),
        ];
        for (vars, want) in rows {
            let e = from_env(env(vars)).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
        let k = from_clouds_text("clouds: {a: {cacert: /etc/ca.pem, auth: {auth_url: 'https://k', username: u, password: p, project_id: x}}}", "a").unwrap();
        assert_eq!(
            k.cacert,
            Some(PathBuf::from("/etc/ca.pem")),
            "cacert is the cloud's"
        );
        let k = Keystone {
            cacert: Some(PathBuf::from("/nonexistent.pem")),
            ..k
        };
        let e = connect(&Auth::Keystone(k), Retry::default())
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("CA certificates: /nonexistent.pem"), "{e}");
        let e = from_clouds_text("clouds: {a: {}}", "b").unwrap_err();
        assert!(e.contains("no cloud \"b\" (clouds: a)"), "{e}");
        let e = network_endpoint(
            &json!([{"type": "network", "endpoints": []}]),
            "public",
            None,
        );
        assert_eq!(e, None, "no endpoint");
    }
}
