//! `palisade matrix --services`: source pods against Service ports.

use palisade_analysis::Analysis;
use palisade_engine::{Engine, PodId};
use palisade_model::ServicePort;

use super::{Args, Format};
use crate::error::CliError;
use crate::report::ports::PortArg;
use crate::report::service_view::{self, ServiceView};
use crate::report::table::MAX_ENDPOINTS;
use crate::report::{html, service_summary};

/// Whether `--ports` and `--protocols` pick the Service port `p` (a Service without ports,
/// `None`, only when neither is given).
fn picked(
    p: Option<&ServicePort>,
    ports: &[PortArg],
    protocols: &[palisade_model::Protocol],
) -> bool {
    let Some(p) = p else {
        return ports.is_empty() && protocols.is_empty();
    };
    let by_port = ports.is_empty()
        || ports.iter().any(|a| match a {
            PortArg::Number(n) => p.port == *n,
            PortArg::Range(r) => r.start <= p.port && p.port <= r.end,
            PortArg::Named(name) => p.name.as_deref() == Some(name.as_str()),
        });
    by_port && (protocols.is_empty() || protocols.contains(&p.protocol))
}

/// Evaluates every source (`order`, the pod matrix's rows) against every Service port the
/// focus picks, and prints it.
pub(super) fn run(args: &Args, engine: &Engine, order: &[PodId]) -> Result<(), CliError> {
    let analysis = Analysis::new(engine);
    let cluster = engine.cluster();
    if cluster.services.is_empty() {
        return Err(CliError::Empty(
            "--services: the input has no Service (kind: Service, apiVersion: v1)".into(),
        ));
    }
    let pods: Vec<(&str, &str)> = order
        .iter()
        .map(|&p| {
            (
                cluster.pods[p].namespace.as_str(),
                cluster.pods[p].name.as_str(),
            )
        })
        .collect();
    let services: Vec<(&str, &str)> = cluster
        .services
        .iter()
        .map(|s| (s.namespace.as_str(), s.name.as_str()))
        .collect();
    let (rows, svc_idx) = args.focus.select_services(&pods, &services)?;
    let sources: Vec<PodId> = rows.iter().map(|&r| order[r]).collect();
    let matrix = analysis.service_matrix(&sources, &svc_idx);
    let cols: Vec<usize> = (0..matrix.columns.len())
        .filter(|&c| {
            picked(
                matrix.columns[c].port.as_ref(),
                &args.ports,
                &args.protocols,
            )
        })
        .collect();
    if cols.is_empty() {
        return Err(CliError::Usage(
            "--ports/--protocols pick no port of the Services shown".into(),
        ));
    }
    let names: Vec<String> = sources.iter().map(|&p| cluster.pods[p].key()).collect();
    let v = ServiceView {
        engine,
        matrix: &matrix,
        names,
        cols,
    };
    if args.output == Format::Table
        && !args.force
        && (v.names.len() > MAX_ENDPOINTS || v.cols.len() > MAX_ENDPOINTS)
    {
        return Err(CliError::Usage(format!(
            "{} sources x {} Service ports is too wide to read as a table (more than {MAX_ENDPOINTS}); use -o summary or -o html, focus with --from/--to/--namespace, or add --force",
            v.names.len(),
            v.cols.len()
        )));
    }
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::with_capacity(1 << 16, stdout.lock());
    match args.output {
        Format::Table => service_view::table(&mut anstream::AutoStream::auto(stdout.lock()), &v)?,
        Format::Json => service_view::json(&mut out, &v)?,
        Format::Jsonl => service_view::jsonl(&mut out, &v)?,
        Format::Csv => service_view::csv(&mut out, &v)?,
        Format::Md => service_view::md(&mut out, &v)?,
        Format::Summary => service_summary::summary(&mut out, &v, &analysis.matrix(&[]))?,
        Format::Dot => service_summary::dot(&mut out, &v, &analysis.matrix(&[]))?,
        Format::Html => html::services(&mut out, &v)?,
    }
    Ok(())
}
