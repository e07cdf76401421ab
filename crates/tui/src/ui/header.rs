//! The top line: the machine's pressure (CPU, memory, swap, load, processes), or each core's
//! CPU. Drawn from the last snapshot only; memory or swap near full stands out, as that is
//! when a runaway shows itself.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::format::{compact_bytes, count};
use super::style;
use tether_os::sampler::Machine;

const LABEL: Style = style::DIM;
/// Memory or swap near full.
pub const PRESSURE: Style = Style::new()
    .fg(Color::White)
    .bg(Color::Red)
    .add_modifier(Modifier::BOLD);
/// Between segments.
const GAP: &str = "  ";

/// `recorded`: the session on screen ended; the figures are this machine's now, not its,
/// and say so first.
pub fn draw(frame: &mut Frame, area: Rect, machine: Option<&Machine>, cores: bool, recorded: bool) {
    let width = area.width as usize;
    let mut segments = match machine {
        None => vec![vec![Span::styled(" machine: no reading yet", LABEL)]],
        Some(m) if cores => core_segments(m),
        Some(m) => summary_segments(m),
    };
    if let (true, Some(_), Some(first)) = (recorded, machine, segments.first_mut()) {
        first.insert(0, Span::styled(" this machine now:", LABEL));
    }
    frame.render_widget(Paragraph::new(fit_segments(segments, width)), area);
}

/// ` CPU 12%  mem 3.1G/15.5G  swap 0.0K/2.0G  load 0.52 0.48 0.40  312 procs`, a segment
/// per figure, most telling first.
pub fn summary_segments(m: &Machine) -> Vec<Vec<Span<'static>>> {
    let used_of = |label: &str, used: u64, total: u64, full: bool| {
        let figure = format!("{}/{}", compact_bytes(used), compact_bytes(total));
        vec![
            Span::styled(format!("{label} "), LABEL),
            Span::styled(figure, if full { PRESSURE } else { Style::new() }),
        ]
    };
    let swap = if m.swap_total == 0 {
        vec![Span::styled("swap ", LABEL), Span::raw("none")]
    } else {
        used_of("swap", m.swap_used, m.swap_total, m.swap_near_full())
    };
    vec![
        vec![
            Span::styled(" CPU ", LABEL),
            Span::raw(percent(m.cpu_percent)),
        ],
        used_of("mem", m.memory_used, m.memory_total, m.memory_near_full()),
        swap,
        vec![
            Span::styled("load ", LABEL),
            Span::raw(format!(
                "{:.2} {:.2} {:.2}",
                m.load[0], m.load[1], m.load[2]
            )),
        ],
        vec![Span::raw(count(m.processes, "proc", "procs"))],
    ]
}

/// ` cores  0:12%  1:80%  …`: one segment per core.
pub fn core_segments(m: &Machine) -> Vec<Vec<Span<'static>>> {
    let mut segments = vec![vec![Span::styled(" cores", LABEL)]];
    if m.cores.is_empty() {
        segments.push(vec![Span::raw(percent(None))]);
    }
    segments.extend(m.cores.iter().enumerate().map(|(i, usage)| {
        vec![
            Span::styled(format!("{i}:"), LABEL),
            Span::raw(percent(Some(*usage))),
        ]
    }));
    segments
}

/// `12%`; `–` before CPU can be measured.
pub fn percent(value: Option<f32>) -> String {
    value.map_or_else(
        || "–".to_string(),
        |v| format!("{:.0}%", v.clamp(0.0, 100.0)),
    )
}

