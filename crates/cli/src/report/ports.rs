//! Ports as people give them on the command line: a number, a range or a container port name.

use std::fmt;
use std::str::FromStr;

use palisade_model::{ContainerPort, Port, PortRange, Protocol};

/// `--port 80`, `--port 8080-8090` or `--port http`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortArg {
    /// One port.
    Number(Port),
    /// An inclusive range.
    Range(PortRange),
    /// A container port name, resolved per destination pod.
    Named(String),
}

fn number(s: &str) -> Result<Port, String> {
    let n: i64 = s
        .parse()
        .map_err(|_| format!("{s:?} is not a port number"))?;
    Port::new(n).ok_or_else(|| format!("port {n} is outside 1-65535"))
}

impl FromStr for PortArg {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty() {
            return number(s).map(PortArg::Number);
        }
        if let Some((a, b)) = s.split_once('-')
            && a.bytes().all(|c| c.is_ascii_digit())
            && !a.is_empty()
        {
            let (start, end) = (number(a)?, number(b)?);
            if start > end {
                return Err(format!("the range {s} ends before it starts"));
            }
            return Ok(PortArg::Range(PortRange { start, end }));
        }
        match palisade_model::validate::port_name(s) {
            None => Ok(PortArg::Named(s.to_string())),
            Some(e) => Err(format!(
                "{s:?} is neither a port (80), a range (8080-8090) nor a port name: {e}"
            )),
        }
    }
}

impl fmt::Display for PortArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortArg::Number(p) => p.fmt(f),
            PortArg::Range(r) => r.fmt(f),
            PortArg::Named(n) => f.write_str(n),
        }
    }
}

/// Every port of a protocol.
pub fn all_ports() -> PortRange {
    PortRange {
        start: Port::new(1).unwrap_or_else(|| unreachable!("1 is a port")),
        end: Port::new(65535).unwrap_or_else(|| unreachable!("65535 is a port")),
    }
}

/// The container port named `name` (of `protocol`, when given) among `ports`: "name and
/// protocol must both match"; the first declaration wins.
pub fn resolve_named<'a>(
    ports: &'a [ContainerPort],
    name: &str,
    protocol: Option<Protocol>,
) -> Option<&'a ContainerPort> {
    ports
        .iter()
        .find(|cp| cp.name.as_deref() == Some(name) && protocol.is_none_or(|p| p == cp.protocol))
}

/// `80/TCP (http), 53/UDP`: a pod's container ports, for error messages.
pub fn list(ports: &[ContainerPort]) -> String {
    if ports.is_empty() {
        return "none".into();
    }
    let items: Vec<String> = ports
        .iter()
        .map(|cp| match &cp.name {
            Some(n) => format!("{}/{} ({n})", cp.port, cp.protocol),
            None => format!("{}/{}", cp.port, cp.protocol),
        })
        .collect();
    items.join(", ")
}

/// `80, 8080-8090`: ranges joined, or `none`.
pub fn ranges(r: &[PortRange]) -> String {
    if r.is_empty() {
        return "none".into();
    }
    let items: Vec<String> = r.iter().map(PortRange::to_string).collect();
    items.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_numbers_ranges_and_names() {
        let p = |s: &str| s.parse::<PortArg>().map(|p| p.to_string());
        assert_eq!(p("80"), Ok("80".into()), "a number");
        assert_eq!(p("8080-8090"), Ok("8080-8090".into()), "a range");
        assert_eq!(p("http"), Ok("http".into()), "a name");
        assert_eq!(
            p("metrics-tls"),
            Ok("metrics-tls".into()),
            "a name with a dash"
        );
        assert!(p("0").is_err(), "0 is not a port");
        assert!(p("65536").is_err(), "beyond 65535");
        assert!(p("90-80").is_err(), "backwards range");
        assert!(p("80-").is_err(), "half a range");
        assert!(p("Bad_Name").is_err(), "not an IANA_SVC_NAME");
        assert!(p("").is_err(), "empty");
    }
}
