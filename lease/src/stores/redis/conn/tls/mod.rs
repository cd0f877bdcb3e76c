//! TLS for `rediss://` servers, over `deadline_net`'s sessions: the handshake by the connection's
//! deadline, a port that answers plain Redis told apart from one that does not answer, and the
//! failures that are refusals given the code `TLS`. Certificates are always verified: a URL
//! asking for `#insecure` is refused (give the server's CA instead). A build without the `tls`
//! feature refuses a `rediss://` server when the client is built, with a message that names the
//! feature: a build that needs no C compiler for `ring`.

use crate::error::{Error, Result};
use crate::stores::redis::conn::Endpoint;
use deadline_net::tls::{HandshakeError, TlsFiles, TlsStream};
use deadline_net::Timed;
use redis::{RedisError, RedisResult};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// The configuration every TLS session of a client shares.
pub(crate) type Config = deadline_net::tls::ClientConfig;

/// What a `rediss://` server needs and a build without the `tls` feature lacks.
#[cfg(not(feature = "tls"))]
pub(crate) const NEEDS_TLS: &str =
    "rediss:// needs TLS, and this build of redis-lease has no `tls` feature (on by default)";

/// The client configuration for `files`, read now (a missing or malformed file is an
/// `InvalidArgument` when the client is built, not a failure of its first call).
pub(crate) fn config(files: &TlsFiles) -> Result<Arc<Config>> {
    #[cfg(not(feature = "tls"))]
    {
        let _ = files;
        Err(Error::InvalidArgument(NEEDS_TLS.into()))
    }
    #[cfg(feature = "tls")]
    deadline_net::tls::client_config(files).map_err(|error| Error::InvalidArgument(error.0))
}

/// Runs the TLS handshake with `endpoint` (its server named `host`) over `timed`, by its
/// deadline. A failure of the handshake itself (a certificate that does not verify, no protocol
/// in common, a port that does not speak TLS) is a refusal, with the code `TLS`; a server that
/// does not answer is an I/O timeout.
pub(crate) fn handshake(endpoint: &Endpoint, host: &str, timed: Timed) -> RedisResult<TlsStream> {
    let refused = |text: String| redis::make_extension_error("TLS".into(), Some(text));
    let config = endpoint
        .tls
        .clone()
        .ok_or_else(|| refused("no TLS configuration for a rediss:// server".into()))?;
    deadline_net::tls::handshake(config, host, timed, Some(&speaks_plain_redis)).map_err(|error| {
        match error {
            HandshakeError::Refused(why) => refused(why),
            HandshakeError::Plain => refused(format!(
                "handshake with {host}: the port does not speak TLS (it answers plain Redis): \
                 use redis:// or the server's TLS port"
            )),
            HandshakeError::Io(error) => RedisError::from(error),
        }
    })
}

/// Whether the server at `address` answers a plain `PING` in Redis's protocol by `deadline`: it
/// does not speak TLS on that port. A TLS server answers plain text with an alert or not at all.
fn speaks_plain_redis(address: SocketAddr, deadline: Instant) -> bool {
    use std::io::{Read, Write};
    let left =
        || Some(deadline.saturating_duration_since(Instant::now())).filter(|left| !left.is_zero());
    let Some(timeout) = left() else {
        return false;
    };
    let Ok(mut socket) = std::net::TcpStream::connect_timeout(&address, timeout) else {
        return false;
    };
    let mut first = [0_u8; 1];
    let answered = left().is_some_and(|left| {
        socket.set_read_timeout(Some(left)).is_ok()
            && socket.set_write_timeout(Some(left)).is_ok()
            && socket.write_all(b"PING\r\n").is_ok()
            && matches!(socket.read(&mut first), Ok(1))
    });
    // A RESP reply starts with one of these (`+PONG`, `-NOAUTH ...`); a TLS record with a byte
    // from 20 to 24.
    answered && b"+-:$*_,#!=(%~|>".contains(&first[0])
}
