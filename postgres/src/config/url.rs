//! `postgres://` URLs: read into a [`Config`], and written back with the password redacted.
//! Errors name the part that is wrong, never the password nor the URL itself (which may hold it).

use super::{Config, Host, Password, SslMode, DEFAULT_PORT};
use crate::{Error, Result};
use deadline_net::tls::Pem;
use std::path::PathBuf;

fn invalid(why: impl Into<String>) -> Error {
    Error::Config(format!("URL: {}", why.into()))
}

/// The configuration `url` describes (not yet checked).
pub(super) fn parse(url: &str) -> Result<Config> {
    let rest = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
        .ok_or_else(|| invalid("it must start with postgres:// or postgresql://"))?;
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, Some(query)),
        None => (rest, None),
    };
    let (authority, path) = match rest.split_once('/') {
        Some((authority, path)) => (authority, path),
        None => (rest, ""),
    };
    let mut config = Config::new();
    let host_port = match authority.rsplit_once('@') {
        Some((user_info, host_port)) => {
            let (user, password) = match user_info.split_once(':') {
                Some((user, password)) => (user, Some(password)),
                None => (user_info, None),
            };
            if !user.is_empty() {
                config.user = Some(decode(user, "the user")?);
            }
            if let Some(password) = password {
                config.password = Some(Password(decode(password, "the password")?));
            }
            host_port
        }
        None => authority,
    };
    host_and_port(&mut config, host_port)?;
    if !path.is_empty() {
        config.dbname = Some(decode(path, "the database name")?);
    }
    let mut client_cert = ClientCert::default();
    for pair in query.into_iter().flat_map(|query| query.split('&')) {
        if pair.is_empty() {
            continue;
        }
        let (name, value) = pair
            .split_once('=')
            .ok_or_else(|| invalid(format!("parameter {pair:?} has no value")))?;
        parameter(&mut config, &mut client_cert, name, value)?;
    }
    match client_cert {
        ClientCert {
            cert: Some(cert),
            key: Some(key),
        } => config.tls.client_cert = Some((Pem::File(cert), Pem::File(key))),
        ClientCert {
            cert: None,
            key: None,
        } => {}
        _ => return Err(invalid("sslcert and sslkey go together: give both")),
    }
    Ok(config)
}

/// Reads `host[:port]` (the host may be `[IPv6]`, or a percent-encoded directory).
fn host_and_port(config: &mut Config, host_port: &str) -> Result<()> {
    if host_port.contains(',') {
        return Err(invalid("several hosts are not supported: give one"));
    }
    let (host, port) = if let Some(bracketed) = host_port.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| invalid("an IPv6 address without its closing ]"))?;
        let port = match after {
            "" => None,
            after => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| invalid("text after an IPv6 address's ]"))?,
            ),
        };
        (host, port)
    } else {
        match host_port.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (host_port, None),
        }
    };
    if !host.is_empty() {
        let host = decode(host, "the host")?;
        config.host = if host.starts_with('/') {
            Host::Unix(PathBuf::from(host))
        } else {
            Host::Tcp(host)
        };
    }
    if let Some(port) = port.filter(|port| !port.is_empty()) {
        config.port = parse_port(port)?;
    }
    Ok(())
}

fn parse_port(port: &str) -> Result<u16> {
    port.parse()
        .ok()
        .filter(|&port| port != 0)
        .ok_or_else(|| invalid(format!("port {port:?} is not a number from 1 to 65535")))
}

/// A client certificate's files, as the parameters give them one by one.
#[derive(Default)]
struct ClientCert {
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
}

/// Sets the query parameter `name` to `value` (both percent-encoded).
fn parameter(
    config: &mut Config,
    client_cert: &mut ClientCert,
    name: &str,
    value: &str,
) -> Result<()> {
    let name = decode(name, "a parameter's name")?;
    if name == "password" {
        config.password = Some(Password(decode(value, "the password")?));
        return Ok(());
    }
    let value = decode(value, &format!("parameter {name}"))?;
    match name.as_str() {
        "host" => {
            config.host = if value.starts_with('/') {
                Host::Unix(PathBuf::from(value))
            } else {
                Host::Tcp(value)
            };
        }
        "port" => config.port = parse_port(&value)?,
        "user" => config.user = Some(value),
        "dbname" => config.dbname = Some(value),
        "application_name" => config.application_name = Some(value),
        "sslmode" => config.ssl_mode = ssl_mode(&value)?,
        // "system" asks for the system's roots, which are always trusted.
        "sslrootcert" if value == "system" => {}
        "sslrootcert" => config.tls.ca_file = Some(Pem::File(value.into())),
        "sslcert" => client_cert.cert = Some(value.into()),
        "sslkey" => client_cert.key = Some(value.into()),
        other => {
            return Err(invalid(format!(
                "parameter {other:?} is unknown or not supported by this client"
            )))
        }
    }
    Ok(())
}

fn ssl_mode(value: &str) -> Result<SslMode> {
    match value {
        "disable" => Ok(SslMode::Disable),
        "prefer" => Ok(SslMode::Prefer),
        "allow" => Err(invalid(
            "sslmode=allow (a plain connection first) is not supported: use prefer or disable",
        )),
        "require" => Ok(SslMode::Require),
        "verify-full" => Ok(SslMode::VerifyFull),
        "verify-ca" => Ok(SslMode::VerifyCa),
        other => Err(invalid(format!(
            "sslmode {other:?}: disable, prefer, require, verify-ca or verify-full"
        ))),
    }
}

