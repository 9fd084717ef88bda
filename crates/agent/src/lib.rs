//! Palisade's node agent: follows the cluster from a source (a directory of manifests, or
//! the Kubernetes API), keeps the evaluator current with incremental changes, and keeps
//! this network namespace's nftables ruleset equal to the evaluator's verdicts.
//!
//! Data flows one way: [`source`] → [`store::Store`] (the objects in force, with the
//! fail-closed rules for invalid ones) → [`palisade_engine::Engine::apply`] →
//! [`palisade_nft::update`] (one transaction) → conntrack cleanup
//! ([`reconcile::Reconciler`]). [`http`] serves `/metrics` ([`metrics::Metrics`]),
//! `/healthz` and `/readyz`; [`status`] writes, with `--report-status`, whether each admin
//! policy is programmed on the node; [`run::run`] puts it together.

pub mod decision_log;
pub mod decisions;
pub mod http;
pub mod metrics;
pub mod nflog;
pub mod reconcile;
pub mod run;
pub mod source;
pub mod status;
pub mod store;
