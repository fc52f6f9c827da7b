#!/bin/sh
# Builds the benchmark, the compiler and (when the workspace has it) the
# runtime in release, then measures direct, microsocks, dante, v2ray and
# Etemenanki (alone, and as both ends of a SOCKS-over-TLS chain, as is
# v2ray) on loopback and prints the table. Extra arguments go to
# etemenanki-bench (see `etemenanki-bench --help`), for example
#   runtime/bench/run.sh --subjects direct,etemenanki --runs 1
#   runtime/bench/run.sh --protocol-chains --runs 2 --bulk-mib 256
# (the second: shadowsocks, shadowsocks 2022 and trojan, our client and
# the peers' clients in front of the same real servers), and
#   runtime/bench/run.sh --full-chains --runs 2 --bulk-mib 256
# (one program at both ends: ours, shadowsocks-rust, v2ray, trojan-gfw and
# sing-box, each to itself).
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
target=${CARGO_TARGET_DIR:-$root/target}

packages="-p etemenanki-bench -p etemenanki-compiler"
if cargo metadata --no-deps --format-version 1 | grep -q '"name":"etemenanki-run"'; then
    packages="$packages -p etemenanki-run"
else
    echo "run.sh: no etemenanki-run package in this workspace; the etemenanki column will be skipped" >&2
fi
# shellcheck disable=SC2086 # the package list is meant to split
cargo build --release $packages

# 1,000 idle connections take 2,000 descriptors in the bench (client and
# server ends) and as many in the proxy, which inherits this limit.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
# The bench kills every proxy it started when it exits, on error as well.
# A --bin-dir of the caller's (another build's etc and etemenanki-run)
# takes the place of this workspace's.
for arg in "$@"; do
    case $arg in
    --bin-dir | --bin-dir=*) exec "$target/release/etemenanki-bench" "$@" ;;
    esac
done
exec "$target/release/etemenanki-bench" --bin-dir "$target/release" "$@"
