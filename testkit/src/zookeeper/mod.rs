//! Real ZooKeeper servers for tests, from Debian's `zookeeper` package: a standalone
//! [`ZooKeeper`], an ensemble of several ([`ZooKeeperEnsemble`]) and a TCP [`Proxy`] that can cut
//! or freeze the network between a client and a server. Each server is a `java` process running
//! `QuorumPeerMain` on free loopback ports, in a temporary directory of its own that holds its
//! `zoo.cfg`, its data and its logs; it is killed on drop, also when a test panics.
//!
//! The server runs from `/usr/share/java/zookeeper.jar`, whose manifest names the jars it needs,
//! as Debian's `zkEnv.sh` has it. Debian's classpath has no logging backend for SLF4J, so its
//! server logs nothing; testkit adds the package's own log4j 1.2 binding (`slf4j-log4j12.jar`,
//! `log4j-1.2.jar`) and writes a `log4j.properties` of its own, so that each server logs to
//! `zookeeper.log` in its directory. What the JVM itself prints goes to `zookeeper.out` there.
//!
//! The JVM is a small one that starts fast, with a class data sharing archive of the server's
//! classes made the first time a server starts on the machine (which adds a second or two to that
//! start). A standalone server serves about 0.5 s after it is started, an ensemble of three
//! 1.5 to 3 s (on two busy cores); a follower elects a new leader about 0.4 s after the leader is
//! killed, 2.4 s after it is paused.
//!
//! Ticks are short (`tickTime=100`): sessions may be as short as 200 ms, a follower that hears
//! nothing from its leader for 2 s (`syncLimit=20`) looks for a new one.

mod ensemble;
mod proxy;

pub use ensemble::ZooKeeperEnsemble;
pub use proxy::Proxy;

use std::fs::{self, OpenOptions};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{Read, Seek, SeekFrom, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

use crate::programs::binary;
use crate::redis_server::free_port;
use crate::wait::wait_for;

/// The server's jar, as Debian's `zkEnv.sh` puts it on the classpath.
const ZOOKEEPER_JAR: &str = "/usr/share/java/zookeeper.jar";

/// The SLF4J binding to log4j 1.2 and log4j 1.2 itself, both pulled in by Debian's
/// `libzookeeper-java`.
const LOG_JARS: [&str; 2] = [
    "/usr/share/java/slf4j-log4j12.jar",
    "/usr/share/java/log4j-1.2.jar",
];

/// The class `zkServer.sh` runs.
const MAIN_CLASS: &str = "org.apache.zookeeper.server.quorum.QuorumPeerMain";

/// A small JVM that starts fast: a small heap, the serial collector, the quick compiler only, no
/// performance data file in `/tmp` and no JMX beans for log4j. Together they take the CPU time a
/// server needs to serve from about 1.1 s to 0.6 s.
const JVM_FLAGS: [&str; 6] = [
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xss512k",
    "-XX:-UsePerfData",
    "-Dzookeeper.jmx.log4j.disable=true",
];

/// How long a server may take to serve after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The log4j 1.2 configuration each server gets: INFO and above to `zookeeper.log` in its
/// directory, appended to across restarts.
const LOG4J_PROPERTIES: &str = "\
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File=${zookeeper.log.dir}/${zookeeper.log.file}
log4j.appender.FILE.Append=true
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%c{1}] - %m%n
";

/// The log file's name in a server's directory.
const LOG_FILE: &str = "zookeeper.log";

/// Where the JVM's standard output and standard error go, in a server's directory.
const OUT_FILE: &str = "zookeeper.out";

/// The settings every server gets before those of its kind and the caller's.
fn default_settings(dir: &Path, client_port: u16) -> Vec<String> {
    vec![
        "tickTime=100".to_owned(),
        "minSessionTimeout=200".to_owned(),
        "maxSessionTimeout=60000".to_owned(),
        "initLimit=50".to_owned(),
        "syncLimit=20".to_owned(),
        "4lw.commands.whitelist=*".to_owned(),
        "admin.enableServer=false".to_owned(),
        "clientPortAddress=127.0.0.1".to_owned(),
        format!("clientPort={client_port}"),
        format!("dataDir={}", dir.join("data").display()),
        "forceSync=yes".to_owned(),
        "autopurge.purgeInterval=0".to_owned(),
    ]
}

