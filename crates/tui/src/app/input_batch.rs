//! Input from a run of keys, joined. A paste the terminal does not bracket comes as one key
//! event per character; sent one by one, 100 kB of it is 100,000 requests for the broker to
//! read and write one byte each. The event loop handles every key already read before it
//! sends anything, and the keys' input to one command goes as one piece.
//!
//! Order is kept: input is only ever joined with input to the same command that comes right
//! after it, and any other effect (a signal, a launch) is preceded by the input held before it.

use super::update::Effect;

/// Input held back to be joined with what the next keys type.
#[derive(Debug, Default)]
pub struct InputBatch {
    held: Option<(usize, Vec<u8>)>,
}

impl InputBatch {
    /// Takes the effects of one action. Returns those to apply now, in order: input is held
    /// (joined to held input for the same command); anything else comes out after the held
    /// input it follows.
    pub fn add(&mut self, effects: Vec<Effect>) -> Vec<Effect> {
        let mut now = Vec::new();
        for effect in effects {
            match effect {
                Effect::Input(id, bytes) => match &mut self.held {
                    Some((held_id, held)) if *held_id == id => held.extend_from_slice(&bytes),
                    held => {
                        now.extend(held.take().map(|(id, bytes)| Effect::Input(id, bytes)));
                        *held = Some((id, bytes));
                    }
                },
                other => {
                    now.extend(self.take());
                    now.push(other);
                }
            }
        }
        now
    }

    /// The input held, to apply once the keys read so far are handled.
    pub fn take(&mut self) -> Option<Effect> {
        self.held.take().map(|(id, bytes)| Effect::Input(id, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tether_protocol::protocol::Request;

    fn input(id: usize, bytes: &[u8]) -> Effect {
        Effect::Input(id, bytes.to_vec())
    }

    #[test]
    fn keys_for_one_command_become_one_input() {
        let mut batch = InputBatch::default();
        for key in [b"a", b"b", b"\r"] {
            assert!(batch.add(vec![input(0, key)]).is_empty());
        }
        assert_eq!(batch.take(), Some(input(0, b"ab\r")));
        assert_eq!(batch.take(), None);
    }

    #[test]
    fn another_effect_comes_after_the_input_typed_before_it() {
        let mut batch = InputBatch::default();
        batch.add(vec![input(0, b"x")]);
        batch.add(vec![input(0, b"y")]);
        let stop = Effect::Send(0, Request::Stop { origin: None });
        assert_eq!(
            batch.add(vec![stop.clone()]),
            [input(0, b"xy"), stop],
            "the input first, then the stop"
        );
        assert_eq!(batch.take(), None);
        batch.add(vec![input(0, b"z")]);
        assert_eq!(batch.take(), Some(input(0, b"z")));
    }

    #[test]
    fn input_for_another_command_releases_the_held_input() {
        let mut batch = InputBatch::default();
        batch.add(vec![input(0, b"to zero")]);
        assert_eq!(batch.add(vec![input(1, b"to one")]), [input(0, b"to zero")]);
        assert_eq!(batch.take(), Some(input(1, b"to one")));
    }

    #[test]
    fn effects_of_one_action_keep_their_order() {
        let mut batch = InputBatch::default();
        let launch = Effect::Launch(2);
        assert_eq!(
            batch.add(vec![input(0, b"a"), launch.clone(), input(0, b"b")]),
            [input(0, b"a"), launch]
        );
        assert_eq!(batch.take(), Some(input(0, b"b")));
    }
}
