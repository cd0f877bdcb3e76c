#!/bin/sh
# Compiles and runs NettyLoop.java against Debian's Netty (`apt-get install -y libnetty-java`):
# Netty's HashedWheelTimer in the tight loop of `timer_figures loop`. Arguments go to the program
# (the pending count, 1,000,000 by default).
set -eu
. "$(cd "$(dirname "$0")" && pwd)/netty.sh"
run_netty NettyLoop "$@"
