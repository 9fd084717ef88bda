//! `palisade tenancy check|compile`.

use std::io::Write;
use std::path::{Path, PathBuf};

use palisade_tenancy::{Config, DEFAULT_PLATFORM_NAMESPACE, Error, Options, Output, State};

use crate::error::CliError;

/// `tenancy` subcommands.
#[derive(Debug, clap::Subcommand)]
#[command(
    after_help = "Examples:\n  palisade tenancy check -f examples/tenancy/config.yaml examples/tenancy/base.yaml\n  palisade tenancy compile -f examples/tenancy/config.yaml -o yaml > policies.yaml"
)]
pub enum Args {
    /// Validate a tenancy configuration; every error with file, line and field.
    Check(Common),
    /// Compile a tenancy configuration into NetworkPolicies and tool labels.
    Compile {
        #[command(flatten)]
        common: Common,
        /// Output format of the NetworkPolicies.
        #[arg(short = 'o', long = "output", value_enum, default_value = "yaml")]
        output: Format,
        /// State file remembering default-policy attachments (read if present, then updated).
        #[arg(long)]
        state: Option<PathBuf>,
        /// Also write the labels each tool's pods must carry to this file (YAML).
        #[arg(long)]
        labels_out: Option<PathBuf>,
    },
}

/// Options shared by check and compile.
#[derive(Debug, clap::Args)]
pub struct Common {
    /// Configuration files or directories (recursively *.yaml, *.yml, *.json), merged; `-`
    /// for stdin.
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    files: Vec<PathBuf>,
    /// Namespace of the platform API (for the default base policy).
    #[arg(long, default_value = DEFAULT_PLATFORM_NAMESPACE)]
    platform_namespace: String,
    /// Labels of the platform API pods, `key=value` (repeatable; default app=api).
    #[arg(long = "platform-label", value_parser = parse_label)]
    platform_labels: Vec<(String, String)>,
}

/// Output formats.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// Multi-document YAML, tool labels in a leading comment.
    Yaml,
    /// A `v1 List`.
    Json,
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{s:?} is not key=value"))
}

impl Common {
    /// The validated platform options (a usage error when they are invalid).
    fn options(&self) -> Result<Options, CliError> {
        let labels = if self.platform_labels.is_empty() {
            Options::default().platform_labels().clone()
        } else {
            self.platform_labels.iter().cloned().collect()
        };
        Options::new(&self.platform_namespace, labels).map_err(tenancy_error)
    }

    fn config(&self) -> Result<Config, CliError> {
        let sources = palisade_model::read_paths(&self.files)?;
        Config::parse(sources.iter().map(|(n, t)| (n.as_str(), t.as_str()))).map_err(tenancy_error)
    }
}

/// The CLI's view of a tenancy error: invalid input (exit 1) or a bad option (exit 2).
fn tenancy_error(e: Error) -> CliError {
    match e {
        Error::Invalid(diags) => CliError::Invalid(diags),
        e @ Error::Option { .. } => CliError::Usage(e.to_string()),
        e => CliError::Tenancy(e),
    }
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    match args {
        Args::Check(common) => {
            let options = common.options()?;
            let config = common.config()?;
            let out = palisade_tenancy::compile(&config, &options, &State::default());
            print_notices(&out);
            println!(
                "ok: {} groups, {} tools, {} policies, {} base policies -> {} NetworkPolicies",
                config.groups.len(),
                config.tools.len(),
                config.network_policies.len(),
                config.base_network_policies.len(),
                out.network_policies.len()
            );
            Ok(())
        }
        Args::Compile {
            common,
            output,
            state,
            labels_out,
        } => {
            let options = common.options()?;
            let config = common.config()?;
            let previous = match &state {
                Some(p) if p.exists() => read_state(p)?,
                _ => State::default(),
            };
            let out = palisade_tenancy::compile(&config, &options, &previous);
            print_notices(&out);
            let text = match output {
                Format::Yaml => out.to_yaml(),
                Format::Json => out.to_json().map(|j| j + "\n"),
            }
            .map_err(tenancy_error)?;
            std::io::stdout().lock().write_all(text.as_bytes())?;
            if let Some(p) = labels_out {
                write(&p, out.labels_yaml())?;
            }
            if let Some(p) = state {
                write(&p, out.state.render())?;
            }
            Ok(())
        }
    }
}

fn read_state(path: &Path) -> Result<State, CliError> {
    let text = std::fs::read_to_string(path).map_err(CliError::file(path))?;
    State::parse(&text).map_err(|source| CliError::State {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes rendered text to `path`.
fn write(path: &Path, text: Result<String, Error>) -> Result<(), CliError> {
    let text = text.map_err(tenancy_error)?;
    std::fs::write(path, text).map_err(CliError::file(path))
}

fn print_notices(out: &Output) {
    for n in &out.notices {
        eprintln!("{n}");
    }
}