/// The segments that fit whole in `width` columns, in order; a `…` says some were left out.
pub fn fit_segments(segments: Vec<Vec<Span<'static>>>, width: usize) -> Line<'static> {
    let columns = |segment: &[Span]| segment.iter().map(Span::width).sum::<usize>();
    let mut spans = Vec::new();
    let mut used = 0;
    let count = segments.len();
    for (i, segment) in segments.into_iter().enumerate() {
        let gap = if i == 0 { 0 } else { GAP.len() };
        let need = gap + columns(&segment);
        // The last segment needs no room for the `…` after it.
        let reserve = if i + 1 == count { 0 } else { 2 };
        if used + need + reserve > width {
            if used + 2 <= width {
                spans.push(Span::styled(" …", LABEL));
            }
            break;
        }
        if gap > 0 {
            spans.push(Span::raw(GAP));
        }
        spans.extend(segment);
        used += need;
    }
    Line::from(spans)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine() -> Machine {
        const G: u64 = 1 << 30;
        Machine {
            cpu_percent: Some(12.4),
            cores: vec![3.0, 21.8],
            memory_used: 3 * G + G / 10,
            memory_total: 15 * G + G / 2,
            swap_used: 0,
            swap_total: 2 * G,
            load: [0.52, 0.48, 0.4],
            processes: 312,
        }
    }

    fn text(line: &Line) -> String {
        line.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn the_summary_fits_80_columns_whole() {
        let line = fit_segments(summary_segments(&machine()), 80);
        assert_eq!(
            text(&line),
            " CPU 12%  mem 3.1G/15.5G  swap 0.0K/2.0G  load 0.52 0.48 0.40  312 procs"
        );
        assert!(line.width() <= 80);
    }

    #[test]
    fn a_narrow_header_drops_whole_segments() {
        let line = fit_segments(summary_segments(&machine()), 42);
        assert_eq!(text(&line), " CPU 12%  mem 3.1G/15.5G  swap 0.0K/2.0G …");
        assert_eq!(line.width(), 42);
        // One column less and swap goes too, leaving room for the `…`.
        let line = fit_segments(summary_segments(&machine()), 41);
        assert_eq!(text(&line), " CPU 12%  mem 3.1G/15.5G …");
        assert_eq!(text(&fit_segments(summary_segments(&machine()), 3)), " …");
    }

    #[test]
    fn memory_or_swap_near_full_stands_out() {
        let plain = summary_segments(&machine());
        assert!(plain.iter().flatten().all(|s| s.style != PRESSURE));
        let mut full = machine();
        full.swap_used = full.swap_total;
        full.memory_used = full.memory_total - full.memory_total / 20;
        let spans: Vec<_> = summary_segments(&full).into_iter().flatten().collect();
        let loud: Vec<_> = spans
            .iter()
            .filter(|s| s.style == PRESSURE)
            .map(|s| s.content.to_string())
            .collect();
        assert_eq!(loud, ["14.7G/15.5G", "2.0G/2.0G"]);
    }

    #[test]
    fn figures() {
        assert_eq!(percent(None), "–");
        assert_eq!(percent(Some(99.6)), "100%");
        assert_eq!(percent(Some(-1.0)), "0%");
        let mut no_swap = machine();
        no_swap.swap_total = 0;
        no_swap.processes = 1;
        let line = fit_segments(summary_segments(&no_swap), 200);
        assert!(text(&line).contains("swap none"), "{}", text(&line));
        assert!(text(&line).ends_with(" 1 proc"));
    }

    #[test]
    fn cores_one_segment_each() {
        let line = fit_segments(core_segments(&machine()), 80);
        assert_eq!(text(&line), " cores  0:3%  1:22%");
        let mut many = machine();
        many.cores = vec![50.0; 64];
        let line = fit_segments(core_segments(&many), 80);
        assert!(line.width() <= 80);
        assert!(text(&line).ends_with(" …"));
        let mut unmeasured = machine();
        unmeasured.cores.clear();
        assert_eq!(
            text(&fit_segments(core_segments(&unmeasured), 80)),
            " cores  –"
        );
    }

    /// Over a session that ended, the figures say whose they are: this machine's now.
    #[test]
    fn over_a_recorded_session_the_figures_are_this_machine_now() {
        let backend = ratatui::backend::TestBackend::new(100, 1);
        let mut terminal = ratatui::Terminal::new(backend).expect("a terminal");
        let drawn = |terminal: &mut ratatui::Terminal<ratatui::backend::TestBackend>, recorded| {
            terminal
                .draw(|frame| draw(frame, frame.area(), Some(&machine()), false, recorded))
                .expect("draw");
            let buffer = terminal.backend().buffer();
            (0..100)
                .map(|x| buffer[(x, 0)].symbol())
                .collect::<String>()
        };
        assert!(drawn(&mut terminal, true).starts_with(" this machine now: CPU 12%  mem"));
        assert!(drawn(&mut terminal, false).starts_with(" CPU 12%  mem"));
    }
}
