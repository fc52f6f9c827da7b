#!/usr/bin/env bash
# Loopback benchmark of etemenanki-run against the same work done directly
# and through the SOCKS5 servers Debian ships (microsocks, dante-server,
# v2ray with a socks inbound and a freedom outbound).
#
#   bash runtime/bench/run.sh            # every peer that is installed
#   apt-get install microsocks dante-server v2ray   # to compare with all
#
# Each line gives bulk TCP MiB/s through SOCKS5 and the proxy's CPU seconds
# per GiB, sequential and 50-concurrent connects per second (connect, SOCKS
# handshake, one byte each way), KiB of proxy RSS per idle proxied
# connection (1,000 of them), and UDP round trips per second through UDP
# ASSOCIATE. A peer that is not installed is skipped with a note. The last
# line is the time etemenanki-run takes to reload a plan of 1,000 outbounds
# that all changed (decode, plan, build, publish), as the runtime logs it.
#
# The connect measurements leave some 20,000 loopback sockets in TIME_WAIT
# for a minute; run the script again only after that, or the ephemeral ports
# run out ("Address already in use"). Figures on a shared machine vary from
# run to run: compare the ratios of one run, and run it more than once.
set -euo pipefail
cd "$(dirname "$0")/../.."
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

target="${CARGO_TARGET_DIR:-target}"
cargo build --release -q -p etemenanki-run -p etemenanki-bench
bench="$target/release/etemenanki-bench"
run="$target/release/etemenanki-run"
work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() {
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    echo "nothing listens on port $1" >&2
    return 1
}

# measure LABEL PORT PID
measure() {
    wait_port "$2"
    "$bench" measure "$1" "127.0.0.1:$2" "$3"
    kill "$3" 2>/dev/null || true
    wait "$3" 2>/dev/null || true
}

"$bench" measure direct direct

port=$(free_port)
"$bench" plan "$port" "$work/plan.bin"
RUST_LOG=warn "$run" "$work/plan.bin" &
pid=$!; pids+=("$pid")
measure etemenanki "$port" "$pid"

if command -v microsocks >/dev/null; then
    port=$(free_port)
    microsocks -i 127.0.0.1 -p "$port" >/dev/null 2>&1 &
    pid=$!; pids+=("$pid")
    measure microsocks "$port" "$pid"
else
    echo "microsocks      skipped: not installed (apt-get install microsocks)"
fi

if command -v danted >/dev/null; then
    port=$(free_port)
    cat >"$work/danted.conf" <<CONF
logoutput: /dev/null
internal: 127.0.0.1 port = $port
external: 127.0.0.1
socksmethod: none
clientmethod: none
user.privileged: root
user.unprivileged: nobody
client pass { from: 0.0.0.0/0 to: 0.0.0.0/0 }
socks pass { from: 0.0.0.0/0 to: 0.0.0.0/0 command: connect udpassociate udpreply }
CONF
    danted -f "$work/danted.conf" -N 2 >/dev/null 2>&1 &
    pid=$!; pids+=("$pid")
    # dante serves from child processes: CPU and RSS are summed over them.
    measure dante "$port" "$pid"
else
    echo "dante           skipped: not installed (apt-get install dante-server)"
fi

if command -v v2ray >/dev/null; then
    port=$(free_port)
    cat >"$work/v2ray.json" <<CONF
{
  "log": {"loglevel": "none"},
  "inbounds": [{"listen": "127.0.0.1", "port": $port, "protocol": "socks",
                "settings": {"auth": "noauth", "udp": true, "ip": "127.0.0.1"}}],
  "outbounds": [{"protocol": "freedom"}]
}
CONF
    v2ray -config "$work/v2ray.json" >/dev/null 2>&1 &
    pid=$!; pids+=("$pid")
    measure v2ray "$port" "$pid"
else
    echo "v2ray           skipped: not installed (apt-get install v2ray)"
fi

port=$(free_port)
"$bench" plan "$port" "$work/many.bin" 1000 0
RUST_LOG=info "$run" "$work/many.bin" 2>"$work/many.log" &
pid=$!; pids+=("$pid")
wait_port "$port"
"$bench" plan "$port" "$work/many.next" 1000 1
mv "$work/many.next" "$work/many.bin"
kill -HUP "$pid"
for _ in $(seq 200); do
    grep -q "reload: applied" "$work/many.log" && break
    sleep 0.05
done
echo "reload of 1,000 changed outbounds: $(grep -o 'reload: applied epoch [0-9]* in [0-9.]* ms' "$work/many.log" | head -1)"
