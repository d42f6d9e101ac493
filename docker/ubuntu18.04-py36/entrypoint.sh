#!/bin/sh
# Verify a wheel in this machine's own old environment: the same `retfwheel verify` code path CI runs
# in the emulated environment. Usage: retf-verify WHEEL [--script FILE ...]
set -eu
recipe="${RETF_RECIPE:-/opt/retfwheel/recipes/ubuntu18.04-py36.toml}"
tool="${RETFWHEEL:-/opt/tool/bin/retfwheel}"
if [ "$#" -lt 1 ]; then
    echo "usage: retf-verify WHEEL [--script FILE ...]" >&2
    exit 2
fi
exec "$tool" verify "$@" --recipe "$recipe"
