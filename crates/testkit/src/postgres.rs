//! PostgreSQL for tests. [`database`] gives a test a database of its own, dropped with the
//! guard it returns: on the server [`URL_VARIABLE`] names (`scripts/test` points it at the
//! machine's server), or, when that is unset, on a throwaway cluster started for the test —
//! `initdb` and `postgres` from `PATH` or `/usr/lib/postgresql/*/bin`, in a temporary
//! directory, reached through a socket there and no TCP port — and stopped with it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sqlx::Connection;
use tokio::process::Command;

use crate::ReadyProcess;

/// Names a PostgreSQL server (a URL whose user may create databases) for the tests' databases.
pub const URL_VARIABLE: &str = "EDITH_TEST_DATABASE_URL";

/// How long a throwaway cluster may take to initialise and to start.
const CLUSTER_START: Duration = Duration::from_secs(60);
/// How long creating or dropping a database may take.
const STATEMENT_LIMIT: Duration = Duration::from_secs(30);

/// A database made for one test; dropped (and its throwaway cluster stopped) on drop.
pub struct TestDatabase {
    url: String,
    server_url: String,
    name: String,
    /// Declared last: the cluster goes after the database is dropped from it.
    cluster: Option<Cluster>,
}

/// A PostgreSQL cluster started for one test.
struct Cluster {
    /// The `postgres` server: asked to shut down on drop, and killed with its whole process
    /// group if it has not within [`CLUSTER_STOP`].
    server: ReadyProcess,
    /// Holds the data directory and the socket.
    _dir: tempfile::TempDir,
}

/// How long a throwaway cluster may take to shut down before it is killed.
const CLUSTER_STOP: Duration = Duration::from_secs(10);

impl Drop for Cluster {
    fn drop(&mut self) {
        // A fast shutdown (SIGINT) ends the sessions and removes the shared memory that a
        // killed server would leave behind.
        let pid = self.server.pid();
        if let Some(leader) = rustix::process::Pid::from_raw(pid as i32) {
            let _ = rustix::process::kill_process(leader, rustix::process::Signal::INT);
        }
        let deadline = std::time::Instant::now() + CLUSTER_STOP;
        while running(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Whether process `pid` runs (it has not exited; an exited, unreaped one is a zombie).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // The state follows the command name, which is in parentheses.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

impl TestDatabase {
    /// The URL of this test's database.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl std::fmt::Debug for TestDatabase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestDatabase")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A new, empty database for this test. Panics, saying what to do, when no PostgreSQL can be
/// had.
pub async fn database() -> TestDatabase {
    let (server_url, cluster) = match std::env::var(URL_VARIABLE) {
        Ok(url) if !url.is_empty() => (url, None),
        _ => {
            let (url, cluster) = start_cluster().await;
            (url, Some(cluster))
        }
    };
    let name = unique_name();
    run_on(&server_url, &format!("CREATE DATABASE {name}")).await;
    TestDatabase {
        url: with_database(&server_url, &name),
        server_url,
        name,
        cluster,
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if self.cluster.is_some() {
            // The whole cluster goes with the test.
            return;
        }
        let server_url = self.server_url.clone();
        // Connections a test left open (a server it killed) are ended, not waited for.
        let statement = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        // Drop cannot await: the statement runs on a runtime of its own, on its own thread.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(run_on(&server_url, &statement));
        })
        .join();
        if dropped.is_err() && !std::thread::panicking() {
            panic!("the test database could not be dropped");
        }
    }
}

/// Runs one statement on the server's maintenance database, within [`STATEMENT_LIMIT`].
async fn run_on(server_url: &str, statement: &str) {
    let work = async {
        let mut connection = sqlx::PgConnection::connect(server_url).await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement.to_owned()))
            .execute(&mut connection)
            .await?;
        connection.close().await
    };
    match tokio::time::timeout(STATEMENT_LIMIT, work).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => panic!(
            "PostgreSQL refused `{statement}`: {e}. Set {URL_VARIABLE} to a server where this \
             user may create databases, or unset it to start a throwaway cluster"
        ),
        Err(_) => panic!("PostgreSQL did not answer `{statement}` within {STATEMENT_LIMIT:?}"),
    }
}

