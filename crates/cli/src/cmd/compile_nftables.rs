//! `palisade compile --target nftables`.

use std::io::Write;

use crate::error::CliError;

/// Prints the `nft -f` script for the pods of `--node` (all pods by default); with
/// `-o linear`, the same decisions as one flat rule list (benchmark baseline).
pub fn run(args: &super::compile::Args) -> Result<(), CliError> {
    let engine = args.input.engine()?;
    let ruleset = palisade_nft::compile(&engine, args.node.as_deref())
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let text = match args.output.as_deref() {
        None | Some("nft") => ruleset.render(),
        Some("linear") => ruleset.render_linear(),
        Some(other) => {
            return Err(CliError::Usage(format!(
                "-o {other}: the nftables target writes nft or linear"
            )));
        }
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    if !ruleset.log_names.is_empty() {
        writeln!(
            out,
            "# log prefixes (nflog group {}):",
            palisade_nft::LOG_GROUP
        )?;
        for (prefix, name) in ruleset.log_prefix_names() {
            // descriptions are comments: they never become nft syntax
            writeln!(out, "#   {prefix}: {}", name.replace('\n', " "))?;
        }
    }
    Ok(())
}