/// What a standalone server is waited for.
const STANDALONE: Ready<'static> = Ready::Modes(&["standalone"]);

/// A standalone ZooKeeper on a free loopback port, killed on drop.
///
/// It can be paused (SIGSTOP), resumed, killed and started again on the same port with the same
/// data directory, so that what it had written survives.
pub struct ZooKeeper {
    node: Node,
}

impl ZooKeeper {
    /// A standalone server with the default settings, once it serves (about a second).
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// A standalone server with more `zoo.cfg` lines, such as `"forceSync=no"`, once it serves.
    /// They come after the defaults, which they override (the last line of a setting counts);
    /// `clientPort` and `dataDir` are testkit's to set.
    pub fn start_with(extra_cfg: &[&str]) -> Self {
        Self::start_with_properties(extra_cfg, &[])
    }

    /// A standalone server with more `zoo.cfg` lines and Java system properties (`"name=value"`,
    /// passed as `-Dname=value`), for the settings the server reads only from its properties,
    /// such as `znode.container.checkIntervalMs`, once it serves.
    pub fn start_with_properties(extra_cfg: &[&str], properties: &[&str]) -> Self {
        // Another process may take the port between the check and the server's bind.
        for _ in 0..5 {
            let port = free_port(None);
            let mut node = Node::create(port, |dir| {
                let mut settings = default_settings(dir, port);
                settings.extend(extra_cfg.iter().map(|line| (*line).to_owned()));
                settings
            });
            node.properties = properties
                .iter()
                .map(|property| format!("-D{property}"))
                .collect();
            node.spawn();
            if await_nodes(&mut [&mut node], STANDALONE, "ZooKeeper serving") {
                return ZooKeeper { node };
            }
        }
        panic!("ZooKeeper did not start on any of 5 free ports");
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.node.port
    }

    /// `127.0.0.1:port`, as ZooKeeper clients take it.
    pub fn connect_string(&self) -> String {
        format!("127.0.0.1:{}", self.node.port)
    }

    /// The server's temporary directory: `zoo.cfg`, `data/`, `zookeeper.log` and
    /// `zookeeper.out`.
    pub fn dir(&self) -> &Path {
        self.node.dir()
    }

    /// The server's log (`zookeeper.log` in its directory), appended to across restarts.
    pub fn log_path(&self) -> PathBuf {
        self.node.log_path()
    }

    /// Freezes the server (SIGSTOP) and returns once every thread of it is stopped: connections
    /// stay open (new ones too, in the kernel's backlog) and nothing answers, not even the
    /// four-letter words. Its clients see their session time out on their side and keep trying
    /// to reconnect. The server's clock runs on meanwhile: once resumed, it expires the sessions
    /// whose timeout passed while it was frozen (a client that reconnects first may keep its
    /// session).
    pub fn pause(&self) {
        self.node.pause();
    }

    /// Lets a paused server run again (SIGCONT), returning once no thread of it is stopped.
    pub fn resume(&self) {
        self.node.resume();
    }

    /// Whether the process runs (paused or not): started, and not stopped since.
    pub fn is_running(&self) -> bool {
        self.node.is_running()
    }

    /// Kills the server (SIGKILL) and waits until it is gone: connections to its port are
    /// refused until [`ZooKeeper::start_again`].
    pub fn stop(&mut self) {
        self.node.kill();
    }

    /// Starts the server again after [`ZooKeeper::stop`], on the same port with the same data
    /// directory, and waits until it serves. Nothing happens if it runs.
    pub fn start_again(&mut self) {
        if !self.node.is_running() {
            self.node
                .respawn(|node| await_nodes(&mut [node], STANDALONE, "ZooKeeper serving again"));
        }
    }
}

