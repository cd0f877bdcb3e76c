//! What the tool's PostgreSQL tests share: a throwaway server whose password user may make the
//! store's schema, and the tool pointed at a database by `--url`.
#![allow(dead_code)]

use std::process::Command;
use testkit::PgServer;

/// A server whose password user ([`PgServer::SCRAM_USER`]) may make the store's schema in its
/// database (a new role may not, until granted).
pub fn server() -> PgServer {
    let server = PgServer::start();
    server.grant_schemas();
    server
}

/// The tool, its locks in the database at `url`.
pub fn lease(url: &str) -> Command {
    let mut command = crate::tool::bare();
    command.args(["--url", url]);
    command
}
