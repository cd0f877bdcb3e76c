#!/bin/sh
# Compiles and runs NettyBurst.java against Debian's Netty (`apt-get install -y libnetty-java`):
# Netty's HashedWheelTimer beside `timer_figures burst` (`netty_burst.sh burst`) and
# `timer_memory` (`netty_burst.sh memory`).
set -eu
. "$(cd "$(dirname "$0")" && pwd)/netty.sh"
run_netty NettyBurst "$@"
