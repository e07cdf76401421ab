//! Calls to the kernel that several parts share and none owns: random bytes, and leaving at
//! once.

use std::io;

/// Fills `bytes` from the kernel's random source (getrandom(2): it blocks only until the
/// pool is first seeded, at boot).
pub fn random_bytes(bytes: &mut [u8]) -> io::Result<()> {
    // rustix: nix has no getrandom(2).
    let mut filled = 0;
    while filled < bytes.len() {
        match rustix::rand::getrandom(&mut bytes[filled..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => filled += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

/// Exits with `code` at once, as the shell does once its command is done: our output
/// flushed, and nothing else run on the way out. exit(3) would run the C library's exit
/// handlers and the destructors first, touching pages that were never touched before
/// (faults, on the path back to the caller), for nothing of ours.
pub fn exit_now(code: i32) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // libc: neither nix nor rustix (outside its unstable `runtime`) has _exit(2).
    // SAFETY: _exit ends the process; what it skips (exit handlers, destructors) holds
    // nothing of ours: our streams are flushed above, and our files are written through.
    unsafe { libc::_exit(code) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_bytes_fill_the_whole_buffer_and_differ() {
        let mut a = [0u8; 64];
        let mut b = [0u8; 64];
        random_bytes(&mut a).unwrap();
        random_bytes(&mut b).unwrap();
        assert_ne!(a, b);
        // 64 zero bytes in a row from a working source: 2^-512.
        assert_ne!(a, [0u8; 64]);
        random_bytes(&mut []).unwrap();
    }
}
