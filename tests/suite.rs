//! The end-to-end tests, one module a subject, built as one test binary: the helpers in
//! `common` are compiled once and the binary linked once, and a slow test of one subject
//! overlaps the others' (`cargo test --test suite SUBJECT::` runs one subject).

mod common;

mod agent;
mod agent_waiting;
mod agent_watch_screens;
mod architecture_map;
mod attention;
mod attention_screens;
mod attention_watch;
mod broker;
mod broker_death;
mod cgroup;
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
mod mcp;
mod notify_desktop;
mod notify_hardening;
mod prune;
mod pty;
mod real_agents;
mod real_agents_attention;
mod real_agents_codex;
mod real_agents_otlp;
mod screens;
mod sessions;
mod sessions_summary;
mod shim;
mod time_cursor;
mod trace;
mod tui;
mod watch;
