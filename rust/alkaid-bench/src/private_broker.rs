//! A private `alkaid-broker` for one bench run: started on a socket of its
//! own, waited for until it answers, stopped (SIGTERM) when dropped.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

/// A broker this process started.
pub struct PrivateBroker {
    child: Child,
    /// Its control socket, `alkaid-<tag><pid>.sock` in the temporary
    /// directory (the stem of the bench's other temporary files).
    pub socket: PathBuf,
}

impl PrivateBroker {
    /// Starts `binary` as broker `<tag><pid>` and waits up to `wait` for
    /// it to list topics; panics, naming the binary, if it cannot.
    pub fn start(binary: &Path, tag: &str, wait: Duration) -> PrivateBroker {
        let name = format!("{tag}{}", std::process::id());
        let socket = std::env::temp_dir().join(format!("alkaid-{name}.sock"));
        let child = Command::new(binary)
            .args([
                "--socket",
                socket.to_str().unwrap(),
                "--name",
                &name,
                "--log-level",
                "warn",
            ])
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let mut broker = PrivateBroker { child, socket };
        let until = Instant::now() + wait;
        while alkaid::Broker::connect(Some(&broker.socket))
            .and_then(|mut b| b.list_topics())
            .is_err()
        {
            if Instant::now() >= until {
                broker.stop();
                panic!(
                    "the broker {} did not answer within {wait:?}",
                    binary.display()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        broker
    }

    fn stop(&mut self) {
        // SAFETY: kill(2) of our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl Drop for PrivateBroker {
    fn drop(&mut self) {
        self.stop();
    }
}
