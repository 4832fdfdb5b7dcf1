#!/usr/bin/env bash
# One .ci/run on a clean clone of a commit, with two busy loops (one per core) for its whole length
# (issue 28 item 10). Run from the project root: scripts/ci_loaded.sh COMMIT TAG; results in
# /tmp/ci/TAG.log and /tmp/ci/TAG.result. Kills only the two loops it started (by pid).
set -u
commit=$1; tag=$2
mkdir -p /tmp/ci
d=/tmp/ci/$tag
rm -rf "$d"; git clone -q "$(pwd)" "$d" && git -C "$d" checkout -q "$commit"
sh -c 'while :; do :; done' & l1=$!
sh -c 'while :; do :; done' & l2=$!
trap 'kill $l1 $l2 2>/dev/null' EXIT  # the loops never outlive the run, even when it is stopped
echo "loops $l1 $l2" > /tmp/ci/$tag.loops
start=$(date +%s)
( cd "$d" && .ci/run ) > /tmp/ci/$tag.log 2>&1
rc=$?
end=$(date +%s)
echo "commit=$commit rc=$rc wall=$((end-start))s start=$(date -d @$start -u +%H:%M:%S) end=$(date -d @$end -u +%H:%M:%S)" > /tmp/ci/$tag.result
