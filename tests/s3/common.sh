# Sourced by tests/s3/run.sh, run_s3s.sh and run_rgw.sh (from the repository's root): what
# a run against any local S3 server shares. Makes target/s3-venv on first use (boto3, which
# tests/s3/check_server.py uses, and moto) and sets $venv.
bash tests/s3/venv.sh
venv=target/s3-venv

# A free TCP port on 127.0.0.1.
free_port() {
    "$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Exports the variables blz and boto3 read to reach a server on 127.0.0.1:PORT, and the
# bucket the tests use.
server_env() {
    export AWS_ENDPOINT_URL="http://127.0.0.1:$1"
    export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
    export AWS_ALLOW_HTTP=true
    export BLZ_S3_TEST_BUCKET=blz-test
}

# Waits, up to TENTHS tenths of a second, until the server at AWS_ENDPOINT_URL answers an
# HTTP request (any status); fails sooner when process PID (if given, not empty) has exited.
wait_up() {
    local pid=$1 tenths=$2
    for _ in $(seq 1 "$tenths"); do
        if "$venv/bin/python" - <<'PY' 2>/dev/null; then return 0; fi
import http.client, os, urllib.parse
u = urllib.parse.urlsplit(os.environ["AWS_ENDPOINT_URL"])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=1)
c.request("GET", "/")
c.getresponse().read()
PY
        if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then return 1; fi
        sleep 0.1
    done
    return 1
}
