//! Which columns the command list shows in a given width, and how wide each is: the state
//! and the CPU always (a runaway must show at any size), the name as far as it goes, then the
//! runtime, the number, memory and start while they leave the command text room; the command
//! text gets what is left, and keeps [`MIN_COMMAND`] where a long name or a long state
//! (`failed to start`) would take it: those give way first, the state cut with `…`.

/// A column of the command list, in the order shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    Marker,
    Number,
    Name,
    State,
    Time,
    Cpu,
    Rss,
    Start,
    Command,
}

impl Column {
    pub fn title(self) -> &'static str {
        match self {
            Column::Marker => "",
            Column::Number => "#",
            Column::Name => "NAME",
            Column::State => "STATE",
            Column::Time => "TIME",
            Column::Cpu => "CPU",
            Column::Rss => "RSS",
            Column::Start => "START",
            Column::Command => "COMMAND",
        }
    }
}

/// The narrowest the state column gets: "stopping", "exit 127", "killed".
pub const MIN_STATE: usize = 8;
/// The widest: "failed to start", "over budget", "timed out" (`model::ending`'s short words).
pub const MAX_STATE: usize = 15;
/// "10.0s", "1m23s", "2h05m"; CPU as "99.9%" or a time; memory as "12.3M".
const TIME: usize = 5;
/// "+12:34.567".
const START: usize = 10;
/// The command text (and badges) keeps at least this, else a column to its left goes.
const MIN_COMMAND: usize = 10;
/// A name longer than this is cut: the command text after it says the rest.
const MAX_NAME: usize = 24;
/// The narrowest a name gets to leave the command text its minimum.
const MIN_NAME: usize = 8;

/// The optional columns, the first to go first: right to left, but the number goes before
/// the runtime (the name tells most commands apart), and the CPU never does (it finds the
/// runaway; an ended command's shows its CPU time).
const DROP_ORDER: [Column; 4] = [Column::Start, Column::Rss, Column::Number, Column::Time];

