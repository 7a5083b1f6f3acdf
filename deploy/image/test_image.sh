#!/bin/sh
# Checks the image built by `make image` (run by `make test-image`): serves
# saved_models/half_plus_two as tensorflow/serving's image would, answers REST and gRPC predicts,
# reports healthy, runs as uid 1000 with graphserve as PID 1, exits 0 on `docker stop` (SIGTERM,
# the drain), serves a --model_config_file given as an extra argument, and serves a model from
# S3 (moto's server on the host) with the REST port moved by an extra argument.
#
#     deploy/image/test_image.sh [IMAGE]      # default graphserve:latest; run from the repo root
set -eu
image=${1:-graphserve:latest}
docker=${DOCKER:-docker}
py=${PYTHON:-.venv/bin/python}
model_dir=$(pwd)/saved_models/half_plus_two
cid=
conf_dir=
moto_pid=

fail() { echo "test-image: FAIL: $*" >&2; [ -z "$cid" ] || $docker logs "$cid" 2>&1 | tail -n 30 >&2; exit 1; }
cleanup() {
    [ -z "$cid" ] || $docker rm -f "$cid" >/dev/null 2>&1 || true
    [ -z "$conf_dir" ] || rm -rf "$conf_dir"
    [ -z "$moto_pid" ] || kill "$moto_pid" 2>/dev/null || true
}
trap cleanup EXIT

# The host port published for the container's PORT.
host_port() { $docker port "$cid" "$1/tcp" | head -n 1 | sed 's/.*://'; }

# GET a URL: the body on stdout, exit status 1 unless 200.
get() {
    "$py" -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1" 2>/dev/null
}

wait_ready() {
    rest=${1:-$rest}
    i=0
    until get "http://127.0.0.1:$rest/readyz" >/dev/null; do
        i=$((i + 1))
        [ "$i" -lt 120 ] || fail "/readyz did not answer 200 within 60 s"
        [ "$($docker inspect -f '{{.State.Running}}' "$cid")" = true ] || fail "the container exited"
        sleep 0.5
    done
}

# `docker stop` sends SIGTERM; the drain must end with exit status 0.
stop_and_check() {
    $docker stop --time 30 "$cid" >/dev/null
    code=$($docker inspect -f '{{.State.ExitCode}}' "$cid")
    [ "$code" = 0 ] || fail "exit status $code after docker stop (SIGTERM), expected 0"
    echo "test-image: docker stop (SIGTERM): exit status 0"
    $docker rm "$cid" >/dev/null
    cid=
}

start() {
    cid=$($docker run -d -p 127.0.0.1::8500 -p 127.0.0.1::8501 --health-interval=1s "$@")
    grpc=$(host_port 8500)
    rest=$(host_port 8501)
}

# -- the single model of MODEL_NAME, as tensorflow/serving's image --------------------------------
start -v "$model_dir:/models/half_plus_two:ro" -e MODEL_NAME=half_plus_two "$image"
wait_ready
echo "test-image: ready (REST on 127.0.0.1:$rest, gRPC on 127.0.0.1:$grpc)"

uid=$($docker exec "$cid" id -u)
[ "$uid" = 1000 ] || fail "runs as uid $uid, expected 1000"
pid1=$($docker exec "$cid" cat /proc/1/cmdline | tr '\0' ' ')
case "$pid1" in
    *bin/graphserve\ --port=8500\ --rest_api_port=8501\ --model_name=half_plus_two\ --model_base_path=/models/half_plus_two*) ;;
    *) fail "PID 1 is '$pid1', expected graphserve" ;;
esac
echo "test-image: uid 1000; PID 1: $pid1"

"$py" - "http://127.0.0.1:$rest/v1/models/half_plus_two:predict" <<'PYEOF' || fail "REST predict"
import json, sys, urllib.request
request = urllib.request.Request(sys.argv[1], data=b'{"instances": [1.0, 2.0]}')
answer = json.load(urllib.request.urlopen(request, timeout=10))
assert answer == {"predictions": [2.5, 3.0]}, answer
print("test-image: REST predict:", json.dumps(answer))
PYEOF

out=$("$py" -m serving.cli predict --server "127.0.0.1:$grpc" --model half_plus_two \
    --input 'x=[[1.0], [2.0]]') || fail "gRPC predict"
