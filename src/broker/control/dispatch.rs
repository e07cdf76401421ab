//! Turning a client's line into a request, and a request into what the broker does and
//! what the client is told.

use super::{ControlServer, Incoming};
use crate::broker::state::{Broker, Refusal};
use crate::protocol::{CONTROL_MAX_LINE, ControlRequest, EventKind, Frame, ToBroker};

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

/// Carries out what a client asked, or journals a refused connection, and answers the
/// client. Events the request caused reach subscribers before the answer does.
pub fn dispatch(broker: &mut Broker, server: &mut ControlServer, incoming: Incoming) {
    let (client, peer, request) = match incoming {
        Incoming::Refused { peer, reason } => {
            broker.emit(EventKind::ControlRefused {
                uid: peer.uid,
                pid: peer.pid,
                reason,
            });
            return;
        }
        Incoming::Request {
            client,
            peer,
            request,
        } => (client, peer, request),
    };
    let answer = match request {
        Err(refusal) => refusal.into_event(),
        Ok(ControlRequest::Ping) => EventKind::Pong,
        Ok(ControlRequest::Subscribe) => {
            // A front end now watches: let the tree it reads be current.
            broker.tree_may_have_changed();
            // Everything before the subscription is in the journal, flushed, and up to
            // `journal_offset`; everything after comes on the socket.
            broker.flush_journal();
            server.broadcast(&std::mem::take(&mut broker.to_subscribers));
            server.subscribe(client);
            broker.subscribed = true;
            EventKind::ControlAck {
                request: "subscribe".into(),
                journal_offset: Some(broker.journal_len()),
                targets: Vec::new(),
                message: None,
            }
        }
        Ok(request) => {
            let name = request.name();
            match broker.control_request(request, peer) {
                Ok(done) => EventKind::ControlAck {
                    request: name.into(),
                    journal_offset: None,
                    targets: done.targets,
                    message: done.message,
                },
                Err(refusal) => refusal.into_event(),
            }
        }
    };
    broker.flush_journal();
    server.broadcast(&std::mem::take(&mut broker.to_subscribers));
    server.reply(client, &server.stamp(answer));
}

impl Refusal {
    fn into_event(self) -> EventKind {
        EventKind::ControlError {
            code: self.code.into(),
            message: self.message,
        }
    }
}
