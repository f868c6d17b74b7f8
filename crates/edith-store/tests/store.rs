//! The store's behaviour, the same on both backends: each check below runs as `<check>::sqlite`
//! (a SQLite file in a temporary directory) and `<check>::postgres` (a database of its own,
//! from `testkit::postgres`: the server `EDITH_TEST_DATABASE_URL` names, or a throwaway cluster).

use std::collections::BTreeMap;
use std::sync::Arc;

use edith_store::{
    Announcement, Channel, Claim, Idempotency, InstanceRecord, SessionChange, Store, StoreError,
    ToolHostRecord,
};
use edith_types::{
    ApiKey, ApiKeyId, Instance, InstanceId, InstanceState, Job, JobEventKind, JobId, JobKind,
    JobState, ModelConfig, NativeSessionId, Profile, ProfileId, ProviderKind, RestartPolicy, Scope,
    Session, SessionId, Timestamp, Tool, ToolHost, ToolHostId, ToolId, Turn, TurnEventKind, TurnId,
    TurnState, UpdateTool, UpdateToolHost,
};

/// Declares each named check (an `async fn(Store)` below) once per backend.
macro_rules! on_both_backends {
    ($($check:ident),* $(,)?) => {$(
        mod $check {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn sqlite() {
                let dir = tempfile::tempdir().unwrap();
                let store = edith_store::Store::open_sqlite(&dir.path().join("edith.db"))
                    .await
                    .unwrap();
                super::$check(store).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn postgres() {
                let database = testkit::postgres::database().await;
                let store = edith_store::Store::open(database.url()).await.unwrap();
                super::$check(store.clone()).await;
                store.close().await;
            }
        }
    )*};
}

on_both_backends!(
    instances_page_filter_and_count,
    an_instance_changes_state_only_from_the_state_it_was_seen_in,
    purging_an_instance_removes_what_it_holds_but_keeps_its_jobs,
    a_job_is_leased_to_one_replica_until_its_lease_runs_out,
    a_leaving_replicas_job_leases_end_with_it,
    an_instance_is_owned_by_one_live_replica_at_a_time,
    a_dead_drivers_turns_are_found_and_a_live_ones_are_not,
    job_events_are_numbered_in_order,
    profiles_are_unique_by_name_and_carry_their_tools,
    tools_and_hosts_in_use_are_not_deleted,
    keys_are_found_by_hash_and_paged,
    a_session_runs_one_turn_at_a_time_even_when_inserts_race,
    concurrent_appends_to_one_log_get_every_number_once,
    a_finished_turn_has_its_last_event_and_readers_see_the_tail,
    a_session_or_profile_with_an_unfinished_turn_is_not_deleted,
    a_profile_deleted_as_a_turn_starts_is_kept_or_the_turn_refused,
    a_sessions_changes_never_undo_each_other,
    a_session_is_found_by_the_stored_session_it_continues,
    idempotency_keys_claim_replay_and_release,
    a_requests_path_is_read_at_once_as_far_as_it_exists,
    a_turn_is_found_only_on_its_own_path,
    a_path_read_again_shows_every_change_made_since,
    events_appended_together_are_numbered_together,
);

fn instance(name: &str, provider: ProviderKind, labels: &[(&str, &str)]) -> Instance {
    Instance {
        id: InstanceId::generate(),
        name: name.to_owned(),
        provider,
        runtime: None,
        url: None,
        state: InstanceState::Provisioning,
        state_reason: None,
        restart_policy: RestartPolicy::Never,
        max_restarts: None,
        sim: None,
        labels: labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        restarts: 0,
        created_at: Timestamp::now(),
        updated_at: Timestamp::now(),
    }
}

fn job_for(instance: &InstanceId) -> Job {
    let now = Timestamp::now();
    Job {
        id: JobId::generate(),
        instance_id: instance.clone(),
        kind: JobKind::InstanceProvision,
        state: JobState::Queued,
        steps: Vec::new(),
        error: None,
        created_at: now.clone(),
        updated_at: now,
    }
}

/// Inserts an instance with its provisioning job; returns both.
async fn add_instance(store: &Store, instance: Instance) -> (Instance, Job) {
    let job = job_for(&instance.id);
    let record = InstanceRecord {
        instance: instance.clone(),
        runtime_token: "runtime-secret".to_owned(),
        mcp_token: "mcp-secret".to_owned(),
    };
    store.insert_instance(&record, &job, None).await.unwrap();
    (instance, job)
}

async fn add_profile(store: &Store, instance: &InstanceId, name: &str) -> Profile {
    let profile = Profile {
        id: ProfileId::generate(),
        instance_id: instance.clone(),
        name: name.to_owned(),
        native_name: name.to_owned(),
        model: ModelConfig::Scripted,
        tools: Vec::new(),
        created_at: Timestamp::now(),
    };
    store.insert_profile(&profile).await.unwrap();
    profile
}

async fn add_session(store: &Store, profile: &Profile) -> Session {
    let session = Session {
        id: SessionId::generate(),
        profile_id: profile.id.clone(),
        instance_id: profile.instance_id.clone(),
        native_session_id: None,
        title: None,
        created_at: Timestamp::now(),
    };
    store.insert_session(&session).await.unwrap();
    session
}

fn turn_in(session: &SessionId) -> Turn {
    let now = Timestamp::now();
    Turn {
        id: TurnId::generate(),
        session_id: session.clone(),
        state: TurnState::Queued,
        input: "hello".to_owned(),
        output: None,
        error: None,
        usage: None,
        created_at: now.clone(),
        updated_at: now,
    }
}

/// Ends `turn` in `state`, with nothing logged before its end; that end.
async fn end_turn(store: &Store, turn: &Turn, state: TurnState) -> TurnEventKind {
    let ended = Turn {
        state,
        ..turn.clone()
    };
    let last = TurnEventKind::TurnFinished {
        state,
        output: None,
        error: None,
    };
    store
        .finish_turn(&ended, &[], &last)
        .await
        .unwrap()
        .unwrap();
    last
}

/// An instance with a profile and a session in it.
async fn a_session(store: &Store) -> (Instance, Profile, Session) {
    let (instance, _) = add_instance(store, instance("i", ProviderKind::Embedded, &[])).await;
    let profile = add_profile(store, &instance.id, "default").await;
    let session = add_session(store, &profile).await;
    (instance, profile, session)
}

async fn add_tool(store: &Store, name: &str) -> (Tool, ToolHostRecord) {
    let host = ToolHostRecord {
        host: ToolHost {
            id: ToolHostId::generate(),
            url: "http://127.0.0.1:9/mcp".to_owned(),
            created_at: Timestamp::now(),
        },
        secret: "host-secret".to_owned(),
    };
    store.insert_tool_host(&host).await.unwrap();
    let tool = Tool {
        id: ToolId::generate(),
        name: name.to_owned(),
        description: "a tool".to_owned(),
        input_schema: serde_json::json!({"type": "object"}),
        host_id: host.host.id.clone(),
        created_at: Timestamp::now(),
    };
    store.insert_tool(&tool).await.unwrap();
    (tool, host)
}

fn ids<T>(items: &[T], id: impl Fn(&T) -> String) -> Vec<String> {
    items.iter().map(id).collect()
}

async fn instances_page_filter_and_count(store: Store) {
    let mut made = Vec::new();
    for (n, provider, labels) in [
        (0, ProviderKind::Embedded, vec![("team", "a")]),
        (1, ProviderKind::Process, vec![("team", "b")]),
        (
            2,
            ProviderKind::Embedded,
            vec![("team", "a"), ("tier", "gold")],
        ),
    ] {
        let (instance, _) =
            add_instance(&store, instance(&format!("i{n}"), provider, &labels)).await;
        made.push(instance);
    }
    let all: Vec<String> = ids(&made, |i| i.id.to_string());

    let first = store.list_instances(None, 2, None, None).await.unwrap();
    assert_eq!(ids(&first.items, |i| i.id.to_string()), all[..2]);
    let cursor: InstanceId = first.next_cursor.expect("a next page").parse().unwrap();
    let rest = store
        .list_instances(Some(&cursor), 2, None, None)
        .await
        .unwrap();
    assert_eq!(ids(&rest.items, |i| i.id.to_string()), all[2..]);
    assert_eq!(rest.next_cursor, None);

    let team_a = store
        .list_instances(None, 10, None, Some(("team", "a")))
        .await
        .unwrap();
    assert_eq!(
        ids(&team_a.items, |i| i.id.to_string()),
        [all[0].clone(), all[2].clone()]
    );
    let gold = store
        .list_instances(None, 10, None, Some(("tier", "gold")))
        .await
        .unwrap();
    assert_eq!(ids(&gold.items, |i| i.id.to_string()), [all[2].clone()]);
    let none = store
        .list_instances(None, 10, None, Some(("team", "c")))
        .await
        .unwrap();
    assert!(none.items.is_empty());

    let mut ready = made[1].clone();
    ready.state = InstanceState::Ready;
    let from = InstanceState::Provisioning;
    assert!(store.update_instance_from(&ready, from).await.unwrap());
    let in_ready = store
        .list_instances(None, 10, Some(InstanceState::Ready), None)
        .await
        .unwrap();
    assert_eq!(ids(&in_ready.items, |i| i.id.to_string()), [all[1].clone()]);

    let mut deleted = made[0].clone();
    deleted.state = InstanceState::Deleted;
    let from = InstanceState::Provisioning;
    assert!(store.update_instance_from(&deleted, from).await.unwrap());
    let listed = store.list_instances(None, 10, None, None).await.unwrap();
    assert_eq!(
        ids(&listed.items, |i| i.id.to_string()),
        all[1..],
        "deleted instances are not listed"
    );

    let mut counts = store.count_instances().await.unwrap();
    counts.sort();
    assert_eq!(
        counts,
        [
            ("embedded".to_owned(), "provisioning".to_owned(), 1),
            ("process".to_owned(), "ready".to_owned(), 1),
        ]
    );

    let record = store.instance(&made[1].id).await.unwrap().unwrap();
    assert_eq!(record.instance, ready);
    assert_eq!(record.runtime_token, "runtime-secret");
    assert_eq!(record.mcp_token, "mcp-secret");
    assert!(
        store
            .instance(&InstanceId::generate())
            .await
            .unwrap()
            .is_none()
    );
}

async fn an_instance_changes_state_only_from_the_state_it_was_seen_in(store: Store) {
    let (seen, _) = add_instance(&store, instance("i", ProviderKind::Embedded, &[])).await;
    let mut ready = seen.clone();
    ready.state = InstanceState::Ready;
    assert!(
        store
            .update_instance_from(&ready, InstanceState::Provisioning)
            .await
            .unwrap()
    );
    let mut lost = seen.clone();
    lost.state = InstanceState::Lost;
    assert!(
        !store
            .update_instance_from(&lost, InstanceState::Provisioning)
            .await
            .unwrap(),
        "someone moved it meanwhile"
    );
    let stored = store.instance(&seen.id).await.unwrap().unwrap();
    assert_eq!(stored.instance.state, InstanceState::Ready);

    // A move with its job: neither is written when the state was not the one seen.
    let mut deleting = seen.clone();
    deleting.state = InstanceState::Deleting;
    // Whether the move was made, and the job as then stored, if it was.
    let move_with_job = |from| {
        let (store, deleting, job) = (store.clone(), deleting.clone(), job_for(&seen.id));
        async move {
            let moved = store
                .update_instance_from_with_job(&deleting, from, &job)
                .await
                .unwrap();
            let stored = store.job(&job.id).await.unwrap();
            assert_eq!(
                stored.is_some(),
                moved,
                "a job exactly when the move was made"
            );
            (moved, stored.map(|stored| stored == job))
        }
    };
    assert_eq!(
        move_with_job(InstanceState::Lost).await,
        (false, None),
        "it is ready, not lost"
    );
    assert_eq!(
        move_with_job(InstanceState::Ready).await,
        (true, Some(true))
    );
    let stored = store.instance(&seen.id).await.unwrap().unwrap();
    assert_eq!(stored.instance.state, InstanceState::Deleting);
    assert_eq!(
        move_with_job(InstanceState::Ready).await,
        (false, None),
        "a second deletion of what it saw ready finds it deleting"
    );
}

async fn purging_an_instance_removes_what_it_holds_but_keeps_its_jobs(store: Store) {
    let (instance, profile, session) = a_session(&store).await;
    // Two more jobs, each with the move it makes (provisioning failed, then a deletion).
    let job = job_for(&instance.id);
    let mut failed = instance.clone();
    failed.state = InstanceState::Failed;
    let from = InstanceState::Provisioning;
    let moved = store.update_instance_from_with_job(&failed, from, &job);
    assert!(moved.await.unwrap());
    let later = job_for(&instance.id);
    let mut deleting = instance.clone();
    deleting.state = InstanceState::Deleting;
    let moved = store.update_instance_from_with_job(&deleting, InstanceState::Failed, &later);
    assert!(moved.await.unwrap());
    let someone_else = self::instance("other", ProviderKind::Embedded, &[]);
    let (other, _) = add_instance(&store, someone_else).await;
    // Its own (the one that made it, then these two), oldest first; not another's.
    let theirs = store.jobs_of_instance(&instance.id).await.unwrap();
    assert_eq!(theirs.len(), 3, "{theirs:?}");
    assert_eq!(theirs[1..], [job.clone(), later.clone()]);
    assert_eq!(store.jobs_of_instance(&other.id).await.unwrap().len(), 1);
    let turn = turn_in(&session.id);
    assert_eq!(store.insert_turn_if_idle(&turn, "r").await.unwrap(), None);
    store
        .append_turn_event(&turn.id, &TurnEventKind::TurnStarted)
        .await
        .unwrap();

    store.purge_instance(&instance.id).await.unwrap();
    assert!(store.instance(&instance.id).await.unwrap().is_none());
    assert!(
        store
            .profile(&instance.id, &profile.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .session(&profile.id, &session.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(store.turn(&session.id, &turn.id).await.unwrap().is_none());
    assert!(
        store
            .turn_events_after(&turn.id, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.job(&job.id).await.unwrap(), Some(job), "jobs stay");
}

async fn a_job_is_leased_to_one_replica_until_its_lease_runs_out(store: Store) {
    let (_, job) = add_instance(&store, instance("i", ProviderKind::Embedded, &[])).await;
    let taken = |owner: &'static str, now: i64| {
        let store = store.clone();
        async move {
            let jobs = store.jobs_to_take(owner, now).await.unwrap();
            jobs.iter().map(|j| j.id.clone()).collect::<Vec<_>>()
        }
    };
    assert_eq!(
        taken("a", 0).await,
        std::slice::from_ref(&job.id),
        "not leased: anyone's"
    );
    assert!(store.lease_job(&job.id, "a", 0, 100).await.unwrap());
    assert!(!store.lease_job(&job.id, "b", 50, 150).await.unwrap());
    assert!(
        taken("b", 50).await.is_empty(),
        "a live lease keeps others off"
    );
    assert_eq!(
        taken("a", 50).await,
        std::slice::from_ref(&job.id),
        "its owner, restarted, takes it"
    );
    assert!(
        store.lease_job(&job.id, "a", 90, 200).await.unwrap(),
        "renewed"
    );
    assert!(!store.lease_job(&job.id, "b", 150, 250).await.unwrap());
    assert!(
        store.lease_job(&job.id, "b", 201, 300).await.unwrap(),
        "ran out: taken over"
    );
    assert!(
        !store.lease_job(&job.id, "a", 210, 310).await.unwrap(),
        "a lost it"
    );

    store.release_job(&job.id, "a").await.unwrap();
    assert!(
        !store.lease_job(&job.id, "a", 220, 320).await.unwrap(),
        "only b releases"
    );
    assert!(store.holds_job_lease(&job.id, "b").await.unwrap());
    assert!(!store.holds_job_lease(&job.id, "a").await.unwrap());
    let mut finished = job.clone();
    finished.state = JobState::Succeeded;
    assert!(
        !store.update_leased_job(&finished, "a").await.unwrap(),
        "a lost it"
    );
    assert!(store.update_leased_job(&finished, "b").await.unwrap());
    store.release_job(&job.id, "b").await.unwrap();
    assert!(
        !store.lease_job(&job.id, "a", 230, 330).await.unwrap(),
        "finished"
    );
    assert!(taken("a", 230).await.is_empty());
    assert_eq!(store.job(&job.id).await.unwrap(), Some(finished));
}

async fn a_leaving_replicas_job_leases_end_with_it(store: Store) {
    let (_, job) = add_instance(&store, instance("i", ProviderKind::Embedded, &[])).await;
    for (replica, until) in [("a", 1000), ("b", 1000)] {
        let alive = store.replica_alive(replica, "http://r", 0, until, false);
        alive.await.unwrap().unwrap();
    }
    assert!(store.lease_job(&job.id, "a", 0, 1000).await.unwrap());
    assert!(!store.lease_job(&job.id, "b", 10, 1010).await.unwrap());
    store.replica_leaving("b").await.unwrap();
    assert!(
        !store.lease_job(&job.id, "b", 20, 1020).await.unwrap(),
        "another's leaving leaves a's lease alone"
    );
    let back = store.replica_alive("b", "http://r", 15, 1015, false);
    back.await.unwrap().unwrap();
    store.replica_leaving("a").await.unwrap();
    assert!(
        !store.lease_job(&job.id, "a", 25, 1025).await.unwrap(),
        "a runner of a replica that left cannot renew what it gave up"
    );
    assert!(
        store.lease_job(&job.id, "b", 30, 1030).await.unwrap(),
        "a left: its job is b's at once"
    );
    // a starts again (alive again), and on a SQLite file every other replica is gone at start:
    // their job leases too.
    let alive = store.replica_alive("a", "http://r", 35, 1035, false);
    alive.await.unwrap().unwrap();
    store.expire_other_replicas("a").await.unwrap();
    assert!(store.lease_job(&job.id, "a", 40, 1040).await.unwrap());
}

async fn an_instance_is_owned_by_one_live_replica_at_a_time(store: Store) {
    let (a_one, _) = add_instance(&store, instance("i", ProviderKind::Embedded, &[])).await;
    let id = a_one.id.clone();
    let alive = |replica: &'static str, url: &'static str, now: i64, until: i64| {
        let store = store.clone();
        async move {
            store
                .replica_alive(replica, url, now, until, false)
                .await
                .unwrap()
        }
    };
    assert_eq!(alive("a", "http://a", 0, 100).await, Ok(vec![]));
    assert_eq!(alive("b", "http://b", 0, 100).await, Ok(vec![]));
    assert_eq!(
        store.claim_instance(&id, "a", 0, 100).await.unwrap(),
        Claim::Mine { from: None }
    );
    assert_eq!(
        store.claim_instance(&id, "b", 50, 150).await.unwrap(),
        Claim::Theirs {
            replica: "a".to_owned(),
            url: Some("http://a".to_owned())
        }
    );
    // a's heartbeat renews its instances with it, and says which they are.
    assert_eq!(alive("a", "http://a", 90, 200).await, Ok(vec![id.clone()]));
    assert!(matches!(
        store.claim_instance(&id, "b", 150, 250).await.unwrap(),
        Claim::Theirs { .. }
    ));
    assert!(
        store
            .instances_left_by_their_owner(150)
            .await
            .unwrap()
            .is_empty()
    );
    // a stops renewing: its lease runs out, and b takes the instance over from it.
    assert_eq!(
        store.instances_left_by_their_owner(201).await.unwrap(),
        std::slice::from_ref(&id)
    );
    assert_eq!(
        store.claim_instance(&id, "b", 201, 300).await.unwrap(),
        Claim::Mine {
            from: Some("a".to_owned())
        }
    );
    assert!(matches!(
        store.claim_instance(&id, "a", 210, 310).await.unwrap(),
        Claim::Theirs { .. }
    ));
    // a comes back: its renewal no longer names the instance b took.
    assert_eq!(alive("a", "http://a", 220, 320).await, Ok(vec![]));
    assert_eq!(
        store.claim_instance(&id, "b", 230, 330).await.unwrap(),
        Claim::Mine { from: None },
        "renewing its own"
    );
    assert_eq!(
        store
            .claim_instance(&"inst_none".parse().unwrap(), "b", 0, 1)
            .await
            .unwrap(),
        Claim::Missing
    );

    // A second live replica by the same name at another address is refused, unless told to
    // displace it; once the first's time runs out, the name is free.
    assert_eq!(
        alive("a", "http://elsewhere", 250, 350).await,
        Err("http://a".to_owned())
    );
    assert_eq!(
        store
            .replica_alive("a", "http://elsewhere", 250, 350, true)
            .await
            .unwrap(),
        Ok(vec![])
    );
    assert_eq!(
        alive("b", "http://b2", 401, 500).await,
        Ok(vec![id.clone()]),
        "b's own lease, renewed at its new address"
    );

    // b leaves cleanly: its instance is free at once, without waiting for its lease.
    store.replica_leaving("b").await.unwrap();
    assert_eq!(
        store.claim_instance(&id, "a", 410, 510).await.unwrap(),
        Claim::Mine {
            from: Some("b".to_owned())
        }
    );
    // On a SQLite file every other registration is stale: expired at once.
    store.expire_other_replicas("b").await.unwrap();
    assert_eq!(
        store.claim_instance(&id, "b", 420, 520).await.unwrap(),
        Claim::Mine {
            from: Some("a".to_owned())
        }
    );
}

async fn a_dead_drivers_turns_are_found_and_a_live_ones_are_not(store: Store) {
    let (_, profile, first) = a_session(&store).await;
    let second = add_session(&store, &profile).await;
    let (by_a, by_b) = (turn_in(&first.id), turn_in(&second.id));
    store.insert_turn_if_idle(&by_a, "a").await.unwrap();
    store.insert_turn_if_idle(&by_b, "b").await.unwrap();
    for (replica, until) in [("a", 100), ("b", 200)] {
        let alive = store.replica_alive(replica, "http://r", 0, until, false);
        alive.await.unwrap().unwrap();
    }
    let left = |now: i64, restarted: Option<&'static str>| {
        let store = store.clone();
        async move {
            let turns = store
                .turns_left_by_their_driver(now, restarted)
                .await
                .unwrap();
            turns.into_iter().map(|t| t.id).collect::<Vec<_>>()
        }
    };
    assert!(left(50, None).await.is_empty(), "both drivers live");
    assert_eq!(
        left(50, Some("a")).await,
        std::slice::from_ref(&by_a.id),
        "a, restarted"
    );
    assert_eq!(
        left(150, None).await,
        std::slice::from_ref(&by_a.id),
        "a died"
    );
    end_turn(&store, &by_a, TurnState::Interrupted).await;
    assert!(
        left(150, None).await.is_empty(),
        "finished turns are nobody's"
    );
}

async fn job_events_are_numbered_in_order(store: Store) {
    let (_, job) = add_instance(&store, instance("i", ProviderKind::Embedded, &[])).await;
    for index in 0..3 {
        let event = store
            .append_job_event(
                &job.id,
                &JobEventKind::StepStarted {
                    step: format!("step{index}"),
                    index,
                    of: 3,
                },
            )
            .await
            .unwrap();
        assert_eq!(event.seq, u64::from(index) + 1);
    }
    let tail = store.job_events_after(&job.id, 1).await.unwrap();
    assert_eq!(tail.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(
        tail[1].kind,
        JobEventKind::StepStarted {
            step: "step2".to_owned(),
            index: 2,
            of: 3
        }
    );
    assert!(
        store
            .job_events_after(&job.id, u64::MAX)
            .await
            .unwrap()
            .is_empty()
    );
}

async fn profiles_are_unique_by_name_and_carry_their_tools(store: Store) {
    let (instance, _) = add_instance(&store, instance("i", ProviderKind::Embedded, &[])).await;
    let (tool, host) = add_tool(&store, "lookup").await;
    let (other_tool, _) = add_tool(&store, "other").await;
    let mut profile = Profile {
        id: ProfileId::generate(),
        instance_id: instance.id.clone(),
        name: "Support".to_owned(),
        native_name: "support".to_owned(),
        model: ModelConfig::Scripted,
        tools: vec![tool.id.clone()],
        created_at: Timestamp::now(),
    };
    store.insert_profile(&profile).await.unwrap();
    let twin = Profile {
        id: ProfileId::generate(),
        ..profile.clone()
    };
    match store.insert_profile(&twin).await {
        Err(StoreError::Duplicate(what)) => assert!(what.contains("support"), "{what}"),
        other => panic!("a second `support` profile: {other:?}"),
    }
    assert!(
        store
            .profile(&instance.id, &twin.id)
            .await
            .unwrap()
            .is_none(),
        "nothing of the refused profile stays"
    );

    store
        .attach_tool(&profile.id, &other_tool.id)
        .await
        .unwrap();
    store
        .attach_tool(&profile.id, &other_tool.id)
        .await
        .unwrap();
    profile.tools.push(other_tool.id.clone());
    assert_eq!(
        store.profile(&instance.id, &profile.id).await.unwrap(),
        Some(profile.clone()),
        "attaching twice is a no-op; tools in the order attached"
    );
    let attached = store.profile_tools(&profile.id).await.unwrap();
    assert_eq!(attached.len(), 2);
    assert_eq!(attached[0].0, tool);
    assert_eq!(attached[0].1.host, host.host);
    assert_eq!(attached[0].1.secret, "host-secret");
    assert_eq!(
        store.profiles_using_tool(&tool.id).await.unwrap(),
        [profile.id.clone()]
    );

    assert!(store.detach_tool(&profile.id, &tool.id).await.unwrap());
    assert!(!store.detach_tool(&profile.id, &tool.id).await.unwrap());
    let second = add_profile(&store, &instance.id, "second").await;
    let page = store.list_profiles(&instance.id, None, 1).await.unwrap();
    assert_eq!(page.items[0].tools, std::slice::from_ref(&other_tool.id));
    let cursor: ProfileId = page.next_cursor.unwrap().parse().unwrap();
    let rest = store
        .list_profiles(&instance.id, Some(&cursor), 1)
        .await
        .unwrap();
    assert_eq!(rest.items, std::slice::from_ref(&second));
    assert_eq!(rest.next_cursor, None);

    assert_eq!(
        store.unfinished_turn_of_profile(&second.id).await.unwrap(),
        None
    );
    let session = add_session(&store, &second).await;
    let turn = turn_in(&session.id);
    store.insert_turn_if_idle(&turn, "r").await.unwrap();
    assert_eq!(
        store.unfinished_turn_of_profile(&second.id).await.unwrap(),
        Some(turn.id.clone())
    );
    assert_eq!(
        store.unfinished_turn_of_session(&session.id).await.unwrap(),
        Some(turn.id.clone())
    );
    assert!(
        store
            .instance_has_unfinished_turns(&instance.id)
            .await
            .unwrap()
    );

    store.delete_profile(&second.id).await.unwrap();
    assert!(
        store
            .session(&second.id, &session.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        !store
            .instance_has_unfinished_turns(&instance.id)
            .await
            .unwrap()
    );
}

async fn tools_and_hosts_in_use_are_not_deleted(store: Store) {
    let (instance, _) = add_instance(&store, instance("i", ProviderKind::Embedded, &[])).await;
    let profile = add_profile(&store, &instance.id, "default").await;
    let (tool, host) = add_tool(&store, "lookup").await;
    match store
        .insert_tool(&Tool {
            id: ToolId::generate(),
            ..tool.clone()
        })
        .await
    {
        Err(StoreError::Duplicate(what)) => assert!(what.contains("lookup"), "{what}"),
        other => panic!("a second `lookup` tool: {other:?}"),
    }
    store.attach_tool(&profile.id, &tool.id).await.unwrap();
    assert!(
        !store.delete_unused_tool(&tool.id).await.unwrap(),
        "attached"
    );
    assert!(
        !store.delete_unused_tool_host(&host.host.id).await.unwrap(),
        "serves a tool"
    );
    assert_eq!(
        store.tools_of_host(&host.host.id).await.unwrap(),
        std::slice::from_ref(&tool.id)
    );

    // Two changes of a tool, one field each, each sent by a caller that read the tool before
    // the other wrote: neither undoes the other.
    let described = Tool {
        description: "looks things up".to_owned(),
        input_schema: serde_json::json!({"type": "object", "properties": {"q": {}}}),
        ..tool.clone()
    };
    let description = UpdateTool {
        description: Some(described.description.clone()),
        ..Default::default()
    };
    let changed = store.change_tool(&tool.id, description).await.unwrap();
    assert_eq!(
        changed.map(|t| t.description),
        Some(described.description.clone())
    );
    let schema = UpdateTool {
        input_schema: Some(described.input_schema.clone()),
        ..Default::default()
    };
    let changed = store.change_tool(&tool.id, schema).await.unwrap();
    assert_eq!(changed.as_ref(), Some(&described), "the tool as stored");
    assert_eq!(store.tool(&tool.id).await.unwrap(), Some(described));
    // A host moved, then its secret changed by a caller that read it before the move: the
    // move stays.
    let moved = ToolHost {
        url: "http://127.0.0.1:10/mcp".to_owned(),
        ..host.host.clone()
    };
    let move_it = UpdateToolHost {
        url: Some(moved.url.clone()),
        secret: None,
    };
    let changed = store
        .change_tool_host(&host.host.id, &move_it)
        .await
        .unwrap();
    assert_eq!(changed.as_ref(), Some(&moved));
    let new_secret = UpdateToolHost {
        url: None,
        secret: Some("new-secret".to_owned()),
    };
    let changed = store.change_tool_host(&host.host.id, &new_secret);
    assert_eq!(changed.await.unwrap().as_ref(), Some(&moved));
    assert_eq!(
        store.tool_host(&host.host.id).await.unwrap(),
        Some(moved.clone())
    );
    assert_eq!(
        store.profile_tools(&profile.id).await.unwrap()[0].1.secret,
        "new-secret"
    );

    // Hosts are listed in the order they were registered, a page at a time.
    let (_, second) = add_tool(&store, "second").await;
    let first_page = store.list_tool_hosts(None, 1).await.unwrap();
    assert_eq!(first_page.items, std::slice::from_ref(&moved));
    let cursor = first_page.next_cursor.expect("a second page");
    let cursor: ToolHostId = cursor.parse().unwrap();
    let second_page = store.list_tool_hosts(Some(&cursor), 1).await.unwrap();
    assert_eq!(second_page.items, std::slice::from_ref(&second.host));
    assert_eq!(second_page.next_cursor, None);

    assert!(store.detach_tool(&profile.id, &tool.id).await.unwrap());
    assert!(store.delete_unused_tool(&tool.id).await.unwrap());
    assert!(store.delete_unused_tool_host(&host.host.id).await.unwrap());
    let gone = store.change_tool(&tool.id, UpdateTool::default()).await;
    assert_eq!(gone.unwrap(), None, "a tool that is gone is not made again");
    let gone = store.change_tool_host(&host.host.id, &new_secret).await;
    assert_eq!(gone.unwrap(), None, "a host that is gone is not made again");
    assert!(store.tool(&tool.id).await.unwrap().is_none());
    assert_eq!(store.list_tools(None, 10).await.unwrap().items.len(), 1);
    assert_eq!(
        store.list_tool_hosts(None, 10).await.unwrap().items,
        [second.host]
    );
}

async fn keys_are_found_by_hash_and_paged(store: Store) {
    let mut keys = Vec::new();
    for n in 0u8..3 {
        let key = ApiKey {
            id: ApiKeyId::generate(),
            name: format!("key {n}"),
            prefix: "edk_abcd".to_owned(),
            scope: Scope::Write,
            instances: None,
            created_at: Timestamp::now(),
            last_used_at: None,
            revoked_at: None,
        };
        store.insert_api_key(&key, &[n; 32]).await.unwrap();
        keys.push(key);
    }
    let reused = ApiKey {
        id: ApiKeyId::generate(),
        ..keys[0].clone()
    };
    assert!(matches!(
        store.insert_api_key(&reused, &[0; 32]).await,
        Err(StoreError::Duplicate(_))
    ));
    assert_eq!(
        store.api_key_by_hash(&[1; 32]).await.unwrap(),
        Some(keys[1].clone())
    );
    assert_eq!(store.api_key_by_hash(&[9; 32]).await.unwrap(), None);

    let mut revoked = keys[2].clone();
    revoked.revoked_at = Some(Timestamp::now());
    store
        .revoke_api_key(&revoked.id, revoked.revoked_at.as_ref().unwrap())
        .await
        .unwrap();
    assert_eq!(
        store.api_key(&revoked.id).await.unwrap(),
        Some(revoked.clone())
    );
    // A use recorded after (or racing) the revocation writes its time and nothing else: the
    // key stays revoked, and its other fields stay as they were.
    let used = Timestamp::now();
    store.record_api_key_use(&revoked.id, &used).await.unwrap();
    revoked.last_used_at = Some(used);
    assert_eq!(
        store.api_key(&revoked.id).await.unwrap(),
        Some(revoked.clone())
    );

    let first = store.list_api_keys(None, 2).await.unwrap();
    assert_eq!(first.items, keys[..2]);
    let cursor: ApiKeyId = first.next_cursor.unwrap().parse().unwrap();
    let rest = store.list_api_keys(Some(&cursor), 2).await.unwrap();
    assert_eq!(rest.items, [revoked]);
}

async fn a_session_runs_one_turn_at_a_time_even_when_inserts_race(store: Store) {
    let (_, _, session) = a_session(&store).await;
    let racing: Vec<Turn> = (0..8).map(|_| turn_in(&session.id)).collect();
    let mut tasks = Vec::new();
    for turn in racing.clone() {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store.insert_turn_if_idle(&turn, "r").await.unwrap()
        }));
    }
    let mut busy = Vec::new();
    for task in tasks {
        busy.push(task.await.unwrap());
    }
    let winners: Vec<&Turn> = racing
        .iter()
        .zip(&busy)
        .filter(|(_, busy)| busy.is_none())
        .map(|(turn, _)| turn)
        .collect();
    assert_eq!(winners.len(), 1, "exactly one insert wins: {busy:?}");
    let winner = winners[0];
    for other in busy.iter().flatten() {
        assert_eq!(other, &winner.id, "the losers are told which turn runs");
    }
    let listed = store.list_turns(&session.id, None, 10, None).await.unwrap();
    assert_eq!(listed.items, std::slice::from_ref(winner));

    let mut done = winner.clone();
    done.state = TurnState::Completed;
    store.update_turn(&done).await.unwrap();
    let next = turn_in(&session.id);
    assert_eq!(store.insert_turn_if_idle(&next, "r").await.unwrap(), None);
    let queued = store
        .list_turns(&session.id, None, 10, Some(TurnState::Queued))
        .await
        .unwrap();
    assert_eq!(queued.items, std::slice::from_ref(&next));
    assert_eq!(
        store
            .turns_left_by_their_driver(0, Some("r"))
            .await
            .unwrap(),
        [next],
        "the unfinished one, when its driver restarted"
    );
}

async fn concurrent_appends_to_one_log_get_every_number_once(store: Store) {
    let (_, _, session) = a_session(&store).await;
    let turn = turn_in(&session.id);
    store.insert_turn_if_idle(&turn, "r").await.unwrap();
    let turn_id = Arc::new(turn.id.clone());
    let mut tasks = Vec::new();
    for n in 0..24 {
        let store = store.clone();
        let turn_id = turn_id.clone();
        tasks.push(tokio::spawn(async move {
            let kind = TurnEventKind::MessageDelta {
                text: format!("{n}"),
            };
            store.append_turn_event(&turn_id, &kind).await.unwrap().seq
        }));
    }
    let mut seqs = Vec::new();
    for task in tasks {
        seqs.push(task.await.unwrap());
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=24).collect::<Vec<u64>>());
    let logged = store.turn_events_after(&turn.id, 0).await.unwrap();
    assert_eq!(
        logged.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=24).collect::<Vec<u64>>()
    );
}

