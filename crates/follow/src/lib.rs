//! Following a cluster: where its objects come from, which of them are in force, and one
//! loop that hands each new consistent state to whoever enforces it.
//!
//! Data flows one way: a [`source::Source`] (a manifest directory, or the Kubernetes API)
//! sends [`source::Event`]s → the [`store::Store`] decodes them and keeps the objects in
//! force, with the fail-closed rules for invalid or unreadable input → [`follow`] hands
//! each batch's engine changes to a [`Sink`] (the agent's nftables reconciler, the Neutron
//! controller). Nothing reaches a sink before the source's first full listing.
//!
//! This crate is not an enforcer: it compiles nothing and talks to no kernel or cloud.

pub mod run;
pub mod source;
pub mod store;

pub use run::{Batch, Follower, Sink, follow};
