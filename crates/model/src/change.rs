//! One change to the objects in force, from source to engine: an object added or replaced,
//! or a key removed.

use std::sync::Arc;

use crate::{Object, ObjectKey};

/// One change to the cluster: `O` is the object as the holder keeps it ([`Object`] for an
/// engine, a shared [`Arc<Object>`] for a store that keeps it too: [`SharedChange`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change<O = Object> {
    /// Add or replace the object (by its key).
    Upsert(O),
    /// Remove the object with this key (a namespace takes its pods and policies with it).
    Remove(ObjectKey),
}

/// A change whose object stays shared with a store until an engine takes a copy
/// ([`SharedChange::cloned`]).
pub type SharedChange = Change<Arc<Object>>;

impl Change<Arc<Object>> {
    /// The change with its own copy of the object, for an engine to apply.
    pub fn cloned(&self) -> Change {
        match self {
            Change::Upsert(object) => Change::Upsert(Object::clone(object)),
            Change::Remove(key) => Change::Remove(key.clone()),
        }
    }
}