async fn a_finished_turn_has_its_last_event_and_readers_see_the_tail(store: Store) {
    let (_, _, session) = a_session(&store).await;
    let turn = turn_in(&session.id);
    store.insert_turn_if_idle(&turn, "r").await.unwrap();
    // The turn's new state and the event that tells it, together.
    let mut turn = turn;
    turn.state = TurnState::Running;
    let started = store
        .update_turn_and_log(&turn, &[TurnEventKind::TurnStarted])
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        started.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1],
        "the log's first event"
    );
    assert_eq!(
        store
            .turn(&session.id, &turn.id)
            .await
            .unwrap()
            .unwrap()
            .state,
        TurnState::Running
    );
    let delta = TurnEventKind::MessageDelta {
        text: "héllo ✓".to_owned(),
    };
    store.append_turn_event(&turn.id, &delta).await.unwrap();

    let mut finished = turn.clone();
    finished.state = TurnState::Completed;
    finished.output = Some("héllo ✓".to_owned());
    let last = TurnEventKind::TurnFinished {
        state: TurnState::Completed,
        output: finished.output.clone(),
        error: None,
    };
    // The runtime's last events go to the log with the turn's end, in one write.
    let completed = TurnEventKind::MessageCompleted {
        text: "héllo ✓".to_owned(),
        usage: None,
    };
    let ended = store
        .finish_turn(&finished, std::slice::from_ref(&completed), &last)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        ended
            .iter()
            .map(|e| (e.seq, e.kind.clone()))
            .collect::<Vec<_>>(),
        [(3, completed.clone()), (4, last.clone())]
    );
    // A turn is finished once: a second end (another replica's, say) changes nothing, and a
    // driver that had been cut off writes nothing more to it, not even the events before it.
    let mut again = finished.clone();
    again.state = TurnState::Interrupted;
    assert_eq!(
        store
            .finish_turn(&again, std::slice::from_ref(&delta), &last)
            .await
            .unwrap(),
        None
    );
    assert!(matches!(
        store.update_turn(&again).await,
        Err(StoreError::TurnEnded(_))
    ));
    assert_eq!(
        store
            .update_turn_and_log(&again, std::slice::from_ref(&delta))
            .await
            .unwrap(),
        None
    );
    assert!(matches!(
        store
            .append_turn_events(&turn.id, std::slice::from_ref(&delta))
            .await,
        Err(StoreError::TurnEnded(_))
    ));
    assert_eq!(store.turn_events_after(&turn.id, 0).await.unwrap().len(), 4);
    assert_eq!(
        store.turn(&session.id, &turn.id).await.unwrap(),
        Some(finished.clone())
    );
    let tail = store.turn_events_after(&turn.id, 1).await.unwrap();
    assert_eq!(
        tail.iter().map(|e| e.kind.clone()).collect::<Vec<_>>(),
        [delta, completed, last]
    );
    assert!(
        store
            .finished_turns_without_their_end()
            .await
            .unwrap()
            .is_empty()
    );

    // A finished turn whose log lacks its end (as an older version could leave one) is found.
    let next = turn_in(&session.id);
    store.insert_turn_if_idle(&next, "r").await.unwrap();
    let mut failed = next.clone();
    failed.state = TurnState::Failed;
    store.update_turn(&failed).await.unwrap();
    assert_eq!(
        store.finished_turns_without_their_end().await.unwrap(),
        [failed.clone()]
    );
    // Its end is appended, though the turn has finished.
    let end = TurnEventKind::TurnFinished {
        state: TurnState::Failed,
        output: None,
        error: None,
    };
    store.append_missing_end(&failed.id, &end).await.unwrap();
    assert!(
        store
            .finished_turns_without_their_end()
            .await
            .unwrap()
            .is_empty()
    );
}

