//! Telling when a command needs the operator, decided from samples, output and time handed
//! in: [`detector`] (an agent's wait for its human in `agent_wait`), and what it knows of
//! the command's inputs and asks a sample to read ([`inputs`]), and when the notify command
//! may run ([`notify_policy`]), and whether a write shows anything ([`shown`]). The
//! broker's probe reads /proc and `fstat` for it.

mod agent_wait;
pub mod detector;
pub mod inputs;
pub mod notify_policy;
pub mod shown;
