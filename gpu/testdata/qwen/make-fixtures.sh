#!/bin/sh
# make-fixtures.sh: regenerates the parity fixtures beside it (one directory
# per checkpoint: config.json, model.safetensors, scores.json; README.md)
# with the PyTorch peer. Needs Debian's PyTorch: apt-get install -y
# python3-torch python3-numpy. Run from the repository root:
#   gpu/testdata/qwen/make-fixtures.sh [PEER_DIR]   (default ../shared/peer)
set -eu
PEER=${1:-../shared/peer}
PY=${PEER_PYTHON:-/usr/bin/python3}
HERE=$(dirname "$0")
"$PY" "$HERE/make_fixtures.py" "$PEER" "$HERE"