async fn a_session_or_profile_with_an_unfinished_turn_is_not_deleted(store: Store) {
    let (_, profile, session) = a_session(&store).await;
    let turn = turn_in(&session.id);
    store.insert_turn_if_idle(&turn, "r").await.unwrap();
    assert!(!store.delete_idle_session(&session.id).await.unwrap());
    assert!(!store.delete_idle_profile(&profile.id).await.unwrap());
    let kept = store.profile(&profile.instance_id, &profile.id).await;
    assert_eq!(kept.unwrap().as_ref(), Some(&profile));
    let mut titled = session.clone();
    titled.title = Some("kept".to_owned());
    let change = SessionChange::Title("kept".to_owned());
    let changed = store.change_session(&session.id, change).await.unwrap();
    assert_eq!(changed.as_ref(), Some(&titled), "the session as stored");
    assert_eq!(
        store.session(&profile.id, &session.id).await.unwrap(),
        Some(titled.clone())
    );

    let mut done = turn.clone();
    done.state = TurnState::Cancelled;
    store.update_turn(&done).await.unwrap();
    let other = add_session(&store, &profile).await;
    let page = store.list_sessions(&profile.id, None, 1).await.unwrap();
    assert_eq!(page.items, [titled]);
    let cursor: SessionId = page.next_cursor.unwrap().parse().unwrap();
    assert_eq!(
        store
            .list_sessions(&profile.id, Some(&cursor), 1)
            .await
            .unwrap()
            .items,
        std::slice::from_ref(&other)
    );
    assert!(store.delete_idle_session(&session.id).await.unwrap());
    assert!(store.turn(&session.id, &turn.id).await.unwrap().is_none());
    // The profile's other session has no turn: the profile goes, with it.
    assert!(store.delete_idle_profile(&profile.id).await.unwrap());
    let gone = store.profile(&profile.instance_id, &profile.id).await;
    assert_eq!(gone.unwrap(), None);
    assert_eq!(store.session(&profile.id, &other.id).await.unwrap(), None);
    assert!(!store.delete_idle_profile(&profile.id).await.unwrap());
}

