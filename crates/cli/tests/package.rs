//! The release artifacts of `deploy/package.sh`: the archive (binary, LICENSE, README, the
//! binary's SHA-256), its digest file, the krew manifest naming that digest, and the
//! container image built from `deploy/Dockerfile` with the real `buildah` (vfs storage, no
//! container engine) and run in a network namespace, where it enforces and uninstalls with
//! the NET_ADMIN capability alone. The script packages this test build's binary (stripped,
//! as the `dist` profile strips it) through `PALISADE_BIN`.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::agent_endpoint;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}

fn name() -> String {
    format!("palisade-{}-x86_64-linux", version())
}

fn ok(what: &str, o: &Output) -> String {
    assert!(
        o.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn run(what: &str, command: &mut Command) -> String {
    ok(what, &command.output().unwrap())
}

/// The packaged artifacts, made twice from one stripped copy of the test binary: (first
/// output directory, second output directory), under the target directory's scratch space
/// (replaced on each run; a static is never dropped, so no temporary directory is left).
fn packaged() -> (&'static Path, &'static Path) {
    static DIRS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    let (a, b) = DIRS.get_or_init(|| {
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("package");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let bin = dir.join("palisade");
        run(
            "strip",
            Command::new("strip")
                .arg("-o")
                .arg(&bin)
                .arg(env!("CARGO_BIN_EXE_palisade")),
        );
        let package = |out: &Path| {
            run(
                "deploy/package.sh",
                Command::new(Path::new(ROOT).join("deploy/package.sh"))
                    .arg(out)
                    .env("PALISADE_BIN", &bin),
            );
        };
        let (a, b) = (dir.join("a"), dir.join("b"));
        package(&a);
        package(&b);
        (a, b)
    });
    (a, b)
}

#[test]
fn the_archive_holds_the_binary_license_readme_and_digest() {
    let (out, _) = packaged();
    let archive = out.join(format!("{}.tar.gz", name()));
    let listing = run("tar t", Command::new("tar").arg("tzf").arg(&archive));
    let mut entries: Vec<&str> = listing.lines().collect();
    entries.sort();
    let dir = name();
    assert_eq!(
        entries,
        [
            format!("{dir}/"),
            format!("{dir}/LICENSE"),
            format!("{dir}/README.md"),
            format!("{dir}/palisade"),
            format!("{dir}/palisade.sha256"),
        ]
    );
    // Both digests check, the archive's beside it and the binary's inside it.
    run(
        "sha256sum -c (archive)",
        Command::new("sha256sum")
            .args(["-c", &format!("{}.tar.gz.sha256", name())])
            .current_dir(out),
    );
    let unpacked = tempfile::tempdir().unwrap();
    run(
        "tar x",
        Command::new("tar")
            .arg("xzf")
            .arg(&archive)
            .arg("-C")
            .arg(unpacked.path()),
    );
    let inside = unpacked.path().join(&dir);
    run(
        "sha256sum -c (binary)",
        Command::new("sha256sum")
            .args(["-c", "palisade.sha256"])
            .current_dir(&inside),
    );
    let reported = run(
        "palisade --version",
        Command::new(inside.join("palisade")).arg("--version"),
    );
    assert_eq!(reported.trim(), format!("palisade {}", version()));
    assert_eq!(
        std::fs::read(inside.join("LICENSE")).unwrap(),
        std::fs::read(Path::new(ROOT).join("LICENSE")).unwrap()
    );
}

#[test]
fn the_archive_is_reproducible() {
    let (a, b) = packaged();
    let file = format!("{}.tar.gz", name());
    assert!(
        std::fs::read(a.join(&file)).unwrap() == std::fs::read(b.join(&file)).unwrap(),
        "two packagings of one binary differ"
    );
}

#[test]
fn the_krew_manifest_names_the_archive_and_its_digest() {
    let (out, _) = packaged();
    let text = std::fs::read_to_string(out.join("krew/palisade.yaml")).unwrap();
    let docs = palisade_model::yaml::parse_documents(&text).unwrap();
    assert_eq!(docs.len(), 1);
    let plugin = &docs[0].value;
    assert_eq!(
        plugin["apiVersion"],
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(plugin["kind"], "Plugin");
    assert_eq!(plugin["metadata"]["name"], "palisade");
    assert_eq!(plugin["spec"]["version"], format!("v{}", version()));
    let platforms = plugin["spec"]["platforms"].as_array().unwrap();
    assert_eq!(platforms.len(), 1);
    let p = &platforms[0];
    assert_eq!(p["selector"]["matchLabels"]["os"], "linux");
    assert_eq!(p["selector"]["matchLabels"]["arch"], "amd64");
    assert_eq!(p["bin"], "palisade");
    let digest_file =
        std::fs::read_to_string(out.join(format!("{}.tar.gz.sha256", name()))).unwrap();
    assert_eq!(p["sha256"], digest_file.split_whitespace().next().unwrap());
    assert!(
        p["uri"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/{}.tar.gz", name())),
        "{}",
        p["uri"]
    );
    // Every file krew is told to take is in the archive.
    let listing = run(
        "tar t",
        Command::new("tar")
            .arg("tzf")
            .arg(out.join(format!("{}.tar.gz", name()))),
    );
    for file in p["files"].as_array().unwrap() {
        let from = file["from"].as_str().unwrap();
        assert!(
            listing.lines().any(|l| l == from),
            "{from} not in the archive"
        );
    }
}

/// `buildah` with its own vfs storage under a temporary directory.
struct Buildah {
    dir: tempfile::TempDir,
}

impl Buildah {
    fn command(&self) -> Command {
        let mut c = Command::new("buildah");
        c.arg("--root")
            .arg(self.dir.path().join("root"))
            .arg("--runroot")
            .arg(self.dir.path().join("run"))
            .args(["--storage-driver", "vfs"]);
        c
    }
}

/// A network namespace, deleted when dropped.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn table_exists(netns: &str) -> bool {
    Command::new("ip")
        .args([
            "netns", "exec", netns, "nft", "list", "table", "inet", "palisade",
        ])
        .output()
        .unwrap()
        .status
        .success()
}

#[test]
fn the_image_builds_without_an_engine_and_enforces_with_net_admin_alone() {
    let have_buildah = Command::new("buildah").arg("--version").output().is_ok();
    let why = match (palisade_test_support::is_root(), have_buildah) {
        (true, true) => None,
        (false, _) => Some("needs root (buildah's chroot isolation and a network namespace)"),
        (true, false) => Some("needs buildah (apt-get install buildah; .ci/run installs it)"),
    };
    if let Some(why) = why {
        palisade_test_support::unavailable(
            "the_image_builds_without_an_engine_and_enforces_with_net_admin_alone",
            why,
        );
        return;
    }
    let (out, _) = packaged();
    let buildah = Buildah {
        dir: tempfile::tempdir().unwrap(),
    };
    let tag = format!("palisade:{}", version());
    run(
        "buildah build",
        buildah
            .command()
            .args(["build", "--quiet", "-f"])
            .arg(Path::new(ROOT).join("deploy/Dockerfile"))
            .args(["-t", &tag])
            .arg(out.join("image")),
    );
    let config = run(
        "buildah inspect",
        buildah.command().args([
            "inspect",
            "--format",
            "{{.OCIv1.Config.Entrypoint}} {{.OCIv1.Config.Cmd}}",
            &tag,
        ]),
    );
    assert_eq!(
        config.trim(),
        "[/usr/local/bin/palisade] [agent --source kube]"
    );
    let container = run("buildah from", buildah.command().args(["from", &tag]))
        .trim()
        .to_string();
    let netns = Netns(format!("pal-image-{}", std::process::id()));
    run(
        "ip netns add",
        Command::new("ip").args(["netns", "add", &netns.0]),
    );
    run(
        "ip link set lo up",
        Command::new("ip").args(["netns", "exec", &netns.0, "ip", "link", "set", "lo", "up"]),
    );
    // `buildah run` in the namespace, with the DaemonSet's one capability.
    let in_image = |args: &[&str]| {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &netns.0])
            .arg("buildah")
            .arg("--root")
            .arg(buildah.dir.path().join("root"))
            .arg("--runroot")
            .arg(buildah.dir.path().join("run"))
            .args(["--storage-driver", "vfs", "run", "--isolation", "chroot"])
            .args(["--cap-add", "CAP_NET_ADMIN"])
            .args(args);
        c
    };
    let cluster = format!("{ROOT}/examples/xyz:/cluster:ro");
    let agent = in_image(&["-v", &cluster, &container, "--"])
        .args([
            "/usr/local/bin/palisade",
            "agent",
            "--source",
            "dir:/cluster",
        ])
        .args(["--node", "node-1"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut ready = (0, String::new());
    while start.elapsed() < Duration::from_secs(60) {
        ready = agent_endpoint(&netns.0, "/readyz");
        if ready.0 == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let ready_in = start.elapsed();
    // SIGTERM to buildah, which stops the agent it runs.
    let _ = Command::new("kill")
        .args(["-TERM", &agent.id().to_string()])
        .status();
    let log = agent.wait_with_output().unwrap();
    assert_eq!(
        ready.0,
        200,
        "the image's agent never became ready: {}\n{}",
        ready.1,
        String::from_utf8_lossy(&log.stderr)
    );
    eprintln!(
        "the image's agent was ready in {:.2} s",
        ready_in.as_secs_f64()
    );
    assert!(table_exists(&netns.0), "no inet palisade table after ready");
    ok(
        "palisade agent --uninstall in the image",
        &in_image(&[
            &container,
            "--",
            "/usr/local/bin/palisade",
            "agent",
            "--uninstall",
        ])
        .output()
        .unwrap(),
    );
    assert!(
        !table_exists(&netns.0),
        "the table is still there after --uninstall"
    );
    let _ = buildah.command().args(["rm", &container]).output();
}
