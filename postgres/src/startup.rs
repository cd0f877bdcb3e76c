//! A session's start: the startup message, authentication (cleartext where the connection is
//! private or it is allowed, MD5, SCRAM-SHA-256 through `postgres-protocol`), then the server's
//! parameters and backend key until `ReadyForQuery`. The password goes only into the messages
//! that answer the server's request for it.

use crate::session::Session;
use crate::{Config, DbError, Error, Result};
use bytes::BytesMut;
use fallible_iterator::FallibleIterator;
use postgres_protocol::authentication::{self, sasl};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;

/// The one SASL mechanism this client speaks.
const SCRAM: &str = "SCRAM-SHA-256";

/// Starts the session as the user of `config`: every message by the deadline the session's call
/// was begun with. `private` says whether a cleartext password may go over the connection.
pub(crate) fn start(session: &mut Session, config: &Config, private: bool) -> Result<()> {
    let user = config.get_user().unwrap_or_default();
    let mut parameters = vec![("user", user), ("client_encoding", "UTF8")];
    if let Some(dbname) = config.get_dbname() {
        parameters.push(("database", dbname));
    }
    if let Some(name) = config.get_application_name() {
        parameters.push(("application_name", name));
    }
    let mut message = BytesMut::new();
    if let Err(error) = frontend::startup_message(parameters, &mut message) {
        return session.fail(Error::Config(format!("a startup parameter: {error}")));
    }
    session.send(&message)?;
    authenticate(session, config, private)?;
    loop {
        match session.next()? {
            Message::BackendKeyData(body) => {
                session.key = Some((body.process_id(), body.secret_key()));
            }
            Message::ReadyForQuery(body) => {
                session.ready(body.status())?;
                break;
            }
            Message::ErrorResponse(body) => {
                let error = session.db_error(&body)?;
                return session.fail(Error::Db(Box::new(error)));
            }
            _ => return session.fail(unexpected("after authentication")),
        }
    }
    match session
        .parameters
        .get("client_encoding")
        .map(String::as_str)
    {
        Some("UTF8") | None => Ok(()),
        Some(other) => session.fail(Error::Protocol(format!(
            "the server speaks {other}, not the UTF8 asked for"
        ))),
    }
}

fn unexpected(when: &str) -> Error {
    Error::Protocol(format!("an unexpected message {when}"))
}

/// Answers the server's requests for a password until it accepts (`AuthenticationOk`).
fn authenticate(session: &mut Session, config: &Config, private: bool) -> Result<()> {
    let user = config.get_user().unwrap_or_default();
    loop {
        let mut answer = BytesMut::new();
        let written = match session.next()? {
            Message::AuthenticationOk => return Ok(()),
            Message::AuthenticationCleartextPassword => {
                if !private && !config.get_allow_cleartext_password() {
                    return session.fail(refused(
                        "the server asks for the password in cleartext over a plain TCP \
                         connection: use TLS, or allow it (Config::allow_cleartext_password)",
                    ));
                }
                frontend::password_message(password(session, config)?, &mut answer)
            }
            Message::AuthenticationMd5Password(body) => {
                let hash = authentication::md5_hash(
                    user.as_bytes(),
                    password(session, config)?,
                    body.salt(),
                );
                frontend::password_message(hash.as_bytes(), &mut answer)
            }
            Message::AuthenticationSasl(body) => {
                let mechanisms: std::result::Result<Vec<&str>, _> = body.mechanisms().collect();
                match mechanisms {
                    Ok(mechanisms) if mechanisms.contains(&SCRAM) => {}
                    Ok(mechanisms) => {
                        return session.fail(refused(&format!(
                            "the server offers SASL mechanisms {mechanisms:?}, and this client \
                             speaks {SCRAM} only"
                        )))
                    }
                    Err(_) => return session.fail(unexpected("in a SASL request")),
                }
                return scram(session, config);
            }
            Message::ErrorResponse(body) => return auth_error(session, &body),
            Message::AuthenticationKerberosV5
            | Message::AuthenticationScmCredential
            | Message::AuthenticationGss
            | Message::AuthenticationSspi => {
                return session.fail(refused(
                    "the server asks for an authentication method this client does not speak \
                     (Kerberos, GSSAPI, SSPI or SCM credentials)",
                ))
            }
            _ => return session.fail(unexpected("during authentication")),
        };
        if written.is_err() {
            return session.fail(refused("the password holds a NUL byte"));
        }
        session.send(&answer)?;
    }
}

/// The SCRAM-SHA-256 exchange, without channel binding; the server must prove it knows the
/// password (its final message is verified).
fn scram(session: &mut Session, config: &Config) -> Result<()> {
    let mut exchange = sasl::ScramSha256::new(
        password(session, config)?,
        sasl::ChannelBinding::unsupported(),
    );
    let mut message = BytesMut::new();
    if frontend::sasl_initial_response(SCRAM, exchange.message(), &mut message).is_err() {
        return session.fail(unexpected("in SCRAM's first message"));
    }
    session.send(&message)?;
    let server_first = match session.next()? {
        Message::AuthenticationSaslContinue(body) => body,
        Message::ErrorResponse(body) => return auth_error(session, &body),
        _ => return session.fail(unexpected("in the SCRAM exchange")),
    };
    if let Err(error) = exchange.update(server_first.data()) {
        return session.fail(refused(&format!("the server's SCRAM message: {error}")));
    }
    let mut message = BytesMut::new();
    if frontend::sasl_response(exchange.message(), &mut message).is_err() {
        return session.fail(unexpected("in SCRAM's second message"));
    }
    session.send(&message)?;
    let server_final = match session.next()? {
        Message::AuthenticationSaslFinal(body) => body,
        Message::ErrorResponse(body) => return auth_error(session, &body),
        _ => return session.fail(unexpected("in the SCRAM exchange")),
    };
    if exchange.finish(server_final.data()).is_err() {
        return session.fail(refused(
            "the server could not prove that it knows the password (SCRAM signature)",
        ));
    }
    match session.next()? {
        Message::AuthenticationOk => Ok(()),
        Message::ErrorResponse(body) => auth_error(session, &body),
        _ => session.fail(unexpected("after the SCRAM exchange")),
    }
}

/// The password, or a refusal when none was given.
fn password<'c>(session: &mut Session, config: &'c Config) -> Result<&'c [u8]> {
    match config.password_bytes() {
        Some(password) => Ok(password),
        None => session.fail(refused(
            "the server asks for a password, and none was given",
        )),
    }
}

/// Authentication refused by this client.
fn refused(reason: &str) -> Error {
    Error::Auth {
        reason: reason.to_owned(),
        server: None,
    }
}

/// The server's error during authentication: a refusal for class 28 (invalid authorization),
/// else the server's error as it is. It ends the session either way.
fn auth_error<T>(
    session: &mut Session,
    body: &postgres_protocol::message::backend::ErrorResponseBody,
) -> Result<T> {
    let error: DbError = session.db_error(body)?;
    let failure = if error.code().starts_with("28") {
        Error::Auth {
            reason: error.message().to_owned(),
            server: Some(Box::new(error)),
        }
    } else {
        Error::Db(Box::new(error))
    };
    session.fail(failure)
}