/// A profile's deletion and a turn's start on one of its sessions, sent at once: either the
/// turn is stored and the profile kept, or the profile is gone and the turn refused; never a
/// deleted profile under a stored turn (its driver would run a turn that no longer exists).
async fn a_profile_deleted_as_a_turn_starts_is_kept_or_the_turn_refused(store: Store) {
    let (instance, _, _) = a_session(&store).await;
    for round in 0..24 {
        let profile = add_profile(&store, &instance.id, &format!("racing-{round}")).await;
        let session = add_session(&store, &profile).await;
        let turn = turn_in(&session.id);
        let starting = tokio::spawn({
            let (store, turn) = (store.clone(), turn.clone());
            async move { store.insert_turn_if_idle(&turn, "r").await }
        });
        let deleting = tokio::spawn({
            let (store, id) = (store.clone(), profile.id.clone());
            async move { store.delete_idle_profile(&id).await.unwrap() }
        });
        let (started, gone) = (starting.await.unwrap(), deleting.await.unwrap());
        let stored = store.turn(&session.id, &turn.id).await.unwrap();
        let profile_now = store.profile(&instance.id, &profile.id).await.unwrap();
        if gone {
            assert!(
                started.is_err(),
                "round {round}: a turn started on a deleted profile"
            );
            assert_eq!((stored, profile_now), (None, None), "round {round}");
        } else {
            assert_eq!(started.unwrap(), None, "round {round}: the turn is stored");
            assert_eq!(stored.as_ref(), Some(&turn), "round {round}");
            assert_eq!(profile_now.as_ref(), Some(&profile), "round {round}");
        }
    }
}

