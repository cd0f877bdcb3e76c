//! [`resolve`]: host name resolution within a deadline. The system resolver cannot be interrupted, so a name
//! that is not an IP address is resolved on a helper thread that is left behind if it overruns.

use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Instant;

/// The addresses of `host:port` (an IP address is taken as it is, IPv6 in brackets or not), or
/// an error once `deadline` passes.
///
/// # Errors
///
/// The resolver's, or [`io::ErrorKind::TimedOut`] once the deadline passes.
pub fn resolve(host: &str, port: u16, deadline: Instant) -> io::Result<Vec<SocketAddr>> {
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = literal.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let (tell, told) = crossbeam_channel::bounded(1);
    let name = host.to_owned();
    std::thread::Builder::new()
        .name("net-resolve".into())
        .spawn(move || {
            let _ = tell.send((name.as_str(), port).to_socket_addrs().map(Vec::from_iter));
        })?;
    match told.recv_deadline(deadline) {
        Ok(resolved) => resolved,
        Err(_) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!("resolving {host:?} took longer than the call's deadline"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn literals_resolve_at_once_and_names_through_the_resolver() {
        let soon = Instant::now() + Duration::from_secs(5);
        let v6 = resolve("[::1]", 7, soon).expect("a literal");
        assert_eq!(v6, vec!["[::1]:7".parse().expect("valid")]);
        let local = resolve("localhost", 7, soon).expect("localhost resolves");
        assert!(
            local.iter().all(|addr| addr.ip().is_loopback()),
            "{local:?}"
        );
    }
}
