//! The ping-pong of `alkaid latency` over iceoryx2 (the Rust crate), so that
//! its figures compare with Alkaid's and with the iceoryx 2.0 peer's
//! (bench/peers/iceoryx_latency.cc, whose command line and JSON this
//! mirrors): the ping process loans a payload of the size and fills it with
//! int64 values i, i+1, ... (not timed), then times publish -> the pong
//! process takes it, reads its first and last value, answers with one int64
//! -> the ping process holds the answer; one-way = round trip / 2. Before
//! each timed ping an untimed round trip of the same size (first and last
//! value written and read) brings both paths back into the caches.
//!
//! Waiting: spin (busy-poll receive()) or block (an iceoryx2 event per send,
//! the receiver asleep on its listener). The pong process is this binary
//! started again with `--role pong`; the two are pinned to CPUs 0 and 1.
//! iceoryx2 needs no daemon; each run is an iceoryx2 domain of its own,
//! removed at the end (domain.rs). Output: a table, and with --json the shape of
//! `alkaid latency --json` (transport "iceoryx2").

mod domain;
mod endpoint;
mod options;
mod ping;
mod pong;
mod process;
mod summary;

use std::io::Write;
use std::process::ExitCode;

use iceoryx2::prelude::{LogLevel, set_log_level};

use endpoint::{Failure, Services};
use options::{Options, Parsed, Role};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match options::parse(&args) {
        Ok(Parsed::Run(o)) => o,
        Ok(Parsed::Help) => {
            println!("{}", options::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("alkaid_iceoryx2_latency: {message}\n{}", options::USAGE);
            return ExitCode::from(2);
        }
    };
    process::install_interrupt_handler();
    // iceoryx2 logs at info level by default; only its errors belong beside
    // ours.
    set_log_level(LogLevel::Error);
    let pin = options.pin && process::cpus_online() >= 2;

    let result = match options.role {
        Role::Pong => {
            if pin {
                process::pin(1);
            }
            pong::run(&options)
        }
        Role::Ping => {
            if pin {
                process::pin(0);
            }
            domain::remove_stale();
            let result = run_ping(&options, pin);
            // Both nodes are gone by now (the pong side has exited, ours is
            // dropped), so the run's domain can go, after an error or an
            // interrupt as well.
            domain::remove(options.run_id);
            result
        }
    };
    // An interrupt ends the other side too, and its leaving can surface here
    // as some other error first (a send that reaches nobody, a wait cut
    // short): the interrupt is the cause.
    let result = match result {
        Err(Failure::Error(_)) if process::interrupted() => Err(Failure::Interrupted),
        other => other,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Interrupted) => {
            if options.role == Role::Ping {
                eprintln!("alkaid_iceoryx2_latency: interrupted");
            }
            // Every iceoryx2 resource is gone by now (dropped on the way
            // out, the domain removed).
            process::die_by_interrupt()
        }
        Err(Failure::Error(message)) => {
            eprintln!("alkaid_iceoryx2_latency: {message}");
            ExitCode::from(1)
        }
    }
}

/// Starts the pong side, measures every size, reports, and leaves no process
/// behind whatever happens; drops every iceoryx2 resource of ours on return.
fn run_ping(options: &Options, pin: bool) -> Result<(), Failure> {
    // The services exist before the pong side starts, so its open_or_create
    // opens them rather than racing us to create them.
    let services = Services::open(options.run_id, options.block, "ping")?;
    let mut child = process::spawn_self(&options::pong_args(options))?;
    let result = {
        let mut watch = || -> Result<(), Failure> {
            match child.try_wait() {
                Ok(None) => Ok(()),
                Ok(Some(status)) => Err(Failure::Error(format!("the pong side exited ({status})"))),
                Err(e) => Err(Failure::Error(format!("watching the pong side: {e}"))),
            }
        };
        measure_all(options, &services, &mut watch, pin)
    };
    match &result {
        // The pong side leaves by itself after the last size's end marker.
        Ok(()) => match child.wait() {
            Ok(status) if status.success() => {}
            Ok(status) => return Err(Failure::Error(format!("the pong side exited ({status})"))),
            Err(e) => return Err(Failure::Error(format!("waiting for the pong side: {e}"))),
        },
        Err(_) => process::stop_child(&mut child),
    }
    result
}

fn measure_all(
    options: &Options,
    services: &Services,
    watch: &mut dyn FnMut() -> Result<(), Failure>,
    pin: bool,
) -> Result<(), Failure> {
    let mut side = ping::PingSide::new(services, watch)?;
    // The table goes to stdout unless the JSON does, as in alkaid latency.
    let to_stderr = options.json.as_deref() == Some("-");
    let table = |line: &str| {
        if to_stderr {
            eprintln!("{line}");
        } else {
            println!("{line}");
            let _ = std::io::stdout().flush();
        }
    };
    table(&summary::table_header(options.block));
    let mut results = Vec::new();
    for &size in &options.sizes {
        let m = side.measure(options, size).map_err(|f| match f {
            Failure::Error(message) => Failure::Error(format!("{size} B: {message}")),
            other => other,
        })?;
        table(&summary::table_row(&m));
        results.push(m);
    }
    if let Some(path) = &options.json {
        let pinned: &[usize] = if pin { &[0, 1] } else { &[] };
        let text = summary::to_json(&results, options.block, pinned);
        if path == "-" {
            print!("{text}");
        } else {
            std::fs::write(path, text).map_err(|e| format!("writing {path}: {e}"))?;
        }
    }
    Ok(())
}
