//! The iceoryx2 services of one run and the waiting both sides share.
//!
//! Per run (named after the ping side's pid): a publish-subscribe service of
//! int64 slices for the pings ("ping"), one of single int64 values for the
//! answers ("pong"), and in block mode an event service beside each, whose
//! notifier the sender signals after each send and whose listener the
//! receiver sleeps on. iceoryx2 publish-subscribe has no wake-up of its own,
//! so the event is the price of sleeping, and it is timed.

use core::time::Duration;

use iceoryx2::port::listener::Listener;
use iceoryx2::port::notifier::Notifier;
use iceoryx2::prelude::*;
use iceoryx2::service::port_factory::{event, publish_subscribe};

use crate::process;

/// First value of an untimed warm-up ping (its last is WARM_UP + rows - 1).
pub const WARM_UP: i64 = -2;
/// First value of the ping that ends a size; answered like the others, after
/// which the pong side moves on to the next size.
pub const END_OF_SIZE: i64 = -3;

pub type Pings = publish_subscribe::PortFactory<ipc::Service, [i64], ()>;
pub type Answers = publish_subscribe::PortFactory<ipc::Service, i64, ()>;

/// Why a side stops early.
pub enum Failure {
    /// SIGINT or SIGTERM.
    Interrupted,
    Error(String),
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::Error(message)
    }
}

pub struct Services {
    pub pings: Pings,
    pub answers: Answers,
    ping_events: Option<event::PortFactory<ipc::Service>>,
    answer_events: Option<event::PortFactory<ipc::Service>>,
    // Held, never read: the node is this process's registration with
    // iceoryx2, removed when it drops. Fields drop in declaration order, so
    // the services go before it.
    _node: Node<ipc::Service>,
}

impl Services {
    /// Opens (or, whichever side comes first, creates) the run's services.
    pub fn open(run_id: u32, block: bool, side: &str) -> Result<Self, String> {
        let node = NodeBuilder::new()
            .config(&crate::domain::config(run_id)?)
            .name(&NodeName::new(&format!("alkaid-{side}")).map_err(|e| format!("node name: {e}"))?)
            // Our own handler sets the flag the wait loops poll (process.rs);
            // iceoryx2's would only be seen by node.wait(), which we never call.
            .signal_handling_mode(SignalHandlingMode::Disabled)
            .create::<ipc::Service>()
            .map_err(|e| format!("{side} side: creating the iceoryx2 node: {e}"))?;
        let name = |what: &str| {
            ServiceName::new(&format!("alkaid/latency/{run_id}/{what}"))
                .map_err(|e| format!("service name {what}: {e}"))
        };
        // Both sides ask for the same settings, so either may create. One
        // subscriber, no history and little buffering: the publisher's data
        // segment holds subscribers * (buffer + borrowed) + loaned samples
        // of the largest payload, 5 x 16 MiB at the top size.
        let pings = node
            .service_builder(&name("ping")?)
            .publish_subscribe::<[i64]>()
            .max_publishers(2)
            .max_subscribers(1)
            .history_size(0)
            .subscriber_max_buffer_size(2)
            .subscriber_max_borrowed_samples(1)
            .open_or_create()
            .map_err(|e| format!("{side} side: the ping service: {e}"))?;
        let answers = node
            .service_builder(&name("pong")?)
            .publish_subscribe::<i64>()
            .max_publishers(1)
            .max_subscribers(1)
            .history_size(0)
            .subscriber_max_buffer_size(2)
            .subscriber_max_borrowed_samples(1)
            .open_or_create()
            .map_err(|e| format!("{side} side: the pong service: {e}"))?;
        let event = |what: &str| -> Result<_, String> {
            node.service_builder(&name(what)?)
                .event()
                .open_or_create()
                .map_err(|e| format!("{side} side: the {what} event service: {e}"))
        };
        let (ping_events, answer_events) = if block {
            (Some(event("ping-event")?), Some(event("pong-event")?))
        } else {
            (None, None)
        };
        Ok(Services {
            pings,
            answers,
            ping_events,
            answer_events,
            _node: node,
        })
    }

    /// The ping side's wake-ups: it signals pings and sleeps on answers.
    pub fn ping_side_events(&self) -> Result<Events, String> {
        Events::new(self.ping_events.as_ref(), self.answer_events.as_ref())
    }

    /// The pong side's: it signals answers and sleeps on pings.
    pub fn pong_side_events(&self) -> Result<Events, String> {
        Events::new(self.answer_events.as_ref(), self.ping_events.as_ref())
    }
}

/// In block mode, the notifier that follows each send and the listener a
/// receiver sleeps on; in spin mode, nothing.
pub struct Events {
    notifier: Option<Notifier<ipc::Service>>,
    listener: Option<Listener<ipc::Service>>,
}

impl Events {
    fn new(
        out: Option<&event::PortFactory<ipc::Service>>,
        in_: Option<&event::PortFactory<ipc::Service>>,
    ) -> Result<Self, String> {
        let notifier = out
            .map(|s| s.notifier_builder().create())
            .transpose()
            .map_err(|e| format!("creating the notifier: {e}"))?;
        let listener = in_
            .map(|s| s.listener_builder().create())
            .transpose()
            .map_err(|e| format!("creating the listener: {e}"))?;
        Ok(Events { notifier, listener })
    }

    /// Wakes the other side after a send.
    pub fn notify(&self) -> Result<(), String> {
        if let Some(notifier) = &self.notifier {
            notifier.notify().map_err(|e| format!("notify: {e}"))?;
        }
        Ok(())
    }

    /// Polls `receive` until it yields, busy (spin) or sleeping on the
    /// listener between polls (block). `watch` runs now and then while
    /// nothing comes (after each idle sleep; every 2^18 empty polls when
    /// spinning, rarely enough to stay off the timed path) to notice a dead
    /// peer.
    pub fn wait_for<T>(
        &self,
        mut receive: impl FnMut() -> Result<Option<T>, String>,
        watch: &mut dyn FnMut() -> Result<(), Failure>,
    ) -> Result<T, Failure> {
        let mut empty_polls: u32 = 0;
        loop {
            if let Some(value) = receive()? {
                return Ok(value);
            }
            if process::interrupted() {
                return Err(Failure::Interrupted);
            }
            match &self.listener {
                Some(listener) => {
                    // Events are latched, so one sent between the empty
                    // receive and this wait returns at once. The timeout
                    // only bounds how late an interrupt is seen.
                    let woken = listener
                        .timed_wait(|_| {}, Duration::from_millis(50))
                        .map_err(|e| format!("listener wait: {e}"))?;
                    if woken == 0 {
                        watch()?;
                    }
                }
                None => {
                    empty_polls = empty_polls.wrapping_add(1);
                    if empty_polls.is_multiple_of(1 << 18) {
                        watch()?;
                    }
                }
            }
        }
    }
}

/// A send that reached no subscriber is lost, and the round trip would never
/// end: make it an error.
pub fn check_delivered(
    sent: Result<usize, impl std::fmt::Display>,
    what: &str,
) -> Result<(), String> {
    match sent {
        Ok(0) => Err(format!("{what}: no subscriber received it")),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("{what}: {e}")),
    }
}
