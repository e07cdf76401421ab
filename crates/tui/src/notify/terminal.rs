//! A notification written to the front end's own terminal: OSC 9 (`ESC ] 9 ; text BEL`,
//! iTerm2, WezTerm, Ghostty, kitty...), OSC 777 (`ESC ] 777 ; notify ;
//! title ; body BEL`, the terminals built on VTE that carry its notify patch, foot, urxvt),
//! and BEL, which every terminal and multiplexer turns into something (a bell, an urgent
//! window, tmux's bell flag).
//!
//! The text is a [`Notice`]'s, already one clean line; here it is cleaned once more, since
//! what ends an OSC (BEL, ESC, ST) inside it would end the sequence early and let the rest
//! be read as the terminal's input. Inside tmux an OSC goes through its passthrough (`ESC P
//! tmux; ... ESC \`, with every ESC doubled), which tmux forwards when `allow-passthrough`
//! is on and drops otherwise; BEL goes as it is, as tmux handles bells itself.

use super::Notice;
use tether_config::notify::TerminalNotify;

/// What the terminal takes, from the environment it set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TerminalKind {
    /// Known to show OSC 777 notifications.
    pub osc777: bool,
    /// Inside tmux (`$TMUX`).
    pub tmux: bool,
}

impl TerminalKind {
    pub fn from_env() -> TerminalKind {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let term = var("TERM").unwrap_or_default();
        TerminalKind {
            osc777: var("VTE_VERSION").is_some()
                || term.starts_with("foot")
                || term.starts_with("rxvt-unicode"),
            tmux: var("TMUX").is_some(),
        }
    }
}

/// The bytes that tell `notice` the way `setting` says, to a terminal of `kind`; empty for
/// `off`.
pub fn encode(setting: TerminalNotify, kind: TerminalKind, notice: &Notice) -> String {
    let osc = match setting {
        TerminalNotify::Off => return String::new(),
        TerminalNotify::Bel => None,
        TerminalNotify::Osc9 => Some(osc9(notice)),
        TerminalNotify::Osc777 => Some(osc777(notice)),
        TerminalNotify::Auto if kind.osc777 => Some(osc777(notice)),
        TerminalNotify::Auto => Some(osc9(notice)),
    };
    let mut out = match osc {
        Some(osc) if kind.tmux => tmux_passthrough(&osc),
        Some(osc) => osc,
        None => String::new(),
    };
    out.push('\x07');
    out
}

/// `ESC ] 9 ; tether: title: body BEL`. ConEmu reads `9 ; N ;` with a number as one of
/// its own commands: the text starts with `tether`, never with a digit.
fn osc9(notice: &Notice) -> String {
    format!(
        "\x1b]9;tether: {}: {}\x07",
        payload(&notice.title),
        payload(&notice.body)
    )
}

/// `ESC ] 777 ; notify ; tether: title ; body BEL`; the title holds no `;`, which would
/// end it.
fn osc777(notice: &Notice) -> String {
    format!(
        "\x1b]777;notify;tether: {};{}\x07",
        payload(&notice.title).replace(';', ","),
        payload(&notice.body)
    )
}

/// Text inside an OSC: no control character at all (C0, DEL, C1: BEL, ESC and ST end an
/// OSC), whatever the notice was built from.
pub fn payload(text: &str) -> String {
    super::clean(text)
        .chars()
        .map(|c| if c.is_control() { '\u{fffd}' } else { c })
        .collect()
}

/// An escape sequence as tmux forwards it to the terminal outside.
fn tmux_passthrough(sequence: &str) -> String {
    format!("\x1bPtmux;{}\x1b\\", sequence.replace('\x1b', "\x1b\x1b"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(title: &str, body: &str) -> Notice {
        Notice {
            title: title.into(),
            body: body.into(),
        }
    }

    const PLAIN: TerminalKind = TerminalKind {
        osc777: false,
        tmux: false,
    };

    #[test]
    fn each_setting_writes_its_sequence_then_bel() {
        let n = notice("s/02 needs input", "build: read(0)");
        let at = |setting| encode(setting, PLAIN, &n);
        assert_eq!(
            at(TerminalNotify::Osc9),
            "\x1b]9;tether: s/02 needs input: build: read(0)\x07\x07"
        );
        assert_eq!(
            at(TerminalNotify::Osc777),
            "\x1b]777;notify;tether: s/02 needs input;build: read(0)\x07\x07"
        );
        assert_eq!(at(TerminalNotify::Bel), "\x07");
        assert_eq!(at(TerminalNotify::Off), "");
        assert_eq!(at(TerminalNotify::Auto), at(TerminalNotify::Osc9));
        let vte = TerminalKind {
            osc777: true,
            ..PLAIN
        };
        assert_eq!(
            encode(TerminalNotify::Auto, vte, &n),
            at(TerminalNotify::Osc777)
        );
    }

    #[test]
    fn inside_tmux_the_osc_goes_through_its_passthrough_and_bel_as_it_is() {
        let tmux = TerminalKind {
            tmux: true,
            ..PLAIN
        };
        let out = encode(TerminalNotify::Osc9, tmux, &notice("t", "b"));
        assert_eq!(out, "\x1bPtmux;\x1b\x1b]9;tether: t: b\x07\x1b\\\x07");
        assert_eq!(encode(TerminalNotify::Bel, tmux, &notice("t", "b")), "\x07");
    }

    #[test]
    fn nothing_from_a_command_can_end_the_sequence_early() {
        // A detail built from argv: BEL, ESC, ST (8-bit and 7-bit), CSI, newlines, bidi.
        let hostile = "x\x07y\x1b]0;pwned\x07\u{9c}z\x1b\\w\u{9b}2J\nnext\u{202e}rtl";
        for setting in [TerminalNotify::Osc9, TerminalNotify::Osc777] {
            for kind in [
                PLAIN,
                TerminalKind {
                    tmux: true,
                    ..PLAIN
                },
            ] {
                let out = encode(setting, kind, &notice(hostile, hostile));
                let inner = out
                    .trim_end_matches('\x07')
                    .trim_end_matches("\x1b\\")
                    .trim_end_matches('\x07');
                let (_, text) = inner.split_once(";tether: ").expect("a payload");
                assert!(
                    !text.chars().any(|c| c.is_control() || c == '\u{202e}'),
                    "{setting:?} {kind:?}: {out:?}"
                );
                assert!(text.contains("x\u{fffd}y"), "{text:?}");
            }
        }
        // OSC 777's title ends at its first `;`: none is left in it.
        let out = encode(
            TerminalNotify::Osc777,
            PLAIN,
            &notice("a;b;c", "body; with; semicolons"),
        );
        assert_eq!(
            out,
            "\x1b]777;notify;tether: a,b,c;body; with; semicolons\x07\x07"
        );
    }

    #[test]
    fn a_long_text_is_cut() {
        let long = "x".repeat(5_000);
        let out = encode(TerminalNotify::Osc9, PLAIN, &notice(&long, &long));
        assert!(out.len() < 500, "{} bytes", out.len());
        assert!(out.contains('…'));
    }
}
