//! Kernel versus evaluator: [`observe`] probes every endpoint pair of a running lab with
//! real packets, and [`Observed::disagreements`] lists each probe whose outcome differs
//! from the engine's verdict, with the engine's explanation.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::path::Path;

use palisade_analysis::{Analysis, Probe};
use palisade_engine::{Engine, Flow};
use palisade_model::Protocol;

use crate::{Lab, LabEndpoint, LabError, Target};

/// One probe sent from one endpoint to another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// Index of the probe in [`Observed::probes`].
    pub probe: usize,
    /// Index of the source in [`Observed::endpoints`].
    pub from: usize,
    /// Index of the destination in [`Observed::endpoints`].
    pub to: usize,
    /// Whether the connection got through.
    pub reached: bool,
    /// When the probe started, in microseconds since the Unix epoch.
    pub start_us: u128,
    /// When it ended, in microseconds since the Unix epoch.
    pub end_us: u128,
}

/// What one [`observe`] run saw: every (probe, source, destination) of the lab's
/// endpoints, except an endpoint with itself.
#[derive(Debug, Clone)]
pub struct Observed {
    endpoints: Vec<LabEndpoint>,
    probes: Vec<Probe>,
    observations: Vec<Observation>,
    /// (probe, from, to) → index in `observations`.
    index: HashMap<(usize, usize, usize), usize>,
}

impl Observed {
    /// The endpoints (rows and columns): the pods in [`Lab::pods`] order, then the
    /// external host.
    pub fn endpoints(&self) -> &[LabEndpoint] {
        &self.endpoints
    }

    /// The probes (protocol and port), in the order given to [`observe`].
    pub fn probes(&self) -> &[Probe] {
        &self.probes
    }

    /// Every probe sent, ordered by (probe, source, destination).
    pub fn observations(&self) -> &[Observation] {
        &self.observations
    }

    /// Whether `probe` from endpoint `from` reached endpoint `to`; `None` when it was not
    /// sent (an endpoint with itself) or its result was lost.
    pub fn reached(&self, probe: usize, from: usize, to: usize) -> Option<bool> {
        self.index
            .get(&(probe, from, to))
            .map(|&i| self.observations[i].reached)
    }

    /// The flow `o` tried, as the engine names its endpoints.
    pub fn flow(&self, engine: &Engine, o: &Observation) -> Flow {
        let probe = self.probes[o.probe];
        Flow {
            src: engine.endpoint_for_ip(self.endpoints[o.from].ip),
            dst: engine.endpoint_for_ip(self.endpoints[o.to].ip),
            protocol: probe.protocol,
            port: probe.port,
        }
    }

    /// Whether the engine allows the flow `o` tried.
    pub fn allowed(&self, engine: &Engine, o: &Observation) -> bool {
        engine.evaluate(&self.flow(engine, o)).allowed
    }

    /// Every observation where the kernel and `engine` disagree, in observation order.
    pub fn disagreements(&self, engine: &Engine) -> Vec<Disagreement> {
        self.observations
            .iter()
            .filter_map(|o| {
                let flow = self.flow(engine, o);
                let evaluator = engine.evaluate(&flow).allowed;
                (evaluator != o.reached).then(|| Disagreement {
                    from: self.endpoints[o.from].key.clone(),
                    to: self.endpoints[o.to].key.clone(),
                    probe: self.probes[o.probe],
                    kernel: o.reached,
                    evaluator,
                    explanation: Analysis::new(engine).explain(&flow).to_string(),
                })
            })
            .collect()
    }
}

/// A probe on which the kernel and the evaluator disagree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disagreement {
    /// Source endpoint (`namespace/pod`, or the external host's address).
    pub from: String,
    /// Destination endpoint.
    pub to: String,
    /// Protocol and port.
    pub probe: Probe,
    /// Whether the probe got through the kernel.
    pub kernel: bool,
    /// Whether the evaluator allows it.
    pub evaluator: bool,
    /// The evaluator's explanation of its verdict.
    pub explanation: String,
}

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let word = |allowed: bool| if allowed { "allowed" } else { "denied" };
        write!(
            f,
            "{} -> {} {}/{}: kernel {}, evaluator {}\n{}",
            self.from,
            self.to,
            self.probe.protocol,
            self.probe.port,
            word(self.kernel),
            word(self.evaluator),
            self.explanation.trim_end()
        )
    }
}

/// Probes every (probe, source, destination) of the lab's endpoints (pods and the
/// external host; not an endpoint with itself) with real packets, one concurrent
/// `probe-batch` helper of `exe` per source namespace. Repeated probes are sent once, and
/// SCTP probes are left out (the lab cannot probe SCTP).
pub fn observe(lab: &Lab, exe: &Path, probes: &[Probe]) -> Result<Observed, LabError> {
    let mut unique: Vec<Probe> = Vec::with_capacity(probes.len());
    for p in probes {
        if p.protocol != Protocol::Sctp && !unique.contains(p) {
            unique.push(*p);
        }
    }
    let probes = unique;
    let endpoints: Vec<LabEndpoint> = lab.endpoints().cloned().collect();
    let plan: Vec<(String, Vec<Target>)> = endpoints
        .iter()
        .map(|from| {
            let targets = endpoints
                .iter()
                .filter(|to| to.netns != from.netns)
                .flat_map(|to| {
                    probes.iter().map(|p| Target {
                        ip: to.ip,
                        port: p.port,
                        protocol: p.protocol,
                    })
                })
                .collect();
            (from.netns.clone(), targets)
        })
        .collect();
    let by_netns: HashMap<&str, usize> = endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| (e.netns.as_str(), i))
        .collect();
    let by_ip: HashMap<IpAddr, usize> = endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| (e.ip, i))
        .collect();
    let by_probe: HashMap<Probe, usize> = probes.iter().enumerate().map(|(i, p)| (*p, i)).collect();
    let mut observations: Vec<Observation> = lab
        .probe(exe, &plan)?
        .into_iter()
        .filter_map(|(netns, r)| {
            let probe = Probe {
                protocol: r.target.protocol,
                port: r.target.port,
            };
            Some(Observation {
                probe: *by_probe.get(&probe)?,
                from: *by_netns.get(netns.as_str())?,
                to: *by_ip.get(&r.target.ip)?,
                reached: r.reached,
                start_us: r.start_us,
                end_us: r.end_us,
            })
        })
        .collect();
    observations.sort_by_key(|o| (o.probe, o.from, o.to));
    observations.dedup_by_key(|o| (o.probe, o.from, o.to));
    let index = observations
        .iter()
        .enumerate()
        .map(|(i, o)| ((o.probe, o.from, o.to), i))
        .collect();
    Ok(Observed {
        endpoints,
        probes,
        observations,
        index,
    })
}
