//! A script call: EVALSHA of a script loaded once per server through [`redis::Script`], sent again
//! after loading the script where the server answers NOSCRIPT.

use crate::error::{Error, Result};
use crate::stores::redis::conn::Link;
use redis::{ConnectionLike, RedisResult, Script, Value};
use std::time::Duration;

static ACCESS: &str = include_str!("access.lua");
static CHECKS: &str = include_str!("checks.lua");
static HOLDS: &str = include_str!("holds.lua");

/// One script: its text (the refusals, the checks, the steps on a hold, then the script's own)
/// and its hash.
pub(super) struct Lua {
    pub(super) code: String,
    pub(super) script: Script,
}

impl Lua {
    /// A script whose text is the shared functions (the refusals, the checks, the steps on a
    /// hold), then `body`.
    pub(super) fn new(body: &str) -> Lua {
        Lua::alone(&[ACCESS, CHECKS, HOLDS, body].concat())
    }

    /// A script that carries only its own logic, `code`: the server runs all of a script's text
    /// at every call, so the common calls define no function they do not use.
    pub(super) fn alone(code: &str) -> Lua {
        let script = Script::new(code);
        Lua {
            code: code.to_owned(),
            script,
        }
    }
}

/// The arguments, and their bytes, a call's command is made room for at first.
const ARGS: usize = 20;
const ARG_BYTES: usize = 512;

/// One script call, ready to send: which script, and its EVALSHA command with keys and
/// arguments.
pub(crate) struct Call {
    lua: &'static Lua,
    pub(super) command: redis::Cmd,
}

impl Call {
    pub(super) fn new(lua: &'static Lua, keys: &[&str]) -> Call {
        // Sized for the longest call (a lock's acquisition: 2 + 5 keys + 11 arguments), so
        // that adding arguments does not grow it again and again.
        let mut command = redis::Cmd::with_capacity(ARGS, ARG_BYTES);
        command.arg("EVALSHA");
        command.arg(lua.script.get_hash()).arg(keys.len()).arg(keys);
        Call { lua, command }
    }

    pub(super) fn arg(mut self, arg: impl redis::ToRedisArgs) -> Call {
        self.command.arg(arg);
        self
    }

    /// The call as bytes to write to a connection.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        self.command.get_packed_command()
    }

    /// The call as bytes to write behind a call whose reply will never be read, on a
    /// connection about to be closed: `SCRIPT LOAD` first, so that a server that lost its
    /// scripts (a restart, `SCRIPT FLUSH`) runs it all the same, since no NOSCRIPT reply is ever
    /// read there to load it then.
    pub(crate) fn bytes_behind(&self) -> Vec<u8> {
        let mut bytes = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(&self.lua.code)
            .get_packed_command();
        bytes.extend(self.bytes());
        bytes
    }

    /// Loads the call's script on `con`, after the server answered NOSCRIPT.
    pub(crate) fn load(&self, con: &mut dyn Link) -> RedisResult<()> {
        self.lua
            .script
            .load(con as &mut dyn ConnectionLike)
            .map(drop)
    }

    /// Runs the call on `con` and returns its reply; a refusal is an error.
    pub(crate) fn invoke(&self, con: &mut dyn Link) -> RedisResult<Value> {
        let bytes = self.bytes();
        match con.req_packed_command(&bytes)?.extract_error() {
            Err(error) if is_noscript(&error) => {
                self.load(con)?;
                con.req_packed_command(&bytes)?.extract_error()
            }
            other => other,
        }
    }

    /// [`Call::invoke`], with a refusal sorted into this crate's error (`key`: the lock's key,
    /// named in errors that do not name one).
    pub(crate) fn run(&self, con: &mut dyn Link, key: &str) -> Result<Value> {
        self.invoke(con)
            .map_err(|error| Error::from_redis(error, key).at(con.server()))
    }
}

/// Whether the server answered that it does not have the script (after a restart or a
/// `SCRIPT FLUSH`).
pub(crate) fn is_noscript(error: &redis::RedisError) -> bool {
    error.code() == Some("NOSCRIPT")
}

/// A lease in whole milliseconds, as the scripts take it (at least 1).
pub(super) fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis())
        .unwrap_or(u64::MAX)
        .max(1)
}
