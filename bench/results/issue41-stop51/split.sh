#!/bin/bash
# usage: split.sh NAME CLIENT... (client gets URL appended with scheme/port per server)
# servers: uring epoll h2o h2om
name=$1; shift
cd /work/main
case $name in
 uring|epoll) taskset -c 0 build/ringhttpd -p 19501 --tls-port 19502 --tls-cert /work/m/cert.pem --tls-key /work/m/key.pem -b 127.0.0.1 -t 1 --engine $name --access-log off /work/m/www >/dev/null 2>&1 & pid=$!; port=19502; hport=19501;;
 h2o) taskset -c 0 h2o -c /tmp/h2ot/h2o.conf >/tmp/h2ot/out.log 2>&1 & pid=$!; port=19512; hport=19511;;
 h2om) taskset -c 0 /work/peers/h2o/bin/h2o -c /tmp/h2om/h2o.conf >/tmp/h2om/out.log 2>&1 & pid=$!; port=19522; hport=19521;;
esac
sleep 1.5
args=("${@//HPORT/$hport}"); args=("${args[@]//PORT/$port}")
"${args[@]}" >/dev/null 2>&1
echo "== $name"
bench/prof/dsosplit $pid -- "${args[@]}"
kill $pid; wait $pid 2>/dev/null
