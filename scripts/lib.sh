# Helpers shared by the scripts in this folder. Source it; do not run it.

# The repository root, whatever the caller's working directory.
repo_root() {
    cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd
}

# The directory cargo builds in, as cargo says: `target/` at the repository root, or wherever
# CARGO_TARGET_DIR (or a cargo configuration) puts it. Use: `target=$(target_dir)`.
target_dir() {
    local metadata dir
    metadata=$(cargo metadata --format-version 1 --no-deps --manifest-path "$(repo_root)/Cargo.toml") ||
        return 1
    dir=$(sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p' <<<"$metadata")
    # JSON escapes a quote or a backslash in a path: such a path is not read here.
    if [ -z "$dir" ] || [[ "$dir" == *\\* ]]; then
        echo "cannot read the target directory from cargo metadata (got \"$dir\")" >&2
        return 1
    fi
    printf '%s\n' "$dir"
}

say() {
    printf '\n==> %s\n' "$*"
}

# Fails with a clear message when cargo is missing: the only thing these scripts cannot install.
need_cargo() {
    if ! command -v cargo >/dev/null 2>&1; then
        echo "cargo not found: install the Rust toolchain (https://rustup.rs) and run again" >&2
        exit 1
    fi
}

# Installs Debian packages that are missing, with apt-get (as root, or through sudo).
need_packages() {
    local missing=()
    for package in "$@"; do
        dpkg -s "$package" >/dev/null 2>&1 || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    say "installing ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    # A package whose service cannot start here (a container without init) may make apt-get
    # report failure although its files are installed: callers check for what they need.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" ||
        echo "apt-get reported a failure installing ${missing[*]}; checking what arrived" >&2
}

# Makes sure `redis-server` is on PATH, installing Debian's package when it is missing.
need_redis_server() {
    command -v redis-server >/dev/null 2>&1 || need_packages redis-server
    if ! command -v redis-server >/dev/null 2>&1; then
        echo "redis-server is missing and could not be installed: it is needed here" >&2
        exit 1
    fi
}

# Makes sure Debian's ZooKeeper is installed (the testkit runs its jar with java), installing the
# package when it is missing; it pulls in a Java runtime.
need_zookeeper() {
    local server=/usr/share/zookeeper/bin/zkServer.sh
    [ -e "$server" ] || need_packages zookeeper
    if [ ! -e "$server" ] || [ ! -f /usr/share/java/zookeeper.jar ] ||
        ! command -v java >/dev/null 2>&1; then
        echo "ZooKeeper (Debian's zookeeper package, and java) is missing and could not be" \
            "installed: it is needed here" >&2
        exit 1
    fi
}

# Makes sure Debian's PostgreSQL 15 and PgBouncer are installed (the testkit runs them itself, on
# free ports, as the postgres user when run as root), installing the packages when missing.
need_postgres() {
    local server=/usr/lib/postgresql/15/bin/postgres
    { [ -x "$server" ] && [ -x /usr/sbin/pgbouncer ]; } || need_packages postgresql-15 pgbouncer
    if [ ! -x "$server" ] || [ ! -x /usr/sbin/pgbouncer ] || ! id postgres >/dev/null 2>&1; then
        echo "PostgreSQL 15 and PgBouncer (Debian's postgresql-15 and pgbouncer packages) are" \
            "missing and could not be installed: they are needed here" >&2
        exit 1
    fi
}
