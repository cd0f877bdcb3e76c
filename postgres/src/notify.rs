//! [`Notification`]s (`NOTIFY`), and notices, which are logged rather than returned.

use crate::{DbError, Error, Result};
use postgres_protocol::message::backend::NotificationResponseBody;

/// A notification sent with `NOTIFY channel, 'payload'` (or `pg_notify`) to a channel this
/// connection listens on (`LISTEN channel`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    process_id: i32,
    channel: String,
    payload: String,
}

impl Notification {
    /// A notification's message, read.
    pub(crate) fn from_body(body: &NotificationResponseBody) -> Result<Notification> {
        let not_utf8 = |_| Error::Protocol("a notification that is not UTF-8".into());
        Ok(Notification {
            process_id: body.process_id(),
            channel: body.channel().map_err(not_utf8)?.to_owned(),
            payload: body.message().map_err(not_utf8)?.to_owned(),
        })
    }

    /// The process id of the server process that sent it.
    pub fn process_id(&self) -> i32 {
        self.process_id
    }

    /// The channel.
    pub fn channel(&self) -> &str {
        &self.channel
    }

    /// The payload (empty if none was given).
    pub fn payload(&self) -> &str {
        &self.payload
    }
}

/// Logs a notice by its severity: `WARNING` at warn, `NOTICE` and `INFO` at info, `DEBUG` and
/// `LOG` at debug.
pub(crate) fn log_notice(notice: &DbError) {
    let level = match notice.severity() {
        "WARNING" => log::Level::Warn,
        "NOTICE" | "INFO" => log::Level::Info,
        _ => log::Level::Debug,
    };
    log::log!(level, "server notice: {notice}");
}
