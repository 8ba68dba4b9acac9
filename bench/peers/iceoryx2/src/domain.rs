//! Each run is an iceoryx2 domain of its own: its files in /dev/shm start
//! with `alkaid_iox2_<pid>_` and its node and service records live under
//! `/tmp/alkaid_iox2_<pid>/`, where <pid> is the ping side's.
//!
//! Why: iceoryx2 drops a run's services and nodes with their ports, but keeps
//! one segment per domain for good (a node counter, `<prefix>..._node.<version>
//! .global_mgmt`) and the record directories, because in the shared default
//! domain (`iox2_`, /tmp/iceoryx2) another program may be using them. In a
//! domain of our own nobody else is, so the ping side removes all of it once
//! both sides have dropped their nodes, and removes what runs that were
//! killed (SIGKILL, a crash) left behind when it starts.

use std::path::PathBuf;

use iceoryx2::config::Config;
use iceoryx2::prelude::{FileName, Path, SemanticString};

const NAME_START: &str = "alkaid_iox2_";
const SHM_DIR: &str = "/dev/shm";
const ROOT_DIR: &str = "/tmp";

/// The iceoryx2 configuration of run `run_id`: iceoryx2's built-in defaults
/// (no config file is read, so the figures do not depend on one) in the run's
/// domain.
pub fn config(run_id: u32) -> Result<Config, String> {
    let mut config = Config::default();
    config.global.prefix = FileName::new(format!("{NAME_START}{run_id}_").as_bytes())
        .map_err(|e| format!("iceoryx2 prefix: {e:?}"))?;
    let root = root_dir(run_id);
    let root = Path::new(format!("{}/", root.display()).as_bytes())
        .map_err(|e| format!("iceoryx2 root path: {e:?}"))?;
    config.global.set_root_path(&root);
    Ok(config)
}

fn root_dir(run_id: u32) -> PathBuf {
    PathBuf::from(format!("{ROOT_DIR}/{NAME_START}{run_id}"))
}

/// The pid in a name of ours ("alkaid_iox2_<pid>_..." or "alkaid_iox2_<pid>").
fn run_of(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(NAME_START)?;
    rest.split('_').next()?.parse().ok()
}

fn alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes the files of every run matching `doomed`; says what it removed.
fn remove_runs(doomed: impl Fn(u32) -> bool) -> Vec<String> {
    let mut removed = Vec::new();
    for dir in [SHM_DIR, ROOT_DIR] {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if !run_of(&name).is_some_and(&doomed) {
                continue;
            }
            let path = entry.path();
            let gone = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
            if gone.is_ok() {
                removed.push(path.display().to_string());
            }
        }
    }
    removed
}

/// Removes run `run_id`'s domain. Only once no process of the run holds an
/// iceoryx2 node any more: the pong side has exited, our node is dropped.
pub fn remove(run_id: u32) {
    remove_runs(|run| run == run_id);
}

/// Removes the domains of runs whose ping side is gone (a pid that has been
/// reused since keeps its run's files: they are harmless, and removed later).
pub fn remove_stale() {
    let removed = remove_runs(|run| run != std::process::id() && !alive(run));
    if !removed.is_empty() {
        eprintln!(
            "alkaid_iceoryx2_latency: removed what dead runs left: {}",
            removed.join(" ")
        );
    }
}
