//! Keeps a real OpenStack Neutron in step with the cluster: the job of the Kuryr
//! controller, on the exact translation of [`palisade_neutron`].
//!
//! A sync reads what Neutron holds ([`state::observe`]: the groups tagged
//! [`state::OWNED_TAG`] with their rules, and the ports — two calls), [`plan::plan`]s the
//! difference to a [`Translation`] — groups by name among this cluster's own
//! ([`state::Owner`]: the project and the cluster's tag), rules by value, pods on ports by
//! fixed IP ([`placement`]: ports that cannot be placed are closed) — checks the plan
//! against the project's [`quota`] before the first write, and [`apply::apply`]s it in an
//! order that never leaves a port more open than before or after. A second sync of the
//! same state writes nothing. [`readback::read_back`] turns Neutron's state into a
//! [`Translation`] again, for the evaluator.
//!
//! This crate is the HTTP side; the translation itself has no I/O. [`auth`] logs in with
//! Keystone (password or application credential, from clouds.yaml or `OS_*` variables),
//! or uses identity headers for a Neutron that trusts them.
//!
//! ```
//! use palisade_neutron_sync::{plan::plan, state::{Observed, Owner}};
//! let t = palisade_neutron::Translation { security_groups: vec![], ports: vec![], address_groups: vec![] };
//! let owner = Owner::new("project", "default").unwrap();
//! assert!(plan(&t, &Observed::default(), &owner).is_empty(), "nothing wanted, nothing held: no call");
//! ```

pub mod apply;
pub mod auth;
pub mod client;
pub mod placement;
pub mod plan;
pub mod quota;
pub mod readback;
pub mod state;

use std::time::Instant;

use palisade_neutron::Translation;
use serde::Serialize;

use crate::apply::{Applied, PlannedCall};
use crate::client::{ApiError, Client, Counts};
use crate::placement::Unplaceable;
use crate::plan::{Plan, Refused, Unmatched};
use crate::quota::Shortfall;
use crate::state::{DEFAULT_CLUSTER_ID, PortFilter};

/// How to sync.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// Plan and report, write nothing.
    pub dry_run: bool,
    /// Which ports may be pods' ports.
    pub ports: PortFilter,
    /// The cluster's identity: only groups of the client's project carrying its tag are
    /// the sync's.
    pub cluster_id: String,
}

impl Default for SyncOptions {
    fn default() -> Self {
        SyncOptions {
            dry_run: false,
            ports: PortFilter::default(),
            cluster_id: DEFAULT_CLUSTER_ID.to_string(),
        }
    }
}

/// Why a sync did not run.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// A call failed before the plan was made, or the quota could not be read.
    #[error(transparent)]
    Api(#[from] ApiError),
    /// The cluster id is not one a tag can carry.
    #[error("{0}")]
    ClusterId(String),
    /// The plan would not fit the project's quotas; nothing was written.
    #[error("the sync would exceed the project's quota, so nothing was written: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    Quota(Vec<Shortfall>),
}

/// What a sync found and did.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Whether nothing was written.
    pub dry_run: bool,
    /// The write calls planned, in order.
    pub calls: Vec<PlannedCall>,
    /// What was done (`None` for a dry run).
    pub applied: Option<Applied>,
    /// Pods no port has an address of.
    pub unmatched: Vec<Unmatched>,
    /// Ports that could not be placed, closed.
    pub unplaceable: Vec<Unplaceable>,
    /// Groups named like the cluster's that are not its own (not adopted, not used).
    pub refused: Vec<Refused>,
    /// Calls made (reads, writes, retries).
    pub counts: Counts,
    /// Wall time in milliseconds.
    pub elapsed_ms: u128,
}

impl Report {
    /// Whether every planned call succeeded.
    pub fn ok(&self) -> bool {
        self.applied.as_ref().is_none_or(|a| a.errors.is_empty())
    }
}

/// Reads Neutron, plans, checks the plan against the quotas, and (unless a dry run)
/// applies.
pub fn sync(
    client: &Client,
    desired: &Translation,
    options: &SyncOptions,
) -> Result<Report, SyncError> {
    let start = Instant::now();
    let before = client.counts();
    let owner = state::Owner::new(client.project_id(), &options.cluster_id)
        .map_err(SyncError::ClusterId)?;
    let mut observed = state::observe(client, &owner, &options.ports)?;
    if !desired.address_groups.is_empty() || observed.uses_address_groups() {
        observed.address_groups = state::list_address_groups(client, &owner)?;
    }
    let plan: Plan = plan::plan(desired, &observed, &owner);
    let shortfalls = quota::check(client, &plan)?;
    if !shortfalls.is_empty() {
        return Err(SyncError::Quota(shortfalls));
    }
    let calls = apply::planned_calls(&plan);
    let applied = (!options.dry_run).then(|| apply::apply(client, &plan));
    let after = client.counts();
    Ok(Report {
        dry_run: options.dry_run,
        calls,
        applied,
        unmatched: plan.unmatched,
        unplaceable: plan.unplaceable,
        refused: plan.refused,
        counts: Counts {
            reads: after.reads - before.reads,
            writes: after.writes - before.writes,
            retries: after.retries - before.retries,
        },
        elapsed_ms: start.elapsed().as_millis(),
    })
}
