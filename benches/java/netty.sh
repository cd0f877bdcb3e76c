# Sourced by the netty_*.sh scripts: run_netty CLASS ARGS... compiles this folder's programs
# against Debian's Netty (`apt-get install -y libnetty-java`) and runs CLASS with ARGS.
run_netty() {
    here=$(cd "$(dirname "$0")" && pwd)
    jar=/usr/share/java/netty-common.jar
    if [ ! -f "$jar" ]; then
        echo "$(basename "$0"): $jar not found: apt-get install -y libnetty-java" >&2
        exit 1
    fi
    out=${TMPDIR:-/tmp}/netty-classes
    mkdir -p "$out"
    javac -d "$out" -cp "$jar" "$here"/*.java
    class=$1
    shift
    exec java -Xms2g -Xmx2g -cp "$out:$jar" "$class" "$@"
}
