//! A `MONITOR` connection: every command the server runs, including those a Lua script runs, in
//! the server's execution order, parsed into its arguments.

use std::io::{BufRead, BufReader, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// One command the server ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Monitored {
    /// When the server ran it, in microseconds of its wall clock.
    pub at_micros: u64,
    /// Whether a Lua script ran it (rather than a client).
    pub from_script: bool,
    /// The command name (lower case) and its arguments.
    pub args: Vec<String>,
}

/// Records what the server runs until [`Monitor::stop`].
pub struct Monitor {
    stop: Arc<AtomicBool>,
    reader: JoinHandle<Vec<Monitored>>,
}

impl Monitor {
    /// Sends `MONITOR` on `stream`, a connection to the server whose reads time out after a
    /// short while (so that the reader sees [`Monitor::stop`]).
    pub(crate) fn start<S: Read + Write + Send + 'static>(mut stream: S) -> Monitor {
        stream.write_all(b"MONITOR\r\n").expect("send MONITOR");
        let mut reader = BufReader::new(stream);
        let mut ok = String::new();
        reader.read_line(&mut ok).expect("MONITOR reply");
        assert_eq!(ok.trim_end(), "+OK", "MONITOR accepted");
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        let reader = thread::spawn(move || {
            let mut seen = Vec::new();
            let mut line = String::new();
            loop {
                match reader.read_line(&mut line) {
                    Ok(0) => break,
                    Ok(_) if line.ends_with('\n') => {
                        if let Some(command) = parse(line.trim_end()) {
                            seen.push(command);
                        }
                        line.clear();
                    }
                    // A partial line, or a read timeout: keep what was read and go on.
                    Ok(_) | Err(_) if !stopping.load(Ordering::SeqCst) => {}
                    Ok(_) | Err(_) => break,
                }
            }
            seen
        });
        Monitor { stop, reader }
    }

    /// Stops recording (after what the server has sent so far) and returns it all.
    pub fn stop(self) -> Vec<Monitored> {
        // Give lines already written by the server a moment to arrive.
        thread::sleep(Duration::from_millis(200));
        self.stop.store(true, Ordering::SeqCst);
        self.reader.join().expect("monitor reader")
    }
}

/// `+1700000000.123456 [0 lua] "hset" "k" "a" "1"` into its parts.
fn parse(line: &str) -> Option<Monitored> {
    let line = line.strip_prefix('+')?;
    let (seconds, micros) = line.split_once(' ')?.0.split_once('.')?;
    let at_micros = seconds.parse::<u64>().ok()? * 1_000_000 + micros.parse::<u64>().ok()?;
    let open = line.find('[')?;
    let close = open + line[open..].find(']')?;
    let source = &line[open + 1..close];
    let from_script = source.ends_with(" lua");
    let mut args = Vec::new();
    let mut chars = line[close + 1..].chars();
    while let Some(c) = chars.next() {
        if c != '"' {
            continue;
        }
        let mut arg = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => arg.extend(chars.next()),
                other => arg.push(other),
            }
        }
        args.push(arg);
    }
    if let Some(name) = args.first_mut() {
        *name = name.to_lowercase();
    }
    Some(Monitored {
        at_micros,
        from_script,
        args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_client_and_script_lines() {
        let client = parse(r#"+1795247284.049821 [0 127.0.0.1:58396] "EVALSHA" "ab" "1" "{k}""#);
        assert_eq!(
            client,
            Some(Monitored {
                at_micros: 1_795_247_284_049_821,
                from_script: false,
                args: vec!["evalsha".into(), "ab".into(), "1".into(), "{k}".into()],
            })
        );
        let script = parse(r#"+1795247284.049886 [0 lua] "hset" "k" "a\"b" "1""#);
        assert_eq!(
            script.map(|m| (m.from_script, m.args)),
            Some((
                true,
                vec!["hset".into(), "k".into(), "a\"b".into(), "1".into()]
            ))
        );
    }
}