"$py" - "$out" <<'PYEOF' || fail "gRPC predict answered $out"
import json, sys
answer = json.loads(sys.argv[1])
assert answer == {"y": [[2.5], [3.0]]}, answer
print("test-image: gRPC predict:", json.dumps(answer))
PYEOF

i=0
until [ "$($docker inspect -f '{{.State.Health.Status}}' "$cid")" = healthy ]; do
    i=$((i + 1))
    [ "$i" -lt 60 ] || fail "HEALTHCHECK: $($docker inspect -f '{{.State.Health.Status}}' "$cid")"
    sleep 0.5
done
echo "test-image: HEALTHCHECK: healthy"
stop_and_check

# -- --model_config_file as an extra argument: MODEL_NAME's default (/models/model, absent) is
# ignored, as in tensorflow/serving --------------------------------------------------------------
conf_dir=$(mktemp -d)
chmod 755 "$conf_dir"
cat > "$conf_dir/models.config" <<'CONF'
model_config_list {
  config { name: "hp2" base_path: "/models/half_plus_two" model_platform: "tensorflow" }
}
CONF
chmod 644 "$conf_dir/models.config"
start -v "$model_dir:/models/half_plus_two:ro" -v "$conf_dir:/config:ro" "$image" \
    --model_config_file=/config/models.config
wait_ready
get "http://127.0.0.1:$rest/v1/models/hp2" | grep -q AVAILABLE || fail "hp2 is not AVAILABLE"
! get "http://127.0.0.1:$rest/v1/models/model" >/dev/null || fail "MODEL_NAME's model is served too"
echo "test-image: --model_config_file: its model AVAILABLE, MODEL_NAME's default not served"
stop_and_check

# -- a model on S3, as tensorflow/serving reads it: MODEL_BASE_PATH=s3://..., S3_ENDPOINT;
# the host's network (moto listens on the host's loopback), so the ports move: the REST port
# given as an extra argument is the one the HEALTHCHECK asks --------------------------------------
free() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
s3_port=$(free)
rest=$(free)
grpc=$(free)
"$py" -m moto.server -H 127.0.0.1 -p "$s3_port" >/dev/null 2>&1 &
moto_pid=$!
"$py" - "$s3_port" "$model_dir/00000123" <<'PYEOF' || fail "uploading to moto"
import pathlib, sys, time, boto3
port, source = sys.argv[1], pathlib.Path(sys.argv[2])
s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                  aws_access_key_id="test", aws_secret_access_key="test")
for _ in range(100):  # until moto listens
    try:
        s3.create_bucket(Bucket="models")
        break
    except Exception:
        time.sleep(0.1)
for path in sorted(p for p in source.rglob("*") if p.is_file()):
    s3.put_object(Bucket="models", Key=f"hp2/1/{path.relative_to(source)}", Body=path.read_bytes())
PYEOF
cid=$($docker run -d --network=host --health-interval=1s -e MODEL_NAME=hp2 \
    -e MODEL_BASE_PATH=s3://models -e S3_ENDPOINT="127.0.0.1:$s3_port" -e S3_USE_HTTPS=0 \
    -e AWS_REGION=us-east-1 -e AWS_ACCESS_KEY_ID=test -e AWS_SECRET_ACCESS_KEY=test \
    "$image" --rest_api_port="$rest" --port="$grpc")
wait_ready "$rest"
"$py" - "http://127.0.0.1:$rest/v1/models/hp2:predict" <<'PYEOF' || fail "REST predict from S3"
import json, sys, urllib.request
request = urllib.request.Request(sys.argv[1], data=b'{"instances": [1.0]}')
answer = json.load(urllib.request.urlopen(request, timeout=10))
assert answer == {"predictions": [2.5]}, answer
print("test-image: model from s3://models/hp2: REST predict:", json.dumps(answer))
PYEOF
i=0
until [ "$($docker inspect -f '{{.State.Health.Status}}' "$cid")" = healthy ]; do
    i=$((i + 1))
    [ "$i" -lt 60 ] || fail "HEALTHCHECK on --rest_api_port=$rest: $($docker inspect -f '{{.State.Health.Status}}' "$cid")"
    sleep 0.5
done
echo "test-image: HEALTHCHECK on --rest_api_port=$rest: healthy"
stop_and_check
echo "test-image: OK"
