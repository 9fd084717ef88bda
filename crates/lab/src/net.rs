//! Namespaces, veth pairs, addresses and routes, through the `ip` command.

use std::net::IpAddr;
use std::process::Command;

use crate::LabError;

/// Runs a command, failing with its error output.
pub(crate) fn run(args: &[&str]) -> Result<(), LabError> {
    output(args).map(drop)
}

/// Network namespaces that exist.
pub(crate) fn list_netns() -> Result<Vec<String>, LabError> {
    let out = Command::new("ip").args(["netns", "list"]).output()?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect())
}

/// The IPv4 addresses of device `dev` in namespace `ns`.
pub(crate) fn addresses(ns: &str, dev: &str) -> Result<Vec<IpAddr>, LabError> {
    let out = output(&["ip", "-n", ns, "-o", "-4", "addr", "show", "dev", dev])?;
    // `2: dev    inet 192.0.2.10/32 scope global dev\ ...`
    Ok(out
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            words.find(|w| *w == "inet")?;
            words.next()?.split('/').next()?.parse().ok()
        })
        .collect())
}

/// The processes in namespace `ns`.
pub(crate) fn pids(ns: &str) -> Result<Vec<u32>, LabError> {
    let out = output(&["ip", "netns", "pids", ns])?;
    Ok(out
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect())
}

/// Runs a command and returns its output, failing with its error output.
fn output(args: &[&str]) -> Result<String, LabError> {
    let out = Command::new(args[0]).args(&args[1..]).output()?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(LabError::Command {
            command: args.join(" "),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// The node namespace, forwarding.
pub(crate) fn node(ns: &str) -> Result<(), LabError> {
    run(&["ip", "netns", "add", ns])?;
    run(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
    run(&[
        "ip",
        "netns",
        "exec",
        ns,
        "sysctl",
        "-qw",
        "net.ipv4.ip_forward=1",
    ])?;
    Ok(())
}

/// A pod namespace joined to the node by a veth pair (`<veth>n` node side, `<veth>p` pod
/// side). With `node_ip`, the node reaches the pod from that address (its own), not from
/// the gateway address.
pub(crate) fn attach(
    node: &str,
    pod: &str,
    veth: &str,
    ip: IpAddr,
    node_ip: Option<IpAddr>,
) -> Result<(), LabError> {
    let (host, peer) = (format!("{veth}n"), format!("{veth}p"));
    let cidr = format!("{ip}/32");
    let ip = ip.to_string();
    run(&["ip", "netns", "add", pod])?;
    run(&["ip", "-n", pod, "link", "set", "lo", "up"])?;
    run(&[
        "ip", "-n", node, "link", "add", &host, "type", "veth", "peer", "name", &peer, "netns", pod,
    ])?;
    run(&["ip", "-n", pod, "addr", "add", &cidr, "dev", &peer])?;
    run(&["ip", "-n", pod, "link", "set", &peer, "up"])?;
    run(&["ip", "-n", pod, "route", "add", "169.254.1.1", "dev", &peer])?;
    run(&[
        "ip",
        "-n",
        pod,
        "route",
        "add",
        "default",
        "via",
        "169.254.1.1",
        "dev",
        &peer,
    ])?;
    run(&[
        "ip",
        "-n",
        node,
        "addr",
        "add",
        "169.254.1.1/32",
        "dev",
        &host,
    ])?;
    run(&["ip", "-n", node, "link", "set", &host, "up"])?;
    let route = format!("{ip}/32");
    let mut args = vec!["ip", "-n", node, "route", "add", &route, "dev", &host];
    let src = node_ip.map(|a| a.to_string());
    if let Some(src) = &src {
        args.extend(["src", src]);
    }
    run(&args)
}

/// Joins node namespace `node` to the fabric namespace by a veth pair (`<veth>n` node side,
/// `<veth>f` fabric side). The node side holds the node's address as a /32 with a default
/// route via 169.254.2.1 (held by the fabric side); the fabric routes the node's address
/// and its `pods` to it.
pub(crate) fn join(
    fabric: &str,
    node: &str,
    veth: &str,
    node_ip: IpAddr,
    pods: &[IpAddr],
) -> Result<(), LabError> {
    let (host, peer) = (format!("{veth}f"), format!("{veth}n"));
    let (node_ip, cidr) = (node_ip.to_string(), format!("{node_ip}/32"));
    run(&[
        "ip", "-n", fabric, "link", "add", &host, "type", "veth", "peer", "name", &peer, "netns",
        node,
    ])?;
    run(&["ip", "-n", node, "addr", "add", &cidr, "dev", &peer])?;
    run(&["ip", "-n", node, "link", "set", &peer, "up"])?;
    run(&[
        "ip",
        "-n",
        node,
        "route",
        "add",
        FABRIC_GATEWAY,
        "dev",
        &peer,
    ])?;
    run(&[
        "ip",
        "-n",
        node,
        "route",
        "add",
        "default",
        "via",
        FABRIC_GATEWAY,
        "dev",
        &peer,
    ])?;
    let gateway = format!("{FABRIC_GATEWAY}/32");
    run(&["ip", "-n", fabric, "addr", "add", &gateway, "dev", &host])?;
    run(&["ip", "-n", fabric, "link", "set", &host, "up"])?;
    run(&["ip", "-n", fabric, "route", "add", &cidr, "dev", &host])?;
    for pod in pods {
        let pod = format!("{pod}/32");
        run(&[
            "ip", "-n", fabric, "route", "add", &pod, "via", &node_ip, "dev", &host,
        ])?;
    }
    Ok(())
}

/// The fabric's address on its side of every node's veth pair.
const FABRIC_GATEWAY: &str = "169.254.2.1";
