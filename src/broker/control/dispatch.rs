//! Turning a client's line into a request; what the broker does with it and what the client
//! is told are the broker's (`state/machine.rs`).

use crate::broker::state::Refusal;
use crate::protocol::{CONTROL_MAX_LINE, ControlRequest, Frame, ToBroker};

/// Reads one request line. `launch` is refused by name: nothing on this socket starts a
/// process.
pub(super) fn parse(frame: Frame) -> Result<ControlRequest, Refusal> {
    let line = match frame {
        Frame::TooLong { len } => {
            return Err(Refusal {
                code: "line_too_long",
                message: format!(
                    "a request line of {len} bytes exceeds the {CONTROL_MAX_LINE}-byte limit; it was skipped"
                ),
            });
        }
        Frame::Line(line) => line,
    };
    serde_json::from_slice::<ControlRequest>(&line).map_err(|err| {
        if matches!(
            serde_json::from_slice::<ToBroker>(&line),
            Ok(ToBroker::Launch(_))
        ) || err.to_string().contains("unknown variant `launch`")
        {
            return Refusal {
                code: "launch_refused",
                message: "the control socket cannot start commands; it takes subscribe, ping, signal and stop".into(),
            };
        }
        let shown = String::from_utf8_lossy(&line[..line.len().min(80)]).into_owned();
        Refusal {
            code: "malformed",
            message: format!(
                "cannot parse request `{shown}`: {err}; the control socket takes JSON lines of type subscribe, ping, signal or stop"
            ),
        }
    })
}
