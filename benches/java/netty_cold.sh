#!/bin/sh
# Compiles and runs NettyCold.java against Debian's Netty (`apt-get install -y libnetty-java`):
# Netty's HashedWheelTimer with the cold handles of `timer_figures cold`. Arguments go to the
# program (the pending count, 1,000,000 by default).
set -eu
. "$(cd "$(dirname "$0")" && pwd)/netty.sh"
run_netty NettyCold "$@"
