//! An update divided into a preparation `nft -f` script and one netlink transaction.

use std::fmt::Write;
use std::net::IpAddr;

use crate::diff::{Delta, add_set};
use crate::ir::{AddrRange, Chain, NamedSet};
use crate::kernel::batch::{Batch, Element};
use crate::kernel::expr::encodable;
use crate::render::{TABLE, add_rules};

/// Whether every rule of `chain` only continues in another chain, as a class's entry
/// chain does.
pub(crate) fn entry_only(chain: &Chain) -> bool {
    chain
        .rules
        .iter()
        .all(|r| r.matches.is_empty() && r.log.is_none() && r.verdict.target().is_some())
}

impl Delta<'_> {
    /// The change as a preparation script and one netlink transaction, when every chain
    /// the kernel already holds is either unchanged, gone, or a class entry chain that now
    /// continues elsewhere; `None` otherwise.
    ///
    /// When every rule of every new chain can go as netlink expressions (see `expr.rs`),
    /// the new sets with their elements and the new chains with their rules open the
    /// batch and the script is empty. Otherwise the script creates them first (nothing
    /// refers to them yet; `add set` with its elements needs no element read). The batch
    /// then switches over atomically: elements of existing sets and maps, entry chains
    /// re-pointed, and what is no longer used deleted.
    pub fn split(&self) -> Option<Split> {
        let mut batch = Batch::new();
        // New sets and chains open the batch when netlink can carry every new rule.
        let by_netlink = self
            .new_chains
            .iter()
            .all(|c| c.rules.iter().all(encodable));
        if by_netlink {
            for set in &self.new_sets {
                batch.add_set(set);
                batch.add_elements(&set.name, &Element::of_set(set, &set.ranges()));
            }
            for chain in &self.new_chains {
                batch.add_chain(&chain.name);
            }
            for chain in &self.new_chains {
                for rule in chain.rules.iter() {
                    batch.add_rule(&chain.name, rule);
                }
            }
        }
        for (set, change) in &self.set_elements {
            let elements = |ranges: &[AddrRange]| Element::of_set(set, ranges);
            batch.delete_elements(&change.name, &elements(&change.removed));
            batch.add_elements(&change.name, &elements(&change.added));
        }
        for chain in &self.rewritten {
            if !entry_only(chain) {
                return None;
            }
            batch.flush_chain(&chain.name);
            for rule in chain.rules.iter() {
                batch.add_rule(&chain.name, rule);
            }
        }
        for change in &self.maps {
            let keys: Vec<Element> = change
                .removed
                .iter()
                .map(|(ip, _)| Element::host(*ip))
                .collect();
            batch.delete_elements(&change.name, &keys);
            let elements: Vec<Element> = change
                .added
                .iter()
                .map(|(ip, c)| Element::jump(*ip, c))
                .collect();
            batch.add_elements(&change.name, &elements);
        }
        for change in &self.exempt {
            let pairs = |p: &[(IpAddr, IpAddr)]| -> Vec<Element> {
                p.iter().map(|(a, b)| Element::pair(*a, *b)).collect()
            };
            batch.delete_elements(&change.name, &pairs(&change.removed));
            batch.add_elements(&change.name, &pairs(&change.added));
        }
        for name in &self.gone_chains {
            batch.flush_chain(name);
        }
        for name in &self.gone_chains {
            batch.delete_chain(name);
        }
        for name in &self.gone_sets {
            batch.delete_set(name);
        }
        let (prepared_sets, prepared_chains): (&[&NamedSet], &[&Chain]) = if by_netlink {
            (&[], &[])
        } else {
            (&self.new_sets, &self.new_chains)
        };
        let mut prepare = String::new();
        let mut unprepare = String::new();
        for set in prepared_sets {
            add_set(&mut prepare, set);
        }
        for chain in prepared_chains {
            let _ = writeln!(prepare, "add chain {TABLE} {}", chain.name);
            let _ = writeln!(unprepare, "flush chain {TABLE} {}", chain.name);
        }
        for chain in prepared_chains {
            let _ = writeln!(prepare, "flush chain {TABLE} {}", chain.name);
            add_rules(&mut prepare, chain);
            let _ = writeln!(unprepare, "delete chain {TABLE} {}", chain.name);
        }
        for set in prepared_sets {
            let _ = writeln!(unprepare, "delete set {TABLE} {}", set.name);
        }
        Some(Split {
            prepare,
            batch,
            unprepare,
        })
    }
}

/// An update as [`Delta::split`] divides it.
pub(crate) struct Split {
    /// `nft -f` script that creates what the batch refers to (may be empty).
    pub prepare: String,
    /// The switch-over: one transaction.
    pub batch: Batch,
    /// `nft -f` script that deletes what `prepare` created, after the batch was refused
    /// (nothing refers to those objects).
    pub unprepare: String,
}
