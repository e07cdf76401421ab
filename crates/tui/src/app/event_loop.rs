//! The TUI's event loop: one `select!` over keys, broker events, process samples, signals and
//! the next frame. It draws only when something changed, at most 60 times a second (a watch,
//! but in answer to a key, at most 20).

use std::collections::HashMap;
use std::io::Stdout;
use std::path::PathBuf;
use std::time::Duration;

use crossterm::event::Event as TermEvent;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::layout::{Position, Rect};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio::time::{Instant, sleep_until};

use super::App;
use super::changes::ChangeWatcher;
use super::input_batch::InputBatch;
use super::run::Draw;
use super::runner::{Runner, write_between_frames};
use super::tell::Teller;
use super::watch::Watch;
use tether_core::launcher::{Input, Launcher};
use tether_frontend::supervisor::Session;
use tether_frontend::supervisor::fleet::{Fleet, FleetEvent};
use tether_model::Model;
use tether_model::replay::frozen_at;
use tether_os::clock::now_ms;
use tether_os::sampler::spawn_sampler;
use tether_protocol::protocol::{EventKind, ProcessSignal};

const FRAME: Duration = Duration::from_micros(16_667);
/// The shortest time between two frames of a watch, but for those that answer a key: what
/// its journals tell of an agent that starts 35 commands a second would have the list built
/// again and drawn 60 times a second, a third of a core. A key is answered at [`FRAME`]'s
/// pace.
const WATCH_FRAME: Duration = Duration::from_millis(50);
/// The most terminal events handled at one wake-up (a paste that is not bracketed is one per
/// character): enough to join a paste into few pieces, few enough that frames and brokers
/// are not kept waiting.
const KEYS_PER_WAKE: usize = 1024;
/// The shortest time between two reads of the journals a watch follows: a command that
/// writes without pause costs a read every 8 ms, not one per write. The first change after
/// a quiet spell is read at once.
const JOURNAL_READS: Duration = Duration::from_millis(8);
/// After that, how long brokers that did not finish get to be killed with their leftovers.
const ABORT_SLACK: Duration = Duration::from_secs(2);

/// The shortest time since the last frame before the next: a watch's news waits longer than
/// an answer to the operator.
fn frame_gap(watching: bool, prompt: bool) -> Duration {
    if watching && !prompt {
        WATCH_FRAME
    } else {
        FRAME
    }
}

/// Reads terminal events on a thread of their own (crossterm's read blocks).
fn terminal_events() -> UnboundedReceiver<TermEvent> {
    let (tx, rx) = unbounded_channel();
    std::thread::spawn(move || {
        while let Ok(event) = crossterm::event::read() {
            if tx.send(event).is_err() {
                break;
            }
        }
    });
    rx
}

/// The whole terminal, as a frame is drawn on it.
fn screen(terminal: &Terminal<CrosstermBackend<Stdout>>) -> std::io::Result<Rect> {
    Ok(Rect::from((Position::ORIGIN, terminal.size()?)))
}

/// Resolves with `wait` (a readiness: a file that restarts a command may have changed, the
/// followed journals changed), never without one.
async fn ready(wait: Option<impl Future<Output = ()>>) {
    match wait {
        Some(wait) => wait.await,
        None => std::future::pending().await,
    }
}

/// The directory a command runs in, which its `restart_on_change` globs are relative to.
fn base_dir(cwd: Option<&std::path::Path>) -> PathBuf {
    let here = std::env::current_dir().unwrap_or_default();
    cwd.map_or_else(|| here.clone(), |cwd| here.join(cwd))
}