/// What a server says of itself on the `srvr` four-letter word: its mode, `"standalone"`,
/// `"leader"` or `"follower"`. `None` when nothing answers within a second or the server does
/// not serve (such as a node of an ensemble without a quorum).
pub fn zookeeper_mode(port: u16) -> Option<String> {
    srvr_field(port, "Mode")
}

/// The last transaction id a server has seen (the `Zxid` of `srvr`): the epoch of its leader in
/// the upper 32 bits, a counter in the lower. `None` as for [`zookeeper_mode`].
pub fn zookeeper_zxid(port: u16) -> Option<u64> {
    srvr_field(port, "Zxid")
        .and_then(|zxid| u64::from_str_radix(zxid.trim_start_matches("0x"), 16).ok())
}

/// Sends a four-letter word (`ruok`, `srvr`, `mntr`, `cons`, ...) to the server on `port` and
/// returns its whole answer; `None` when it cannot connect in half a second or the answer does
/// not end within a second. Every testkit server allows them all (`4lw.commands.whitelist=*`).
pub fn zookeeper_four_letter_word(port: u16, word: &str) -> Option<String> {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_millis(500)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream
        .set_write_timeout(Some(Duration::from_secs(1)))
        .ok()?;
    stream.write_all(word.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer)
}

/// The value of the `name: value` line of a server's `srvr` answer.
fn srvr_field(port: u16, name: &str) -> Option<String> {
    let answer = zookeeper_four_letter_word(port, "srvr")?;
    answer.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key.trim() == name).then(|| value.trim().to_owned())
    })
}

/// The classpath of a server, or a failure saying what is missing.
fn classpath() -> String {
    assert!(
        Path::new(ZOOKEEPER_JAR).is_file(),
        "{ZOOKEEPER_JAR} not found: these tests need a real ZooKeeper \
         (scripts/test installs Debian's zookeeper package with apt-get)"
    );
    // Without the log jars the server still runs, silently.
    std::iter::once(ZOOKEEPER_JAR)
        .chain(LOG_JARS.into_iter().filter(|jar| Path::new(jar).is_file()))
        .collect::<Vec<_>>()
        .join(":")
}

/// The class data sharing archive the servers start with, made once per machine: the classes a
/// server loads, already parsed and checked, which takes the CPU time a server needs to serve
/// from about 0.6 s to 0.45 s. `None` if it could not be made; servers start without it then.
///
/// It lives in the temporary directory under a name that changes with the JVM, the jars and the
/// flags (a JVM would not use an archive made with others), and is made by a server started for
/// that alone, which writes it when it exits on SIGTERM.
fn class_archive() -> Option<&'static Path> {
    static ARCHIVE: OnceLock<Option<PathBuf>> = OnceLock::new();
    ARCHIVE
        .get_or_init(|| {
            let path =
                std::env::temp_dir().join(format!("testkit-zookeeper-{:016x}.jsa", archive_key()));
            (path.is_file() || make_class_archive(&path)).then_some(path)
        })
        .as_deref()
}

/// A hash of what an archive depends on: the JVM, the jars of the classpath and the flags.
fn archive_key() -> u64 {
    let mut hasher = DefaultHasher::new();
    let java = fs::canonicalize(binary("java")).unwrap_or_else(|_| binary("java"));
    let classpath = classpath();
    for file in std::iter::once(java.as_path()).chain(classpath.split(':').map(Path::new)) {
        file.hash(&mut hasher);
        if let Ok(meta) = fs::metadata(file) {
            meta.len().hash(&mut hasher);
            meta.modified().ok().hash(&mut hasher);
        }
    }
    JVM_FLAGS.hash(&mut hasher);
    hasher.finish()
}

