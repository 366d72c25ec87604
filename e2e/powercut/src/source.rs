//! A loopback source address per process, for network partitions between brokers that all run
//! on 127.0.0.1: with `STROM_SHIM_SOURCE_IP=127.0.0.<n>` set, every unbound IPv4 socket the
//! process connects to a loopback address is first bound to that address (port 0). A proxy
//! in front of a broker then tells connections *from* a given broker apart by their peer
//! address, and can refuse them: one broker cut off from the others in both directions.

use std::sync::OnceLock;

use libc::{c_int, sockaddr, sockaddr_in, socklen_t};

/// The configured source address (network byte order), read once.
fn source_ip() -> Option<u32> {
    static SOURCE: OnceLock<Option<u32>> = OnceLock::new();
    *SOURCE.get_or_init(|| {
        let ip: std::net::Ipv4Addr = std::env::var("STROM_SHIM_SOURCE_IP").ok()?.parse().ok()?;
        ip.is_loopback().then(|| u32::from(ip).to_be())
    })
}

/// Binds `fd` to the source address when it is an unbound IPv4 socket about to connect to a
/// loopback address. Errors are ignored: the connect then goes out as it would have.
///
/// # Safety
/// `addr` must be null or point to `len` readable bytes, as connect(2) requires.
pub unsafe fn bind_before_connect(fd: c_int, addr: *const sockaddr, len: socklen_t) {
    let Some(source) = source_ip() else { return };
    if addr.is_null() || (len as usize) < std::mem::size_of::<sockaddr_in>() {
        return;
    }
    // SAFETY: the caller passes a readable sockaddr of `len` bytes, at least a sockaddr_in.
    let dest = unsafe { std::ptr::read_unaligned(addr.cast::<sockaddr_in>()) };
    if c_int::from(dest.sin_family) != libc::AF_INET || u32::from_be(dest.sin_addr.s_addr) >> 24 != 127 {
        return;
    }
    // SAFETY: sockaddr_in is plain data.
    let mut bound: sockaddr_in = unsafe { std::mem::zeroed() };
    let mut bound_len = std::mem::size_of::<sockaddr_in>() as socklen_t;
    // SAFETY: `bound` is writable for `bound_len` bytes.
    let named = unsafe { libc::getsockname(fd, (&raw mut bound).cast::<sockaddr>(), &mut bound_len) };
    if named != 0 || c_int::from(bound.sin_family) != libc::AF_INET || bound.sin_port != 0 {
        return;
    }
    // SAFETY: as above.
    let mut local: sockaddr_in = unsafe { std::mem::zeroed() };
    local.sin_family = libc::AF_INET as libc::sa_family_t;
    local.sin_addr.s_addr = source;
    // SAFETY: `local` is a valid sockaddr_in of the length given.
    let _ = unsafe {
        libc::bind(fd, (&raw const local).cast::<sockaddr>(), std::mem::size_of::<sockaddr_in>() as socklen_t)
    };
}
