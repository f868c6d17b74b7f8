//! The process's own limits, raised for tests and benchmarks that open many sockets.

use rustix::process::{Resource, getrlimit, setrlimit};

/// Raises the soft limit on open files to the hard one (a default soft limit of 1024 is below
/// what a burst of connections needs); the limit now in force.
pub fn raise_open_files() -> u64 {
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    let _ = setrlimit(Resource::Nofile, limit);
    getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX)
}