/// A session is found by the runtime's stored session it continues, in its own profile only.
async fn a_session_is_found_by_the_stored_session_it_continues(store: Store) {
    let (instance, profile, session) = a_session(&store).await;
    let native = NativeSessionId::new("20261207_000000_a1b2c3");
    assert_eq!(
        store
            .session_continuing(&profile.id, &native)
            .await
            .unwrap(),
        None
    );
    let changed = SessionChange::NativeSessionId(native.clone());
    store.change_session(&session.id, changed).await.unwrap();
    // Another session of the profile whose title holds U+0000 (which PostgreSQL's `jsonb`
    // refuses) is no obstacle.
    let odd = add_session(&store, &profile).await;
    let title = SessionChange::Title("odd \u{0} title".to_owned());
    store.change_session(&odd.id, title).await.unwrap();
    let found = store
        .session_continuing(&profile.id, &native)
        .await
        .unwrap();
    assert_eq!(found.map(|s| s.id), Some(session.id.clone()));
    // Only in its own profile, and only that stored session.
    let other = add_profile(&store, &instance.id, "other").await;
    assert_eq!(
        store.session_continuing(&other.id, &native).await.unwrap(),
        None
    );
    let unknown = NativeSessionId::new("20261207_000000_ffffff");
    assert_eq!(
        store
            .session_continuing(&profile.id, &unknown)
            .await
            .unwrap(),
        None
    );
}

/// A caller's new title and the native session id a first turn learns are written at about the
/// same time, each by a writer that read the session before the other wrote: neither undoes
/// the other, in either order, and a session that is gone is not made again. A title may hold
/// any character (PostgreSQL's `jsonb` would refuse U+0000).
async fn a_sessions_changes_never_undo_each_other(store: Store) {
    let (_, profile, session) = a_session(&store).await;
    let native = NativeSessionId::new("20261206_000000_abcdef");
    let title = |text: &str| SessionChange::Title(text.to_owned());
    // A title may hold U+0000, quotes, backslashes and any character, also when the native id
    // is set after it.
    let changes = [
        (
            title("first \u{0} one"),
            SessionChange::NativeSessionId(native.clone()),
            "first \u{0} one",
        ),
        (
            SessionChange::NativeSessionId(native.clone()),
            title("second \u{0} \"one\" \\ é 🦀"),
            "second \u{0} \"one\" \\ é 🦀",
        ),
    ];
    for (one, other, expected_title) in changes {
        let changed = store.change_session(&session.id, one).await.unwrap();
        assert!(changed.is_some(), "the session as stored");
        let both = store.change_session(&session.id, other).await.unwrap();
        let stored = store.session(&profile.id, &session.id).await.unwrap();
        assert_eq!(both, stored, "the reply is the session as stored");
        let stored = stored.unwrap();
        assert_eq!(stored.native_session_id.as_ref(), Some(&native));
        assert_eq!(stored.title.as_deref(), Some(expected_title));
        assert_eq!(
            (&stored.id, &stored.created_at),
            (&session.id, &session.created_at),
            "the rest as it was"
        );
    }
    assert!(store.delete_idle_session(&session.id).await.unwrap());
    let gone = store
        .change_session(&session.id, title("late"))
        .await
        .unwrap();
    assert_eq!(gone, None);
    assert_eq!(store.session(&profile.id, &session.id).await.unwrap(), None);
}