/// `text` with its `%XX` escapes decoded; `what` names it in an error (never its value).
fn decode(text: &str, what: &str) -> Result<String> {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'%' {
            let hex = bytes
                .get(at + 1..at + 3)
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .ok_or_else(|| invalid(format!("{what} has an invalid % escape")))?;
            decoded.push(hex);
            at += 3;
        } else {
            decoded.push(bytes[at]);
            at += 1;
        }
    }
    String::from_utf8(decoded).map_err(|_| invalid(format!("{what} is not UTF-8 once decoded")))
}

/// `text` percent-encoded for a URL: every byte but the unreserved ones escaped.
fn encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// The URL of `config`, its password replaced by `***`.
pub(super) fn redacted(config: &Config) -> String {
    let mut url = String::from("postgres://");
    if let Some(user) = &config.user {
        url.push_str(&encode(user));
        if config.password.is_some() {
            url.push_str(":***");
        }
        url.push('@');
    }
    let mut query = Vec::new();
    match &config.host {
        Host::Tcp(host) if host.contains(':') => url.push_str(&format!("[{host}]")),
        Host::Tcp(host) => url.push_str(&encode(host)),
        Host::Unix(dir) => query.push(format!("host={}", encode(&dir.to_string_lossy()))),
    }
    if config.port != DEFAULT_PORT {
        url.push_str(&format!(":{}", config.port));
    }
    if let Some(dbname) = &config.dbname {
        url.push('/');
        url.push_str(&encode(dbname));
    }
    if config.ssl_mode != SslMode::default() {
        query.push(format!("sslmode={}", config.ssl_mode.as_str()));
    }
    if let Some(name) = &config.application_name {
        query.push(format!("application_name={}", encode(name)));
    }
    if !query.is_empty() {
        url.push('?');
        url.push_str(&query.join("&"));
    }
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_url_is_read_part_by_part() {
        let config = parse(
            "postgresql://al%40ice:p%3Ass@[::1]:6543/my%20db?sslmode=disable&application_name=locks",
        )
        .expect("valid");
        assert_eq!(config.get_user(), Some("al@ice"));
        assert_eq!(config.password_bytes(), Some(&b"p:ss"[..]));
        assert_eq!(config.get_host(), &Host::Tcp("::1".into()));
        assert_eq!(config.get_port(), 6543);
        assert_eq!(config.get_dbname(), Some("my db"));
        assert_eq!(config.get_ssl_mode(), SslMode::Disable);
        assert_eq!(config.get_application_name(), Some("locks"));
        assert_eq!(
            redacted(&config),
            "postgres://al%40ice:***@[::1]:6543/my%20db?sslmode=disable&application_name=locks"
        );
    }

    #[test]
    fn a_unix_socket_directory_comes_encoded_in_the_host_or_as_a_parameter() {
        let encoded = parse("postgres://u@%2Frun%2Fpostgresql/db").expect("valid");
        assert_eq!(encoded.get_host(), &Host::Unix("/run/postgresql".into()));
        let parameter = parse("postgres:///db?host=/tmp/pg&port=5433&user=u").expect("valid");
        assert_eq!(parameter.get_host(), &Host::Unix("/tmp/pg".into()));
        assert_eq!(parameter.get_port(), 5433);
        assert_eq!(parameter.server(), "/tmp/pg/.s.PGSQL.5433");
        assert_eq!(
            redacted(&parameter),
            "postgres://u@:5433/db?host=%2Ftmp%2Fpg"
        );
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_without_showing_the_password() {
        for url in [
            "mysql://u:hunter2@h/db",
            "postgres://u:hunter2@h1,h2/db",
            "postgres://u:hunter2@h/db?sslmode=allow",
            "postgres://u:hunter2@h/db?sslcert=/c.pem",
            "postgres://u:hunter2@h/db?connect_timeout=5",
            "postgres://u:hunter2@h:99999/db",
            "postgres://u:hunt%zzer2@h/db",
            "postgres://u:hunter2@[::1/db",
        ] {
            let error = parse(url).expect_err(url);
            assert!(matches!(error, Error::Config(_)), "{url}: {error:?}");
            let shown = format!("{error} {error:?}");
            assert!(
                !shown.contains("hunter2") && !shown.contains("hunt%zz"),
                "{shown}"
            );
        }
    }

    #[test]
    fn certificate_files_come_as_libpq_names_them() {
        let config = parse(
            "postgres://u@h/db?sslmode=verify-full&sslrootcert=/ca.pem&sslkey=/k.pem&sslcert=/c.pem",
        )
        .expect("valid");
        let files = config.get_tls_files();
        assert!(matches!(&files.ca_file, Some(Pem::File(ca)) if ca.as_os_str() == "/ca.pem"));
        assert!(matches!(
            &files.client_cert,
            Some((Pem::File(cert), Pem::File(key))) if cert.as_os_str() == "/c.pem" && key.as_os_str() == "/k.pem"
        ));
        let system = parse("postgres://u@h/db?sslrootcert=system").expect("valid");
        assert!(system.get_tls_files().ca_file.is_none());
    }

    #[test]
    fn defaults_fill_what_the_url_leaves_out() {
        let config = parse("postgres://").expect("valid");
        assert_eq!(config.get_host(), &Host::Tcp("localhost".into()));
        assert_eq!(config.get_port(), DEFAULT_PORT);
        assert_eq!(config.get_ssl_mode(), SslMode::Prefer);
        assert_eq!(redacted(&config), "postgres://localhost");
    }
}
