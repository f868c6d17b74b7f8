//! Benchmark: what a statement costs through sqlx's own SQLite driver (it runs each connection
//! on a thread of its own, so every statement is a round trip to it: how this crate's
//! connections worked before), through this crate's connections (the statement runs on the
//! caller's thread, behind sqlx's API), and by SQLite called straight (`rusqlite`), on one file
//! with the store's settings (WAL, `synchronous = NORMAL`). Prints wall and CPU time per
//! statement, side by side, for a read by primary key and for a one-row insert. Asserts nothing.
//!
//! Usage: `cargo run --release -p edith-sqlite --example hop [STATEMENTS=20000]`

use std::time::{Duration, Instant};

use edith_sqlite::{Connections, Options};
use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};

const READ: &str = "SELECT v FROM t WHERE id = 1";
const WRITE: &str = "INSERT INTO t (v) VALUES ('x')";

/// This process's CPU time (user and system), from `/proc/self/stat`.
fn cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("Linux's /proc");
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .expect("a stat line")
        .split_whitespace()
        .collect();
    // utime and stime, the 14th and 15th fields of the line (the 12th and 13th after the name).
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    // Linux's USER_HZ.
    Duration::from_millis(ticks * 10)
}

/// Wall and CPU time per statement of `n` runs of `statement`.
async fn timed<F: AsyncFnMut()>(n: u32, mut statement: F) -> (Duration, Duration) {
    let (wall, used) = (Instant::now(), cpu());
    for _ in 0..n {
        statement().await;
    }
    (wall.elapsed() / n, (cpu() - used) / n)
}

fn us(d: Duration) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .map_or(20_000, |n| n.parse().expect("a count"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hop.db");
    let set = Connections::open(Options::new(&file)).await.unwrap();
    sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        .execute(&set)
        .await
        .unwrap();
    sqlx::query(WRITE).execute(&set).await.unwrap();
    // The file is in WAL mode already; `synchronous` is the connection's own.
    let mut threaded = SqliteConnection::connect_with(
        &SqliteConnectOptions::new()
            .filename(&file)
            .synchronous(sqlx::sqlite::SqliteSynchronous::Normal),
    )
    .await
    .unwrap();
    let caller = rusqlite::Connection::open(&file).unwrap();
    caller.pragma_update(None, "synchronous", "NORMAL").unwrap();

    println!("{n} statements each, one after the other, release build");
    println!(
        "| statement | round | sqlx's driver (a thread per connection): wall | CPU | \
         these connections: wall | CPU | SQLite called straight: wall | CPU |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, sql) in [("read by key", READ), ("insert a row", WRITE)] {
        for round in 1..=2 {
            let hop = timed(n, async || {
                sqlx::query(sql).execute(&mut threaded).await.unwrap();
            })
            .await;
            let here = timed(n, async || {
                sqlx::query(sql).execute(&set).await.unwrap();
            })
            .await;
            let direct = timed(n, async || {
                let mut statement = caller.prepare_cached(sql).unwrap();
                let mut rows = statement.raw_query();
                while rows.next().unwrap().is_some() {}
            })
            .await;
            println!(
                "| {name} | {round} | {} | {} | {} | {} | {} | {} |",
                us(hop.0),
                us(hop.1),
                us(here.0),
                us(here.1),
                us(direct.0),
                us(direct.1),
            );
        }
    }
    threaded.close().await.unwrap();
    set.close(Duration::from_secs(10)).await;
}
