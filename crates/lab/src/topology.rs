//! Building and removing a lab's namespaces and processes, and running probes in them.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use palisade_model::Cluster;

use crate::layout::layout;
use crate::state::{state_dir, state_file};
use crate::{Helper, Lab, LabEndpoint, LabError, ProbeResult, Target, net};

impl Lab {
    /// Builds the lab for the IPv4 pods of `cluster` and starts the responders, running the
    /// [`Helper::Serve`] of `exe` inside each pod and node namespace and the external host.
    /// `name` must be a short alphanumeric prefix (at most 8 characters).
    ///
    /// Pods on one node (or on none) make one node namespace, `<name>-node`, as always;
    /// host-network pods are then left out. Pods on several nodes make one namespace per
    /// node, `<name>-node-<nodeName>`, at the node's address, with its host-network pods.
    pub fn up(cluster: &Cluster, name: &str, exe: &Path) -> Result<Lab, LabError> {
        if name.is_empty() || name.len() > 8 || !name.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(LabError::State(
                state_file(name),
                "the lab name must be 1-8 letters or digits".into(),
            ));
        }
        let mut lab = Lab::planned(cluster, name)?;
        down(name)?; // leftovers of a crashed run
        lab.save()?; // before creating anything, so a crash can be cleaned up
        lab.wire()?;
        lab.start_responders(exe)?;
        Ok(lab)
    }

    /// The lab `up` would build, before anything exists.
    pub(crate) fn planned(cluster: &Cluster, name: &str) -> Result<Lab, LabError> {
        let layout = layout(cluster, name)?;
        Ok(Lab {
            name: name.to_string(),
            nodes: layout.nodes,
            fabric_netns: layout.fabric,
            pods: layout.pods,
            external: layout.external,
            pids: Vec::new(),
        })
    }

    /// Creates the namespaces, links, addresses and routes.
    fn wire(&self) -> Result<(), LabError> {
        for node in &self.nodes {
            net::node(&node.netns)?;
        }
        if let Some(fabric) = &self.fabric_netns {
            net::node(fabric)?;
            for (i, node) in self.nodes.iter().enumerate() {
                let Some(ip) = node.ip() else { continue };
                let pods: Vec<IpAddr> = self.pods_on(node).map(|p| p.ip).collect();
                net::join(
                    fabric,
                    &node.netns,
                    &format!("{}f{i}", self.name),
                    ip,
                    &pods,
                )?;
            }
        }
        for (i, p) in self.pods.iter().enumerate() {
            let node = self.node_of(p).ok_or_else(|| {
                LabError::Layout(format!("pod {} has no node in lab {}", p.key, self.name))
            })?;
            let veth = format!("{}v{i}", self.name);
            net::attach(&node.netns, &p.netns, &veth, p.ip, node.ip())?;
        }
        // The external host hangs off the fabric, or off the one node.
        let outside = self.outside()?;
        net::attach(
            outside,
            &self.external.netns,
            &self.external_veth(),
            self.external.ip,
            None,
        )
    }

    /// The namespace the external host hangs off: the fabric, or the one node.
    fn outside(&self) -> Result<&str, LabError> {
        match (&self.fabric_netns, self.nodes.first()) {
            (Some(fabric), _) => Ok(fabric),
            (None, Some(node)) => Ok(&node.netns),
            (None, None) => Err(LabError::Layout(format!("lab {} has no node", self.name))),
        }
    }

    /// The name of the external host's veth pair (after the pods').
    fn external_veth(&self) -> String {
        format!("{}v{}", self.name, self.pods.len())
    }

    /// Gives the external host one more IPv4 address, routed like its own, with its
    /// responder on it: the external namespace holds it as a /32 beside its address, and
    /// the namespace it hangs off (the one node, or the fabric, where every node's default
    /// route leads) routes it there.
    ///
    /// The responder `up` started listens on the wildcard address: TCP would answer on the
    /// new address, but a UDP echo would leave from the host's first address and miss its
    /// prober. So the responder is restarted (`exe` as in [`Lab::up`]) bound to each
    /// address of the external host, and UDP answers from the address it was asked at.
    pub fn add_external_address(&mut self, exe: &Path, ip: IpAddr) -> Result<(), LabError> {
        if !ip.is_ipv4() {
            return Err(LabError::Layout(format!(
                "external address {ip}: the lab routes IPv4 only"
            )));
        }
        if self.endpoints().any(|e| e.ip == ip) {
            return Err(LabError::Layout(format!(
                "external address {ip}: already an address of lab {}",
                self.name
            )));
        }
        let outside = self.outside()?;
        let veth = self.external_veth();
        let cidr = format!("{ip}/32");
        let (pod_side, node_side) = (format!("{veth}p"), format!("{veth}n"));
        net::run(&[
            "ip",
            "-n",
            &self.external.netns,
            "addr",
            "add",
            &cidr,
            "dev",
            &pod_side,
        ])?;
        net::run(&[
            "ip", "-n", outside, "route", "add", &cidr, "dev", &node_side,
        ])?;
        if self.external.ports.is_empty() {
            return Ok(());
        }
        let addresses = net::addresses(&self.external.netns, &pod_side)?;
        let running = net::pids(&self.external.netns)?;
        let killed: Vec<u32> = self
            .pids
            .iter()
            .copied()
            .filter(|p| running.contains(p))
            .collect();
        for pid in &killed {
            net::run(&["kill", "-9", &pid.to_string()])?;
        }
        // A killed responder holds its ports until it is gone: the new one could not bind.
        let deadline = Instant::now() + Duration::from_secs(10);
        while net::pids(&self.external.netns)?
            .iter()
            .any(|p| killed.contains(p))
        {
            if Instant::now() > deadline {
                return Err(LabError::Timeout(format!(
                    "the responder in {} did not exit",
                    self.external.netns
                )));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.pids.retain(|p| !running.contains(p));
        let external = self.external.clone();
        self.start_responder(exe, &external, addresses)?;
        self.wait_ready(&[external])
    }

    /// The directory of the responders' ready files.
    fn ready_dir(&self) -> PathBuf {
        state_dir().join(format!("{}.ready", self.name))
    }

    /// Where the responder in namespace `netns` writes its error output.
    fn errors_file(&self, netns: &str) -> PathBuf {
        self.ready_dir().join(format!("{netns}.err"))
    }

    /// Starts the responder of `e`, on `addresses` (empty: the wildcard address), and
    /// records its process.
    fn start_responder(
        &mut self,
        exe: &Path,
        e: &LabEndpoint,
        addresses: Vec<IpAddr>,
    ) -> Result<(), LabError> {
        let ready_file = self.ready_dir().join(&e.netns);
        let _ = std::fs::remove_file(&ready_file);
        std::fs::create_dir_all(self.ready_dir())?;
        let errors = std::fs::File::create(self.errors_file(&e.netns))?;
        let helper = Helper::Serve {
            ports: e.ports.clone(),
            addresses,
            ready_file: Some(ready_file),
        };
        let child = helper
            .command(exe, &e.netns)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(errors)
            .spawn()?;
        self.pids.push(child.id());
        self.save()
    }

    /// Waits until the responder of every endpoint of `serving` listens.
    fn wait_ready(&self, serving: &[LabEndpoint]) -> Result<(), LabError> {
        let ready = self.ready_dir();
        let deadline = Instant::now() + Duration::from_secs(20);
        for e in serving {
            while !ready.join(&e.netns).exists() {
                if Instant::now() > deadline {
                    let said =
                        std::fs::read_to_string(self.errors_file(&e.netns)).unwrap_or_default();
                    return Err(LabError::Timeout(format!(
                        "responder in {} did not start (its error output: {:?})",
                        e.netns,
                        said.trim()
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    /// Starts a responder in every endpoint that serves ports and waits until each listens.
    fn start_responders(&mut self, exe: &Path) -> Result<(), LabError> {
        std::fs::create_dir_all(self.ready_dir())?;
        let serving: Vec<LabEndpoint> = self
            .endpoints()
            .filter(|e| !e.ports.is_empty())
            .cloned()
            .collect();
        for e in &serving {
            self.start_responder(exe, e, Vec::new())?;
        }
        self.wait_ready(&serving)
    }

    /// Probes `targets` from each source namespace concurrently (one [`Helper::ProbeBatch`]
    /// of `exe` per source) and returns every result with its source namespace.
    pub fn probe(
        &self,
        exe: &Path,
        plan: &[(String, Vec<Target>)],
    ) -> Result<Vec<(String, ProbeResult)>, LabError> {
        let mut children = Vec::new();
        for (netns, targets) in plan {
            if targets.is_empty() {
                continue;
            }
            let helper = Helper::ProbeBatch {
                targets: targets.clone(),
            };
            let child = helper
                .command(exe, netns)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()?;
            children.push((netns.clone(), child));
        }
        let mut out = Vec::new();
        for (netns, child) in children {
            let o = child.wait_with_output()?;
            if !o.status.success() {
                return Err(LabError::Command {
                    command: format!("probe-batch in {netns}"),
                    message: String::from_utf8_lossy(&o.stderr).into_owned(),
                });
            }
            for line in String::from_utf8_lossy(&o.stdout).lines() {
                if let Some(r) = ProbeResult::parse(line) {
                    out.push((netns.clone(), r));
                }
            }
        }
        Ok(out)
    }
}

/// Removes everything the lab `name` created: responders, namespaces (and with them the
/// veth pairs), the state file. Safe to call when nothing exists.
pub fn down(name: &str) -> Result<(), LabError> {
    if let Ok(lab) = Lab::load(name) {
        for pid in &lab.pids {
            kill(&pid.to_string());
        }
    }
    for ns in net::list_netns()? {
        if ns.starts_with(&format!("{name}-")) {
            // processes left in the namespace would keep it busy: kill them first
            if let Ok(o) = std::process::Command::new("ip")
                .args(["netns", "pids", &ns])
                .output()
            {
                for pid in String::from_utf8_lossy(&o.stdout).split_whitespace() {
                    kill(pid);
                }
            }
            net::run(&["ip", "netns", "del", &ns])?;
        }
    }
    let _ = std::fs::remove_file(state_file(name));
    let _ = std::fs::remove_dir_all(state_dir().join(format!("{name}.ready")));
    Ok(())
}

fn kill(pid: &str) {
    let _ = std::process::Command::new("kill")
        .args(["-9", pid])
        .stderr(Stdio::null())
        .status();
}
