//! Controlling live brokered commands from any front end of the same user: finding them
//! from their journals, and talking to each broker over its control socket.

pub mod socket_dir;
