//! The end-to-end tests, one module a subject, built as one test binary: the helpers in
//! `common` are compiled once and the binary linked once, and a slow test of one subject
//! overlaps the others' (`cargo test --test suite SUBJECT::` runs one subject).

mod common;

mod agent;
mod agent_waiting;
mod agent_watch_screens;
// The real agents' tests are the suite's longest (a minute for some, under load); libtest
// starts tests in the order of their names, so these sort near the start and overlap the
// hundreds of short ones instead of being the last to end.
mod agents_real;
mod agents_real_attention;
mod agents_real_codex;
mod agents_real_otlp;
mod architecture_map;
mod attention;
mod attention_screens;
mod attention_watch;
mod broker;
mod broker_death;
mod budgets;
mod cgroup;
mod cli;
mod columns;
mod control;
mod control_hardening;
mod cost;
mod custody;
mod drain;
mod endings;
mod exec_copy;
mod exec_lifecycle;
mod exec_output;
mod exec_teardown;
mod export;
mod export_cli;
mod export_follow;
mod export_follow_cli;
mod features;
mod fixture_every_kind;
mod grep;
mod hardening_misc;
mod journal;
mod journal_budget;
mod journal_memory;
mod journal_privacy;
mod launcher;
mod mcp;
mod notify_desktop;
mod notify_hardening;
mod prune;
mod pty;
mod readiness;
mod screens;
mod sessions;
mod sessions_summary;
mod shim;
mod time_cursor;
mod trace;
mod tree_exec;
mod tui;
mod watch;
