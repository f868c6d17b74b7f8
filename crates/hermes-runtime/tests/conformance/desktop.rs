//! The Desktop REST routes, driven through the SDK's `HermesDesktop`: the same client against
//! our runtime and the real Hermes 0.19.0.

use hermes::native::StoredSessionId;
use hermes::native::desktop::{
    CronJobCreateBody, CronJobCreateQuery, CronJobDeleteQuery, CronJobGetQuery, CronJobListQuery,
    CronJobPauseQuery, CronJobResumeQuery, CronJobRunsQuery, CronJobTriggerQuery,
    CronJobUpdateBody, CronJobUpdateQuery, FsListQuery, FsReadTextQuery, FsWriteTextBody,
    GitBranchesQuery, GitStatusQuery, McpCatalogListQuery, ProfileCreateBody, ProfileRenameBody,
    SessionDeleteQuery, SessionGetQuery, SessionListQuery, SessionMessagesQuery,
    SessionSearchQuery, SessionUpdateBody, StatusGetQuery,
};
use hermes::{Error, HermesDesktop};
use serde_json::{Value, json};

use crate::conformance;
use crate::harness::{Peer, PeerOptions, TOKEN, Target};
use crate::sessions::prompted_session;
use crate::shared;

shared!(
    desktop_sessions_made_over_the_gateway_are_listed_read_renamed_and_deleted,
    sessions
);
conformance!(
    desktop_profiles_are_created_renamed_and_deleted_and_scope_sessions,
    profiles
);
conformance!(
    desktop_sessions_carry_their_accounts_directory_and_settings,
    session_columns
);
conformance!(desktop_files_and_git_of_the_workspace, files_and_git);
shared!(desktop_refusals_are_shaped_as_hermes_shapes_them, refusals);
shared!(desktop_capabilities_name_the_groups_served, capabilities);
conformance!(desktop_mcp_catalog_lists_the_manifests_given, mcp_catalog);
conformance!(desktop_cron_jobs_are_shared_with_cron_manage, cron_jobs);
shared!(
    desktop_plugin_routes_are_called_only_where_offered,
    plugin_routes
);
conformance!(
    desktop_skills_toolsets_and_config_are_read_and_changed,
    skills_toolsets_and_config
);

/// The checks here that share a runtime (`shared`).
pub(crate) const SHARED: &[crate::shared::Check] = &[
    desktop_sessions_made_over_the_gateway_are_listed_read_renamed_and_deleted::CHECK,
    desktop_refusals_are_shaped_as_hermes_shapes_them::CHECK,
    desktop_capabilities_name_the_groups_served::CHECK,
    desktop_plugin_routes_are_called_only_where_offered::CHECK,
];

fn desktop(peer: &Peer) -> HermesDesktop {
    HermesDesktop::remote(&peer.url(""), Some(TOKEN))
}

