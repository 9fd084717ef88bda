//! `palisade compile --target neutron`.

use std::io::Write;

use palisade_engine::Engine;
use palisade_neutron::{PeerMode, TranslateOptions};

use super::compile::Format;
use crate::error::CliError;

/// Neutron-specific flags of `compile`.
#[derive(Debug, Clone, clap::Args)]
pub struct Flags {
    /// Translate the NetworkPolicies although admin policies exist (they are not enforced).
    #[arg(long)]
    ignore_admin_policies: bool,
    /// Selector peers as per-pod prefixes (default), remote security groups, or address
    /// groups (only where the firewall driver enforces remote address groups: see
    /// docs/neutron.md).
    #[arg(long, value_enum, default_value = "prefixes")]
    peer_mode: PeerModeArg,
}

/// `--peer-mode` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum PeerModeArg {
    /// `/32` and `/128` remote_ip_prefix rules per selected pod address.
    Prefixes,
    /// remote_group_id rules referring to member-only groups.
    RemoteGroups,
    /// remote_address_group_id rules referring to address groups of the pods' addresses.
    AddressGroups,
}

impl Flags {
    /// The translation options the flags give.
    pub fn options(&self) -> TranslateOptions {
        TranslateOptions {
            peer_mode: match self.peer_mode {
                PeerModeArg::Prefixes => PeerMode::Prefixes,
                PeerModeArg::RemoteGroups => PeerMode::RemoteGroups,
                PeerModeArg::AddressGroups => PeerMode::AddressGroups,
            },
            ignore_admin_policies: self.ignore_admin_policies,
        }
    }
}

/// Compiles to Neutron security groups: JSON (default) or YAML on stdout, a summary on stderr.
pub fn run(engine: &Engine, flags: &Flags, format: Format) -> Result<(), CliError> {
    let (t, warnings) = palisade_neutron::translate(engine, &flags.options())?;
    for w in warnings {
        eprintln!("palisade: warning: {w}");
    }
    let value = serde_json::to_value(&t)?;
    let text = match format {
        Format::Yaml => serde_saphyr::to_string(&value)?,
        _ => serde_json::to_string_pretty(&value)? + "\n",
    };
    std::io::stdout().lock().write_all(text.as_bytes())?;
    eprintln!("palisade: {}", t.summary());
    Ok(())
}
