//! Redis Cluster's key space: the slot of a key (CRC16 of its hash tag, modulo 16384, as the
//! server computes it), and the map of slots to the masters that serve them, read from
//! `CLUSTER SLOTS`.

use redis::Value;

/// The number of slots of a cluster.
pub(crate) const SLOTS: usize = 16384;

/// CRC16-CCITT (XMODEM), the checksum Redis Cluster hashes keys with.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for byte in bytes {
        crc ^= u16::from(*byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The slot of `key`: of its hash tag (the text between the first `{` and the next `}`) if it
/// has a non-empty one, else of the whole key.
pub(crate) fn slot(key: &str) -> usize {
    let bytes = key.as_bytes();
    let tagged = bytes.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &bytes[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &rest[..close])
    });
    usize::from(crc16(tagged.unwrap_or(bytes))) % SLOTS
}

/// A contiguous range of slots and the address (`host:port`) of the master serving it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Range {
    pub(crate) first: usize,
    pub(crate) last: usize,
    pub(crate) master: String,
}

/// The ranges of a `CLUSTER SLOTS` reply: `[[first, last, [host, port, id, ...], replicas...],
/// ...]`. A master without a host (`""` or `?`) is on the address the reply came from.
pub(crate) fn parse(reply: &Value, asked: &str) -> Option<Vec<Range>> {
    let Value::Array(ranges) = reply else {
        return None;
    };
    let asked_host = asked.rsplit_once(':').map_or(asked, |(host, _)| host);
    ranges
        .iter()
        .map(|range| {
            let Value::Array(fields) = range else {
                return None;
            };
            let number = |value: &Value| match value {
                Value::Int(n) => usize::try_from(*n).ok(),
                _ => None,
            };
            let first = number(fields.first()?)?;
            let last = number(fields.get(1)?)?;
            let Value::Array(master) = fields.get(2)? else {
                return None;
            };
            let host = match master.first()? {
                Value::BulkString(host) => String::from_utf8_lossy(host).into_owned(),
                _ => String::new(),
            };
            let host = if host.is_empty() || host == "?" {
                asked_host.to_owned()
            } else {
                host
            };
            let port = number(master.get(1)?)?;
            (first <= last && last < SLOTS).then(|| Range {
                first,
                last,
                master: join(&host, port),
            })
        })
        .collect()
}

/// `host:port`, with an IPv6 host in brackets.
pub(crate) fn join(host: &str, port: usize) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The node a `MOVED` or `ASK` refusal names, as [`join`] writes node addresses. Redis writes
/// it `host:port` after the slot (`MOVED 3999 127.0.0.1:7001`), an IPv6 host without brackets
/// (`MOVED 3999 ::1:7001`); the port is what follows the last colon.
pub(crate) fn redirect_target(error: &redis::RedisError) -> Option<String> {
    let (addr, _slot) = error.redirect_node()?;
    let (host, port) = addr.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty()).then(|| join(host, usize::from(port)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(text: &str) -> redis::RedisError {
        let reply = redis::parse_redis_value(format!("-{text}\r\n").as_bytes()).expect("RESP");
        reply.extract_error().expect_err("an error reply")
    }

    #[test]
    fn redirections_name_the_node_they_send_to() {
        let target = |text: &str| redirect_target(&refusal(text));
        assert_eq!(
            target("MOVED 3999 127.0.0.1:7001").as_deref(),
            Some("127.0.0.1:7001")
        );
        assert_eq!(
            target("ASK 12182 10.0.0.2:30004").as_deref(),
            Some("10.0.0.2:30004")
        );
        assert_eq!(target("MOVED 1 ::1:7001").as_deref(), Some("[::1]:7001"));
        assert_eq!(
            target("MOVED 1 cache-0.example:6379").as_deref(),
            Some("cache-0.example:6379")
        );
        assert_eq!(target("MOVED 1 :7001"), None, "no host");
        assert_eq!(target("MOVED 1 127.0.0.1"), None, "no port");
        assert_eq!(target("TRYAGAIN not now"), None);
    }

    #[test]
    fn slots_are_those_redis_computes() {
        // The values `CLUSTER KEYSLOT` gives.
        assert_eq!(slot("123456789"), 12739);
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
        assert_eq!(slot("app:{jobs/nightly}:fence"), slot("jobs/nightly"));
        assert_eq!(
            slot("foo{}{bar}"),
            slot("foo{}{bar}"),
            "an empty tag hashes the whole key"
        );
        assert_ne!(slot("foo{}{bar}"), slot("bar"));
        assert_eq!(slot("foo{{bar}}zap"), slot("{bar"));
    }

    #[test]
    fn cluster_slots_replies_are_read_and_junk_is_refused() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"id".to_vec()),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(5460),
                node("10.0.0.1", 7000),
            ]),
            Value::Array(vec![
                Value::Int(5461),
                Value::Int(16383),
                node("", 7001),
                node("10.0.0.9", 7002),
            ]),
        ]);
        let ranges = parse(&reply, "10.0.0.5:7001").expect("valid");
        assert_eq!(ranges[0].master, "10.0.0.1:7000");
        assert_eq!((ranges[1].first, ranges[1].last), (5461, 16383));
        assert_eq!(ranges[1].master, "10.0.0.5:7001", "no host: the node asked");
        let junk = Value::Array(vec![Value::Array(vec![Value::Int(9), Value::Int(3)])]);
        assert_eq!(parse(&junk, "x:1"), None);
        assert_eq!(parse(&Value::Nil, "x:1"), None);
    }
}
