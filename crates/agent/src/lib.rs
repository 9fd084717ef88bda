//! Palisade's node agent: follows the cluster ([`palisade_follow`]: a directory of
//! manifests, or the Kubernetes API), keeps the evaluator current with incremental
//! changes, and keeps this network namespace's nftables ruleset equal to the evaluator's
//! verdicts.
//!
//! Data flows one way: [`palisade_follow::follow`] (the objects in force, with the
//! fail-closed rules for invalid ones) → [`reconcile::Reconciler`], the nftables sink:
//! [`palisade_engine::Engine::apply`] → one nftables transaction → conntrack cleanup. [`http`] serves `/metrics` ([`metrics::Metrics`]),
//! `/healthz` and `/readyz`; [`status`] writes, with `--report-status`, whether each admin
//! policy is programmed on the node; [`run::run`] puts it together.

pub mod decision_log;
pub mod decisions;
pub mod dialed;
pub mod dns_wire;
pub mod http;
pub mod learned;
pub mod learner;
pub mod metrics;
pub mod nflog;
pub mod reconcile;
pub mod resend;
pub mod run;
pub mod snapshot;
pub mod status;
