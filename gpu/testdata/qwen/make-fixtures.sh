#!/bin/sh
# make-fixtures.sh: regenerates the parity fixtures beside it (one directory
# per checkpoint: config.json, model.safetensors, scores.json; README.md)
# with the PyTorch peer; the mgrpo-* checkpoints are written by mgrpo (a Go
# test) and only scored by the peer. Needs Debian's PyTorch: apt-get install -y
# python3-torch python3-numpy. Run from the repository root:
#   gpu/testdata/qwen/make-fixtures.sh [PEER_DIR]   (default ../shared/peer)
set -eu
PEER=${1:-../shared/peer}
PY=${PEER_PYTHON:-/usr/bin/python3}
HERE=$(dirname "$0")
# the other direction first: mgrpo writes its checkpoints, the peer scores them
MGRPO_WRITE_FIXTURES=$(cd "$HERE" && pwd) go test -count=1 -run '^TestWriteMgrpoFixtures$' ./gpu
"$PY" "$HERE/make_fixtures.py" "$PEER" "$HERE"
