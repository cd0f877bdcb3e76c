#!/bin/sh
# Compiles and runs NettyLoop.java against Debian's Netty (`apt-get install -y libnetty-java`):
# Netty's HashedWheelTimer in the tight loop of `timer_figures loop`. Arguments go to the program
# (the pending count, 1,000,000 by default).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
jar=/usr/share/java/netty-common.jar
if [ ! -f "$jar" ]; then
    echo "netty_loop.sh: $jar not found: apt-get install -y libnetty-java" >&2
    exit 1
fi
out=${TMPDIR:-/tmp}/netty-loop-classes
mkdir -p "$out"
javac -d "$out" -cp "$jar" "$here/NettyLoop.java"
exec java -Xms2g -Xmx2g -cp "$out:$jar" NettyLoop "$@"
