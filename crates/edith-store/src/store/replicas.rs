//! Several control-plane replicas on one database: which are alive, which one owns each
//! instance's runtime, which one drives each turn, and how they tell each other that a log
//! grew or a key was revoked (PostgreSQL's `LISTEN/NOTIFY`).
//!
//! Times are unix milliseconds, given by the caller, so that one clock (the caller's) decides
//! what has run out.

use edith_types::{InstanceId, Turn};
use sqlx::postgres::{PgListener, PgNotification};

use super::{Db, Result, Store, StoreError, from_body};

/// How many times claiming an instance reads and writes when other replicas keep writing first.
const CLAIM_ATTEMPTS: usize = 8;

/// What claiming an instance found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The caller owns it now; `from` names the replica whose lease it took over, if another's
    /// (that one's runtime and turns are left for the caller to deal with).
    Mine { from: Option<String> },
    /// Another live replica owns it: what touches its runtime goes there.
    Theirs {
        replica: String,
        /// Where that replica said it answers (`None` if it never said).
        url: Option<String>,
    },
    /// No such instance.
    Missing,
}

/// The channels replicas announce on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// A turn's log grew; the id is the turn's.
    TurnEvents,
    /// A job's log grew; the id is the job's.
    JobEvents,
    /// An API key was revoked; the id is the key's.
    KeyRevoked,
    /// A tool host was changed or removed; the id is the host's.
    ToolHostChanged,
    /// A profile's tool list changed; the id is the profile's, or [`Channel::EVERY_PROFILE`]
    /// when a tool's definition changed.
    ToolsChanged,
}

impl Channel {
    const ALL: [Channel; 5] = [
        Channel::TurnEvents,
        Channel::JobEvents,
        Channel::KeyRevoked,
        Channel::ToolHostChanged,
        Channel::ToolsChanged,
    ];

    /// The id of a [`Channel::ToolsChanged`] announcement that touches every profile.
    pub const EVERY_PROFILE: &str = "*";

    /// The PostgreSQL channel's name.
    pub fn name(self) -> &'static str {
        match self {
            Channel::TurnEvents => "edith_turn_events",
            Channel::JobEvents => "edith_job_events",
            Channel::KeyRevoked => "edith_key_revoked",
            Channel::ToolHostChanged => "edith_tool_host_changed",
            Channel::ToolsChanged => "edith_tools_changed",
        }
    }
}

/// What another replica announced, or that announcements may have been missed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Announcement {
    Changed {
        channel: Channel,
        id: String,
    },
    /// The listening connection was lost and made again: whatever was announced meanwhile is
    /// not known, so everything followed must be read again.
    MayHaveMissed,
}

impl Announcement {
    /// A notification's payload: the sender and the id, tab-separated.
    pub(super) fn payload(origin: Option<&str>, id: &str) -> String {
        format!("{}\t{id}", origin.unwrap_or(""))
    }

    /// Reads a notification, or `None` when this replica sent it (or it is not ours).
    fn read(notification: &PgNotification, own: Option<&str>) -> Option<Self> {
        let channel = Channel::ALL
            .into_iter()
            .find(|channel| channel.name() == notification.channel())?;
        let (origin, id) = notification.payload().split_once('\t')?;
        (Some(origin) != own).then(|| Announcement::Changed {
            channel,
            id: id.to_owned(),
        })
    }
}

/// Hears what the other replicas announce (see [`Store::listen`]).
pub struct Listener {
    listener: PgListener,
    own: Option<std::sync::Arc<str>>,
}

impl Listener {
    /// The next announcement. An error means the database cannot be reached now; calling again
    /// tries to connect again.
    pub async fn next(&mut self) -> Result<Announcement> {
        loop {
            match self.listener.try_recv().await? {
                None => return Ok(Announcement::MayHaveMissed),
                Some(notification) => {
                    if let Some(heard) = Announcement::read(&notification, self.own.as_deref()) {
                        return Ok(heard);
                    }
                }
            }
        }
    }
}

/// The states of a turn that has not finished.
const UNFINISHED: &str = unfinished!("state");

