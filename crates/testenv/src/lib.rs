//! A real Kubernetes control plane for Palisade's tests: `etcd` and `kube-apiserver`
//! started on this machine, and the real `kubectl` to drive them.
//!
//! This crate is test support, not part of Palisade. It does not build anything: the
//! binaries and the policy CRDs come from `testenv/build.sh`, which builds them from their
//! Go modules at the versions pinned in `testenv/` and caches them per version outside the
//! work tree. [`require`] finds them (or says how to build them), [`ControlPlane::start`]
//! starts one control plane — a fresh CA, a serving certificate, an admin client
//! certificate in `system:masters`, a service-account signing key, RBAC authorization —
//! and installs the CRDs, and [`ControlPlane::apply`] does what `kubectl apply` and a
//! kubelet would do together: it applies the objects and then writes each Pod's and Node's
//! `status` (pod IPs, node addresses) through the status subresource.
//!
//! Every process is started under a small `sh` supervisor that holds a pipe from the test
//! process: when the test binary exits, however it exits, the pipe closes and the
//! supervisor stops its server and removes the control plane's directory.
//!
//! ```no_run
//! let Some(bins) = palisade_testenv::require("my_test") else { return };
//! let cp = palisade_testenv::ControlPlane::start(&bins, None).expect("control plane");
//! cp.apply("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n");
//! println!("{}", cp.kubectl_ok(&["get", "namespaces"]));
//! ```

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Output, Stdio};
use std::time::{Duration, Instant};

use palisade_test_support::unavailable;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use serde_json::{Value, json};

/// The command that builds (or finds) the binaries, from the repository root.
pub const BUILD_COMMAND: &str = "testenv/build.sh";

const KUBE_GO_MOD: &str = include_str!("../../../testenv/kube/go.mod");
const ETCD_GO_MOD: &str = include_str!("../../../testenv/etcd/go.mod");
const VERSIONS_ENV: &str = include_str!("../../../testenv/versions.env");

/// How long the API server may take to become ready.
const READY_WITHIN: Duration = Duration::from_secs(90);

/// The version `module` is required at in a go.mod's `require` line.
fn required(go_mod: &str, module: &str) -> Option<String> {
    go_mod.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        (words.next() == Some("require") && words.next() == Some(module))
            .then(|| words.next().map(str::to_string))
            .flatten()
    })
}

fn env_value(name: &str) -> Option<String> {
    VERSIONS_ENV
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
        .map(str::to_string)
}

/// The cache entry `testenv/build.sh` fills for the pinned versions (same formula).
pub fn cache_key() -> String {
    format!(
        "k8s-{}-etcd-{}-npa-{}-{}",
        required(KUBE_GO_MOD, "k8s.io/kubernetes").unwrap_or_default(),
        required(ETCD_GO_MOD, "go.etcd.io/etcd/server/v3").unwrap_or_default(),
        env_value("ANP_CRDS_VERSION").unwrap_or_default(),
        env_value("CNP_CRDS_VERSION").unwrap_or_default(),
    )
}

/// The directory the build scripts cache into: `PALISADE_TESTENV_CACHE`, else
/// `$XDG_CACHE_HOME/palisade-testenv`, else `~/.cache/palisade-testenv`.
fn cache_root() -> Result<PathBuf, String> {
    match (
        std::env::var_os("PALISADE_TESTENV_CACHE"),
        std::env::var_os("XDG_CACHE_HOME"),
        std::env::var_os("HOME"),
    ) {
        (Some(cache), _, _) => Ok(PathBuf::from(cache)),
        (None, Some(xdg), _) => Ok(Path::new(&xdg).join("palisade-testenv")),
        (None, None, Some(home)) => Ok(Path::new(&home).join(".cache/palisade-testenv")),
        (None, None, None) => Err("neither HOME nor XDG_CACHE_HOME".into()),
    }
}

/// The built binaries and CRDs: `bin/{kube-apiserver,kubectl,etcd}` and `crds/*.yaml`.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// The cache directory holding `bin/` and `crds/`.
    pub dir: PathBuf,
}

