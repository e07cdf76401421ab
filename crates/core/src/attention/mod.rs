//! Telling when a command needs the operator, decided from samples, output and time handed
//! in: [`detector`] (an agent's wait for its human in `agent_wait`), and what it knows of
//! the command's inputs and asks a sample to read ([`inputs`]). The broker's probe reads
//! /proc and `fstat` for it.

mod agent_wait;
pub mod detector;
pub mod inputs;
