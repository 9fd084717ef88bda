//! The state file of a lab (`<state dir>/<name>.json`): written before anything is
//! created, so [`crate::down`] can clean up after a crash, and read by every later
//! command.

use std::net::IpAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::{EndpointKind, Lab, LabEndpoint, LabError, LabNode};

/// Where lab state files live (`PALISADE_LAB_DIR`, default `/run/palisade-lab`).
pub fn state_dir() -> PathBuf {
    std::env::var_os("PALISADE_LAB_DIR")
        .map_or_else(|| PathBuf::from("/run/palisade-lab"), PathBuf::from)
}

/// The state file of the lab `name`.
pub(crate) fn state_file(name: &str) -> PathBuf {
    state_dir().join(format!("{name}.json"))
}

#[derive(Serialize, Deserialize)]
struct LabState {
    name: String,
    nodes: Vec<NodeState>,
    fabric: Option<String>,
    pods: Vec<EndpointState>,
    external: EndpointState,
    pids: Vec<u32>,
}

#[derive(Serialize, Deserialize)]
struct NodeState {
    name: Option<String>,
    netns: String,
    endpoint: Option<EndpointState>,
    generated_address: bool,
    host_network_pods: Vec<String>,
}

#[derive(Serialize, Deserialize)]
struct EndpointState {
    key: String,
    kind: EndpointKind,
    node: Option<String>,
    netns: String,
    ip: IpAddr,
    /// `80/TCP`.
    ports: Vec<String>,
}

impl Lab {
    /// The lab recorded under `name`.
    pub fn load(name: &str) -> Result<Lab, LabError> {
        Lab::load_from(state_file(name))
    }

    fn load_from(path: PathBuf) -> Result<Lab, LabError> {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| LabError::State(path.clone(), e.to_string()))?;
        let s: LabState = serde_json::from_str(&text)
            .map_err(|e| LabError::State(path.clone(), e.to_string()))?;
        let endpoint = |e: EndpointState| -> Result<LabEndpoint, LabError> {
            let ports = e
                .ports
                .iter()
                .map(|p| {
                    let (n, proto) = p.split_once('/')?;
                    Some((n.parse().ok()?, proto.parse().ok()?))
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| LabError::State(path.clone(), format!("{}: bad ports", e.key)))?;
            Ok(LabEndpoint {
                key: e.key,
                kind: e.kind,
                node: e.node,
                netns: e.netns,
                ip: e.ip,
                ports,
            })
        };
        Ok(Lab {
            name: s.name,
            nodes: s
                .nodes
                .into_iter()
                .map(|n| {
                    Ok(LabNode {
                        name: n.name,
                        netns: n.netns,
                        endpoint: n.endpoint.map(endpoint).transpose()?,
                        generated_address: n.generated_address,
                        host_network_pods: n.host_network_pods,
                    })
                })
                .collect::<Result<_, LabError>>()?,
            fabric_netns: s.fabric,
            pods: s.pods.into_iter().map(endpoint).collect::<Result<_, _>>()?,
            external: endpoint(s.external)?,
            pids: s.pids,
        })
    }

    /// Writes the state file.
    pub(crate) fn save(&self) -> Result<(), LabError> {
        std::fs::create_dir_all(state_dir())?;
        self.save_to(&state_file(&self.name))
    }

    fn save_to(&self, path: &std::path::Path) -> Result<(), LabError> {
        let endpoint = |e: &LabEndpoint| EndpointState {
            key: e.key.clone(),
            kind: e.kind,
            node: e.node.clone(),
            netns: e.netns.clone(),
            ip: e.ip,
            ports: e.ports.iter().map(|(n, p)| format!("{n}/{p}")).collect(),
        };
        let s = LabState {
            name: self.name.clone(),
            nodes: self
                .nodes
                .iter()
                .map(|n| NodeState {
                    name: n.name.clone(),
                    netns: n.netns.clone(),
                    endpoint: n.endpoint.as_ref().map(endpoint),
                    generated_address: n.generated_address,
                    host_network_pods: n.host_network_pods.clone(),
                })
                .collect(),
            fabric: self.fabric_netns.clone(),
            pods: self.pods.iter().map(endpoint).collect(),
            external: endpoint(&self.external),
            pids: self.pids.clone(),
        };
        let text = serde_json::to_string(&s)
            .map_err(|e| LabError::State(path.to_path_buf(), format!("cannot encode: {e}")))?;
        std::fs::write(path, text)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_lab_loads_back_equal() {
        let path =
            std::env::temp_dir().join(format!("palisade-lab-state-{}.json", std::process::id()));
        let pod = LabEndpoint {
            key: "x/a".into(),
            kind: EndpointKind::Pod,
            node: Some("n1".into()),
            netns: "t-p0".into(),
            ip: "10.0.0.1".parse().unwrap_or(IpAddr::from([0, 0, 0, 0])),
            ports: vec![
                (80, palisade_model::Protocol::Tcp),
                (81, palisade_model::Protocol::Udp),
            ],
        };
        let node = LabEndpoint {
            key: "198.18.0.1".into(),
            kind: EndpointKind::Node,
            netns: "t-node-n1".into(),
            ip: IpAddr::from([198, 18, 0, 1]),
            ..pod.clone()
        };
        let lab = Lab {
            name: "t".into(),
            nodes: vec![LabNode {
                name: Some("n1".into()),
                netns: "t-node-n1".into(),
                endpoint: Some(node),
                generated_address: true,
                host_network_pods: vec!["x/h".into()],
            }],
            fabric_netns: Some("t-fab".into()),
            pods: vec![pod.clone()],
            external: LabEndpoint {
                key: "192.0.2.10".into(),
                kind: EndpointKind::External,
                node: None,
                netns: "t-ext".into(),
                ip: IpAddr::from(crate::EXTERNAL_IP),
                ports: vec![],
            },
            pids: vec![12, 34],
        };
        let saved = lab.save_to(&path);
        let loaded = Lab::load_from(path.clone());
        let _ = std::fs::remove_file(&path);
        assert!(saved.is_ok(), "{saved:?}");
        assert_eq!(loaded.ok(), Some(lab));
    }
}
