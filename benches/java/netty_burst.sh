#!/bin/sh
# Compiles and runs NettyBurst.java against Debian's Netty (`apt-get install -y libnetty-java`):
# Netty's HashedWheelTimer beside `timer_figures burst` (`netty_burst.sh burst`) and
# `timer_memory` (`netty_burst.sh memory`).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
jar=/usr/share/java/netty-common.jar
if [ ! -f "$jar" ]; then
    echo "netty_burst.sh: $jar not found: apt-get install -y libnetty-java" >&2
    exit 1
fi
out=${TMPDIR:-/tmp}/netty-burst-classes
mkdir -p "$out"
javac -d "$out" -cp "$jar" "$here/NettyLoop.java" "$here/NettyBurst.java"
exec java -Xms2g -Xmx2g -cp "$out:$jar" NettyBurst "$@"
