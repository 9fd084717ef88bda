//! Loading a whole ruleset into a network namespace that has no Palisade table yet, in
//! stages of netlink batches instead of one `nft -f` transaction.
//!
//! Until the base chains exist, the table hooks into nothing, so no packet sees the stages
//! in between: the namespace goes from "no table" (every packet passes) to the whole
//! ruleset at once, as with one transaction. The stages avoid the costs that grow with the
//! size of one transaction: nft's parsing and interval processing of every element and
//! rule (see `batch.rs` and `expr.rs`), and the kernel's walk
//! of the whole open transaction for each rule that refers to a set (the batches are
//! about 1 MB each, and the sets are committed before the rules that use them).

use crate::base::BASE_CHAINS;
use crate::ir::Ruleset;
use crate::kernel::batch::{Batch, Element};
use crate::kernel::error::KernelError;
use crate::kernel::expr::encodable;
use crate::render::{TABLE, add_rules, exempt_sets, verdict_maps};

/// Bytes of netlink messages per batch (the socket buffers are sized to one batch).
const BATCH_BYTES: usize = 1 << 20;

/// Loads `ruleset` where no `inet palisade` table exists (see the module docs); on a
/// failure after the table was created, it is deleted again, so the namespace is left as
/// it was.
pub(crate) fn load_fresh(
    ruleset: &Ruleset,
    nft: impl Fn(&str) -> Result<(), KernelError>,
    send: impl Fn(Batch) -> Result<(), KernelError>,
) -> Result<(), KernelError> {
    // One transaction, refused as a whole where the table exists (which is left alone).
    send(declarations(ruleset))?;
    let stages = || -> Result<(), KernelError> {
        for batch in element_batches(ruleset) {
            send(batch)?;
        }
        let (batches, script) = rules(ruleset);
        for batch in batches {
            send(batch)?;
        }
        if !script.is_empty() {
            nft(&script)?;
        }
        let mut hooks = Batch::new();
        for chain in &BASE_CHAINS {
            hooks.add_base_chain(chain);
        }
        send(hooks)
    };
    stages().inspect_err(|_| {
        let _ = nft(&format!("delete table {TABLE}\n"));
    })
}

/// The table (created: refused when it exists), its sets and maps without elements, and
/// its chains without rules.
fn declarations(rs: &Ruleset) -> Batch {
    let mut batch = Batch::new();
    batch.create_table();
    for (name, v6, _) in verdict_maps(rs) {
        batch.add_verdict_map(name, v6);
    }
    for (name, v6, _) in exempt_sets(rs) {
        batch.add_pair_set(name, v6);
    }
    for set in &rs.sets {
        batch.add_set(set);
    }
    for chain in &rs.chains {
        batch.add_chain(&chain.name);
    }
    batch
}

/// Batches of about [`BATCH_BYTES`] each.
#[derive(Default)]
struct Batches(Vec<Batch>);

impl Batches {
    /// The batch to add to next.
    fn next(&mut self) -> &mut Batch {
        if self.0.last().is_none_or(|b| b.len() > BATCH_BYTES) {
            self.0.push(Batch::new());
        }
        let last = self.0.len() - 1;
        &mut self.0[last]
    }
}

/// The rules of every chain: as netlink batches where every rule of the chain can be
/// encoded (see `expr.rs`), else as an `nft -f` script.
fn rules(rs: &Ruleset) -> (Vec<Batch>, String) {
    let mut batches = Batches::default();
    let mut script = String::new();
    for chain in &rs.chains {
        if chain.rules.iter().all(encodable) {
            for rule in chain.rules.iter() {
                batches.next().add_rule(&chain.name, rule);
            }
        } else {
            add_rules(&mut script, chain);
        }
    }
    (batches.0, script)
}

/// Every element of the ruleset's sets and maps, in batches of about [`BATCH_BYTES`].
fn element_batches(rs: &Ruleset) -> Vec<Batch> {
    let mut batches = Batches::default();
    let mut add = |set: &str, elements: Vec<Element>| {
        for chunk in elements.chunks(4096) {
            batches.next().add_elements(set, chunk);
        }
    };
    for set in &rs.sets {
        add(&set.name, Element::of_set(set, &set.ranges()));
    }
    for (name, v6, entries) in verdict_maps(rs) {
        let elements = entries
            .iter()
            .filter(|(ip, _)| ip.is_ipv6() == v6)
            .map(|(ip, chain)| Element::jump(*ip, chain))
            .collect();
        add(name, elements);
    }
    for (name, v6, pairs) in exempt_sets(rs) {
        let elements = pairs
            .iter()
            .filter(|(a, _)| a.is_ipv6() == v6)
            .map(|(a, b)| Element::pair(*a, *b))
            .collect();
        add(name, elements);
    }
    batches.0
}
