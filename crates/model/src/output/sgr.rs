//! Select Graphic Rendition (`CSI ... m`): the only escape sequence whose effect survives into
//! a rendered line, as a change of [`Style`].

use vte::{Params, ParamsIter};

use super::style::{Color, Style};

/// Applies the parameters of one SGR sequence to `style`, as a terminal would.
pub(crate) fn apply_sgr(style: &mut Style, params: &Params) {
    let mut groups = params.iter();
    while let Some(group) = groups.next() {
        let Some(&code) = group.first() else {
            continue;
        };
        match code {
            0 => *style = Style::default(),
            1 => style.bold = true,
            2 => style.dim = true,
            3 => style.italic = true,
            // `4:0` is "no underline"; `4:1`..`4:5` are underline shapes.
            4 => style.underline = group.get(1).is_none_or(|&shape| shape != 0),
            7 => style.reverse = true,
            // Double underline on most terminals.
            21 => style.underline = true,
            22 => {
                style.bold = false;
                style.dim = false;
            }
            23 => style.italic = false,
            24 => style.underline = false,
            27 => style.reverse = false,
            30..=37 => style.fg = Color::Indexed((code - 30) as u8),
            38 => style.fg = extended_color(group, &mut groups).unwrap_or(style.fg),
            39 => style.fg = Color::Default,
            40..=47 => style.bg = Color::Indexed((code - 40) as u8),
            48 => style.bg = extended_color(group, &mut groups).unwrap_or(style.bg),
            49 => style.bg = Color::Default,
            // Underline colour: not shown, but its arguments must be consumed, or `58;5;1`
            // would read as blink and bold.
            58 => {
                extended_color(group, &mut groups);
            }
            90..=97 => style.fg = Color::Indexed((code - 90 + 8) as u8),
            100..=107 => style.bg = Color::Indexed((code - 100 + 8) as u8),
            _ => {}
        }
    }
}

/// Reads the colour that follows 38, 48 or 58: either inside the same parameter as colon
/// subparameters (`38:5:n`, `38:2::r:g:b`, `38:2:r:g:b`) or, in the common semicolon form,
/// from the parameters that follow (`38;5;n`, `38;2;r;g;b`), which are consumed even when
/// their values are out of range.
fn extended_color(group: &[u16], rest: &mut ParamsIter<'_>) -> Option<Color> {
    if group.len() > 1 {
        return match group[1] {
            5 => indexed(group.get(2).copied()?),
            2 => {
                // With a colour-space id (`38:2:id:r:g:b`) the components come last.
                let rgb = if group.len() >= 6 {
                    &group[3..6]
                } else {
                    group.get(2..5)?
                };
                rgb_color(rgb[0], rgb[1], rgb[2])
            }
            _ => None,
        };
    }
    let mut next = || rest.next().and_then(|g| g.first().copied());
    match next()? {
        5 => indexed(next()?),
        2 => {
            let (r, g, b) = (next()?, next()?, next()?);
            rgb_color(r, g, b)
        }
        _ => None,
    }
}

fn indexed(n: u16) -> Option<Color> {
    u8::try_from(n).ok().map(Color::Indexed)
}

