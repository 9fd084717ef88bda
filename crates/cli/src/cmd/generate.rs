//! `palisade gen`: a deterministic synthetic cluster for benchmarks.

use std::path::PathBuf;

use palisade_gen::{PodLabels, Spec, generate_with};

use crate::error::CliError;

/// Arguments of `gen`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Examples:\n  palisade gen --pods 10000 --policies 2000 --mix all -o /tmp/big\n  palisade matrix -f /tmp/big -o summary\n  palisade gen --pods 1000 --policies 200 --distinct-labels -o /tmp/distinct   # about one class per pod"
)]
pub struct Args {
    /// Number of pods.
    #[arg(long, default_value_t = 1000)]
    pods: usize,
    /// Number of policies.
    #[arg(long, default_value_t = 200)]
    policies: usize,
    /// Random seed (same seed and sizes, same files).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Mix: `np` (NetworkPolicies only) or `all` (about one policy in ten is an ANP, BANP or CNP).
    #[arg(long, value_enum, default_value = "np")]
    mix: Mix,
    /// Give every pod a label of its own (`instance: i<N>`) and let half of the pod
    /// selectors pick pods by it, so that policies tell almost every pod apart (about one
    /// matrix class per pod). Without it, a deployment's replicas share their labels.
    #[arg(long)]
    distinct_labels: bool,
    /// Output directory: writes cluster/cluster.yaml, policies/policies.yaml and, for
    /// network-config-analyzer, .nca/pods.yaml and .nca/namespaces.yaml (hidden, so that
    /// `-f DIR` reads the cluster once).
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
}

/// Policy mixes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum Mix {
    /// NetworkPolicies only.
    Np,
    /// NetworkPolicies and admin policies.
    All,
}

/// Writes the cluster.
pub fn run(args: Args) -> Result<(), CliError> {
    let labels = if args.distinct_labels {
        PodLabels::Distinct
    } else {
        PodLabels::Deployment
    };
    let g = generate_with(
        &Spec {
            pods: args.pods,
            policies: args.policies,
            seed: args.seed,
            admin: matches!(args.mix, Mix::All),
        },
        labels,
    );
    for (dir, file, text) in [
        ("cluster", "cluster.yaml", g.cluster_yaml()),
        ("policies", "policies.yaml", g.policies_yaml()),
        (".nca", "pods.yaml", g.pod_list()),
        (".nca", "namespaces.yaml", g.namespace_list()),
    ] {
        let d = args.output.join(dir);
        std::fs::create_dir_all(&d).map_err(CliError::file(&d))?;
        let path = d.join(file);
        std::fs::write(&path, text).map_err(CliError::file(&path))?;
    }
    let dir = args.output.display();
    eprintln!(
        "wrote {} pods and {} policies to {dir} (palisade matrix -f {dir}/cluster -f {dir}/policies)",
        args.pods, args.policies
    );
    Ok(())
}
