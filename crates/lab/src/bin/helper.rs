//! `palisade-lab-helper lab <helper> ...`: the lab's in-namespace processes (responder,
//! prober, held connection) without the `palisade` command line, for the kernel tests.

use std::process::ExitCode;

fn main() -> ExitCode {
    palisade_lab::run_if_helper(std::env::args_os()).unwrap_or_else(|| {
        eprintln!(
            "usage: palisade-lab-helper lab serve|probe-batch|hold|connect-bench|lookup ARGS..."
        );
        ExitCode::from(2)
    })
}
