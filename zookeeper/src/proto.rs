//! ZooKeeper's requests and replies as records (`zookeeper.jute`): the session handshake, the
//! request and reply headers, the bodies of the operations this client makes, watch
//! notifications, and transactions' operations and results (`MultiTransactionRecord`,
//! `MultiResponse`: each behind a `MultiHeader` (its type, `done`, an error code), the list ended
//! by a header whose `done` is set). The numbers they carry are in [`codes`](super::codes).

pub(crate) use super::codes::{code, error_of, event, op, xid};
use super::jute::{JuteError, Reader, Writer};
use super::multi::{Op, OpResult};
use super::Stat;

/// Permissions of the one ACL entry every create carries: all, to anyone (`OPEN_ACL_UNSAFE`).
const PERMS_ALL: i32 = 31;

/// The longest paths a `setWatches` request carries, in bytes, as the Java client batches them:
/// many watches are re-armed in several requests, each well under the server's frame limit.
const SET_WATCHES_BATCH: usize = 128 * 1024;

/// A numbered request's body, with paths as the server sees them (the chroot prefixed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Request {
    /// Create2, with the open ACL; `flags` as [`super::CreateMode`] gives them.
    Create {
        path: String,
        data: Vec<u8>,
        flags: i32,
    },
    /// CreateTTL of a persistent node that the server deletes once it is left unchanged (and
    /// childless) for `ttl_ms`, with the open ACL.
    CreateTtl {
        path: String,
        data: Vec<u8>,
        ttl_ms: i64,
    },
    /// A transaction of these operations.
    Multi(Vec<Op>),
    /// Delete, at `version` (-1 for any).
    Delete { path: String, version: i32 },
    /// Exists, arming a watch if `watch`.
    Exists { path: String, watch: bool },
    /// GetData, arming a watch if `watch`.
    GetData { path: String, watch: bool },
    /// SetData, at `version` (-1 for any).
    SetData {
        path: String,
        data: Vec<u8>,
        version: i32,
    },
    /// GetChildren2, arming a watch if `watch`.
    GetChildren { path: String, watch: bool },
    /// Ends the session.
    CloseSession,
}

/// A numbered request's reply body, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Create2: the path created (chroot included) and its stat.
    Created(String, Stat),
    /// A reply with no body (delete, closeSession).
    Done,
    /// Exists, SetData.
    Stat(Stat),
    /// GetData.
    Data(Vec<u8>, Stat),
    /// GetChildren2.
    Children(Vec<String>, Stat),
    /// Multi: one outcome per operation.
    Multi(Vec<Outcome>),
}

impl Request {
    /// Its type in the request header.
    pub(crate) fn opcode(&self) -> i32 {
        match self {
            Request::Create { .. } => op::CREATE2,
            Request::CreateTtl { .. } => op::CREATE_TTL,
            Request::Multi(_) => op::MULTI,
            Request::Delete { .. } => op::DELETE,
            Request::Exists { .. } => op::EXISTS,
            Request::GetData { .. } => op::GET_DATA,
            Request::SetData { .. } => op::SET_DATA,
            Request::GetChildren { .. } => op::GET_CHILDREN2,
            Request::CloseSession => op::CLOSE_SESSION,
        }
    }

    /// The frame of this request as call `xid`; `None` if it is too large to send.
    pub(crate) fn frame(&self, xid: i32) -> Option<Vec<u8>> {
        let mut body = Writer::new();
        body.int(xid).int(self.opcode());
        match self {
            Request::Create { path, data, flags } => {
                body.string(path).buffer(data);
                open_acl(&mut body);
                body.int(*flags);
            }
            Request::CreateTtl { path, data, ttl_ms } => {
                body.string(path).buffer(data);
                open_acl(&mut body);
                body.int(PERSISTENT_WITH_TTL).long(*ttl_ms);
            }
            Request::Multi(ops) => encode_multi(&mut body, ops),
            Request::Delete { path, version } => {
                body.string(path).int(*version);
            }
            Request::SetData {
                path,
                data,
                version,
            } => {
                body.string(path).buffer(data).int(*version);
            }
            Request::Exists { path, watch }
            | Request::GetData { path, watch }
            | Request::GetChildren { path, watch } => {
                body.string(path).boolean(*watch);
            }
            Request::CloseSession => {}
        }
        body.frame()
    }
}