async fn idempotency_keys_claim_replay_and_release(store: Store) {
    let claim = |key: &'static str, body: &'static [u8]| {
        let store = store.clone();
        async move {
            store
                .claim_idempotent(key, "POST", "/v1/instances", body)
                .await
                .unwrap()
        }
    };
    assert_eq!(claim("k1", b"{}").await, Idempotency::New);
    assert_eq!(claim("k1", b"{}").await, Idempotency::InProgress);
    assert_eq!(claim("k1", b"{\"a\":1}").await, Idempotency::Mismatch);
    store
        .finish_idempotent("k1", 201, b"{\"id\":1}", Some("application/json"))
        .await
        .unwrap();
    assert_eq!(
        claim("k1", b"{}").await,
        Idempotency::Replay {
            status: 201,
            body: b"{\"id\":1}".to_vec(),
            content_type: Some("application/json".to_owned()),
        }
    );
    store.release_idempotent("k1").await.unwrap();
    assert!(
        matches!(claim("k1", b"{}").await, Idempotency::Replay { .. }),
        "a finished reply is not released"
    );

    assert_eq!(claim("k2", b"").await, Idempotency::New);
    store.release_idempotent("k2").await.unwrap();
    assert_eq!(
        claim("k2", b"").await,
        Idempotency::New,
        "released: runs again"
    );
}

/// On PostgreSQL a delete that checks that nothing refers to a row could miss an insert in
/// flight, and its cascade then remove what that insert committed. Here an attachment and an
/// unfinished turn are inserted by another connection's open transaction; the delete that
/// starts meanwhile waits for it, then sees them and keeps everything. (SQLite runs one writer
/// at a time.)
#[tokio::test]
async fn on_postgres_a_delete_waits_for_an_insert_in_flight_and_keeps_what_it_made() {
    use sqlx::Connection;
    let database = testkit::postgres::database().await;
    let store = Store::open(database.url()).await.unwrap();
    let (instance, _) = add_instance(&store, instance("i", ProviderKind::Embedded, &[])).await;
    let profile = add_profile(&store, &instance.id, "default").await;
    let (tool, _) = add_tool(&store, "lookup").await;
    let session = add_session(&store, &profile).await;
    let turn = turn_in(&session.id);
    let mut other = sqlx::PgConnection::connect(database.url()).await.unwrap();

    let mut in_flight = other.begin().await.unwrap();
    sqlx::query("INSERT INTO profile_tools (profile_id, tool_id) VALUES ($1, $2)")
        .bind(profile.id.as_str())
        .bind(tool.id.as_str())
        .execute(&mut *in_flight)
        .await
        .unwrap();
    sqlx::query("INSERT INTO turns (id, session_id, state, body) VALUES ($1, $2, 'queued', $3)")
        .bind(turn.id.as_str())
        .bind(session.id.as_str())
        .bind(serde_json::to_string(&turn).unwrap())
        .execute(&mut *in_flight)
        .await
        .unwrap();
    let deleting_tool = {
        let (store, tool) = (store.clone(), tool.id.clone());
        tokio::spawn(async move { store.delete_unused_tool(&tool).await.unwrap() })
    };
    let deleting_session = {
        let (store, session) = (store.clone(), session.id.clone());
        tokio::spawn(async move { store.delete_idle_session(&session).await.unwrap() })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !deleting_tool.is_finished() && !deleting_session.is_finished(),
        "they wait"
    );
    in_flight.commit().await.unwrap();

    assert!(!deleting_tool.await.unwrap(), "the tool is in use");
    assert!(
        !deleting_session.await.unwrap(),
        "the session has an unfinished turn"
    );
    let attached = store.profile_tools(&profile.id).await.unwrap();
    assert_eq!(attached.len(), 1, "the attachment is kept");
    assert!(
        store.turn(&session.id, &turn.id).await.unwrap().is_some(),
        "the turn is kept"
    );
    other.close().await.unwrap();
    store.close().await;
}

/// Stores something, closes the store, opens the database again by `url` and finds it there.
async fn what_is_stored_is_there_after_reopening(url: &str) {
    let store = Store::open(url).await.unwrap();
    let (instance, _, session) = a_session(&store).await;
    let turn = turn_in(&session.id);
    store.insert_turn_if_idle(&turn, "r").await.unwrap();
    store
        .append_turn_event(&turn.id, &TurnEventKind::TurnStarted)
        .await
        .unwrap();
    store.close().await;

    let again = Store::open(url).await.unwrap();
    assert!(again.instance(&instance.id).await.unwrap().is_some());
    let events = again.turn_events_after(&turn.id, 0).await.unwrap();
    assert_eq!(events.len(), 1);
    let next = again
        .append_turn_event(&turn.id, &TurnEventKind::MessageStarted)
        .await
        .unwrap();
    assert_eq!(next.seq, 2, "numbering goes on where it stopped");
    again.close().await;
}

mod reopening {
    #[tokio::test]
    async fn sqlite() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("edith.db").display());
        super::what_is_stored_is_there_after_reopening(&url).await;
        // `sqlite:PATH` names the same file.
        let url = format!("sqlite:{}", dir.path().join("edith.db").display());
        let store = super::Store::open(&url).await.unwrap();
        assert_eq!(
            store
                .list_instances(None, 10, None, None)
                .await
                .unwrap()
                .items
                .len(),
            1
        );
    }

    #[tokio::test]
    async fn postgres() {
        let database = testkit::postgres::database().await;
        super::what_is_stored_is_there_after_reopening(database.url()).await;
    }
}

#[tokio::test]
async fn a_url_of_another_kind_is_refused_saying_which_kinds_are_known() {
    match Store::open("mysql://root@127.0.0.1/edith").await {
        Err(StoreError::Url(message)) => {
            assert!(message.contains("postgres://"), "{message}");
            assert!(message.contains("sqlite:"), "{message}");
        }
        other => panic!("a MySQL URL: {other:?}"),
    }
    // A libpq `key=value` string (or any text without a scheme) is not taken for a file name.
    assert!(matches!(
        Store::open("host=localhost dbname=edith password=s3cret").await,
        Err(StoreError::Url(_))
    ));
    assert!(!std::path::Path::new("host=localhost dbname=edith password=s3cret").exists());
    match Store::open("postgres://[::1").await {
        Err(StoreError::Url(message)) => assert!(message.contains("not valid"), "{message}"),
        other => panic!("a broken URL: {other:?}"),
    }
}

/// What one replica announces on PostgreSQL, another hears; nobody hears itself, and SQLite
/// has nobody else to tell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_hear_each_others_announcements_but_not_their_own() {
    let database = testkit::postgres::database().await;
    let a = Store::open(database.url()).await.unwrap().named("a");
    let b = Store::open(database.url()).await.unwrap().named("b");
    let mut hears_a = a.listen().await.unwrap().expect("PostgreSQL listens");
    let mut hears_b = b.listen().await.unwrap().expect("PostgreSQL listens");

    let (_, profile, session) = a_session(&a).await;
    let (tool, _) = add_tool(&a, "t").await;
    let turn = turn_in(&session.id);
    a.insert_turn_if_idle(&turn, "a").await.unwrap();
    a.append_turn_events(&turn.id, &[TurnEventKind::TurnStarted])
        .await
        .unwrap();
    let within = std::time::Duration::from_secs(10);
    let heard = tokio::time::timeout(within, hears_b.next()).await;
    assert_eq!(
        heard.expect("heard in time").unwrap(),
        Announcement::Changed {
            channel: Channel::TurnEvents,
            id: turn.id.to_string()
        }
    );
    b.revoke_api_key(
        &edith_types::ApiKeyId::generate(),
        &edith_types::Timestamp::now(),
    )
    .await
    .unwrap();
    match tokio::time::timeout(within, hears_a.next()).await {
        Ok(Ok(Announcement::Changed { channel, .. })) => assert_eq!(channel, Channel::KeyRevoked),
        other => panic!("a hears b's revocation, and not its own append first: {other:?}"),
    }
    // A profile's tools changing is heard with the profile's id; a tool's definition changing,
    // as touching every profile.
    a.attach_tool(&profile.id, &tool.id).await.unwrap();
    a.detach_tool(&profile.id, &tool.id).await.unwrap();
    a.change_tool(&tool.id, UpdateTool::default())
        .await
        .unwrap();
    for id in [
        profile.id.as_str(),
        profile.id.as_str(),
        Channel::EVERY_PROFILE,
    ] {
        let heard = tokio::time::timeout(within, hears_b.next()).await;
        assert_eq!(
            heard.expect("heard in time").unwrap(),
            Announcement::Changed {
                channel: Channel::ToolsChanged,
                id: id.to_owned()
            }
        );
    }
    let quiet = std::time::Duration::from_millis(300);
    assert!(
        tokio::time::timeout(quiet, hears_b.next()).await.is_err(),
        "b does not hear itself"
    );
    // A listener holds a connection of its store's pool: closing waits for it to go.
    drop((hears_a, hears_b));
    a.close().await;
    b.close().await;

    let dir = tempfile::tempdir().unwrap();
    let sqlite = Store::open_sqlite(&dir.path().join("edith.db"))
        .await
        .unwrap();
    assert!(sqlite.listen().await.unwrap().is_none());
}

