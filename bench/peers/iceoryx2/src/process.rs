//! What the two processes need from the OS: the interrupt flag, CPU pinning
//! and the pong process's life tied to the ping process's.

use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};

/// The signal that asked us to stop, 0 while none has.
static INTERRUPT: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_interrupt(signal: libc::c_int) {
    // Relaxed: the flag carries no data; the loops only need to see it soon.
    INTERRUPT.store(signal, Ordering::Relaxed);
}

/// SIGINT and SIGTERM set a flag that every wait loop polls, so that both
/// sides leave their loops and drop their iceoryx2 ports and nodes, which
/// removes the files in /dev/shm and /tmp/iceoryx2 (iceoryx2's own handler is
/// disabled: see endpoint.rs).
pub fn install_interrupt_handler() {
    // SAFETY: a zeroed sigaction is valid; the handler only stores an atomic,
    // which is async-signal-safe.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_interrupt as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut());
        libc::sigaction(libc::SIGTERM, &action, std::ptr::null_mut());
    }
}

pub fn interrupted() -> bool {
    INTERRUPT.load(Ordering::Relaxed) != 0
}

/// Ends the process by the signal that interrupted it, once everything is
/// cleaned up: a shell running us then sees a death by SIGINT and stops its
/// script too, where an exit status of 130 would let it go on. Exits with
/// 130 if that does not happen.
pub fn die_by_interrupt() -> ! {
    let signal = INTERRUPT.load(Ordering::Relaxed);
    if signal != 0 {
        // SAFETY: restoring the default action and raising a signal.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
    std::process::exit(130)
}

/// Pins the calling process to `cpu`; a failure only costs steadiness, so it
/// is reported and ignored.
pub fn pin(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; sched_setaffinity reads `set`.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc != 0 {
        eprintln!(
            "alkaid_iceoryx2_latency: pinning to CPU {cpu}: {}",
            std::io::Error::last_os_error()
        );
    }
}

/// CPUs online, whatever our affinity: the pong side inherits the ping
/// side's pinning to CPU 0, so available_parallelism() would say 1 there.
pub fn cpus_online() -> usize {
    // SAFETY: sysconf only reads its argument.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1)
}

/// Starts this binary again with `args` (the pong side). Its stdout is
/// discarded so that `--json -` stays clean; its stderr is ours. It gets
/// SIGTERM when we die, so that it never spins on alone.
pub fn spawn_self(args: &[String]) -> Result<Child, String> {
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().map_err(|e| format!("finding our own binary: {e}"))?;
    let parent = std::process::id() as libc::pid_t;
    let mut command = Command::new(&exe);
    command
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    // SAFETY: the closure runs between fork and exec and makes only
    // async-signal-safe calls (prctl, getppid).
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died before prctl took effect.
            if libc::getppid() != parent {
                return Err(std::io::Error::other("the ping side exited"));
            }
            Ok(())
        });
    }
    command
        .spawn()
        .map_err(|e| format!("starting {} --role pong: {e}", exe.display()))
}

/// Asks the pong side to leave (SIGTERM, which it handles like SIGINT and so
/// cleans up) and reaps it.
pub fn stop_child(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        // SAFETY: kill with a pid we spawned and have not reaped yet.
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    }
    let _ = child.wait();
}