/// Makes the class archive at `path`: starts a standalone server that archives its classes at
/// exit, waits until it serves, stops it with SIGTERM and moves the archive into place. `false`
/// if any of it fails.
fn make_class_archive(path: &Path) -> bool {
    let port = free_port(None);
    let mut node = Node::create(port, |dir| default_settings(dir, port));
    // Test processes side by side may each make one: each writes its own, then renames it.
    let partial = node.dir().join("classes.jsa");
    node.spawn_jvm(Some(&format!(
        "-XX:ArchiveClassesAtExit={}",
        partial.display()
    )));
    let deadline = Instant::now() + START_TIMEOUT;
    while zookeeper_mode(port).as_deref() != Some("standalone") {
        if Instant::now() >= deadline || node.exited().is_some() {
            return false;
        }
        thread::sleep(Duration::from_millis(50));
    }
    if !node.send("-TERM") {
        return false;
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    while node.exited().is_none() {
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(50));
    }
    partial.is_file() && fs::rename(&partial, path).is_ok()
}

/// What became of a server that is not running any more.
enum Exit {
    /// It could not bind one of its ports.
    PortTaken,
    /// It exited for another reason, told by its exit status and the end of its logs.
    Failed(String),
}

/// What a server that cannot bind a port writes to its log.
const PORT_TAKEN: &str = "Address already in use";

/// One ZooKeeper server process and its directory. Its `zoo.cfg` is written once; a restart
/// reads it again.
pub(crate) struct Node {
    child: Option<Child>,
    /// The client port.
    port: u16,
    dir: tempfile::TempDir,
    /// Whether the process is stopped by SIGSTOP.
    paused: AtomicBool,
    /// Java system properties the JVM gets (`-Dname=value` each).
    properties: Vec<String>,
    /// The lengths of the log and the output file when the process was last started, so that a
    /// failure shows what this start wrote.
    log_start: (u64, u64),
}

impl Node {
    /// A node that is not started yet, in a new temporary directory holding its `data/`
    /// directory, its `zoo.cfg` of the lines `settings` gives for the directory, and the log
    /// configuration.
    fn create(port: u16, settings: impl FnOnce(&Path) -> Vec<String>) -> Node {
        let dir = tempfile::tempdir().expect("a temporary directory");
        fs::create_dir(dir.path().join("data")).expect("create the data directory");
        let mut cfg = settings(dir.path()).join("\n");
        cfg.push('\n');
        fs::write(dir.path().join("zoo.cfg"), cfg).expect("write zoo.cfg");
        fs::write(dir.path().join("log4j.properties"), LOG4J_PROPERTIES)
            .expect("write log4j.properties");
        Node {
            child: None,
            port,
            dir,
            paused: AtomicBool::new(false),
            properties: Vec::new(),
            log_start: (0, 0),
        }
    }

    /// Writes the `myid` file of a node of an ensemble.
    fn set_myid(&self, id: usize) {
        fs::write(self.dir.path().join("data").join("myid"), format!("{id}\n"))
            .expect("write myid");
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join(LOG_FILE)
    }

    fn out_path(&self) -> PathBuf {
        self.dir.path().join(OUT_FILE)
    }

    /// Starts the JVM, without waiting for it to serve; with the class archive if there is
    /// one.
    fn spawn(&mut self) {
        let archive =
            class_archive().map(|path| format!("-XX:SharedArchiveFile={}", path.display()));
        self.spawn_jvm(archive.as_deref());
    }

