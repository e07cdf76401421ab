//! A command's output as the TUI shows it. The broker stores each stream byte for byte in a
//! log file that keeps growing; this indexes its lines, reads back the ones on screen, and
//! renders them as a terminal would (colours, `\r` progress lines) while letting no control
//! character or escape sequence through.

mod cells;
pub mod index;
pub mod json;
pub mod runs;
pub mod sanitize;
mod search;
mod sgr;
pub mod stream;
pub mod style;
pub mod tail;
mod width;
pub mod wrap;

pub use index::LineIndex;
pub use sanitize::{LineRenderer, render_line};
pub use stream::StreamFile;
pub use style::{Color, Style, StyledLine, one_line, plain_text};
pub use width::{char_width, clusters as width_clusters, column_widths, text_width, truncate};
pub use wrap::wrap;