/// The status (`code`, `detail`) of a refused call.
fn refusal(error: Error) -> (u16, String) {
    match error {
        Error::Runtime { status, detail, .. } => (status, detail),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

async fn sessions(peer: &Peer) {
    let desktop = desktop(peer);
    let mut client = peer.connect().await;
    let (_, stored) = prompted_session(&mut client, "hello nimbus world").await;
    let stored = StoredSessionId::new(stored);

    let page = desktop
        .session_list(&SessionListQuery::default())
        .await
        .unwrap();
    // The runtime may hold other checks' sessions too: this one is found by its id.
    assert_eq!((page.limit, page.offset), (20, 0));
    let listed = (page.sessions.iter())
        .find(|listed| listed.columns.id == stored)
        .unwrap_or_else(|| panic!("{stored:?} listed: {page:?}"));
    assert_eq!(listed.columns.source, "conformance");
    assert_eq!(listed.columns.model.as_deref(), Some("fake-model"));
    assert_eq!(listed.columns.message_count, 2);
    assert_eq!(listed.preview, "hello nimbus world");
    assert!(listed.is_active && !listed.archived);
    assert!(listed.last_active >= listed.columns.started_at);

    // A prefix of the id names it too.
    let prefix = &stored.as_str()[..stored.as_str().len() - 2];
    let detail = desktop
        .session_get(&StoredSessionId::new(prefix), &SessionGetQuery::default())
        .await
        .unwrap();
    assert_eq!(detail.columns.id, stored);
    assert_eq!(detail.archived, 0);
    let read = desktop
        .session_messages(&stored, &SessionMessagesQuery::default())
        .await
        .unwrap();
    let roles: Vec<&str> = read.messages.iter().map(|m| m.role.as_str()).collect();
    assert_eq!(roles, ["user", "assistant"]);
    assert_eq!(read.messages[0].content, json!("hello nimbus world"));
    assert_eq!(read.pagination.returned, 2);
    assert_eq!(read.pagination.limit, None);
    let second = desktop
        .session_messages(
            &stored,
            &SessionMessagesQuery {
                offset: Some(1),
                limit: Some(5),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(second.messages.len(), 1);
    assert_eq!(second.messages[0].role, "assistant");

    let found = desktop
        .session_search(&SessionSearchQuery {
            q: Some("nimb".to_owned()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(found.results.len(), 1, "{found:?}");
    assert_eq!(found.results[0].session_id, stored);
    assert_eq!(found.results[0].role.as_deref(), Some("user"));
    assert!(
        found.results[0].snippet.contains(">>>nimbus<<<"),
        "{found:?}"
    );

    let renamed = desktop
        .session_update(
            &stored,
            &SessionUpdateBody {
                title: Some("  A   tidy\ttitle ".to_owned()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (renamed.title.as_str(), renamed.archived),
        ("A tidy title", None)
    );
    let archived = desktop
        .session_update(
            &stored,
            &SessionUpdateBody {
                archived: Some(true),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(archived.archived, Some(true));
    let default_list = desktop
        .session_list(&SessionListQuery::default())
        .await
        .unwrap();
    assert_eq!(
        default_list.total,
        page.total - 1,
        "archived sessions are left out"
    );
    assert!(
        !(default_list.sessions.iter()).any(|listed| listed.columns.id == stored),
        "{default_list:?}"
    );
    let only_archived = desktop
        .session_list(&SessionListQuery {
            archived: Some("only".to_owned()),
            ..Default::default()
        })
        .await
        .unwrap();
    let archived = (only_archived.sessions.iter())
        .find(|listed| listed.columns.id == stored)
        .unwrap_or_else(|| panic!("{stored:?} archived: {only_archived:?}"));
    assert_eq!(archived.columns.title.as_deref(), Some("A tidy title"));
    let nothing = desktop
        .session_update(&stored, &SessionUpdateBody::default())
        .await
        .unwrap_err();
    assert_eq!(
        refusal(nothing),
        (
            400,
            "Nothing to update; provide 'title' and/or 'archived'.".to_owned()
        )
    );

    let deleted = desktop
        .session_delete(&stored, &SessionDeleteQuery::default())
        .await
        .unwrap();
    assert_eq!((deleted.ok, deleted.already_absent), (true, None));
    let again = desktop
        .session_delete(&stored, &SessionDeleteQuery::default())
        .await
        .unwrap();
    assert_eq!(again.already_absent, Some(true));
    let gone = desktop
        .session_get(&stored, &SessionGetQuery::default())
        .await
        .unwrap_err();
    assert_eq!(refusal(gone), (404, "Session not found".to_owned()));
}

/// The stored detail of `stored`, once `ready` holds for it (bounded: Hermes writes some
/// columns off the reply's path).
async fn detail_once(
    desktop: &HermesDesktop,
    stored: &StoredSessionId,
    ready: impl Fn(&hermes::native::desktop::replies::SessionDetail) -> bool,
) -> hermes::native::desktop::replies::SessionDetail {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let detail = desktop
            .session_get(stored, &SessionGetQuery::default())
            .await
            .unwrap();
        if ready(&detail) {
            return detail;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never came to be: {detail:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

async fn session_columns(target: Target) {
    let peer = Peer::start(target).await;
    let desktop = desktop(&peer);
    let mut client = peer.connect().await;
    let work = std::fs::canonicalize(&peer.work).unwrap();
    let repo = work.join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    git(&repo, &["init", "-q", "-b", "trunk"]);

    // A session opened in a directory the client chose, with one exchange.
    let created = client
        .call(
            "session.create",
            json!({"source": "conformance", "cwd": repo.to_string_lossy()}),
        )
        .await;
    let live = created["session_id"].as_str().unwrap().to_owned();
    let stored = StoredSessionId::new(created["stored_session_id"].as_str().unwrap());
    client.submit(&live, "hello columns").await;
    client.events_until("message.complete").await;

    let detail = detail_once(&desktop, &stored, |d| d.columns.api_call_count > 0).await;
    let row = &detail.columns;
    assert_eq!(
        row.api_call_count, 1,
        "one model call; a title's is not counted"
    );
    assert!(row.input_tokens > 0 && row.output_tokens > 0, "{row:?}");
    assert_eq!(row.billing_provider.as_deref(), Some("custom"));
    assert_eq!(
        row.billing_base_url.as_deref(),
        Some(peer.model.base_url().trim_end_matches('/'))
    );
    assert_eq!(row.billing_mode, None);
    // No price is known for the endpoint: nothing is estimated, nothing is made up.
    assert_eq!(row.estimated_cost_usd, Some(0.0));
    assert_eq!(row.actual_cost_usd, None);
    assert_eq!(row.cost_status.as_deref(), Some("unknown"));
    assert_eq!(row.cost_source.as_deref(), Some("none"));
    assert_eq!(row.cwd.as_deref(), Some(repo.to_string_lossy().as_ref()));
    assert_eq!(
        row.git_branch, None,
        "git is looked at on a move, not at the start"
    );
    let model_config: Value =
        serde_json::from_str(detail.model_config.as_deref().expect("model_config")).unwrap();
    assert_eq!(model_config["max_iterations"], 90, "{model_config}");
    // Hermes stores the system prompt it sends; ours sends none (docs/runtimes.md).
    match target {
        Target::Hermes => assert!(detail.system_prompt.as_ref().is_some_and(|p| !p.is_empty())),
        Target::Ours => assert_eq!(detail.system_prompt, None),
    }
    // Lists leave the large columns out unless asked.
    let full_list = |full: Option<bool>| {
        let desktop = &desktop;
        async move {
            let query = SessionListQuery {
                full,
                ..Default::default()
            };
            let page = desktop.session_list(&query).await.unwrap();
            page.sessions[0].full.clone().unwrap_or_default()
        }
    };
    let blobs = full_list(Some(true)).await;
    assert_eq!(blobs.model_config, detail.model_config);
    assert_eq!(blobs.system_prompt, detail.system_prompt);
    assert_eq!(full_list(None).await, Default::default());
    let read = desktop
        .session_messages(&stored, &SessionMessagesQuery::default())
        .await
        .unwrap();
    let reasons: Vec<(&str, Option<&str>)> = read
        .messages
        .iter()
        .map(|m| (m.role.as_str(), m.finish_reason.as_deref()))
        .collect();
    assert_eq!(reasons, [("user", None), ("assistant", Some("stop"))]);

    // A move of a stored session is stored, and the git branch and repository found there.
    let below = repo.join("src");
    client
        .call(
            "session.cwd.set",
            json!({"session_id": live, "cwd": below.to_string_lossy()}),
        )
        .await;
    let moved = detail_once(&desktop, &stored, |d| d.columns.git_branch.is_some()).await;
    assert_eq!(
        moved.columns.cwd.as_deref(),
        Some(below.to_string_lossy().as_ref())
    );
    assert_eq!(moved.columns.git_branch.as_deref(), Some("trunk"));
    assert_eq!(
        moved.columns.git_repo_root.as_deref(),
        Some(repo.to_string_lossy().as_ref())
    );

    // Titled before its first prompt (the row is made then): what it was opened with is
    // stored all the same.
    let titled = client
        .call(
            "session.create",
            json!({"source": "conformance", "cwd": repo.to_string_lossy()}),
        )
        .await;
    let titled_live = titled["session_id"].as_str().unwrap().to_owned();
    let titled_stored = StoredSessionId::new(titled["stored_session_id"].as_str().unwrap());
    client
        .call(
            "session.title",
            json!({"session_id": titled_live, "title": "Named first"}),
        )
        .await;
    client.submit(&titled_live, "hello titled").await;
    client.events_until("message.complete").await;
    let named = detail_once(&desktop, &titled_stored, |d| d.columns.api_call_count > 0).await;
    assert_eq!(
        named.columns.cwd.as_deref(),
        Some(repo.to_string_lossy().as_ref())
    );
    assert!(named.model_config.is_some(), "{named:?}");
    assert_eq!(named.columns.title.as_deref(), Some("Named first"));

    // A session the client opened nowhere in particular stores no directory.
    let (_, other) = prompted_session(&mut client, "hello elsewhere").await;
    let other = StoredSessionId::new(other);
    let elsewhere = detail_once(&desktop, &other, |d| d.columns.api_call_count > 0).await;
    assert_eq!(elsewhere.columns.cwd, None);

    // Listing by directory: the directory and what is below it, never a sibling's prefix.
    let listed_under = |prefix: String| {
        let desktop = &desktop;
        async move {
            let page = desktop
                .session_list(&SessionListQuery {
                    cwd_prefix: Some(prefix),
                    ..Default::default()
                })
                .await
                .unwrap();
            page.sessions
                .into_iter()
                .map(|s| s.columns.id)
                .collect::<Vec<_>>()
        }
    };
    let repo_text = repo.to_string_lossy().into_owned();
    // Newest first: the titled one started last.
    let both = [titled_stored.clone(), stored.clone()];
    assert_eq!(listed_under(repo_text.clone()).await, both);
    assert_eq!(listed_under(format!("{repo_text}/")).await, both);
    assert_eq!(
        listed_under(below.to_string_lossy().into_owned()).await,
        std::slice::from_ref(&stored)
    );
    assert!(listed_under(format!("{repo_text}/sr")).await.is_empty());
    let sibling_prefix = repo_text[..repo_text.len() - 1].to_owned();
    assert!(listed_under(sibling_prefix).await.is_empty());

    // After a restart, a session resumed works where it was stored as working; one stored
    // without a directory works in the default one and still stores none.
    drop(client);
    let mut peer = peer;
    peer.restart().await;
    let mut again = peer.connect().await;
    let resumed = again
        .call("session.resume", json!({"session_id": stored.as_str()}))
        .await;
    assert_eq!(
        resumed["info"]["cwd"],
        json!(below.to_string_lossy()),
        "{resumed}"
    );
    let resumed = again
        .call("session.resume", json!({"session_id": other.as_str()}))
        .await;
    assert_eq!(
        resumed["info"]["cwd"],
        json!(work.to_string_lossy()),
        "{resumed}"
    );
    let desktop = HermesDesktop::remote(&peer.url(""), Some(TOKEN));
    let detail = desktop
        .session_get(&other, &SessionGetQuery::default())
        .await
        .unwrap();
    assert_eq!(detail.columns.cwd, None);
    peer.stop().await;
}

async fn profiles(target: Target) {
    let peer = Peer::start(target).await;
    let desktop = desktop(&peer);
    let created = desktop
        .profile_create(&ProfileCreateBody {
            name: "Work".to_owned(),
            clone_from_default: Some(true),
            description: Some("for work".to_owned()),
            ..Default::default()
        })
        .await
        .unwrap();
    let work_home = peer.home.join("profiles/work");
    assert_eq!(created.name, "Work", "the name as given");
    assert_eq!(created.path, work_home.to_string_lossy());
    assert!(
        work_home.join("config.yaml").is_file(),
        "a clone has the config"
    );
    desktop
        .profile_create(&ProfileCreateBody {
            name: "other".to_owned(),
            ..Default::default()
        })
        .await
        .unwrap();

    let listed = desktop.profile_list().await.unwrap();
    let names: Vec<&str> = listed.profiles.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["default", "other", "work"]);
    let work = &listed.profiles[2];
    assert_eq!(work.description, "for work");
    assert_eq!(work.model.as_deref(), Some("fake-model"));
    assert!(!work.is_default);
    assert!(
        listed.profiles[1].has_env,
        "a fresh profile has its own .env"
    );
    let status = desktop
        .status_get(&StatusGetQuery::default())
        .await
        .unwrap();
    assert_eq!(status.profiles, ["default", "other", "work"]);
    assert_eq!(status.version, "0.19.0");

    // A profile made over REST is one the gateway serves, and its sessions are its own.
    let mut client = peer.connect().await;
    let session = client
        .call(
            "session.create",
            json!({"profile": "work", "source": "conformance"}),
        )
        .await;
    let live = session["session_id"].as_str().unwrap().to_owned();
    let stored = StoredSessionId::new(session["stored_session_id"].as_str().unwrap());
    client.submit(&live, "in the work profile").await;
    client.events_until("message.complete").await;
    let work_client = desktop.for_profile("work");
    let in_work = work_client
        .session_list(&SessionListQuery::default())
        .await
        .unwrap();
    assert!(
        in_work.sessions.iter().any(|s| s.columns.id == stored),
        "{in_work:?}"
    );
    assert_eq!(in_work.sessions[0].profile.as_deref(), Some("work"));
    assert_eq!(in_work.sessions[0].is_default_profile, Some(false));
    let in_other = desktop
        .for_profile("other")
        .session_list(&SessionListQuery::default())
        .await
        .unwrap();
    assert_eq!(in_other.total, 0, "{in_other:?}");
    work_client.close();
    assert!(matches!(
        work_client.profile_list().await,
        Err(Error::Closed)
    ));
    assert!(
        desktop.profile_list().await.is_ok(),
        "the parent stays open"
    );

    // The sticky profile (`hermes profile use`), and the one the server runs as.
    let active = desktop.profile_active().await.unwrap();
    assert_eq!(
        (active.active.as_str(), active.current.as_str()),
        ("default", "default")
    );
    std::fs::write(peer.home.join("active_profile"), "work\n").unwrap();
    let active = desktop.profile_active().await.unwrap();
    assert_eq!(
        (active.active.as_str(), active.current.as_str()),
        ("work", "default")
    );

    let renamed = desktop
        .profile_rename(
            "work",
            &ProfileRenameBody {
                new_name: "desk".to_owned(),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        renamed.path,
        peer.home.join("profiles/desk").to_string_lossy()
    );
    assert_eq!(
        desktop.profile_active().await.unwrap().active,
        "desk",
        "the sticky profile follows its rename"
    );
    let moved = desktop
        .for_profile("desk")
        .session_list(&SessionListQuery::default())
        .await
        .unwrap();
    assert!(moved.sessions.iter().any(|s| s.columns.id == stored));
    let old = desktop
        .for_profile("work")
        .session_list(&SessionListQuery::default())
        .await
        .unwrap_err();
    assert_eq!(
        refusal(old),
        (404, "Profile 'work' does not exist.".to_owned())
    );

    let bad = |name: &str| ProfileCreateBody {
        name: name.to_owned(),
        ..Default::default()
    };
    let invalid = desktop.profile_create(&bad("Bad Name")).await.unwrap_err();
    assert_eq!(
        refusal(invalid),
        (
            400,
            "Invalid profile name 'bad name'. Must match [a-z0-9][a-z0-9_-]{0,63}".to_owned()
        )
    );
    let (status, detail) = refusal(desktop.profile_create(&bad("other")).await.unwrap_err());
    assert_eq!(status, 400);
    assert!(
        detail.starts_with("Profile 'other' already exists"),
        "{detail}"
    );
    let (status, _) = refusal(desktop.profile_create(&bad("default")).await.unwrap_err());
    assert_eq!(status, 400);
    let (status, detail) = refusal(desktop.profile_delete("default").await.unwrap_err());
    assert_eq!(status, 400);
    assert!(
        detail.starts_with("Cannot delete the default profile"),
        "{detail}"
    );
    let taken = desktop
        .profile_rename(
            "desk",
            &ProfileRenameBody {
                new_name: "other".to_owned(),
            },
        )
        .await
        .unwrap_err();
    assert_eq!(
        refusal(taken),
        (400, "Profile 'other' already exists.".to_owned())
    );

    let deleted = desktop.profile_delete("desk").await.unwrap();
    assert!(deleted.ok);
    assert!(!peer.home.join("profiles/desk").exists());
    assert_eq!(
        desktop.profile_active().await.unwrap().active,
        "default",
        "a deleted sticky profile falls back to the default"
    );
    let again = desktop.profile_delete("desk").await.unwrap_err();
    assert_eq!(
        refusal(again),
        (404, "Profile 'desk' does not exist.".to_owned())
    );
    peer.stop().await;
}

pub fn git(dir: &std::path::Path, args: &[&str]) {
    let status = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .env("HOME", dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

async fn files_and_git(target: Target) {
    let peer = Peer::start(target).await;
    let desktop = desktop(&peer);
    let work = std::fs::canonicalize(&peer.work).unwrap();
    std::fs::create_dir_all(work.join("src")).unwrap();
    std::fs::create_dir_all(work.join("node_modules")).unwrap();
    std::fs::write(work.join("README.md"), "line one\nline two\n").unwrap();
    std::fs::write(work.join("src/main.rs"), "fn main() {}\n").unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    git(&work, &["add", "README.md", "src/main.rs"]);
    git(&work, &["commit", "-q", "-m", "first"]);
    git(&work, &["branch", "feature"]);

    let listed = desktop
        .fs_list(&FsListQuery {
            path: work.to_string_lossy().into_owned(),
        })
        .await
        .unwrap();
    let names: Vec<(&str, bool)> = listed
        .entries
        .iter()
        .map(|e| (e.name.as_str(), e.is_directory))
        .collect();
    assert_eq!(names, [("src", true), ("README.md", false)], "{listed:?}");
    assert_eq!(
        listed.entries[1].path,
        work.join("README.md").to_string_lossy()
    );
    let missing = desktop
        .fs_list(&FsListQuery {
            path: work.join("nope").to_string_lossy().into_owned(),
        })
        .await
        .unwrap();
    assert_eq!(missing.error.as_deref(), Some("ENOENT"));

    let source = desktop
        .fs_read_text(&FsReadTextQuery {
            path: work.join("src/main.rs").to_string_lossy().into_owned(),
        })
        .await
        .unwrap();
    assert_eq!(source.text, "fn main() {}\n");
    assert_eq!((source.language.as_str(), source.byte_size), ("rust", 13));
    assert!(!source.binary && !source.truncated);

    let written = desktop
        .fs_write_text(&FsWriteTextBody {
            path: work.join("README.md").to_string_lossy().into_owned(),
            content: "line one\nline 2\nline three\n".to_owned(),
        })
        .await
        .unwrap();
    assert_eq!(written.byte_size, 27);
    std::fs::write(work.join("notes.txt"), "a\nb\nc").unwrap();
    let (status, detail) = refusal(
        desktop
            .fs_write_text(&FsWriteTextBody {
                path: work.join("no/such/dir.txt").to_string_lossy().into_owned(),
                content: String::new(),
            })
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (status, detail.as_str()),
        (400, "Parent directory does not exist")
    );

    let path = work.to_string_lossy().into_owned();
    let status = desktop
        .git_status(&GitStatusQuery { path: path.clone() })
        .await
        .unwrap()
        .expect("a repository");
    assert_eq!(status.branch.as_deref(), Some("main"));
    assert_eq!(status.default_branch.as_deref(), Some("main"));
    assert_eq!(
        (status.unstaged, status.untracked, status.changed),
        (2, 1, 2)
    );
    // README: one line changed, one added; notes.txt: three lines.
    assert_eq!((status.added, status.removed), (5, 1));
    let files: Vec<(&str, bool)> = status
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.untracked))
        .collect();
    assert_eq!(files, [("README.md", false), ("notes.txt", true)]);
    let branches = desktop
        .git_branches(&GitBranchesQuery { path: path.clone() })
        .await
        .unwrap();
    let mut names: Vec<(&str, bool)> = branches
        .branches
        .iter()
        .map(|b| (b.name.as_str(), b.checked_out))
        .collect();
    names.sort();
    assert_eq!(names, [("feature", false), ("main", true)]);
    let plain = work.join("src").to_string_lossy().into_owned();
    std::fs::remove_dir_all(work.join(".git")).unwrap();
    let outside_repo = desktop
        .git_status(&GitStatusQuery { path: plain })
        .await
        .unwrap();
    assert_eq!(outside_repo, None);
    peer.stop().await;
}

async fn refusals(peer: &Peer) {
    let anonymous = HermesDesktop::remote(&peer.url(""), Some("wrong"));
    let (status, detail) = refusal(anonymous.profile_list().await.unwrap_err());
    assert_eq!((status, detail.as_str()), (401, "Unauthorized"));
    let public = anonymous.status_get(&StatusGetQuery::default()).await;
    assert!(public.is_ok(), "status is public: {public:?}");

    let http = reqwest::Client::new();
    let missing = http
        .get(peer.url("/api/fs/list"))
        .header("X-Hermes-Session-Token", TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 422);
    let body: serde_json::Value = missing.json().await.unwrap();
    assert_eq!(body["detail"][0]["loc"], json!(["query", "path"]), "{body}");
    assert_eq!(body["detail"][0]["type"], "missing");
    let wrong_method = http
        .post(peer.url("/api/sessions"))
        .header("X-Hermes-Session-Token", TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_method.status(), 405);
    let bad_order = HermesDesktop::remote(&peer.url(""), Some(TOKEN))
        .session_list(&SessionListQuery {
            order: Some("sideways".to_owned()),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        refusal(bad_order),
        (400, "order must be one of: created, recent".to_owned())
    );
    let get = |path: &str| {
        http.get(peer.url(path))
            .header("X-Hermes-Session-Token", TOKEN)
            .send()
    };
    assert_eq!(
        get("/api/sessions?full=yes").await.unwrap().status(),
        200,
        "a flag reads yes"
    );
    let not_a_number = get("/api/sessions?limit=abc").await.unwrap();
    assert_eq!(not_a_number.status(), 422);
    let body: Value = not_a_number.json().await.unwrap();
    assert_eq!(body["detail"][0]["type"], "int_parsing", "{body}");
    assert_eq!(body["detail"][0]["loc"], json!(["query", "limit"]));
    assert_eq!(body["detail"][0]["input"], "abc");
    let no_body = http
        .patch(peer.url("/api/sessions/whatever"))
        .header("X-Hermes-Session-Token", TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(no_body.status(), 422);
    let body: Value = no_body.json().await.unwrap();
    assert_eq!(
        (
            body["detail"][0]["type"].clone(),
            body["detail"][0]["loc"].clone()
        ),
        (json!("missing"), json!(["body"]))
    );
    // The config routes take a profile's name as it is given.
    let capital = get("/api/config?profile=Work").await.unwrap();
    assert_eq!(capital.status(), 400);
    let body: Value = capital.json().await.unwrap();
    assert_eq!(
        body["detail"],
        "Invalid profile name 'Work'. Must match [a-z0-9][a-z0-9_-]{0,63}"
    );
}

async fn capabilities(peer: &Peer) {
    use hermes::native::desktop::RouteGroup;
    let offered = desktop(peer).capabilities().await.unwrap();
    assert_eq!(offered.version, "0.19.0");
    assert_eq!(offered.groups, RouteGroup::ALL, "every group is served");
    let runtime = match peer.target {
        Target::Hermes => None,
        Target::Ours => Some("hermes-runtime"),
    };
    assert_eq!(offered.runtime.as_deref(), runtime);
    // Hermes 0.19 ships two catalog manifests of its own; ours ships none.
    let shipped: &[&str] = match peer.target {
        Target::Hermes => &["linear", "n8n"],
        Target::Ours => &[],
    };
    assert_eq!(offered.mcp_catalog, shipped);
    let desktop = desktop(peer);
    let catalog = desktop
        .mcp_catalog_list(&McpCatalogListQuery {
            profile: Some("ghost".to_owned()),
        })
        .await
        .unwrap_err();
    assert_eq!(
        refusal(catalog),
        (404, "Profile 'ghost' does not exist.".to_owned())
    );
}

async fn mcp_catalog(target: Target) {
    let catalog_dir = tempfile::tempdir().unwrap();
    let manifest = |dir: &str, text: &str| {
        std::fs::create_dir_all(catalog_dir.path().join(dir)).unwrap();
        std::fs::write(catalog_dir.path().join(dir).join("manifest.yaml"), text).unwrap();
    };
    manifest(
        "files",
        "manifest_version: 1\nname: files\ndescription: Reads files.\nsource: https://example.test\n\
         transport: {type: stdio, command: node, args: [serve]}\n\
         auth: {type: api_key, env: [{name: FILES_KEY, prompt: 'Your key?'}, {name: FILES_ROOT, required: false}]}\n\
         tools: {default_enabled: [read]}\n\
         install: {type: git, url: 'https://example.test/files.git', ref: v1, bootstrap: [npm ci]}\n\
         post_install: Restart the session.\n",
    );
    manifest(
        "tracker",
        "manifest_version: 1\nname: tracker\ndescription: Tracks issues.\n\
         transport: {type: http, url: 'https://example.test/mcp'}\nauth: {type: oauth}\n",
    );
    manifest("zz-later", "manifest_version: 9\nname: later\n");
    let options = PeerOptions {
        // Installed (in `mcp_servers:`) and, with no `enabled:`, switched on.
        mcp_servers: vec![("tracker".to_owned(), "http://127.0.0.1:9/mcp".to_owned())],
        env: vec![(
            "HERMES_OPTIONAL_MCPS".to_owned(),
            catalog_dir.path().display().to_string(),
        )],
        ..Default::default()
    };
    let peer = Peer::start_with(target, options).await;
    let desktop = desktop(&peer);
    let catalog = desktop
        .mcp_catalog_list(&McpCatalogListQuery::default())
        .await
        .unwrap();
    let names: Vec<&str> = catalog.entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["files", "tracker"], "{catalog:?}");
    let files = &catalog.entries[0];
    assert_eq!(
        (
            files.transport.as_str(),
            files.command.as_deref(),
            &files.args[..]
        ),
        ("stdio", Some("node"), &["serve".to_owned()][..])
    );
    assert_eq!(files.auth_type, "api_key");
    let env: Vec<(&str, &str, bool)> = files
        .required_env
        .iter()
        .map(|e| (e.name.as_str(), e.prompt.as_str(), e.required))
        .collect();
    assert_eq!(
        env,
        [
            ("FILES_KEY", "Your key?", true),
            ("FILES_ROOT", "FILES_ROOT", false)
        ]
    );
    assert_eq!(files.default_enabled, Some(vec!["read".to_owned()]));
    assert_eq!(
        (files.install_url.as_deref(), files.install_ref.as_deref()),
        (Some("https://example.test/files.git"), Some("v1"))
    );
    assert_eq!(files.bootstrap, ["npm ci"]);
    assert_eq!(files.post_install, "Restart the session.");
    assert!(files.needs_install && !files.installed && !files.enabled);
    let tracker = &catalog.entries[1];
    assert_eq!(
        (tracker.transport.as_str(), tracker.url.as_deref()),
        ("http", Some("https://example.test/mcp"))
    );
    assert_eq!(
        (tracker.auth_type.as_str(), tracker.source.as_str()),
        ("oauth", "")
    );
    assert!(!tracker.needs_install && tracker.installed && tracker.enabled);
    let told: Vec<(&str, &str)> = catalog
        .diagnostics
        .iter()
        .map(|d| (d.name.as_str(), d.kind.as_str()))
        .collect();
    assert_eq!(told, [("zz-later", "future_manifest")]);
    let offered = desktop.capabilities().await.unwrap();
    assert_eq!(offered.mcp_catalog, ["files", "tracker"]);
    peer.stop().await;
}

async fn plugin_routes(peer: &Peer) {
    let desktop = desktop(peer);
    let offered = desktop.capabilities().await.unwrap().plugin_routes;
    let board = desktop.plugin_get("kanban", "board").await;
    match peer.target {
        // Hermes 0.19 bundles a kanban dashboard plugin with routes of its own.
        Target::Hermes => {
            assert!(offered.contains(&"kanban".to_owned()), "{offered:?}");
            assert!(board.unwrap()["columns"].is_array());
        }
        Target::Ours => {
            assert!(offered.is_empty(), "{offered:?}");
            assert!(
                matches!(&board, Err(Error::Unsupported { operation }) if operation == "plugin `kanban`"),
                "{board:?}"
            );
        }
    }
    let missing = desktop.plugin_get("no-such-plugin", "x").await;
    assert!(
        matches!(missing, Err(Error::Unsupported { .. })),
        "{missing:?}"
    );
}

/// Ours only: Hermes 0.19's file routes read and write anywhere the process may (`..`,
/// absolute paths, links out of the directory); ours keep to the workspace.
#[tokio::test]
async fn desktop_paths_outside_the_workspace_are_refused() {
    let peer = Peer::start(Target::Ours).await;
    let desktop = desktop(&peer);
    let work = std::fs::canonicalize(&peer.work).unwrap();
    let outside = work.parent().unwrap().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    std::os::unix::fs::symlink(&outside, work.join("door")).unwrap();
    for path in ["../outside/secret.txt", "door/secret.txt", "/etc/hostname"] {
        let read = desktop
            .fs_read_text(&FsReadTextQuery {
                path: path.to_owned(),
            })
            .await
            .unwrap_err();
        assert_eq!(
            refusal(read),
            (403, "Path is outside the workspace".to_owned()),
            "{path}"
        );
        let write = desktop
            .fs_write_text(&FsWriteTextBody {
                path: path.to_owned(),
                content: "overwritten".to_owned(),
            })
            .await
            .unwrap_err();
        assert_eq!(refusal(write).0, 403, "{path}");
        let listed = desktop
            .fs_list(&FsListQuery {
                path: "door".to_owned(),
            })
            .await
            .unwrap();
        assert_eq!(
            (listed.entries.len(), listed.error.as_deref()),
            (0, Some("EACCES"))
        );
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "secret"
    );
    // Relative paths start at the workspace.
    std::fs::write(work.join("inside.txt"), "inside").unwrap();
    let inside = desktop
        .fs_read_text(&FsReadTextQuery {
            path: "inside.txt".to_owned(),
        })
        .await
        .unwrap();
    assert_eq!(inside.text, "inside");
    let status = desktop
        .status_get(&StatusGetQuery::default())
        .await
        .unwrap();
    assert_eq!(status.runtime.as_deref(), Some("hermes-runtime"));
    peer.stop().await;
}

fn cron_body(schedule: &str, prompt: &str, name: &str) -> CronJobCreateBody {
    CronJobCreateBody {
        schedule: schedule.to_owned(),
        prompt: Some(prompt.to_owned()),
        name: Some(name.to_owned()),
        ..Default::default()
    }
}

async fn cron_jobs(target: Target) {
    let peer = Peer::start(target).await;
    let desktop = desktop(&peer);
    let mut client = peer.connect().await;
    let created = desktop
        .cron_job_create(
            &CronJobCreateQuery::default(),
            &cron_body("every 30m", "Say hello", "hello-job"),
        )
        .await
        .unwrap();
    assert_eq!(created.id.len(), 12);
    assert_eq!(created.schedule_display, "every 30m");
    assert_eq!((created.repeat.times, created.repeat.completed), (None, 0));
    assert_eq!(
        (created.state.as_str(), created.enabled),
        ("scheduled", true)
    );
    assert_eq!(created.profile.as_deref(), Some("default"));
    assert_eq!(created.deliver, "local");

    // REST and the gateway read and write the same jobs.
    let listed = client.call("cron.manage", json!({"action": "list"})).await;
    assert_eq!(listed["success"], true, "{listed}");
    assert_eq!(listed["jobs"][0]["job_id"], created.id.as_str());
    assert_eq!(listed["jobs"][0]["repeat"], "forever");
    let added = client
        .call(
            "cron.manage",
            json!({"action": "add", "name": "ws-job", "schedule": "every 15m", "prompt": "from ws"}),
        )
        .await;
    assert_eq!(added["success"], true, "{added}");
    let from_ws = added["job_id"].as_str().unwrap().to_owned();
    let all = desktop
        .cron_job_list(&CronJobListQuery::default())
        .await
        .unwrap();
    let shared = all
        .iter()
        .find(|j| j.id == from_ws)
        .expect("listed over REST");
    assert_eq!(
        (shared.name.as_str(), shared.schedule_display.as_str()),
        ("ws-job", "every 15m")
    );
    let refused = client
        .call(
            "cron.manage",
            json!({"action": "add", "name": "x", "schedule": "tomorrow", "prompt": "p"}),
        )
        .await;
    assert_eq!(refused["success"], false, "{refused}");

    // Paused jobs are hidden from the gateway's list; a name names a job for these routes.
    let paused = desktop
        .cron_job_pause("ws-job", &CronJobPauseQuery::default())
        .await
        .unwrap();
    assert_eq!((paused.state.as_str(), paused.enabled), ("paused", false));
    let listed = client.call("cron.manage", json!({})).await;
    assert_eq!(listed["count"], 1, "{listed}");
    let resumed = desktop
        .cron_job_resume(&from_ws, &CronJobResumeQuery::default())
        .await
        .unwrap();
    assert_eq!(resumed.state, "scheduled");
    let triggered = desktop
        .cron_job_trigger(&created.id, &CronJobTriggerQuery::default())
        .await
        .unwrap();
    // Due now rather than in half an hour (the same ISO shape compares as text).
    assert!(triggered.next_run_at < created.next_run_at, "{triggered:?}");

    let updates = |pairs: Value| CronJobUpdateBody { updates: pairs };
    let updated = desktop
        .cron_job_update(
            &created.id,
            &CronJobUpdateQuery::default(),
            &updates(json!({"schedule": "every 10m", "name": "renamed"})),
        )
        .await
        .unwrap();
    assert_eq!(
        (updated.name.as_str(), updated.schedule_display.as_str()),
        ("renamed", "every 10m")
    );
    let fixed = desktop
        .cron_job_update(
            &created.id,
            &CronJobUpdateQuery::default(),
            &updates(json!({"id": "x"})),
        )
        .await
        .unwrap_err();
    assert_eq!(
        refusal(fixed),
        (400, "Cron job field(s) cannot be updated: id".to_owned())
    );
    let (status, detail) = refusal(
        desktop
            .cron_job_create(
                &CronJobCreateQuery::default(),
                &cron_body("tomorrow", "p", "n"),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(status, 400);
    assert!(
        detail.starts_with("Invalid schedule 'tomorrow'"),
        "{detail}"
    );
    let empty = desktop
        .cron_job_create(
            &CronJobCreateQuery::default(),
            &cron_body("every 5m", " ", ""),
        )
        .await
        .unwrap_err();
    assert_eq!(
        refusal(empty),
        (
            400,
            "agent cron jobs require a prompt, skill, or script".to_owned()
        )
    );

    let removed = client
        .call("cron.manage", json!({"action": "remove", "name": from_ws}))
        .await;
    assert_eq!(removed["success"], true, "{removed}");
    let gone = desktop
        .cron_job_get(&from_ws, &CronJobGetQuery::default())
        .await
        .unwrap_err();
    assert_eq!(refusal(gone), (404, "Job not found".to_owned()));
    assert_eq!(
        client
            .error_code("cron.manage", json!({"action": "run"}))
            .await,
        4016
    );
    let runs = desktop
        .cron_job_runs("nope", &CronJobRunsQuery::default())
        .await
        .unwrap();
    assert_eq!((runs.runs.len(), runs.limit), (0, 20));
    let deleted = desktop
        .cron_job_delete(&created.id, &CronJobDeleteQuery::default())
        .await
        .unwrap();
    assert!(deleted.ok);
    let again = desktop
        .cron_job_delete(&created.id, &CronJobDeleteQuery::default())
        .await
        .unwrap_err();
    assert_eq!(refusal(again).0, 404);
    peer.stop().await;
}

/// Ours only: Hermes 0.19's `hermes serve` runs no scheduler unless started as Desktop's
/// backend (`HERMES_DESKTOP=1`), and then only for its own profile, once a minute. Ours runs
/// every profile's due jobs within seconds.
#[tokio::test]
async fn a_due_cron_job_runs_as_a_session_of_its_profile() {
    let peer = Peer::start(Target::Ours).await;
    let desktop = desktop(&peer);
    desktop
        .profile_create(&ProfileCreateBody {
            name: "work".to_owned(),
            clone_from_default: Some(true),
            ..Default::default()
        })
        .await
        .unwrap();
    let work = CronJobCreateQuery {
        profile: Some("work".to_owned()),
    };
    let recurring = desktop
        .cron_job_create(
            &work,
            &cron_body("every 60m", "report the weather", "weather"),
        )
        .await
        .unwrap();
    let once = desktop
        .cron_job_create(
            &work,
            &cron_body("2030-01-01", "happy new year", "new-year"),
        )
        .await
        .unwrap();
    assert_eq!(once.repeat.times, Some(1));
    let with_skills = desktop
        .cron_job_create(
            &work,
            &CronJobCreateBody {
                skills: Some(vec!["research".to_owned()]),
                ..cron_body("every 60m", "p", "skilled")
            },
        )
        .await
        .unwrap_err();
    let (status, detail) = refusal(with_skills);
    assert_eq!(status, 400);
    assert!(detail.starts_with("`skills` is not supported"), "{detail}");
    let in_work = || CronJobTriggerQuery {
        profile: Some("work".to_owned()),
    };
    desktop
        .cron_job_trigger(&recurring.id, &in_work())
        .await
        .unwrap();
    desktop
        .cron_job_trigger(&once.id, &in_work())
        .await
        .unwrap();

    let get = CronJobGetQuery {
        profile: Some("work".to_owned()),
    };
    let mut ran = None;
    for _ in 0..300 {
        let job = desktop.cron_job_get(&recurring.id, &get).await.unwrap();
        if job.last_status.is_some() {
            ran = Some(job);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let ran = ran.expect("the triggered job ran within 30 s");
    assert_eq!(ran.last_status.as_deref(), Some("ok"), "{ran:?}");
    assert_eq!(ran.repeat.completed, 1);
    assert!(
        ran.next_run_at > ran.last_run_at,
        "the next run is an hour on"
    );

    let runs = desktop
        .cron_job_runs(
            &recurring.id,
            &CronJobRunsQuery {
                profile: Some("work".to_owned()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert_eq!(runs.runs.len(), 1, "{runs:?}");
    let run = &runs.runs[0];
    assert!(
        run.columns
            .id
            .as_str()
            .starts_with(&format!("cron_{}_", recurring.id))
    );
    assert_eq!(run.columns.source, "cron");
    assert_eq!(run.columns.message_count, 2);
    assert!(
        run.columns
            .title
            .as_deref()
            .unwrap_or("")
            .starts_with("weather · ")
    );
    assert_eq!(run.columns.end_reason.as_deref(), Some("cron_complete"));
    let outputs = peer
        .home
        .join("profiles/work/cron/output")
        .join(&recurring.id);
    let saved: Vec<_> = std::fs::read_dir(&outputs).unwrap().flatten().collect();
    assert_eq!(saved.len(), 1);
    let text = std::fs::read_to_string(saved[0].path()).unwrap();
    assert!(
        text.contains("report the weather") && text.contains("## Response"),
        "{text}"
    );

    // A one-shot job is gone once it has run.
    for _ in 0..300 {
        if desktop.cron_job_get(&once.id, &get).await.is_err() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let gone = desktop.cron_job_get(&once.id, &get).await.unwrap_err();
    assert_eq!(refusal(gone).0, 404);
    peer.stop().await;
}

/// Ours only, as above. A run a crash cuts short is not made again (Hermes counts a run from
/// its dispatch too), and a one-shot job whose run was cut short is not left on file for ever
/// with nothing to run: it is gone once the runtime is back, as Hermes removes it once its claim
/// expires.
#[tokio::test]
async fn a_run_cut_short_by_a_crash_is_not_made_again() {
    let mut peer = Peer::start(Target::Ours).await;
    let before = desktop(&peer);
    let anywhere = CronJobCreateQuery::default();
    let once = before
        .cron_job_create(
            &anywhere,
            &cron_body("2030-01-01", "SLOW new year", "new-year"),
        )
        .await
        .unwrap();
    let recurring = before
        .cron_job_create(
            &anywhere,
            &cron_body("every 60m", "SLOW weather", "weather"),
        )
        .await
        .unwrap();
    for job in [&once, &recurring] {
        before
            .cron_job_trigger(&job.id, &CronJobTriggerQuery::default())
            .await
            .unwrap();
    }
    let slow_calls = |peer: &Peer| {
        peer.model
            .requests()
            .iter()
            .filter(|r| r.to_string().contains("SLOW"))
            .count()
    };
    for _ in 0..300 {
        if slow_calls(&peer) >= 2 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        slow_calls(&peer),
        2,
        "both runs reached the model within 30 s"
    );
    peer.crash().await;
    peer.restart().await;

    let after = desktop(&peer);
    let get = CronJobGetQuery::default();
    let gone = after.cron_job_get(&once.id, &get).await.unwrap_err();
    assert_eq!(refusal(gone).0, 404, "the spent one-shot job is removed");
    let cut = after.cron_job_get(&recurring.id, &get).await.unwrap();
    assert_eq!(cut.repeat.completed, 1, "{cut:?}");
    assert_eq!(cut.last_status, None, "its run was never recorded: {cut:?}");
    let next = cut.next_run_at.as_deref().expect("a next run");
    let next = chrono::DateTime::parse_from_rfc3339(next).expect("an ISO time");
    assert!(
        next > chrono::Utc::now() + chrono::Duration::minutes(30),
        "an hour on from its claim: {cut:?}"
    );

    // A job triggered now runs: the scheduler has ticked since, and made neither cut run again.
    let later = after
        .cron_job_create(
            &anywhere,
            &cron_body("every 60m", "after the crash", "later"),
        )
        .await
        .unwrap();
    after
        .cron_job_trigger(&later.id, &CronJobTriggerQuery::default())
        .await
        .unwrap();
    let mut ran = None;
    for _ in 0..300 {
        let job = after.cron_job_get(&later.id, &get).await.unwrap();
        if job.last_status.is_some() {
            ran = Some(job);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        ran.expect("the new job ran within 30 s")
            .last_status
            .as_deref(),
        Some("ok")
    );
    assert_eq!(slow_calls(&peer), 2, "no cut run was made again");
    peer.stop().await;
}

fn write_skill(home: &std::path::Path, path: &str, text: &str) {
    let file = home.join("skills").join(path);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(file, text).unwrap();
}

async fn skills_toolsets_and_config(target: Target) {
    use hermes::native::desktop::{
        ConfigGetQuery, ConfigSchemaQuery, ConfigUpdateBody, ConfigUpdateQuery, SkillListQuery,
        SkillToggleBody, SkillToggleQuery, ToolsetListQuery, ToolsetUpdateBody, ToolsetUpdateQuery,
    };
    let peer = Peer::start(target).await;
    let desktop = desktop(&peer);
    write_skill(
        &peer.home,
        "devops/deploy-helper/SKILL.md",
        "---\nname: deploy-helper\ndescription: Helps deploy.\n---\n# Deploy\nSteps.\n",
    );
    write_skill(
        &peer.home,
        "plain/SKILL.md",
        "---\nname: plain\ndescription: Just text\n---\nBody.\n",
    );
    let skills = desktop
        .skill_list(&SkillListQuery::default())
        .await
        .unwrap();
    let shown: Vec<(&str, &str, Option<&str>, bool)> = skills
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                s.description.as_str(),
                s.category.as_deref(),
                s.enabled,
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            ("deploy-helper", "Helps deploy.", Some("devops"), true),
            ("plain", "Just text", None, true)
        ]
    );
    let toggled = desktop
        .skill_toggle(
            &SkillToggleQuery::default(),
            &SkillToggleBody {
                name: "deploy-helper".to_owned(),
                enabled: false,
                profile: None,
            },
        )
        .await
        .unwrap();
    assert!(toggled.ok && !toggled.enabled);
    assert_eq!(toggled.name, "deploy-helper");
    let skills = desktop
        .skill_list(&SkillListQuery::default())
        .await
        .unwrap();
    assert!(!skills[0].enabled, "{skills:?}");

    let toolsets = desktop
        .toolset_list(&ToolsetListQuery::default())
        .await
        .unwrap();
    let terminal = |listed: &[hermes::native::desktop::replies::Toolset]| {
        listed
            .iter()
            .find(|t| t.name == "terminal")
            .cloned()
            .expect("a terminal toolset")
    };
    let before = terminal(&toolsets);
    assert_eq!((before.enabled, before.platform.as_str()), (true, "cli"));
    assert!(before.tools.contains(&"terminal".to_owned()));
    let off = desktop
        .toolset_update(
            "terminal",
            &ToolsetUpdateQuery::default(),
            &ToolsetUpdateBody {
                enabled: false,
                profile: None,
            },
        )
        .await
        .unwrap();
    assert!(off.ok && !off.enabled);
    assert_eq!(
        (off.name.as_str(), off.platform.as_str()),
        ("terminal", "cli")
    );
    let after = terminal(
        &desktop
            .toolset_list(&ToolsetListQuery::default())
            .await
            .unwrap(),
    );
    assert!(!after.enabled);
    let unknown = desktop
        .toolset_update(
            "nope",
            &ToolsetUpdateQuery::default(),
            &ToolsetUpdateBody {
                enabled: true,
                profile: None,
            },
        )
        .await
        .unwrap_err();
    assert_eq!(refusal(unknown), (400, "Unknown toolset: nope".to_owned()));

    let config = desktop
        .config_get(&ConfigGetQuery::default())
        .await
        .unwrap();
    assert_eq!(
        config["model"], "fake-model",
        "the model section shown as its name"
    );
    assert_eq!(config["model_context_length"], 131072);
    assert_eq!(
        config.keys().next_back().map(String::as_str),
        Some("model_context_length")
    );
    let changed = desktop
        .config_update(
            &ConfigUpdateQuery::default(),
            &ConfigUpdateBody {
                config: json!({"display": {"compact": true}}),
                profile: None,
            },
        )
        .await
        .unwrap();
    assert!(changed.ok);
    let config = desktop
        .config_get(&ConfigGetQuery::default())
        .await
        .unwrap();
    assert_eq!(config["display"]["compact"], true);
    assert_eq!(
        config["model"], "fake-model",
        "a change is merged, the rest kept"
    );
    let http = reqwest::Client::new();
    let not_an_object = http
        .put(peer.url("/api/config"))
        .header("X-Hermes-Session-Token", TOKEN)
        .json(&json!({"config": [1, 2]}))
        .send()
        .await
        .unwrap();
    assert_eq!(not_an_object.status(), 422);
    // The schema is public.
    let schema = HermesDesktop::remote(&peer.url(""), None)
        .config_schema(&ConfigSchemaQuery::default())
        .await
        .unwrap();
    assert_eq!(schema.fields["model"].kind, "string", "{schema:?}");
    peer.stop().await;
}

/// Ours only (Hermes's agent needs a model that calls tools to show it): a toolset switched
/// off is not offered to the model.
#[tokio::test]
async fn a_toolset_switched_off_is_not_offered_to_the_model() {
    use hermes::native::desktop::{ToolsetUpdateBody, ToolsetUpdateQuery};
    let peer = Peer::start(Target::Ours).await;
    let mut client = peer.connect().await;
    prompted_session(&mut client, "first").await;
    let offered = |peer: &Peer| -> Vec<String> {
        let request = peer.model.streamed_requests().pop().unwrap();
        request["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert!(offered(&peer).contains(&"terminal".to_owned()));
    desktop(&peer)
        .toolset_update(
            "terminal",
            &ToolsetUpdateQuery::default(),
            &ToolsetUpdateBody {
                enabled: false,
                profile: None,
            },
        )
        .await
        .unwrap();
    prompted_session(&mut client, "second").await;
    let now = offered(&peer);
    assert!(!now.contains(&"terminal".to_owned()), "{now:?}");
    assert!(now.contains(&"clarify".to_owned()), "{now:?}");
    peer.stop().await;
}

/// Ours only (Hermes shows its config as it is): credentials are masked, and sending the
/// masked config back keeps them.
#[tokio::test]
async fn desktop_config_masks_credentials_and_keeps_them() {
    use hermes::native::desktop::{ConfigGetQuery, ConfigUpdateBody, ConfigUpdateQuery};
    let peer = Peer::start(Target::Ours).await;
    let file = peer.home.join("config.yaml");
    let mut config: Value = serde_yaml::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    config["model"]["api_key"] = json!("sk-model-s3cret");
    config["model"]["max_tokens"] = json!(4096);
    config["mcp_servers"] = json!({"tools": {"url": "http://127.0.0.1:9/mcp",
        "headers": {"Authorization": "Bearer mcp-s3cret"}}});
    std::fs::write(&file, serde_yaml::to_string(&config).unwrap()).unwrap();
    let desktop = desktop(&peer);
    let shown = desktop
        .config_get(&ConfigGetQuery::default())
        .await
        .unwrap();
    let text = serde_json::to_string(&shown).unwrap();
    assert!(!text.contains("s3cret"), "{text}");
    assert_eq!(
        shown["mcp_servers"]["tools"]["headers"]["Authorization"],
        "***"
    );
    assert_eq!(
        shown["mcp_servers"]["tools"]["url"],
        "http://127.0.0.1:9/mcp"
    );
    let mut sent_back = shown.clone();
    sent_back.insert("display".to_owned(), json!({"compact": true}));
    desktop
        .config_update(
            &ConfigUpdateQuery::default(),
            &ConfigUpdateBody {
                config: Value::Object(sent_back),
                profile: None,
            },
        )
        .await
        .unwrap();
    let kept = std::fs::read_to_string(&file).unwrap();
    assert!(
        kept.contains("mcp-s3cret") && kept.contains("sk-model-s3cret"),
        "{kept}"
    );
    assert!(kept.contains("compact: true"), "{kept}");
    peer.stop().await;
}
