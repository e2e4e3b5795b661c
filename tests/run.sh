#!/usr/bin/env bash
# Installs everything the tests need and runs the whole suite: Rust checks and unit tests,
# Python lint, then pytest (unit + integration against real broker processes and real clients).
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1

# kcat for the CLI tests; ZooKeeper (with its Java runtime) for the cluster-mode tests. Not
# zookeeperd: that one is a system service.
apt_packages=()
command -v kcat >/dev/null 2>&1 || apt_packages+=(kcat)
[ -f /usr/share/java/zookeeper.jar ] || apt_packages+=(zookeeper)
# Maven resolves Apache Kafka's jars (bench/kafka/resolve.sh); the machine kind has it, a bare
# Debian may not. The Go peers (tests/go) need Go 1.26, which this machine kind provides.
command -v mvn >/dev/null 2>&1 || apt_packages+=(maven)
if [ "${#apt_packages[@]}" -gt 0 ]; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null
fi
python3 -m pip install -q -e '.[test]'
bash bench/kafka/resolve.sh

cargo fmt --check
cargo clippy --all-targets --quiet -- -D warnings
cargo test --quiet
ruff check pybroker tests bench
mypy  # pybroker/, at the level pyproject.toml's [tool.mypy] states

# Test modules run in parallel (pytest-xdist: 3 workers on 2 cores; a module's tests in one worker,
# one after another, so that its module-scoped brokers, clusters, ZooKeeper and Kafka start once);
# the 20 slowest tests are printed at the end.
set +e
python3 -m pytest -n "${PYTEST_WORKERS:-3}" --dist loadfile --durations=20 "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
  echo "pytest collected no tests: failing" >&2
  exit 1
fi
exit "$status"
