//! Scheduled jobs: each profile's `cron/jobs.json` (Hermes's format), read and changed by the
//! Desktop cron routes and the gateway's `cron.manage`, and run by the scheduler.

pub mod jobs;
pub mod manage;
pub mod runner;
pub mod schedule;

pub use manage::manage;
