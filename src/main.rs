//! `raftmq`: the one binary. Parses the command line, loads configuration, wires the crates.
//!
//! Subcommands mirror RocketMQ's tools: `raftmq namesrv` ≙ `mqnamesrv`, `raftmq admin` ≙ `mqadmin`,
//! `raftmq bench` ≙ the `benchmark/` scripts, `send`/`consume` for quick checks. No decision lives here:
//! each subcommand hands a validated config to its crate and waits for it to finish or for a
//! shutdown signal (SIGINT/SIGTERM; a second signal exits at once).

mod admin;
mod bench;
mod bench_e2e;
mod bench_grpc;
mod bench_pop;
mod bench_run;
mod cli;
mod cluster_secret_file;
mod console;
mod consume;
mod dev;
mod dev_certs;
mod healthcheck;
mod logging;
mod namesrv_addr;
mod send;
mod signal;
mod table;

use anyhow::Result;
use clap::Parser;

// glibc's malloc took ~15 % of the broker's CPU under send load (frees crossing threads, arena
// consolidation); mimalloc's thread-local free lists avoid both. Measured in BENCHMARKS.md#experiments (E2).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> Result<()> {
    let cli = cli::Cli::parse();
    logging::init(cli.log_json, cli.command.quietness(), cli.verbose);
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = cli.command.runtime_worker_threads()
        && std::env::var_os("TOKIO_WORKER_THREADS").is_none()
    {
        builder.worker_threads(n);
    }
    let runtime = builder.enable_all().build()?;
    runtime.block_on(cli::run(cli))
}