/// Writes the one ACL entry every create carries.
pub(crate) fn open_acl(body: &mut Writer) {
    body.int(1).int(PERMS_ALL).string("world").string("anyone");
}

/// The create flags of a persistent node with a TTL (`CreateMode.PERSISTENT_WITH_TTL`).
const PERSISTENT_WITH_TTL: i32 = 5;

/// Decodes the body of a successful reply to a request of type `opcode`.
pub(crate) fn reply(opcode: i32, body: &mut Reader<'_>) -> Result<Reply, JuteError> {
    Ok(match opcode {
        op::MULTI => Reply::Multi(decode_multi(body)?),
        op::CREATE2 | op::CREATE_TTL => {
            let path = body.string("created path")?;
            Reply::Created(path, stat(body)?)
        }
        op::EXISTS | op::SET_DATA => Reply::Stat(stat(body)?),
        op::GET_DATA => {
            let data = body.buffer("data")?;
            Reply::Data(data, stat(body)?)
        }
        op::GET_CHILDREN2 => {
            let children = body.strings("children")?;
            Reply::Children(children, stat(body)?)
        }
        _ => Reply::Done,
    })
}

/// Reads a `Stat` record.
pub(crate) fn stat(body: &mut Reader<'_>) -> Result<Stat, JuteError> {
    Ok(Stat {
        czxid: body.long("czxid")?,
        mzxid: body.long("mzxid")?,
        ctime: body.long("ctime")?,
        mtime: body.long("mtime")?,
        version: body.int("version")?,
        cversion: body.int("cversion")?,
        aversion: body.int("aversion")?,
        ephemeral_owner: body.long("ephemeralOwner")?,
        data_length: body.int("dataLength")?,
        num_children: body.int("numChildren")?,
        pzxid: body.long("pzxid")?,
    })
}

/// The frame of a `ConnectRequest`: a new session (id 0, a zeroed password) or the one given.
pub(crate) fn connect_request(
    last_zxid: i64,
    timeout_ms: i32,
    session_id: i64,
    passwd: &[u8],
) -> Option<Vec<u8>> {
    let mut body = Writer::new();
    body.int(0)
        .long(last_zxid)
        .int(timeout_ms)
        .long(session_id)
        .buffer(passwd)
        .boolean(false);
    body.frame()
}

/// The server's answer to a `ConnectRequest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConnectResponse {
    /// The negotiated session timeout; 0 or less when the session asked for has expired.
    pub(crate) timeout_ms: i32,
    /// The session's id; 0 when the session asked for has expired.
    pub(crate) session_id: i64,
    /// The password to take the session up again on another connection.
    pub(crate) passwd: Vec<u8>,
}

/// Reads the body of a `ConnectResponse`.
pub(crate) fn connect_response(body: &[u8]) -> Result<ConnectResponse, JuteError> {
    let mut body = Reader::new(body);
    let _protocol_version = body.int("protocolVersion")?;
    let timeout_ms = body.int("timeOut")?;
    let session_id = body.long("sessionId")?;
    let passwd = body.buffer("passwd")?;
    // The `readOnly` flag that follows is left unread: this client never asks for a read-only
    // session, and servers before 3.4 do not send it.
    Ok(ConnectResponse {
        timeout_ms,
        session_id,
        passwd,
    })
}

/// The header of every frame the server sends once the session is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplyHeader {
    /// The call answered, or one of [`xid`]'s.
    pub(crate) xid: i32,
    /// The last transaction the server had applied.
    pub(crate) zxid: i64,
    /// 0, or an error code.
    pub(crate) err: i32,
}

/// Reads a `ReplyHeader`.
pub(crate) fn reply_header(body: &mut Reader<'_>) -> Result<ReplyHeader, JuteError> {
    Ok(ReplyHeader {
        xid: body.int("xid")?,
        zxid: body.long("zxid")?,
        err: body.int("err")?,
    })
}

/// A watch notification's body (`WatcherEvent`), its path as the server sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WatcherEvent {
    /// One of [`event`]'s types.
    pub(crate) kind: i32,
    /// The node's path, chroot included.
    pub(crate) path: String,
}

