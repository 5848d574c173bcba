#!/usr/bin/env bash
# Installs the build into a scratch prefix, then builds the consumer with
# find_package(fleetcron) (core alone, then each component) and again with
# pkg-config, and runs both; then builds it against the build tree.
# Usage: run_install_test.sh BUILD_DIR SOURCE_DIR SCRATCH_DIR
set -euo pipefail
build=$(cd "$1" && pwd) source=$(cd "$2" && pwd) scratch=$(mkdir -p "$3" && cd "$3" && pwd)
rm -rf "$scratch" && mkdir -p "$scratch"
prefix=$scratch/prefix
expected="2026-03-08T03:00:00-04:00"

cmake --install "$build" --prefix "$prefix" >/dev/null
cmake -S "$source/tests/install/consumer" -B "$scratch/cmake-consumer" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$scratch/cmake-consumer" >/dev/null
out=$("$scratch/cmake-consumer/consumer")
echo "find_package consumer: $out"
[[ $out == "$expected "* ]] || { echo "FAIL: expected $expected"; exit 1; }

pcdir=$(dirname "$(find "$prefix" -name fleetcron.pc | head -n 1)")
# A shared build's libraries: pkg-config gives no run path.
export LD_LIBRARY_PATH="$(dirname "$pcdir")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs fleetcron)
c++ "$source/tests/install/consumer/main.cpp" -o "$scratch/pc-consumer" $flags
out=$("$scratch/pc-consumer")
echo "pkg-config consumer: $out"
[[ $out == "$expected "* ]] || { echo "FAIL: expected $expected"; exit 1; }
redis_expected="redis://cron:***@127.0.0.1:6380/2 cron:claim:"
out=$("$scratch/cmake-consumer/redis_consumer")
echo "find_package redis consumer: $out"
[[ $out == "$redis_expected" ]] || { echo "FAIL: expected $redis_expected"; exit 1; }
flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs fleetcron-redis)
c++ "$source/tests/install/consumer/redis_main.cpp" -o "$scratch/pc-redis-consumer" $flags
out=$("$scratch/pc-redis-consumer")
echo "pkg-config redis consumer: $out"
[[ $out == "$redis_expected" ]] || { echo "FAIL: expected $redis_expected"; exit 1; }
nats_expected="job=402026-01-02T15=3A04=3A05Z leader"
out=$("$scratch/cmake-consumer/nats_consumer")
echo "find_package nats consumer: $out"
[[ $out == "$nats_expected" ]] || { echo "FAIL: expected $nats_expected"; exit 1; }
postgres_expected="postgres://cron@127.0.0.1:5433/ops jobs.claims jobs.claims_fence"
out=$("$scratch/cmake-consumer/postgres_consumer")
echo "find_package postgres consumer: $out"
[[ $out == "$postgres_expected" ]] || { echo "FAIL: expected $postgres_expected"; exit 1; }
flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs fleetcron-postgres)
c++ "$source/tests/install/consumer/postgres_main.cpp" -o "$scratch/pc-postgres-consumer" $flags
out=$("$scratch/pc-postgres-consumer")
echo "pkg-config postgres consumer: $out"
[[ $out == "$postgres_expected" ]] || { echo "FAIL: expected $postgres_expected"; exit 1; }
flags=$(PKG_CONFIG_PATH=$pcdir pkg-config --cflags --libs fleetcron-nats)
c++ "$source/tests/install/consumer/nats_main.cpp" -o "$scratch/pc-nats-consumer" $flags
out=$("$scratch/pc-nats-consumer")
echo "pkg-config nats consumer: $out"
[[ $out == "$nats_expected" ]] || { echo "FAIL: expected $nats_expected"; exit 1; }
# The build tree exports the same package (export()): a consumer can use a
# build without installing it.
cmake -S "$source/tests/install/consumer" -B "$scratch/build-tree-consumer" -Dfleetcron_DIR="$build" >/dev/null
cmake --build "$scratch/build-tree-consumer" >/dev/null
out=$("$scratch/build-tree-consumer/consumer")
echo "build-tree consumer: $out"
[[ $out == "$expected "* ]] || { echo "FAIL: expected $expected"; exit 1; }
echo "install test passed"
