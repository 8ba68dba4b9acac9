//! The ping side: for each size, times publish -> the pong side reads the
//! first and last value and answers -> the answer is here; one-way = RTT / 2.

use std::time::{Duration, Instant};

use iceoryx2::port::publisher::Publisher;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::prelude::*;

use crate::endpoint::{END_OF_SIZE, Events, Failure, Services, WARM_UP, check_delivered};
use crate::options::{Options, rows_of};
use crate::summary::{Measurement, summarize};

type PingPublisher = Publisher<ipc::Service, [i64], ()>;
type AnswerSubscriber = Subscriber<ipc::Service, i64, ()>;

/// The ping side's ports and the check that the pong side still lives.
pub struct PingSide<'a> {
    services: &'a Services,
    answers: AnswerSubscriber,
    events: Events,
    watch: &'a mut dyn FnMut() -> Result<(), Failure>,
}

impl<'a> PingSide<'a> {
    pub fn new(
        services: &'a Services,
        watch: &'a mut dyn FnMut() -> Result<(), Failure>,
    ) -> Result<Self, String> {
        let answers = services
            .answers
            .subscriber_builder()
            .create()
            .map_err(|e| format!("ping side: subscribing to the answers: {e}"))?;
        let events = services
            .ping_side_events()
            .map_err(|e| format!("ping side: {e}"))?;
        Ok(PingSide {
            services,
            answers,
            events,
            watch,
        })
    }

    /// Measures one size: `options.count` timed pings, or fewer when
    /// `options.duration` runs out.
    pub fn measure(&mut self, options: &Options, size: i64) -> Result<Measurement, Failure> {
        let rows = rows_of(size);
        // A publisher per size, its data segment sized for this payload, as
        // an application sending one kind of message would make it. Two
        // loans at once: the timed ping waits while the warm-up goes.
        let publisher = self
            .services
            .pings
            .publisher_builder()
            .initial_max_slice_len(rows)
            .max_loaned_samples(2)
            .create()
            .map_err(|e| format!("ping side: the publisher for {size} B: {e}"))?;
        self.wait_subscribed()?;

        self.send_ends(&publisher, rows, WARM_UP)?;
        self.await_answer(WARM_UP)?;
        let limit = Duration::from_secs_f64(options.duration);
        let mut samples: Vec<i64> = Vec::with_capacity(options.count as usize);
        let start = Instant::now();
        for i in 0..options.count {
            if options.duration > 0.0 && start.elapsed() > limit {
                break;
            }
            let ping = publisher
                .loan_slice_uninit(rows)
                .map_err(|e| format!("ping side: loaning {size} B: {e}"))?
                .write_from_fn(|r| i + r as i64);
            // Both paths back into the caches, untimed, as alkaid latency
            // does by default.
            self.send_ends(&publisher, rows, WARM_UP)?;
            self.await_answer(WARM_UP)?;
            let t0 = Instant::now();
            check_delivered(ping.send(), "ping side: sending a ping")?;
            self.events.notify()?;
            self.await_answer(i)?;
            samples.push((t0.elapsed().as_nanos() / 2) as i64);
        }
        let elapsed = start.elapsed();
        self.send_ends(&publisher, rows, END_OF_SIZE)?;
        self.await_answer(END_OF_SIZE)?;

        let summary = summarize(&mut samples);
        let msgs_per_s = if elapsed.is_zero() {
            0.0
        } else {
            summary.samples as f64 / elapsed.as_secs_f64()
        };
        Ok(Measurement {
            payload_bytes: size,
            summary,
            msgs_per_s,
        })
    }

    /// Waits until the pong side subscribes to the pings (it makes its answer
    /// publisher first, so that exists by then too); a send before that
    /// would reach nobody.
    fn wait_subscribed(&mut self) -> Result<(), Failure> {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.services.pings.dynamic_config().number_of_subscribers() == 0 {
            if crate::process::interrupted() {
                return Err(Failure::Interrupted);
            }
            (self.watch)()?;
            if Instant::now() > deadline {
                return Err(Failure::Error(
                    "ping side: the pong side did not subscribe within 20 s".to_string(),
                ));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Sends a ping of `rows` values of which only the first (`first`) and the
    /// last (`first + rows - 1`) are written: what the pong side checks.
    fn send_ends(
        &mut self,
        publisher: &PingPublisher,
        rows: usize,
        first: i64,
    ) -> Result<(), Failure> {
        let mut sample = publisher
            .loan_slice_uninit(rows)
            .map_err(|e| format!("ping side: loaning {} values: {e}", rows))?;
        let values = sample.payload_mut();
        values[0].write(first);
        values[rows - 1].write(first + rows as i64 - 1);
        // SAFETY: the loan is shared memory from mmap, whose every byte holds
        // a defined value (zero pages or an earlier sample's), and any bit
        // pattern is a valid i64; the untouched middle is never read.
        let sample = unsafe { sample.assume_init() };
        check_delivered(sample.send(), "ping side: sending")?;
        self.events.notify()?;
        Ok(())
    }

    /// Takes answers until the one carrying `expected` (earlier ones cannot
    /// exist: every ping is answered before the next is sent).
    fn await_answer(&mut self, expected: i64) -> Result<(), Failure> {
        let answers = &self.answers;
        let got = self.events.wait_for(
            || {
                answers
                    .receive()
                    .map(|sample| sample.map(|s| *s.payload()))
                    .map_err(|e| format!("ping side: receiving an answer: {e}"))
            },
            self.watch,
        )?;
        if got != expected {
            return Err(Failure::Error(format!(
                "ping side: answer {got} where {expected} was due"
            )));
        }
        Ok(())
    }
}
