//! Namespaces, veth pairs, addresses and routes, through the `ip` command.

use std::net::IpAddr;
use std::process::Command;

use crate::LabError;

/// Runs a command, failing with its error output.
pub(crate) fn run(args: &[&str]) -> Result<(), LabError> {
    let out = Command::new(args[0]).args(&args[1..]).output()?;
    if out.status.success() {
        Ok(())
    } else {
        Err(LabError::Command {
            command: args.join(" "),
            message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Network namespaces that exist.
pub(crate) fn list_netns() -> Result<Vec<String>, LabError> {
    let out = Command::new("ip").args(["netns", "list"]).output()?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect())
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

/// A pod namespace joined to the node by a veth pair (`<veth>n` node side, `<veth>p` pod side).
pub(crate) fn attach(node: &str, pod: &str, veth: &str, ip: IpAddr) -> Result<(), LabError> {
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
    run(&[
        "ip",
        "-n",
        node,
        "route",
        "add",
        &format!("{ip}/32"),
        "dev",
        &host,
    ])?;
    Ok(())
}
