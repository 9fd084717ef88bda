//! `palisade`: analyse, explain and enforce Kubernetes network policies.

mod cmd;
mod common;
mod error;
mod git;
mod report;
mod service_query;

use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

/// mimalloc: loading allocates many small objects from several threads, where it is
/// markedly faster than the system allocator (see docs/performance.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Kubernetes network policy: evaluate, explain, enforce, translate.
#[derive(Debug, Parser)]
#[command(
    name = "palisade",
    version,
    about,
    long_about = None,
    after_help = "Analysis: eval, explain, matrix, lint, diff, coverage. Enforcement: compile, agent, neutron. \
Policy layer: tenancy. For developers: lab (root), gen."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Decide one connection and say which tier, policy and rule decided each side.
    Eval(cmd::eval::Args),
    /// Print the connectivity matrix between every pair of pods.
    Matrix(cmd::matrix::Args),
    /// Walk one connection through the tiers, policy by policy.
    Explain(cmd::explain::Args),
    /// Report policies that are valid but likely wrong (overlaps, shadowed rules, empty selectors).
    Lint(cmd::lint::Args),
    /// The connections gained and lost between two states, with the policies responsible.
    Diff(cmd::diff::Args),
    /// Which pods each tier isolates, which no policy protects, and what is exposed outside.
    Coverage(cmd::coverage::Args),
    /// Compile the policies into a data plane's shape (nftables, Neutron security groups).
    Compile(cmd::compile::Args),
    /// Enforce the policies live: follow a manifest directory or the Kubernetes API and
    /// keep this network namespace's nftables ruleset in step.
    Agent(cmd::agent::Args),
    /// Keep an OpenStack Neutron's security groups and the pods' ports in step with the
    /// policies: once (`sync`) or continuously (`controller`).
    #[command(subcommand)]
    Neutron(cmd::neutron::Args),
    /// Grouped, admin-managed policies for tools, compiled into NetworkPolicies.
    #[command(subcommand)]
    Tenancy(cmd::tenancy::Args),
    /// Network-namespace test nodes enforcing the ruleset, probed with real packets (root).
    #[command(subcommand)]
    Lab(cmd::lab::Args),
    /// Write a deterministic synthetic cluster (for benchmarks and tests).
    Gen(cmd::generate::Args),
}

/// The name under which kubectl runs the binary as its plugin `kubectl palisade`.
const KUBECTL_PLUGIN: &str = "kubectl-palisade";

/// Whether the binary runs as the kubectl plugin: invoked as `kubectl-palisade` (a copy,
/// a symlink, or krew's link), so help and usage say `kubectl palisade`.
fn as_kubectl_plugin(argv0: Option<&std::ffi::OsStr>) -> bool {
    argv0
        .map(std::path::Path::new)
        .and_then(std::path::Path::file_name)
        .is_some_and(|name| name == KUBECTL_PLUGIN)
}

fn main() -> ExitCode {
    let mut command = Cli::command();
    if as_kubectl_plugin(std::env::args_os().next().as_deref()) {
        command = command.bin_name("kubectl palisade");
    }
    let cli = match Cli::from_arg_matches(&command.get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let result = match cli.command {
        Command::Eval(args) => cmd::eval::run(args),
        Command::Matrix(args) => cmd::matrix::run(args),
        Command::Explain(args) => cmd::explain::run(args),
        Command::Lint(args) => cmd::lint::run(args),
        Command::Diff(args) => cmd::diff::run(args),
        Command::Coverage(args) => cmd::coverage::run(args),
        Command::Compile(args) => cmd::compile::run(args),
        Command::Tenancy(args) => cmd::tenancy::run(args),
        Command::Gen(args) => cmd::generate::run(args),
        Command::Lab(args) => cmd::lab::run(args),
        Command::Agent(args) => cmd::agent::run(args),
        Command::Neutron(args) => cmd::neutron::run(args),
    };
    error::exit(result)
}

#[cfg(test)]
mod tests {
    use super::as_kubectl_plugin;
    use std::ffi::OsStr;

    #[test]
    fn the_plugin_is_recognised_by_the_file_name_alone() {
        for (argv0, plugin) in [
            ("kubectl-palisade", true),
            ("/root/.krew/bin/kubectl-palisade", true),
            ("./kubectl-palisade", true),
            ("palisade", false),
            ("/usr/local/bin/palisade", false),
            ("kubectl-palisade-old", false),
            ("/opt/kubectl-palisade/palisade", false),
        ] {
            assert_eq!(
                as_kubectl_plugin(Some(OsStr::new(argv0))),
                plugin,
                "{argv0}"
            );
        }
        assert!(!as_kubectl_plugin(None), "no argv[0]");
    }
}