impl Binaries {
    /// `PALISADE_TESTENV` if set, else the cache entry of the pinned versions; an error
    /// saying what is missing when the binaries are not there.
    pub fn find() -> Result<Binaries, String> {
        let dir = match std::env::var_os("PALISADE_TESTENV") {
            Some(dir) => PathBuf::from(dir),
            None => cache_root()?.join(cache_key()),
        };
        let bins = Binaries { dir };
        for bin in ["kube-apiserver", "kubectl", "etcd"] {
            if !bins.bin(bin).is_file() {
                return Err(format!("{} is missing", bins.bin(bin).display()));
            }
        }
        Ok(bins)
    }

    /// The path of one binary.
    pub fn bin(&self, name: &str) -> PathBuf {
        self.dir.join("bin").join(name)
    }

    /// The directory of the CRD manifests.
    pub fn crds(&self) -> PathBuf {
        self.dir.join("crds")
    }
}

/// The binaries, or `None` after reporting `test` unavailable with the command that builds
/// them ([`palisade_test_support::unavailable`]: under `CI=true` the test fails instead).
pub fn require(test: &str) -> Option<Binaries> {
    Binaries::find()
        .map_err(|why| {
            unavailable(
                test,
                &format!(
                    "needs the real Kubernetes control plane ({why}); build it with `{BUILD_COMMAND}` (Go and the Go module proxy), or set PALISADE_TESTENV"
                ),
            )
        })
        .ok()
}

/// The command that builds (or finds) helm and the prometheus-operator CRDs.
pub const HELM_BUILD_COMMAND: &str = "testenv/helm.sh";

const HELM_GO_MOD: &str = include_str!("../../../testenv/helm/go.mod");
const HELM_VERSIONS_ENV: &str = include_str!("../../../testenv/helm/versions.env");

/// The cache entry `testenv/helm.sh` fills for the pinned versions (same formula).
pub fn helm_cache_key() -> String {
    let operator = HELM_VERSIONS_ENV
        .lines()
        .find_map(|l| l.strip_prefix("PROMETHEUS_OPERATOR_VERSION="))
        .unwrap_or_default();
    format!(
        "helm-{}-promop-{operator}",
        required(HELM_GO_MOD, "helm.sh/helm/v3").unwrap_or_default()
    )
}

/// The built `helm` and the prometheus-operator CRDs: `bin/helm` and `crds/*.yaml`.
#[derive(Debug, Clone)]
pub struct Helm {
    /// The cache directory holding `bin/` and `crds/`.
    pub dir: PathBuf,
}

impl Helm {
    /// `PALISADE_HELM` if set, else the cache entry of the pinned versions; an error saying
    /// what is missing when helm is not there.
    pub fn find() -> Result<Helm, String> {
        let dir = match std::env::var_os("PALISADE_HELM") {
            Some(dir) => PathBuf::from(dir),
            None => cache_root()?.join(helm_cache_key()),
        };
        let helm = Helm { dir };
        if !helm.bin().is_file() {
            return Err(format!("{} is missing", helm.bin().display()));
        }
        Ok(helm)
    }

    /// The `helm` binary.
    pub fn bin(&self) -> PathBuf {
        self.dir.join("bin/helm")
    }

    /// The directory of the prometheus-operator CRD manifests.
    pub fn crds(&self) -> PathBuf {
        self.dir.join("crds")
    }
}

/// helm, or `None` after reporting `test` unavailable with the command that builds it
/// (under `CI=true` the test fails instead).
pub fn require_helm(test: &str) -> Option<Helm> {
    Helm::find()
        .map_err(|why| {
            unavailable(
                test,
                &format!(
                    "needs the real helm ({why}); build it with `{HELM_BUILD_COMMAND}` (Go and the Go module proxy), or set PALISADE_HELM"
                ),
            )
        })
        .ok()
}