/// Reads a `WatcherEvent`.
pub(crate) fn watcher_event(body: &mut Reader<'_>) -> Result<WatcherEvent, JuteError> {
    let kind = body.int("event type")?;
    let _state = body.int("keeper state")?;
    let path = body.string("event path")?;
    Ok(WatcherEvent { kind, path })
}

/// The frame of a ping.
pub(crate) fn ping() -> Vec<u8> {
    header_only(xid::PING, op::PING)
}

/// A frame of a request header alone.
fn header_only(xid: i32, opcode: i32) -> Vec<u8> {
    let mut frame = Vec::with_capacity(12);
    frame.extend_from_slice(&8i32.to_be_bytes());
    frame.extend_from_slice(&xid.to_be_bytes());
    frame.extend_from_slice(&opcode.to_be_bytes());
    frame
}

/// The frame of an `AuthPacket` for `digest` ("user:password").
pub(crate) fn digest_auth(digest: &str) -> Option<Vec<u8>> {
    let mut body = Writer::new();
    body.int(xid::AUTH)
        .int(op::AUTH)
        .int(0)
        .string("digest")
        .buffer(digest.as_bytes());
    body.frame()
}

/// The frames of `setWatches` requests that re-arm the watches given (paths as the server sees
/// them) as of `relative_zxid`, the last zxid seen: the server fires at once those whose node
/// changed since. None when there is no watch.
pub(crate) fn set_watches(
    relative_zxid: i64,
    data: &[String],
    exist: &[String],
    child: &[String],
) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let mut batch: [Vec<String>; 3] = Default::default();
    let mut size = 0;
    let mut flush = |batch: &mut [Vec<String>; 3]| {
        let mut body = Writer::new();
        body.int(xid::SET_WATCHES).int(op::SET_WATCHES);
        body.long(relative_zxid)
            .strings(&batch[0])
            .strings(&batch[1])
            .strings(&batch[2]);
        frames.extend(body.frame());
        *batch = Default::default();
    };
    for (kind, paths) in [data, exist, child].into_iter().enumerate() {
        for path in paths {
            batch[kind].push(path.clone());
            size += path.len() + 4;
            if size > SET_WATCHES_BATCH {
                flush(&mut batch);
                size = 0;
            }
        }
    }
    if batch.iter().any(|paths| !paths.is_empty()) {
        flush(&mut batch);
    }
    frames
}

/// The type of `operation` in its `MultiHeader`.
fn multi_opcode(operation: &Op) -> i32 {
    match operation {
        Op::Create { .. } => op::CREATE,
        Op::Delete { .. } => op::DELETE,
        Op::SetData { .. } => op::SET_DATA,
        Op::Check { .. } => op::CHECK,
    }
}

/// The `MultiHeader` that ends a transaction's operations or results.
fn end(body: &mut Writer) {
    body.int(-1).boolean(true).int(-1);
}

/// Writes the operations of a `multi` request after its header.
fn encode_multi(body: &mut Writer, ops: &[Op]) {
    for operation in ops {
        body.int(multi_opcode(operation)).boolean(false).int(-1);
        match operation {
            Op::Create { path, data, mode } => {
                body.string(path).buffer(data);
                open_acl(body);
                body.int(mode.flags());
            }
            Op::Delete { path, version } | Op::Check { path, version } => {
                body.string(path).int(version.unwrap_or(-1));
            }
            Op::SetData {
                path,
                data,
                version,
            } => {
                body.string(path).buffer(data).int(version.unwrap_or(-1));
            }
        }
    }
    end(body);
}

/// One result of a `multi` reply: what an operation did, or its error code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    Done(OpResult),
    Failed(i32),
}