    /// Starts the JVM with one more flag, if any, without waiting for it to serve.
    fn spawn_jvm(&mut self, flag: Option<&str>) {
        let dir = self.dir.path();
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.out_path())
            .expect("open the server's output file");
        let length = |path: PathBuf| fs::metadata(path).map(|meta| meta.len()).unwrap_or(0);
        self.log_start = (length(self.log_path()), length(self.out_path()));
        let classpath = classpath();
        let mut command = crate::tied::command(&binary("java"));
        command
            .args(JVM_FLAGS)
            .args(flag)
            .args(&self.properties)
            .arg(format!("-Djava.io.tmpdir={}", dir.display()))
            .arg(format!("-Dzookeeper.log.dir={}", dir.display()))
            .arg(format!("-Dzookeeper.log.file={LOG_FILE}"))
            .arg(format!(
                "-Dlog4j.configuration=file:{}",
                dir.join("log4j.properties").display()
            ))
            .args(["-cp", &classpath, MAIN_CLASS])
            .arg(dir.join("zoo.cfg"))
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("share the output file"))
            .stderr(out);
        let child = crate::tied::spawn(command).expect("start java");
        self.child = Some(child);
        self.paused.store(false, Ordering::SeqCst);
    }

    /// What this start wrote to the log and the output file so far.
    fn written(&self) -> String {
        let since = |path: PathBuf, start: u64| {
            let mut text = String::new();
            if let Ok(mut file) = fs::File::open(path) {
                let _ = file.seek(SeekFrom::Start(start));
                let _ = file.read_to_string(&mut text);
            }
            text
        };
        since(self.out_path(), self.log_start.1) + &since(self.log_path(), self.log_start.0)
    }

    /// `None` while the process runs (or was never started); what became of it once it
    /// exited, and then it counts as stopped.
    fn exited(&mut self) -> Option<Exit> {
        let status = self.child.as_mut()?.try_wait().ok().flatten()?;
        self.child = None;
        let written = self.written();
        if written.contains(PORT_TAKEN) {
            return Some(Exit::PortTaken);
        }
        Some(Exit::Failed(format!(
            "ZooKeeper on port {} exited at start ({status}); what it wrote:\n{}",
            self.port,
            tail_of(&written, 60)
        )))
    }

    /// Whether this start has written that a port is taken, while the process may still run
    /// (the election port is tried again a few times before the server gives up).
    fn port_taken(&self) -> bool {
        self.written().contains(PORT_TAKEN)
    }

    /// The end of the server's output file and log, for a failure message.
    fn log_tail(&self) -> String {
        logs_tail(self.port, &self.out_path(), &self.log_path())
    }

    /// Starts the stopped process again on the same ports and waits with `ready`, which
    /// returns `false` when a port was taken; then tries again, for up to 30 s.
    fn respawn(&mut self, mut ready: impl FnMut(&mut Node) -> bool) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            self.spawn();
            if ready(self) {
                return;
            }
            self.kill();
            assert!(
                Instant::now() < deadline,
                "ZooKeeper could not take its ports (client port {}) again within {START_TIMEOUT:?}",
                self.port
            );
            thread::sleep(Duration::from_millis(200));
        }
    }

    fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Whether the process runs and is not paused, so that it may answer.
    fn is_answering(&self) -> bool {
        self.is_running() && !self.paused.load(Ordering::SeqCst)
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("a running ZooKeeper").id();
        assert!(self.send(signal), "kill {signal} {pid}");
    }

    /// Sends `signal` (such as `-STOP`) to the process with `kill`; `false` if that fails.
    fn send(&self, signal: &str) -> bool {
        self.child.as_ref().is_some_and(|child| {
            Command::new("kill")
                .args([signal, &child.id().to_string()])
                .status()
                .is_ok_and(|status| status.success())
        })
    }

    /// Sends SIGSTOP and waits until every thread of the JVM is stopped: a signal is delivered
    /// a little later than `kill` returns, and a thread that runs meanwhile may still answer.
    fn pause(&self) {
        self.signal("-STOP");
        self.paused.store(true, Ordering::SeqCst);
        self.await_stopped(true);
    }

    /// Sends SIGCONT and waits until no thread of the JVM is stopped any more.
    fn resume(&self) {
        self.signal("-CONT");
        self.paused.store(false, Ordering::SeqCst);
        self.await_stopped(false);
    }

    /// Waits up to 5 s until the threads of the process are all stopped (`true`) or none is.
    fn await_stopped(&self, stopped: bool) {
        let pid = self.child.as_ref().expect("a running ZooKeeper").id();
        wait_for(
            if stopped {
                "ZooKeeper stopped by SIGSTOP"
            } else {
                "ZooKeeper running again after SIGCONT"
            },
            Duration::from_secs(5),
            || {
                let states = thread_states(pid);
                // A thread that ends meanwhile shows as a zombie (`Z`) or dead (`X`).
                let done = if stopped {
                    states
                        .iter()
                        .all(|state| matches!(state, 'T' | 't' | 'Z' | 'X'))
                } else {
                    !states.contains(&'T')
                };
                if done {
                    Ok(())
                } else {
                    Err(format!("thread states {states:?}"))
                }
            },
            String::new,
        );
    }

    /// Kills the process (SIGKILL) and reaps it.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.paused.store(false, Ordering::SeqCst);
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The end of a server's output file and log, headed by its client port, for a failure message.
fn logs_tail(port: u16, out: &Path, log: &Path) -> String {
    let read = |path: &Path| fs::read_to_string(path).unwrap_or_default();
    format!(
        "\n--- port {port}: end of {OUT_FILE} ---\n{}\n--- port {port}: end of {LOG_FILE} ---\n{}",
        tail_of(&read(out), 10),
        tail_of(&read(log), 40)
    )
}