fn rgb_color(r: u16, g: u16, b: u16) -> Option<Color> {
    Some(Color::Rgb(
        u8::try_from(r).ok()?,
        u8::try_from(g).ok()?,
        u8::try_from(b).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use vte::{Parser, Perform};

    /// Collects the styles that a sequence of SGRs leaves behind.
    #[derive(Default)]
    struct Sgr(Style);

    impl Perform for Sgr {
        fn csi_dispatch(&mut self, params: &Params, _: &[u8], _: bool, action: char) {
            if action == 'm' {
                apply_sgr(&mut self.0, params);
            }
        }
    }

    fn style_after(seq: &str) -> Style {
        let mut sgr = Sgr::default();
        Parser::new().advance(&mut sgr, seq.as_bytes());
        sgr.0
    }

    fn fg(color: Color) -> Style {
        Style {
            fg: color,
            ..Style::default()
        }
    }

    fn bg(color: Color) -> Style {
        Style {
            bg: color,
            ..Style::default()
        }
    }

    #[test]
    fn attributes_and_their_off_codes() {
        let all = style_after("\x1b[1;2;3;4;7m");
        assert!(all.bold && all.dim && all.italic && all.underline && all.reverse);
        assert_eq!(
            style_after("\x1b[1;2;3;4;7m\x1b[22;23;24;27m"),
            Style::default()
        );
        assert_eq!(style_after("\x1b[1;31;44m\x1b[0m"), Style::default());
        assert_eq!(style_after("\x1b[1;31m\x1b[m"), Style::default());
        assert!(style_after("\x1b[21m").underline);
        assert!(style_after("\x1b[4:3m").underline);
        assert!(!style_after("\x1b[4m\x1b[4:0m").underline);
    }

    #[test]
    fn basic_and_bright_colours() {
        assert_eq!(style_after("\x1b[31m"), fg(Color::Indexed(1)));
        assert_eq!(style_after("\x1b[37m"), fg(Color::Indexed(7)));
        assert_eq!(style_after("\x1b[90m"), fg(Color::Indexed(8)));
        assert_eq!(style_after("\x1b[97m"), fg(Color::Indexed(15)));
        assert_eq!(style_after("\x1b[31m\x1b[39m"), Style::default());
        assert_eq!(style_after("\x1b[40m"), bg(Color::Indexed(0)));
        assert_eq!(style_after("\x1b[107m"), bg(Color::Indexed(15)));
        assert_eq!(style_after("\x1b[42m\x1b[49m"), Style::default());
    }

    #[test]
    fn extended_colours_semicolon_form() {
        assert_eq!(style_after("\x1b[38;5;208m"), fg(Color::Indexed(208)));
        assert_eq!(style_after("\x1b[48;5;17m"), bg(Color::Indexed(17)));
        assert_eq!(style_after("\x1b[38;2;1;2;3m"), fg(Color::Rgb(1, 2, 3)));
        assert_eq!(
            style_after("\x1b[48;2;255;128;0m"),
            bg(Color::Rgb(255, 128, 0))
        );
        // What follows the colour is read as ordinary codes again.
        let style = style_after("\x1b[38;5;1;1m");
        assert_eq!(style.fg, Color::Indexed(1));
        assert!(style.bold);
    }

    #[test]
    fn extended_colours_colon_form() {
        assert_eq!(style_after("\x1b[38:5:208m"), fg(Color::Indexed(208)));
        assert_eq!(style_after("\x1b[38:2:1:2:3m"), fg(Color::Rgb(1, 2, 3)));
        assert_eq!(style_after("\x1b[48:2::4:5:6m"), bg(Color::Rgb(4, 5, 6)));
        assert_eq!(style_after("\x1b[48:2:0:4:5:6m"), bg(Color::Rgb(4, 5, 6)));
    }

    #[test]
    fn bad_extended_colours_change_nothing_and_consume_their_arguments() {
        assert_eq!(style_after("\x1b[38;5;300m"), Style::default());
        assert_eq!(style_after("\x1b[38;2;1;256;3m"), Style::default());
        assert_eq!(style_after("\x1b[38;5m"), Style::default());
        assert_eq!(style_after("\x1b[38;9;1m").fg, Color::Default);
        // Underline colour is not shown and its arguments are not taken for blink and bold.
        assert_eq!(style_after("\x1b[58;5;1m"), Style::default());
        assert_eq!(style_after("\x1b[58;2;1;1;1m"), Style::default());
    }

    #[test]
    fn unknown_codes_are_ignored() {
        assert_eq!(style_after("\x1b[5;6;8;9;53;999m"), Style::default());
    }
}