/// The two migration sets make the same tables with the same columns (PostgreSQL's `rowid`
/// stands in for SQLite's implicit one).
#[tokio::test]
async fn both_backends_make_the_same_schema() {
    use sqlx::Connection;

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edith.db");
    Store::open_sqlite(&path).await.unwrap().close().await;
    let mut sqlite = sqlx::SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    let sqlite_columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p \
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name != '_sqlx_migrations' \
         ORDER BY 1, 2",
    )
    .fetch_all(&mut sqlite)
    .await
    .unwrap();
    let sqlite_indexes: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY 1",
    )
    .fetch_all(&mut sqlite)
    .await
    .unwrap();

    let database = testkit::postgres::database().await;
    Store::open(database.url()).await.unwrap().close().await;
    let mut postgres = sqlx::PgConnection::connect(database.url()).await.unwrap();
    let postgres_columns: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text FROM information_schema.columns \
         WHERE table_schema = 'public' AND table_name != '_sqlx_migrations' \
         AND column_name != 'rowid' ORDER BY 1, 2",
    )
    .fetch_all(&mut postgres)
    .await
    .unwrap();
    let postgres_indexes: Vec<String> = sqlx::query_scalar(
        "SELECT indexname::text FROM pg_indexes WHERE schemaname = 'public' \
         AND indexdef NOT LIKE 'CREATE UNIQUE INDEX %_pkey %' \
         AND indexdef NOT LIKE 'CREATE UNIQUE INDEX %_key %' ORDER BY 1",
    )
    .fetch_all(&mut postgres)
    .await
    .unwrap();
    postgres.close().await.unwrap();

    let mut sorted_sqlite = sqlite_columns.clone();
    sorted_sqlite.sort();
    let mut sorted_postgres = postgres_columns.clone();
    sorted_postgres.sort();
    assert_eq!(sorted_sqlite, sorted_postgres);
    assert!(sorted_sqlite.len() > 30, "{sorted_sqlite:?}");
    assert_eq!(sqlite_indexes, postgres_indexes, "indexes made by name");
}

async fn a_requests_path_is_read_at_once_as_far_as_it_exists(store: Store) {
    let (instance, profile, session) = a_session(&store).await;
    let (first, _) = add_tool(&store, "first").await;
    let (second, _) = add_tool(&store, "second").await;
    store.attach_tool(&profile.id, &second.id).await.unwrap();
    store.attach_tool(&profile.id, &first.id).await.unwrap();
    let other = add_profile(&store, &instance.id, "other").await;

    let whole = store
        .session_path(&instance.id, &profile.id, Some(&session.id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(whole.instance.instance.id, instance.id);
    assert_eq!(whole.instance.runtime_token, "runtime-secret");
    let read = whole.profile.unwrap();
    assert_eq!(
        read.tools,
        [second.id.clone(), first.id.clone()],
        "in the order attached"
    );
    assert_eq!(
        read,
        store
            .profile(&instance.id, &profile.id)
            .await
            .unwrap()
            .unwrap()
    );
    assert_eq!(whole.session, Some(session.clone()));

    // Without a session asked for, or with one that is not this profile's: no session.
    let no_session = store
        .session_path(&instance.id, &profile.id, None)
        .await
        .unwrap()
        .unwrap();
    assert!(no_session.profile.is_some() && no_session.session.is_none());
    let elsewhere = store
        .session_path(&instance.id, &other.id, Some(&session.id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(elsewhere.profile.unwrap().tools, []);
    assert!(elsewhere.session.is_none(), "a session of another profile");
    // A profile that is not there, or an instance that is not.
    let unknown = store
        .session_path(&instance.id, &ProfileId::generate(), Some(&session.id))
        .await
        .unwrap()
        .unwrap();
    assert!(unknown.profile.is_none() && unknown.session.is_none());
    assert!(
        store
            .session_path(&InstanceId::generate(), &profile.id, None)
            .await
            .unwrap()
            .is_none()
    );
}

async fn a_turn_is_found_only_on_its_own_path(store: Store) {
    let (other_instance, _) =
        add_instance(&store, instance("j", ProviderKind::Embedded, &[])).await;
    let (instance, profile, session) = a_session(&store).await;
    let turn = turn_in(&session.id);
    store.insert_turn_if_idle(&turn, "r").await.unwrap();
    let other_profile = add_profile(&store, &instance.id, "other").await;
    let other_session = add_session(&store, &profile).await;
    let unknown_turn = TurnId::generate();
    let paths = [
        (&instance.id, &profile.id, &session.id, &turn.id),
        (&other_instance.id, &profile.id, &session.id, &turn.id),
        (&instance.id, &other_profile.id, &session.id, &turn.id),
        (&instance.id, &profile.id, &other_session.id, &turn.id),
        (&instance.id, &profile.id, &session.id, &unknown_turn),
    ];
    for (n, (i, p, s, t)) in paths.into_iter().enumerate() {
        let found = store.turn_on_path(i, p, s, t).await.unwrap();
        let expected = (n == 0).then(|| turn.clone());
        assert_eq!(found, expected, "{i} {p} {s} {t}");
    }
}

/// Paths may be kept between reads (SQLite): every change made through the store shows in the
/// next read all the same.
async fn a_path_read_again_shows_every_change_made_since(store: Store) {
    let (mut instance, mut profile, mut session) = a_session(&store).await;
    let (tool, _) = add_tool(&store, "t").await;
    let path = |store: &Store, i: &Instance, p: &Profile, s: &Session| {
        let (store, i, p, s) = (store.clone(), i.id.clone(), p.id.clone(), s.id.clone());
        async move { store.session_path(&i, &p, Some(&s)).await.unwrap() }
    };
    // Read twice: the second read may be served from what the first kept.
    for _ in 0..2 {
        let read = path(&store, &instance, &profile, &session).await.unwrap();
        assert_eq!(read.session.as_ref(), Some(&session));
    }

    session.title = Some("titled".to_owned());
    let native = NativeSessionId::new("20261206_000000_abcdef");
    session.native_session_id = Some(native.clone());
    let change = SessionChange::Title("titled".to_owned());
    store.change_session(&session.id, change).await.unwrap();
    let change = SessionChange::NativeSessionId(native);
    store.change_session(&session.id, change).await.unwrap();
    let read = path(&store, &instance, &profile, &session).await.unwrap();
    assert_eq!(
        read.session.as_ref(),
        Some(&session),
        "the session's new body"
    );

    instance.state = InstanceState::Lost;
    let from = InstanceState::Provisioning;
    assert!(store.update_instance_from(&instance, from).await.unwrap());
    let read = path(&store, &instance, &profile, &session).await.unwrap();
    assert_eq!(read.instance.instance.state, InstanceState::Lost);
    instance.state = InstanceState::Ready;
    assert!(
        store
            .update_instance_from(&instance, InstanceState::Lost)
            .await
            .unwrap()
    );
    let read = path(&store, &instance, &profile, &session).await.unwrap();
    assert_eq!(read.instance.instance.state, InstanceState::Ready);

    profile.model = ModelConfig::Runtime;
    store.update_profile(&profile).await.unwrap();
    store.attach_tool(&profile.id, &tool.id).await.unwrap();
    let read = path(&store, &instance, &profile, &session).await.unwrap();
    profile.tools = vec![tool.id.clone()];
    assert_eq!(
        read.profile.as_ref(),
        Some(&profile),
        "the new body and tools"
    );
    assert!(store.detach_tool(&profile.id, &tool.id).await.unwrap());
    let read = path(&store, &instance, &profile, &session).await.unwrap();
    assert_eq!(read.profile.unwrap().tools, []);

    assert!(store.delete_idle_session(&session.id).await.unwrap());
    let read = path(&store, &instance, &profile, &session).await.unwrap();
    assert!(
        read.profile.is_some() && read.session.is_none(),
        "the session is gone"
    );

    let session = add_session(&store, &profile).await;
    path(&store, &instance, &profile, &session).await.unwrap();
    store.delete_profile(&profile.id).await.unwrap();
    let read = path(&store, &instance, &profile, &session).await.unwrap();
    assert!(
        read.profile.is_none() && read.session.is_none(),
        "the profile is gone"
    );

    let profile = add_profile(&store, &instance.id, "again").await;
    let session = add_session(&store, &profile).await;
    path(&store, &instance, &profile, &session).await.unwrap();
    store.purge_instance(&instance.id).await.unwrap();
    assert!(path(&store, &instance, &profile, &session).await.is_none());
}

/// Another connection to the SQLite file at `path`, holding its write lock until it commits.
async fn holding_the_write_lock(path: &std::path::Path) -> sqlx::SqliteConnection {
    let url = format!("sqlite://{}", path.display());
    let mut blocker = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut blocker)
        .await
        .unwrap();
    blocker
}

/// On SQLite, where paths are kept, a write that changes one is made and forgotten to the end
/// even when its caller goes away after starting it (a client that hangs up): the next read
/// shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_write_whose_caller_went_away_is_still_made_and_forgotten() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edith.db");
    let store = Store::open_sqlite(&path).await.unwrap();
    let (instance, profile, mut session) = a_session(&store).await;
    let read = || async {
        let path = store.session_path(&instance.id, &profile.id, Some(&session.id));
        path.await.unwrap().unwrap().session.unwrap()
    };
    assert_eq!(read().await.title, None, "read, and kept");
    session.title = Some("renamed".to_owned());
    // Another connection holds SQLite's write lock, so the write waits; its caller goes away.
    let mut blocker = holding_the_write_lock(&path).await;
    let change = SessionChange::Title("renamed".to_owned());
    let mut write = Box::pin(store.change_session(&session.id, change));
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(write.as_mut().poll(cx))).await;
    assert!(first.is_pending(), "the write waits for the lock");
    drop(write);
    sqlx::query("COMMIT").execute(&mut blocker).await.unwrap();
    let mut title = None;
    for _ in 0..500 {
        title = read().await.title;
        if title.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(title.as_deref(), Some("renamed"));
}

async fn events_appended_together_are_numbered_together(store: Store) {
    let (_, _, session) = a_session(&store).await;
    let turn = turn_in(&session.id);
    store.insert_turn_if_idle(&turn, "r").await.unwrap();
    let delta = |text: &str| TurnEventKind::MessageDelta {
        text: text.to_owned(),
    };
    store
        .append_turn_event(&turn.id, &TurnEventKind::TurnStarted)
        .await
        .unwrap();
    assert!(
        store
            .append_turn_events(&turn.id, &[])
            .await
            .unwrap()
            .is_empty()
    );
    let batch = [TurnEventKind::MessageStarted, delta("a"), delta("b")];
    let appended = store.append_turn_events(&turn.id, &batch).await.unwrap();
    let numbered: Vec<(u64, TurnEventKind)> =
        appended.iter().map(|e| (e.seq, e.kind.clone())).collect();
    assert_eq!(
        numbered,
        [
            (2, batch[0].clone()),
            (3, batch[1].clone()),
            (4, batch[2].clone())
        ]
    );
    store
        .append_turn_event(&turn.id, &delta("c"))
        .await
        .unwrap();
    let logged = store.turn_events_after(&turn.id, 0).await.unwrap();
    assert_eq!(logged[1..4], appended[..]);
    assert_eq!(logged[4].seq, 5);

    // Batches racing each other: every number once, each batch's events side by side.
    let mut tasks = Vec::new();
    for n in 0..8 {
        let (store, id) = (store.clone(), turn.id.clone());
        let batch: Vec<TurnEventKind> = (0..3).map(|i| delta(&format!("{n}.{i}"))).collect();
        tasks.push(tokio::spawn(async move {
            store.append_turn_events(&id, &batch).await.unwrap()
        }));
    }
    for task in tasks {
        let batch = task.await.unwrap();
        let seqs: Vec<u64> = batch.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [seqs[0], seqs[0] + 1, seqs[0] + 2], "{batch:?}");
    }
    let seqs: Vec<u64> = store
        .turn_events_after(&turn.id, 0)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (1..=29).collect::<Vec<u64>>());
}