/// The columns for a list `inner` cells wide whose longest name takes `name` columns,
/// longest number `number` (`#` included) and longest state `state`, with their widths, in
/// the order shown.
pub fn layout(inner: usize, name: usize, number: usize, state: usize) -> Vec<(Column, usize)> {
    let mut name = name.clamp(4, MAX_NAME);
    let mut state = state.clamp(MIN_STATE, MAX_STATE);
    let width_of = |column: Column, name: usize, state: usize| match column {
        Column::Marker => 1,
        Column::Number => number,
        Column::Name => name,
        Column::State => state,
        Column::Time | Column::Cpu | Column::Rss => TIME,
        Column::Start => START,
        Column::Command => 0,
    };
    let mut shown = vec![
        Column::Marker,
        Column::Number,
        Column::Name,
        Column::State,
        Column::Time,
        Column::Cpu,
        Column::Rss,
        Column::Start,
    ];
    // Each column but the first takes a space before it.
    let used = |shown: &[Column], name: usize, state: usize| -> usize {
        shown
            .iter()
            .map(|c| width_of(*c, name, state))
            .sum::<usize>()
            + shown.len()
            - 1
    };
    for column in DROP_ORDER {
        if inner >= used(&shown, name, state) + 1 + MIN_COMMAND {
            break;
        }
        shown.retain(|c| *c != column);
    }
    // What the columns that stay still take from the command text's minimum: first from a
    // long name (the command text says what it is too), then from a state wider than the
    // common ones (`failed to start`, cut with `…`: the detail view has it whole).
    let mut short = (used(&shown, name, state) + 1 + MIN_COMMAND).saturating_sub(inner);
    for (width, least) in [(&mut name, MIN_NAME), (&mut state, MIN_STATE)] {
        let give = short.min(width.saturating_sub(least));
        *width -= give;
        short -= give;
    }
    let used = |shown: &[Column]| used(shown, name, state);
    let mut columns: Vec<(Column, usize)> = shown
        .iter()
        .map(|c| (*c, width_of(*c, name, state)))
        .collect();
    let rest = inner.saturating_sub(used(&shown) + 1);
    if rest > 0 {
        columns.push((Column::Command, rest));
    } else {
        // No room for the command text: the name takes up the slack, or gives way when it is
        // too narrow even for the name; the state and the CPU never do (`running` must not
        // read `runnin`).
        let used = used(&shown);
        if let Some((_, width)) = columns.iter_mut().find(|(c, _)| *c == Column::Name) {
            *width = (*width + inner).saturating_sub(used).max(1);
        }
    }
    columns
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(columns: &[(Column, usize)]) -> Vec<Column> {
        columns.iter().map(|(c, _)| *c).collect()
    }

    fn total(columns: &[(Column, usize)]) -> usize {
        columns.iter().map(|(_, w)| w).sum::<usize>() + columns.len() - 1
    }

    #[test]
    fn a_wide_list_shows_every_column_and_gives_the_command_the_rest() {
        use Column::*;
        let columns = layout(196, 10, 5, 8);
        assert_eq!(
            names(&columns),
            [Marker, Number, Name, State, Time, Cpu, Rss, Start, Command]
        );
        assert_eq!(total(&columns), 196);
        assert_eq!(columns.last(), Some(&(Command, 196 - 57)));
    }

    #[test]
    fn columns_drop_out_as_the_list_narrows() {
        use Column::*;
        // Everything with the command's minimum: 56 + 1 + 10.
        assert_eq!(names(&layout(67, 10, 5, 8)).len(), 9);
        assert!(!names(&layout(66, 10, 5, 8)).contains(&Start));
        assert_eq!(
            names(&layout(60, 10, 5, 8)),
            [Marker, Number, Name, State, Time, Cpu, Rss, Command]
        );
        assert_eq!(
            names(&layout(50, 10, 5, 8)),
            [Marker, Number, Name, State, Time, Cpu, Command]
        );
        assert_eq!(
            names(&layout(45, 10, 5, 8)),
            [Marker, Name, State, Time, Cpu, Command]
        );
        // The list at 120×40 (38 cells inside): the state, the CPU and the command text.
        assert_eq!(
            names(&layout(38, 10, 5, 8)),
            [Marker, Name, State, Cpu, Command]
        );
        for inner in 20..200 {
            assert_eq!(total(&layout(inner, 10, 5, 8)), inner, "at {inner}");
        }
    }

    #[test]
    fn the_name_gives_way_before_the_state_and_the_cpu() {
        use Column::*;
        // The list at 80×24: 25 cells inside its border.
        let columns = layout(25, 12, 3, 8);
        assert_eq!(columns, [(Marker, 1), (Name, 8), (State, 8), (Cpu, 5)]);
        let columns = layout(20, 12, 3, 8);
        assert_eq!(
            columns,
            [(Marker, 1), (Name, 3), (State, 8), (Cpu, 5)],
            "the state and the CPU whole"
        );
        // A long name is cut at the maximum.
        assert_eq!(layout(200, 80, 3, 8)[2], (Name, MAX_NAME));
    }

    #[test]
    fn a_narrow_list_keeps_room_for_the_command_text() {
        use Column::*;
        // The list at 120 columns (38 cells inside) showing `failed to start`: the state
        // gives the command text its minimum, and no more.
        assert_eq!(
            layout(38, 7, 3, MAX_STATE),
            [
                (Marker, 1),
                (Name, 7),
                (State, 11),
                (Cpu, 5),
                (Command, MIN_COMMAND)
            ]
        );
        // A long name gives way first, down to its own minimum; the state then.
        assert_eq!(
            layout(38, 20, 3, 9),
            [
                (Marker, 1),
                (Name, 9),
                (State, 9),
                (Cpu, 5),
                (Command, MIN_COMMAND)
            ]
        );
        assert_eq!(
            layout(38, MAX_NAME, 3, MAX_STATE),
            [
                (Marker, 1),
                (Name, MIN_NAME),
                (State, 10),
                (Cpu, 5),
                (Command, MIN_COMMAND)
            ]
        );
        // Where the command text has its room anyway, nothing is cut.
        assert_eq!(layout(78, 7, 3, MAX_STATE)[3], (State, MAX_STATE));
        for inner in 20..200 {
            let columns = layout(inner, MAX_NAME, 5, MAX_STATE);
            assert_eq!(total(&columns), inner, "at {inner}");
            if inner >= 1 + 1 + MIN_NAME + 1 + MIN_STATE + 1 + TIME + 1 + MIN_COMMAND {
                assert!(
                    matches!(columns.last(), Some((Command, width)) if *width >= MIN_COMMAND),
                    "at {inner}: {columns:?}"
                );
            }
        }
    }
}