/// A loopback port free at the time of asking.
fn free_port() -> Result<u16, String> {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

/// Whether process `pid` runs (exists and is not a zombie waiting for its supervisor).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// A server process under a supervisor `sh` that stops it (and, for etcd, removes the
/// control plane's directory) when the pipe from this process closes.
#[derive(Debug)]
struct Supervised {
    supervisor: Child,
    /// Closing it stops the server.
    pipe: ChildStdin,
    /// The server's own process id.
    pid: u32,
}

/// The supervisor script: `$1` is a directory to remove at the end (or empty), the rest is
/// the server's command line. It prints the server's pid, then waits for end of input.
const SUPERVISOR: &str = r#"cleanup="$1"; shift
"$@" </dev/null >>"$LOG" 2>&1 &
pid=$!
echo "$pid"
read -r _ || true
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
[ -n "$cleanup" ] && rm -rf "$cleanup"
exit 0"#;

/// A running etcd and kube-apiserver, with an admin kubeconfig.
#[derive(Debug)]
pub struct ControlPlane {
    bins: Binaries,
    dir: PathBuf,
    netns: Option<String>,
    etcd_port: u16,
    etcd_peer_port: u16,
    api_port: u16,
    etcd: Option<Supervised>,
    apiserver: Option<Supervised>,
    /// The admin kubeconfig (`system:masters`, client certificate).
    pub kubeconfig: PathBuf,
    /// How long [`ControlPlane::start`] took, CRDs included.
    pub startup: Duration,
}

impl ControlPlane {
    /// Starts etcd and kube-apiserver on 127.0.0.1 — inside network namespace `netns`
    /// when given (every process of this control plane, kubectl too, then runs there) —
    /// waits until the API server is ready and the CRDs are served.
    pub fn start(bins: &Binaries, netns: Option<&str>) -> Result<ControlPlane, String> {
        let begin = Instant::now();
        let dir = tempfile::Builder::new()
            .prefix("palisade-testenv-")
            .tempdir()
            .map_err(|e| format!("temporary directory: {e}"))?
            .keep();
        let kubeconfig = dir.join("admin.kubeconfig");
        let mut cp = ControlPlane {
            bins: bins.clone(),
            dir,
            netns: netns.map(str::to_string),
            etcd_port: free_port()?,
            etcd_peer_port: free_port()?,
            api_port: free_port()?,
            etcd: None,
            apiserver: None,
            kubeconfig,
            startup: Duration::ZERO,
        };
        cp.write_pki()?;
        cp.start_etcd()?;
        cp.start_apiserver()?;
        cp.wait_ready()?;
        cp.install_crds()?;
        cp.startup = begin.elapsed();
        Ok(cp)
    }

    /// The API server's URL.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.api_port)
    }

    /// The control plane's own directory (PKI, logs, etcd data).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CA certificate (PEM file) clients verify the API server with.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    fn write_pki(&self) -> Result<(), String> {
        let e = |what: &str| {
            let what = what.to_string();
            move |err: rcgen::Error| format!("{what}: {err}")
        };
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(e("CA"))?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "palisade-testenv-ca");
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(e("CA key"))?)
            .map_err(e("CA"))?;

        let server_key = KeyPair::generate().map_err(e("server key"))?;
        let mut server = CertificateParams::new(vec![
            "localhost".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default.svc".to_string(),
        ])
        .map_err(e("server"))?;
        server
            .subject_alt_names
            .push(rcgen::SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        server
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server = server.signed_by(&server_key, &ca).map_err(e("server"))?;

        let admin_key = KeyPair::generate().map_err(e("admin key"))?;
        let mut admin = CertificateParams::new(Vec::<String>::new()).map_err(e("admin"))?;
        admin
            .distinguished_name
            .push(DnType::CommonName, "palisade-test-admin");
        admin
            .distinguished_name
            .push(DnType::OrganizationName, "system:masters");
        admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let admin = admin.signed_by(&admin_key, &ca).map_err(e("admin"))?;

        let sa_key = KeyPair::generate().map_err(e("service-account key"))?;
        let files = [
            ("ca.crt", ca.pem()),
            ("apiserver.crt", server.pem()),
            ("apiserver.key", server_key.serialize_pem()),
            ("admin.crt", admin.pem()),
            ("admin.key", admin_key.serialize_pem()),
            ("sa.key", sa_key.serialize_pem()),
            ("sa.pub", sa_key.public_key_pem()),
        ];
        for (name, text) in files {
            std::fs::write(self.dir.join(name), text).map_err(|err| format!("{name}: {err}"))?;
        }
        let kubeconfig = format!(
            "apiVersion: v1
kind: Config
clusters:
- name: testenv
  cluster:
    server: {url}
    certificate-authority: {dir}/ca.crt
users:
- name: admin
  user:
    client-certificate: {dir}/admin.crt
    client-key: {dir}/admin.key
contexts:
- name: testenv
  context:
    cluster: testenv
    user: admin
current-context: testenv
",
            url = self.url(),
            dir = self.dir.display()
        );
        std::fs::write(&self.kubeconfig, kubeconfig).map_err(|err| format!("kubeconfig: {err}"))
    }

    /// A kubeconfig for a bearer token (a ServiceAccount's), written into the control
    /// plane's directory as `name.kubeconfig`.
    pub fn token_kubeconfig(&self, name: &str, token: &str) -> PathBuf {
        let path = self.dir.join(format!("{name}.kubeconfig"));
        let text = format!(
            "apiVersion: v1
kind: Config
clusters:
- name: testenv
  cluster:
    server: {url}
    certificate-authority: {dir}/ca.crt
users:
- name: {name}
  user:
    token: {token}
contexts:
- name: testenv
  context:
    cluster: testenv
    user: {name}
current-context: testenv
",
            url = self.url(),
            dir = self.dir.display()
        );
        std::fs::write(&path, text).expect("write a token kubeconfig");
        path
    }

    /// A command, inside the control plane's network namespace if it has one.
    fn command(&self, program: &Path) -> Command {
        match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(program);
                c
            }
            None => Command::new(program),
        }
    }

    fn supervise(&self, log: &str, cleanup: bool, server: Command) -> Result<Supervised, String> {
        let mut cmd = Command::new("sh");
        cmd.arg("-c")
            .arg(SUPERVISOR)
            .arg("supervisor")
            .arg(if cleanup {
                self.dir.as_os_str()
            } else {
                "".as_ref()
            })
            .arg(server.get_program())
            .args(server.get_args())
            .env("LOG", self.dir.join(log))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut supervisor = cmd
            .spawn()
            .map_err(|e| format!("start {}: {e}", server.get_program().display()))?;
        let pipe = supervisor.stdin.take().ok_or("supervisor without stdin")?;
        let stdout = supervisor
            .stdout
            .take()
            .ok_or("supervisor without stdout")?;
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .map_err(|e| format!("supervisor: {e}"))?;
        let pid = line
            .trim()
            .parse()
            .map_err(|_| format!("supervisor printed {line:?}, not a pid"))?;
        Ok(Supervised {
            supervisor,
            pipe,
            pid,
        })
    }

    /// Starts etcd (again, after [`ControlPlane::kill_etcd`]: same data, same port).
    pub fn start_etcd(&mut self) -> Result<(), String> {
        let (client, peer) = (
            format!("http://127.0.0.1:{}", self.etcd_port),
            format!("http://127.0.0.1:{}", self.etcd_peer_port),
        );
        let mut etcd = self.command(&self.bins.bin("etcd"));
        etcd.arg("--name=testenv")
            .arg(format!("--data-dir={}", self.dir.join("etcd").display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=testenv={peer}"))
            // Test data: losing it in a power cut is fine, waiting for the disk is not.
            .arg("--unsafe-no-fsync")
            .arg("--log-level=warn");
        // The first etcd removes the directory when the test binary ends.
        let cleanup = self.etcd.is_none() && self.apiserver.is_none();
        self.etcd = Some(self.supervise("etcd.log", cleanup, etcd)?);
        Ok(())
    }

    /// Starts kube-apiserver (again, after [`ControlPlane::kill_apiserver`]).
    pub fn start_apiserver(&mut self) -> Result<(), String> {
        let d = |name: &str| self.dir.join(name).display().to_string();
        let mut api = self.command(&self.bins.bin("kube-apiserver"));
        api.arg(format!(
            "--etcd-servers=http://127.0.0.1:{}",
            self.etcd_port
        ))
        .arg("--bind-address=127.0.0.1")
        .arg("--advertise-address=127.0.0.1")
        .arg(format!("--secure-port={}", self.api_port))
        .arg(format!("--cert-dir={}", d("certs")))
        .arg(format!("--tls-cert-file={}", d("apiserver.crt")))
        .arg(format!("--tls-private-key-file={}", d("apiserver.key")))
        .arg(format!("--client-ca-file={}", d("ca.crt")))
        .arg("--authorization-mode=RBAC")
        .arg("--service-account-issuer=https://kubernetes.default.svc.cluster.local")
        .arg(format!("--service-account-key-file={}", d("sa.pub")))
        .arg(format!(
            "--service-account-signing-key-file={}",
            d("sa.key")
        ))
        .arg("--service-cluster-ip-range=10.96.0.0/16")
        // No controller manager runs: nothing would create the `default` ServiceAccount
        // the ServiceAccount admission plugin insists on for every pod, and nothing
        // should publish 127.0.0.1 as the `kubernetes` Service's endpoint.
        .arg("--disable-admission-plugins=ServiceAccount")
        .arg("--endpoint-reconciler-type=none");
        self.apiserver = Some(self.supervise("kube-apiserver.log", false, api)?);
        Ok(())
    }

    fn kill(server: &mut Option<Supervised>) {
        if let Some(mut s) = server.take() {
            // The server's own pid, which this control plane started.
            let _ = Command::new("kill")
                .args(["-9", &s.pid.to_string()])
                .status();
            // Wait until it is gone, so a restart can bind its port again.
            for _ in 0..200 {
                if !alive(s.pid) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(25));
            }
            drop(s.pipe);
            let _ = s.supervisor.wait();
        }
    }

    /// Kills kube-apiserver with SIGKILL.
    pub fn kill_apiserver(&mut self) {
        Self::kill(&mut self.apiserver);
    }

    /// Kills etcd with SIGKILL (its data stays).
    pub fn kill_etcd(&mut self) {
        // The first etcd's supervisor removes the directory: keep it alive, kill only etcd.
        if let Some(s) = &self.etcd {
            let _ = Command::new("kill")
                .args(["-9", &s.pid.to_string()])
                .status();
            for _ in 0..200 {
                if !alive(s.pid) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(25));
            }
        }
        // Its supervisor stays, holding the cleanup; a restart gets a supervisor of its own.
        if let Some(s) = self.etcd.take() {
            std::mem::forget(s);
        }
    }

    /// Waits until `/readyz` answers `ok` (every post-start hook, RBAC's bootstrap roles
    /// included, has run).
    pub fn wait_ready(&self) -> Result<(), String> {
        let begin = Instant::now();
        loop {
            let o = self.kubectl(&["get", "--raw=/readyz"]);
            if o.status.success() && String::from_utf8_lossy(&o.stdout).trim() == "ok" {
                return Ok(());
            }
            let exited = self.apiserver.as_ref().is_none_or(|s| !alive(s.pid));
            if exited || begin.elapsed() > READY_WITHIN {
                return Err(format!(
                    "kube-apiserver not ready after {:?}{}: {}\n--- kube-apiserver.log (end) ---\n{}",
                    begin.elapsed(),
                    if exited { " (it exited)" } else { "" },
                    String::from_utf8_lossy(&o.stderr),
                    self.log_tail("kube-apiserver.log")
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The last lines of one of the control plane's logs.
    pub fn log_tail(&self, log: &str) -> String {
        let text = std::fs::read_to_string(self.dir.join(log)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    /// Installs the policy CRDs and waits until the API server serves every kind.
    fn install_crds(&self) -> Result<(), String> {
        // Server-side: the CRDs are too large for client-side apply's annotation.
        let crds = self.bins.crds();
        let o = self.kubectl(&["apply", "--server-side", "-f", &crds.display().to_string()]);
        if !o.status.success() {
            return Err(format!(
                "installing the CRDs: {}",
                String::from_utf8_lossy(&o.stderr)
            ));
        }
        let begin = Instant::now();
        loop {
            let o = self.kubectl(&[
                "get",
                "adminnetworkpolicies,baselineadminnetworkpolicies,clusternetworkpolicies",
                "-A",
            ]);
            if o.status.success() {
                return Ok(());
            }
            if begin.elapsed() > READY_WITHIN {
                return Err(format!(
                    "the CRDs are not served: {}",
                    String::from_utf8_lossy(&o.stderr)
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs `kubectl ARGS` with the admin kubeconfig.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_stdin(args, "")
    }

    /// Runs `kubectl ARGS` with the admin kubeconfig and `stdin` on its standard input.
    pub fn kubectl_stdin(&self, args: &[&str], stdin: &str) -> Output {
        let mut cmd = self.command(&self.bins.bin("kubectl"));
        cmd.arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("run kubectl");
        let mut input = child.stdin.take().expect("kubectl stdin");
        let stdin = stdin.to_string();
        let writer = std::thread::spawn(move || input.write_all(stdin.as_bytes()));
        let out = child.wait_with_output().expect("wait for kubectl");
        let _ = writer.join();
        out
    }

    /// Runs `kubectl ARGS`, panicking with its error output if it fails; its stdout.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        self.kubectl_stdin_ok(args, "")
    }

    /// [`ControlPlane::kubectl_ok`] with `stdin`.
    pub fn kubectl_stdin_ok(&self, args: &[&str], stdin: &str) -> String {
        let o = self.kubectl_stdin(args, stdin);
        assert!(
            o.status.success(),
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `kubectl apply -f -` of `manifests` (YAML or JSON, several documents), then what a
    /// kubelet would write: each Pod's and Node's `status` from the manifests, through the
    /// status subresource (an apply never writes status).
    pub fn apply(&self, manifests: &str) {
        self.apply_with(&[], manifests);
    }

    /// [`ControlPlane::apply`] with more arguments for `kubectl apply` (`--server-side`).
    /// Namespaces go first, as a kubectl user applying a directory would have to order
    /// them.
    pub fn apply_with(&self, args: &[&str], manifests: &str) {
        let objects = self.objects(manifests);
        let (namespaces, rest): (Vec<&Value>, Vec<&Value>) =
            objects.iter().partition(|o| o["kind"] == "Namespace");
        for group in [namespaces, rest] {
            if group.is_empty() {
                continue;
            }
            let list = json!({"apiVersion": "v1", "kind": "List", "items": group});
            self.kubectl_stdin_ok(
                &[&["apply"], args, &["-f", "-"]].concat(),
                &list.to_string(),
            );
        }
        self.write_status(&objects);
    }

    /// The objects of `manifests`, as JSON: kubectl itself converts them, so that what is
    /// applied is what kubectl reads, and no second YAML parser is involved.
    pub fn objects(&self, manifests: &str) -> Vec<Value> {
        let json = self.kubectl_stdin_ok(
            &["create", "--dry-run=client", "-o", "json", "-f", "-"],
            manifests,
        );
        // One JSON object per manifest object, one after another.
        serde_json::Deserializer::from_str(&json)
            .into_iter::<Value>()
            .map(|v| v.expect("kubectl's JSON"))
            .flat_map(|v| match v.get("items") {
                Some(Value::Array(items)) => items.clone(),
                _ => vec![v],
            })
            .collect()
    }

    /// Writes the `status` of every Pod and Node in `objects` through the status
    /// subresource, as a kubelet (pod IPs, phase) and a node (addresses) would.
    pub fn write_status(&self, objects: &[Value]) {
        let with_status: Vec<&Value> = objects
            .iter()
            .filter(|o| {
                matches!(o["kind"].as_str(), Some("Pod" | "Node"))
                    && o.get("status").is_some_and(|s| s != &json!({}))
            })
            .collect();
        if with_status.is_empty() {
            return;
        }
        let list = json!({"apiVersion": "v1", "kind": "List", "items": with_status});
        self.kubectl_stdin_ok(
            &["replace", "--subresource=status", "-f", "-"],
            &list.to_string(),
        );
    }

    /// Deletes every object the tests make: policies, pods, Services and EndpointSlices
    /// outside `default`, nodes and every namespace but
    /// the API server's own. Without a controller manager nothing finalizes a namespace,
    /// so this does what the namespace controller would once it is empty.
    pub fn reset(&self) {
        for kinds in [
            "networkpolicies,adminnetworkpolicies,baselineadminnetworkpolicies,clusternetworkpolicies",
            "pods",
        ] {
            self.kubectl_ok(&[
                "delete",
                kinds,
                "--all",
                "-A",
                "--grace-period=0",
                "--force",
                "--wait=false",
            ]);
        }
        // Services and EndpointSlices, but the API server's own (default/kubernetes).
        self.kubectl_ok(&[
            "delete",
            "services,endpointslices.discovery.k8s.io",
            "-A",
            "--field-selector",
            "metadata.namespace!=default",
            "--wait=false",
        ]);
        self.kubectl_ok(&["delete", "nodes", "--all"]);
        let names = self.kubectl_ok(&["get", "namespaces", "-o", "name"]);
        for ns in names.lines().filter_map(|n| n.strip_prefix("namespace/")) {
            if matches!(
                ns,
                "default" | "kube-system" | "kube-public" | "kube-node-lease"
            ) {
                continue;
            }
            self.kubectl_ok(&["delete", "namespace", ns, "--wait=false"]);
            let mut object: Value =
                serde_json::from_str(&self.kubectl_ok(&["get", "namespace", ns, "-o", "json"]))
                    .expect("a namespace as JSON");
            object["spec"]["finalizers"] = json!([]);
            self.kubectl_stdin_ok(
                &[
                    "replace",
                    "--raw",
                    &format!("/api/v1/namespaces/{ns}/finalize"),
                    "-f",
                    "-",
                ],
                &object.to_string(),
            );
        }
        let begin = Instant::now();
        while !self
            .kubectl_ok(&["get", "namespaces", "-o", "name"])
            .lines()
            .all(|n| {
                matches!(
                    n,
                    "namespace/default"
                        | "namespace/kube-system"
                        | "namespace/kube-public"
                        | "namespace/kube-node-lease"
                )
            })
        {
            assert!(
                begin.elapsed() < Duration::from_secs(30),
                "namespaces not gone"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every object Palisade reads, as one `kubectl get -o yaml` dump (a `v1` List).
    /// ClusterNetworkPolicies are asked for in `v1alpha2`, the version Palisade reads: the
    /// CRD of network-policy-api v0.3.0 also serves (and stores) `v1beta1`, which a plain
    /// `kubectl get clusternetworkpolicies` prefers.
    pub fn dump_yaml(&self) -> String {
        self.kubectl_ok(&[
            "get",
            "namespaces,nodes,pods,services,endpointslices.discovery.k8s.io,networkpolicies,adminnetworkpolicies,baselineadminnetworkpolicies,clusternetworkpolicies.v1alpha2.policy.networking.k8s.io",
            "-A",
            "-o",
            "yaml",
        ])
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        Self::kill(&mut self.apiserver);
        if let Some(mut s) = self.etcd.take() {
            drop(s.pipe);
            let _ = s.supervisor.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cache entry's name is made of every pinned version, read from the files
    /// `testenv/build.sh` reads: none may be missing, or the tests would look for the
    /// binaries somewhere the script never puts them.
    #[test]
    fn the_cache_key_names_every_pinned_version() {
        let key = cache_key();
        assert!(key.starts_with("k8s-v1."), "{key}");
        for part in key.split('-').filter(|p| p.starts_with('v')) {
            assert!(part.len() > 1, "{key}");
        }
        assert_eq!(key.matches("-v").count(), 4, "{key}");
        assert!(!key.contains("--"), "{key}");
    }
}