pub(super) async fn event_loop(
    mut terminal: Terminal<CrosstermBackend<Stdout>>,
    model: Model,
    session: Option<Session>,
    watch_over: Option<(PathBuf, Option<String>)>,
    search: Option<String>,
    draw: Draw,
    ordered_shutdown: bool,
) -> anyhow::Result<i32> {
    let recorded = model.mode.from_journals();
    let (fleet, mut fleet_events) = Fleet::new();
    let (replies, mut watch_replies) = unbounded_channel();
    let teller = Teller::new(now_ms(), replies.clone());
    let watch = watch_over
        .map(|(state_dir, session)| Watch::new(state_dir, session, &model.commands, replies));
    let watching = watch.is_some();
    let configs: Vec<_> = model.commands.iter().map(|c| c.config.clone()).collect();
    let launcher = Launcher::new(tether_config::launch::plans(&configs), ordered_shutdown);
    let mut runner = Runner {
        app: App::new(model),
        session,
        fleet,
        watch,
        teller,
        tails: HashMap::new(),
        quit_deadline: None,
        sizes_sent: HashMap::new(),
        aborted: false,
        quit_now: false,
        launcher,
        changes: None,
        plans: Default::default(),
    };
    if !recorded && !watching {
        let wanted = (configs.iter().enumerate())
            .filter(|(_, c)| !c.restart_on_change.is_empty())
            .map(|(i, c)| (i, base_dir(c.cwd.as_deref()), c.restart_on_change.clone()))
            .collect();
        match ChangeWatcher::new(wanted) {
            Ok(changes) => runner.changes = changes,
            Err(why) => runner.app.view.say(why),
        }
    }
    if let Some(why) = runner
        .changes
        .as_mut()
        .and_then(ChangeWatcher::take_trouble)
    {
        runner.app.view.say(why);
    }
    let mut keys = terminal_events();
    let (sampler, mut samples) = spawn_sampler(Duration::from_secs(1));
    // A first reading of the machine for the header, before any command runs.
    sampler.sample_now();
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let mut sighup = signal(SignalKind::hangup())?;

    // The output pane's size, for the terminals of the commands started next.
    runner.app.prepare(screen(&terminal)?, now_ms());
    if let Some(needle) = search.as_deref() {
        runner.app.open_at_first_match(needle);
    }
    if !recorded && !watching {
        runner.drive(Input::Begin);
    }
    if let Some(watch) = runner.watch.as_mut() {
        watch.start(&mut runner.app);
    }
    if runner.app.model.commands.is_empty() && !recorded {
        runner.app.view.dialog = Some(super::view::Dialog::NewCommand {
            input: String::new(),
        });
    }

    // The signal that ended the TUI, if one did: its exit status is then 128 + N, as a shell
    // reports a program that a signal ended.
    let mut ended_by: Option<i32> = None;
    let mut dirty = true;
    // What is to be drawn answers a key (and what it opened is still being caught up with):
    // at the full frame rate.
    let mut prompt = true;
    let mut last_draw: Option<Instant> = None;
    let mut watched: Vec<i32> = Vec::new();
    let mut next_tick = Instant::now() + Duration::from_secs(1);
    let mut journals_read_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let frame = frame_gap(watching, prompt);
        if dirty && last_draw.is_none_or(|t| now >= t + frame) {
            let at = if recorded {
                frozen_at(&runner.app.model, now_ms())
            } else {
                now_ms()
            };
            runner.app.prepare(screen(&terminal)?, at);
            let (model, rows) = (&runner.app.model, &runner.app.content.list);
            if let Some(bytes) = runner.teller.look(model, rows, now_ms()) {
                write_between_frames(&mut terminal, &bytes);
            }
            let app = &runner.app;
            // One frame is shown whole or not at all where the terminal keeps synchronized
            // output (mode 2026; others ignore it): a fast stream never shows a half-drawn
            // list. The end is sent whatever the draw did, so no terminal waits on it.
            let _ = crossterm::queue!(
                terminal.backend_mut(),
                crossterm::terminal::BeginSynchronizedUpdate
            );
            let drawn = terminal
                .draw(|frame| draw(frame, app.shown(), &app.view, &app.content, &app.bindings))
                .map(|_| ());
            let _ = crossterm::execute!(
                terminal.backend_mut(),
                crossterm::terminal::EndSynchronizedUpdate
            );
            drawn?;
            // Output not yet indexed is caught up with over the next frames.
            dirty = runner.app.behind;
            prompt &= runner.app.behind;
            runner.sync_terminal_sizes();
            last_draw = Some(now);
        }
        let quit_overdue = runner.quit_deadline.is_some_and(|d| Instant::now() >= d);
        if runner.app.view.quitting && quit_overdue && !runner.aborted {
            // Brokers that did not finish in time are killed and their leftovers KILLed.
            runner.fleet.abort_all();
            runner.aborted = true;
            runner.quit_deadline = Some(Instant::now() + ABORT_SLACK);
            continue;
        }
        if runner.app.settle_quit_question() {
            runner.quit_now = true;
        }
        if runner.quit_now
            || (runner.app.view.quitting && (runner.fleet.active() == 0 || quit_overdue))
        {
            break;
        }
        let brokers = runner.app.brokers();
        if brokers != watched {
            // A new broker's tree is sampled soon (at most one sample a gap in a burst of
            // commands: `set_brokers`).
            sampler.set_brokers(brokers.clone());
            watched = brokers;
        }
        let frame_at = last_draw.map_or(now, |t| t + frame);
        // Runtimes on screen change every second while anything runs; a watch also checks
        // its brokers then (and looks at the journals twice a second without inotify).
        let polling = runner.watch.as_ref().is_some_and(Watch::polling);
        let tick = if polling {
            super::watch::POLL
        } else {
            Duration::from_secs(1)
        };
        // Owned, so that the branch can change the watch it belongs to.
        let journals = runner.watch.as_ref().and_then(Watch::readiness);
        let journals_rest =
            journals.is_some() && journals_read_at.is_some_and(|t| now < t + JOURNAL_READS);
        // A restart's countdown is on screen too.
        let launcher_due = runner.launcher.poll_timeout().map(Instant::from_std);
        let ticking = watching || runner.app.model.running() > 0 || launcher_due.is_some();
        let changes = runner.changes.as_ref().map(ChangeWatcher::readiness);
        let backlog = runner.watch.as_ref().is_some_and(Watch::pending);
        // News that waits for the gap between two notices: a frame looks again then.
        let news_due = runner.teller.due_in(now_ms()).map(|wait| now + wait);
        if !ticking || next_tick < now {
            next_tick = now + tick;
        }
        tokio::select! {
            event = keys.recv() => {
                let Some(event) = event else { break };
                // Every key already read is handled before anything is sent: the input of
                // a run of keys (a paste that is not bracketed) goes as one piece.
                let mut input = InputBatch::default();
                let mut handled = runner.terminal_event(event, &mut input, &mut terminal);
                for _ in 1..KEYS_PER_WAKE {
                    let Ok(event) = keys.try_recv() else { break };
                    handled |= runner.terminal_event(event, &mut input, &mut terminal);
                }
                if let Some(effect) = input.take() {
                    runner.effect(effect);
                }
                // Events that mean nothing here (a key with no binding) draw nothing.
                if handled {
                    sampler.attend();
                    dirty = true;
                    prompt = true;
                }
            }
            Some(event) = fleet_events.recv() => {
                let offscreen_output = matches!(&event, FleetEvent::Event(id, e)
                    if id.command != runner.app.view.selected && matches!(e.kind, EventKind::Output { .. }));
                runner.fleet_event(event);
                // Output of a command not on screen changes only the strip: a tick redraws it.
                dirty |= !offscreen_output;
            }
            Some(snapshot) = samples.recv() => {
                runner.app.set_snapshot(snapshot);
                dirty = true;
            }
            _ = sigint.recv() => { ended_by.get_or_insert(ProcessSignal::INT.number()); runner.stop_all(); dirty = true; }
            _ = sigterm.recv() => { ended_by.get_or_insert(ProcessSignal::TERM.number()); runner.stop_all(); dirty = true; }
            _ = sighup.recv() => { ended_by.get_or_insert(ProcessSignal::HUP.number()); runner.stop_all(); dirty = true; }
            _ = sleep_until(frame_at), if dirty => {}
            _ = sleep_until(news_due.unwrap_or(now)), if news_due.is_some() && !dirty => { dirty = true; }
            _ = sleep_until(runner.quit_deadline.unwrap_or(now)), if runner.quit_deadline.is_some() => {}
            _ = sleep_until(launcher_due.unwrap_or(now)), if launcher_due.is_some() => {
                runner.drive(Input::Wake);
                dirty = true;
            }
            _ = ready(changes.as_ref().map(|r| r.wait())), if changes.is_some() => {
                let changed = runner.changes.as_mut().map(ChangeWatcher::drain).unwrap_or_default();
                for command in changed {
                    runner.drive(Input::FileChanged(command));
                }
                if let Some(why) = runner.changes.as_mut().and_then(ChangeWatcher::take_trouble) {
                    runner.app.view.say(why);
                    dirty = true;
                }
            }
            Some(text) = watch_replies.recv() => {
                runner.app.view.say(text);
                dirty = true;
            }
            _ = ready(journals.as_ref().map(|r| r.wait())), if journals.is_some() && !journals_rest => {
                journals_read_at = Some(Instant::now());
                if let Some(watch) = runner.watch.as_mut() {
                    dirty |= watch.on_events(&mut runner.app);
                }
            }
            _ = sleep_until(journals_read_at.map_or(now, |t| t + JOURNAL_READS)), if journals_rest => {}
            // Journals listed and not read yet: a step of them between frames and keys.
            _ = std::future::ready(()), if backlog => {
                if let Some(watch) = runner.watch.as_mut() {
                    dirty |= watch.step(&mut runner.app);
                }
            }
            _ = sleep_until(next_tick), if ticking => {
                next_tick += tick;
                match runner.watch.as_mut() {
                    Some(watch) => watch.tick(&mut runner.app),
                    None if recorded => runner.follow_journal(),
                    None => {}
                }
                dirty = true;
            }
        }
    }
    // Nothing the TUI adopted from a dead broker outlives it.
    runner.fleet.kill_leftovers().await;
    Ok(ended_by.map_or(0, |signal| 128 + signal))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watch draws what its journals told at most 20 times a second; a key, and anything
    /// in a TUI that runs its own commands, at most 60.
    #[test]
    fn a_watchs_news_is_drawn_at_a_slower_pace_than_a_key() {
        assert_eq!(frame_gap(true, false), WATCH_FRAME);
        assert_eq!(frame_gap(true, true), FRAME);
        assert_eq!(frame_gap(false, false), FRAME);
        assert!(WATCH_FRAME > 2 * FRAME);
    }
}