/// On SQLite, the appends of turns running at once share statements (group commit), and each
/// caller is still told its own outcome: its events numbered after its log's last, or that its
/// turn has ended. On one thread, the appends started together queue behind the first one.
#[tokio::test(flavor = "current_thread")]
async fn appends_of_turns_running_at_once_share_statements_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_sqlite(&dir.path().join("edith.db"))
        .await
        .unwrap();
    let (_, profile, _) = a_session(&store).await;
    let mut turns = Vec::new();
    for _ in 0..16 {
        let session = add_session(&store, &profile).await;
        let turn = turn_in(&session.id);
        store.insert_turn_if_idle(&turn, "r").await.unwrap();
        store
            .append_turn_event(&turn.id, &TurnEventKind::TurnStarted)
            .await
            .unwrap();
        turns.push(turn);
    }
    let ended = turns.pop().unwrap();
    let last = end_turn(&store, &ended, TurnState::Completed).await;
    let delta = |text: String| TurnEventKind::MessageDelta { text };
    let writes_before = store.turn_log_writes().unwrap();

    // Each running turn twice (its second append waits for its first), and the ended one.
    let mut appends = Vec::new();
    for round in 0..2 {
        for (n, turn) in turns.iter().chain([&ended]).enumerate() {
            let (store, id) = (store.clone(), turn.id.clone());
            let events: Vec<TurnEventKind> = (0..=n % 3)
                .map(|i| delta(format!("{round}.{n}.{i}")))
                .collect();
            appends.push(tokio::spawn(async move {
                let appended = store.append_turn_events(&id, &events).await;
                (id, events, appended)
            }));
        }
    }
    let count = appends.len() as u64;
    for append in appends {
        let (id, events, appended) = append.await.unwrap();
        if id == ended.id {
            assert!(
                matches!(appended, Err(StoreError::TurnEnded(_))),
                "{appended:?}"
            );
            continue;
        }
        let appended = appended.unwrap();
        let kinds: Vec<&TurnEventKind> = appended.iter().map(|e| &e.kind).collect();
        assert_eq!(kinds, events.iter().collect::<Vec<_>>());
        let seqs: Vec<u64> = appended.iter().map(|e| e.seq).collect();
        let first = seqs[0];
        assert!(first >= 2, "after the turn's start: {seqs:?}");
        assert_eq!(seqs, (first..first + seqs.len() as u64).collect::<Vec<_>>());
        let logged = store.turn_events_after(&id, first - 1).await.unwrap();
        assert_eq!(logged[..appended.len()], appended[..]);
    }
    for turn in &turns {
        let seqs: Vec<u64> = store
            .turn_events_after(&turn.id, 0)
            .await
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    }
    // Each turn's first append is before its second in its log.
    for turn in &turns {
        let rounds: Vec<char> = store
            .turn_events_after(&turn.id, 1)
            .await
            .unwrap()
            .iter()
            .map(|e| match &e.kind {
                TurnEventKind::MessageDelta { text } => text.chars().next().unwrap(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(rounds.is_sorted() && rounds.contains(&'1'), "{rounds:?}");
    }
    let ended_log = store.turn_events_after(&ended.id, 0).await.unwrap();
    assert_eq!(
        ended_log.last().unwrap().kind,
        last,
        "nothing after its end"
    );
    let writes = store.turn_log_writes().unwrap() - writes_before;
    assert!(
        writes <= count / 4,
        "{count} appends took {writes} statements"
    );
}

/// On SQLite, an append whose caller is dropped while its statement runs still hands those who
/// came meanwhile to the next write: each is answered, and every log stays numbered without gaps.
#[tokio::test(flavor = "current_thread")]
async fn appends_waiting_behind_a_caller_that_left_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edith.db");
    let store = Store::open_sqlite(&path).await.unwrap();
    let (_, profile, _) = a_session(&store).await;
    let mut turns = Vec::new();
    for _ in 0..4 {
        let session = add_session(&store, &profile).await;
        let turn = turn_in(&session.id);
        store.insert_turn_if_idle(&turn, "r").await.unwrap();
        turns.push(turn.id);
    }
    let delta = || TurnEventKind::MessageDelta {
        text: "x".to_owned(),
    };
    // Another connection holds SQLite's write lock: the first caller takes the lead and its
    // statement waits for the lock; the caller is dropped meanwhile.
    let mut blocker = holding_the_write_lock(&path).await;
    let events = [delta(), delta()];
    let mut leader = Box::pin(store.append_turn_events(&turns[0], &events));
    let first = std::future::poll_fn(|cx| std::task::Poll::Ready(leader.as_mut().poll(cx))).await;
    assert!(first.is_pending(), "its statement waits for the lock");
    let waiting: Vec<_> = turns[1..]
        .iter()
        .map(|id| {
            let (store, id) = (store.clone(), id.clone());
            tokio::spawn(async move { store.append_turn_events(&id, &[delta()]).await })
        })
        .collect();
    tokio::task::yield_now().await;
    drop(leader);
    sqlx::query("COMMIT").execute(&mut blocker).await.unwrap();
    for append in waiting {
        let appended = tokio::time::timeout(std::time::Duration::from_secs(10), append)
            .await
            .expect("answered")
            .unwrap()
            .unwrap();
        assert_eq!(appended.iter().map(|e| e.seq).collect::<Vec<_>>(), [1]);
    }
    // The log of the caller that left holds its events or none, and takes the next after them.
    let after = store
        .append_turn_events(&turns[0], &[delta()])
        .await
        .unwrap();
    let seqs: Vec<u64> = store
        .turn_events_after(&turns[0], 0)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert!(seqs == [1] || seqs == [1, 2, 3], "{seqs:?}");
    assert_eq!(after[0].seq, *seqs.last().unwrap());
}
