//! `palisade compile --target nftables`.

use std::io::Write;

use palisade_engine::Engine;

use super::compile::Format;
use crate::error::CliError;

/// Prints the `nft -f` script for the pods of `node` (all pods by default); with
/// [`Format::Linear`], the same decisions as one flat rule list (benchmark baseline).
pub fn run(engine: &Engine, node: Option<&str>, format: Format) -> Result<(), CliError> {
    let ruleset = palisade_nft::compile(engine, node).map_err(|e| match e {
        palisade_nft::NftError::UnknownNode(_) => CliError::Usage(e.to_string()),
        other => CliError::Nft(other),
    })?;
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
