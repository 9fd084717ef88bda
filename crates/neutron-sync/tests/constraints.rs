//! Against a real Neutron, where the project constrains the sync: a lowered quota is
//! refused before the first write (with the numbers), and an over-quota refusal during an
//! apply is an error, never "the rule already exists"; a port holding two pods' addresses,
//! or a pod whose address a second port also holds, is reported and closed before any
//! group it used gains a rule.

#![allow(missing_docs, clippy::unwrap_used)] // a test: a failed unwrap is a failed assertion

mod common;

use common::{engine, generated, translation};

use palisade_engine::{Engine, PodId};
use palisade_neutron_sync::client::Client;
use palisade_neutron_sync::quota::usage;
use palisade_neutron_sync::state::{DEFAULT_CLUSTER_ID, Owner, PortFilter, list_ports, observe};
use palisade_neutron_sync::{SyncError, SyncOptions, apply, plan, sync};
use serde_json::{Value, json};

fn options(filter: &PortFilter) -> SyncOptions {
    SyncOptions {
        dry_run: false,
        ports: filter.clone(),
        ..SyncOptions::default()
    }
}

/// A call as the cloud's administrator (`X-Roles: admin`), which the sync never is: to
/// lower a project's quota, for instance. Returns the status and the answer.
fn admin_call(url: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("{}/v2.0/{path}", url.trim_end_matches('/'));
    let headers = [
        ("X-Project-Id", "admin"),
        ("X-User-Id", "admin"),
        ("X-Roles", "admin,member,reader"),
        ("Accept", "application/json"),
    ];
    let mut response = match method {
        "PUT" => {
            let mut req = agent.put(&url);
            for (k, v) in headers {
                req = req.header(k, v);
            }
            req.content_type("application/json")
                .send(body.map(Value::to_string).unwrap_or_default().as_str())
                .unwrap()
        }
        _ => {
            let mut req = agent.get(&url);
            for (k, v) in headers {
                req = req.header(k, v);
            }
            req.call().unwrap()
        }
    };
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Sets the project's quota of `resource` (as the administrator).
fn set_quota(url: &str, project: &str, resource: &str, limit: i64) {
    let (status, answer) = admin_call(
        url,
        "PUT",
        &format!("quotas/{project}"),
        Some(&json!({"quota": {resource: limit}})),
    );
    assert_eq!(status, 200, "setting the quota: {answer}");
}

fn rule_count(c: &Client) -> i64 {
    usage(c, "security_group_rule").unwrap().used
}

#[test]
fn a_plan_over_the_rule_quota_is_refused_before_the_first_write() {
    let Some(url) = common::neutron_url() else {
        return;
    };
    let project = common::project("quota-pre");
    let c = common::client(&url, &project);
    let e = engine(&generated(31));
    let t = translation(&e);
    let filter = common::pod_ports(&c, &e.cluster().pods);
    let used = rule_count(&c);
    set_quota(&url, &project, "security_group_rule", used + 3);
    let writes_before = c.counts().writes;
    let err = sync(&c, &t, &options(&filter)).unwrap_err();
    assert_eq!(c.counts().writes, writes_before, "nothing was written");
    let SyncError::Quota(short) = &err else {
        panic!("not a quota refusal: {err}");
    };
    assert_eq!(short.len(), 1, "{err}");
    assert_eq!(short[0].resource, "security_group_rule");
    assert_eq!((short[0].limit, short[0].used), (used + 3, used), "{err}");
    assert!(short[0].needed > 3, "{err}");
    assert!(
        err.to_string().contains("raise the quota to at least"),
        "names what to raise: {err}"
    );
    assert_eq!(rule_count(&c), used, "Neutron holds no new rule");
}

#[test]
fn an_over_quota_refusal_during_an_apply_is_an_error() {
    let Some(url) = common::neutron_url() else {
        return;
    };
    let project = common::project("quota-409");
    let c = common::client(&url, &project);
    let e = engine(&generated(32));
    let t = translation(&e);
    let filter = common::pod_ports(&c, &e.cluster().pods);
    let owner = Owner::new(&project, DEFAULT_CLUSTER_ID).unwrap();
    let p = plan::plan(&t, &observe(&c, &owner, &filter).unwrap(), &owner);
    // The quota leaves room for the groups' default rules, not for their own: the quota
    // check would refuse the plan; applied anyway (as when the use grew meanwhile), the
    // rule creations meet 409 over quota.
    let used = rule_count(&c);
    set_quota(
        &url,
        &project,
        "security_group_rule",
        used + 2 * p.create_groups.len() as i64,
    );
    let applied = apply::apply(&c, &p);
    assert!(
        !applied.errors.is_empty(),
        "the refusals are errors: {applied:?}"
    );
    assert!(
        applied
            .errors
            .iter()
            .all(|e| e.contains("Quota exceeded") && e.contains("security_group_rule: quota")),
        "each names the quota and its numbers: {:#?}",
        applied.errors
    );
}

/// A network whose ports hold the pods' addresses, one port per pod, except that pod
/// `with`'s address is added to pod `to`'s port (a port with a second fixed IP).
fn ports_sharing(c: &Client, e: &Engine, to: PodId, with: PodId) -> PortFilter {
    let pods = &e.cluster().pods;
    let rest: Vec<_> = e
        .pod_ids()
        .zip(pods)
        .filter(|(i, _)| *i != with)
        .map(|(_, p)| p.clone())
        .collect();
    let filter = common::pod_ports(c, &rest);
    let port = port_of(c, &filter, &pods[to].ips[0].to_string());
    let mut fixed = port["fixed_ips"].as_array().unwrap().clone();
    let subnet = fixed[0]["subnet_id"].clone();
    fixed.push(json!({"subnet_id": subnet, "ip_address": pods[with].ips[0].to_string()}));
    c.put(
        &format!("ports/{}", port["id"].as_str().unwrap()),
        &json!({"port": {"fixed_ips": fixed}}),
    )
    .unwrap();
    filter
}

/// The port (JSON) holding `ip` among those of `filter`.
fn port_of(c: &Client, filter: &PortFilter, ip: &str) -> serde_json::Value {
    let net = filter.network_id.as_deref().unwrap();
    let v = c
        .get(&format!(
            "ports?network_id={net}&fixed_ips=ip_address%3D{ip}"
        ))
        .unwrap();
    let ports = v["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 1, "one port holds {ip}: {v}");
    ports[0].clone()
}

fn pod_indexes(e: &Engine) -> (PodId, PodId) {
    let pods: Vec<PodId> = e
        .pod_ids()
        .filter(|&i| !e.cluster().pods[i].host_network && !e.cluster().pods[i].ips.is_empty())
        .collect();
    (pods[0], pods[1])
}

#[test]
fn a_port_holding_two_pods_addresses_is_closed_and_reported() {
    let Some(url) = common::neutron_url() else {
        return;
    };
    let project = common::project("two-pods");
    let c = common::client(&url, &project);
    let e = engine(&generated(33));
    let t = translation(&e);
    let (a, b) = pod_indexes(&e);
    let filter = ports_sharing(&c, &e, a, b);
    let shared = port_of(&c, &filter, &e.cluster().pods[a].ips[0].to_string());
    // The port carries a group of the project's before the sync (its `default`).
    assert!(
        !shared["security_groups"].as_array().unwrap().is_empty(),
        "the case needs a port that carries a group: {shared}"
    );
    let report = sync(&c, &t, &options(&filter)).unwrap();
    assert!(report.ok(), "{:?}", report.applied);
    let pods = &e.cluster().pods;
    assert_eq!(report.unplaceable.len(), 1, "{:?}", report.unplaceable);
    let u = &report.unplaceable[0];
    assert_eq!(u.port_id, shared["id"].as_str().unwrap());
    let mut want = vec![pods[a].key(), pods[b].key()];
    want.sort();
    assert_eq!(u.pods, want, "both pods are named");
    let now = port_of(&c, &filter, &pods[a].ips[0].to_string());
    assert_eq!(
        now["security_groups"],
        json!([]),
        "the port carries no group: it admits nothing"
    );
    // Every other pod is placed.
    let carrying = list_ports(&c, &filter)
        .unwrap()
        .iter()
        .filter(|p| !p.security_groups.is_empty())
        .count();
    assert_eq!(carrying, t.ports.len() - 2);
    let again = sync(&c, &t, &options(&filter)).unwrap();
    assert_eq!(again.counts.writes, 0, "{:#?}", again.calls);
    assert_eq!(again.unplaceable.len(), 1, "still reported");
}

#[test]
fn a_pod_whose_address_a_second_port_holds_is_closed_before_its_groups_change() {
    let Some(url) = common::neutron_url() else {
        return;
    };
    let project = common::project("two-ports");
    let c = common::client(&url, &project);
    let g = generated(34);
    let e = engine(&g);
    let everything = PortFilter::default();
    let first = common::pod_ports(&c, &e.cluster().pods);
    assert!(
        sync(&c, &translation(&e), &options(&everything))
            .unwrap()
            .ok()
    );
    let (a, _) = pod_indexes(&e);
    let pod = &e.cluster().pods[a];
    let old = port_of(&c, &first, &pod.ips[0].to_string());
    assert!(
        !old["security_groups"].as_array().unwrap().is_empty(),
        "the pod's port carries its groups"
    );
    // A second port, on another network, holds an address of its own and the pod's.
    let net = c
        .post("networks", &json!({"network": {"name": "other"}}))
        .unwrap();
    let net_id = net["network"]["id"].as_str().unwrap().to_string();
    let subnet = c
        .post("subnets", &json!({"subnet": {"network_id": net_id, "ip_version": 4, "cidr": "10.0.0.0/8", "gateway_ip": null}}))
        .unwrap();
    let subnet_id = subnet["subnet"]["id"].as_str().unwrap();
    let second = c
        .post(
            "ports",
            &json!({"port": {"network_id": net_id, "fixed_ips": [
                {"subnet_id": subnet_id, "ip_address": "10.250.0.1"},
                {"subnet_id": subnet_id, "ip_address": pod.ips[0].to_string()}]}}),
        )
        .unwrap();
    let second_id = second["port"]["id"].as_str().unwrap().to_string();
    // The policies change: every policy goes, so the groups the pod's port carries would
    // be rewritten or opened.
    let mut g2 = g.clone();
    g2.policies.clear();
    let report = sync(&c, &translation(&engine(&g2)), &options(&everything)).unwrap();
    assert!(report.ok(), "{:?}", report.applied);
    let mut closed: Vec<&str> = report
        .unplaceable
        .iter()
        .map(|u| u.port_id.as_str())
        .collect();
    closed.sort();
    let mut want = vec![old["id"].as_str().unwrap(), second_id.as_str()];
    want.sort();
    assert_eq!(closed, want, "both ports are reported");
    for p in list_ports(&c, &everything).unwrap() {
        if want.contains(&p.id.as_str()) {
            assert!(
                p.security_groups.is_empty(),
                "port {} still carries {:?}",
                p.id,
                p.security_groups
            );
        }
    }
}