/// A database name no other test of any process uses.
fn unique_name() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!(
        "edith_test_{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// `url` with its database (the path) replaced by `name`; its query string is kept.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let server = match base[authority_start..].find('/') {
        Some(slash) => &base[..authority_start + slash],
        None => base,
    };
    match query {
        Some(query) => format!("{server}/{name}?{query}"),
        None => format!("{server}/{name}"),
    }
}

/// `initdb`, then `postgres` on a socket in a new temporary directory; returns the URL of its
/// `postgres` database and the cluster.
async fn start_cluster() -> (String, Cluster) {
    let Some(bin) = postgres_binaries() else {
        panic!(
            "no PostgreSQL for this test: {URL_VARIABLE} is unset and neither `initdb` nor \
             `postgres` is on PATH or in /usr/lib/postgresql/*/bin. Set {URL_VARIABLE} to a \
             server (postgres://USER@HOST:PORT/DB), or install PostgreSQL's server \
             (Debian: apt-get install postgresql)"
        )
    };
    let dir = tempfile::tempdir().expect("a temporary directory");
    let data = dir.path().join("data");
    // PostgreSQL refuses to run as root: as root, the cluster belongs to `postgres`.
    let user = if rustix::process::getuid().is_root() {
        Some(system_user("postgres").unwrap_or_else(|| {
            panic!("running as root, the throwaway cluster needs the `postgres` user")
        }))
    } else {
        None
    };
    if let Some((uid, gid)) = user {
        std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid)).expect("chown the cluster");
    }
    let as_user = |program: &Path| {
        let mut command = Command::new(program);
        if let Some((uid, gid)) = user {
            command.uid(uid).gid(gid);
        }
        command
    };

    let mut initdb = as_user(&bin.join("initdb"));
    initdb
        .arg("--pgdata")
        .arg(&data)
        .args(["--username", "postgres", "--auth", "trust", "--no-sync"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let done = tokio::time::timeout(CLUSTER_START, initdb.output())
        .await
        .unwrap_or_else(|_| panic!("initdb did not finish within {CLUSTER_START:?}"))
        .expect("initdb starts");
    assert!(
        done.status.success(),
        "initdb failed ({}): {}",
        done.status,
        String::from_utf8_lossy(&done.stderr)
    );

    // The server's log goes to stdout, where its ready line is looked for.
    let mut server = as_user(Path::new("/bin/sh"));
    server
        .arg("-c")
        .arg("exec \"$0\" \"$@\" 2>&1")
        .arg(bin.join("postgres"))
        .arg("-D")
        .arg(&data)
        .arg("-k")
        .arg(dir.path())
        .args([
            "-c",
            "listen_addresses=",
            "-c",
            "log_line_prefix=",
            "-c",
            "fsync=off",
        ]);
    let server = ReadyProcess::spawn(
        server,
        "LOG:  database system is ready to accept connections",
        CLUSTER_START,
    )
    .await;
    let url = format!(
        "postgres://postgres@localhost/postgres?host={}",
        dir.path().display()
    );
    (url, Cluster { server, _dir: dir })
}

/// The directory holding `initdb` and `postgres`.
fn postgres_binaries() -> Option<PathBuf> {
    let has_both = |dir: &Path| dir.join("initdb").is_file() && dir.join("postgres").is_file();
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut installed: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.path().join("bin"))
                .collect()
        })
        .unwrap_or_default();
    // The newest version first.
    installed.sort();
    installed.reverse();
    on_path
        .into_iter()
        .chain(installed)
        .find(|dir| has_both(dir))
}

/// The uid and gid of a user of this system, from /etc/passwd.
fn system_user(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        (fields.first() == Some(&name) && fields.len() > 3)
            .then(|| Some((fields[2].parse().ok()?, fields[3].parse().ok()?)))
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::with_database;

    #[test]
    fn a_url_gets_another_database_and_keeps_its_options() {
        assert_eq!(
            with_database("postgres://u@127.0.0.1:5432/postgres", "t1"),
            "postgres://u@127.0.0.1:5432/t1"
        );
        assert_eq!(
            with_database("postgres://u@127.0.0.1:5432", "t1"),
            "postgres://u@127.0.0.1:5432/t1"
        );
        assert_eq!(
            with_database("postgres://u@localhost/postgres?host=/tmp/x", "t1"),
            "postgres://u@localhost/t1?host=/tmp/x"
        );
    }
}
