//! `palisade tenancy check|compile`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use palisade_tenancy::{Config, Options, Output, State};

use crate::error::CliError;

/// `tenancy` subcommands.
#[derive(Debug, clap::Subcommand)]
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
    /// Configuration files (merged), or `-` for stdin.
    #[arg(short = 'f', long = "filename", required = true, num_args = 1..)]
    files: Vec<PathBuf>,
    /// Namespace of the platform API (for the default base policy).
    #[arg(long, default_value = "thorium")]
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
    fn options(&self) -> Options {
        let mut o = Options {
            platform_namespace: self.platform_namespace.clone(),
            ..Options::default()
        };
        if !self.platform_labels.is_empty() {
            o.platform_labels = self.platform_labels.iter().cloned().collect();
        }
        o
    }

    fn config(&self) -> Result<Config, CliError> {
        let mut texts = Vec::new();
        for f in &self.files {
            let text = if f.as_os_str() == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                std::fs::read_to_string(f)
                    .map_err(|e| CliError::Failed(format!("{}: {e}", f.display())))?
            };
            texts.push((f.display().to_string(), text));
        }
        Config::parse(texts.iter().map(|(n, t)| (n.as_str(), t.as_str())))
            .map_err(CliError::Invalid)
    }
}

/// Runs the subcommand.
pub fn run(args: Args) -> Result<(), CliError> {
    match args {
        Args::Check(common) => {
            let config = common.config()?;
            let out = palisade_tenancy::compile(&config, &common.options(), &State::default())
                .map_err(CliError::Invalid)?;
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
            let config = common.config()?;
            let previous = match &state {
                Some(p) if p.exists() => {
                    let text = std::fs::read_to_string(p)
                        .map_err(|e| CliError::Failed(format!("{}: {e}", p.display())))?;
                    State::parse(&text)
                        .map_err(|e| CliError::Failed(format!("{}: {e}", p.display())))?
                }
                _ => State::default(),
            };
            let out = palisade_tenancy::compile(&config, &common.options(), &previous)
                .map_err(CliError::Invalid)?;
            print_notices(&out);
            let mut stdout = std::io::stdout().lock();
            match output {
                Format::Yaml => stdout.write_all(render_yaml(&out).as_bytes())?,
                Format::Json => {
                    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": out.network_policies});
                    writeln!(
                        stdout,
                        "{}",
                        serde_json::to_string_pretty(&list).unwrap_or_default()
                    )?;
                }
            }
            if let Some(p) = labels_out {
                let labels = serde_json::to_value(&out.tool_labels).unwrap_or_default();
                std::fs::write(&p, palisade_model::yaml::to_yaml(&labels))
                    .map_err(|e| CliError::Failed(format!("{}: {e}", p.display())))?;
            }
            if let Some(p) = state {
                std::fs::write(&p, out.state.render())
                    .map_err(|e| CliError::Failed(format!("{}: {e}", p.display())))?;
            }
            Ok(())
        }
    }
}

fn print_notices(out: &Output) {
    for n in &out.notices {
        eprintln!("{n}");
    }
}

/// The NetworkPolicies as YAML documents, preceded by the tool labels as comments.
fn render_yaml(out: &Output) -> String {
    let mut text = String::from("# Labels each tool's pods must carry (group/tool):\n");
    for (tool, labels) in &out.tool_labels {
        let l: BTreeMap<&String, &String> = labels.iter().collect();
        let pairs: Vec<String> = l.iter().map(|(k, v)| format!("{k}={v}")).collect();
        text += &format!("#   {tool}: {}\n", pairs.join(","));
    }
    for np in &out.network_policies {
        let mut value = serde_json::to_value(np).unwrap_or_default();
        if let serde_json::Value::Object(m) = &mut value {
            // apiVersion and kind first, as kubectl writes them
            let mut ordered = serde_json::Map::new();
            for k in ["apiVersion", "kind", "metadata", "spec"] {
                if let Some(v) = m.remove(k) {
                    ordered.insert(k.to_string(), v);
                }
            }
            ordered.extend(std::mem::take(m));
            value = serde_json::Value::Object(ordered);
        }
        text += "---\n";
        text += &palisade_model::yaml::to_yaml(&value);
    }
    text
}
