//! Keeps a real OpenStack Neutron in step with the cluster: the job of the Kuryr
//! controller, on the exact translation of [`palisade_neutron`].
//!
//! A sync reads what Neutron holds ([`state::observe`]: the owned groups with their rules,
//! and the ports — two calls), [`plan::plan`]s the difference to a [`Translation`] — groups
//! by name among those tagged [`state::OWNED_TAG`], rules by value, ports by fixed IP —
//! and [`apply::apply`]s it in an order that never leaves a port more open than before or
//! after. A second sync of the same state writes nothing. [`readback::read_back`] turns
//! Neutron's state into a [`Translation`] again, for the evaluator.
//!
//! This crate is the HTTP side; the translation itself has no I/O. [`auth`] logs in with
//! Keystone (password or application credential, from clouds.yaml or `OS_*` variables),
//! or uses identity headers for a Neutron that trusts them.
//!
//! ```
//! use palisade_neutron_sync::{plan::plan, state::Observed};
//! let t = palisade_neutron::Translation { security_groups: vec![], ports: vec![] };
//! assert!(plan(&t, &Observed::default()).is_empty(), "nothing wanted, nothing held: no call");
//! ```

pub mod apply;
pub mod auth;
pub mod client;
pub mod plan;
pub mod readback;
pub mod state;

use std::time::Instant;

use palisade_neutron::Translation;
use serde::Serialize;

use crate::apply::{Applied, PlannedCall};
use crate::client::{ApiError, Client, Counts};
use crate::plan::{Plan, Unmatched};
use crate::state::PortFilter;

/// How to sync.
#[derive(Debug, Clone, Default)]
pub struct SyncOptions {
    /// Plan and report, write nothing.
    pub dry_run: bool,
    /// Which ports may be pods' ports.
    pub ports: PortFilter,
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
    /// Pods whose port was not found or not unique.
    pub unmatched: Vec<Unmatched>,
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

/// Reads Neutron, plans, and (unless a dry run) applies.
pub fn sync(
    client: &Client,
    desired: &Translation,
    options: &SyncOptions,
) -> Result<Report, ApiError> {
    let start = Instant::now();
    let before = client.counts();
    let observed = state::observe(client, &options.ports)?;
    let plan: Plan = plan::plan(desired, &observed);
    let calls = apply::planned_calls(&plan);
    let applied = (!options.dry_run).then(|| apply::apply(client, &plan));
    let after = client.counts();
    Ok(Report {
        dry_run: options.dry_run,
        calls,
        applied,
        unmatched: plan.unmatched,
        counts: Counts {
            reads: after.reads - before.reads,
            writes: after.writes - before.writes,
            retries: after.retries - before.retries,
        },
        elapsed_ms: start.elapsed().as_millis(),
    })
}
