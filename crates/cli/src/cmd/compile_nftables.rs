//! `palisade compile --target nftables`.

use std::io::Write;
use std::time::Instant;

use palisade_engine::Engine;
use palisade_nft::Ruleset;

use super::compile::Format;
use crate::error::CliError;

/// Prints the `nft -f` script for the pods of `node` (all pods by default); with
/// [`Format::Linear`], the same decisions as one flat rule list (benchmark baseline).
pub fn run(engine: &Engine, node: Option<&str>, format: Format) -> Result<(), CliError> {
    let ruleset = ruleset(engine, node)?;
    let text = match format {
        Format::Linear => ruleset.render_linear(),
        _ => ruleset.render(),
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    if !ruleset.logs.is_empty() {
        writeln!(
            out,
            "# log prefixes (nflog group {}):",
            palisade_nft::LOG_GROUP
        )?;
        for (prefix, name) in ruleset.log_prefixes() {
            // descriptions are comments: they never become nft syntax
            writeln!(out, "#   {prefix}: {}", name.to_string().replace('\n', " "))?;
        }
    }
    // As the engine (see `compile::run`): the process ends with this command.
    std::mem::forget((ruleset, text));
    Ok(())
}

/// Prints the size of the ruleset for the pods of `node` (all pods by default).
pub fn stats(engine: &Engine, node: Option<&str>) -> Result<(), CliError> {
    let ruleset = ruleset(engine, node)?;
    write!(std::io::stdout().lock(), "{}", ruleset.stats())?;
    Ok(())
}

/// The ruleset for the pods of `node` (all pods by default); an unknown node is a usage
/// error.
pub fn ruleset(engine: &Engine, node: Option<&str>) -> Result<Ruleset, CliError> {
    palisade_nft::compile(engine, node).map_err(|e| match e {
        palisade_nft::CompileError::UnknownNode(_) => CliError::Usage(e.to_string()),
    })
}

/// Loads the ruleset for the pods of `node` into this network namespace (see
/// [`palisade_nft::apply`]), deletes the tracked connections it forbids, and says so.
pub fn apply(engine: &Engine, node: Option<&str>) -> Result<(), CliError> {
    let ruleset = ruleset(engine, node)?;
    let start = Instant::now();
    palisade_nft::apply(&ruleset, None)?;
    let loaded = start.elapsed();
    let cut = palisade_nft::cut_forbidden(&ruleset, None)?;
    let counts = ruleset.counts();
    writeln!(
        std::io::stdout().lock(),
        "table {} loaded in {} ms: {} chains, {} rules, {} set elements, {} pod addresses; \
         {cut} tracked connections it forbids deleted",
        palisade_nft::TABLE,
        loaded.as_millis(),
        counts.chains,
        counts.rules,
        counts.set_elements,
        ruleset.egress.len(),
    )?;
    std::mem::forget(ruleset);
    Ok(())
}