/// Reads the results of a `multi` reply, up to the header that ends them.
fn decode_multi(body: &mut Reader<'_>) -> Result<Vec<Outcome>, JuteError> {
    let mut outcomes = Vec::new();
    loop {
        let kind = body.int("result type")?;
        let done = body.boolean("done")?;
        let err = body.int("result error")?;
        if done {
            return Ok(outcomes);
        }
        outcomes.push(match kind {
            op::CREATE => Outcome::Done(OpResult::Created {
                path: body.string("created path")?,
            }),
            op::CREATE2 => {
                let path = body.string("created path")?;
                stat(body)?;
                Outcome::Done(OpResult::Created { path })
            }
            op::DELETE => Outcome::Done(OpResult::Deleted),
            op::SET_DATA => Outcome::Done(OpResult::DataSet(stat(body)?)),
            op::CHECK => Outcome::Done(OpResult::Checked),
            op::ERROR => Outcome::Failed(body.int("error")?),
            other => {
                return Err(JuteError(format!(
                    "a transaction's result of type {other} (error {err})"
                )))
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CreateMode;

    #[test]
    fn a_create_carries_the_open_acl_and_its_flags() {
        let request = Request::Create {
            path: "/a".into(),
            data: b"x".to_vec(),
            flags: 3,
        };
        let frame = request.frame(7).expect("small");
        let mut body = Reader::new(&frame[4..]);
        assert_eq!(body.int("xid"), Ok(7));
        assert_eq!(body.int("type"), Ok(op::CREATE2));
        assert_eq!(body.string("path"), Ok("/a".into()));
        assert_eq!(body.buffer("data"), Ok(b"x".to_vec()));
        assert_eq!(body.int("acls"), Ok(1));
        assert_eq!(body.int("perms"), Ok(31));
        assert_eq!(body.string("scheme"), Ok("world".into()));
        assert_eq!(body.string("id"), Ok("anyone".into()));
        assert_eq!(body.int("flags"), Ok(3));
        assert_eq!(body.left(), 0);
    }

    #[test]
    fn many_watches_are_re_armed_in_batches() {
        let paths: Vec<String> = (0..3000).map(|i| format!("/{i:0>60}")).collect();
        let frames = set_watches(5, &paths, &[], &paths[..10]);
        assert!(frames.len() >= 2, "{} frames", frames.len());
        let mut seen = 0;
        for frame in &frames {
            assert!(frame.len() < 2 * SET_WATCHES_BATCH);
            let mut body = Reader::new(&frame[4..]);
            assert_eq!(body.int("xid"), Ok(xid::SET_WATCHES));
            assert_eq!(body.int("type"), Ok(op::SET_WATCHES));
            assert_eq!(body.long("zxid"), Ok(5));
            for _ in 0..3 {
                seen += body.strings("paths").expect("paths").len();
            }
        }
        assert_eq!(seen, 3010);
        assert!(set_watches(5, &[], &[], &[]).is_empty());
    }

    #[test]
    fn operations_are_written_behind_their_headers_and_the_list_ends_with_done() {
        let ops = [
            Op::check("/a", Some(3)),
            Op::create("/a/b", b"x".to_vec(), CreateMode::Persistent),
            Op::set_data("/a", b"yz".to_vec(), None),
            Op::delete("/c", Some(1)),
        ];
        let mut body = Writer::new();
        encode_multi(&mut body, &ops);
        let frame = body.frame().expect("small");
        let mut read = Reader::new(&frame[4..]);
        let header = |read: &mut Reader<'_>| {
            (
                read.int("type").expect("type"),
                read.boolean("done").expect("done"),
                read.int("err").expect("err"),
            )
        };
        assert_eq!(header(&mut read), (op::CHECK, false, -1));
        assert_eq!((read.string("p"), read.int("v")), (Ok("/a".into()), Ok(3)));
        assert_eq!(header(&mut read), (op::CREATE, false, -1));
        assert_eq!(read.string("p"), Ok("/a/b".into()));
        assert_eq!(read.buffer("d"), Ok(b"x".to_vec()));
        assert_eq!(read.int("acls"), Ok(1));
        assert_eq!(read.int("perms"), Ok(31));
        assert_eq!(read.string("scheme"), Ok("world".into()));
        assert_eq!(read.string("id"), Ok("anyone".into()));
        assert_eq!(read.int("flags"), Ok(0));
        assert_eq!(header(&mut read), (op::SET_DATA, false, -1));
        assert_eq!(read.string("p"), Ok("/a".into()));
        assert_eq!(read.buffer("d"), Ok(b"yz".to_vec()));
        assert_eq!(read.int("v"), Ok(-1));
        assert_eq!(header(&mut read), (op::DELETE, false, -1));
        assert_eq!((read.string("p"), read.int("v")), (Ok("/c".into()), Ok(1)));
        assert_eq!(header(&mut read), (-1, true, -1));
        assert_eq!(read.left(), 0);
    }
}
