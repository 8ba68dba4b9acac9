//! The pong side (`--role pong`): takes each ping, checks its first and last
//! value, releases it and answers with the first value.

use crate::endpoint::{END_OF_SIZE, Failure, Services, WARM_UP, check_delivered};
use crate::options::{Options, rows_of};

pub fn run(options: &Options) -> Result<(), Failure> {
    let services = Services::open(options.run_id, options.block, "pong")?;
    // The answer publisher before the ping subscriber: the ping side starts
    // sending once it sees the subscriber, and the answer must then have a
    // way back.
    let answers = services
        .answers
        .publisher_builder()
        .create()
        .map_err(|e| format!("pong side: the answer publisher: {e}"))?;
    let pings = services
        .pings
        .subscriber_builder()
        .create()
        .map_err(|e| format!("pong side: subscribing to the pings: {e}"))?;
    let events = services
        .pong_side_events()
        .map_err(|e| format!("pong side: {e}"))?;
    // The parent's death reaches us as SIGTERM (process.rs), so there is
    // nothing else to watch.
    let mut watch = || Ok(());

    for &size in &options.sizes {
        let rows = rows_of(size);
        let mut next_id: i64 = 0;
        loop {
            let ping = events.wait_for(
                || {
                    pings
                        .receive()
                        .map_err(|e| format!("pong side: receiving a ping: {e}"))
                },
                &mut watch,
            )?;
            let values = ping.payload();
            if values.len() != rows {
                return Err(Failure::Error(format!(
                    "pong side: a ping of {} values where {rows} were due ({size} B)",
                    values.len()
                )));
            }
            let (first, last) = (values[0], values[rows - 1]);
            // A timed ping (ids 0, 1, ... in order) or a marker, both written
            // at both ends.
            let first_ok = if first >= 0 {
                first == next_id
            } else {
                first == WARM_UP || first == END_OF_SIZE
            };
            if !first_ok || last != first + rows as i64 - 1 {
                let what = if first >= 0 {
                    format!("ping {next_id}")
                } else {
                    "a marker".to_string()
                };
                return Err(Failure::Error(format!(
                    "pong side: {what} holds {first}..{last}"
                )));
            }
            drop(ping);
            if first >= 0 {
                next_id += 1;
            }
            let answer = answers
                .loan_uninit()
                .map_err(|e| format!("pong side: loaning an answer: {e}"))?
                .write_payload(first);
            check_delivered(answer.send(), "pong side: answering")?;
            events.notify()?;
            if first == END_OF_SIZE {
                break;
            }
        }
    }
    Ok(())
}
