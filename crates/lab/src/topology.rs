//! Building and removing a lab's namespaces and processes, and running probes in them.

use std::net::IpAddr;
use std::path::Path;
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
        let outside = match (&self.fabric_netns, self.nodes.first()) {
            (Some(fabric), _) => fabric.as_str(),
            (None, Some(node)) => node.netns.as_str(),
            (None, None) => {
                return Err(LabError::Layout(format!("lab {} has no node", self.name)));
            }
        };
        let veth = format!("{}v{}", self.name, self.pods.len());
        net::attach(outside, &self.external.netns, &veth, self.external.ip, None)
    }

    /// Starts a responder in every endpoint that serves ports and waits until each listens.
    fn start_responders(&mut self, exe: &Path) -> Result<(), LabError> {
        let ready = state_dir().join(format!("{}.ready", self.name));
        std::fs::create_dir_all(&ready)?;
        let serving: Vec<LabEndpoint> = self
            .endpoints()
            .filter(|e| !e.ports.is_empty())
            .cloned()
            .collect();
        for e in &serving {
            let helper = Helper::Serve {
                ports: e.ports.clone(),
                ready_file: Some(ready.join(&e.netns)),
            };
            let child = helper
                .command(exe, &e.netns)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()?;
            self.pids.push(child.id());
            self.save()?;
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for e in &serving {
            while !ready.join(&e.netns).exists() {
                if Instant::now() > deadline {
                    return Err(LabError::Timeout(format!(
                        "responder in {} did not start",
                        e.netns
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
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