impl Store {
    /// Says that `replica` is alive and answers at `url` until `until_ms`, and renews its
    /// leases on the instances it owns until then; returns those instances. Refused (the
    /// other's URL) while another live replica — at another URL — goes by the same name, unless
    /// `displace` (the caller knows the other is gone).
    pub async fn replica_alive(
        &self,
        replica: &str,
        url: &str,
        now_ms: i64,
        until_ms: i64,
        displace: bool,
    ) -> Result<std::result::Result<Vec<InstanceId>, String>> {
        on_db!(self, pool => {
            let mut tx = begin!(pool);
            let done = sqlx::query(
                "INSERT INTO replicas (id, url, alive_until) VALUES ($1, $2, $3) \
                 ON CONFLICT (id) DO UPDATE SET url = excluded.url, \
                 alive_until = excluded.alive_until \
                 WHERE replicas.url = excluded.url OR replicas.alive_until < $4 OR $5",
            )
            .bind(replica)
            .bind(url)
            .bind(until_ms)
            .bind(now_ms)
            .bind(displace)
            .execute(&mut *tx)
            .await?;
            if done.rows_affected() == 0 {
                let other: String = sqlx::query_scalar("SELECT url FROM replicas WHERE id = $1")
                    .bind(replica)
                    .fetch_one(&mut *tx)
                    .await?;
                return Ok(Err(other));
            }
            let owned: Vec<String> = sqlx::query_scalar(
                "UPDATE instances SET owner_until = $1 WHERE owner = $2 RETURNING id",
            )
            .bind(until_ms)
            .bind(replica)
            .fetch_all(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(Ok(owned.into_iter().filter_map(|id| id.parse().ok()).collect()))
        })
    }

    /// `replica` stops: its registration and its leases run out now, so the others take over
    /// what it owned at once rather than after a lease.
    pub async fn replica_leaving(&self, replica: &str) -> Result<()> {
        self.expire_replicas("id = $1", replica).await
    }

    /// Every replica but `replica` is gone (a SQLite file is one process's): their
    /// registrations and leases run out now.
    pub async fn expire_other_replicas(&self, replica: &str) -> Result<()> {
        self.expire_replicas("id <> $1", replica).await
    }

    /// Ends the registrations, instance leases and job leases of the replicas `which` (a
    /// condition on `id` against `$1`) selects: what they held is free to take at once.
    async fn expire_replicas(&self, which: &'static str, replica: &str) -> Result<()> {
        let replicas = format!("UPDATE replicas SET alive_until = 0 WHERE {which}");
        let instances = format!(
            "UPDATE instances SET owner_until = 0 WHERE owner IN \
             (SELECT id FROM replicas WHERE {which})"
        );
        let jobs = format!(
            "UPDATE jobs SET lease_expires_at = 0 WHERE lease_owner IN \
             (SELECT id FROM replicas WHERE {which})"
        );
        on_db!(self, pool => {
            let mut tx = begin!(pool);
            // Only the constant conditions above are spliced in.
            for sql in [instances.as_str(), jobs.as_str(), replicas.as_str()] {
                sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
                    .bind(replica)
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await?;
            Ok(())
        })
    }

    /// Takes the instance for `replica` until `until_ms` (or renews its own lease), unless
    /// another replica's lease on it is live at `now_ms`. The write only happens over the
    /// owner it read, so of two replicas racing for it one wins.
    pub async fn claim_instance(
        &self,
        id: &InstanceId,
        replica: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> Result<Claim> {
        for _ in 0..CLAIM_ATTEMPTS {
            let found: Option<(Option<String>, Option<i64>, Option<String>)> = on_db!(self, pool => {
                sqlx::query_as(
                    "SELECT owner, owner_until, (SELECT url FROM replicas WHERE id = owner) \
                     FROM instances WHERE id = $1",
                )
                .bind(id.as_str())
                .fetch_optional(pool)
                .await?
            });
            let Some((owner, owner_until, url)) = found else {
                return Ok(Claim::Missing);
            };
            let until = owner_until.unwrap_or(0);
            match owner {
                Some(other) if other != replica && until >= now_ms => {
                    return Ok(Claim::Theirs {
                        replica: other,
                        url,
                    });
                }
                owner => {
                    let taken = on_db!(self, pool => {
                        sqlx::query(
                            "UPDATE instances SET owner = $1, owner_until = $2 WHERE id = $3 \
                             AND COALESCE(owner, '') = $4 AND COALESCE(owner_until, 0) = $5",
                        )
                        .bind(replica)
                        .bind(until_ms)
                        .bind(id.as_str())
                        .bind(owner.as_deref().unwrap_or(""))
                        .bind(until)
                        .execute(pool)
                        .await?
                        .rows_affected()
                            == 1
                    });
                    if taken {
                        let from = owner.filter(|owner| owner != replica);
                        return Ok(Claim::Mine { from });
                    }
                    // Another replica wrote first: read again.
                }
            }
        }
        Err(StoreError::Contended(format!(
            "the ownership of instance `{id}` kept changing"
        )))
    }

    /// The instances whose owner's lease ran out before `now_ms` (its replica stopped
    /// renewing: it died, or lost the database).
    pub async fn instances_left_by_their_owner(&self, now_ms: i64) -> Result<Vec<InstanceId>> {
        let ids: Vec<String> = on_db!(self, pool => {
            sqlx::query_scalar(
                "SELECT id FROM instances WHERE owner IS NOT NULL AND owner_until < $1",
            )
            .bind(now_ms)
            .fetch_all(pool)
            .await?
        });
        Ok(ids.into_iter().filter_map(|id| id.parse().ok()).collect())
    }

    /// Unfinished turns nobody drives any more: their driver's replica is not alive at
    /// `now_ms` (or they have none), or it is `restarted`, the caller's own name from a run of
    /// it that ended.
    pub async fn turns_left_by_their_driver(
        &self,
        now_ms: i64,
        restarted: Option<&str>,
    ) -> Result<Vec<Turn>> {
        on_db!(self, pool => {
            let sql = format!(
                "SELECT body FROM turns WHERE {UNFINISHED} AND (driver IS NULL \
                 OR driver = $2 OR driver NOT IN \
                 (SELECT id FROM replicas WHERE alive_until >= $1))"
            );
            // Only the constant list of states is spliced into `sql`.
            let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(now_ms)
                .bind(restarted.unwrap_or(""))
                .fetch_all(pool)
                .await?;
            rows.iter().map(from_body).collect()
        })
    }

    /// Hears what other replicas announce; `None` on SQLite, which has one. The listener holds
    /// one of the pool's connections: drop it before [`Store::close`], which waits for it.
    pub async fn listen(&self) -> Result<Option<Listener>> {
        match &self.db {
            Db::Sqlite(..) => Ok(None),
            Db::Postgres(pool) => {
                let mut listener = PgListener::connect_with(pool).await?;
                listener
                    .listen_all(Channel::ALL.into_iter().map(Channel::name))
                    .await?;
                // Made again at once when lost, so the next announcement is not missed too.
                listener.eager_reconnect(true);
                Ok(Some(Listener {
                    listener,
                    own: self.origin.clone(),
                }))
            }
        }
    }
}
