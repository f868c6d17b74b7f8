//! The Desktop REST routes, registered from the generated route table: a route added to
//! `contracts/hermes-desktop.routes.json` does not compile until it is served here (or listed
//! as not served, answering 404, which clients read as "this server lacks it").

mod config;
mod cron;
mod fs;
pub(crate) mod git;
mod profiles;
mod sessions;
mod skills;
mod status;
mod toolsets;
pub(crate) mod workspace;

use std::sync::Arc;

use axum::Router;
use axum::handler::Handler;
use axum::routing::{MethodFilter, on};
use hermes_native::desktop::Route;

use crate::runtime::Runtime;

type Routes = Router<Arc<Runtime>>;

pub fn routes() -> Routes {
    Route::ALL
        .iter()
        .fold(Router::new(), |router, route| serve(router, *route))
}

fn serve(router: Routes, route: Route) -> Routes {
    match route {
        Route::StatusGet => add(router, route, status::status),
        Route::SessionList => add(router, route, sessions::list),
        Route::SessionSearch => add(router, route, sessions::search),
        Route::SessionGet => add(router, route, sessions::get),
        Route::SessionMessages => add(router, route, sessions::messages),
        Route::SessionUpdate => add(router, route, sessions::update),
        Route::SessionDelete => add(router, route, sessions::delete),
        Route::ProfileList => add(router, route, profiles::list),
        Route::ProfileActive => add(router, route, profiles::active),
        Route::ProfileCreate => add(router, route, profiles::create),
        Route::ProfileRename => add(router, route, profiles::rename),
        Route::ProfileDelete => add(router, route, profiles::delete),
        Route::CronJobList => add(router, route, cron::list),
        Route::CronJobCreate => add(router, route, cron::create),
        Route::CronJobGet => add(router, route, cron::get),
        Route::CronJobUpdate => add(router, route, cron::update),
        Route::CronJobDelete => add(router, route, cron::delete),
        Route::CronJobPause => add(router, route, cron::pause),
        Route::CronJobResume => add(router, route, cron::resume),
        Route::CronJobTrigger => add(router, route, cron::trigger),
        Route::CronJobRuns => add(router, route, cron::runs),
        Route::FsList => add(router, route, fs::list),
        Route::FsReadText => add(router, route, fs::read_text),
        Route::FsWriteText => add(router, route, fs::write_text),
        Route::GitStatus => add(router, route, git::status),
        Route::GitBranches => add(router, route, git::branches),
        Route::PluginList => add(router, route, status::plugins),
        Route::McpCatalogList => add(router, route, status::mcp_catalog),
        Route::SkillList => add(router, route, skills::list),
        Route::SkillToggle => add(router, route, skills::toggle),
        Route::ToolsetList => add(router, route, toolsets::list),
        Route::ToolsetUpdate => add(router, route, toolsets::update),
        Route::ConfigGet => add(router, route, config::get),
        Route::ConfigUpdate => add(router, route, config::update),
        Route::ConfigSchema => add(router, route, config::schema),
    }
}

/// Registers `handler` for the route's method and path (routes on one path share it).
fn add<H, T>(router: Routes, route: Route, handler: H) -> Routes
where
    H: Handler<T, Arc<Runtime>>,
    T: 'static,
{
    let method = match route.method() {
        "GET" => MethodFilter::GET,
        "POST" => MethodFilter::POST,
        "PUT" => MethodFilter::PUT,
        "PATCH" => MethodFilter::PATCH,
        "DELETE" => MethodFilter::DELETE,
        other => unreachable!("the routes use no {other}"),
    };
    router.route(route.path(), on(method, handler))
}
