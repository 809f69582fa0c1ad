#!/usr/bin/env bash
# Installs the programs the mqfs CLI tests run against a FUSE mount:
# fusermount3 (Debian package fuse3), fio and sqlite3. Idempotent: does
# nothing when every binary is already on PATH. Runs apt-get directly as
# root, through sudo otherwise (if sudo exists).
set -euo pipefail

missing=()
command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
command -v fio >/dev/null 2>&1 || missing+=(fio)
command -v sqlite3 >/dev/null 2>&1 || missing+=(sqlite3)
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    as_root=()
elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
else
    echo "install-deps: need root or sudo to install: ${missing[*]}" >&2
    exit 1
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" apt-get update -qq
"${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for bin in fusermount3 fio sqlite3; do
    if ! command -v "$bin" >/dev/null 2>&1; then
        echo "install-deps: $bin is still missing after apt-get install" >&2
        exit 1
    fi
done
