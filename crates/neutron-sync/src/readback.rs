//! Neutron's groups and ports read back as a [`Translation`], so the Neutron-semantics
//! evaluator ([`palisade_neutron::SgEvaluator`]) can decide connections on what Neutron
//! actually holds. Groups are named by their ids (remote groups refer to ids), and each
//! port stands in the binding list under its id. A group's rules are a set in Neutron,
//! listed in no fixed order; rules, groups and ports are read back sorted, so two reads of
//! the same state are equal.

use std::collections::BTreeSet;

use palisade_neutron::{AddressGroup, PortBinding, SecurityGroup, Translation};

use crate::client::{ApiError, Client};
use crate::state::{PortFilter, list_all, list_groups, list_ports, query_escape};

/// Every group of the project (owned or not), every address group, and every port the
/// filter admits.
pub fn read_back(client: &Client, filter: &PortFilter) -> Result<Translation, ApiError> {
    let groups = list_groups(client, None)?;
    let ports = list_ports(client, filter)?;
    let mut security_groups = Vec::new();
    for g in groups {
        let mut rules = Vec::new();
        for r in g.rules {
            match r.rule {
                Some(rule) => rules.push(rule),
                None => {
                    return Err(ApiError::Decode {
                        method: "GET",
                        path: "security-groups".into(),
                        message: format!(
                            "group {} has rule {} the evaluator cannot read",
                            g.id, r.id
                        ),
                    });
                }
            }
        }
        rules.sort();
        security_groups.push(SecurityGroup {
            name: g.id,
            tags: g.tags,
            description: g.name,
            security_group_rules: rules,
        });
    }
    security_groups.sort_by(|a, b| a.name.cmp(&b.name));
    let mut ports: Vec<PortBinding> = ports
        .into_iter()
        .filter(|p| !p.fixed_ips.is_empty())
        .map(|p| PortBinding {
            pod: p.id,
            fixed_ips: p.fixed_ips,
            security_groups: p.security_groups.into_iter().collect::<BTreeSet<_>>(),
        })
        .collect();
    ports.sort_by(|a, b| a.pod.cmp(&b.pod));
    Ok(Translation {
        security_groups,
        ports,
        address_groups: address_groups(client)?,
    })
}

/// The project's address groups, named by their ids.
fn address_groups(client: &Client) -> Result<Vec<AddressGroup>, ApiError> {
    let path = format!(
        "address-groups?project_id={}",
        query_escape(client.project_id())
    );
    let mut out = Vec::new();
    for g in list_all(client, &path, "address_groups")? {
        let bad = |message: String| ApiError::Decode {
            method: "GET",
            path: path.clone(),
            message,
        };
        let id = g["id"]
            .as_str()
            .ok_or_else(|| bad("an address group without id".into()))?;
        let mut addresses = Vec::new();
        for a in g["addresses"].as_array().into_iter().flatten() {
            let net = a
                .as_str()
                .and_then(|a| a.parse().ok())
                .ok_or_else(|| bad(format!("address group {id}: address {a}")))?;
            addresses.push(net);
        }
        addresses.sort();
        out.push(AddressGroup {
            name: id.to_string(),
            description: g["name"].as_str().unwrap_or_default().to_string(),
            addresses,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}