/// The state of each thread of process `pid` (`R`, `S`, `T` for stopped, ...), from
/// `/proc/<pid>/task/*/stat`; empty if the process is gone.
fn thread_states(pid: u32) -> Vec<char> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|task| fs::read_to_string(task.path().join("stat")).ok())
        // `tid (name) state ...`: the name may hold anything, the state follows its last `)`.
        .filter_map(|stat| stat.rsplit_once(')')?.1.trim_start().chars().next())
        .collect()
}

/// The last `lines` lines of `text`.
fn tail_of(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// What a starting server is waited for.
#[derive(Clone, Copy)]
enum Ready<'a> {
    /// Serving, in one of these modes (`srvr`).
    Modes(&'a [&'a str]),
    /// Up: it answers `ruok`, whether it serves or not (a node of an ensemble without a quorum
    /// does not).
    Up,
}

impl Ready<'_> {
    /// `Ok` when the server on `port` is ready, else what it is.
    fn check(self, port: u16) -> Result<(), String> {
        match self {
            Ready::Modes(modes) => match zookeeper_mode(port) {
                Some(mode) if modes.contains(&mode.as_str()) => Ok(()),
                Some(mode) => Err(format!("port {port}: {mode}")),
                None => Err(format!("port {port}: not serving")),
            },
            Ready::Up => match zookeeper_four_letter_word(port, "ruok").as_deref() {
                Some("imok") => Ok(()),
                _ => Err(format!("port {port}: no imok to ruok")),
            },
        }
    }
}

/// Waits until every node of `nodes` is `ready`: `true` then, `false` as soon as one of them
/// could not bind a port. Fails the test with the end of the nodes' logs when one exits for
/// another reason, or when they are not all ready within 30 s.
fn await_nodes(nodes: &mut [&mut Node], ready: Ready<'_>, what: &str) -> bool {
    let logs: Vec<(u16, PathBuf, PathBuf)> = nodes
        .iter()
        .map(|node| (node.port, node.out_path(), node.log_path()))
        .collect();
    wait_for(
        what,
        START_TIMEOUT,
        || {
            for node in nodes.iter_mut() {
                match node.exited() {
                    Some(Exit::PortTaken) => return Ok(false),
                    Some(Exit::Failed(why)) => panic!("{why}"),
                    None => {}
                }
            }
            let not_ready: Vec<String> = nodes
                .iter()
                .filter_map(|node| ready.check(node.port).err())
                .collect();
            if not_ready.is_empty() {
                return Ok(true);
            }
            if nodes.iter().any(|node| node.port_taken()) {
                return Ok(false);
            }
            Err(not_ready.join(", "))
        },
        || {
            logs.iter()
                .map(|(port, out, log)| logs_tail(*port, out, log))
                .collect()
        },
    )
}
